/* Pointwise ops. Operands: [out, inputs...], all of one shape (inputs
 * broadcast with stride 0, possibly immediates). The kernel computes in
 * op->compute_dtype (see op.h); integer inputs of the float-only ops arrive
 * with compute_dtype already promoted to a float by the caller.
 *
 * Unary float ops (out, x), compute float32/float64:
 *   EXP LOG SQRT ... : out = f(x)
 * Binary arithmetic (out, a, b), compute any numeric dtype:
 *   ADD  scalars [alpha]  out = a + alpha * b
 *   MUL                   out = a * b
 * Comparisons (out: bool, a, b): EQ
 */
#ifndef NEURONRT_OPS_POINTWISE_H
#define NEURONRT_OPS_POINTWISE_H

#define NRT_UNARY_FLOAT_OPS(X) \
  X(EXP, exp)

#define NRT_BINARY_ARITH_OPS(X) \
  X(ADD, add)                   \
  X(MUL, mul)

#define NRT_COMPARISON_OPS(X) \
  X(EQ, eq)

#define NRT_POINTWISE_OPS(X) \
  NRT_UNARY_FLOAT_OPS(X)     \
  NRT_BINARY_ARITH_OPS(X)    \
  NRT_COMPARISON_OPS(X)

#endif
