/* nrt_program_compile: the steps of a program. Runs of pointwise nodes over
 * one shape become fused groups, decided on the symbolic IR so that the
 * decision holds for every binding; temporaries that only a group's own
 * members touch live in its registers (elided); the other temporaries get
 * lifetimes, in steps, for the memory planner. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fuse/codegen.h"
#include "fuse/fuse_group.h"
#include "graph/program.h"

int rt_graph_same_expr(const struct nrt_graph *g, uint32_t a, uint32_t b) {
  return a == b || rt_expr_equal(&g->exprs[a], &g->exprs[b]);
}

static int same_shape(const struct nrt_graph *g, const rt_goperand *a, const rt_goperand *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (!rt_graph_same_expr(g, a->shape_expr[d], b->shape_expr[d])) return 0;
  return 1;
}

static int same_view(const struct nrt_graph *g, const rt_goperand *a, const rt_goperand *b) {
  if (a->buffer != b->buffer || a->dtype != b->dtype || !same_shape(g, a, b) ||
      !rt_graph_same_expr(g, a->offset_expr, b->offset_expr))
    return 0;
  for (int d = 0; d < a->ndim; d++)
    if (!rt_graph_same_expr(g, a->stride_expr[d], b->stride_expr[d])) return 0;
  return 1;
}

static int is_constant(const struct nrt_graph *g, uint32_t id, int64_t value) {
  const rt_expr *e = &g->exprs[id];
  return e->n == 1 && e->terms[0].op == NRT_EXPR_CONST && e->terms[0].arg == value;
}

/* Ops the adaptive planner runs alone (a zero divisor fails them: the
 * failure must be that op's), and those the VM may refuse by shape
 * (16-bit rounding division, see group.c). */
static int runs_alone(const rt_gnode *n) {
  int division = n->code == NRT_OP_DIV_TRUNC || n->code == NRT_OP_DIV_FLOOR;
  int integral = !nrt_dtype_is_floating(n->compute_dtype);
  if ((division || n->code == NRT_OP_REMAINDER || n->code == NRT_OP_FMOD) && integral) return 1;
  return division && (n->compute_dtype == NRT_FLOAT16 || n->compute_dtype == NRT_BFLOAT16);
}

int rt_graph_node_fusible(const struct nrt_graph *g, const rt_gnode *n) {
  int32_t writes = rt_gnode_writes(n);
  if (!rt_fuse_is_fusible(n->code) || writes < 1 || runs_alone(n)) return 0;
  const rt_goperand *y0 = rt_gnode_operand(g, n, 0);
  for (int k = 0; k < n->num_operands; k++) {
    const rt_goperand *o = rt_gnode_operand(g, n, k);
    if ((!o->is_immediate && o->buffer < 0) || !same_shape(g, o, y0)) return 0;
  }
  for (int k = 0; k < writes; k++) {
    const rt_goperand *y = rt_gnode_operand(g, n, k);
    /* An output broadcast along a dim: its tiles would race on one element. */
    for (int d = 0; d < y->ndim; d++)
      if (is_constant(g, y->stride_expr[d], 0) && !is_constant(g, y->shape_expr[d], 1)) return 0;
    for (int j = 0; j < n->num_operands; j++) {
      const rt_goperand *o = rt_gnode_operand(g, n, j);
      if (j == k || o->buffer != y->buffer) continue;
      /* Two outputs in one buffer, or an in-place input of another layout. */
      if (j < writes || !same_view(g, o, y)) return 0;
    }
  }
  return 1;
}

/* A group being grown: inputs and written views are graph operand ids. */
typedef struct growing {
  uint32_t start, count;
  rt_fused f;
  int32_t num_written;
  uint32_t written[NRT_FUSE_MAX_REGISTERS]; /* the view each buffer was written through */
  int32_t written_reg[NRT_FUSE_MAX_REGISTERS];
  nrt_fuse_inst insts[NRT_FUSE_MAX_INSTS];
} growing;

