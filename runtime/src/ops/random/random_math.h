/* Float logarithm, square root and sine/cosine for the float32 samplers,
 * written as branch-free arithmetic so that sampling loops vectorise (calls
 * into libm would not; even sqrtf keeps a call for errno). Accurate to a few float ulps on the inputs the samplers give
 * them; float64 samplers use libm.
 */
#ifndef NEURONRT_OPS_RANDOM_MATH_H
#define NEURONRT_OPS_RANDOM_MATH_H

#include <stdint.h>
#include "ops/engine/scalar_types.h"

/* Inlined even into the AVX2 clones of the sampling loops, which GCC
 * otherwise refuses when the caller's options differ. */
#if defined(__GNUC__)
#define RT_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define RT_ALWAYS_INLINE static inline
#endif

/* log(x) for normal positive x. With x = m 2^e, m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172: the odd series
 * to s^9 is below float rounding. */
RT_ALWAYS_INLINE float rt_logf_poly(float x) {
  uint32_t bits = rt_f32_bits(x);
  int32_t e = (int32_t)(bits - 0x3f3504f3u) >> 23; /* exponent relative to sqrt(1/2) */
  float m = rt_f32_from_bits(bits - ((uint32_t)e << 23));
  float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float series = 2.0f + s2 * (0.6666666667f + s2 * (0.4f + s2 * (0.2857142857f + s2 * 0.2222222222f)));
  float fe = (float)e;
  return fe * 0.693145752f + (s * series + fe * 1.42860677e-06f); /* ln 2 split in two */
}

/* sqrt(x) for finite x >= 0: three Newton steps on 1/sqrt from a
 * bit-level first guess (relative error 3.4e-2 -> 1.8e-3 -> 5e-6 -> float
 * rounding), then x * (1 / sqrt(x)). */
RT_ALWAYS_INLINE float rt_sqrtf_newton(float x) {
  /* At least 2^-100, to keep 1/sqrt finite (x = 0 still gives 0); an
   * integer max, as non-negative floats order like their bits. */
  uint32_t bits = rt_f32_bits(x);
  bits = bits > 0x0d800000u ? bits : 0x0d800000u;
  float xs = rt_f32_from_bits(bits);
  float y = rt_f32_from_bits(0x5f375a86u - (bits >> 1));
  float half = 0.5f * xs;
  y = y * (1.5f - half * y * y);
  y = y * (1.5f - half * y * y);
  y = y * (1.5f - half * y * y);
  return x * y;
}

/* cos(2 pi u) and sin(2 pi u) for u in [0, 1) with u * 4 exact: the
 * nearest quarter turn q is removed exactly, the rest a in [-pi/4, pi/4]
 * goes through Taylor polynomials, and q rotates the result. */
RT_ALWAYS_INLINE void rt_sincos_turns(float u, float *cosine, float *sine) {
  float t = u * 4.0f;
  int32_t q = (int32_t)(t + 0.5f);
  float a = (t - (float)q) * 1.57079632679f, a2 = a * a;
  float s = a * (1.0f + a2 * (-1.66666667e-1f + a2 * (8.33333333e-3f + a2 * (-1.98412698e-4f +
                                                                            a2 * 2.75573192e-6f))));
  float c = 1.0f + a2 * (-0.5f + a2 * (4.16666667e-2f + a2 * (-1.38888889e-3f +
                                                               a2 * (2.48015873e-5f +
                                                                     a2 * -2.75573192e-7f))));
  int odd = q & 1;
  float x = odd ? s : c, y = odd ? c : s;
  *cosine = ((q + 1) & 2) ? -x : x; /* quarter turns 1 and 2 */
  *sine = (q & 2) ? -y : y;         /* quarter turns 2 and 3 */
}

#endif
