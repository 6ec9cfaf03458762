/* Gather-like kernels: GATHER, INDEX_SELECT, INDEX (advanced indexing) and
 * TAKE.
 *
 * All of them read out[p] = src[p + sum_j idx_j[p] * stride_j]; they differ
 * only in what the shim puts in the views and in whether negative indices
 * wrap. Moving an element is moving its bytes, so the loops depend on the
 * element size alone. Rows that no index varies along are copied whole.
 */
#include <string.h>
#include "ops/index/index_walk.h"
#include "ops/engine/thread_pool.h"

#define COPY_LOOPS(BITS, T)                                                                   \
  static void copy_run_##BITS(rt_index_part *part, char *d, int64_t ds, char *x, int64_t xs, \
                              int64_t n) {                                                    \
    (void)part;                                                                               \
    if (ds == (int64_t)sizeof(T) && xs == (int64_t)sizeof(T)) {                               \
      memcpy(d, x, (size_t)n * sizeof(T));                                                    \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, x + i * xs, sizeof(T));                \
  }                                                                                           \
  static void copy_batch_##BITS(rt_index_part *part, char *const *d, char *const *x,         \
                                int64_t n) {                                                  \
    (void)part;                                                                               \
    for (int64_t i = 0; i < n; i++) memcpy(d[i], x[i], sizeof(T));                           \
  }
COPY_LOOPS(8, uint8_t)
COPY_LOOPS(16, uint16_t)
COPY_LOOPS(32, uint32_t)
COPY_LOOPS(64, uint64_t)

/* Whole rows chosen by one index: the plan is [rows, row] with the row
 * contiguous on both sides (index_select along dim 0, embedding, x[idx]).
 * Each row sits at a random place of a large table, so the rows a few
 * steps ahead are prefetched while the current one is copied. */
#define PREFETCH_ROWS 16
#define PREFETCH_MAX_BYTES 1024

static int is_row_gather(const rt_index_walk *w) {
  const rt_plan *p = &w->plan;
  int64_t size = (int64_t)w->elem_size;
  return w->k == 1 && p->ndim == 2 && p->strides[2][1] == 0 && p->strides[1][0] == 0 &&
         p->strides[0][1] == size && p->strides[1][1] == size;
}

static void row_range(int64_t begin, int64_t end, void *arg) {
  rt_index_walk *w = arg;
  const rt_plan *p = &w->plan;
  const int64_t row_bytes = p->shape[1] * (int64_t)w->elem_size, out_stride = p->strides[0][0];
  const int64_t index_stride = p->strides[2][0], step = w->step[0];
  const int64_t ahead_bytes = row_bytes < PREFETCH_MAX_BYTES ? row_bytes : PREFETCH_MAX_BYTES;
  const nrt_dtype t = w->index_dtype[0];
  char *out = p->data[0], *src = p->data[1];
  const char *index = p->data[2];
  for (int64_t r = begin; r < end; r++) {
    if (r + PREFETCH_ROWS < end) {
      int64_t ahead = rt_index_checked(w, 0, rt_index_load(index + (r + PREFETCH_ROWS) * index_stride, t));
      if (ahead >= 0)
        for (int64_t b = 0; b < ahead_bytes; b += 64) __builtin_prefetch(src + ahead * step + b);
    }
    int64_t v = rt_index_checked(w, 0, rt_index_load(index + r * index_stride, t));
    if (v < 0) {
      atomic_store_explicit(&w->failed, 1, memory_order_relaxed);
      return;
    }
    memcpy(out + r * out_stride, src + v * step, (size_t)row_bytes);
  }
}

/* Elements chosen by one index along a single (coalesced) dim: x[idx] and
 * index_select of 1-d tensors, gather of contiguous 1-d views. One plain
 * loop per element size and index dtype, which leaves the cache misses to
 * overlap in the out-of-order core. */