typedef struct compiler {
  const struct nrt_graph *g;
  uint32_t *first_touch, *last_touch; /* per buffer: nodes (UINT32_MAX: none) */
} compiler;

/* A member's result goes to memory unless its buffer is a temporary that
 * no node outside the group (nodes start..end) touches. */
static int stored(const compiler *c, int32_t b, uint32_t start, uint32_t end) {
  return c->g->buffers[b].kind != NRT_BUFFER_TEMP || c->first_touch[b] < start ||
         c->last_touch[b] > end;
}

/* Adds node i to the group or returns 0, leaving the group as it was. */
static int add_node(const compiler *c, growing *q, uint32_t i) {
  const struct nrt_graph *g = c->g;
  const rt_gnode *n = &g->nodes[i];
  if (!rt_graph_node_fusible(g, n)) return 0;
  if (q->count && !same_shape(g, rt_gnode_operand(g, n, 0), &g->operands[q->f.shape_operand])) return 0;
  int32_t writes = rt_gnode_writes(n);
  if (q->count == NRT_FUSE_MAX_INSTS || q->f.num_registers + writes > NRT_FUSE_MAX_REGISTERS)
    return 0;
  nrt_fuse_inst in;
  memset(&in, 0, sizeof in);
  in.code = n->code;
  in.compute_dtype = n->compute_dtype;
  in.num_operands = n->num_operands;
  in.num_outputs = writes;
  in.num_scalars = n->num_scalars;
  memcpy(in.scalars, n->scalars, sizeof in.scalars);
  int32_t inputs = q->f.num_inputs;
  for (int k = writes; k < n->num_operands; k++) {
    uint32_t id = n->first_operand + (uint32_t)k;
    const rt_goperand *o = &g->operands[id];
    nrt_fuse_ref *ref = &in.operands[k];
    if (o->is_immediate) {
      *ref = (nrt_fuse_ref){.kind = NRT_FUSE_IMMEDIATE, .dtype = o->dtype, .value = o->immediate};
      continue;
    }
    int w = 0;
    while (w < q->num_written && g->operands[q->written[w]].buffer != o->buffer) w++;
    if (w < q->num_written) {
      /* The register holds exactly that view; another view of the buffer
       * would read memory the group has not stored yet. */
      if (!same_view(g, &g->operands[q->written[w]], o)) return 0;
      *ref = (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = q->written_reg[w]};
      continue;
    }
    int x = 0;
    while (x < inputs && !same_view(g, &g->operands[q->f.input_operand[x]], o)) x++;
    if (x == inputs) {
      if (inputs == NRT_FUSE_MAX_INPUTS) return 0;
      q->f.input_operand[inputs++] = id;
    }
    *ref = (nrt_fuse_ref){.kind = NRT_FUSE_INPUT, .index = x};
  }
  /* No write after a read or a write by an earlier member. */
  for (int k = 0; k < writes; k++) {
    int32_t b = rt_gnode_operand(g, n, k)->buffer;
    for (int w = 0; w < q->num_written; w++)
      if (g->operands[q->written[w]].buffer == b) return 0;
    for (int x = 0; x < q->f.num_inputs; x++)
      if (g->operands[q->f.input_operand[x]].buffer == b) return 0;
  }
  int32_t stores = 0;
  for (int w = 0; w < q->num_written; w++)
    stores += stored(c, g->operands[q->written[w]].buffer, q->start, i);
  for (int k = 0; k < writes; k++) stores += stored(c, rt_gnode_operand(g, n, k)->buffer, q->start, i);
  if (stores > NRT_FUSE_MAX_OUTPUTS) return 0;

  q->f.num_inputs = inputs;
  for (int k = 0; k < writes; k++) {
    int32_t r = q->f.num_registers++;
    q->f.registers[r] = rt_gnode_operand(g, n, k)->dtype;
    q->written[q->num_written] = n->first_operand + (uint32_t)k;
    q->written_reg[q->num_written++] = r;
    in.operands[k] = (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = r};
  }
  if (!q->count) q->f.shape_operand = n->first_operand;
  q->insts[q->count++] = in;
  return 1;
}

