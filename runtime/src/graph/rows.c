/* Row regions: a norm or softmax over the last dimension (layer norm, RMS
 * norm, softmax, log-softmax and their softmax gradients) with the
 * pointwise steps around it: the residual add before a norm, the scaling
 * and mask before a softmax, the activation or cast after. Each row of
 * such steps depends on the same row of their inputs only, so the region
 * runs chunk by chunk of rows, chunks in parallel: one pass of the
 * thread pool for all its steps, and one step's result reaches the next
 * while it is still near (in L3 at the chunk sizes used, see
 * run_by_chunks).
 *
 * Compile time (rt_program_plan_rows) forms the regions from consecutive
 * steps; their buffers then live through the whole region (one step for
 * the memory planner). Each run (rt_run_rows) maps every tensor of every
 * step onto [rows, columns] under the binding and checks that chunks
 * cannot interfere: each buffer written in the region is reached by every
 * step row for row alike, rows apart, and overlaps no other. Steps that do
 * not map (a pointwise step over another shape) run alone, in order.
 * Results are bit for bit those of the steps one by one: the kernels are
 * the same and each row's arithmetic does not depend on the rows around
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "graph/run.h"
#include "ops/engine/thread_pool.h"

#define ROWS_MAX_MEMBERS 8      /* steps of one region */

/* ---- which steps ------------------------------------------------------- */

/* For a row-wise kernel: whether operand k is indexed by row (dim 0)
 * rather than shared by all rows (a norm's weight and bias). */
static int row_operand(nrt_op_code code, int k) {
  switch (code) {
    case NRT_OP_LAYER_NORM: return k <= 3;
    case NRT_OP_RMS_NORM: return k <= 2;
    default: return 1;
  }
}

/* Whether node n is a row-wise kernel: each row of its result depends on
 * that row of its inputs only. Softmax works on [outer, n, inner] views:
 * by rows when inner is 1. The norms' backward passes sum their weight
 * gradients over rows, so they are not. */
static int row_kernel(const struct nrt_graph *g, const rt_gnode *n) {
  switch (n->code) {
    case NRT_OP_LAYER_NORM:
    case NRT_OP_RMS_NORM:
      return rt_gnode_operand(g, n, n->code == NRT_OP_LAYER_NORM ? 3 : 2)->ndim == 2;
    case NRT_OP_SOFTMAX:
    case NRT_OP_LOG_SOFTMAX:
    case NRT_OP_SOFTMAX_BACKWARD:
    case NRT_OP_LOG_SOFTMAX_BACKWARD: {
      const rt_goperand *y = rt_gnode_operand(g, n, 0);
      const rt_expr *inner = y->ndim == 3 ? &g->exprs[y->shape_expr[2]] : NULL;
      return inner && inner->n == 1 && inner->terms[0].op == NRT_EXPR_CONST && inner->terms[0].arg == 1;
    }
    default:
      return 0;
  }
}

/* Member kinds: 2 a row-wise kernel, 1 a pointwise step, 0 neither. */
static int member_kind(const struct nrt_program *p, const rt_step *st) {
  const struct nrt_graph *g = p->graph;
  if (st->kind == RT_STEP_FUSED) return 1;
  if (st->kind != RT_STEP_KERNEL) return 0;
  const rt_gnode *n = &g->nodes[st->first_node];
  if (row_kernel(g, n)) return 2;
  return n->num_operands > 0 && rt_graph_node_fusible(g, n) ? 1 : 0;
}

