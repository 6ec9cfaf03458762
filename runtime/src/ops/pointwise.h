/* Shared entry points of the pointwise kernel files. */
#ifndef NEURONRT_OPS_POINTWISE_INTERNAL_H
#define NEURONRT_OPS_POINTWISE_INTERNAL_H

#include "../internal.h"
#include <string.h>
#include "elementwise.h"
#include "loops.h"

/* Loops of one op indexed by compute dtype; NULL where unsupported. The
 * float16 and bfloat16 slots are optional: when empty, the float32 loop
 * serves them. */
typedef rt_inner_loop rt_loop_table[NRT_DTYPE_COUNT];

/* Runs op with the loop for its compute dtype. Every input is presented in
 * the compute dtype; outputs too, unless out_dtype >= 0 (e.g. NRT_BOOL for
 * comparisons). Fails naming the op and dtype when no loop exists. */
nrt_status rt_run_pointwise(const nrt_op *op, const rt_loop_table loops, int out_dtype);

/* The loop for op's compute dtype from loops, or NULL after recording the
 * NRT_ERROR_UNSUPPORTED message. */
rt_inner_loop rt_pointwise_loop(const nrt_op *op, const rt_loop_table loops);

/* The general driver: checks the operands, then runs loop with operand k
 * presented in want[k] and ctx an rt_loop_ctx holding the op's scalars.
 * A fault raised by the loop fails the op with NRT_ERROR_ARITHMETIC. */
nrt_status rt_run_pointwise_as(const nrt_op *op, rt_inner_loop loop, const nrt_dtype *want);

/* True if operand k is a single value broadcast over the whole op. */
int rt_operand_is_scalar(const nrt_op *op, int k);

/* The value of operand k read as a double, if it is an immediate. */
int rt_immediate_value(const nrt_op *op, int k, double *value);

#endif
