/* Matrix products (see op_list.h).
 *
 *   GEMM  operands [out, a, b] or [out, a, b, cin]; scalars [alpha, beta]
 *         out = alpha * a @ b + beta * cin
 *
 * out is (M, N) or (T, M, N); a is (M, K) or (S, M, K) and b (K, N) or
 * (S, K, N), a and b with the same S (a 2-d operand counts as S = 1). A 3-d
 * out takes one product per item (T == S, bmm); a 2-d out with 3-d inputs
 * sums the S products (addbmm). cin has out's shape (zero strides
 * broadcast) and dtype; with beta == 0 it is not read and may be omitted.
 * Views may have any strides. a and b share one dtype: float32 and float64
 * compute in their own type, float16 and bfloat16 are accumulated in
 * float32 (as the Tensor engine does) and rounded once; integer dtypes
 * accumulate with wrap-around. out has a's dtype, or float32 for float16 /
 * bfloat16 inputs. out must not overlap a, b, or cin, except that cin may be
 * out itself (in-place forms). Results do not depend on the number of
 * kernel threads.
 */
#ifndef NEURONRT_OPS_GEMM_H
#define NEURONRT_OPS_GEMM_H

#define NRT_GEMM_OPS(X) \
  X(GEMM, gemm)

#endif