nrt_status rt_program_plan_rows(struct nrt_program *p) {
  int32_t out = 0;
  for (int32_t i = 0; i < p->num_steps;) {
    /* A run of candidates with a row-wise kernel in it. */
    int32_t end = i, kernels = 0;
    while (end < p->num_steps && end - i < ROWS_MAX_MEMBERS && member_kind(p, &p->steps[end])) {
      kernels += member_kind(p, &p->steps[end]) == 2;
      end++;
    }
    /* Pointwise steps after the last kernel stay in (an epilogue); a run
     * without a kernel is left as it is. */
    if (kernels == 0 || end - i < 2) {
      p->steps[out++] = p->steps[i++];
      continue;
    }
    rt_step region;
    memset(&region, 0, sizeof region);
    region.kind = RT_STEP_ROWS;
    region.num_members = end - i;
    region.members = malloc((size_t)region.num_members * sizeof *region.members);
    if (!region.members) {
      /* Nothing was moved yet: the steps from out on are whole. */
      memmove(&p->steps[out], &p->steps[i], (size_t)(p->num_steps - i) * sizeof *p->steps);
      p->num_steps = out + (p->num_steps - i);
      return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_compile: out of host memory");
    }
    memcpy(region.members, &p->steps[i], (size_t)region.num_members * sizeof *region.members);
    region.first_node = region.members[0].first_node;
    for (int32_t m = 0; m < region.num_members; m++) region.num_nodes += region.members[m].num_nodes;
    p->steps[out++] = region;
    p->num_row_regions++;
    i = end;
  }
  p->num_steps = out;
  return NRT_SUCCESS;
}

/* ---- one run ------------------------------------------------------------ */

static _Atomic uint64_t regions_chunked, regions_alone;

void rt_rows_counters(uint64_t *chunked, uint64_t *alone) {
  *chunked = atomic_load_explicit(&regions_chunked, memory_order_relaxed);
  *alone = atomic_load_explicit(&regions_alone, memory_order_relaxed);
}

void rt_rows_clear_counters(void) {
  atomic_store(&regions_chunked, 0);
  atomic_store(&regions_alone, 0);
}

/* One tensor a member reaches, over [rows, cols]: host address of row 0,
 * row stride (0: shared by all rows) and column stride in elements. */
typedef struct access {
  int32_t buffer;
  int write;
  char *base;
  int64_t rs, cs, cols, esize;
  nrt_tensor_view full; /* for the overlap check */
} access;

/* A member under the binding. */
typedef struct member {
  int kind;                         /* RT_STEP_KERNEL or RT_STEP_FUSED */
  const rt_step *step;
  nrt_op op;                        /* a kernel: the whole op (device pointers) */
  int64_t op_rs[NRT_MAX_OPERANDS];  /* each operand's row stride (elements), or -1: not by row */
  int pointwise;                    /* a pointwise kernel: operands mapped to [rows, cols] */
  int64_t op_cs[NRT_MAX_OPERANDS], cols;
  struct nrt_fuse_group *group;     /* a fused step */
  rt_fuse_box box;                  /* the group's tensors at row 0 (rows = cols = 0) */
  int empty;                        /* nothing to run */
} member;

typedef struct region_run {
  int32_t first, end; /* the members being run by chunks */
  member m[ROWS_MAX_MEMBERS];
  int64_t rows, chunk_rows;
  atomic_int failed;
  pthread_mutex_t mu;
  nrt_status status;
  char message[1024];
} region_run;

static void add_access(access *a, int *na, int32_t buffer, int write, const nrt_tensor_view *v,
                       char *base, int64_t rs, int64_t cs, int64_t cols) {
  access *x = &a[(*na)++];
  x->buffer = buffer, x->write = write, x->base = base, x->rs = rs, x->cs = cs, x->cols = cols;
  x->esize = (int64_t)nrt_dtype_size(v->dtype);
  x->full = *v;
}