static void name_group(rt_fused *f, const char *what) {
  size_t cap = sizeof f->name;
  size_t at = (size_t)snprintf(f->name, cap, "%s (%d ops:", what, f->num_insts);
  for (int i = 0; i < f->num_insts && at < cap; i++)
    at += (size_t)snprintf(f->name + at, cap - at, "%s %s", i ? "," : "", nrt_op_name(f->insts[i].code));
  if (at < cap) snprintf(f->name + at, cap - at, ")");
  else memcpy(f->name + cap - 5, "...)", 5);
}

/* Turns a grown group into a step's rt_fused. */
static rt_fused *finish_group(const compiler *c, growing *q, struct nrt_program *p, const char *what) {
  const struct nrt_graph *g = c->g;
  rt_fused *f = malloc(sizeof *f);
  nrt_fuse_inst *insts = malloc((size_t)q->count * sizeof *insts);
  if (!f || !insts) {
    free(f);
    free(insts);
    return NULL;
  }
  *f = q->f;
  memcpy(insts, q->insts, (size_t)q->count * sizeof *insts);
  f->insts = insts;
  f->num_insts = (int32_t)q->count;
  f->num_outputs = 0;
  uint32_t end = q->start + q->count - 1;
  for (int w = 0; w < q->num_written; w++) {
    int32_t b = g->operands[q->written[w]].buffer;
    if (stored(c, b, q->start, end)) {
      f->output_operand[f->num_outputs] = q->written[w];
      f->output_registers[f->num_outputs++] = q->written_reg[w];
    } else if (!p->elided[b]) {
      p->elided[b] = 1;
      p->num_elided++;
    }
  }
  name_group(f, what);
  /* Without it (out of memory) each run captures its loops anew. */
  f->replays = rt_fuse_replays_create(f->num_insts);
  return f;
}

/* Whether group q, the nodes right after GEMM node gi, can run as its
 * epilogue: it reads the product, and writes none of the GEMM's inputs
 * (the product still reads them while earlier blocks' epilogues run).
 * Whether a binding's layouts map the group onto the product's blocks is
 * decided at run time (exec.c). */
static int epilogue_fits(const compiler *c, uint32_t gi, const growing *q) {
  const struct nrt_graph *g = c->g;
  const rt_gnode *m = &g->nodes[gi];
  if (m->code != NRT_OP_GEMM || m->num_outputs != 1) return 0;
  int32_t product = rt_gnode_operand(g, m, 0)->buffer;
  int reads = 0;
  for (int x = 0; x < q->f.num_inputs; x++) reads |= g->operands[q->f.input_operand[x]].buffer == product;
  if (product < 0 || !reads) return 0;
  for (int w = 0; w < q->num_written; w++)
    for (int k = 1; k < m->num_operands; k++)
      if (g->operands[q->written[w]].buffer == rt_gnode_operand(g, m, k)->buffer) return 0;
  return 1;
}

/* Whether step st may run after group q although it comes before it: it
 * touches no buffer the group writes and writes none the group reads. */
static int independent(const compiler *c, const rt_step *st, const growing *q) {
  const struct nrt_graph *g = c->g;
  for (uint32_t k = 0; k < st->num_nodes; k++) {
    const rt_gnode *n = &g->nodes[rt_step_node(st, k)];
    int32_t writes = rt_gnode_writes(n);
    for (int j = 0; j < n->num_operands; j++) {
      int32_t b = rt_gnode_operand(g, n, j)->buffer;
      if (b < 0) continue;
      for (int w = 0; w < q->num_written; w++)
        if (g->operands[q->written[w]].buffer == b) return 0;
      for (int x = 0; j < writes && x < q->f.num_inputs; x++)
        if (g->operands[q->f.input_operand[x]].buffer == b) return 0;
    }
  }
  return 1;
}

/* The GEMM step that group q can be the epilogue of: among the last
 * EPILOGUE_REACH steps, a GEMM without one whose product q reads, with
 * only steps between them that may run after q. NULL if none. */
