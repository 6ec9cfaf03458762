/* See index_walk.h. */
#include "ops/index/index_walk.h"

#include <stdint.h>

static int is_index_dtype(nrt_dtype t) { return t >= NRT_UINT8 && t <= NRT_INT64; }

static int same_shape(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

nrt_status rt_index_walk_init(rt_index_walk *w, const nrt_op *op, int direct, int indexed,
                              int dims_at, int wrap) {
  const char *name = nrt_op_name(op->code);
  int k = op->num_operands - 3;
  if (k < 1 || k > NRT_INDEX_MAX_TENSORS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 1 to %d index operands, got %d", name,
                   NRT_INDEX_MAX_TENSORS, k);
  if (op->num_scalars < dims_at + k)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d scalars", name, dims_at + k);
  const nrt_tensor_view *d = &op->operands[direct], *x = &op->operands[indexed];
  const nrt_tensor_view *g = &op->operands[2];
  if (d->dtype != x->dtype || g->dtype != x->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the data operands must share one dtype", name);
  if (!same_shape(d, x))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand shapes differ", name);
  if (g->ndim != k || g->data != x->data)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: the geometry must be a %d-d view at the indexed tensor's address", name, k);
  w->op = name;
  w->k = k;
  w->wrap = wrap;
  w->elem_size = nrt_dtype_size(x->dtype);
  atomic_init(&w->failed, 0);
  nrt_tensor_view views[2 + NRT_INDEX_MAX_TENSORS];
  views[0] = *d;
  views[1] = *x;
  for (int j = 0; j < k; j++) {
    const nrt_tensor_view *idx = &op->operands[3 + j];
    if (!is_index_dtype(idx->dtype))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: index operand %d has dtype %s; expected an integer dtype",
                     name, j, nrt_dtype_name(idx->dtype));
    if (!same_shape(d, idx))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: index operand %d's shape differs", name, j);
    w->bound[j] = g->shape[j];
    w->step[j] = g->strides[j] * (int64_t)w->elem_size;
    w->dim[j] = op->scalars[dims_at + j].i;
    w->index_dtype[j] = idx->dtype;
    views[2 + j] = *idx;
  }
  rt_plan_build(2 + k, views, &w->plan);
  /* The indexed tensor's extent: its own dims plus the indexed ones. */
  int64_t lo = 0, hi = 0;
  for (int32_t i = 0; i < x->ndim; i++) {
    int64_t e = (x->shape[i] > 0 ? x->shape[i] - 1 : 0) * x->strides[i];
    if (e < 0) lo += e; else hi += e;
  }
  for (int j = 0; j < k; j++) {
    int64_t e = (g->shape[j] > 0 ? g->shape[j] - 1 : 0) * g->strides[j];
    if (e < 0) lo += e; else hi += e;
  }
  char *base = x->data;
  w->extent_lo = base + lo * (int64_t)w->elem_size;
  w->extent_hi = base + (hi + 1) * (int64_t)w->elem_size;
  return NRT_SUCCESS;
}

static inline int64_t floor_div(int64_t a, int64_t b) { /* b > 0 */
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

void rt_index_run_clipped(rt_index_part *part, char *d, int64_t ds, char *x, int64_t xs, int64_t n) {
  int64_t j0 = 0, j1 = n;
  if (part->filtered) {
    int64_t lo = (int64_t)((intptr_t)part->lo - (intptr_t)x);
    int64_t hi = (int64_t)((intptr_t)part->hi - (intptr_t)x);
    if (xs == 0) {
      if (lo > 0 || hi <= 0) return;
    } else if (xs > 0) { /* lo <= j * xs < hi */
      j0 = -floor_div(-lo, xs);
      j1 = -floor_div(-hi, xs);
    } else { /* lo <= -j * |xs| < hi */
      j0 = floor_div(-hi, -xs) + 1;
      j1 = floor_div(-lo, -xs) + 1;
    }
    if (j0 < 0) j0 = 0;
    if (j1 > n) j1 = n;
    if (j0 >= j1) return;
  }
  part->run(part, d + j0 * ds, ds, x + j0 * xs, xs, j1 - j0);
}

static inline int in_part(const rt_index_part *part, const char *x) {
  return !part->filtered || ((uintptr_t)x >= (uintptr_t)part->lo && (uintptr_t)x < (uintptr_t)part->hi);
}

/* One index of a dtype: the common case, kept free of the dtype switch. */
#define SINGLE_INDEX_LOOP(T)                                                     \
  do {                                                                           \
    const char *ip = data[2];                                                    \
    int64_t is = strides[2], bound = w->bound[0], step = w->step[0];             \
    for (int64_t i = 0; i < n;) {                                                \
      int64_t end = n - i > RT_INDEX_BATCH ? i + RT_INDEX_BATCH : n, m = 0;      \
      for (; i < end; i++) {                                                     \
        int64_t v = *(const T *)(ip + i * is);                                   \
        if (v < 0 && w->wrap) v += bound;                                        \
        if ((uint64_t)v >= (uint64_t)bound) goto fail;                           \
        char *x = data[1] + i * strides[1] + v * step;                           \
        if (!in_part(part, x)) continue;                                         \
        dp[m] = data[0] + i * strides[0];                                        \
        xp[m++] = x;                                                             \
      }                                                                          \
      if (m) part->batch(part, dp, xp, m);                                       \
    }                                                                            \
  } while (0)

static void walk_loop(char **data, const int64_t *strides, int64_t n, void *arg) {
  rt_index_part *part = arg;
  rt_index_walk *w = part->walk;
  if (atomic_load_explicit(&w->failed, memory_order_relaxed)) return;
  int k = w->k;
  int varying = 0;
  for (int j = 0; j < k; j++) varying |= strides[2 + j] != 0;
  if (!varying) {
    int64_t offset = 0;
    for (int j = 0; j < k; j++) {
      int64_t v = rt_index_checked(w, j, rt_index_load(data[2 + j], w->index_dtype[j]));
      if (v < 0) goto fail;
      offset += v * w->step[j];
    }
    rt_index_run_clipped(part, data[0], strides[0], data[1] + offset, strides[1], n);
    return;
  }
  char *dp[RT_INDEX_BATCH], *xp[RT_INDEX_BATCH];
  if (k == 1 && w->index_dtype[0] == NRT_INT64) {
    SINGLE_INDEX_LOOP(int64_t);
    return;
  }
  if (k == 1 && w->index_dtype[0] == NRT_INT32) {
    SINGLE_INDEX_LOOP(int32_t);
    return;
  }
  for (int64_t i = 0; i < n;) {
    int64_t end = n - i > RT_INDEX_BATCH ? i + RT_INDEX_BATCH : n, m = 0;
    for (; i < end; i++) {
      int64_t offset = 0;
      for (int j = 0; j < k; j++) {
        int64_t v = rt_index_checked(w, j, rt_index_load(data[2 + j] + i * strides[2 + j], w->index_dtype[j]));
        if (v < 0) goto fail;
        offset += v * w->step[j];
      }
      char *x = data[1] + i * strides[1] + offset;
      if (!in_part(part, x)) continue;
      dp[m] = data[0] + i * strides[0];
      xp[m++] = x;
    }
    if (m) part->batch(part, dp, xp, m);
  }
  return;
fail:
  atomic_store_explicit(&w->failed, 1, memory_order_relaxed);
}

void rt_index_walk_range(rt_index_part *part, int64_t begin, int64_t end) {
  rt_plan_run(&part->walk->plan, begin, end, walk_loop, part);
}

/* ---- finding the first bad index ------------------------------------- */

typedef struct first_bad {
  const rt_index_walk *walk;
  int found;
  int index;     /* which index tensor */
  int64_t value;
} first_bad;

static void find_loop(char **data, const int64_t *strides, int64_t n, void *arg) {
  first_bad *f = arg;
  const rt_index_walk *w = f->walk;
  for (int64_t i = 0; i < n && !f->found; i++)
    for (int j = 0; j < w->k; j++) {
      int64_t v = rt_index_load(data[2 + j] + i * strides[2 + j], w->index_dtype[j]);
      if (rt_index_checked(w, j, v) < 0) {
        f->found = 1;
        f->index = j;
        f->value = v;
        return;
      }
    }
}

nrt_status rt_index_walk_status(rt_index_walk *w) {
  if (!atomic_load(&w->failed)) return NRT_SUCCESS;
  first_bad f = {.walk = w};
  rt_plan_run(&w->plan, 0, w->plan.numel, find_loop, &f);
  if (!f.found) return rt_fail(NRT_ERROR_INTERNAL, "%s: an index check failed but no bad index was found", w->op);
  return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension %lld with size %lld",
                 w->op, (long long)f.value, (long long)w->dim[f.index], (long long)w->bound[f.index]);
}
