/* Binary arithmetic: out = f(a, b).
 *
 * Signed integer arithmetic wraps (computed in uint64_t) as PyTorch's does
 * on every platform it supports, without C's undefined overflow; integer
 * division guards INT_MIN / -1 and reports division by zero as a fault.
 * Bool arithmetic is logical: add is or, mul is and. Float formulas follow
 * PyTorch's CPU kernels step by step (floor division, remainder, lerp), so
 * that results agree to the last bit where the kernels are exact.
 */
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/pointwise/one_pass16.h"
#include "ops/pointwise/float_exprs.h"

#define ARITH_TABLE(NAME)                                                    \
  {[NRT_BOOL] = NAME##_bool, [NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, \
   [NRT_INT16] = NAME##_i16, [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64, \
   [NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}

/* One expression for the integers, one for the floats. */
#define DEFINE_NUMERIC(NAME, INT, FLOAT)               \
  RT_BINARY_LOOP(NAME##_u8, uint8_t, uint8_t, INT)     \
  RT_BINARY_LOOP(NAME##_i8, int8_t, int8_t, INT)       \
  RT_BINARY_LOOP(NAME##_i16, int16_t, int16_t, INT)    \
  RT_BINARY_LOOP(NAME##_i32, int32_t, int32_t, INT)    \
  RT_BINARY_LOOP(NAME##_i64, int64_t, int64_t, INT)    \
  RT_BINARY_LOOP(NAME##_f32, float, float, FLOAT)      \
  RT_BINARY_LOOP(NAME##_f64, double, double, FLOAT)

/* Round trips through the 16-bit float types. */
static inline float round_bf16(float v) { return rt_bfloat16_to_float(rt_bfloat16_from_float(v)); }
static inline float round_f16(float v) { return rt_half_to_float(rt_half_from_float(v)); }

/* ---- ADD: a + alpha * b; MUL ------------------------------------------ */
DEFINE_NUMERIC(add, RT_UW(a) + RT_UW((__typeof__(a))sc->i[0]) * RT_UW(b), RT_EXPR_ADD)
RT_BINARY_LOOP(add_bool, uint8_t, uint8_t, (uint8_t)((a != 0) | ((b != 0) & (sc->i[0] != 0))))

/* The 16-bit loops of add, mul and div: one pass with the conversion
 * instructions where the run and the CPU allow (one_pass16.h), otherwise
 * bfloat16 converted in registers by C and float16 through L1 blocks
 * (RT_BINARY_LOOP_F16). The expressions here and in one_pass16.c must stay
 * the same. */
#define PASS16_LOOP_(NAME, TYPE, TAG, OP, A, B, ALPHA)                                                \
  static void NAME##_##TAG(char **data, const int64_t *strides, int64_t n, void *ctx) {              \
    if (!rt_one_pass16(TYPE, OP, RT_PASS16_##A, RT_PASS16_##B, data, strides, n, ALPHA))             \
      NAME##_##TAG##_c(data, strides, n, ctx);                                                        \
  }
#define PASS16_LOOPS_(NAME, TYPE, TAG, OP, ALPHA)               \
  PASS16_LOOP_(NAME, TYPE, TAG##n, OP, HALF, HALF, ALPHA)       \
  PASS16_LOOP_(NAME, TYPE, TAG##nf, OP, HALF, FLOAT_VALUE, ALPHA) \
  PASS16_LOOP_(NAME, TYPE, TAG##fn, OP, FLOAT_VALUE, HALF, ALPHA)
#define ARITH_LOOPS16(NAME, EXPR, OP, ALPHA)                                                           \
  RT_BINARY_LOOP_CVT(NAME##_bf16n_c, uint16_t, uint16_t, float, rt_bfloat16_to_float,                 \
                     rt_bfloat16_from_float, EXPR)                                                     \
  RT_BINARY_LOOP_MIXED(NAME##_bf16nf_c, uint16_t, uint16_t, float, float, rt_bfloat16_to_float,       \
                       RT_F32_AS_IS_, rt_bfloat16_from_float, EXPR)                                    \
  RT_BINARY_LOOP_MIXED(NAME##_bf16fn_c, uint16_t, float, uint16_t, float, RT_F32_AS_IS_,              \
                       rt_bfloat16_to_float, rt_bfloat16_from_float, EXPR)                             \
  RT_BINARY_LOOP_F16(NAME##_f16n_c, uint16_t, uint16_t, rt_half_to_float, rt_half_to_float, EXPR)    \
  RT_BINARY_LOOP_F16(NAME##_f16nf_c, uint16_t, float, rt_half_to_float, RT_F32_AS_IS_, EXPR)         \
  RT_BINARY_LOOP_F16(NAME##_f16fn_c, float, uint16_t, RT_F32_AS_IS_, rt_half_to_float, EXPR)         \
  PASS16_LOOPS_(NAME, NRT_BFLOAT16, bf16, OP, ALPHA)                                                   \
  PASS16_LOOPS_(NAME, NRT_FLOAT16, f16, OP, ALPHA)
/* add's alpha (rounded to the 16-bit type, see run_add), read by its loops only */
#define ALPHA_ ((float)((const rt_scalars *)ctx)->f[0])

ARITH_LOOPS16(add, a + (float)sc->f[0] * b, RT_PASS16_ADD, ALPHA_)

/* The 16-bit loops of NAME, nn / nf / fn (rt_loops16). */
#define LOOPS16(NAME, TAG) {NAME##_##TAG##n, NAME##_##TAG##nf, NAME##_##TAG##fn}

/* Complex ADD: a + alpha * b with alpha = (scalars[0], scalars[1]) in the
 * element type, the product formed as PyTorch's CPU forms it (c10::complex's
 * operator*, without C99 Annex G's recovery of infinities): a real alpha is
 * alpha + 0i, so an infinite part of b meeting that 0 gives NaN in the other
 * part ((1 + 1i) + (inf + 0i) is inf + NaN i there). Every step rounds in the
 * element type, no fused multiply-add, as the CPU's vectorised loop has
 * none. Both parts are written alike, part k = a_k + (b_k wr - b_(1-k) c_k)
 * with c = (wi, -wi) (the imaginary part b_i wr + b_r wi exactly, as
 * x - (-y) is x + y): written as the textbook product, GCC 12 recognises a
 * complex multiplication and emits vfmaddsub even without contraction
 * (-std=c11), rounding once where the CPU rounds twice (3e38 * 2 - inf gave
 * -inf, not NaN); test_complex_add.c checks every ISA level bit for bit. */
#define COMPLEX_ADD_STEP(R, A, B, O)                                          \
  {                                                                          \
    const R b0_ = (B)[0], b1_ = (B)[1];                                      \
    const R re_ = (A)[0] + (b0_ * wr - b1_ * c0), im_ = (A)[1] + (b1_ * wr - b0_ * c1); \
    (O)[0] = re_;                                                            \
    (O)[1] = im_;                                                            \
  }
#define COMPLEX_ADD_LOOP(NAME, R)                                                                 \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),                 \
               (data, strides, n, ctx)) {                                                         \
    const rt_scalars *sc = (const rt_scalars *)ctx;                                               \
    const R wr = (R)sc->f[0], c0 = (R)sc->f[1], c1 = -c0;                                         \
    const int64_t w = 2 * (int64_t)sizeof(R);                                                     \
    R *o = (R *)data[0];                                                                          \
    const R *a = (const R *)data[1], *b = (const R *)data[2];                                     \
    if (strides[0] == w && strides[1] == w && strides[2] == w) {                                  \
      for (int64_t i = 0; i < n; i++) COMPLEX_ADD_STEP(R, a + 2 * i, b + 2 * i, o + 2 * i)        \
    } else if (strides[0] == w && strides[1] == w && strides[2] == 0) {                           \
      for (int64_t i = 0; i < n; i++) COMPLEX_ADD_STEP(R, a + 2 * i, b, o + 2 * i)                \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++)                                                             \
        COMPLEX_ADD_STEP(R, (const R *)(data[1] + i * strides[1]), (const R *)(data[2] + i * strides[2]), \
                         (R *)(data[0] + i * strides[0]))                                         \
    }                                                                                             \
  }
COMPLEX_ADD_LOOP(add_c64, float)
COMPLEX_ADD_LOOP(add_c128, double)

/* The complex loops take operands stored in the compute dtype only (the
 * engine's conversion buffers hold 8-byte elements) and no immediates; a
 * missing imaginary part of alpha is 0. */
static nrt_status run_complex_add(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_COMPLEX64] = add_c64, [NRT_COMPLEX128] = add_c128};
  if (op->num_operands != 3 || op->num_outputs != 1 || op->num_scalars < 1 || op->num_scalars > 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "add: complex add expects (out, a, b) and scalars [alpha(, imag)]");
  if (op->immediate_mask)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "add: complex operands cannot be immediates");
  for (int k = 0; k < 3; k++)
    if (op->operands[k].dtype != op->compute_dtype)
      return rt_fail(NRT_ERROR_UNSUPPORTED, "add: operand %d is %s, not the complex compute dtype %s", k,
                     nrt_dtype_name(op->operands[k].dtype), nrt_dtype_name(op->compute_dtype));
  nrt_op local = *op;
  if (local.num_scalars == 1) local.scalars[1] = (nrt_scalar){.is_float = 1, .f = 0.0};
  local.num_scalars = 2;
  return rt_run_pointwise(&local, loops, -1);
}

/* For float16/bfloat16 alpha is first rounded to the storage type, as
 * PyTorch's CPU kernel converts it (Scalar::to<scalar_t>). The twin
 * (reference) takes the general path after the same rounding. */
static nrt_status run_add(const nrt_op *op, int reference) {
  static const rt_loop_table loops = ARITH_TABLE(add);
  if (op->compute_dtype == NRT_COMPLEX64 || op->compute_dtype == NRT_COMPLEX128) return run_complex_add(op);
  if (op->num_scalars < 1 || !rt_is_16bit_float(op->compute_dtype))
    return rt_run_pointwise(op, loops, -1);
  nrt_op local = *op;
  float alpha = op->scalars[0].is_float ? (float)op->scalars[0].f : (float)op->scalars[0].i;
  alpha = op->compute_dtype == NRT_FLOAT16 ? round_f16(alpha) : round_bf16(alpha);
  local.scalars[0] = (nrt_scalar){.is_float = 1, .f = alpha};
  if (reference) return rt_run_pointwise(&local, loops, -1);
  static const rt_loops16 bf16 = LOOPS16(add, bf16), f16 = LOOPS16(add, f16);
  return rt_run_pointwise16_numbers(&local, loops, &bf16, &f16);
}
nrt_status rt_kernel_add(const nrt_op *op) { return run_add(op, 0); }
nrt_status rt_kernel_add_reference(const nrt_op *op) { return run_add(op, 1); }

/* Two NaNs: a's. Left to the compiler, the vectorised 16-bit loop gave
 * a's and its scalar tail b's, and the float32 loops of the unfused kernel
 * and of a fused tile picked different operands with AVX-512, so a result
 * depended on its position or on fusion. */
DEFINE_NUMERIC(mul, RT_UW(a) * RT_UW(b), RT_EXPR_MUL)
RT_BINARY_LOOP(mul_bool, uint8_t, uint8_t, (uint8_t)((a != 0) & (b != 0)))
ARITH_LOOPS16(mul, a != a ? a : a * b, RT_PASS16_MUL, 0.0f)

RT_BINARY_LOOP(div_f32, float, float, RT_EXPR_DIV)
RT_BINARY_LOOP(div_f64, double, double, a / b)
ARITH_LOOPS16(div, a / b, RT_PASS16_DIV, 0.0f)

/* mul and div with a Python number run the 16-bit loops with the number in
 * float32; their _reference twins take the general path (buffers). */
#define DEFINE_KERNEL16_NUMBERS(NAME, TABLE)                                              \
  static const rt_loop_table NAME##_loops = TABLE(NAME);                                  \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                                         \
    static const rt_loops16 bf16 = LOOPS16(NAME, bf16), f16 = LOOPS16(NAME, f16);         \
    return rt_run_pointwise16_numbers(op, NAME##_loops, &bf16, &f16);                     \
  }                                                                                       \
  nrt_status rt_kernel_##NAME##_reference(const nrt_op *op) {                             \
    return rt_run_pointwise(op, NAME##_loops, -1);                                        \
  }
DEFINE_KERNEL16_NUMBERS(mul, ARITH_TABLE)
DEFINE_KERNEL16_NUMBERS(div, RT_FLOAT_TABLE)

/* ---- integer division ----------------------------------------------------
 * Helpers per signed type S (uint8 is separate: it has no -1 and its floor
 * division is truncation). */
#define SIGNED_DIVISION(S, T)                                                          \
  static inline T int_div_trunc_##S(T a, T b, int *fault) {                            \
    if (b == 0) return *fault = 1, (T)0;                                               \
    return b == -1 ? (T)-RT_UW(a) : (T)(a / b);                              \
  }                                                                                    \
  static inline T int_div_floor_##S(T a, T b, int *fault) {                            \
    if (b == 0) return *fault = 1, (T)0;                                               \
    if (b == -1) return (T)-RT_UW(a);                                        \
    T q = (T)(a / b), r = (T)(a % b);                                                  \
    return r != 0 && (r < 0) != (b < 0) ? (T)(q - 1) : q;                              \
  }                                                                                    \
  static inline T int_fmod_##S(T a, T b, int *fault) {                                 \
    if (b == 0) return *fault = 1, (T)0;                                               \
    return b == -1 ? (T)0 : (T)(a % b);                                                \
  }                                                                                    \
  static inline T int_remainder_##S(T a, T b, int *fault) {                            \
    T r = int_fmod_##S(a, b, fault);                                                   \
    return r != 0 && (r < 0) != (b < 0) ? (T)(r + b) : r;                              \
  }
SIGNED_DIVISION(i8, int8_t)
SIGNED_DIVISION(i16, int16_t)
SIGNED_DIVISION(i32, int32_t)
SIGNED_DIVISION(i64, int64_t)

static inline uint8_t int_div_trunc_u8(uint8_t a, uint8_t b, int *fault) {
  if (b == 0) return *fault = 1, (uint8_t)0;
  return (uint8_t)(a / b);
}
static inline uint8_t int_div_floor_u8(uint8_t a, uint8_t b, int *fault) {
  return int_div_trunc_u8(a, b, fault);
}
static inline uint8_t int_fmod_u8(uint8_t a, uint8_t b, int *fault) {
  if (b == 0) return *fault = 1, (uint8_t)0;
  return (uint8_t)(a % b);
}
static inline uint8_t int_remainder_u8(uint8_t a, uint8_t b, int *fault) {
  return int_fmod_u8(a, b, fault);
}

#define INTEGER_DIVISION_LOOPS(NAME)                                                     \
  RT_BINARY_LOOP(NAME##_u8, uint8_t, uint8_t, int_##NAME##_u8(a, b, &rt_fault))          \
  RT_BINARY_LOOP(NAME##_i8, int8_t, int8_t, int_##NAME##_i8(a, b, &rt_fault))            \
  RT_BINARY_LOOP(NAME##_i16, int16_t, int16_t, int_##NAME##_i16(a, b, &rt_fault))        \
  RT_BINARY_LOOP(NAME##_i32, int32_t, int32_t, int_##NAME##_i32(a, b, &rt_fault))        \
  RT_BINARY_LOOP(NAME##_i64, int64_t, int64_t, int_##NAME##_i64(a, b, &rt_fault))
INTEGER_DIVISION_LOOPS(div_trunc)
INTEGER_DIVISION_LOOPS(div_floor)
INTEGER_DIVISION_LOOPS(fmod)
INTEGER_DIVISION_LOOPS(remainder)

/* ---- float division with rounding ----------------------------------------
 * Written over a rounding step R that is the identity for float32/float64
 * and a round trip through the storage type for float16/bfloat16: PyTorch's
 * CPU kernels compute these in the 16-bit type, rounding after every
 * operation, unless b is a single value (then in float32 throughout). */
#define ROUND_NONE(v) (v)

/* Floor division as PyTorch's div_floor_floating_vec computes it. */
#define DEFINE_DIV_FLOOR(NAME, T, R)                                          \
  static inline T NAME(T a, T b) {                                            \
    T quotient = R(a / b);                                                    \
    T mod = fmod(a, b);                                                       \
    /* a - mod is off when a / b overflows but a does not */                  \
    T whole = fabs(quotient) == (T)INFINITY && fabs(a) != (T)INFINITY ? a : R(a - mod); \
    T div = R(whole / b);                                                     \
    if (mod != 0 && (b < 0) != (mod < 0)) div = R(div - 1);                   \
    T floordiv = floor(div);                                                  \
    if (R(div - floordiv) > (T)0.5) floordiv = R(floordiv + 1);               \
    if (div == 0) floordiv = copysign((T)0, quotient);                        \
    return b == 0 ? quotient : floordiv;                                      \
  }
DEFINE_DIV_FLOOR(floor_divide_f32_value, float, ROUND_NONE)
DEFINE_DIV_FLOOR(floor_divide_f64_value, double, ROUND_NONE)
DEFINE_DIV_FLOOR(floor_divide_bf16_value, float, round_bf16)
DEFINE_DIV_FLOOR(floor_divide_f16_value, float, round_f16)

RT_BINARY_LOOP(div_trunc_f32, float, float, trunc(a / b))
RT_BINARY_LOOP(div_trunc_f64, double, double, trunc(a / b))
RT_BINARY_LOOP(div_trunc_bf16_steps, float, float, trunc(round_bf16(a / b)))
RT_BINARY_LOOP(div_trunc_f16_steps, float, float, trunc(round_f16(a / b)))
RT_BINARY_LOOP(div_floor_f32, float, float, floor_divide_f32_value(a, b))
RT_BINARY_LOOP(div_floor_f64, double, double, floor_divide_f64_value(a, b))
RT_BINARY_LOOP(div_floor_bf16_steps, float, float, floor_divide_bf16_value(a, b))
RT_BINARY_LOOP(div_floor_f16_steps, float, float, floor_divide_f16_value(a, b))

/* A 16-bit float op with a tensor divisor takes the rounding-steps loop. */
static nrt_status run_rounding_division(const nrt_op *op, const rt_loop_table loops,
                                        rt_inner_loop bf16_steps, rt_inner_loop f16_steps) {
  if (op->num_operands == 3 && !rt_operand_is_scalar(op, 2)) {
    rt_loop_table with_steps;
    memcpy(with_steps, loops, sizeof with_steps);
    with_steps[NRT_BFLOAT16] = bf16_steps;
    with_steps[NRT_FLOAT16] = f16_steps;
    return rt_run_pointwise(op, with_steps, -1);
  }
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_div_trunc(const nrt_op *op) {
  static const rt_loop_table loops = RT_NUMERIC_TABLE(div_trunc);
  return run_rounding_division(op, loops, div_trunc_bf16_steps, div_trunc_f16_steps);
}

nrt_status rt_kernel_div_floor(const nrt_op *op) {
  static const rt_loop_table loops = RT_NUMERIC_TABLE(div_floor);
  return run_rounding_division(op, loops, div_floor_bf16_steps, div_floor_f16_steps);
}

/* Python's modulo: the result takes the divisor's sign. */
#define REMAINDER_FLOAT(a, b) \
  (fmod(a, b) != 0 && ((b) < 0) != (fmod(a, b) < 0) ? fmod(a, b) + (b) : fmod(a, b))
RT_BINARY_LOOP(remainder_f32, float, float, REMAINDER_FLOAT(a, b))
RT_BINARY_LOOP(remainder_f64, double, double, REMAINDER_FLOAT(a, b))
RT_DEFINE_TABLE_KERNEL(remainder, RT_NUMERIC_TABLE)

RT_BINARY_LOOP(fmod_f32, float, float, fmod(a, b))
RT_BINARY_LOOP(fmod_f64, double, double, fmod(a, b))
RT_DEFINE_TABLE_KERNEL(fmod, RT_NUMERIC_TABLE)

/* ---- POW ------------------------------------------------------------------
 * Integer powers by squaring, wrapping; a negative exponent gives 0 except
 * for bases 1 and -1 (PyTorch's rule for tensor exponents). */
static inline uint64_t powi_u64(uint64_t base, uint64_t e) {
  uint64_t result = 1;
  while (e) {
    if (e & 1) result *= base;
    e >>= 1;
    base *= base;
  }
  return result;
}
#define POW_SIGNED(T) \
  (b < 0 ? (a == 1 ? (T)1 : a == -1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0) : RT_WRAP(T, powi_u64(RT_U64(a), RT_U64(b))))
RT_BINARY_LOOP(pow_u8, uint8_t, uint8_t, RT_WRAP(uint8_t, powi_u64(a, b)))
RT_BINARY_LOOP(pow_i8, int8_t, int8_t, POW_SIGNED(int8_t))
RT_BINARY_LOOP(pow_i16, int16_t, int16_t, POW_SIGNED(int16_t))
RT_BINARY_LOOP(pow_i32, int32_t, int32_t, POW_SIGNED(int32_t))
RT_BINARY_LOOP(pow_i64, int64_t, int64_t, POW_SIGNED(int64_t))
RT_BINARY_LOOP(pow_f32, float, float, pow(a, b))
RT_BINARY_LOOP(pow_f64, double, double, pow(a, b))

/* A power with a constant exponent that PyTorch's CPU kernel special-cases
 * for float32, float64 and bfloat16 (not float16): it gives
 * sqrt(-0) = -0, sqrt(-inf) = NaN where pow gives 0 and inf. */
#define DEFINE_POW_SPECIAL(NAME, EXPR)                     \
  RT_BINARY_LOOP(NAME##_f32, float, float, EXPR)           \
  RT_BINARY_LOOP(NAME##_f64, double, double, EXPR)
DEFINE_POW_SPECIAL(pow_square, ((void)b, a * a))
DEFINE_POW_SPECIAL(pow_cube, ((void)b, a * a * a))
DEFINE_POW_SPECIAL(pow_sqrt, ((void)b, sqrt(a)))
DEFINE_POW_SPECIAL(pow_rsqrt, ((void)b, 1 / sqrt(a)))
DEFINE_POW_SPECIAL(pow_reciprocal, ((void)b, 1 / a))
DEFINE_POW_SPECIAL(pow_reciprocal_square, ((void)b, 1 / (a * a)))

nrt_status rt_kernel_pow(const nrt_op *op) {
  static const rt_loop_table loops = RT_NUMERIC_TABLE(pow);
  static const struct {
    double exponent;
    rt_loop_table loops;
  } special[] = {
      {2.0, RT_FLOAT_TABLE(pow_square)},     {3.0, RT_FLOAT_TABLE(pow_cube)},
      {0.5, RT_FLOAT_TABLE(pow_sqrt)},       {-0.5, RT_FLOAT_TABLE(pow_rsqrt)},
      {-1.0, RT_FLOAT_TABLE(pow_reciprocal)}, {-2.0, RT_FLOAT_TABLE(pow_reciprocal_square)},
  };
  double exponent;
  if (nrt_dtype_is_floating(op->compute_dtype) && op->compute_dtype != NRT_FLOAT16 &&
      op->num_operands == 3 && rt_immediate_value(op, 2, &exponent))
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
      if (exponent == special[k].exponent) return rt_run_pointwise(op, special[k].loops, -1);
  return rt_run_pointwise(op, loops, -1);
}

/* ---- float-only binary math ------------------------------------------- */
RT_BINARY_LOOP(atan2_f32, float, float, atan2(a, b))
RT_BINARY_LOOP(atan2_f64, double, double, atan2(a, b))
RT_DEFINE_TABLE_KERNEL(atan2, RT_FLOAT_TABLE)
RT_BINARY_LOOP(hypot_f32, float, float, hypot(a, b))
RT_BINARY_LOOP(hypot_f64, double, double, hypot(a, b))
RT_DEFINE_TABLE_KERNEL(hypot, RT_FLOAT_TABLE)
RT_BINARY_LOOP(copysign_f32, float, float, copysign(a, b))
RT_BINARY_LOOP(copysign_f64, double, double, copysign(a, b))
RT_DEFINE_BITS16_KERNEL(copysign, RT_FLOAT_TABLE)

/* lerp with a scalar weight, PyTorch's two-sided formula (exact at both
 * ends); scalars [weight]. */
#define LERP(T, w) \
  (fabs(w) < (T)0.5 ? a + (w) * (b - a) : b - (b - a) * ((T)1 - (w)))
RT_BINARY_LOOP(lerp_f32, float, float, LERP(float, (float)sc->f[0]))
RT_BINARY_LOOP(lerp_f64, double, double, LERP(double, sc->f[0]))
RT_DEFINE_TABLE_KERNEL(lerp, RT_FLOAT_TABLE)

/* ---- maximum / minimum (NaN wins), fmax / fmin (NaN loses) -------------- */
/* maximum and minimum: RT_EXPR_MAXIMUM / RT_EXPR_MINIMUM (float_exprs.h) */
#define MAX_IGNORING(a, b) ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) > (b) ? (a) : (b))
#define MIN_IGNORING(a, b) ((a) != (a) ? (b) : (b) != (b) ? (a) : (a) < (b) ? (a) : (b))

DEFINE_NUMERIC(maximum, a > b ? a : b, RT_EXPR_MAXIMUM)
RT_BINARY_LOOP(maximum_bool, uint8_t, uint8_t, (uint8_t)((a != 0) | (b != 0)))
RT_DEFINE_BITS16_KERNEL(maximum, ARITH_TABLE)
DEFINE_NUMERIC(minimum, a < b ? a : b, RT_EXPR_MINIMUM)
RT_BINARY_LOOP(minimum_bool, uint8_t, uint8_t, (uint8_t)((a != 0) & (b != 0)))
RT_DEFINE_BITS16_KERNEL(minimum, ARITH_TABLE)
DEFINE_NUMERIC(fmax, a > b ? a : b, MAX_IGNORING(a, b))
RT_BINARY_LOOP(fmax_bool, uint8_t, uint8_t, (uint8_t)((a != 0) | (b != 0)))
RT_DEFINE_TABLE_KERNEL(fmax, ARITH_TABLE)
DEFINE_NUMERIC(fmin, a < b ? a : b, MIN_IGNORING(a, b))
RT_BINARY_LOOP(fmin_bool, uint8_t, uint8_t, (uint8_t)((a != 0) & (b != 0)))
RT_DEFINE_TABLE_KERNEL(fmin, ARITH_TABLE)
