/* Special pointwise math (NRT_SPECIAL_OPS in neuronrt/ops/pointwise.h):
 * sinc, entr, the shrink activations, logaddexp(2), xlog1py, nextafter,
 * heaviside, glu, prelu and frexp.
 *
 * Formulas follow PyTorch's CPU kernels branch by branch (special values
 * included). float32 logaddexp uses the vectorisable exp and log of
 * vmath.h, with log1p(z) = log(u) z / (u - 1), u = 1 + z (exact to a few
 * ulp, where log(1 + z) alone loses every digit for small z). nextafter of
 * float16/bfloat16 steps the 16-bit representation itself, as c10 does
 * (computing it in float32 and rounding would return the input), and of
 * float32/float64 steps the bits too, vectorised. gcd and lcm live in
 * pointwise_gcd.c.
 */
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"
#include "ops/engine/vmath_sigmoid_tame.h"

#define DEFINE_FLOAT_KERNEL(NAME) RT_DEFINE_TABLE_KERNEL(NAME, RT_FLOAT_TABLE)
#define PI_F 3.14159265358979323846f
#define PI_D 3.14159265358979323846
#define INV_LN2 1.44269504088896340736 /* 1 / ln 2 */
#define LN2 0.69314718055994530942

/* ---- unary ------------------------------------------------------------- */

#define SINC(T, PI) (x == 0 ? (T)1 : sin((PI) * x) / ((PI) * x))
RT_UNARY_LOOP(sinc_f32, float, float, SINC(float, PI_F))
RT_UNARY_LOOP(sinc_f64, double, double, SINC(double, PI_D))

/* float32 sinc without a libm call per element: values with |x| <= 2^18
 * (no NaN, no infinity; blocks of RT_TAME_BLOCK contiguous values checked
 * at once, vectorised) compute sin(p) / p for the same float p = pi x as
 * the general loop, in double:
 * p = k pi + r with r in [-pi/2, pi/2] (pi in a 33-bit part, exact times
 * k < 2^20, and the rest), sin(r) by its Taylor series to r^15 (relative
 * error below 1e-11), the sign of k's parity, one rounding to float at the
 * end. The general loop (libm sinf, then a float division: two roundings)
 * is the twin; the two differ by at most SINC_TWIN_ULP ulp
 * (test_sinc_tame_blocks_within_ulp_of_twin in runtime/tests/test_pointwise.c). */
#define SINC_TAME_BITS 0x48800000u /* 2^18 */
#define SINC_PI_HI 3.1415926534682512       /* 2 x fdlibm's pio2_1: 33 bits */
#define SINC_PI_LO 1.2154201013012384e-10 /* pi - SINC_PI_HI, to 7e-27 */
RT_VM_INLINE float sinc_tame(float x) {
  const float p = PI_F * x;
  const double pd = (double)p, shifter = 6755399441055744.0; /* 1.5 * 2^52 */
  const double t = pd * 0.31830988618379067154 + shifter;  /* k = round(p / pi) in t's low bits */
  const double k = t - shifter;
  const double r = (pd - k * SINC_PI_HI) - k * SINC_PI_LO;
  const double r2 = r * r;
  double q = -1.0 / 1307674368000.0; /* sin(r) = r (1 + r^2 q(r^2)), q's terms -1/3!, 1/5!, ... */
  q = q * r2 + 1.0 / 6227020800.0;
  q = q * r2 - 1.0 / 39916800.0;
  q = q * r2 + 1.0 / 362880.0;
  q = q * r2 - 1.0 / 5040.0;
  q = q * r2 + 1.0 / 120.0;
  q = q * r2 - 1.0 / 6.0;
  const double sr = r + r * (r2 * q);
  const double s = (rt_vm_bits_d(t) & 1u) ? -sr : sr;
  return x == 0.0f ? 1.0f : (float)(s / pd);
}
/* Each value's result depends on it alone (not on the blocks a split of the
 * work makes): a value beyond the bound, or NaN, takes the libm formula. */
