/* nrt_program_launch: one host task per launch that runs the program's
 * steps on the stream's worker. The calling thread only copies pointers
 * and takes a reference to the binding's (cached) plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "fuse/fuse_group.h"
#include "graph/program.h"
#include "ops/gemm/gemm.h"

/* Each worker thread's group, refilled for every fused step of a checked
 * plan (a group is large; building and naming one per launch would cost
 * more than a small step's work). */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;
static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, free) == 0; }

static struct nrt_fuse_group *scratch_group(void) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_ok) return NULL;
  struct nrt_fuse_group *g = pthread_getspecific(scratch_key);
  if (!g && (g = malloc(sizeof *g)) && pthread_setspecific(scratch_key, g)) {
    free(g);
    g = NULL;
  }
  return g;
}

typedef struct task {
  struct nrt_program *program;
  rt_plan *plan;
  char *arena;
  void **inputs, **outputs; /* into ptrs */
  void *ptrs[];
} task;

static char *buffer_base(const task *t, int32_t b) {
  const rt_gbuffer *x = &t->program->graph->buffers[b];
  if (x->kind == NRT_BUFFER_INPUT) return t->inputs[x->slot];
  if (x->kind == NRT_BUFFER_OUTPUT) return t->outputs[x->slot];
  return t->plan->offset[b] == SIZE_MAX ? NULL : t->arena + t->plan->offset[b];
}

/* The operand under the plan: a device view, an immediate (op.h) or none. */
static int64_t make_view(const task *t, const rt_goperand *o, nrt_tensor_view *v) {
  const rt_plan *plan = t->plan;
  memset(v, 0, sizeof *v);
  v->dtype = o->dtype;
  v->ndim = o->ndim;
  int64_t numel = 1;
  for (int d = 0; d < o->ndim; d++) {
    v->shape[d] = rt_plan_value(plan, o->shape_expr[d]);
    v->strides[d] = rt_plan_value(plan, o->stride_expr[d]);
    numel *= v->shape[d];
  }
  /* Empty views point nowhere, as eager's absent and empty tensors do. */
  if (o->buffer >= 0 && numel > 0) {
    uintptr_t base = (uintptr_t)buffer_base(t, o->buffer);
    v->data = (void *)(base + (uintptr_t)rt_plan_value(plan, o->offset_expr) * nrt_dtype_size(o->dtype));
  }
  return numel;
}

/* n's op under the plan; returns 0 when every output is empty (eager then
 * skips the op). */
static int make_op(const task *t, const rt_gnode *n, nrt_op *out) {
  const struct nrt_graph *g = t->program->graph;
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = n->code;
  op.compute_dtype = n->compute_dtype;
  op.num_operands = n->num_operands;
  op.num_outputs = n->num_outputs;
  op.num_scalars = n->num_scalars;
  op.immediate_mask = n->immediate_mask;
  memcpy(op.scalars, n->scalars, sizeof op.scalars);
  /* Eager skips ops whose outputs are all empty (operand 0 for ops that
   * count no outputs, such as copies). */
  int outputs = n->num_outputs ? n->num_outputs : 1, empty = n->num_operands > 0;
  for (int k = 0; k < n->num_operands; k++) {
    const rt_goperand *o = rt_gnode_operand(g, n, k);
    int64_t numel = make_view(t, o, &op.operands[k]);
    if (o->is_immediate) op.immediates[k] = o->immediate;
    if (k < outputs && numel != 0) empty = 0;
  }
  *out = op;
  return !empty;
}

static nrt_status run_kernel(const task *t, const rt_gnode *n) {
  nrt_op op;
  return make_op(t, n, &op) ? nrt_op_execute(&op) : NRT_SUCCESS;
}

