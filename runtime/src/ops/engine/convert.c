/* Conversion loops for every (destination, source) dtype pair.
 *
 * Each source type says how it reads as float, double, int64 and bool; each
 * destination type says which of those it wants (c10's rules: half and
 * bfloat16 convert from float, so int64 and double reach them through float;
 * integers convert from floating values by truncation, uint8 through int64,
 * int8 and int16 through int32, as PyTorch on x86 does). The wide unsigned
 * integers convert from floating values through int64 (uint64 at or above
 * 2^63 directly). Complex sources read as their real part (bool: either part
 * nonzero); complex destinations take a real source with imaginary part 0.
 * complex32 parts read and write like float16 (through float: c10 turns a
 * complex<double> into complex<Half> by way of complex<float>).
 * The generator below writes the 256 loops, each with a contiguous fast path
 * the compiler can vectorise.
 */
#include <string.h>
#include "ops/engine/convert.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"

/* name, C storage type, is floating */
#define RT_DTYPES(X)                 \
  X(bool, uint8_t, 0)                \
  X(uint8, uint8_t, 0)               \
  X(int8, int8_t, 0)                 \
  X(int16, int16_t, 0)               \
  X(int32, int32_t, 0)               \
  X(int64, int64_t, 0)               \
  X(float16, rt_half, 1)             \
  X(bfloat16, rt_bfloat16, 1)        \
  X(float32, float, 1)               \
  X(float64, double, 1)              \
  X(uint16, uint16_t, 0)             \
  X(uint32, uint32_t, 0)             \
  X(uint64, uint64_t, 0)             \
  X(complex64, rt_complex64, 1)      \
  X(complex128, rt_complex128, 1)    \
  X(complex32, rt_complex32, 1)

/* How each source reads as float / double / int64 / bool. */
#define INT_READS(name, T)                                               \
  static inline float f32_of_##name(T v) { return (float)v; }            \
  static inline double f64_of_##name(T v) { return (double)v; }          \
  static inline int64_t i64_of_##name(T v) { return (int64_t)v; }        \
  static inline int bool_of_##name(T v) { return v != 0; }
INT_READS(uint8, uint8_t)
INT_READS(int8, int8_t)
INT_READS(int16, int16_t)
INT_READS(int32, int32_t)
INT_READS(int64, int64_t)
INT_READS(uint16, uint16_t)
INT_READS(uint32, uint32_t)
INT_READS(uint64, uint64_t)
static inline float f32_of_bool(uint8_t v) { return v != 0; }
static inline double f64_of_bool(uint8_t v) { return v != 0; }
static inline int64_t i64_of_bool(uint8_t v) { return v != 0; }
static inline int bool_of_bool(uint8_t v) { return v != 0; }

#define FLOAT_READS(name, T, TO_FLOAT)                                           \
  static inline float f32_of_##name(T v) { return TO_FLOAT(v); }                 \
  static inline double f64_of_##name(T v) { return (double)TO_FLOAT(v); }        \
  static inline int64_t i64_of_##name(T v) { return rt_int64_from_double(f64_of_##name(v)); } \
  static inline int bool_of_##name(T v) { return TO_FLOAT(v) != 0.0f; }
#define AS_IS(v) (v)
FLOAT_READS(float16, rt_half, rt_half_to_float)
FLOAT_READS(bfloat16, rt_bfloat16, rt_bfloat16_to_float)
FLOAT_READS(float32, float, AS_IS)
static inline float f32_of_float64(double v) { return (float)v; }
static inline double f64_of_float64(double v) { return v; }
static inline int64_t i64_of_float64(double v) { return rt_int64_from_double(v); }
static inline int bool_of_float64(double v) { return v != 0.0; }
static inline float f32_of_complex64(rt_complex64 v) { return v.re; }
static inline double f64_of_complex64(rt_complex64 v) { return (double)v.re; }
static inline int64_t i64_of_complex64(rt_complex64 v) { return rt_int64_from_double(v.re); }
static inline int bool_of_complex64(rt_complex64 v) { return v.re != 0.0f || v.im != 0.0f; }
static inline float f32_of_complex128(rt_complex128 v) { return (float)v.re; }
static inline double f64_of_complex128(rt_complex128 v) { return v.re; }
static inline int64_t i64_of_complex128(rt_complex128 v) { return rt_int64_from_double(v.re); }
static inline int bool_of_complex128(rt_complex128 v) { return v.re != 0.0 || v.im != 0.0; }
static inline float f32_of_complex32(rt_complex32 v) { return rt_half_to_float(v.re); }
static inline double f64_of_complex32(rt_complex32 v) { return (double)rt_half_to_float(v.re); }
static inline int64_t i64_of_complex32(rt_complex32 v) { return rt_int64_from_double(f64_of_complex32(v)); }
static inline int bool_of_complex32(rt_complex32 v) {
  return rt_half_to_float(v.re) != 0.0f || rt_half_to_float(v.im) != 0.0f;
}