#define SINC_ONE(x) ((rt_vm_bits(x) & 0x7fffffffu) > SINC_TAME_BITS ? SINC(float, PI_F) : sinc_tame(x))
RT_SIMD_VOID(sinc_tame_f32, (char **data, const int64_t *strides, int64_t n, void *ctx),
             (data, strides, n, ctx)) {
  (void)ctx;
  if (strides[0] != (int64_t)sizeof(float) || strides[1] != (int64_t)sizeof(float)) {
    for (int64_t i = 0; i < n; i++) {
      const float x = RT_LOAD(float, data[1] + i * strides[1]);
      RT_STORE(float, data[0] + i * strides[0], SINC_ONE(x));
    }
    return;
  }
  float *o = (float *)(void *)data[0];
  const float *in = (const float *)(const void *)data[1]; /* may be o (in place) */
  for (int64_t c0 = 0; c0 < n; c0 += RT_TAME_BLOCK) {
    const int64_t m = n - c0 < RT_TAME_BLOCK ? n - c0 : RT_TAME_BLOCK;
    if (rt_vm_max_abs_bits(in + c0, m) > SINC_TAME_BITS)
      for (int64_t j = 0; j < m; j++) {
        const float x = in[c0 + j];
        o[c0 + j] = SINC_ONE(x);
      }
    else
      for (int64_t j = 0; j < m; j++) o[c0 + j] = sinc_tame(in[c0 + j]);
  }
}

nrt_status rt_kernel_sinc(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = sinc_tame_f32, [NRT_FLOAT64] = sinc_f64};
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_sinc_reference(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(sinc);
  return rt_run_pointwise(op, loops, -1);
}

#define ENTR(T, LOG) (x != x ? x : x > 0 ? -x * LOG(x) : x == 0 ? (T)0 : -(T)INFINITY)
RT_UNARY_LOOP(entr_f32, float, float, ENTR(float, log))
RT_UNARY_LOOP(entr_f64, double, double, ENTR(double, log))
/* float32 with vmath's logarithm (at most 1 ulp), which vectorises where a
 * libm logf call per element does not; entr_f32 (libm) is its twin, within
 * ENTR_TWIN_ULP ulp (test_entr_within_ulp_of_twin). */
RT_UNARY_LOOP(entr_vm_f32, float, float, ENTR(float, rt_vm_logf))
nrt_status rt_kernel_entr(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = entr_vm_f32, [NRT_FLOAT64] = entr_f64};
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_entr_reference(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(entr);
  return rt_run_pointwise(op, loops, -1);
}

/* scalars [lambd]; NaN is outside every interval, so it passes through. */
#define INSIDE(v, T) ((v) >= -(T)sc->f[0] && (v) <= (T)sc->f[0])
RT_UNARY_LOOP(hardshrink_f32, float, float, INSIDE(x, float) ? 0.0f : x)
RT_UNARY_LOOP(hardshrink_f64, double, double, INSIDE(x, double) ? 0.0 : x)
DEFINE_FLOAT_KERNEL(hardshrink)

/* Inside the interval x * 0: -0 for negative x, NaN stays NaN, as on CPU. */
#define SOFTSHRINK(T) (x > (T)sc->f[0] ? x - (T)sc->f[0] : x < -(T)sc->f[0] ? x + (T)sc->f[0] : x * (T)0)
RT_UNARY_LOOP(softshrink_f32, float, float, SOFTSHRINK(float))
RT_UNARY_LOOP(softshrink_f64, double, double, SOFTSHRINK(double))
DEFINE_FLOAT_KERNEL(softshrink)

