/* Pointwise ops. Operands: [outputs..., inputs...], all of one shape (inputs
 * broadcast with stride 0, possibly immediates). The kernel computes in
 * op->compute_dtype (see op.h): float16 and bfloat16 in float32, rounded
 * once on the way out. Inputs stored in other dtypes are converted to the
 * compute dtype; outputs are converted from the result dtype stated below.
 * The caller (PyTorch's type promotion in the shim) picks compute_dtype;
 * an op given a compute dtype it has no loop for fails with
 * NRT_ERROR_UNSUPPORTED. Integer arithmetic wraps. "float" below means the
 * floating dtypes only (the caller promotes integer inputs first). EXP,
 * GELU, GELU_TANH and SILU of float16/bfloat16 give the exact result
 * rounded to the type.
 */
#ifndef NEURONRT_OPS_POINTWISE_H
#define NEURONRT_OPS_POINTWISE_H

/* Unary float math (out, x): out = f(x); float. SIGMOID is 1/(1+e^-x),
 * FRAC x - trunc(x). */
#define NRT_UNARY_FLOAT_OPS(X)                                                              \
  X(EXP, exp) X(EXP2, exp2) X(EXPM1, expm1) X(LOG, log) X(LOG2, log2) X(LOG10, log10)       \
  X(LOG1P, log1p) X(SQRT, sqrt) X(RSQRT, rsqrt) X(RECIPROCAL, reciprocal) X(SIN, sin)       \
  X(COS, cos) X(TAN, tan) X(ASIN, asin) X(ACOS, acos) X(ATAN, atan) X(SINH, sinh)           \
  X(COSH, cosh) X(TANH, tanh) X(ASINH, asinh) X(ACOSH, acosh) X(ATANH, atanh) X(ERF, erf)   \
  X(ERFC, erfc) X(ERFINV, erfinv) X(SIGMOID, sigmoid) X(FRAC, frac)

/* Unary, result in the input's dtype (out, x):
 *   NEG ABS SIGN RELU         numeric (SIGN also bool); integers wrap
 *   FLOOR CEIL ROUND TRUNC    numeric; the identity on integers; ROUND is
 *                             half to even
 *   ROUND_DECIMALS            float; scalars [decimals]
 *   BITWISE_NOT               integral and bool
 *   NAN_TO_NUM                any; scalars [nan, posinf, neginf] (float)
 *   HARDTANH                  numeric; scalars [min, max]: clamp (a NaN
 *                             bound gives NaN)
 *   THRESHOLD                 numeric; scalars [threshold, value]:
 *                             x <= threshold ? value : x
 * Unary tests with a bool result (out: bool, x any dtype):
 *   ISNAN ISINF ISPOSINF ISNEGINF SIGNBIT LOGICAL_NOT */
#define NRT_UNARY_OPS(X)                                                                    \
  X(NEG, neg) X(ABS, abs) X(SIGN, sign) X(RELU, relu) X(FLOOR, floor) X(CEIL, ceil)         \
  X(ROUND, round) X(TRUNC, trunc) X(ROUND_DECIMALS, round_decimals)                         \
  X(BITWISE_NOT, bitwise_not) X(NAN_TO_NUM, nan_to_num) X(HARDTANH, hardtanh)               \
  X(THRESHOLD, threshold) X(ISNAN, isnan) X(ISINF, isinf) X(ISPOSINF, isposinf)             \
  X(ISNEGINF, isneginf) X(SIGNBIT, signbit) X(LOGICAL_NOT, logical_not)

/* Activations (out, x), float:
 *   LEAKY_RELU   scalars [negative_slope]
 *   ELU          scalars [alpha, scale, input_scale]
 *   GELU GELU_TANH (the tanh approximation) SILU MISH HARDSWISH HARDSIGMOID
 *   SOFTPLUS     scalars [beta, threshold]
 *   LOG_SIGMOID  operands (out, buffer, x): buffer = exp(-|x|),
 *                out = min(x, 0) - log1p(buffer)
 * Their gradients (grad_in, grad_out, x), float; x is the forward input,
 * or its result where noted:
 *   LEAKY_RELU_BACKWARD [negative_slope]   ELU_BACKWARD [alpha, scale,
 *   input_scale, x_is_result]   GELU_BACKWARD GELU_TANH_BACKWARD
 *   SILU_BACKWARD MISH_BACKWARD HARDSWISH_BACKWARD HARDSIGMOID_BACKWARD
 *   SIGMOID_BACKWARD TANH_BACKWARD (x = result)
 *   HARDTANH_BACKWARD [min, max]   SOFTPLUS_BACKWARD [beta, threshold]
 *   THRESHOLD_BACKWARD [threshold] (numeric): x <= threshold ? 0 : grad
 *   LOG_SIGMOID_BACKWARD operands (grad_in, grad_out, x, buffer) */
