/* See combine.h. A generator writes one run loop (with contiguous and
 * broadcast-source fast paths the compiler vectorises) and one batch loop
 * per (dtype, reduction). */
#include "ops/index/combine.h"

#include <math.h>
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"

/* ---- how each dtype loads, stores and reads alpha ---------------------- */

#define LD_PLAIN(v) (v)
#define ST_PLAIN(T, c) ((T)(c))
#define LD_BOOL(v) ((v) != 0)
#define ST_BOOL(T, c) ((T)((c) != 0))
#define LD_HALF(v) rt_half_to_float(v)
#define ST_HALF(T, c) rt_half_from_float(c)
#define LD_BF16(v) rt_bfloat16_to_float(v)
#define ST_BF16(T, c) rt_bfloat16_from_float(c)

#define ALPHA_INT(args) const int64_t al = (args)->alpha_int
#define ALPHA_BOOL(args) const int al = (args)->alpha != 0.0
#define ALPHA_F32(args) const float al = (float)(args)->alpha
#define ALPHA_F64(args) const double al = (args)->alpha

/* ---- the reductions per kind (a: destination, b: source) ---------------- */

#define WRAP(T, e) ((T)(uint64_t)(e))
#define SUM_INT(T) WRAP(T, (uint64_t)a + (uint64_t)al * (uint64_t)b)
#define PROD_INT(T) WRAP(T, (uint64_t)a * (uint64_t)b)
#define AMAX_INT(T) (b > a ? b : a)
#define AMIN_INT(T) (b < a ? b : a)
#define SUM_BOOL(T) (a | (b & al))
#define PROD_BOOL(T) (a & b)
#define AMAX_BOOL(T) (a | b)
#define AMIN_BOOL(T) (a & b)
#define SUM_FLOAT(T) (a + b * al)
#define PROD_FLOAT(T) (a * b)
#define AMAX_FLOAT(T) ((b != b || b > a) ? b : a)
#define AMIN_FLOAT(T) ((b != b || b < a) ? b : a)

static inline void count_at(rt_index_part *part, const void *dst, size_t size) {
  int64_t *counts = part->local;
  counts[((uintptr_t)dst - (uintptr_t)part->lo) / size]++;
}