/* (grad_in, grad_out, x): a is grad_out, b the forward input. */
RT_BINARY_LOOP(shrink_backward_f32, float, float, INSIDE(b, float) ? 0.0f : a)
RT_BINARY_LOOP(shrink_backward_f64, double, double, INSIDE(b, double) ? 0.0 : a)
RT_BINARY_LOOPS16(shrink_backward, INSIDE(b, float) ? 0.0f : a)
RT_DEFINE_TABLE_KERNEL16(shrink_backward, RT_FLOAT_TABLE)

/* ---- logaddexp, logaddexp2, xlog1py -------------------------------------- */

/* log1p(z) for z in [0, 1], vectorisable. */
RT_VM_INLINE float log1p_unit(float z) {
  float u = 1.0f + z;
  return u == 1.0f ? z : rt_vm_logf(u) * z / (u - 1.0f);
}

/* e^-g and 2^-g for a gap g >= 0. 2^-g is not e^(-g ln 2): rounding g ln 2
 * to a float costs up to g ulp of the result (8 at g = 10); the integer
 * part k of g is exact as a power of two (split in two so that subnormal
 * results round once), the fraction f (|f| <= 1/2, exact) goes through
 * e^(f ln 2). Beyond g = 200 both parts of the sum are below float's
 * smallest subnormal. */
RT_VM_INLINE float exp_neg(float g) { return rt_vm_expf(-g); }
RT_VM_INLINE float exp2_neg(float g) {
  float t = g < 200.0f ? -g : -200.0f;
  float k = rintf(t);
  int32_t n; /* e^((t - k) ln 2) = y 2^n, n in {-1, 0, 1} */
  float y = rt_vm_exp_reduced((t - k) * (float)LN2, &n);
  int32_t ki = (int32_t)k + n, k1 = ki >> 1, k2 = ki - k1;
  return y * rt_vm_float((uint32_t)(k1 + 127) << 23) * rt_vm_float((uint32_t)(k2 + 127) << 23);
}

/* Equal infinities give themselves (their difference would be NaN). The
 * larger operand is a select, not fmaxf: GCC vectorises no fmaxf call
 * without -ffinite-math-only, and NaN is handled before (the sign of a zero
 * maximum cannot show: log1p adds ln 2 to it). */
#define LOGADDEXP_F32(EXP_NEG, SCALE_OUT)                                                    \
  (a == b && fabsf(a) == INFINITY ? a                                                        \
                                  : (a > b ? a : b) + log1p_unit(EXP_NEG(fabsf(a - b))) * (SCALE_OUT))
#define MAX_NAN(a, b) ((a) != (a) || (b) != (b) ? (a) + (b) : (a) > (b) ? (a) : (b))
RT_BINARY_LOOP(logaddexp_f32, float, float, a != a || b != b ? a + b : LOGADDEXP_F32(exp_neg, 1.0f))
RT_BINARY_LOOP(logaddexp_f64, double, double,
               a == b && fabs(a) == INFINITY ? a : MAX_NAN(a, b) + log1p(exp(-fabs(a - b))))

RT_BINARY_LOOP(logaddexp2_f32, float, float,
               a != a || b != b ? a + b : LOGADDEXP_F32(exp2_neg, (float)INV_LN2))
RT_BINARY_LOOP(logaddexp2_f64, double, double,
               a == b && fabs(a) == INFINITY ? a : MAX_NAN(a, b) + log1p(exp2(-fabs(a - b))) * INV_LN2)

/* The tame twins: blocks of RT_TAME_BLOCK contiguous pairs whose operands
 * are all finite with |x| <= 2^126 (so |a - b| is finite) run the same
 * formula without the NaN and infinity selects, e^-g without its upper
 * clamp (-g <= 0) and the logarithm of 1 + e^-g, in [1, 2], without its
 * subnormal and special-value paths: the same bits (runtime/tests/
 * test_pointwise.c, test_logaddexp_tame_blocks_match_twin), about a
 * quarter fewer vector instructions. Other blocks and strided runs take
 * the general loops above. */