#define NRT_ACTIVATION_OPS(X)                                                               \
  X(LEAKY_RELU, leaky_relu) X(ELU, elu) X(GELU, gelu) X(GELU_TANH, gelu_tanh) X(SILU, silu) \
  X(MISH, mish) X(HARDSWISH, hardswish) X(HARDSIGMOID, hardsigmoid) X(SOFTPLUS, softplus)   \
  X(LOG_SIGMOID, log_sigmoid) X(LEAKY_RELU_BACKWARD, leaky_relu_backward)                   \
  X(ELU_BACKWARD, elu_backward) X(GELU_BACKWARD, gelu_backward)                             \
  X(GELU_TANH_BACKWARD, gelu_tanh_backward) X(SILU_BACKWARD, silu_backward)                 \
  X(MISH_BACKWARD, mish_backward) X(HARDSWISH_BACKWARD, hardswish_backward)                 \
  X(HARDSIGMOID_BACKWARD, hardsigmoid_backward) X(SIGMOID_BACKWARD, sigmoid_backward)       \
  X(TANH_BACKWARD, tanh_backward) X(HARDTANH_BACKWARD, hardtanh_backward)                   \
  X(SOFTPLUS_BACKWARD, softplus_backward) X(THRESHOLD_BACKWARD, threshold_backward)         \
  X(LOG_SIGMOID_BACKWARD, log_sigmoid_backward)

/* Binary arithmetic (out, a, b), result in the compute dtype:
 *   ADD        scalars [alpha]: a + alpha * b; any dtype (bool: or); for
 *              float16/bfloat16 alpha is rounded to that type first.
 *              Also complex64/complex128 (operands all of that dtype, no
 *              immediates), scalars [alpha, alpha_imag]: the CPU's complex
 *              product alpha * b, no infinity recovery (a real alpha's 0i
 *              times an infinite part is NaN)
 *   MUL        any dtype (bool: and)
 *   DIV        float: a / b
 *   DIV_TRUNC DIV_FLOOR REMAINDER FMOD   numeric; integer division by zero
 *              fails with NRT_ERROR_ARITHMETIC. float16/bfloat16 DIV_TRUNC
 *              and DIV_FLOOR round each step to the storage type unless b
 *              is a single broadcast value, as PyTorch's CPU kernels do
 *   POW        numeric; integers: negative exponents give 0 except for
 *              bases 1 and -1
 *   ATAN2 HYPOT COPYSIGN                 float
 *   MAXIMUM MINIMUM  any dtype; NaN wins
 *   FMAX FMIN        any dtype; NaN loses
 *   BITWISE_AND BITWISE_OR BITWISE_XOR   integral and bool
 *   LSHIFT RSHIFT    integral; shifts past the width give 0 (or the sign)
 *   LERP       float; scalars [weight]: a + weight * (b - a)
 * Comparisons and logical ops (out: bool, a, b), compute any dtype:
 *   EQ NE LT LE GT GE LOGICAL_AND LOGICAL_OR LOGICAL_XOR */
#define NRT_BINARY_OPS(X)                                                                   \
  X(ADD, add) X(MUL, mul) X(DIV, div) X(DIV_TRUNC, div_trunc) X(DIV_FLOOR, div_floor)       \
  X(REMAINDER, remainder) X(FMOD, fmod) X(POW, pow) X(ATAN2, atan2) X(HYPOT, hypot)         \
  X(COPYSIGN, copysign) X(MAXIMUM, maximum) X(MINIMUM, minimum) X(FMAX, fmax) X(FMIN, fmin) \
  X(BITWISE_AND, bitwise_and) X(BITWISE_OR, bitwise_or) X(BITWISE_XOR, bitwise_xor)         \
  X(LSHIFT, lshift) X(RSHIFT, rshift) X(LERP, lerp)                                         \
  X(EQ, eq) X(NE, ne) X(LT, lt) X(LE, le) X(GT, gt) X(GE, ge)                               \
  X(LOGICAL_AND, logical_and) X(LOGICAL_OR, logical_or) X(LOGICAL_XOR, logical_xor)

