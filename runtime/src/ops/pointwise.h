/* Shared entry points of the pointwise kernel files. */
#ifndef NEURONRT_OPS_POINTWISE_INTERNAL_H
#define NEURONRT_OPS_POINTWISE_INTERNAL_H

#include "../internal.h"
#include <string.h>
#include "elementwise.h"

/* Loops of one op indexed by compute dtype; NULL where unsupported. */
typedef rt_inner_loop rt_loop_table[NRT_DTYPE_COUNT];

/* Runs op with the loop for its compute dtype. Every input is presented in
 * the compute dtype; outputs too, unless out_dtype >= 0 (e.g. NRT_BOOL for
 * comparisons). Fails naming the op and dtype when no loop exists. */
nrt_status rt_run_pointwise(const nrt_op *op, const rt_loop_table loops, int out_dtype);

#endif
