/* Activation functions and their gradients, float32 and float64 (float16
 * and bfloat16 computed in float32, except GELU and SiLU: exact tables).
 * Formulas follow PyTorch's CPU kernels (the same branches and constants)
 * so that results agree to rounding; float32 GELU, SiLU and sigmoid-based
 * ones use the vectorisable vmath.h.
 *
 * Gradient ops take (grad_in, grad_out, x): in EXPR, a is grad_out and b
 * the forward input (or result, where the op says so).
 */
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"
#include "ops/engine/vmath.h"
#include "ops/pointwise/float_exprs.h"

#define SQRT1_2 0.70710678118654752440
#define GELU_PDF_SCALE 0.39894228040143267794 /* 1 / sqrt(2 pi) */
#define GELU_TANH_BETA 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_TANH_KAPPA 0.044715

#define DEFINE_FLOAT_KERNEL(NAME) RT_DEFINE_TABLE_KERNEL(NAME, RT_FLOAT_TABLE)

#define DEFINE_UNARY(NAME, F32, F64)                 \
  RT_UNARY_LOOP(NAME##_f32, float, float, F32)       \
  RT_UNARY_LOOP(NAME##_f64, double, double, F64)     \
  DEFINE_FLOAT_KERNEL(NAME)

/* Gradients run in training's bfloat16 passes: in-register 16-bit loops. */
#define DEFINE_BACKWARD(NAME, F32, F64)              \
  RT_BINARY_LOOP(NAME##_f32, float, float, F32)      \
  RT_BINARY_LOOP(NAME##_f64, double, double, F64)    \
  RT_BINARY_LOOPS16(NAME, F32)                       \
  RT_DEFINE_TABLE_KERNEL16(NAME, RT_FLOAT_TABLE)

/* Scalar k in the loop's type. */
#define S(T, k) ((T)sc->f[k])

/* tanh(softplus(x)) = tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2);
 * 1 where e^x (e^x + 2) would overflow. */
RT_VM_INLINE float tanh_softplusf(float x) {
  float e = rt_vm_expf(x);
  float n = e * (e + 2.0f);
  return x > 40.0f ? 1.0f : n / (n + 2.0f);
}

/* ---- forward ------------------------------------------------------------ */

DEFINE_UNARY(leaky_relu, RT_EXPR_LEAKY_RELU, x > 0 ? x : x * S(double, 0))

/* scalars [alpha, scale, input_scale] */
#define ELU(T) (x <= 0 ? expm1(x * S(T, 2)) * (S(T, 0) * S(T, 1)) : x * S(T, 1))
DEFINE_UNARY(elu, ELU(float), ELU(double))

/* float16/bfloat16 go through tables of exact results (RT_DEFINE_TABLE16). */
#define DEFINE_UNARY_TABLE16(NAME, F32, F64_FN)                 \
  RT_UNARY_LOOP(NAME##_f32, float, float, F32)                  \
  DEFINE_UNARY_TABLE16_(NAME, F64_FN)
/* The same with a float32 loop that takes a tame twin per block. */
#define DEFINE_UNARY_TABLE16_TAME(NAME, BOUND_BITS, TAME, F32, F64_FN) \
  RT_UNARY_LOOP_TAME(NAME##_f32, BOUND_BITS, TAME, F32)         \
  DEFINE_UNARY_TABLE16_(NAME, F64_FN)
#define DEFINE_UNARY_TABLE16_(NAME, F64_FN)                     \
  static double NAME##_d(double x) { return F64_FN; }           \
  RT_DEFINE_TABLE16(NAME, NAME##_d)                             \
  RT_UNARY_LOOP(NAME##_f64, double, double, NAME##_d(x))        \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {               \
    static const rt_loop_table loops = RT_FLOAT_TABLE(NAME);       \
    if (rt_is_16bit_float(op->compute_dtype)) return NAME##_16bit(op); \
    return rt_run_pointwise(op, loops, -1);                     \
  }

/* float32 GELU and SiLU: blocks within |x| <= 13 (GELU) or 86 (SiLU), all
 * of a transformer's activations, skip the exponential's clamps and split
 * scalings and GELU's tail selects, with the same bits (GELU's AVX-512 loop
 * 75 -> 50 instructions per 16 values; 8192x768 on a Zen 4, one thread:
 * GELU 5.5 -> 4.3 ms, SiLU 3.6 -> 2.1 ms). */
DEFINE_UNARY_TABLE16_TAME(gelu, RT_VM_GELU_TAME_BITS, rt_vm_geluf_tame(x), RT_EXPR_F32_GELU,
                          0.5 * x * erfc(-x * SQRT1_2))
DEFINE_UNARY_TABLE16(gelu_tanh, RT_EXPR_F32_GELU_TANH,
                     x / (1.0 + exp(-2.0 * GELU_TANH_BETA * (x + GELU_TANH_KAPPA * (x * x * x)))))
DEFINE_UNARY_TABLE16_TAME(silu, RT_VM_SILU_TAME_BITS, rt_vm_siluf_tame(x), RT_EXPR_F32_SILU,
                          x / (1.0 + exp(-x)))
DEFINE_UNARY(mish, x * tanh_softplusf(x), x * tanh(log1p(exp(x))))

/* x * relu6(x + 3) / 6; NaN passes both clamps. */
#define RELU6_OF(T, v) ((v) < (T)0 ? (T)0 : (v) > (T)6 ? (T)6 : (v))
DEFINE_UNARY(hardswish, x * RELU6_OF(float, x + 3.0f) / 6.0f, x * RELU6_OF(double, x + 3.0) / 6.0)
DEFINE_UNARY(hardsigmoid, RELU6_OF(float, x + 3.0f) / 6.0f, RELU6_OF(double, x + 3.0) / 6.0)

/* scalars [beta, threshold]: linear above the threshold */
#define SOFTPLUS(T) (x * S(T, 0) > S(T, 1) ? x : log1p(exp(x * S(T, 0))) / S(T, 0))
DEFINE_UNARY(softplus, SOFTPLUS(float), SOFTPLUS(double))

/* log_sigmoid: operands (out, buffer, x); buffer = e^-|x| is what the
 * backward reads. */
RT_SIMD_VOID(log_sigmoid_f32, (char **data, const int64_t *strides, int64_t n, void *ctx),
                              (data, strides, n, ctx)) {
  (void)ctx;
  for (int64_t i = 0; i < n; i++) {
    float x = RT_LOAD(float, data[2] + i * strides[2]);
    float z = rt_vm_expf(-fabsf(x));
    RT_STORE(float, data[1] + i * strides[1], z);
    RT_STORE(float, data[0] + i * strides[0], (x < 0.0f ? x : 0.0f) - log1pf(z));
  }
}

static void log_sigmoid_f64(char **data, const int64_t *strides, int64_t n, void *ctx) {
  (void)ctx;
  for (int64_t i = 0; i < n; i++) {
    double x = RT_LOAD(double, data[2] + i * strides[2]);
    double z = exp(-fabs(x));
    RT_STORE(double, data[1] + i * strides[1], z);
    RT_STORE(double, data[0] + i * strides[0], (x < 0.0 ? x : 0.0) - log1p(z));
  }
}

nrt_status rt_kernel_log_sigmoid(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(log_sigmoid);
  if (op->num_outputs != 2 || op->num_operands != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "log_sigmoid: expects operands (out, buffer, x)");
  return rt_run_pointwise(op, loops, -1);
}

/* ---- gradients: a = grad_out, b = x ------------------------------------ */

DEFINE_BACKWARD(leaky_relu_backward, b > 0 ? a : a * S(float, 0), b > 0 ? a : a * S(double, 0))

/* scalars [alpha, scale, input_scale, x_is_result] */
#define ELU_BACKWARD(T)                                                              \
  (sc->i[3] ? (b <= 0 ? a * S(T, 2) * (b + S(T, 0) * S(T, 1)) : a * S(T, 1))         \
            : (b <= 0 ? a * S(T, 2) * (S(T, 0) * S(T, 1)) * exp(b * S(T, 2)) : a * S(T, 1)))
DEFINE_BACKWARD(elu_backward, ELU_BACKWARD(float), ELU_BACKWARD(double))

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
DEFINE_BACKWARD(gelu_backward, RT_EXPR_F32_GELU_BACKWARD,
                a * (0.5 * erfc(-b * SQRT1_2) + b * (GELU_PDF_SCALE * exp(-0.5 * b * b))))

/* d/dx x/2 (1 + tanh(u)), u = beta (x + kappa x^3) */
#define GELU_TANH_BACKWARD(T, TANH)                                                          \
  a * ((T)0.5 * ((T)1 + TANH((T)GELU_TANH_BETA * (b + (T)GELU_TANH_KAPPA * (b * b * b)))) +  \
       (T)0.5 * b *                                                                          \
           ((T)1 - TANH((T)GELU_TANH_BETA * (b + (T)GELU_TANH_KAPPA * (b * b * b))) *        \
                       TANH((T)GELU_TANH_BETA * (b + (T)GELU_TANH_KAPPA * (b * b * b)))) *   \
           (T)GELU_TANH_BETA * ((T)1 + (T)3 * (T)GELU_TANH_KAPPA * b * b))
DEFINE_BACKWARD(gelu_tanh_backward, GELU_TANH_BACKWARD(float, rt_vm_tanhf),
                GELU_TANH_BACKWARD(double, tanh))

/* s (1 + x (1 - s)), s = sigmoid(x) */
#define SILU_BACKWARD(T, SIG) (a * SIG(b) * ((T)1 + b * ((T)1 - SIG(b))))
#define SIGMOID_D(v) (1.0 / (1.0 + exp(-(v))))
DEFINE_BACKWARD(silu_backward, RT_EXPR_F32_SILU_BACKWARD, SILU_BACKWARD(double, SIGMOID_D))

/* tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x) */
#define TANH_SOFTPLUS_D(v) tanh(log1p(exp(v)))
#define MISH_BACKWARD(T, SIG, TSP) \
  (a * (TSP(b) + b * SIG(b) * ((T)1 - TSP(b) * TSP(b))))
DEFINE_BACKWARD(mish_backward, MISH_BACKWARD(float, rt_vm_sigmoidf, tanh_softplusf),
                MISH_BACKWARD(double, SIGMOID_D, TANH_SOFTPLUS_D))

#define HARDSWISH_BACKWARD(T) (b <= (T)-3 ? (T)0 : b < (T)3 ? a * (b / (T)3 + (T)0.5) : a)
DEFINE_BACKWARD(hardswish_backward, HARDSWISH_BACKWARD(float), HARDSWISH_BACKWARD(double))

/* 1/6 rounded to float even for double, as PyTorch's kernel has it */
#define HARDSIGMOID_BACKWARD(T) (b > (T)-3 && b < (T)3 ? a * (T)(1.0f / 6.0f) : (T)0)
DEFINE_BACKWARD(hardsigmoid_backward, HARDSIGMOID_BACKWARD(float), HARDSIGMOID_BACKWARD(double))

/* b is the forward result y: sigmoid' = (1 - y) y, tanh' = 1 - y^2 */
DEFINE_BACKWARD(sigmoid_backward, RT_EXPR_F32_SIGMOID_BACKWARD, a * (1.0 - b) * b)
DEFINE_BACKWARD(tanh_backward, RT_EXPR_F32_TANH_BACKWARD, a * (1.0 - b * b))

/* scalars [min, max] */
#define HARDTANH_BACKWARD(T) (b <= S(T, 0) || b >= S(T, 1) ? (T)0 : a)
DEFINE_BACKWARD(hardtanh_backward, HARDTANH_BACKWARD(float), HARDTANH_BACKWARD(double))

/* scalars [beta, threshold] */
#define SOFTPLUS_BACKWARD(T) \
  (b * S(T, 0) > S(T, 1) ? a : a * exp(b * S(T, 0)) / (exp(b * S(T, 0)) + (T)1))
DEFINE_BACKWARD(softplus_backward, SOFTPLUS_BACKWARD(float), SOFTPLUS_BACKWARD(double))

/* threshold_backward: scalars [threshold]; every numeric dtype. */
#define THRESHOLD_BACKWARD_INT(T) RT_BINARY_LOOP(threshold_backward_##T, T##_t, T##_t, \
                                                 b <= (T##_t)sc->i[0] ? 0 : a)
THRESHOLD_BACKWARD_INT(uint8)
THRESHOLD_BACKWARD_INT(int8)
THRESHOLD_BACKWARD_INT(int16)
THRESHOLD_BACKWARD_INT(int32)
THRESHOLD_BACKWARD_INT(int64)
RT_BINARY_LOOP(threshold_backward_f32, float, float, RT_EXPR_F32_THRESHOLD_BACKWARD)
RT_BINARY_LOOP(threshold_backward_f64, double, double, b <= S(double, 0) ? 0.0 : a)
RT_BINARY_LOOPS16(threshold_backward, b <= S(float, 0) ? 0.0f : a)

/* Threshold 0 (relu's backward) on float16/bfloat16 bits: b <= 0 when b is
 * +0 or has its sign set and is not NaN; then +0, else the gradient a as
 * the float32 loops' rounding back leaves it (a NaN becomes bfloat16
 * 0x7fc0, float16 its sign with 0x7e00; every other value is unchanged). */
#define TB0_LE0(b, NANBITS) (((b) & 0x7fffu) == 0u || (((b) & 0x8000u) && ((b) & 0x7fffu) <= (NANBITS)))
#define TB0_BF16(a, b) (uint16_t)(TB0_LE0(b, 0x7f80u) ? 0u : RT_BF16_AS_ROUNDED(a))
#define TB0_F16(a, b) (uint16_t)(TB0_LE0(b, 0x7c00u) ? 0u : RT_F16_AS_ROUNDED(a))
RT_BINARY_LOOP(threshold_backward0_bf16n, uint16_t, uint16_t, TB0_BF16(a, b))
RT_BINARY_LOOP(threshold_backward0_f16n, uint16_t, uint16_t, TB0_F16(a, b))

static const rt_loop_table threshold_backward_loops = {
    [NRT_UINT8] = threshold_backward_uint8, [NRT_INT8] = threshold_backward_int8,
    [NRT_INT16] = threshold_backward_int16, [NRT_INT32] = threshold_backward_int32,
    [NRT_INT64] = threshold_backward_int64, [NRT_FLOAT32] = threshold_backward_f32,
    [NRT_FLOAT64] = threshold_backward_f64};

nrt_status rt_kernel_threshold_backward_reference(const nrt_op *op) {
  return rt_run_pointwise16(op, threshold_backward_loops, threshold_backward_bf16n,
                            threshold_backward_f16n);
}

nrt_status rt_kernel_threshold_backward(const nrt_op *op) {
  const nrt_scalar *t = &op->scalars[0];
  if (op->num_scalars >= 1 && (t->is_float ? t->f == 0.0 : t->i == 0))
    return rt_run_pointwise16(op, threshold_backward_loops, threshold_backward0_bf16n,
                              threshold_backward0_f16n);
  return rt_kernel_threshold_backward_reference(op);
}

/* log_sigmoid_backward (grad_in, grad_out, x, buffer): with z = buffer,
 * grad * (x < 0 ? 1 - z / (1 + z) : z / (1 + z)). */
#define LOG_SIGMOID_BACKWARD(T) \
  (b < (T)0 ? a * ((T)1 - c / ((T)1 + c)) : a * (c / ((T)1 + c)))
RT_TERNARY_LOOP(log_sigmoid_backward_f32, float, float, float, float, LOG_SIGMOID_BACKWARD(float))
RT_TERNARY_LOOP(log_sigmoid_backward_f64, double, double, double, double,
                LOG_SIGMOID_BACKWARD(double))
DEFINE_FLOAT_KERNEL(log_sigmoid_backward)