/* The imaginary part of each source: 0 for the real dtypes. */
#define REAL_IMAG(name, T)                                             \
  static inline float im32_of_##name(T v) { (void)v; return 0.0f; }     \
  static inline double im64_of_##name(T v) { (void)v; return 0.0; }
REAL_IMAG(bool, uint8_t)
REAL_IMAG(uint8, uint8_t)
REAL_IMAG(int8, int8_t)
REAL_IMAG(int16, int16_t)
REAL_IMAG(int32, int32_t)
REAL_IMAG(int64, int64_t)
REAL_IMAG(float16, rt_half)
REAL_IMAG(bfloat16, rt_bfloat16)
REAL_IMAG(float32, float)
REAL_IMAG(float64, double)
REAL_IMAG(uint16, uint16_t)
REAL_IMAG(uint32, uint32_t)
REAL_IMAG(uint64, uint64_t)
static inline float im32_of_complex64(rt_complex64 v) { return v.im; }
static inline double im64_of_complex64(rt_complex64 v) { return (double)v.im; }
static inline float im32_of_complex128(rt_complex128 v) { return (float)v.im; }
static inline double im64_of_complex128(rt_complex128 v) { return v.im; }
static inline float im32_of_complex32(rt_complex32 v) { return rt_half_to_float(v.im); }
static inline double im64_of_complex32(rt_complex32 v) { return (double)rt_half_to_float(v.im); }

/* How each destination is produced from a source of name S. */
#define TO_bool(S, v) ((uint8_t)bool_of_##S(v))
#define TO_float16(S, v) rt_half_from_float(f32_of_##S(v))
#define TO_bfloat16(S, v) rt_bfloat16_from_float(f32_of_##S(v))
#define TO_float32(S, v) f32_of_##S(v)
#define TO_float64(S, v) f64_of_##S(v)
#define TO_int64(S, v) i64_of_##S(v)
#define TO_int32(S, v) (S##_IS_FLOAT ? rt_int32_from_double(f64_of_##S(v)) : (int32_t)i64_of_##S(v))
#define TO_int16(S, v) (S##_IS_FLOAT ? (int16_t)rt_int32_from_double(f64_of_##S(v)) : (int16_t)i64_of_##S(v))
#define TO_int8(S, v) (S##_IS_FLOAT ? (int8_t)rt_int32_from_double(f64_of_##S(v)) : (int8_t)i64_of_##S(v))
#define TO_uint8(S, v) ((uint8_t)i64_of_##S(v))
#define TO_uint16(S, v) ((uint16_t)i64_of_##S(v))
#define TO_uint32(S, v) ((uint32_t)i64_of_##S(v))
#define TO_uint64(S, v) (S##_IS_FLOAT ? rt_uint64_from_double(f64_of_##S(v)) : (uint64_t)i64_of_##S(v))
#define TO_complex64(S, v) ((rt_complex64){f32_of_##S(v), im32_of_##S(v)})
#define TO_complex128(S, v) ((rt_complex128){f64_of_##S(v), im64_of_##S(v)})
#define TO_complex32(S, v) ((rt_complex32){rt_half_from_float(f32_of_##S(v)), rt_half_from_float(im32_of_##S(v))})

