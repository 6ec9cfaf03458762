/* Gather-like kernels: GATHER, INDEX_SELECT and INDEX (advanced indexing).
 *
 * All three read out[p] = src[p + sum_j idx_j[p] * stride_j]; they differ
 * only in what the shim puts in the views and in whether negative indices
 * wrap. Moving an element is moving its bytes, so the loops depend on the
 * element size alone. Rows that no index varies along (index_select of
 * table rows, embedding lookups) are copied whole by the run loop.
 */
#include <string.h>
#include "index_walk.h"
#include "thread_pool.h"

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
