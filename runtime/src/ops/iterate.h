/* The strided N-d iteration engine (first form: serial).
 *
 * Kernels describe their work as an inner loop over one dimension; the
 * engine walks the other dimensions. Views must share one shape (broadcast
 * inputs carry stride 0). Size-1 dimensions are dropped, dimensions are
 * ordered so the first operand (the output) is walked in memory order, and
 * adjacent dimensions that are contiguous for every operand are merged, so a
 * contiguous tensor of any rank becomes a single call of the inner loop.
 */
#ifndef NEURONRT_OPS_ITERATE_H
#define NEURONRT_OPS_ITERATE_H

#include <stdint.h>
#include "neuronrt/op.h"

/* data[k] points at operand k's first element of the row; strides[k] is its
 * byte stride along the row; n elements. */
typedef void (*rt_inner_loop)(char **data, const int64_t *strides, int64_t n, void *ctx);

/* Walks nops views (data pointers must be host addresses). */
void rt_iterate(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx);

#endif