#define bool_IS_FLOAT 0
#define uint8_IS_FLOAT 0
#define int8_IS_FLOAT 0
#define int16_IS_FLOAT 0
#define int32_IS_FLOAT 0
#define int64_IS_FLOAT 0
#define float16_IS_FLOAT 1
#define bfloat16_IS_FLOAT 1
#define float32_IS_FLOAT 1
#define float64_IS_FLOAT 1
#define uint16_IS_FLOAT 0
#define uint32_IS_FLOAT 0
#define uint64_IS_FLOAT 0
#define complex64_IS_FLOAT 1
#define complex128_IS_FLOAT 1
#define complex32_IS_FLOAT 1

#define CONVERT_LOOP(D, DT, S, ST)                                               \
  RT_SIMD_VOID(convert_##D##_from_##S, (char **data, const int64_t *strides,     \
                                        int64_t n, void *ctx),                   \
                                       (data, strides, n, ctx)) {                \
    (void)ctx;                                                                   \
    char *dst = data[0];                                                         \
    const char *src = data[1];                                                   \
    if (strides[0] == (int64_t)sizeof(DT) && strides[1] == (int64_t)sizeof(ST)) { \
      DT *restrict d = (DT *)dst;                                                \
      const ST *restrict s = (const ST *)src;                                    \
      for (int64_t i = 0; i < n; i++) d[i] = TO_##D(S, s[i]);                        \
      return;                                                                    \
    }                                                                            \
    for (int64_t i = 0; i < n; i++) {                                            \
      ST v;                                                                      \
      memcpy(&v, src + i * strides[1], sizeof v);                                \
      DT r = TO_##D(S, v);                                                         \
      memcpy(dst + i * strides[0], &r, sizeof r);                                \
    }                                                                            \
  }

#define LOOPS_FOR_DST(D, DT, DF)                                                 \
  CONVERT_LOOP(D, DT, bool, uint8_t)                                             \
  CONVERT_LOOP(D, DT, uint8, uint8_t)                                            \
  CONVERT_LOOP(D, DT, int8, int8_t)                                              \
  CONVERT_LOOP(D, DT, int16, int16_t)                                            \
  CONVERT_LOOP(D, DT, int32, int32_t)                                            \
  CONVERT_LOOP(D, DT, int64, int64_t)                                            \
  CONVERT_LOOP(D, DT, float16, rt_half)                                          \
  CONVERT_LOOP(D, DT, bfloat16, rt_bfloat16)                                     \
  CONVERT_LOOP(D, DT, float32, float)                                            \
  CONVERT_LOOP(D, DT, float64, double)                                           \
  CONVERT_LOOP(D, DT, uint16, uint16_t)                                          \
  CONVERT_LOOP(D, DT, uint32, uint32_t)                                          \
  CONVERT_LOOP(D, DT, uint64, uint64_t)                                          \
  CONVERT_LOOP(D, DT, complex64, rt_complex64)                                   \
  CONVERT_LOOP(D, DT, complex128, rt_complex128)                                 \
  CONVERT_LOOP(D, DT, complex32, rt_complex32)
RT_DTYPES(LOOPS_FOR_DST)

#define TABLE_ROW(D, DT, DF)                                                     \
  {convert_##D##_from_bool, convert_##D##_from_uint8, convert_##D##_from_int8,    \
   convert_##D##_from_int16, convert_##D##_from_int32, convert_##D##_from_int64,  \
   convert_##D##_from_float16, convert_##D##_from_bfloat16,                       \
   convert_##D##_from_float32, convert_##D##_from_float64,                        \
   convert_##D##_from_uint16, convert_##D##_from_uint32, convert_##D##_from_uint64, \
   convert_##D##_from_complex64, convert_##D##_from_complex128,                   \
   convert_##D##_from_complex32},
const rt_inner_loop rt_convert_loops[NRT_DTYPE_COUNT][NRT_DTYPE_COUNT] = {RT_DTYPES(TABLE_ROW)};

void rt_convert_scalar(nrt_dtype dtype, const nrt_scalar *value, void *out) {
  char *data[2] = {out, NULL};
  int64_t strides[2] = {0, 0};
  if (value->is_float) {
    data[1] = (char *)&value->f;
    rt_convert_loops[dtype][NRT_FLOAT64](data, strides, 1, NULL);
  } else {
    data[1] = (char *)&value->i;
    rt_convert_loops[dtype][NRT_INT64](data, strides, 1, NULL);
  }
}