/* An NKI node: its program on this thread, HBM tensors bound to the views. */
static nrt_status run_nki(const task *t, uint32_t node) {
  const struct nrt_graph *g = t->program->graph;
  const rt_gnode *n = &g->nodes[node];
  uint32_t num_tensors = rt_gnode_blob(g, n, 1)->len / (uint32_t)sizeof(nrt_nc_tensor);
  void *stack[64], **hbm = num_tensors <= 64 ? stack : calloc(num_tensors, sizeof *hbm);
  if (!hbm) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory running an NKI kernel");
  memset(hbm, 0, (num_tensors <= 64 ? 64 : num_tensors) * sizeof *hbm);
  for (int k = 0; k < n->num_operands; k++) {
    nrt_tensor_view v;
    int32_t tensor;
    memcpy(&tensor, rt_gnode_blob(g, n, 2)->data + 4 * k, 4);
    make_view(t, rt_gnode_operand(g, n, k), &v);
    hbm[tensor] = v.data ? nrt_device_to_host(v.data) : NULL;
  }
  nrt_status s = nrt_nc_program_run(t->program->nc[node], hbm);
  if (hbm != stack) free(hbm);
  return s;
}

/* A fused step's group description under the plan (views in d's arrays);
 * returns 0 when there is nothing to compute or nothing anyone reads. */
typedef struct group_views {
  nrt_fuse_group_desc d;
  nrt_tensor_view inputs[NRT_FUSE_MAX_INPUTS], outputs[NRT_FUSE_MAX_OUTPUTS];
} group_views;

static int describe_group(const task *t, const rt_fused *f, group_views *v) {
  const struct nrt_graph *g = t->program->graph;
  nrt_tensor_view shape;
  if (make_view(t, &g->operands[f->shape_operand], &shape) == 0 || f->num_outputs == 0) return 0;
  nrt_fuse_group_desc *d = &v->d;
  memset(d, 0, sizeof *d);
  d->ndim = shape.ndim;
  memcpy(d->shape, shape.shape, sizeof d->shape);
  for (int i = 0; i < f->num_inputs; i++) make_view(t, &g->operands[f->input_operand[i]], &v->inputs[i]);
  for (int j = 0; j < f->num_outputs; j++) make_view(t, &g->operands[f->output_operand[j]], &v->outputs[j]);
  d->num_inputs = f->num_inputs;
  d->inputs = v->inputs;
  d->num_registers = f->num_registers;
  d->registers = f->registers;
  d->num_insts = f->num_insts;
  d->insts = f->insts;
  d->num_outputs = f->num_outputs;
  d->outputs = v->outputs;
  d->output_registers = f->output_registers;
  return 1;
}

/* Builds and validates the group once (a plan's first launch), naming the
 * failure after the step rather than the group. */
static nrt_status validate_group(const rt_fused *f, const nrt_fuse_group_desc *d) {
  nrt_fuse_group_t group;
  nrt_status s = nrt_fuse_group_create(d, &group);
  if (!s) {
    nrt_fuse_group_destroy(group);
    return NRT_SUCCESS;
  }
  /* The message starts with the group's name, which the step names. */
  const char *why = nrt_last_error();
  size_t len = strlen(f->name);
  if (!strncmp(why, f->name, len) && !strncmp(why + len, ": ", 2)) {
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", why + len + 2);
    rt_set_error(rest);
  }
  return s;
}

/* The step's group, filled into this worker's scratch group (validated
 * first unless the plan has been). */
static nrt_status fill_group(const rt_fused *f, const nrt_fuse_group_desc *d, int checked,
                             struct nrt_fuse_group **out) {
  nrt_status s;
  if (!checked && (s = validate_group(f, d))) return s;
  struct nrt_fuse_group *fast = scratch_group();
  if (!fast) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory for a fused group");
  /* Layouts as validated; the addresses lie in the buffers (the plan
   * checked every view). */
  if ((s = rt_fuse_group_init(fast, d))) return s;
  memcpy(fast->name, f->name, sizeof fast->name);
  *out = fast;
  return NRT_SUCCESS;
}

static nrt_status run_fused(const task *t, const rt_fused *f, int checked) {
  group_views v;
  struct nrt_fuse_group *group = NULL;
  if (!describe_group(t, f, &v)) return NRT_SUCCESS;
  nrt_status s = fill_group(f, &v.d, checked, &group);
  return s ? s : rt_fuse_run(group);
}

/* ---- a GEMM with its epilogue ------------------------------------------ */

static _Atomic uint64_t epilogues_on_blocks, epilogues_after;