#define LOGADDEXP_TAME_BITS 0x7e800000u /* 2^126 */
RT_VM_INLINE float log1p_unit_tame(float z) {
  float u = 1.0f + z;
  return u == 1.0f ? z : rt_vm_logf_normal(u) * z / (u - 1.0f);
}
RT_VM_INLINE float exp_neg_tame(float g) { /* rt_vm_expf(-g) for g >= 0 */
  rt_vm_exp_parts p = rt_vm_exp_parts_clamped(-g < -104.0f ? -104.0f : -g);
  return (p.y * p.scale1) * p.scale2;
}
#define LOGADDEXP_TAME_LOOP(NAME, GENERAL, EXP_NEG, SCALE_OUT)                                   \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),                 \
               (data, strides, n, ctx)) {                                                         \
    const int64_t w = (int64_t)sizeof(float);                                                     \
    if (strides[0] != w || strides[1] != w || strides[2] != w) {                                  \
      GENERAL(data, strides, n, ctx);                                                             \
      return;                                                                                     \
    }                                                                                             \
    float *o = (float *)(void *)data[0];                                                          \
    const float *pa = (const float *)(const void *)data[1], *pb = (const float *)(const void *)data[2]; \
    for (int64_t c0 = 0; c0 < n; c0 += RT_TAME_BLOCK) {                                           \
      const int64_t m = n - c0 < RT_TAME_BLOCK ? n - c0 : RT_TAME_BLOCK;                          \
      const uint32_t ba = rt_vm_max_abs_bits(pa + c0, m), bb = rt_vm_max_abs_bits(pb + c0, m);    \
      if ((ba > bb ? ba : bb) > LOGADDEXP_TAME_BITS) {                                            \
        char *part[3] = {(char *)(o + c0), (char *)(pa + c0), (char *)(pb + c0)};                 \
        GENERAL(part, strides, m, ctx);                                                           \
        continue;                                                                                 \
      }                                                                                           \
      for (int64_t j = 0; j < m; j++) {                                                           \
        const float a = pa[c0 + j], b = pb[c0 + j];                                               \
        o[c0 + j] = (a > b ? a : b) + log1p_unit_tame(EXP_NEG(fabsf(a - b))) * (SCALE_OUT);       \
      }                                                                                           \
    }                                                                                             \
  }
LOGADDEXP_TAME_LOOP(logaddexp_tame_f32, logaddexp_f32, exp_neg_tame, 1.0f)
LOGADDEXP_TAME_LOOP(logaddexp2_tame_f32, logaddexp2_f32, exp2_neg, (float)INV_LN2)

nrt_status rt_kernel_logaddexp(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = logaddexp_tame_f32, [NRT_FLOAT64] = logaddexp_f64};
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_logaddexp2(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = logaddexp2_tame_f32, [NRT_FLOAT64] = logaddexp2_f64};
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_logaddexp_reference(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(logaddexp);
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_logaddexp2_reference(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(logaddexp2);
  return rt_run_pointwise(op, loops, -1);
}

/* The twins (rt_kernel_xlog1py_reference): libm's double log1p per element. */
#define XLOG1PY(T) (b != b ? (T)NAN : a == 0 ? (T)0 : a * log1p(b))
RT_BINARY_LOOP(xlog1py_f32, float, float, XLOG1PY(float))
RT_BINARY_LOOP(xlog1py_f64, double, double, XLOG1PY(double))

/* float32 log1p without libm, vectorisable: u = 1 + b rounded to float,
 * log1p(b) = log(u) + (b - (u - 1)) / u, the second term being the
 * rounding error of u to first order (b - (u - 1) is exact), summed in
 * double. b within float's 2^-24 of zero gives b itself (u == 1); -1,
 * below it and +inf give log(u) (-inf, NaN, +inf); NaN b is the caller's.
 * With rt_vm_logf's 1 ulp, xlog1py rounds a * log1p(b) once from double:
 * within XLOG1PY_TWIN_ULP of the libm twin (runtime/tests/test_pointwise.c). */
RT_VM_INLINE double log1p_vm(float b) {
  const float u = 1.0f + b;
  const double lu = (double)rt_vm_logf(u);
  const double r = u == 1.0f ? (double)b : lu + (double)(b - (u - 1.0f)) / (double)u;
  return b > -1.0f && b < INFINITY ? r : lu;
}
RT_BINARY_LOOP(xlog1py_vm_f32, float, float,
               b != b ? NAN : a == 0.0f ? 0.0f : (float)((double)a * log1p_vm(b)))

nrt_status rt_kernel_xlog1py(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = xlog1py_vm_f32, [NRT_FLOAT64] = xlog1py_f64};
  return rt_run_pointwise(op, loops, -1);
}
nrt_status rt_kernel_xlog1py_reference(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(xlog1py);
  return rt_run_pointwise(op, loops, -1);
}

