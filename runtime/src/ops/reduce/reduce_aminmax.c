/* AMINMAX: the minimum and the maximum in one pass over the input, with
 * AMIN's and AMAX's rules (NaN wins over any number; compute type float for
 * float16 and bfloat16). Row runs keep RT_LANES lanes of both extremes and
 * a NaN flag in vector registers; columns compare element by element. */
#include "ops/reduce/extreme.h"

#define DEFINE_AMINMAX(NAME, T, C, LOAD)                                                            \
  RT_INLINE void NAME##_run(const T *x, int64_t n, C *lo_out, C *hi_out) {                          \
    C lo[RT_LANES], hi[RT_LANES];                                                                   \
    IDX_##C nan[RT_LANES];                                                                          \
    for (int k = 0; k < RT_LANES; k++) lo[k] = HIGHEST_##C, hi[k] = LOWEST_##C, nan[k] = 0;         \
    int64_t i = 0;                                                                                  \
    for (; i + RT_LANES <= n; i += RT_LANES)                                                        \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                             \
        T v = x[i + k];                                                                             \
        C e = LOAD;                                                                                 \
        lo[k] = LESS(e, lo[k]) ? e : lo[k];                                                         \
        hi[k] = GREATER(e, hi[k]) ? e : hi[k];                                                      \
        nan[k] |= (IDX_##C)NAN_##C(e);                                                              \
      }                                                                                             \
    C a = HIGHEST_##C, z = LOWEST_##C;                                                              \
    int seen_nan = 0;                                                                               \
    for (int k = 0; k < RT_LANES; k++) {                                                            \
      a = LESS(lo[k], a) ? lo[k] : a;                                                               \
      z = GREATER(hi[k], z) ? hi[k] : z;                                                            \
      seen_nan |= nan[k] != 0;                                                                      \
    }                                                                                               \
    for (; i < n; i++) {                                                                            \
      T v = x[i];                                                                                   \
      C e = LOAD;                                                                                   \
      a = LESS(e, a) ? e : a;                                                                       \
      z = GREATER(e, z) ? e : z;                                                                    \
      seen_nan |= NAN_##C(e);                                                                       \
    }                                                                                               \
    *lo_out = seen_nan ? NAN_VALUE_##C : a;                                                         \
    *hi_out = seen_nan ? NAN_VALUE_##C : z;                                                         \
  }                                                                                                 \
  RT_SIMD_VOID(NAME, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r), (acc, b, r)) {    \
    (void)r;                                                                                        \
    C *restrict lo = RT_ACC(acc, 0, C);                                                             \
    C *restrict hi = RT_ACC(acc, 1, C);                                                             \
    if (b->row_stride == (int64_t)sizeof(T)) {                                                      \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        C a, z;                                                                                     \
        NAME##_run((const T *)(b->x + j * b->col_stride), b->rows, &a, &z);                         \
        lo[j] = MIN_TAKES(C, a, lo[j]) ? a : lo[j];                                                 \
        hi[j] = MAX_TAKES(C, z, hi[j]) ? z : hi[j];                                                 \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    for (int64_t i = 0; i < b->rows; i++) {                                                         \
      const char *row = b->x + i * b->row_stride;                                                   \
      if (b->col_stride == (int64_t)sizeof(T)) {                                                    \
        const T *restrict rr = (const T *)row;                                                      \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = rr[j];                                                                              \
          C e = LOAD;                                                                               \
          lo[j] = MIN_TAKES(C, e, lo[j]) ? e : lo[j];                                               \
          hi[j] = MAX_TAKES(C, e, hi[j]) ? e : hi[j];                                               \
        }                                                                                           \
      } else {                                                                                      \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = *(const T *)(row + j * b->col_stride);                                              \
          C e = LOAD;                                                                               \
          lo[j] = MIN_TAKES(C, e, lo[j]) ? e : lo[j];                                               \
          hi[j] = MAX_TAKES(C, e, hi[j]) ? e : hi[j];                                               \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }
#define AMINMAX_BLOCKS(DT, SUF, T, C, LOAD) DEFINE_AMINMAX(aminmax_##SUF, T, C, LOAD)
RT_REDUCE_ALL_TYPES(AMINMAX_BLOCKS)
#define AMINMAX_ENTRY(DT, SUF, T, C, LOAD) [DT] = aminmax_##SUF,
static const rt_reduce_block_table aminmax_blocks = {RT_REDUCE_ALL_TYPES(AMINMAX_ENTRY)};

/* Accumulators per compute type: field 0 the minimum, field 1 the maximum. */
#define DEFINE_AMINMAX_ACC(SUF, C)                                                                  \
  static void acc_##SUF##_init(rt_acc acc, int64_t n, const rt_reducer *r) {                        \
    (void)r;                                                                                        \
    C *lo = RT_ACC(acc, 0, C), *hi = RT_ACC(acc, 1, C);                                             \
    for (int64_t j = 0; j < n; j++) lo[j] = HIGHEST_##C, hi[j] = LOWEST_##C;                        \
  }                                                                                                 \
  static void acc_##SUF##_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {       \
    (void)r;                                                                                        \
    C *lo = RT_ACC(acc, 0, C), *hi = RT_ACC(acc, 1, C);                                             \
    const C *blo = RT_ACC(later, 0, C), *bhi = RT_ACC(later, 1, C);                                 \
    for (int64_t j = 0; j < n; j++) {                                                               \
      lo[j] = MIN_TAKES(C, blo[j], lo[j]) ? blo[j] : lo[j];                                         \
      hi[j] = MAX_TAKES(C, bhi[j], hi[j]) ? bhi[j] : hi[j];                                         \
    }                                                                                               \
  }                                                                                                 \
  static void acc_##SUF##_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,        \
                                 const rt_reducer *r) {                                             \
    (void)r;                                                                                        \
    (void)count;                                                                                    \
    memcpy(results[0], RT_ACC(acc, 0, C), (size_t)n * sizeof(C));                                   \
    memcpy(results[1], RT_ACC(acc, 1, C), (size_t)n * sizeof(C));                                   \
  }