/* Ternary:
 *   WHERE        (out, cond: bool, a, b): cond ? a : b, any dtype; values
 *                move unchanged (bits of float16 NaNs included)
 *   LERP_TENSOR  (out, a, b, weight), float
 *   ADDCMUL      (out, a, b, c) scalars [value]: a + value * b * c, numeric
 *   ADDCDIV      (out, a, b, c) scalars [value]: a + value * b / c, float
 *   CLAMP        (out, x, lo, hi): min(max(x, lo), hi), numeric; NaN in
 *                any operand gives NaN */
#define NRT_TERNARY_OPS(X) \
  X(WHERE, where) X(LERP_TENSOR, lerp_tensor) X(ADDCMUL, addcmul) X(ADDCDIV, addcdiv) X(CLAMP, clamp)

/* Special math, results in the compute dtype:
 *   SINC ENTR (out, x)          float: sin(pi x) / (pi x) (1 at 0);
 *                               -x log x (0 at 0, -inf below, NaN kept)
 *   HARDSHRINK SOFTSHRINK (out, x) float; scalars [lambd]: 0 on
 *                               [-lambd, lambd], else x (HARDSHRINK) or x
 *                               moved toward 0 by lambd (SOFTSHRINK)
 *   SHRINK_BACKWARD (grad_in, grad_out, x) float; scalars [lambd]: 0 where
 *                               x is in [-lambd, lambd], else grad_out
 *                               (SOFTSHRINK's 0 is x * 0: signed, NaN kept)
 *   LOGADDEXP LOGADDEXP2 (out, a, b)  float: log(e^a + e^b), base 2 alike
 *   XLOG1PY (out, a, b)         float: a log1p(b); 0 at a = 0 unless b is NaN
 *   NEXTAFTER (out, a, b)       float: the next value after a toward b, in
 *                               the compute dtype itself (16-bit types step
 *                               their own bits)
 *   HEAVISIDE (out, a, b)       any dtype: a == 0 ? b : a > 0
 *   GCD LCM (out, a, b)         integral: PyTorch's Euclid on |a|, |b|
 *                               (wrapping: INT_MIN stays negative); LCM
 *                               |a / gcd * b|, 0 when gcd is 0
 *   GLU (out, a, b)             float: a * sigmoid(b) (the halves of glu's
 *                               input, as two views)
 *   GLU_BACKWARD (grad_a, grad_b, grad_out, a, b) float: grad_a =
 *                               grad_out s, grad_b = grad_out a s (1 - s),
 *                               s = sigmoid(b)
 *   FREXP (mantissa, exponent, x) float: x = mantissa * 2^exponent with
 *                               |mantissa| in [0.5, 1) (C's frexp); the
 *                               exponent is computed as int32
 *   PRELU (out, x, w)           float: x > 0 ? x : w x (w broadcast to x)
 *   PRELU_BACKWARD (grad_x, grad_w, grad_out, x, w) float: grad_x =
 *                               x > 0 ? grad_out : w grad_out, grad_w =
 *                               x > 0 ? 0 : x grad_out, per element */
#define NRT_SPECIAL_OPS(X)                                                                  \
  X(SINC, sinc) X(ENTR, entr) X(HARDSHRINK, hardshrink) X(SOFTSHRINK, softshrink)           \
  X(SHRINK_BACKWARD, shrink_backward) X(LOGADDEXP, logaddexp) X(LOGADDEXP2, logaddexp2)     \
  X(XLOG1PY, xlog1py) X(NEXTAFTER, nextafter) X(HEAVISIDE, heaviside) X(GCD, gcd) X(LCM, lcm)  \
  X(GLU, glu) X(GLU_BACKWARD, glu_backward) X(FREXP, frexp) X(PRELU, prelu)                \
  X(PRELU_BACKWARD, prelu_backward)

#define NRT_POINTWISE_OPS(X) \
  NRT_UNARY_FLOAT_OPS(X)     \
  NRT_UNARY_OPS(X)           \
  NRT_ACTIVATION_OPS(X)      \
  NRT_BINARY_OPS(X)          \
  NRT_TERNARY_OPS(X)         \
  NRT_SPECIAL_OPS(X)

#endif
