/* NKI numerics: storage formats and the ALU/activation functions.
 *
 * Engines convert every input to fp32, compute in fp32 and round to the
 * destination format (round to nearest even; float to integer saturates and
 * NaN becomes 0). Low-precision values are stored in their real formats:
 * bf16/fp16/fp8 bit patterns, tf32 as fp32 with 10 mantissa bits.
 */
#ifndef NEURONRT_NC_NUMERICS_H
#define NEURONRT_NC_NUMERICS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "neuronrt/nc.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"

/* fp8 with ebits exponent bits, mbits mantissa bits and an IEEE-style top
 * exponent (inf/NaN). Overflow rounds to infinity, as IEEE does. */
static inline uint8_t nc_fp8_from_float(float f, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1, emax_field = (1 << ebits) - 1;
  uint32_t bits = rt_f32_bits(f);
  uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
  float a = fabsf(f);
  if (a != a) return (uint8_t)(sign | (emax_field << mbits) | (1 << (mbits - 1)));
  if (a == 0.0f) return sign;
  int e;
  frexpf(a, &e);
  e -= 1; /* a = 1.x * 2^e */
  if (e < 1 - bias) e = 1 - bias;
  float q = nearbyintf(ldexpf(a, mbits - e));
  if (q >= (float)(2 << mbits)) {
    e += 1;
    q = nearbyintf(ldexpf(a, mbits - e));
  }
  uint32_t qi = (uint32_t)q;
  if (qi < (1u << mbits)) return (uint8_t)(sign | qi); /* subnormal (or zero) */
  if (e + bias >= emax_field) return (uint8_t)(sign | (emax_field << mbits));
  return (uint8_t)(sign | ((uint32_t)(e + bias) << mbits) | (qi & ((1u << mbits) - 1)));
}

static inline float nc_fp8_to_float(uint8_t b, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1, emax_field = (1 << ebits) - 1;
  int exp = (b >> mbits) & emax_field, man = b & ((1 << mbits) - 1);
  float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (exp == emax_field) return man ? NAN : sign * INFINITY;
  if (exp == 0) return sign * ldexpf((float)man, 1 - bias - mbits);
  return sign * ldexpf((float)(man | (1 << mbits)), exp - bias - mbits);
}

static inline float nc_tf32_round(float f) {
  uint32_t x = rt_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return f;
  x += 0xfffu + ((x >> 13) & 1u);
  return rt_f32_from_bits(x & ~0x1fffu);
}

static inline int64_t nc_sat_int(float f, int64_t lo, int64_t hi) {
  if (f != f) return 0;
  float r = nearbyintf(f);
  if (r <= (float)lo) return lo;
  if (r >= (float)hi) return hi;
  return (int64_t)r;
}

/* float8_e8m0fnu: byte b is 2^(b - 127), 255 NaN. */
static inline float nc_e8m0_to_float(uint8_t b) {
  return b == 255 ? NAN : ldexpf(1.0f, (int)b - 127);
}

/* To the nearest power of two by the magnitude (the sign is dropped); a tie
 * (mantissa exactly 1.5) goes up, except that a subnormal input needs more
 * than half to leave 2^-127; NaN, infinity and anything that rounds past
 * 2^127 give 255 (NaN). The same bytes as torch's float8_e8m0fnu cast. */
static inline uint8_t nc_e8m0_from_float(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint32_t exp = (bits >> 23) & 0xffu, man = bits & 0x7fffffu;
  if (exp == 0xffu) return 255;
  if ((man & 0x400000u) && (exp != 0 || (man & 0x3fffffu))) exp++;
  return exp > 254 ? 255 : (uint8_t)exp;
}

static inline float nc_load(int32_t dtype, const uint8_t *p) {
  switch (dtype) {
    case NRT_NC_BOOL: case NRT_NC_UINT8: return (float)*p;
    case NRT_NC_INT8: return (float)*(const int8_t *)p;
    case NRT_NC_UINT16: { uint16_t v; memcpy(&v, p, 2); return (float)v; }
    case NRT_NC_INT16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
    case NRT_NC_UINT32: { uint32_t v; memcpy(&v, p, 4); return (float)v; }
    case NRT_NC_INT32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
    case NRT_NC_FLOAT8_E4M3: return nc_fp8_to_float(*p, 4, 3);
    case NRT_NC_FLOAT8_E5M2: return nc_fp8_to_float(*p, 5, 2);
    case NRT_NC_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return rt_half_to_float(v); }
    case NRT_NC_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return rt_bfloat16_to_float(v); }
    case NRT_NC_FLOAT8_E8M0FNU: return nc_e8m0_to_float(*p);
    default: { float v; memcpy(&v, p, 4); return v; }
  }
}