/* ---- nextafter ------------------------------------------------------------ */

/* One step of a's bits toward b, as C's nextafter (its bitwise twin in
 * runtime/tests/test_pointwise.c) but without a libm call per element, so
 * that the loop vectorises: NaN operands give their sum, equal operands b
 * (the sign of b for zeros), a zero the smallest subnormal of b's sign;
 * otherwise the magnitude grows by one ulp when b lies beyond a away from
 * zero and shrinks by one else (infinity steps down to the largest finite). */
#define NEXTAFTER_BITS(U, BITS, FROM_BITS)                                         \
  (a != a || b != b ? a + b                                                       \
   : a == b         ? b                                                           \
   : a == 0         ? FROM_BITS((BITS(b) & ((U)1 << (sizeof(U) * 8 - 1))) | 1u) \
                    : FROM_BITS(BITS(a) + ((b > a) == (a > 0) ? (U)1 : (U)-1)))
RT_BINARY_LOOP(nextafter_f32, float, float, NEXTAFTER_BITS(uint32_t, rt_vm_bits, rt_vm_float))
RT_BINARY_LOOP(nextafter_f64, double, double, NEXTAFTER_BITS(uint64_t, rt_vm_bits_d, rt_vm_double))

/* One step of a 16-bit float's bits from `from` toward `to` (NaN_ABOVE:
 * the magnitude bits above which a value is NaN); NaN operands give their
 * sum, rounded to the type, as c10's arithmetic would. */
static inline uint16_t nextafter16(uint16_t from, uint16_t to, uint16_t nan_above, float (*load)(uint16_t),
                                   uint16_t (*store)(float)) {
  const uint16_t sign = 0x8000, abs_from = from & 0x7fff, abs_to = to & 0x7fff;
  if (abs_from > nan_above || abs_to > nan_above) return store(load(from) + load(to));
  if (from == to) return from;
  if (abs_from == 0) return abs_to == 0 ? to : (uint16_t)((to & sign) | 1u);
  return abs_from > abs_to || ((from ^ to) & sign) ? (uint16_t)(from - 1u) : (uint16_t)(from + 1u);
}
static float load_bf16(uint16_t v) { return rt_bfloat16_to_float(v); }
static uint16_t store_bf16(float v) { return rt_bfloat16_from_float(v); }
static float load_f16(uint16_t v) { return rt_half_to_float(v); }
static uint16_t store_f16(float v) { return rt_half_from_float(v); }
RT_BINARY_LOOP(nextafter_bf16, uint16_t, uint16_t, nextafter16(a, b, 0x7f80, load_bf16, store_bf16))
RT_BINARY_LOOP(nextafter_f16, uint16_t, uint16_t, nextafter16(a, b, 0x7c00, load_f16, store_f16))

nrt_status rt_kernel_nextafter(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(nextafter);
  const nrt_dtype t = op->compute_dtype;
  if (!rt_is_16bit_float(t) || op->num_operands != 3) return rt_run_pointwise(op, loops, -1);
  const nrt_dtype want[3] = {t, t, t}; /* every operand in the 16-bit type itself */
  return rt_run_pointwise_as(op, t == NRT_BFLOAT16 ? nextafter_bf16 : nextafter_f16, want);
}