DEFINE_AMINMAX_ACC(u8, uint8_t)
DEFINE_AMINMAX_ACC(i8, int8_t)
DEFINE_AMINMAX_ACC(i16, int16_t)
DEFINE_AMINMAX_ACC(i32, int32_t)
DEFINE_AMINMAX_ACC(i64, int64_t)
DEFINE_AMINMAX_ACC(f32, float)
DEFINE_AMINMAX_ACC(f64, double)

typedef struct aminmax_accs {
  void (*init)(rt_acc, int64_t, const rt_reducer *);
  void (*combine)(rt_acc, rt_acc, int64_t, const rt_reducer *);
  void (*finish)(rt_acc, int64_t, int64_t, char *const *, const rt_reducer *);
} aminmax_accs;
#define ACCS(SUF) {acc_##SUF##_init, acc_##SUF##_combine, acc_##SUF##_finish}
/* By compute dtype. */
static const aminmax_accs acc_table[NRT_DTYPE_COUNT] = {
    [NRT_BOOL] = ACCS(u8), [NRT_UINT8] = ACCS(u8), [NRT_INT8] = ACCS(i8),
    [NRT_INT16] = ACCS(i16), [NRT_INT32] = ACCS(i32), [NRT_INT64] = ACCS(i64),
    [NRT_FLOAT32] = ACCS(f32), [NRT_FLOAT64] = ACCS(f64)};

nrt_status rt_kernel_aminmax(const nrt_op *op) {
  nrt_status s = rt_reduce_check_operands(op, 2, 2);
  if (s) return s;
  const char *name = nrt_op_name(op->code);
  nrt_dtype in = op->operands[2].dtype;
  if (op->operands[0].dtype != in || op->operands[1].dtype != in)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: min and max must have the input's dtype %s", name,
                   nrt_dtype_name(in));
  nrt_dtype compute = rt_compute_dtype(in);
  if (!aminmax_blocks[in] || !acc_table[compute].init)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: unsupported dtype %s", name, nrt_dtype_name(in));
  if (nrt_view_numel(&op->operands[2]) == 0 &&
      (nrt_view_numel(&op->operands[0]) != 0 || nrt_view_numel(&op->operands[1]) != 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: cannot reduce an empty dimension", name);
  rt_reducer r = {
      .fields = 2,
      .results = 2,
      .result_dtype = {compute, compute},
      .init = acc_table[compute].init,
      .block = aminmax_blocks[in],
      .combine = acc_table[compute].combine,
      .finish = acc_table[compute].finish,
  };
  return rt_reduce(op, &r);
}