void nrt_program_get_counters(nrt_program_counters *c) {
  if (!c) return;
  c->gemm_epilogues_on_blocks = atomic_load_explicit(&epilogues_on_blocks, memory_order_relaxed);
  c->gemm_epilogues_after = atomic_load_explicit(&epilogues_after, memory_order_relaxed);
}

void nrt_program_clear_counters(void) {
  atomic_store(&epilogues_on_blocks, 0);
  atomic_store(&epilogues_after, 0);
}

/* Strides that view a tensor of shape from (n_from dims, strides st) as
 * shape to (n_to dims, same element count), element for element in
 * row-major order; 0 when no strides can (a dim of `to` spans dims of
 * `from` that are not evenly laid out). */
static int restride(int n_from, const int64_t *from, const int64_t *st, int n_to, const int64_t *to,
                    int64_t *out) {
  int64_t sh[NRT_MAX_DIMS], str[NRT_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < n_from; d++)
    if (from[d] != 1) sh[m] = from[d], str[m++] = st[d];
  int o = m - 1;                       /* the old dim being consumed, innermost first */
  int64_t rem = o >= 0 ? sh[o] : 1;    /* its extent not consumed yet */
  int64_t step = o >= 0 ? str[o] : 0;  /* the stride of what is left of it */
  for (int d = n_to - 1; d >= 0; d--) {
    int64_t need = to[d];
    out[d] = 0;
    if (need == 1) continue;
    if (o < 0) return 0;
    out[d] = step;
    /* Take need elements: whole old dims while they chain, then part of one. */
    while (need > 1) {
      if (o < 0) return 0;
      if (rem % need == 0) {
        step *= need, rem /= need, need = 1;
      } else if (need % rem == 0) {
        need /= rem;
        int64_t end = step * rem; /* where the next old dim must start */
        if (--o < 0 || str[o] != end) return 0;
        rem = sh[o], step = str[o];
        continue;
      } else {
        return 0;
      }
      if (rem == 1 && --o >= 0) rem = sh[o], step = str[o];
    }
  }
  return o < 0;
}

/* [lo, hi) of the bytes a view reaches (hi == lo when empty). */
static void extent(const nrt_tensor_view *v, uintptr_t *lo, uintptr_t *hi) {
  int64_t min = 0, max = 0;
  for (int d = 0; d < v->ndim; d++) {
    if (v->shape[d] == 0) {
      *lo = *hi = (uintptr_t)v->data;
      return;
    }
    int64_t span = (v->shape[d] - 1) * v->strides[d];
    if (span < 0) min += span;
    else max += span;
  }
  int64_t size = (int64_t)nrt_dtype_size(v->dtype);
  *lo = (uintptr_t)v->data + (uintptr_t)(min * size);
  *hi = (uintptr_t)v->data + (uintptr_t)((max + 1) * size);
}

static int overlaps(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  uintptr_t alo, ahi, blo, bhi;
  extent(a, &alo, &ahi);
  extent(b, &blo, &bhi);
  return alo < bhi && blo < ahi && alo != ahi && blo != bhi;
}

/* The epilogue as the GEMM calls it: each tensor of the group over the
 * product's [batch, m, n], host address of element (0, 0, 0) and strides. */
typedef struct epilogue {
  const struct nrt_fuse_group *group;
  char *in[NRT_FUSE_MAX_INPUTS], *out[NRT_FUSE_MAX_OUTPUTS];
  int64_t in_st[NRT_FUSE_MAX_INPUTS][3], out_st[NRT_FUSE_MAX_OUTPUTS][3];
  pthread_mutex_t mu;
  char message[1024]; /* the first failure's (it happened on a pool thread) */
} epilogue;