/* A kernel member: the op, and each operand's row stride. */
static int map_kernel(const rt_task *t, const rt_gnode *n, int64_t rows, member *mb, access *acc, int *na) {
  const struct nrt_graph *g = t->program->graph;
  if (!rt_run_op(t, n, &mb->op)) {
    mb->empty = 1;
    return 1;
  }
  int outputs = n->num_outputs ? n->num_outputs : 1;
  mb->pointwise = rt_fuse_is_fusible(n->code);
  int64_t numel = 1;
  for (int d = 0; d < mb->op.operands[0].ndim; d++) numel *= mb->op.operands[0].shape[d];
  if (mb->pointwise) {
    if (rows == 0 || numel % rows) return 0;
    mb->cols = numel / rows;
  }
  for (int k = 0; k < n->num_operands; k++) {
    nrt_tensor_view *v = &mb->op.operands[k];
    const rt_goperand *o = rt_gnode_operand(g, n, k);
    mb->op_rs[k] = -1;
    if (o->is_immediate) {
      if (mb->pointwise) mb->op_rs[k] = 0, mb->op_cs[k] = 0;
      continue;
    }
    int64_t count = 1;
    for (int d = 0; d < v->ndim; d++) count *= v->shape[d];
    if (count == 0 || !v->data) continue; /* absent or empty: nothing to slice */
    char *host = nrt_device_to_host(v->data);
    if (mb->pointwise) {
      int64_t st[2], space[2] = {rows, mb->cols};
      if (!rt_restride(v->ndim, v->shape, v->strides, 2, space, st)) return 0;
      mb->op_rs[k] = st[0], mb->op_cs[k] = st[1];
      add_access(acc, na, o->buffer, k < outputs, v, host, st[0], st[1], mb->cols);
    } else if (row_operand(n->code, k)) {
      if (v->shape[0] != rows) return 0;
      int64_t row_extent = 1;
      for (int d = 1; d < v->ndim; d++) row_extent += (v->shape[d] - 1) * llabs(v->strides[d]);
      mb->op_rs[k] = v->strides[0];
      /* The row as a run of row_extent elements: what a chunk reaches. */
      add_access(acc, na, o->buffer, k < outputs, v, host, v->strides[0], 1, row_extent);
    } else {
      add_access(acc, na, o->buffer, k < outputs, v, host, 0, 1, count);
    }
  }
  return 1;
}

/* A fused member: its group in slot, each tensor over [rows, cols]. */
static nrt_status map_group(const rt_task *t, const rt_fused *f, int checked, int slot, int64_t rows,
                            member *mb, access *acc, int *na, int *ok) {
  const struct nrt_graph *g = t->program->graph;
  group_views v;
  *ok = 1;
  if (!rt_run_describe_group(t, f, &v)) {
    mb->empty = 1;
    return NRT_SUCCESS;
  }
  nrt_status s = rt_run_fill_group(f, &v.d, checked, slot, &mb->group);
  if (s) return s;
  int64_t numel = mb->group->numel;
  if (rows == 0 || numel % rows) {
    *ok = 0;
    return NRT_SUCCESS;
  }
  int64_t space[2] = {rows, numel / rows}, st[2];
  mb->box.cols = space[1];
  for (int k = 0; k < f->num_inputs; k++) {
    const nrt_tensor_view *x = &v.inputs[k];
    if (!rt_restride(x->ndim, x->shape, x->strides, 2, space, st)) {
      *ok = 0;
      return NRT_SUCCESS;
    }
    mb->box.in[k] = mb->group->inputs[k].data;
    mb->box.in_rs[k] = st[0], mb->box.in_cs[k] = st[1];
    add_access(acc, na, g->operands[f->input_operand[k]].buffer, 0, x, mb->box.in[k], st[0], st[1], space[1]);
  }
  for (int j = 0; j < f->num_outputs; j++) {
    const nrt_tensor_view *y = &v.outputs[j];
    if (!rt_restride(y->ndim, y->shape, y->strides, 2, space, st)) {
      *ok = 0;
      return NRT_SUCCESS;
    }
    mb->box.out[j] = mb->group->outputs[j].data;
    mb->box.out_rs[j] = st[0], mb->box.out_cs[j] = st[1];
    add_access(acc, na, g->operands[f->output_operand[j]].buffer, 1, y, mb->box.out[j], st[0], st[1], space[1]);
  }
  return NRT_SUCCESS;
}

/* The span of one row of an access, in bytes (its columns). */
static int64_t row_span(const access *a) { return ((a->cols - 1) * llabs(a->cs) + 1) * a->esize; }

/* Whether chunks of rows cannot interfere: every buffer written is
 * reached by every access row for row alike (same address and row
 * stride), its rows do not overlap one another, and it overlaps no other
 * buffer's view. */
static int chunks_independent(const access *acc, int na) {
  for (int i = 0; i < na; i++) {
    const access *w = &acc[i];
    if (!w->write) continue;
    if (w->rs == 0 || row_span(w) > llabs(w->rs) * w->esize) return 0;
    for (int j = 0; j < na; j++) {
      const access *x = &acc[j];
      if (j == i) continue;
      if (x->buffer == w->buffer) {
        if (x->base != w->base || x->rs != w->rs || row_span(x) > llabs(x->rs) * x->esize) return 0;
      } else if (rt_views_overlap(&w->full, &x->full)) {
        return 0;
      }
    }
  }
  return 1;
}

