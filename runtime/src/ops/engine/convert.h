/* Element conversion loops between every pair of dtypes. */
#ifndef NEURONRT_OPS_CONVERT_H
#define NEURONRT_OPS_CONVERT_H

#include "ops/engine/iterate.h"

/* rt_convert_loops[dst][src]: inner loop with operands (dst, src). */
extern const rt_inner_loop rt_convert_loops[NRT_DTYPE_COUNT][NRT_DTYPE_COUNT];

/* Writes the value of a scalar attribute, converted to dtype, to out
 * (nrt_dtype_size(dtype) bytes) by the same rules as the loops. */
void rt_convert_scalar(nrt_dtype dtype, const nrt_scalar *value, void *out);

#endif