/* ---- heaviside ---------------------------------------------------------- */

#define HEAVISIDE(T) (a == 0 ? b : (T)(a > 0))
#define DEFINE_HEAVISIDE(ENUM, S, T) RT_BINARY_LOOP(heaviside_##S, T, T, HEAVISIDE(T))
RT_NUMERIC_TYPES(DEFINE_HEAVISIDE)
RT_BINARY_LOOP(heaviside_bool, uint8_t, uint8_t, (uint8_t)(a == 0 ? b : 1))

nrt_status rt_kernel_heaviside(const nrt_op *op) {
  static const rt_loop_table loops = {
      [NRT_BOOL] = heaviside_bool, [NRT_UINT8] = heaviside_u8, [NRT_INT8] = heaviside_i8,
      [NRT_INT16] = heaviside_i16, [NRT_INT32] = heaviside_i32, [NRT_INT64] = heaviside_i64,
      [NRT_FLOAT32] = heaviside_f32, [NRT_FLOAT64] = heaviside_f64};
  return rt_run_pointwise(op, loops, -1);
}

/* ---- glu and its gradient ---------------------------------------------------
 * a and b are the two halves of glu's input (views the shim cuts). */
#define SIGMOID_D(v) (1.0 / (1.0 + exp(-(v))))
/* float32 and bfloat16 take the tame sigmoid per block of b within |b| <=
 * 86 (the same bits, pointwise.h's RT_BINARY_LOOP_TAME). float32 checks
 * blocks of 128: a block's check pass reads b alone and the next pass a, so
 * on 512 values (a row of glu's [2048, 1024] input, one 4 KiB page for a and
 * b) the two streams take turns; on 128 they run together, 10% faster on
 * the Xeon host (0.45 against 0.50 ms one-thread for 1M outputs, a product
 * a * b taking 0.43). bfloat16, compute-bound (0.57 ms), is fastest on 512. */
#define GLU_F32_BLOCK 128
RT_BINARY_LOOP_TAME(glu_f32, float, RT_TAME_F32_IN, (float), GLU_F32_BLOCK, RT_VM_SIGMOID_TAME_BITS,
                    a * rt_vm_sigmoidf_tame(b), a * rt_vm_sigmoidf(b))
RT_BINARY_LOOP(glu_f64, double, double, a * SIGMOID_D(b))
RT_BINARY_LOOP_TAME(glu_bf16n, uint16_t, rt_bfloat16_to_float, rt_bfloat16_from_float, RT_TAME_BLOCK,
                    RT_VM_SIGMOID_TAME_BITS, a * rt_vm_sigmoidf_tame(b), a * rt_vm_sigmoidf(b))
RT_BINARY_LOOP_CVT(glu_f16n, uint16_t, uint16_t, float, rt_half_to_float, rt_half_from_float,
                   a * rt_vm_sigmoidf(b))
RT_DEFINE_TABLE_KERNEL16(glu, RT_FLOAT_TABLE)

/* operands (grad_a, grad_b, grad_out, a, b); contiguous runs get their
 * own loop, which vectorises. */
#define GLU_BACKWARD_STEP(T, SIG, G, A, B, OUT_A, OUT_B) \
  do {                                                  \
    T g = (G), a = (A), s = SIG(B);                     \
    OUT_A = g * s;                                      \
    OUT_B = g * a * s * ((T)1 - s);                     \
  } while (0)
