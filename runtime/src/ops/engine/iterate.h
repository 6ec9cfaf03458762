/* The strided N-d iteration engine.
 *
 * Kernels describe their work as an inner loop over one dimension; the
 * engine walks the other dimensions. Views must share one shape (broadcast
 * inputs carry stride 0). Size-1 dimensions are dropped, dimensions are
 * ordered so the first operand (the output) is walked in memory order, and
 * adjacent dimensions that are contiguous for every operand are merged, so a
 * contiguous tensor of any rank becomes a single run of the inner loop.
 * Large iterations are split into contiguous ranges of the walk order across
 * the kernel thread pool.
 */
#ifndef NEURONRT_OPS_ITERATE_H
#define NEURONRT_OPS_ITERATE_H

#include <stdint.h>
#include "neuronrt/op.h"

/* data[k] points at operand k's first element of the run; strides[k] is its
 * byte stride along the run; n elements. */
typedef void (*rt_inner_loop)(char **data, const int64_t *strides, int64_t n, void *ctx);

/* The walk: merged dims (outermost first) and byte strides per operand. */
typedef struct rt_plan {
  int nops;
  int ndim;
  int64_t numel;
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_OPERANDS][NRT_MAX_DIMS];
  char *data[NRT_MAX_OPERANDS];
} rt_plan;

/* Elements below which an iteration stays on one thread. */
#define RT_PARALLEL_GRAIN 32768

void rt_plan_build(int nops, const nrt_tensor_view *views, rt_plan *plan);
/* Runs loop over elements [begin, end) of the walk order. */
void rt_plan_run(const rt_plan *plan, int64_t begin, int64_t end, rt_inner_loop loop, void *ctx);

/* Walks nops views (host addresses), in parallel when large. loop must be
 * safe to call concurrently on disjoint ranges. */
void rt_iterate(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx);
/* The same on one thread. */
void rt_iterate_serial(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx);

#endif