static void record(region_run *r, nrt_status s, const char *what) {
  pthread_mutex_lock(&r->mu);
  if (!r->status) {
    r->status = s;
    snprintf(r->message, sizeof r->message, "%s: %s", what, nrt_last_error());
  }
  pthread_mutex_unlock(&r->mu);
  atomic_store(&r->failed, 1);
}

/* Rows [r0, r0 + rows) of a kernel member. */
static nrt_status run_kernel_rows(const member *mb, int64_t r0, int64_t rows) {
  nrt_op op = mb->op;
  for (int k = 0; k < op.num_operands; k++) {
    nrt_tensor_view *v = &op.operands[k];
    if (mb->op_rs[k] < 0) continue;
    if (mb->pointwise) {
      v->ndim = 2;
      v->shape[0] = rows, v->shape[1] = mb->cols;
      v->strides[0] = mb->op_rs[k], v->strides[1] = mb->op_cs[k];
      if (op.immediate_mask & (1u << k)) continue;
    } else {
      v->shape[0] = rows;
    }
    v->data = (char *)v->data + r0 * mb->op_rs[k] * (int64_t)nrt_dtype_size(v->dtype);
  }
  return rt_op_run(&op);
}

static void run_chunks(int64_t c0, int64_t c1, void *arg) {
  region_run *r = arg;
  for (int64_t c = c0; c < c1 && !atomic_load_explicit(&r->failed, memory_order_relaxed); c++) {
    int64_t r0 = c * r->chunk_rows, rows = r->rows - r0 < r->chunk_rows ? r->rows - r0 : r->chunk_rows;
    for (int32_t i = r->first; i < r->end; i++) {
      const member *mb = &r->m[i];
      if (mb->empty) continue;
      nrt_status s;
      if (mb->kind == RT_STEP_FUSED) {
        rt_fuse_box box = mb->box;
        box.rows = rows;
        for (int k = 0; k < mb->group->num_inputs; k++)
          box.in[k] += r0 * box.in_rs[k] * (int64_t)nrt_dtype_size(mb->group->inputs[k].dtype);
        for (int j = 0; j < mb->group->num_outputs; j++)
          box.out[j] += r0 * box.out_rs[j] * (int64_t)nrt_dtype_size(mb->group->outputs[j].dtype);
        s = rt_fuse_run_box(mb->group, &box);
      } else {
        s = run_kernel_rows(mb, r0, rows);
      }
      if (s) {
        record(r, s, mb->kind == RT_STEP_FUSED ? mb->group->name : nrt_op_name(mb->op.code));
        return;
      }
    }
  }
}

/* Runs members [first, end) of a region alone, in order. */
static nrt_status run_alone(const rt_task *t, const rt_step *st, int32_t first, int32_t end, int checked) {
  for (int32_t i = first; i < end; i++) {
    const rt_step *m = &st->members[i];
    nrt_status s;
    if (m->kind == RT_STEP_FUSED) {
      s = rt_run_fused(t, m->fused, checked);
    } else {
      nrt_op op;
      s = rt_run_op(t, &t->program->graph->nodes[m->first_node], &op) ? nrt_op_execute(&op) : NRT_SUCCESS;
    }
    if (s) {
      char why[1024];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      return rt_fail(s, "%s: %s", m->kind == RT_STEP_FUSED ? m->fused->name
                                                          : nrt_op_name(t->program->graph->nodes[m->first_node].code),
                     why);
    }
  }
  return NRT_SUCCESS;
}

/* The rows of the region under this binding: those of its first row-wise
 * kernel (dim 0 of its input). */
static int64_t region_rows(const rt_task *t, const rt_step *st) {
  const struct nrt_graph *g = t->program->graph;
  for (int32_t i = 0; i < st->num_members; i++) {
    const rt_step *m = &st->members[i];
    if (m->kind != RT_STEP_KERNEL) continue;
    const rt_gnode *n = &g->nodes[m->first_node];
    if (!row_kernel(g, n)) continue;
    int k = n->code == NRT_OP_LAYER_NORM ? 3 : n->code == NRT_OP_RMS_NORM ? 2 : 0;
    nrt_tensor_view v;
    rt_run_view(t, rt_gnode_operand(g, n, k), &v);
    return v.shape[0];
  }
  return 0;
}