#define EPILOGUE_REACH 6
static rt_step *epilogue_host(const compiler *c, struct nrt_program *p, const growing *q) {
  for (int32_t j = p->num_steps - 1; j >= 0 && j >= p->num_steps - EPILOGUE_REACH; j--) {
    rt_step *st = &p->steps[j];
    if (st->kind == RT_STEP_KERNEL && epilogue_fits(c, st->first_node, q)) return st;
    if (!independent(c, st, q)) return NULL;
  }
  return NULL;
}

static void free_step(rt_step *st) {
  if (st->fused) {
    free(st->fused->insts);
    rt_gen_cell_release(st->fused->gen);
    rt_fuse_replays_destroy(st->fused->replays);
    free(st->fused);
  }
  for (int32_t m = 0; m < st->num_members; m++) free_step(&st->members[m]);
  free(st->members);
}

static void free_steps(struct nrt_program *p) {
  for (int32_t s = 0; s < p->num_steps; s++) free_step(&p->steps[s]);
  free(p->steps);
}

void rt_program_retain(struct nrt_program *p) { atomic_fetch_add(&p->refs, 1); }

void rt_program_release(struct nrt_program *p) {
  if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
  for (int i = 0; i < RT_PLAN_CACHE; i++) rt_plan_release(p->cache[i]);
  pthread_mutex_destroy(&p->lock);
  free_steps(p);
  free(p->elided);
  free(p->first_step);
  free(p->last_step);
  free(p->share);
  for (uint32_t i = 0; p->nc && i < p->graph->num_nodes; i++)
    if (p->nc[i]) nrt_nc_program_destroy(p->nc[i]);
  free(p->nc);
  rt_graph_release(p->graph);
  free(p);
}

void nrt_program_destroy(nrt_program_t p) { rt_program_release(p); }

static nrt_status build_steps(compiler *c, struct nrt_program *p, int fuse) {
  const struct nrt_graph *g = c->g;
  growing *q = malloc(sizeof *q);
  if (!q) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
  uint32_t i = 0;
  while (i < g->num_nodes) {
    rt_step *st = &p->steps[p->num_steps];
    memset(st, 0, sizeof *st);
    st->first_node = i;
    st->num_nodes = 1;
    if (fuse) {
      memset(&q->f, 0, sizeof q->f);
      q->start = i;
      q->count = 0;
      q->num_written = 0;
      while (i + q->count < g->num_nodes && add_node(c, q, i + q->count)) continue;
      rt_step *host = q->count ? epilogue_host(c, p, q) : NULL;
      if (host) {
        /* The GEMM's step takes the group as its epilogue. */
        if (!(host->fused = finish_group(c, q, p, "gemm epilogue"))) {
          free(q);
          return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
        }
        host->kind = RT_STEP_GEMM_EPILOGUE;
        host->group_first = i;
        host->group_count = q->count;
        host->num_nodes = 1 + q->count;
        p->num_fused_groups++;
        p->num_fused_nodes += (int32_t)host->num_nodes;
        p->num_gemm_epilogues++;
        i += q->count;
        continue;
      }
      if (q->count >= 2) {
        if (!(st->fused = finish_group(c, q, p, "fused group"))) {
          free(q);
          return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
        }
        st->kind = RT_STEP_FUSED;
        st->num_nodes = q->count;
        p->num_fused_groups++;
        p->num_fused_nodes += (int32_t)q->count;
      }
    }
    p->num_steps++; /* counted at once: free_steps frees its group on failure */
    i += st->num_nodes;
  }
  free(q);
  return NRT_SUCCESS;
}

/* The generated code of each fused group's tape (fuse/codegen.h). By
 * default a kernel that is not in this process or the disk cache is
 * compiled in the background (codegen_async.c) and the group runs its tape
 * until it is ready; with TORCHNEURON_CODEGEN=sync the kernels are made
 * now, the compilers of a program's groups side by side (one per core). A
 * group without a tape, or whose code cannot be had, runs as before. */