static int is_element_gather(const rt_index_walk *w) {
  return w->k == 1 && w->plan.ndim == 1 && w->plan.strides[1][0] == 0 &&
         (w->index_dtype[0] == NRT_INT64 || w->index_dtype[0] == NRT_INT32);
}

#define ELEMENT_PREFETCH 32

#define ELEMENT_LOOP(T, I)                                                           \
  for (int64_t i = begin; i < end; i++) {                                            \
    if (i + ELEMENT_PREFETCH < end) {                                                \
      int64_t ahead = *(const I *)(index + (i + ELEMENT_PREFETCH) * index_stride);   \
      if ((uint64_t)ahead < (uint64_t)bound) __builtin_prefetch(src + ahead * step); \
    }                                                                                \
    int64_t v = *(const I *)(index + i * index_stride);                              \
    if (v < 0 && wrap) v += bound;                                                   \
    if ((uint64_t)v >= (uint64_t)bound) {                                            \
      atomic_store_explicit(&w->failed, 1, memory_order_relaxed);                    \
      return;                                                                        \
    }                                                                                \
    memcpy(out + i * out_stride, src + v * step, sizeof(T));                         \
  }

#define ELEMENT_CASES(I)                                        \
  switch (w->elem_size) {                                       \
    case 1: ELEMENT_LOOP(uint8_t, I) return;                    \
    case 2: ELEMENT_LOOP(uint16_t, I) return;                   \
    case 4: ELEMENT_LOOP(uint32_t, I) return;                   \
    default: ELEMENT_LOOP(uint64_t, I) return;                  \
  }

static void element_range(int64_t begin, int64_t end, void *arg) {
  rt_index_walk *w = arg;
  const rt_plan *p = &w->plan;
  const int64_t out_stride = p->strides[0][0], index_stride = p->strides[2][0];
  const int64_t bound = w->bound[0], step = w->step[0];
  const int wrap = w->wrap;
  char *out = p->data[0], *src = p->data[1];
  const char *index = p->data[2];
  if (w->index_dtype[0] == NRT_INT64)
    ELEMENT_CASES(int64_t)
  else
    ELEMENT_CASES(int32_t)
}

static void gather_range(int64_t begin, int64_t end, void *arg) {
  rt_index_part part = *(const rt_index_part *)arg;
  rt_index_walk_range(&part, begin, end);
}

static nrt_status run_gather(const nrt_op *op, int wrap) {
  if (op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects one output", nrt_op_name(op->code));
  rt_index_walk w;
  nrt_status s = rt_index_walk_init(&w, op, 0, 1, 0, wrap);
  if (s) return s;
  if (is_row_gather(&w)) {
    int64_t row = w.plan.shape[1];
    rt_parallel_for(w.plan.shape[0], row >= RT_PARALLEL_GRAIN ? 1 : RT_PARALLEL_GRAIN / row, row_range, &w);
    return rt_index_walk_status(&w);
  }
  if (is_element_gather(&w)) {
    rt_parallel_for(w.plan.numel, RT_PARALLEL_GRAIN, element_range, &w);
    return rt_index_walk_status(&w);
  }
  rt_index_part part = {.walk = &w};
  switch (w.elem_size) {
    case 1: part.run = copy_run_8, part.batch = copy_batch_8; break;
    case 2: part.run = copy_run_16, part.batch = copy_batch_16; break;
    case 4: part.run = copy_run_32, part.batch = copy_batch_32; break;
    default: part.run = copy_run_64, part.batch = copy_batch_64; break;
  }
  rt_parallel_for(w.plan.numel, RT_PARALLEL_GRAIN, gather_range, &part);
  return rt_index_walk_status(&w);
}

nrt_status rt_kernel_gather(const nrt_op *op) { return run_gather(op, 0); }
nrt_status rt_kernel_index_select(const nrt_op *op) { return run_gather(op, 0); }
nrt_status rt_kernel_index(const nrt_op *op) { return run_gather(op, 1); }
nrt_status rt_kernel_take(const nrt_op *op) { return run_gather(op, 1); }