/* Runs members [first, end), all mapped, chunk by chunk of rows. */
static nrt_status run_by_chunks(region_run *r, int32_t first, int32_t end) {
  /* Four chunks per thread (for balance), otherwise as large as they
   * come. Chunks sized for L2 (192 KiB of tensors) were tried first: on
   * a Zen 4 EPYC the norm's row loop then ran 1.4-1.6x as long as over
   * all rows at once (every chunk pays the kernels' per-call setup and
   * starts on rows the hardware has not streamed in; a software prefetch
   * of the next chunk did not help), which the cached hand-over to the
   * GELU after it never paid back: layer norm + GELU compiled took 1.2x
   * eager's cycles, a residual add before the norm too. */
  int64_t threads = rt_num_threads();
  int64_t chunk = (r->rows + 4 * threads - 1) / (4 * threads);
  r->chunk_rows = chunk < 1 ? 1 : chunk;
  r->first = first, r->end = end;
  rt_parallel_for((r->rows + r->chunk_rows - 1) / r->chunk_rows, 1, run_chunks, r);
  return r->status ? rt_fail(r->status, "%s", r->message) : NRT_SUCCESS;
}

nrt_status rt_run_rows(const rt_task *t, const rt_step *st, int checked) {
  int64_t rows = region_rows(t, st);
  region_run *r = calloc(1, sizeof *r);
  access *acc = malloc(ROWS_MAX_MEMBERS * (NRT_FUSE_MAX_INPUTS + NRT_FUSE_MAX_OUTPUTS + NRT_MAX_OPERANDS) *
                       sizeof *acc);
  if (!r || !acc) {
    free(r);
    free(acc);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory for a row region");
  }
  r->rows = rows;
  pthread_mutex_init(&r->mu, NULL);
  nrt_status s = NRT_SUCCESS;
  int na = 0, ok[ROWS_MAX_MEMBERS], first_access[ROWS_MAX_MEMBERS + 1];
  /* Map every member onto the rows (a kernel's whole op validated, as a
   * run of it alone would: a failure is its own, not a chunk's). */
  for (int32_t i = 0; i < st->num_members && !s; i++) {
    const rt_step *m = &st->members[i];
    member *mb = &r->m[i];
    mb->kind = m->kind, mb->step = m;
    first_access[i] = na;
    if (rows <= 0) {
      ok[i] = 0;
    } else if (m->kind == RT_STEP_FUSED) {
      s = map_group(t, m->fused, checked, i, rows, mb, acc, &na, &ok[i]);
    } else {
      ok[i] = map_kernel(t, &t->program->graph->nodes[m->first_node], rows, mb, acc, &na);
      if (ok[i] && !mb->empty && (s = rt_op_validate(&mb->op))) {
        char why[1024];
        snprintf(why, sizeof why, "%s", nrt_last_error());
        s = rt_fail(s, "%s: %s", nrt_op_name(mb->op.code), why);
      }
    }
    if (!ok[i]) na = first_access[i];
  }
  first_access[st->num_members] = na;
  /* Runs of mapped members with a row-wise kernel go by chunks when they
   * cannot interfere; every other member runs alone, in order. */
  for (int32_t i = 0; i < st->num_members && !s;) {
    int32_t end = i, kernels = 0;
    while (end < st->num_members && ok[end]) {
      kernels += st->members[end].kind == RT_STEP_KERNEL && !r->m[end].pointwise;
      end++;
    }
    if (end == i) end = i + 1;
    const access *seg = acc + first_access[i];
    int nseg = first_access[end] - first_access[i];
    if (ok[i] && kernels && end - i >= 2 && chunks_independent(seg, nseg)) {
      atomic_fetch_add_explicit(&regions_chunked, 1, memory_order_relaxed);
      s = run_by_chunks(r, i, end);
    } else {
      atomic_fetch_add_explicit(&regions_alone, 1, memory_order_relaxed);
      s = run_alone(t, st, i, end, checked);
    }
    i = end;
  }
  pthread_mutex_destroy(&r->mu);
  free(acc);
  free(r);
  return s;
}
