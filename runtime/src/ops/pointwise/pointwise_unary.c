/* Unary pointwise ops: float math, sign and rounding, clamps and tests.
 *
 * float32 exp, log, tanh, erf and sigmoid use the vectorisable versions of
 * vmath.h; the other float math calls libm per element. float16/bfloat16
 * arrive as float32 (the engine converts) and are rounded once on the way
 * out (relu, abs, neg, sign, hardtanh and threshold work on
 * their bits: bits16.c); their exp is an exact table. Integer negation and abs wrap. <tgmath.h> lets one expression
 * serve the float and double loops (fabs(x) is fabsf for a float x).
 */
#include <stdlib.h>
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"
#include "ops/engine/vmath.h"
#include "ops/engine/vmath_sigmoid_tame.h"
#include "ops/pointwise/float_exprs.h"

/* ---- erfinv -------------------------------------------------------------
 * No libm has it. A start from Giles' single-precision approximation
 * ("Approximating the erfinv function", GPU Computing Gems, 2011), then
 * Newton steps on erf(x) = y; near |y| = 1 on erfc, where 1 - |y| is exact,
 * so that double inputs keep full precision. */
static double erfinv_d(double y) {
  double a = fabs(y);
  if (!(a < 1.0)) return a == 1.0 ? copysign(INFINITY, y) : NAN;
  if (a == 0.0) return y;
  double w = -log((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * a;
  for (int i = 0; i < 3; i++) {
    double residual = a < 0.5 ? erf(x) - a : (1.0 - a) - erfc(x);
    x -= residual / (1.1283791670955126 * exp(-x * x));
  }
  return copysign(x, y);
}

/* ---- float math ----------------------------------------------------------
 * name, float32 expression, float64 expression (of x) */
#define UNARY_FLOAT_MATH(X)                                              \
  X(exp2, exp2f(x), exp2(x))                                             \
  X(expm1, expm1f(x), expm1(x))                                          \
  X(log, RT_EXPR_F32_LOG, log(x))                                          \
  X(log2, log2f(x), log2(x))                                             \
  X(log10, log10f(x), log10(x))                                          \
  X(log1p, log1pf(x), log1p(x))                                          \
  X(sqrt, RT_EXPR_F32_SQRT, sqrt(x))                                             \
  X(rsqrt, RT_EXPR_F32_RSQRT, 1.0 / sqrt(x))                               \
  X(reciprocal, RT_EXPR_F32_RECIPROCAL, 1.0 / x)                                       \
  X(sin, sinf(x), sin(x))                                                \
  X(cos, cosf(x), cos(x))                                                \
  X(tan, tanf(x), tan(x))                                                \
  X(asin, asinf(x), asin(x))                                             \
  X(acos, acosf(x), acos(x))                                             \
  X(atan, atanf(x), atan(x))                                             \
  X(sinh, sinhf(x), sinh(x))                                             \
  X(cosh, coshf(x), cosh(x))                                             \
  X(tanh, RT_EXPR_F32_TANH, tanh(x))                                       \
  X(asinh, asinhf(x), asinh(x))                                          \
  X(acosh, acoshf(x), acosh(x))                                          \
  X(atanh, atanhf(x), atanh(x))                                          \
  X(erf, RT_EXPR_F32_ERF, erf(x))                                          \
  X(erfc, erfcf(x), erfc(x))                                             \
  X(erfinv, (float)erfinv_d(x), erfinv_d(x))                             \
  X(frac, x - truncf(x), x - trunc(x))

#define DEFINE_UNARY_FLOAT(NAME, F32, F64)                                          \
  RT_UNARY_LOOP(NAME##_f32, float, float, F32)                                      \
  RT_UNARY_LOOP(NAME##_f64, double, double, F64)                                    \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                                   \
    static const rt_loop_table loops = {[NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}; \
    return rt_run_pointwise(op, loops, -1);                                         \
  }
UNARY_FLOAT_MATH(DEFINE_UNARY_FLOAT)

/* float32 sigmoid: per block of contiguous values whose largest |x| is
 * at most 86 (by bits: NaN and infinity compare above every finite value),
 * the tame twin, as the generated code of fused groups does; the same bits
 * as rt_vm_sigmoidf (RT_EXPR_F32_SIGMOID), which the other blocks and
 * strided runs use. The block is the generated code's: its values stay in
 * L1 between the check and the loop. */
#define SIGMOID_BLOCK 512
RT_SIMD_VOID(sigmoid_f32, (char **data, const int64_t *strides, int64_t n, void *ctx),
             (data, strides, n, ctx)) {
  (void)ctx;
  if (strides[0] != (int64_t)sizeof(float) || strides[1] != (int64_t)sizeof(float)) {
    for (int64_t i = 0; i < n; i++) {
      float x = RT_LOAD(float, data[1] + i * strides[1]);
      RT_STORE(float, data[0] + i * strides[0], RT_EXPR_F32_SIGMOID);
    }
    return;
  }
  float *o = (float *)data[0];
  const float *in = (const float *)data[1]; /* may be o itself (in place) */
  for (int64_t c0 = 0; c0 < n; c0 += SIGMOID_BLOCK) {
    const int64_t m = n - c0 < SIGMOID_BLOCK ? n - c0 : SIGMOID_BLOCK;
    if (rt_vm_max_abs_bits(in + c0, m) <= RT_VM_SIGMOID_TAME_BITS)
      for (int64_t j = 0; j < m; j++) o[c0 + j] = rt_vm_sigmoidf_tame(in[c0 + j]);
    else
      for (int64_t j = 0; j < m; j++) {
        float x = in[c0 + j];
        o[c0 + j] = RT_EXPR_F32_SIGMOID;
      }
  }
}
RT_UNARY_LOOP(sigmoid_f64, double, double, 1.0 / (1.0 + exp(-x)))
nrt_status rt_kernel_sigmoid(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = sigmoid_f32, [NRT_FLOAT64] = sigmoid_f64};
  return rt_run_pointwise(op, loops, -1);
}

/* exp of float16/bfloat16 by table (RT_DEFINE_TABLE16), exact. */
static double exp_d(double x) { return exp(x); }
RT_DEFINE_TABLE16(exp, exp_d)
RT_UNARY_LOOP(exp_f32, float, float, RT_EXPR_F32_EXP)
RT_UNARY_LOOP(exp_f64, double, double, exp(x))
nrt_status rt_kernel_exp(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = exp_f32, [NRT_FLOAT64] = exp_f64};
  if (rt_is_16bit_float(op->compute_dtype)) return exp_16bit(op);
  return rt_run_pointwise(op, loops, -1);
}

/* ---- same-dtype numeric ops ------------------------------------------- */

#define NUMERIC_TABLE(NAME)                                                          \
  {[NRT_UINT8] = NAME##_u8,   [NRT_INT8] = NAME##_i8,   [NRT_INT16] = NAME##_i16,     \
   [NRT_INT32] = NAME##_i32,  [NRT_INT64] = NAME##_i64, [NRT_FLOAT32] = NAME##_f32,   \
   [NRT_FLOAT64] = NAME##_f64}

#define ALL_TABLE(NAME)                                                              \
  {[NRT_BOOL] = NAME##_bool,  [NRT_UINT8] = NAME##_u8,  [NRT_INT8] = NAME##_i8,       \
   [NRT_INT16] = NAME##_i16,  [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64,     \
   [NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}

#define DEFINE_KERNEL(NAME, TABLE, OUT)                \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {      \
    static const rt_loop_table loops = TABLE(NAME);    \
    return rt_run_pointwise(op, loops, OUT);           \
  }

/* Signed integers, unsigned, floats: one expression each. */
#define DEFINE_NUMERIC(NAME, SIGNED, UNSIGNED, FLOAT)            \
  RT_UNARY_LOOP(NAME##_u8, uint8_t, uint8_t, UNSIGNED)           \
  RT_UNARY_LOOP(NAME##_i8, int8_t, int8_t, SIGNED)               \
  RT_UNARY_LOOP(NAME##_i16, int16_t, int16_t, SIGNED)            \
  RT_UNARY_LOOP(NAME##_i32, int32_t, int32_t, SIGNED)            \
  RT_UNARY_LOOP(NAME##_i64, int64_t, int64_t, SIGNED)            \
  RT_UNARY_LOOP(NAME##_f32, float, float, FLOAT)                 \
  RT_UNARY_LOOP(NAME##_f64, double, double, FLOAT)

DEFINE_NUMERIC(neg, -RT_UW(x), -RT_UW(x), RT_EXPR_NEG)
RT_DEFINE_BITS16_KERNEL(neg, NUMERIC_TABLE)

DEFINE_NUMERIC(abs, x < 0 ? -RT_UW(x) : RT_UW(x), x, RT_EXPR_ABS)
RT_DEFINE_BITS16_KERNEL(abs, NUMERIC_TABLE)

/* sign(NaN) is 0, as PyTorch's (0 < x) - (x < 0) gives. */
DEFINE_NUMERIC(sign, (x > 0) - (x < 0), x > 0, (x > 0) - (x < 0))
RT_UNARY_LOOP(sign_bool, uint8_t, uint8_t, x)
RT_DEFINE_BITS16_KERNEL(sign, ALL_TABLE)

/* relu keeps NaN (x < 0 is false for it), as clamp_min(x, 0) does.
 * bfloat16/float16 relu works on the bits (RT_RELU_BF16 / RT_RELU_F16):
 * negative, non-zero, non-NaN values become +0; -0.0 stays (x < 0 is false
 * for it); NaN leaves as the float32 path's rounding back gives it
 * (bfloat16 0x7fc0, float16 the sign with 0x7e00). The twin,
 * rt_kernel_relu_reference, converts through float32 as other ops do. */
DEFINE_NUMERIC(relu, x < 0 ? 0 : x, x, RT_EXPR_RELU)
/* A sign bit on a non-zero value: negative, or a negative NaN (tested first). */
#define RT_NEG16(x) (((x) & 0x8000u) && ((x) & 0x7fffu))
#define RT_RELU_BF16(x) (((x) & 0x7fffu) > 0x7f80u ? RT_BF16_AS_ROUNDED(x) : RT_NEG16(x) ? 0u : (x))
#define RT_RELU_F16(x) (((x) & 0x7fffu) > 0x7c00u ? RT_F16_AS_ROUNDED(x) : RT_NEG16(x) ? 0u : (x))
RT_UNARY_LOOP(relu_bf16n, uint16_t, uint16_t, RT_RELU_BF16(x))
RT_UNARY_LOOP(relu_f16n, uint16_t, uint16_t, RT_RELU_F16(x))
static const rt_loop_table relu_loops = NUMERIC_TABLE(relu);
nrt_status rt_kernel_relu(const nrt_op *op) { return rt_run_pointwise16(op, relu_loops, relu_bf16n, relu_f16n); }
nrt_status rt_kernel_relu_reference(const nrt_op *op) { return rt_run_pointwise(op, relu_loops, -1); }

DEFINE_NUMERIC(floor, x, x, floor(x))
DEFINE_KERNEL(floor, NUMERIC_TABLE, -1)
DEFINE_NUMERIC(ceil, x, x, ceil(x))
DEFINE_KERNEL(ceil, NUMERIC_TABLE, -1)
DEFINE_NUMERIC(round, x, x, nearbyint(x))
DEFINE_KERNEL(round, NUMERIC_TABLE, -1)
DEFINE_NUMERIC(trunc, x, x, trunc(x))
DEFINE_KERNEL(trunc, NUMERIC_TABLE, -1)

/* round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d, in
 * the compute type, as PyTorch does; scalars [decimals] plus 10^|d| that
 * the kernel adds. */
RT_UNARY_LOOP(round_decimals_f32, float, float,
              sc->i[0] < 0 ? nearbyintf(x / (float)sc->f[1]) * (float)sc->f[1]
                           : nearbyintf(x * (float)sc->f[1]) / (float)sc->f[1])
RT_UNARY_LOOP(round_decimals_f64, double, double,
              sc->i[0] < 0 ? nearbyint(x / sc->f[1]) * sc->f[1] : nearbyint(x * sc->f[1]) / sc->f[1])

nrt_status rt_kernel_round_decimals(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = round_decimals_f32,
                                      [NRT_FLOAT64] = round_decimals_f64};
  if (op->num_scalars != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "round_decimals: expects 1 scalar (decimals)");
  nrt_op local = *op;
  int64_t decimals = op->scalars[0].is_float ? (int64_t)op->scalars[0].f : op->scalars[0].i;
  local.num_scalars = 2;
  local.scalars[1] = (nrt_scalar){.is_float = 1, .f = pow(10.0, (double)llabs(decimals))};
  return rt_run_pointwise(&local, loops, -1);
}

RT_UNARY_LOOP(bitwise_not_bool, uint8_t, uint8_t, x == 0)
RT_UNARY_LOOP(bitwise_not_u8, uint8_t, uint8_t, ~x)
RT_UNARY_LOOP(bitwise_not_i8, int8_t, int8_t, ~x)
RT_UNARY_LOOP(bitwise_not_i16, int16_t, int16_t, ~x)
RT_UNARY_LOOP(bitwise_not_i32, int32_t, int32_t, ~x)
RT_UNARY_LOOP(bitwise_not_i64, int64_t, int64_t, ~x)
nrt_status rt_kernel_bitwise_not(const nrt_op *op) {
  static const rt_loop_table loops = {
      [NRT_BOOL] = bitwise_not_bool, [NRT_UINT8] = bitwise_not_u8, [NRT_INT8] = bitwise_not_i8,
      [NRT_INT16] = bitwise_not_i16, [NRT_INT32] = bitwise_not_i32, [NRT_INT64] = bitwise_not_i64};
  return rt_run_pointwise(op, loops, -1);
}

/* nan_to_num: scalars [nan, posinf, neginf]; integers pass unchanged. */
#define NAN_TO_NUM(T)                                                                    \
  (x != x ? (T)sc->f[0] : x == (T)INFINITY ? (T)sc->f[1] : x == -(T)INFINITY ? (T)sc->f[2] : x)
DEFINE_NUMERIC(nan_to_num, x, x, NAN_TO_NUM(__typeof__(x)))
RT_UNARY_LOOP(nan_to_num_bool, uint8_t, uint8_t, x)
DEFINE_KERNEL(nan_to_num, ALL_TABLE, -1)

/* hardtanh = clamp with scalar bounds: min(max(x, min), max), so max wins
 * when min > max; x = NaN passes (both tests are false) and a NaN bound
 * gives NaN. The scalars convert to the element type as PyTorch's
 * Scalar::to does (truncation for integers). */
#define AT_LEAST(T, LO) (x < (T)(LO) ? (T)(LO) : x)
#define CLAMP_SCALARS(T, LO, HI) (AT_LEAST(T, LO) > (T)(HI) ? (T)(HI) : AT_LEAST(T, LO))
DEFINE_NUMERIC(hardtanh, CLAMP_SCALARS(__typeof__(x), sc->i[0], sc->i[1]),
               CLAMP_SCALARS(__typeof__(x), sc->i[0], sc->i[1]),
               RT_EXPR_HARDTANH)
RT_DEFINE_BITS16_KERNEL(hardtanh, NUMERIC_TABLE)

/* threshold: x <= threshold ? value : x; scalars [threshold, value]. */
DEFINE_NUMERIC(threshold, x <= (__typeof__(x))sc->i[0] ? (__typeof__(x))sc->i[1] : x,
               x <= (__typeof__(x))sc->i[0] ? (__typeof__(x))sc->i[1] : x,
               x <= (__typeof__(x))sc->f[0] ? (__typeof__(x))sc->f[1] : x)
RT_DEFINE_BITS16_KERNEL(threshold, NUMERIC_TABLE)

/* ---- tests with a bool result ----------------------------------------- */

/* Integers are never NaN or infinite and bool has no sign. */
#define DEFINE_TEST(NAME, SIGNED, FLOAT)                          \
  RT_UNARY_LOOP(NAME##_bool, uint8_t, uint8_t, 0)                 \
  RT_UNARY_LOOP(NAME##_u8, uint8_t, uint8_t, 0)                   \
  RT_UNARY_LOOP(NAME##_i8, uint8_t, int8_t, SIGNED)               \
  RT_UNARY_LOOP(NAME##_i16, uint8_t, int16_t, SIGNED)             \
  RT_UNARY_LOOP(NAME##_i32, uint8_t, int32_t, SIGNED)             \
  RT_UNARY_LOOP(NAME##_i64, uint8_t, int64_t, SIGNED)             \
  RT_UNARY_LOOP(NAME##_f32, uint8_t, float, FLOAT)                \
  RT_UNARY_LOOP(NAME##_f64, uint8_t, double, FLOAT)               \
  DEFINE_KERNEL(NAME, ALL_TABLE, NRT_BOOL)

DEFINE_TEST(isnan, 0, x != x)
DEFINE_TEST(isinf, 0, fabs(x) == INFINITY)
DEFINE_TEST(isposinf, 0, x == INFINITY)
DEFINE_TEST(isneginf, 0, x == -INFINITY)
DEFINE_TEST(signbit, x < 0, signbit(x) != 0)

RT_UNARY_LOOP(logical_not_bool, uint8_t, uint8_t, x == 0)
RT_UNARY_LOOP(logical_not_u8, uint8_t, uint8_t, x == 0)
RT_UNARY_LOOP(logical_not_i8, uint8_t, int8_t, x == 0)
RT_UNARY_LOOP(logical_not_i16, uint8_t, int16_t, x == 0)
RT_UNARY_LOOP(logical_not_i32, uint8_t, int32_t, x == 0)
RT_UNARY_LOOP(logical_not_i64, uint8_t, int64_t, x == 0)
RT_UNARY_LOOP(logical_not_f32, uint8_t, float, x == 0)
RT_UNARY_LOOP(logical_not_f64, uint8_t, double, x == 0)
DEFINE_KERNEL(logical_not, ALL_TABLE, NRT_BOOL)
