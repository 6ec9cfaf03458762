/* GEMM epilogues: a GEMM step whose fused group runs on each block of the
 * product as the GEMM stores it (rt_gemm's epilogue hook), when the
 * binding's layouts map the group onto the product's blocks; otherwise the
 * group runs after the product. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "graph/run.h"
#include "ops/gemm/gemm.h"

/* ---- a GEMM with its epilogue ------------------------------------------ */

static _Atomic uint64_t epilogues_on_blocks, epilogues_after;

void nrt_program_get_counters(nrt_program_counters *c) {
  if (!c) return;
  c->gemm_epilogues_on_blocks = atomic_load_explicit(&epilogues_on_blocks, memory_order_relaxed);
  c->gemm_epilogues_after = atomic_load_explicit(&epilogues_after, memory_order_relaxed);
  rt_rows_counters(&c->row_regions_chunked, &c->row_regions_alone);
}

void nrt_program_clear_counters(void) {
  atomic_store(&epilogues_on_blocks, 0);
  atomic_store(&epilogues_after, 0);
  rt_rows_clear_counters();
}

/* Strides that view a tensor of shape from (n_from dims, strides st) as
 * shape to (n_to dims, same element count), element for element in
 * row-major order; 0 when no strides can (a dim of `to` spans dims of
 * `from` that are not evenly laid out). */
int rt_restride(int n_from, const int64_t *from, const int64_t *st, int n_to, const int64_t *to,
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

int rt_views_overlap(const nrt_tensor_view *a, const nrt_tensor_view *b) {
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
  if (!rt_restride(v->ndim, v->shape, v->strides, 3, space, st)) return 0;
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
    if (rt_views_overlap(v, c) && !at_product(a, c_host, e->in[k], e->in_st[k])) return 0;
  }
  for (int j = 0; j < d->num_outputs; j++) {
    const nrt_tensor_view *v = &d->outputs[j];
    if (!map_tensor(v, space, &e->out[j], e->out_st[j])) return 0;
    for (int k = 1; k < gemm->num_operands; k++)
      if (rt_views_overlap(v, &gemm->operands[k])) return 0;
    if (rt_views_overlap(v, c) && !at_product(a, c_host, e->out[j], e->out_st[j])) return 0;
  }
  return 1;
}

/* The GEMM node and its epilogue group: the group runs on each block of
 * the product as the GEMM stores it, or, when this binding's layouts do
 * not map onto the blocks, after the product, as two steps. */
nrt_status rt_run_gemm_epilogue(const rt_task *t, const rt_step *st, int checked) {
  const rt_gnode *n = &t->program->graph->nodes[st->first_node];
  const rt_fused *f = st->fused;
  nrt_op op;
  group_views v;
  struct nrt_fuse_group *group = NULL;
  nrt_status s;
  int product = rt_run_op(t, n, &op), any = rt_run_describe_group(t, f, &v);
  if (!product || !any || op.immediate_mask) {
    if (product && (s = nrt_op_execute(&op))) return s;
    return any ? rt_run_fused(t, f, checked) : NRT_SUCCESS;
  }
  if ((s = rt_op_validate(&op))) return s;
  nrt_op host = op;
  for (int k = 0; k < host.num_operands; k++)
    if (host.operands[k].data) host.operands[k].data = nrt_device_to_host(host.operands[k].data);
  rt_gemm_args a;
  if ((s = rt_gemm_args_of_op(&host, &a))) return s;
  if ((s = rt_run_fill_group(f, &v.d, checked, 0, &group))) return s;
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

