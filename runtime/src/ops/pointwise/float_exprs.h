/* The float32 expressions of the pointwise ops that the fused register loop
 * (fuse/tape.c) evaluates too: one text, two users, so that a fused group
 * and the unfused kernels compute the same bits (the fusion contract).
 * Change an op's formula here and both follow.
 *
 * In an expression x is the input (unary), a and b the inputs (binary), sc
 * the op's rt_scalars; the type is that of x or a (the generic ones below
 * serve the float64 loops as well). Include <tgmath.h> and ops/engine/
 * vmath.h first: fabs and friends must resolve as in the kernel files. The
 * build compiles without floating-point contraction (ISO C11 mode), so no
 * multiply and add of neighbouring ops are fused into one rounding.
 */
#ifndef NEURONRT_OPS_FLOAT_EXPRS_H
#define NEURONRT_OPS_FLOAT_EXPRS_H

/* ADD: a + alpha * b, scalars [alpha] */
#define RT_EXPR_ADD (a + (__typeof__(a))sc->f[0] * b)
/* Two NaNs: a's (see pointwise_binary.c). */
#define RT_EXPR_MUL (a != a ? a : a * b)
#define RT_EXPR_DIV (a / b)
/* NaN wins */
#define RT_EXPR_MAXIMUM (a != a ? a : b != b ? b : a > b ? a : b)
#define RT_EXPR_MINIMUM (a != a ? a : b != b ? b : a < b ? a : b)

#define RT_EXPR_NEG (-x)
#define RT_EXPR_ABS fabs(x)
/* relu keeps NaN (x < 0 is false for it), as clamp_min(x, 0) does. */
#define RT_EXPR_RELU (x < 0 ? 0 : x)
/* hardtanh, scalars [min, max]: min(max(x, min), max); a NaN bound gives NaN. */
#define RT_EXPR_AT_LEAST_(T, LO) (x < (T)(LO) ? (T)(LO) : x)
#define RT_EXPR_CLAMP_(T, LO, HI) (RT_EXPR_AT_LEAST_(T, LO) > (T)(HI) ? (T)(HI) : RT_EXPR_AT_LEAST_(T, LO))
#define RT_EXPR_HARDTANH                                                       \
  (sc->f[0] != sc->f[0] || sc->f[1] != sc->f[1] ? (__typeof__(x))NAN           \
                                                : RT_EXPR_CLAMP_(__typeof__(x), sc->f[0], sc->f[1]))
/* scalars [negative_slope] */
#define RT_EXPR_LEAKY_RELU (x > 0 ? x : x * (__typeof__(x))sc->f[0])

/* float32 only (the float64 loops call libm) */
#define RT_EXPR_F32_EXP rt_vm_expf(x)
#define RT_EXPR_F32_LOG rt_vm_logf(x)
#define RT_EXPR_F32_TANH rt_vm_tanhf(x)
#define RT_EXPR_F32_ERF rt_vm_erff(x)
#define RT_EXPR_F32_SIGMOID rt_vm_sigmoidf(x)
#define RT_EXPR_F32_SQRT sqrtf(x)
#define RT_EXPR_F32_RSQRT (1.0f / sqrtf(x))
#define RT_EXPR_F32_RECIPROCAL (1.0f / x)
#define RT_EXPR_F32_GELU rt_vm_geluf(x)
#define RT_EXPR_F32_GELU_TANH rt_vm_gelu_tanhf(x)
#define RT_EXPR_F32_SILU rt_vm_siluf(x)

/* Gradients: a = grad_out, b = the forward result (sigmoid, tanh) or input. */
#define RT_EXPR_F32_SIGMOID_BACKWARD (a * (1.0f - b) * b)
#define RT_EXPR_F32_TANH_BACKWARD (a * (1.0f - b * b))
/* scalars [threshold] */
#define RT_EXPR_F32_THRESHOLD_BACKWARD (b <= (float)sc->f[0] ? 0.0f : a)
#define RT_EXPR_F32_SILU_BACKWARD \
  (a * rt_vm_sigmoidf(b) * (1.0f + b * (1.0f - rt_vm_sigmoidf(b))))
#define RT_EXPR_F32_GELU_BACKWARD (a * rt_vm_gelu_gradf(b))

#endif
