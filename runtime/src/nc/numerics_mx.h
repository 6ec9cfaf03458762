/* Numerics of the MX (OCP Microscaling) formats: the fp8 / fp4 elements of
 * the packed dtypes and the E8M0 block scale.
 *
 * Elements are small floats with ebits exponent bits, mbits mantissa bits
 * and bias 2^(ebits-1) - 1. A magnitude code c (the bits without the sign)
 * below 2^mbits is subnormal, c * 2^(1 - bias - mbits); above, exponent field
 * c >> mbits. float8_e4m3fn has no infinity (0x7f is NaN, max 448),
 * float8_e5m2 is IEEE-style (0x7c inf, above NaN, max 57344), float4_e2m1fn
 * has neither (max 6). Encoding rounds to nearest even and saturates to the
 * largest finite magnitude (the MX conversion's saturating mode); NaN
 * encodes as NaN where the format has one.
 */
#ifndef NEURONRT_NC_NUMERICS_MX_H
#define NEURONRT_NC_NUMERICS_MX_H

#include <math.h>
#include <stdint.h>
#include "neuronrt/nc.h"
#include "nc/numerics.h"

typedef struct nc_mx_format {
  int ebits, mbits, bits;
  uint32_t max_code; /* largest finite magnitude code */
  int32_t nan_code;  /* magnitude code of NaN, -1: none */
  int has_inf;       /* IEEE top exponent (e5m2) */
} nc_mx_format;

static const nc_mx_format NC_MX_E4M3FN = {4, 3, 8, 0x7e, 0x7f, 0};
static const nc_mx_format NC_MX_E5M2 = {5, 2, 8, 0x7b, 0x7e, 1};
static const nc_mx_format NC_MX_E2M1FN = {2, 1, 4, 0x7, -1, 0};

/* The element format of a packed dtype and its values per word. */
static inline const nc_mx_format *nc_mx_format_of(int32_t dtype) {
  switch (dtype) {
    case NRT_NC_FLOAT8_E4M3FN_X4: return &NC_MX_E4M3FN;
    case NRT_NC_FLOAT8_E5M2_X4: return &NC_MX_E5M2;
    case NRT_NC_FLOAT4_E2M1FN_X4: return &NC_MX_E2M1FN;
    default: return 0;
  }
}

static inline int nc_is_packed_dtype(int32_t dtype) { return nc_mx_format_of(dtype) != 0; }

/* Largest exponent of a normal value of the format (emax of the OCP spec). */
static inline int nc_mx_emax(const nc_mx_format *f) {
  return (int)(f->max_code >> f->mbits) - ((1 << (f->ebits - 1)) - 1);
}

static inline uint32_t nc_mx_encode(const nc_mx_format *f, float x) {
  uint32_t sign = signbit(x) ? 1u << (f->bits - 1) : 0u;
  float a = fabsf(x);
  if (a != a) return f->nan_code >= 0 ? sign | (uint32_t)f->nan_code : 0u;
  if (a == 0.0f) return sign;
  int bias = (1 << (f->ebits - 1)) - 1, emin = 1 - bias, e;
  if (a > 1e30f) return sign | f->max_code; /* infinity and anything past every format */
  frexpf(a, &e);
  e -= 1; /* a = 1.x * 2^e */
  if (e < emin) e = emin;
  /* Exact scaling, then the default rounding mode (nearest even). The code
   * of a normal value is q + (e - emin) << mbits; a carry of q into the
   * next binade lands on the right code by the same formula. */
  float q = nearbyintf(ldexpf(a, f->mbits - e));
  uint32_t code = (uint32_t)q + ((uint32_t)(e - emin) << f->mbits);
  return sign | (code > f->max_code ? f->max_code : code);
}

static inline float nc_mx_decode(const nc_mx_format *f, uint32_t bits) {
  uint32_t sign_bit = 1u << (f->bits - 1), c = bits & (sign_bit - 1);
  float sign = (bits & sign_bit) ? -1.0f : 1.0f;
  int bias = (1 << (f->ebits - 1)) - 1;
  if (f->nan_code >= 0 && c > f->max_code) {
    if (f->has_inf && c == (uint32_t)(((1 << f->ebits) - 1) << f->mbits)) return sign * INFINITY;
    return NAN;
  }
  uint32_t field = c >> f->mbits, man = c & ((1u << f->mbits) - 1);
  if (field == 0) return sign * ldexpf((float)man, 1 - bias - f->mbits);
  return sign * ldexpf((float)(man | (1u << f->mbits)), (int)field - bias - f->mbits);
}

/* E8M0 scale byte: 2^(b - 127), 255 NaN. */
static inline float nc_e8m0_decode(uint8_t b) { return nc_e8m0_to_float(b); }

#endif