#define DEFINE_GLU_BACKWARD_BODY(T, SIG)                                                           \
  const int64_t w = (int64_t)sizeof(T);                                                          \
  if (strides[0] == w && strides[1] == w && strides[2] == w && strides[3] == w && strides[4] == w) { \
    T *ga = (T *)data[0], *gb = (T *)data[1];                                                    \
    const T *go = (const T *)data[2], *pa = (const T *)data[3], *pb = (const T *)data[4];        \
    for (int64_t i = 0; i < n; i++) GLU_BACKWARD_STEP(T, SIG, go[i], pa[i], pb[i], ga[i], gb[i]); \
  } else {                                                                                       \
    for (int64_t i = 0; i < n; i++)                                                              \
      GLU_BACKWARD_STEP(T, SIG, RT_LOAD(T, data[2] + i * strides[2]), RT_LOAD(T, data[3] + i * strides[3]), \
                        RT_LOAD(T, data[4] + i * strides[4]), *(T *)(data[0] + i * strides[0]),  \
                        *(T *)(data[1] + i * strides[1]));                                        \
  }
/* The gradient takes 1 - s, which cancels for large b, so s must be the
 * CPU's to the bit wherever it can: e^-b is computed in double (vmath's,
 * 2e-10 relative) and rounded once to float, which is libm's correctly
 * rounded expf but for the rare arguments within 2e-10 of a rounding
 * boundary, and vectorises where a libm call per element does not. */
RT_VM_INLINE float exp_rounded(float v) { return (float)rt_vm_exp_d((double)v); }
#define SIGMOID_F(v) (1.0f / (1.0f + exp_rounded(-(v))))
RT_SIMD_VOID(glu_backward_f32, (char **data, const int64_t *strides, int64_t n, void *ctx),
             (data, strides, n, ctx)) {
  (void)ctx;
  DEFINE_GLU_BACKWARD_BODY(float, SIGMOID_F)
}
static void glu_backward_f64(char **data, const int64_t *strides, int64_t n, void *ctx) {
  (void)ctx;
  DEFINE_GLU_BACKWARD_BODY(double, SIGMOID_D)
}

nrt_status rt_kernel_glu_backward(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(glu_backward);
  if (op->num_outputs != 2 || op->num_operands != 5)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "glu_backward: expects operands (grad_a, grad_b, grad_out, a, b)");
  return rt_run_pointwise(op, loops, -1);
}

/* ---- prelu and its gradient ---------------------------------------------------
 * The weight arrives broadcast to the input's shape (the shim's iterator).
 * x > 0 ? x : w x, so NaN takes the w x branch and stays NaN, as on CPU. */
#define PRELU(T) (a > (T)0 ? a : b * a)
RT_BINARY_LOOP(prelu_f32, float, float, PRELU(float))
RT_BINARY_LOOP(prelu_f64, double, double, PRELU(double))
RT_BINARY_LOOPS16(prelu, PRELU(float))
RT_DEFINE_TABLE_KERNEL16(prelu, RT_FLOAT_TABLE)

/* operands (grad_x, grad_w, grad_out, x, w): grad_x = x > 0 ? g : w g,
 * grad_w = x > 0 ? 0 : x g (per element; the shim sums it over the
 * broadcast dims). */
#define DEFINE_PRELU_BACKWARD(NAME, T)                                           \
  static void NAME(char **data, const int64_t *strides, int64_t n, void *ctx) { \
    (void)ctx;                                                                   \
    for (int64_t i = 0; i < n; i++) {                                            \
      const T g = RT_LOAD(T, data[2] + i * strides[2]);                          \
      const T x = RT_LOAD(T, data[3] + i * strides[3]);                          \
      const T w = RT_LOAD(T, data[4] + i * strides[4]);                          \
      RT_STORE(T, data[0] + i * strides[0], x > (T)0 ? g : w * g);               \
      RT_STORE(T, data[1] + i * strides[1], x > (T)0 ? (T)0 : x * g);            \
    }                                                                            \
  }
DEFINE_PRELU_BACKWARD(prelu_backward_f32, float)
DEFINE_PRELU_BACKWARD(prelu_backward_f64, double)