typedef struct codegen_work {
  const struct nrt_graph *g;
  rt_fused **groups;
  int32_t count;
  int background;
  atomic_int next;
} codegen_work;

static int collect_fused(rt_step *steps, int32_t num_steps, rt_fused **out, int32_t at) {
  for (int32_t s = 0; s < num_steps; s++) {
    if (steps[s].kind == RT_STEP_ROWS) at = collect_fused(steps[s].members, steps[s].num_members, out, at);
    if (steps[s].fused) {
      if (out) out[at] = steps[s].fused;
      at++;
    }
  }
  return at;
}

static void *codegen_worker(void *arg) {
  codegen_work *w = arg;
  struct nrt_fuse_group *tmp = malloc(sizeof *tmp);
  if (!tmp) return NULL;
  for (int32_t i; (i = atomic_fetch_add(&w->next, 1)) < w->count;) {
    rt_fused *f = w->groups[i];
    nrt_dtype dtypes[NRT_FUSE_MAX_INPUTS];
    for (int k = 0; k < f->num_inputs; k++) dtypes[k] = w->g->operands[f->input_operand[k]].dtype;
    rt_fuse_tape_for(tmp, f->num_inputs, dtypes, f->num_registers, f->registers, f->num_insts, f->insts,
                     f->num_outputs, f->output_registers);
    memcpy(tmp->name, f->name, sizeof tmp->name);
    if (!tmp->tape.num_ops || tmp->tape.has16) continue; /* a 16-bit tape has no generated code */
    if (!(f->gen = rt_gen_cell_new())) continue;
    if (w->background)
      rt_fuse_codegen_request(tmp, f->gen);
    else
      rt_gen_cell_set(f->gen, rt_fuse_codegen_get(tmp));
  }
  free(tmp);
  return NULL;
}