static nrt_status run_epilogue_block(void *arg, int64_t t, int64_t i0, int64_t rows, int64_t j0,
                                     int64_t cols) {
  epilogue *e = arg;
  const struct nrt_fuse_group *g = e->group;
  rt_fuse_box box = {.rows = rows, .cols = cols};
  for (int k = 0; k < g->num_inputs; k++) {
    const int64_t *st = e->in_st[k];
    box.in[k] = e->in[k] + (t * st[0] + i0 * st[1] + j0 * st[2]) * (int64_t)nrt_dtype_size(g->inputs[k].dtype);
    box.in_rs[k] = st[1], box.in_cs[k] = st[2];
  }
  for (int j = 0; j < g->num_outputs; j++) {
    const int64_t *st = e->out_st[j];
    box.out[j] = e->out[j] + (t * st[0] + i0 * st[1] + j0 * st[2]) * (int64_t)nrt_dtype_size(g->outputs[j].dtype);
    box.out_rs[j] = st[1], box.out_cs[j] = st[2];
  }
  nrt_status s = rt_fuse_run_box(g, &box);
  if (s) {
    pthread_mutex_lock(&e->mu);
    if (!e->message[0]) snprintf(e->message, sizeof e->message, "%s", nrt_last_error());
    pthread_mutex_unlock(&e->mu);
  }
  return s;
}

/* Maps view v (the group's shape) onto the product's [batch, m, n]; 0 when
 * it cannot be. */
static int map_tensor(const nrt_tensor_view *v, const int64_t *space, char **base, int64_t *st) {
  if (!restride(v->ndim, v->shape, v->strides, 3, space, st)) return 0;
  *base = v->data ? nrt_device_to_host(v->data) : NULL;
  return 1;
}

/* Whether a tensor mapped onto [batch, m, n] is the product itself, element
 * for element (strides of size-1 dims do not matter). */
static int at_product(const rt_gemm_args *a, const char *c_host, const char *base, const int64_t *st) {
  return base == c_host && (a->batch == 1 || st[0] == a->c_bs) && (a->m == 1 || st[1] == a->c_rs) &&
         (a->n == 1 || st[2] == a->c_cs);
}

/* Whether the group runs on the product's blocks under this binding: every
 * tensor maps onto [batch, m, n], the group reads and writes the product
 * exactly where the GEMM stores it, and nothing the group writes overlaps
 * what the GEMM reads. Fills e. */
static int plan_epilogue(const nrt_op *gemm, const rt_gemm_args *a, const nrt_fuse_group_desc *d,
                         const struct nrt_fuse_group *group, epilogue *e) {
  const int64_t space[3] = {a->batch, a->m, a->n};
  const nrt_tensor_view *c = &gemm->operands[0];
  char *c_host = nrt_device_to_host(c->data);
  e->group = group;
  for (int k = 0; k < d->num_inputs; k++) {
    const nrt_tensor_view *v = &d->inputs[k];
    if (!map_tensor(v, space, &e->in[k], e->in_st[k])) return 0;
    /* Reading the product: exactly the element the GEMM stored. */
    if (overlaps(v, c) && !at_product(a, c_host, e->in[k], e->in_st[k])) return 0;
  }
  for (int j = 0; j < d->num_outputs; j++) {
    const nrt_tensor_view *v = &d->outputs[j];
    if (!map_tensor(v, space, &e->out[j], e->out_st[j])) return 0;
    for (int k = 1; k < gemm->num_operands; k++)
      if (overlaps(v, &gemm->operands[k])) return 0;
    if (overlaps(v, c) && !at_product(a, c_host, e->out[j], e->out_st[j])) return 0;
  }
  return 1;
}

/* The GEMM node and its epilogue group: the group runs on each block of
 * the product as the GEMM stores it, or, when this binding's layouts do
 * not map onto the blocks, after the product, as two steps. */