static inline void nc_store(int32_t dtype, uint8_t *p, float f) {
  switch (dtype) {
    case NRT_NC_BOOL: *p = f != 0.0f; break;
    case NRT_NC_UINT8: *p = (uint8_t)nc_sat_int(f, 0, UINT8_MAX); break;
    case NRT_NC_INT8: *(int8_t *)p = (int8_t)nc_sat_int(f, INT8_MIN, INT8_MAX); break;
    case NRT_NC_UINT16: { uint16_t v = (uint16_t)nc_sat_int(f, 0, UINT16_MAX); memcpy(p, &v, 2); break; }
    case NRT_NC_INT16: { int16_t v = (int16_t)nc_sat_int(f, INT16_MIN, INT16_MAX); memcpy(p, &v, 2); break; }
    case NRT_NC_UINT32: { uint32_t v = (uint32_t)nc_sat_int(f, 0, UINT32_MAX); memcpy(p, &v, 4); break; }
    case NRT_NC_INT32: { int32_t v = (int32_t)nc_sat_int(f, INT32_MIN, INT32_MAX); memcpy(p, &v, 4); break; }
    case NRT_NC_FLOAT8_E4M3: *p = nc_fp8_from_float(f, 4, 3); break;
    case NRT_NC_FLOAT8_E5M2: *p = nc_fp8_from_float(f, 5, 2); break;
    case NRT_NC_FLOAT16: { uint16_t v = rt_half_from_float(f); memcpy(p, &v, 2); break; }
    case NRT_NC_BFLOAT16: { uint16_t v = rt_bfloat16_from_float(f); memcpy(p, &v, 2); break; }
    case NRT_NC_TFLOAT32: { float v = nc_tf32_round(f); memcpy(p, &v, 4); break; }
    case NRT_NC_FLOAT8_E8M0FNU: *p = nc_e8m0_from_float(f); break;
    default: memcpy(p, &f, 4); break;
  }
}

/* Raw bits of an element as int32 for bitwise ops: integers by value, floats
 * by bit pattern. */
static inline int32_t nc_load_bits(int32_t dtype, const uint8_t *p) {
  switch (nrt_nc_dtype_size(dtype)) {
    case 1: return dtype == NRT_NC_INT8 ? *(const int8_t *)p : *p;
    case 2: {
      uint16_t v;
      memcpy(&v, p, 2);
      return dtype == NRT_NC_INT16 ? (int16_t)v : (int32_t)v;
    }
    default: {
      int32_t v;
      memcpy(&v, p, 4);
      return v;
    }
  }
}

static inline void nc_store_bits(int32_t dtype, uint8_t *p, int32_t v) {
  size_t size = nrt_nc_dtype_size(dtype);
  if (dtype <= NRT_NC_INT32 && dtype != NRT_NC_BOOL) { /* integers saturate by value */
    nc_store(dtype, p, (float)v);
    if (size == 4) memcpy(p, &v, 4); /* int32/uint32 keep every bit */
    return;
  }
  if (size == 1) *p = (uint8_t)v;
  else if (size == 2) { uint16_t h = (uint16_t)v; memcpy(p, &h, 2); }
  else memcpy(p, &v, 4);
}

static inline int nc_alu_is_bitwise(int32_t op) {
  return op >= NRT_NC_ALU_BITWISE_AND && op <= NRT_NC_ALU_RIGHT_SHIFT;
}

static inline float nc_alu(int32_t op, float a, float b) {
  switch (op) {
    case NRT_NC_ALU_ADD: return a + b;
    case NRT_NC_ALU_SUBTRACT: return a - b;
    case NRT_NC_ALU_MULTIPLY: return a * b;
    case NRT_NC_ALU_DIVIDE: return a / b;
    case NRT_NC_ALU_MAXIMUM: return a != a || a > b ? a : b;
    case NRT_NC_ALU_MINIMUM: return a != a || a < b ? a : b;
    case NRT_NC_ALU_POWER: return powf(a, b);
    case NRT_NC_ALU_ABS_MAX: return fmaxf(fabsf(a), fabsf(b));
    case NRT_NC_ALU_ABS_MIN: return fminf(fabsf(a), fabsf(b));
    case NRT_NC_ALU_MOD: {
      float r = fmodf(a, b);
      return r != 0.0f && (r < 0.0f) != (b < 0.0f) ? r + b : r;
    }
    case NRT_NC_ALU_FMOD: return fmodf(a, b);
    case NRT_NC_ALU_EQUAL: return a == b;
    case NRT_NC_ALU_NOT_EQUAL: return a != b;
    case NRT_NC_ALU_GREATER: return a > b;
    case NRT_NC_ALU_GREATER_EQUAL: return a >= b;
    case NRT_NC_ALU_LESS: return a < b;
    case NRT_NC_ALU_LESS_EQUAL: return a <= b;
    case NRT_NC_ALU_LOGICAL_AND: return (a != 0.0f) && (b != 0.0f);
    case NRT_NC_ALU_LOGICAL_OR: return (a != 0.0f) || (b != 0.0f);
    case NRT_NC_ALU_LOGICAL_XOR: return (a != 0.0f) != (b != 0.0f);
    default: return a; /* NONE: bypass */
  }
}

