/* Element types of the op library and PyTorch's conversion rules.
 *
 * float16 and bfloat16 are stored as uint16_t bit patterns and computed in
 * float, converting with round-to-nearest-even exactly as c10::Half and
 * c10::BFloat16 do (NaN becomes the canonical quiet NaN). Conversions between
 * element types follow c10's static_cast rules; where C would be undefined
 * (float out of an integer's range) we give what x86 gives.
 */
#ifndef NEURONRT_OPS_SCALAR_TYPES_H
#define NEURONRT_OPS_SCALAR_TYPES_H

#include <stdint.h>
#include <string.h>

typedef uint16_t rt_half;
typedef uint16_t rt_bfloat16;
/* Complex elements: real then imaginary part, as std::complex stores them. */
typedef struct rt_complex64 {
  float re, im;
} rt_complex64;
typedef struct rt_complex128 {
  double re, im;
} rt_complex128;
/* complex32 (chalf): two float16 bit patterns, converted like float16. */
typedef struct rt_complex32 {
  rt_half re, im;
} rt_complex32;

static inline uint32_t rt_f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

static inline float rt_f32_from_bits(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static inline rt_half rt_half_from_float(float f) {
  uint32_t x = rt_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (rt_half)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return (rt_half)(sign | 0x7c00u); /* rounds to infinity */
  if (a < 0x38800000u) {
    /* Half subnormal: adding 0.5 aligns the bits so the FPU rounds (RNE). */
    float shifted = rt_f32_from_bits(a) + 0.5f;
    return (rt_half)(sign | (rt_f32_bits(shifted) - 0x3f000000u));
  }
  uint32_t odd = (a >> 13) & 1u;
  a += 0xc8000fffu + odd; /* rebias exponent by -112, round half to even */
  return (rt_half)(sign | (a >> 13));
}

static inline float rt_half_to_float(rt_half h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return rt_f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = (float)mant * 0x1p-24f;
    return rt_f32_from_bits(sign | rt_f32_bits(v));
  }
  return rt_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* Without a branch (NaN is a select), so that a loop of it vectorises. */
static inline __attribute__((always_inline)) rt_bfloat16 rt_bfloat16_from_float(float f) {
  uint32_t x = rt_f32_bits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (rt_bfloat16)((x & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : r);
}

static inline float rt_bfloat16_to_float(rt_bfloat16 b) {
  return rt_f32_from_bits((uint32_t)b << 16);
}

/* Float to integer as x86 truncating conversions give it: out-of-range and
 * NaN produce the "integer indefinite" value. */
static inline int64_t rt_int64_from_double(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)d;
}

/* x86's answer for doubles at or above 2^63 (which int64 cannot hold);
 * below, through int64, as for the other integers. */
static inline uint64_t rt_uint64_from_double(double d) {
  if (d >= 9223372036854775808.0)
    return d < 18446744073709551616.0 ? (uint64_t)d : (uint64_t)INT64_MIN;
  return (uint64_t)rt_int64_from_double(d);
}

static inline int32_t rt_int32_from_double(double d) {
  if (!(d > -2147483649.0 && d < 2147483648.0)) return INT32_MIN;
  return (int32_t)d;
}

#endif
