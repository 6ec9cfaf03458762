/* Vectorisable float32 math for pointwise loops.
 *
 * libm's expf, logf, tanhf, erff are calls the compiler cannot vectorise, so
 * a loop over them runs one element at a time. These versions are branch-free
 * straight-line code (range reduction, a polynomial, selects for the edge
 * cases, bit manipulation through memcpy) that GCC inlines and vectorises
 * inside RT_SIMD_* loops. Polynomial steps are fmaf: one rounding each,
 * exact on every build, so the AVX-512, AVX2 and baseline clones give the
 * same bits (the baseline clone, for CPUs without FMA, calls libm's fmaf:
 * slower, not different). Compute-bound loops (GELU, erf, sigmoid) run about
 * 12% faster than with a separate multiply and add.
 *
 * Accuracy against double libm is stated at each function: the worst error
 * over every 7th float bit pattern (all signs and exponents, subnormals
 * included), rounded up; runtime/tests/test_pointwise.c rechecks a sparser
 * sweep, a dense grid and the edge cases. NaN in gives NaN out; +-inf, +-0,
 * overflow and underflow behave as C99 Annex F says for the libm function.
 *
 * The polynomial coefficients are minimax fits (Lawson's iteratively
 * reweighted least squares in 40-digit arithmetic) of the reduced function
 * named at each polynomial, rounded to float.
 */
#ifndef NEURONRT_OPS_VMATH_H
#define NEURONRT_OPS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define RT_VM_INLINE static inline __attribute__((always_inline))