static void generate_code(struct nrt_program *p) {
  int mode = rt_fuse_codegen_mode();
  if (!mode) return;
  int32_t n = collect_fused(p->steps, p->num_steps, NULL, 0);
  if (n == 0) return;
  codegen_work w = {.g = p->graph, .groups = malloc((size_t)n * sizeof(rt_fused *)), .count = n,
                    .background = mode == 1};
  if (!w.groups) return;
  collect_fused(p->steps, p->num_steps, w.groups, 0);
  atomic_init(&w.next, 0);
  if (w.background) { /* only cache look-ups here: no helpers */
    codegen_worker(&w);
    free(w.groups);
    return;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int helpers = (int)(cores < 1 ? 0 : cores > 8 ? 7 : cores - 1);
  if (helpers > n - 1) helpers = n - 1;
  pthread_t threads[8];
  int started = 0;
  for (; started < helpers; started++)
    if (pthread_create(&threads[started], NULL, codegen_worker, &w)) break;
  codegen_worker(&w);
  for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
  free(w.groups);
}

/* Checks each NKI node's program against the NeuronCore's rules (for
 * device 0's generation) and keeps it for the launches. */
static nrt_status create_nki_programs(struct nrt_program *p) {
  const struct nrt_graph *g = p->graph;
  nrt_nc_geometry geometry;
  nrt_device_properties props;
  int have_device = 0;
  for (uint32_t i = 0; i < g->num_nodes; i++) {
    const rt_gnode *n = &g->nodes[i];
    if (n->code != (nrt_op_code)NRT_GRAPH_NKI) continue;
    nrt_status s;
    if (!have_device) {
      if ((s = nrt_nc_geometry_of_device(0, &geometry)) || (s = nrt_device_get_properties(0, &props)))
        return s;
      have_device = 1;
    }
    const rt_gblob *insts = rt_gnode_blob(g, n, 0), *tensors = rt_gnode_blob(g, n, 1);
    nrt_nc_diagnostic diag;
    s = nrt_nc_program_create((const nrt_nc_inst *)(const void *)insts->data,
                              (int32_t)(insts->len / sizeof(nrt_nc_inst)),
                              (const nrt_nc_tensor *)(const void *)tensors->data,
                              (int32_t)(tensors->len / sizeof(nrt_nc_tensor)), &geometry, &props,
                              &p->nc[i], &diag);
    if (s) {
      char why[1024];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      return rt_fail(s, "nrt_program_compile: node %u (nki_kernel): %s (rule %s, instruction %d)", i,
                     why, diag.rule, diag.inst);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_program_compile(nrt_graph_t g, const nrt_program_options *options, nrt_program_t *out) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!g || !out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_compile: NULL argument");
  *out = NULL;
  int fuse = options ? options->fuse != 0 : 1;
  struct nrt_program *p = calloc(1, sizeof *p);
  compiler c = {.g = g};
  size_t nb = g->num_buffers ? g->num_buffers : 1;
  if (!p) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
  if (pthread_mutex_init(&p->lock, NULL)) {
    free(p);
    return rt_fail(NRT_ERROR_SYSTEM, "nrt_program_compile: pthread_mutex_init failed");
  }
  atomic_init(&p->refs, 1);
  rt_graph_retain(g);
  p->graph = g;
  snprintf(p->task_name, sizeof p->task_name, "compiled graph %.240s", g->name);
  p->steps = malloc((g->num_nodes ? g->num_nodes : 1) * sizeof *p->steps);
  p->elided = calloc(nb, 1);
  p->first_step = malloc(nb * sizeof(int32_t));
  p->last_step = malloc(nb * sizeof(int32_t));
  p->share = malloc(nb * sizeof(int32_t));
  p->nc = calloc(g->num_nodes ? g->num_nodes : 1, sizeof *p->nc);
  c.first_touch = malloc(nb * sizeof(uint32_t));
  c.last_touch = malloc(nb * sizeof(uint32_t));
  int32_t *node_step = malloc((g->num_nodes ? g->num_nodes : 1) * sizeof(int32_t));
  if (!p->steps || !p->elided || !p->first_step || !p->last_step || !p->share || !p->nc || !c.first_touch ||
      !c.last_touch || !node_step) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
    goto done;
  }
  for (uint32_t b = 0; b < g->num_buffers; b++) {
    c.first_touch[b] = c.last_touch[b] = UINT32_MAX;
    p->first_step[b] = p->last_step[b] = -1;
    p->share[b] = -1;
  }
  for (uint32_t i = 0; i < g->num_nodes; i++)
    for (int k = 0; k < g->nodes[i].num_operands; k++) {
      int32_t b = rt_gnode_operand(g, &g->nodes[i], k)->buffer;
      if (b < 0) continue;
      if (c.first_touch[b] == UINT32_MAX) c.first_touch[b] = i;
      c.last_touch[b] = i;
    }
  if ((s = build_steps(&c, p, fuse)) || (fuse && (s = rt_program_plan_rows(p))) ||
      (s = create_nki_programs(p)))
    goto done;
  generate_code(p);
  for (int32_t st = 0; st < p->num_steps; st++)
    for (uint32_t k = 0; k < p->steps[st].num_nodes; k++) node_step[rt_step_node(&p->steps[st], k)] = st;
  /* Lifetimes: the steps from the first to the last that touch the buffer
   * (steps run in order, one at a time; an epilogue runs nodes earlier
   * than their place in the graph). */
  for (uint32_t i = 0; i < g->num_nodes; i++)
    for (int k = 0; k < g->nodes[i].num_operands; k++) {
      int32_t b = rt_gnode_operand(g, &g->nodes[i], k)->buffer;
      if (b < 0 || g->buffers[b].kind != NRT_BUFFER_TEMP || p->elided[b]) continue;
      int32_t st = node_step[i];
      if (p->first_step[b] < 0 || st < p->first_step[b]) p->first_step[b] = st;
      if (st > p->last_step[b]) p->last_step[b] = st;
    }
  rt_program_plan_inplace(p);
done:
  free(c.first_touch);
  free(c.last_touch);
  free(node_step);
  if (s) {
    rt_program_release(p);
    return s;
  }
  *out = p;
  return NRT_SUCCESS;
}