#define COMBINE_FNS(FN, T, C, LD, ST, ALPHA, EXPR, COUNTS)                                     \
  RT_SIMD_VOID(FN##_run, (rt_index_part *part, char *s, int64_t ss, char *x, int64_t xs,      \
                          int64_t n), (part, s, ss, x, xs, n)) {                              \
    ALPHA((const rt_combine_args *)part->ctx);                                                \
    (void)al;                                                                                 \
    if (!COUNTS && xs == (int64_t)sizeof(T) && ss == (int64_t)sizeof(T)) {                    \
      T *restrict dst = (T *)x;                                                               \
      const T *restrict src = (const T *)s;                                                   \
      for (int64_t i = 0; i < n; i++) {                                                       \
        C a = LD(dst[i]), b = LD(src[i]);                                                     \
        dst[i] = ST(T, EXPR);                                                                 \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    if (!COUNTS && xs == (int64_t)sizeof(T) && ss == 0) {                                     \
      T *restrict dst = (T *)x;                                                               \
      const C b = LD(*(const T *)s);                                                          \
      for (int64_t i = 0; i < n; i++) {                                                       \
        C a = LD(dst[i]);                                                                     \
        dst[i] = ST(T, EXPR);                                                                 \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T *pd = (T *)(x + i * xs);                                                              \
      C a = LD(*pd), b = LD(*(const T *)(s + i * ss));                                        \
      *pd = ST(T, EXPR);                                                                      \
      if (COUNTS) count_at(part, pd, sizeof(T));                                              \
    }                                                                                         \
  }                                                                                           \
  static void FN##_batch(rt_index_part *part, char *const *s, char *const *x, int64_t n) {    \
    ALPHA((const rt_combine_args *)part->ctx);                                                \
    (void)al;                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T *pd = (T *)x[i];                                                                      \
      C a = LD(*pd), b = LD(*(const T *)s[i]);                                                \
      *pd = ST(T, EXPR);                                                                      \
      if (COUNTS) count_at(part, pd, sizeof(T));                                              \
    }                                                                                         \
  }

/* name, storage type, compute type, load, store, alpha, reductions */
#define DTYPE_FNS(NAME, T, C, LD, ST, ALPHA, SUM, PROD, AMAX, AMIN)  \
  COMBINE_FNS(NAME##_sum, T, C, LD, ST, ALPHA, SUM(T), 0)            \
  COMBINE_FNS(NAME##_mean, T, C, LD, ST, ALPHA, SUM(T), 1)           \
  COMBINE_FNS(NAME##_prod, T, C, LD, ST, ALPHA, PROD(T), 0)          \
  COMBINE_FNS(NAME##_amax, T, C, LD, ST, ALPHA, AMAX(T), 0)          \
  COMBINE_FNS(NAME##_amin, T, C, LD, ST, ALPHA, AMIN(T), 0)

DTYPE_FNS(b8, uint8_t, int, LD_BOOL, ST_BOOL, ALPHA_BOOL, SUM_BOOL, PROD_BOOL, AMAX_BOOL, AMIN_BOOL)
DTYPE_FNS(u8, uint8_t, uint8_t, LD_PLAIN, ST_PLAIN, ALPHA_INT, SUM_INT, PROD_INT, AMAX_INT, AMIN_INT)
DTYPE_FNS(i8, int8_t, int8_t, LD_PLAIN, ST_PLAIN, ALPHA_INT, SUM_INT, PROD_INT, AMAX_INT, AMIN_INT)
DTYPE_FNS(i16, int16_t, int16_t, LD_PLAIN, ST_PLAIN, ALPHA_INT, SUM_INT, PROD_INT, AMAX_INT, AMIN_INT)
DTYPE_FNS(i32, int32_t, int32_t, LD_PLAIN, ST_PLAIN, ALPHA_INT, SUM_INT, PROD_INT, AMAX_INT, AMIN_INT)
DTYPE_FNS(i64, int64_t, int64_t, LD_PLAIN, ST_PLAIN, ALPHA_INT, SUM_INT, PROD_INT, AMAX_INT, AMIN_INT)
DTYPE_FNS(f16, rt_half, float, LD_HALF, ST_HALF, ALPHA_F32, SUM_FLOAT, PROD_FLOAT, AMAX_FLOAT, AMIN_FLOAT)
DTYPE_FNS(bf16, rt_bfloat16, float, LD_BF16, ST_BF16, ALPHA_F32, SUM_FLOAT, PROD_FLOAT, AMAX_FLOAT, AMIN_FLOAT)
DTYPE_FNS(f32, float, float, LD_PLAIN, ST_PLAIN, ALPHA_F32, SUM_FLOAT, PROD_FLOAT, AMAX_FLOAT, AMIN_FLOAT)
DTYPE_FNS(f64, double, double, LD_PLAIN, ST_PLAIN, ALPHA_F64, SUM_FLOAT, PROD_FLOAT, AMAX_FLOAT, AMIN_FLOAT)

/* ---- assignment and fill: bytes only ------------------------------------ */

#define SIZED_FNS(BITS, T)                                                                      \
  static void assign_run_##BITS(rt_index_part *part, char *s, int64_t ss, char *x, int64_t xs, \
                                int64_t n) {                                                    \
    (void)part;                                                                                 \
    if (xs == (int64_t)sizeof(T) && ss == (int64_t)sizeof(T)) {                                 \
      memcpy(x, s, (size_t)n * sizeof(T));                                                      \
      return;                                                                                   \
    }                                                                                           \
    for (int64_t i = 0; i < n; i++) memcpy(x + i * xs, s + i * ss, sizeof(T));                  \
  }                                                                                             \
  static void assign_batch_##BITS(rt_index_part *part, char *const *s, char *const *x,         \
                                  int64_t n) {                                                  \
    (void)part;                                                                                 \
    for (int64_t i = 0; i < n; i++) memcpy(x[i], s[i], sizeof(T));                              \
  }                                                                                             \
  static void fill_run_##BITS(rt_index_part *part, char *s, int64_t ss, char *x, int64_t xs,   \
                              int64_t n) {                                                      \
    (void)s, (void)ss;                                                                          \
    T v;                                                                                        \
    memcpy(&v, ((const rt_combine_args *)part->ctx)->value, sizeof v);                          \
    for (int64_t i = 0; i < n; i++) memcpy(x + i * xs, &v, sizeof v);                           \
  }                                                                                             \
  static void fill_batch_##BITS(rt_index_part *part, char *const *s, char *const *x,           \
                                int64_t n) {                                                    \
    (void)s;                                                                                    \
    T v;                                                                                        \
    memcpy(&v, ((const rt_combine_args *)part->ctx)->value, sizeof v);                          \
    for (int64_t i = 0; i < n; i++) memcpy(x[i], &v, sizeof v);                                 \
  }
SIZED_FNS(8, uint8_t)
SIZED_FNS(16, uint16_t)
SIZED_FNS(32, uint32_t)
SIZED_FNS(64, uint64_t)

/* ---- tables --------------------------------------------------------------- */

#define ROW(NAME)                                                         \
  {                                                                       \
    [NRT_INDEX_SUM] = {NAME##_sum_run, NAME##_sum_batch},                 \
    [NRT_INDEX_PROD] = {NAME##_prod_run, NAME##_prod_batch},              \
    [NRT_INDEX_MEAN] = {NAME##_mean_run, NAME##_mean_batch},              \
    [NRT_INDEX_AMAX] = {NAME##_amax_run, NAME##_amax_batch},              \
    [NRT_INDEX_AMIN] = {NAME##_amin_run, NAME##_amin_batch},              \
  }

static const rt_combine reductions[NRT_DTYPE_COUNT][NRT_INDEX_AMIN + 1] = {
    [NRT_BOOL] = ROW(b8),       [NRT_UINT8] = ROW(u8),     [NRT_INT8] = ROW(i8),
    [NRT_INT16] = ROW(i16),     [NRT_INT32] = ROW(i32),    [NRT_INT64] = ROW(i64),
    [NRT_FLOAT16] = ROW(f16),   [NRT_BFLOAT16] = ROW(bf16), [NRT_FLOAT32] = ROW(f32),
    [NRT_FLOAT64] = ROW(f64),
};

static rt_combine sized(size_t size, int fill) {
  switch (size) {
    case 1: return fill ? (rt_combine){fill_run_8, fill_batch_8} : (rt_combine){assign_run_8, assign_batch_8};
    case 2: return fill ? (rt_combine){fill_run_16, fill_batch_16} : (rt_combine){assign_run_16, assign_batch_16};
    case 4: return fill ? (rt_combine){fill_run_32, fill_batch_32} : (rt_combine){assign_run_32, assign_batch_32};
    default: return fill ? (rt_combine){fill_run_64, fill_batch_64} : (rt_combine){assign_run_64, assign_batch_64};
  }
}

rt_combine rt_combine_loops(nrt_dtype dtype, nrt_index_reduce reduce) {
  if (reduce == NRT_INDEX_ASSIGN) return sized(nrt_dtype_size(dtype), 0);
  if (reduce == NRT_INDEX_MEAN && dtype == NRT_BOOL) return (rt_combine){NULL, NULL};
  return reductions[dtype][reduce];
}

rt_combine rt_fill_loops(size_t elem_size) { return sized(elem_size, 1); }

/* ---- identities and the end of a mean ----------------------------------- */

void rt_combine_identity(nrt_dtype dtype, nrt_index_reduce reduce, void *out) {
  int lowest = reduce == NRT_INDEX_AMAX, highest = reduce == NRT_INDEX_AMIN;
  int one = reduce == NRT_INDEX_PROD;
  double f = lowest ? -INFINITY : highest ? INFINITY : one ? 1.0 : 0.0;
  switch (dtype) {
#define INT_IDENTITY(DT, T, MIN, MAX)                         \
  case DT: {                                                  \
    T v = lowest ? MIN : highest ? MAX : (T)one;              \
    memcpy(out, &v, sizeof v);                                \
    return;                                                   \
  }
    INT_IDENTITY(NRT_BOOL, uint8_t, 0, 1)
    INT_IDENTITY(NRT_UINT8, uint8_t, 0, UINT8_MAX)
    INT_IDENTITY(NRT_INT8, int8_t, INT8_MIN, INT8_MAX)
    INT_IDENTITY(NRT_INT16, int16_t, INT16_MIN, INT16_MAX)
    INT_IDENTITY(NRT_INT32, int32_t, INT32_MIN, INT32_MAX)
    INT_IDENTITY(NRT_INT64, int64_t, INT64_MIN, INT64_MAX)
#undef INT_IDENTITY
    case NRT_FLOAT16: { rt_half v = rt_half_from_float((float)f); memcpy(out, &v, sizeof v); return; }
    case NRT_BFLOAT16: { rt_bfloat16 v = rt_bfloat16_from_float((float)f); memcpy(out, &v, sizeof v); return; }
    case NRT_FLOAT32: { float v = (float)f; memcpy(out, &v, sizeof v); return; }
    default: memcpy(out, &f, sizeof f); return;
  }
}

static inline int64_t floor_div(int64_t a, int64_t b) { /* b > 0 */
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

void rt_combine_mean_finish(nrt_dtype dtype, char *lo, int64_t elems, const int64_t *counts,
                            int include_self) {
  switch (dtype) {
#define INT_MEAN(DT, T)                                                     \
  case DT:                                                                  \
    for (int64_t i = 0; i < elems; i++)                                     \
      if (counts[i]) {                                                      \
        T *p = (T *)lo + i;                                                 \
        *p = (T)floor_div((int64_t)*p, counts[i] + include_self);           \
      }                                                                     \
    return;
    INT_MEAN(NRT_UINT8, uint8_t)
    INT_MEAN(NRT_INT8, int8_t)
    INT_MEAN(NRT_INT16, int16_t)
    INT_MEAN(NRT_INT32, int32_t)
    INT_MEAN(NRT_INT64, int64_t)
#undef INT_MEAN
/* The count is a value of the dtype on the CPU, so it is rounded to it. */
#define FLOAT_MEAN(DT, T, LD, ST)                                                  \
  case DT:                                                                         \
    for (int64_t i = 0; i < elems; i++)                                            \
      if (counts[i]) {                                                             \
        T *p = (T *)lo + i;                                                        \
        *p = ST(T, LD(*p) / LD(ST(T, counts[i] + include_self)));                  \
      }                                                                            \
    return;
    FLOAT_MEAN(NRT_FLOAT16, rt_half, LD_HALF, ST_HALF)
    FLOAT_MEAN(NRT_BFLOAT16, rt_bfloat16, LD_BF16, ST_BF16)
    FLOAT_MEAN(NRT_FLOAT32, float, LD_PLAIN, ST_PLAIN)
    FLOAT_MEAN(NRT_FLOAT64, double, LD_PLAIN, ST_PLAIN)
#undef FLOAT_MEAN
    default: return;
  }
}