RT_VM_INLINE uint32_t rt_vm_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* The largest |x[j]| of a block as bits (NaN above infinity): the test by
 * which the tame twins take a block (one compare against a bound's bits);
 * a max reduction that vectorises. */
RT_VM_INLINE uint32_t rt_vm_max_abs_bits(const float *x, int64_t n) {
  uint32_t big = 0;
  for (int64_t j = 0; j < n; j++) {
    const uint32_t u = rt_vm_bits(x[j]) & 0x7fffffffu;
    big = u > big ? u : big;
  }
  return big;
}

RT_VM_INLINE float rt_vm_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* e^x as y 2^n1 2^n2, the powers of two as floats: e^x's parts, so that a
 * caller may multiply by something between the two scalings (see SiLU). x
 * is clamped to [lo, 89] (lo >= -170 keeps n1 and n2 normal exponents). */
typedef struct rt_vm_exp_parts {
  float y, scale1, scale2;
} rt_vm_exp_parts;

/* Cody-Waite reduction x = n ln2 + r with ln 2 in two parts (exact for the
 * n that occur) and n = round(x / ln 2) through the 1.5 * 2^23 shifter;
 * e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]; 2^n is split in two powers of
 * two so that subnormal results round once. */
RT_VM_INLINE rt_vm_exp_parts rt_vm_exp_parts_clamped(float xc);

RT_VM_INLINE rt_vm_exp_parts rt_vm_exp_parts_of(float x, float lo) {
  float xc = x > 89.0f ? 89.0f : x; /* NaN passes */
  return rt_vm_exp_parts_clamped(xc < lo ? lo : xc);
}

/* e^x = y 2^n for x in [lo, 89] (or NaN): returns y, sets *ni = n. */
RT_VM_INLINE float rt_vm_exp_reduced(float xc, int32_t *ni) {
  const float shifter = 12582912.0f; /* 1.5 * 2^23 */
  float t = xc * 1.44269504088896341f + shifter;
  float n = t - shifter;
  *ni = (int32_t)(rt_vm_bits(t) - rt_vm_bits(shifter)); /* n, without a float->int cast */
  float r = fmaf(n, 2.12194440e-4f, xc - n * 0.693359375f); /* n ln2_hi is exact */
  /* P(r) ~ (e^r - 1 - r) / r^2 */
  float p = 0.0013814610429108143f;
  p = fmaf(p, r, 0.008368710055947304f);
  p = fmaf(p, r, 0.04166838899254799f);
  p = fmaf(p, r, 0.1666652113199234f);
  p = fmaf(p, r, 0.4999999403953552f);
  return 1.0f + fmaf(r * r, p, r);
}

/* The same for x already in [lo, 89] (or NaN). */
RT_VM_INLINE rt_vm_exp_parts rt_vm_exp_parts_clamped(float xc) {
  int32_t ni;
  float y = rt_vm_exp_reduced(xc, &ni);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  rt_vm_exp_parts parts = {y, rt_vm_float((uint32_t)(n1 + 127) << 23), rt_vm_float((uint32_t)(n2 + 127) << 23)};
  return parts;
}

/* e^x; at most 1 ulp. Beyond [-104, 89] e^x over/underflows. */
RT_VM_INLINE float rt_vm_expf(float x) {
  rt_vm_exp_parts p = rt_vm_exp_parts_of(x, -104.0f);
  return (p.y * p.scale1) * p.scale2;
}

/* rt_vm_expf's bits for x in [RT_VM_EXP_TAME_LO, RT_VM_EXP_TAME_HI] (no
 * NaN), in fewer instructions: there n = round(x / ln 2) lies in [-124, 127]
 * and y in [0.70, 1.42], so y 2^n is a normal float and adding n to y's
 * exponent field gives it exactly, as the two exact scalings do (their
 * split and the clamp exist for the extremes only). Softmax rows whose
 * values span less than 86 take it (nn_softmax.c). */
#define RT_VM_EXP_TAME_LO (-86.0f)
#define RT_VM_EXP_TAME_HI 88.0f
RT_VM_INLINE float rt_vm_expf_tame(float x) {
  int32_t ni;
  float y = rt_vm_exp_reduced(x, &ni);
  return rt_vm_float(rt_vm_bits(y) + ((uint32_t)ni << 23));
}

/* Some composite functions below (the erfc tail, GELU's tanh form) work in
 * double internally and round once at the end: their float formulas lose
 * several ulp to cancellation and to the rounding of intermediate arguments
 * that an exponential amplifies. Vectorised, a double costs two lanes of a
 * float. */

RT_VM_INLINE uint64_t rt_vm_bits_d(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

RT_VM_INLINE double rt_vm_double(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* e^x in double to about 2e-10 relative (ample for float results): the same
 * reduction with the double shifter 1.5 * 2^52 and a degree-8 Taylor
 * polynomial. Below -708 the result stays at e^-708 (normal; far below any
 * float), above 709.78 it is infinity. */
RT_VM_INLINE double rt_vm_exp_d(double x) {
  const double shifter = 6755399441055744.0; /* 1.5 * 2^52 */
  double xc = x > 709.0 ? 709.0 : x;
  xc = xc < -708.0 ? -708.0 : xc;
  double t = xc * 1.4426950408889634 + shifter;
  double n = t - shifter;
  int64_t ni = (int64_t)(rt_vm_bits_d(t) - rt_vm_bits_d(shifter));
  double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 40320;
  p = fma(p, r, 1.0 / 5040);
  p = fma(p, r, 1.0 / 720);
  p = fma(p, r, 1.0 / 120);
  p = fma(p, r, 1.0 / 24);
  p = fma(p, r, 1.0 / 6);
  p = fma(p, r, 0.5);
  double y = 1.0 + (r + (r * r) * p);
  double result = y * rt_vm_double((uint64_t)(ni + 1023) << 52);
  return x > 709.78 ? (double)INFINITY : result;
}

/* Natural logarithm; at most 1 ulp. x = 2^e m with m in [sqrt(1/2),
 * sqrt(2)), f = m - 1 (exact), log(1 + f) = f - f^2/2 + f^3 P(f), plus
 * e ln 2 in two parts. */
RT_VM_INLINE float rt_vm_log_core(float xs, int32_t scaled);
RT_VM_INLINE float rt_vm_logf(float x) {
  int subnormal = x < 0x1p-126f;
  float xs = subnormal ? x * 0x1p23f : x;
  float r = rt_vm_log_core(xs, subnormal ? 23 : 0);
  float special = x == 0.0f ? -INFINITY : (x == INFINITY ? x : NAN);
  return x > 0.0f && x < INFINITY ? r : special;
}

/* rt_vm_logf's bits for a positive normal finite x, without its subnormal
 * scaling and special values (logaddexp's 1 + e^-g, in [1, 2]). */
RT_VM_INLINE float rt_vm_logf_normal(float x) { return rt_vm_log_core(x, 0); }

/* log(xs 2^-scaled) for a positive normal xs: rt_vm_logf's steps. */
RT_VM_INLINE float rt_vm_log_core(float xs, int32_t scaled) {
  uint32_t u = rt_vm_bits(xs) + (0x3f800000u - 0x3f3504f3u); /* 0x3f3504f3 = sqrt(1/2) */
  int32_t e = (int32_t)(u >> 23) - 127 - scaled;
  float f = rt_vm_float((u & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  float z = f * f;
  /* P(f) ~ (log(1 + f) - f + f^2/2) / f^3 */
  float p = -0.07634429633617401f;
  p = fmaf(p, f, 0.12761549651622772f);
  p = fmaf(p, f, -0.131601944565773f);
  p = fmaf(p, f, 0.14201761782169342f);
  p = fmaf(p, f, -0.16623356938362122f);
  p = fmaf(p, f, 0.20001226663589478f);
  p = fmaf(p, f, -0.250008225440979f);
  p = fmaf(p, f, 0.3333333134651184f);
  float ef = (float)e;
  float y = f * z * p + ef * -2.12194440e-4f;
  y = y - 0.5f * z;
  return (f + y) + ef * 0.693359375f;
}

/* Hyperbolic tangent; at most 2 ulp. x + x^3 P(x^2) below 0.625, else
 * 1 - 2 / (exp(2|x|) + 1) with x's sign. */
RT_VM_INLINE float rt_vm_tanhf(float x) {
  float a = fabsf(x);
  float z = x * x;
  /* P(z) ~ (tanh(sqrt z) - sqrt z) / sqrt(z)^3 on [0, 0.625^2] */
  float p = 0.0021429588086903095f;
  p = fmaf(p, z, -0.008177394978702068f);
  p = fmaf(p, z, 0.021700700744986534f);
  p = fmaf(p, z, -0.05394676327705383f);
  p = fmaf(p, z, 0.1333320587873459f);
  p = fmaf(p, z, -0.3333333134651184f);
  float small = copysignf(x + x * z * p, x); /* tanh(-0) = -0 */
  float large = copysignf(1.0f - 2.0f / (rt_vm_expf(a + a) + 1.0f), x);
  return a < 0.625f ? small : large;
}

/* Logistic sigmoid; at most 2 ulp. 1 / (1 + e^-x), and e^x / (1 + e^x) for
 * negative x so that the tail keeps its precision instead of flushing. */
RT_VM_INLINE float rt_vm_sigmoidf(float x) {
  /* -|x| <= 0 needs no upper clamp: GCC turns each clamp into compares
   * and blends over duplicated paths, a third of the loop. */
  float nx = -fabsf(x);
  rt_vm_exp_parts p = rt_vm_exp_parts_clamped(nx < -104.0f ? -104.0f : nx);
  float e = (p.y * p.scale1) * p.scale2;
  float d = 1.0f + e;
  float c = (1.0f - d) + e; /* 1 + e = d + c exactly (Fast2Sum) */
  /* The numerator, 1 or e, by a bit mask: written as a select, GCC
   * divides both and selects, two divisions per element. */
  uint32_t pos = 0u - (uint32_t)(x >= 0.0f);
  float q = rt_vm_float((rt_vm_bits(1.0f) & pos) | (rt_vm_bits(e) & ~pos)) / d;
  /* 1 / d for the correction, without a second division: q itself for
   * x >= 0, and 1 - q for x < 0 since 1 / (1 + e) = 1 - e / (1 + e). The
   * correction is below half an ulp of q, so its few-ulp error is lost. */
  float inv = x >= 0.0f ? q : 1.0f - q;
  float r = q - q * (c * inv); /* num / (d + c), to first order in c */
  /* NaN in, that NaN out: the arithmetic's NaN sign would depend on the
   * operand order the compiler picked, which differs between the
   * vectorised loop and its scalar tail (fused tiles must match). */
  return x != x ? x : r;
}

/* erf(x) for |x| < 1: x (2/sqrt(pi) + z P(z)), z = x^2, with 2/sqrt(pi) in
 * two parts (as one float it is 0.9 ulp off). */
RT_VM_INLINE float rt_vm_erf_small(float x) {
  float z = x * x;
  /* P(z) ~ (erf(sqrt z) / sqrt z - 2/sqrt(pi)) / z on [0, 1] */
  float p = 7.853857823647559e-05f;
  p = fmaf(p, z, -0.0008010192541405559f);
  p = fmaf(p, z, 0.005188327748328447f);
  p = fmaf(p, z, -0.026853810995817184f);
  p = fmaf(p, z, 0.1128358542919159f);
  p = fmaf(p, z, -0.3761262595653534f);
  p = fmaf(p, z, -5.8635382771399236e-08f);
  return copysignf(x * 1.128379225730896f + x * p, x); /* erf(-0) = -0 */
}

/* erfc(a) for a >= 0.5: e^(-a^2) t Q(t) with t = 1 / (1 + 0.4 a), Q fitted
 * on a in [0.5, 10.5], t Q(t) in double (about 1e-9 relative), e^(-a^2) to
 * the float exponential's 1 ulp. Zero above 10.5 (erfc(10.5) ~ 1e-49). NaN
 * passes. */
RT_VM_INLINE double rt_vm_erfc_tail_d(double a) {
  double t = 1.0 / (1.0 + 0.4 * a);
  /* Q(t) ~ erfc(a) e^(a^2) / t */
  double q = 0.060346913124006966;
  q = fma(q, t, -0.22120329496950428);
  q = fma(q, t, 0.22951147644372322);
  q = fma(q, t, -0.056907796175996075);
  q = fma(q, t, 0.1668201783386684);
  q = fma(q, t, 0.16112448474899776);
  q = fma(q, t, 0.20907677130764382);
  q = fma(q, t, 0.22556400442698876);
  q = fma(q, t, 0.22567938262325524);
  /* e^(-a^2) = e^H e^L with H = -a^2 rounded to float and |L| < 2^-24 |H|:
   * the float exponential (at most 1 ulp; subnormal results keep their
   * absolute accuracy) times 1 + L */
  double square = -(a * a);
  float head = (float)square;
  double e = (double)rt_vm_expf(head) * (1.0 + (square - (double)head));
  double r = t * q * e;
  return a > 10.5 ? 0.0 : r;
}

/* Error function; at most 2 ulp. The series below 0.875 (where
 * x 2/sqrt(pi) < 1 still rounds finely), 1 - erfc above. */
RT_VM_INLINE float rt_vm_erff(float x) {
  float a = fabsf(x);
  float big = copysignf((float)(1.0 - rt_vm_erfc_tail_d(a)), x);
  return a < 0.875f ? rt_vm_erf_small(x) : big;
}

/* GELU, exact form: x Phi(x), from one formula free of cancellation:
 * Phi(-|x|) = erfc(a) / 2 = e^(-x^2/2) t Q(t) / 2 with a = |x| / sqrt 2,
 * t = 1 / (1 + a/2), Q fitted on a in [0, 10.5] (3.6e-9 relative). gelu(x)
 * is x Phi(-|x|) for negative x, x (1 - Phi(-|x|)) for positive x. All in
 * float (twice as fast as in double): x^2 = h + l exactly (fmaf is exactly
 * rounded everywhere, so every build gives the same bits), e^(-x^2/2) =
 * e^(-h/2) (1 - l/2), since rounding x^2 first would be magnified by the
 * exponential. At most 6.5 ulp, mostly from t's rounding, which t and Q(t)
 * both carry. (PyTorch's CPU kernel takes 1 + erf(x / sqrt 2), which
 * cancels: for x < -4 its results keep few correct digits.) */
/* The two factors of Phi(-|x|) = half_tq * e: half_tq = t Q(t) / 2 and
 * e = e^(-x^2/2), shared by GELU and its gradient. */
typedef struct rt_vm_phi_parts {
  float half_tq, e;
} rt_vm_phi_parts;

/* t Q(t) / 2, the first factor. */
RT_VM_INLINE float rt_vm_phi_half_tq(float x) {
  float t = 1.0f / fmaf(fabsf(x), 0.35355339f, 1.0f); /* 1 + a/2, rounded once */
  /* Q(t) / 2 (the fitted coefficients halved, exactly) */
  float q = 0.018158901f;
  q = fmaf(q, t, -0.09714867f);
  q = fmaf(q, t, 0.19494867f);
  q = fmaf(q, t, -0.15113533f);
  q = fmaf(q, t, -0.0049495506f);
  q = fmaf(q, t, 0.013899795f);
  q = fmaf(q, t, 0.02904492f);
  q = fmaf(q, t, 0.09235031f);
  q = fmaf(q, t, 0.12266795f);
  q = fmaf(q, t, 0.1411184f);
  q = fmaf(q, t, 0.1410446f);
  return t * q;
}

RT_VM_INLINE rt_vm_phi_parts rt_vm_phi_parts_of(float x) {
  float half_tq = rt_vm_phi_half_tq(x);
  float h = x * x;
  float l = fmaf(x, x, -h);
  int tiny = h < 400.0f; /* beyond, e^(-x^2/2) is 0 in float; NaN goes this way too */
  float head = tiny ? -0.5f * h : -200.0f;
  float tail = tiny ? -0.5f * l : 0.0f;
  float e_head = rt_vm_expf(head);
  rt_vm_phi_parts parts = {half_tq, fmaf(e_head, tail, e_head)};
  return parts;
}

RT_VM_INLINE float rt_vm_geluf(float x) {
  rt_vm_phi_parts p = rt_vm_phi_parts_of(x);
  /* for negative x, x first: Phi(x) alone may be subnormal */
  return x > 0.0f ? x * (1.0f - p.half_tq * p.e) : (x * p.half_tq) * p.e;
}

/* rt_vm_geluf's bits for |x| <= 13 (no NaN), in fewer instructions: there
 * x^2 <= 169, so the tail select is always the first way, and -x^2/2 >=
 * -84.5 lies in rt_vm_expf_tame's domain (no clamp, no split scaling).
 * The eager kernel takes it per block of such values (pointwise.h,
 * RT_UNARY_LOOP_TAME); runtime/tests/test_pointwise.c checks the bits. */
#define RT_VM_GELU_TAME_BITS 0x41500000u /* 13.0f's bits */
RT_VM_INLINE float rt_vm_geluf_tame(float x) {
  float half_tq = rt_vm_phi_half_tq(x);
  float h = x * x;
  float l = fmaf(x, x, -h);
  float e_head = rt_vm_expf_tame(-0.5f * h);
  float e = fmaf(e_head, -0.5f * l, e_head);
  return x > 0.0f ? x * (1.0f - half_tq * e) : (x * half_tq) * e;
}

/* GELU's derivative Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi),
 * from the same parts. */
RT_VM_INLINE float rt_vm_gelu_gradf(float x) {
  rt_vm_phi_parts p = rt_vm_phi_parts_of(x);
  float tail = p.half_tq * p.e;
  float phi = x > 0.0f ? 1.0f - tail : tail;
  return fmaf(x, 0.39894228f * p.e, phi);
}

/* x / (1 + e^-v) in double, rounded once. */
RT_VM_INLINE float rt_vm_times_sigmoid_d(double x, double v) {
  return (float)(x / (1.0 + rt_vm_exp_d(-v)));
}

/* GELU, tanh form: x/2 (1 + tanh(u)) = x sigmoid(2u) with u = sqrt(2/pi)
 * (x + 0.044715 x^3), computed in double: u's rounding in float would be
 * magnified by the exponential. At most 1 ulp. */
RT_VM_INLINE float rt_vm_gelu_tanhf(float x) {
  double xd = x;
  double u = 0.7978845608028654 * (xd + 0.044715 * (xd * xd * xd));
  return rt_vm_times_sigmoid_d(xd, u + u);
}

/* SiLU, x sigmoid(x); at most 3.5 ulp. In float with e = e^-|x|:
 * x / (1 + e) for x >= 0, x e^x / (1 + e) below, where x e^x is formed
 * between e's two scalings so that the tail (subnormal from x < -87.3,
 * zero below -120) rounds once. -inf gives NaN, as PyTorch's
 * x / (1 + e^-x) does. (In double it was 1 ulp and 1.8 times slower.) */
RT_VM_INLINE float rt_vm_siluf(float x) {
  rt_vm_exp_parts p = rt_vm_exp_parts_of(-fabsf(x), -120.0f);
  float head = p.y * p.scale1;
  float e = head * p.scale2;
  float num = x >= 0.0f ? x : x < -120.0f ? x * 0.0f : (head * x) * p.scale2;
  float r = num / (1.0f + e);
  return x != x ? x : r; /* that NaN, in every loop (see rt_vm_sigmoidf) */
}

/* rt_vm_siluf's bits for |x| <= 86 (no NaN): there e = e^-|x| is a
 * normal float, which rt_vm_expf_tame gives exactly, and x e (x < 0)
 * rounds once to what (x e^-|x| 2^n1) 2^n2 gave, no partial product being
 * subnormal. The eager kernel takes it per block (RT_UNARY_LOOP_TAME). */
#define RT_VM_SILU_TAME_BITS 0x42ac0000u /* 86.0f's bits */
RT_VM_INLINE float rt_vm_siluf_tame(float x) {
  float e = rt_vm_expf_tame(-fabsf(x));
  float num = x >= 0.0f ? x : x * e;
  return num / (1.0f + e);
}

#endif