nrt_status rt_kernel_prelu_backward(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(prelu_backward);
  if (op->num_outputs != 2 || op->num_operands != 5)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "prelu_backward: expects operands (grad_x, grad_w, grad_out, x, w)");
  return rt_run_pointwise(op, loops, -1);
}

/* ---- frexp: operands (mantissa, exponent: int32, x) ---------------------------- */

/* x = m 2^e with |m| in [0.5, 1), read off the bits instead of a libm call
 * per element, so that the loop vectorises (its bitwise twin, libm's frexp,
 * in runtime/tests/test_pointwise.c): a subnormal is first scaled into the
 * normal range by 2^25 (float) or 2^54 (double); zeros, infinities and NaN give x + x (as glibc:
 * -0 stays -0, a NaN comes back quiet) with e = 0; otherwise m keeps x's sign
 * and fraction under the exponent of 0.5, e is the unbiased exponent + 1. */
#define FREXP_BITS(T, U, BITS, FROM_BITS, EXP_BITS, SCALE, SCALE_LOG2, HALF)              \
  RT_VM_INLINE T frexp_bits_##T(T x, int32_t *e) {                                         \
    enum { F = sizeof(U) * 8 - 1 - (EXP_BITS) }; /* fraction bits */                       \
    const U max_exp = ((U)1 << (EXP_BITS)) - 1;                                            \
    const int tiny = ((BITS(x) >> F) & max_exp) == 0;                                      \
    /* a product by a chosen power of two, not a select of x: GCC vectorises this */       \
    const U bits = BITS(x * (tiny ? (SCALE) : (T)1));                                      \
    const U biased = (bits >> F) & max_exp;                                                \
    const int special = biased - 1 >= max_exp - 1; /* biased 0 or max_exp */               \
    const int32_t k = (int32_t)biased - (int32_t)(max_exp >> 1) + 1 - (tiny ? (SCALE_LOG2) : 0); \
    *e = special ? 0 : k;                                                                  \
    return special ? x + x : FROM_BITS((bits & ~(max_exp << F)) | (HALF));                 \
  }
FREXP_BITS(float, uint32_t, rt_vm_bits, rt_vm_float, 8, 0x1p25f, 25, 0x3f000000u)
FREXP_BITS(double, uint64_t, rt_vm_bits_d, rt_vm_double, 11, 0x1p54, 54, 0x3fe0000000000000ull)

#define DEFINE_FREXP(NAME, T)                                                                 \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx), (data, strides, n, ctx)) { \
    (void)ctx;                                                                                \
    if (strides[0] == (int64_t)sizeof(T) && strides[1] == 4 && strides[2] == (int64_t)sizeof(T)) { \
      T *m = (T *)data[0];                                                                    \
      int32_t *e = (int32_t *)data[1];                                                        \
      const T *x = (const T *)data[2];                                                        \
      for (int64_t i = 0; i < n; i++) m[i] = frexp_bits_##T(x[i], &e[i]);                     \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      int32_t k;                                                                              \
      RT_STORE(T, data[0] + i * strides[0], frexp_bits_##T(RT_LOAD(T, data[2] + i * strides[2]), &k)); \
      RT_STORE(int32_t, data[1] + i * strides[1], k);                                         \
    }                                                                                         \
  }
DEFINE_FREXP(frexp_f32, float)
DEFINE_FREXP(frexp_f64, double)

nrt_status rt_kernel_frexp(const nrt_op *op) {
  static const rt_loop_table loops = RT_FLOAT_TABLE(frexp);
  if (op->num_outputs != 2 || op->num_operands != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "frexp: expects operands (mantissa, exponent, x)");
  rt_inner_loop loop = rt_pointwise_loop(op, loops);
  if (!loop) return NRT_ERROR_UNSUPPORTED;
  const nrt_dtype c = rt_compute_dtype(op->compute_dtype);
  const nrt_dtype want[3] = {c, NRT_INT32, c};
  return rt_run_pointwise_as(op, loop, want);
}