static nrt_status run_gemm_epilogue(const task *t, const rt_step *st, int checked) {
  const rt_gnode *n = &t->program->graph->nodes[st->first_node];
  const rt_fused *f = st->fused;
  nrt_op op;
  group_views v;
  struct nrt_fuse_group *group = NULL;
  nrt_status s;
  int product = make_op(t, n, &op), any = describe_group(t, f, &v);
  if (!product || !any || op.immediate_mask) {
    if (product && (s = nrt_op_execute(&op))) return s;
    return any ? run_fused(t, f, checked) : NRT_SUCCESS;
  }
  if ((s = rt_op_validate(&op))) return s;
  nrt_op host = op;
  for (int k = 0; k < host.num_operands; k++)
    if (host.operands[k].data) host.operands[k].data = nrt_device_to_host(host.operands[k].data);
  rt_gemm_args a;
  if ((s = rt_gemm_args_of_op(&host, &a))) return s;
  if ((s = fill_group(f, &v.d, checked, &group))) return s;
  epilogue *e = malloc(sizeof *e);
  if (!e) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory for a GEMM epilogue");
  if (!plan_epilogue(&op, &a, &v.d, group, e)) {
    free(e);
    atomic_fetch_add_explicit(&epilogues_after, 1, memory_order_relaxed);
    if ((s = rt_gemm(&a))) return s;
    return rt_fuse_run(group);
  }
  pthread_mutex_init(&e->mu, NULL);
  e->message[0] = 0;
  a.epilogue = run_epilogue_block;
  a.epilogue_ctx = e;
  atomic_fetch_add_explicit(&epilogues_on_blocks, 1, memory_order_relaxed);
  s = rt_gemm(&a);
  if (s && e->message[0]) rt_set_error(e->message);
  pthread_mutex_destroy(&e->mu);
  free(e);
  return s;
}

static nrt_status run(void *arg) {
  const task *t = arg;
  const struct nrt_program *p = t->program;
  int checked = atomic_load_explicit(&t->plan->fused_checked, memory_order_acquire);
  for (int32_t i = 0; i < p->num_steps; i++) {
    const rt_step *st = &p->steps[i];
    const rt_gnode *n = &p->graph->nodes[st->first_node];
    nrt_status s = st->kind == RT_STEP_FUSED                   ? run_fused(t, st->fused, checked)
                   : st->kind == RT_STEP_GEMM_EPILOGUE     ? run_gemm_epilogue(t, st, checked)
                   : n->code == (nrt_op_code)NRT_GRAPH_NKI ? run_nki(t, st->first_node)
                                                           : run_kernel(t, n);
    if (s) {
      char why[1024];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      return rt_fail(s, "step %d (%s): %s", i,
                     st->kind != RT_STEP_KERNEL ? st->fused->name : rt_gnode_name(n->code), why);
    }
  }
  if (!checked) atomic_store_explicit(&t->plan->fused_checked, 1, memory_order_release);
  return NRT_SUCCESS;
}

static void release(void *arg) {
  task *t = arg;
  rt_plan_release(t->plan);
  rt_program_release(t->program);
  free(t);
}

nrt_status nrt_program_launch(nrt_stream_t stream, nrt_program_t p, const int64_t *symbols,
                              int32_t num_symbols, void *const *inputs,
                              const int64_t *input_capacity, void *const *outputs, void *arena) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL argument");
  const struct nrt_graph *g = p->graph;
  if ((g->num_inputs && !inputs) || (g->num_outputs && !outputs))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL inputs or outputs");
  rt_plan *plan;
  if ((s = rt_program_plan_get(p, symbols, num_symbols, &plan))) return s;
  if ((s = rt_plan_check_inputs(p, plan, input_capacity, "nrt_program_launch"))) goto fail;
  if (plan->arena_bytes && !arena) {
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL arena; the plan needs %zu bytes",
                plan->arena_bytes);
    goto fail;
  }
  for (uint32_t slot = 0; slot < g->num_outputs; slot++)
    if (!outputs[slot] && plan->numel[g->output_buffer[slot]] > 0) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: output %u is NULL", slot);
      goto fail;
    }
  for (uint32_t slot = 0; slot < g->num_inputs; slot++)
    if (!inputs[slot] && plan->input_need[slot] > 0) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: input %u is NULL", slot);
      goto fail;
    }
  task *t = malloc(sizeof *t + (g->num_inputs + g->num_outputs) * sizeof(void *));
  if (!t) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_launch: out of host memory");
    goto fail;
  }
  rt_program_retain(p);
  t->program = p;
  t->plan = plan; /* the reference taken above */
  t->arena = arena;
  t->inputs = t->ptrs;
  t->outputs = t->ptrs + g->num_inputs;
  if (g->num_inputs) memcpy(t->inputs, inputs, g->num_inputs * sizeof(void *));
  if (g->num_outputs) memcpy(t->outputs, outputs, g->num_outputs * sizeof(void *));
  return nrt_launch_host_task(stream, p->task_name, run, release, t);
fail:
  rt_plan_release(plan);
  return s;
}