static inline int32_t nc_alu_int(int32_t op, int32_t a, int32_t b) {
  uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
  switch (op) {
    case NRT_NC_ALU_BITWISE_AND: return (int32_t)(ua & ub);
    case NRT_NC_ALU_BITWISE_OR: return (int32_t)(ua | ub);
    case NRT_NC_ALU_BITWISE_XOR: return (int32_t)(ua ^ ub);
    case NRT_NC_ALU_LEFT_SHIFT: return (int32_t)(ub >= 32 ? 0u : ua << ub);
    case NRT_NC_ALU_RIGHT_SHIFT: return (int32_t)(ub >= 32 ? 0u : ua >> ub); /* logical */
    default: return (int32_t)nc_sat_int(nc_alu(op, (float)a, (float)b), INT32_MIN, INT32_MAX);
  }
}

static inline float nc_act(int32_t fn, float x) {
  switch (fn) {
    case NRT_NC_ACT_EXP: return rt_vm_expf(x);
    case NRT_NC_ACT_LOG: return rt_vm_logf(x);
    case NRT_NC_ACT_TANH: return rt_vm_tanhf(x);
    case NRT_NC_ACT_SIGMOID: return rt_vm_sigmoidf(x);
    case NRT_NC_ACT_RELU: return x > 0.0f ? x : (x != x ? x : 0.0f);
    case NRT_NC_ACT_GELU: return rt_vm_geluf(x);
    case NRT_NC_ACT_GELU_APPRX_TANH: return rt_vm_gelu_tanhf(x);
    case NRT_NC_ACT_SILU: return rt_vm_siluf(x);
    case NRT_NC_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(rt_vm_expf(x));
    case NRT_NC_ACT_SQRT: return sqrtf(x);
    case NRT_NC_ACT_RSQRT: return 1.0f / sqrtf(x);
    case NRT_NC_ACT_RECIPROCAL: return 1.0f / x;
    case NRT_NC_ACT_SQUARE: return x * x;
    case NRT_NC_ACT_ABS: return fabsf(x);
    case NRT_NC_ACT_SIGN: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case NRT_NC_ACT_SIN: return sinf(x);
    case NRT_NC_ACT_COS: return cosf(x);
    case NRT_NC_ACT_ARCTAN: return atanf(x);
    case NRT_NC_ACT_ERF: return rt_vm_erff(x);
    case NRT_NC_ACT_NEGATIVE: return -x;
    case NRT_NC_ACT_TAN: return tanf(x);
    case NRT_NC_ACT_CEIL: return ceilf(x);
    case NRT_NC_ACT_FLOOR: return floorf(x);
    case NRT_NC_ACT_TRUNC: return truncf(x);
    case NRT_NC_ACT_GELU_APPRX_SIGMOID: return x * rt_vm_sigmoidf(1.702f * x);
    case NRT_NC_ACT_GELU_DX: /* Phi(x) + x * phi(x) */
      return 0.5f * (1.0f + rt_vm_erff(x * 0.70710678f)) + x * 0.39894228f * rt_vm_expf(-0.5f * x * x);
    case NRT_NC_ACT_GELU_APPRX_SIGMOID_DX: {
      float s = rt_vm_sigmoidf(1.702f * x);
      return s + 1.702f * x * s * (1.0f - s);
    }
    case NRT_NC_ACT_SILU_DX: {
      float s = rt_vm_sigmoidf(x);
      return s * (1.0f + x * (1.0f - s));
    }
    case NRT_NC_ACT_ERF_DX: return 1.12837917f * rt_vm_expf(-x * x); /* 2 / sqrt(pi) */
    default: return x; /* COPY */
  }
}

/* Identity of a reduction, and one step of it. */
static inline float nc_reduce_init(int32_t op) {
  switch (op) {
    case NRT_NC_ALU_MAXIMUM: return -INFINITY;
    case NRT_NC_ALU_MINIMUM: return INFINITY;
    case NRT_NC_ALU_MULTIPLY: return 1.0f;
    case NRT_NC_ALU_ABS_MAX: return 0.0f;
    case NRT_NC_ALU_ABS_MIN: return INFINITY;
    default: return 0.0f;
  }
}

#endif
