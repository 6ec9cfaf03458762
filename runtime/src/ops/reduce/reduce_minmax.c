/* Extremes: AMAX, AMIN (values) and ARGMAX, ARGMIN (indices, optionally
 * with values), in each dtype's compute type (float for float16 and
 * bfloat16), as PyTorch's CPU kernels give them: NaN wins over any number,
 * and among equal values (or NaNs) the lowest reduction index wins.
 *
 * Row runs find the extreme value with RT_LANES lanes in vector registers,
 * then (arg ops) the first position holding it, a second pass over a run
 * that is still in cache. Columns compare element by element.
 */
#include "ops/reduce/extreme.h"

/* NAME: value and arg block functions of one direction for storage type T
 * computed as C (LOAD reads v as C). */
#define DEFINE_EXTREME(NAME, TAKES, ORDER, IDENT, T, C, LOAD)                                       \
  /* The lanes keep the extreme of the numbers (a plain compare and select,                         \
   * one vector max) and, apart, whether a NaN was seen. */                                         \
  RT_INLINE C NAME##_run(const T *x, int64_t n) {                                                   \
    C lanes[RT_LANES];                                                                              \
    IDX_##C nan[RT_LANES];                                                                          \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = IDENT##_##C, nan[k] = 0;                          \
    int64_t i = 0;                                                                                  \
    for (; i + RT_LANES <= n; i += RT_LANES)                                                        \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                             \
        T v = x[i + k];                                                                             \
        C e = LOAD;                                                                                 \
        lanes[k] = ORDER(e, lanes[k]) ? e : lanes[k];                                               \
        nan[k] |= (IDX_##C)NAN_##C(e);                                                              \
      }                                                                                             \
    C m = IDENT##_##C;                                                                              \
    int seen_nan = 0;                                                                               \
    for (int k = 0; k < RT_LANES; k++) {                                                            \
      m = TAKES(C, lanes[k], m) ? lanes[k] : m;                                                     \
      seen_nan |= nan[k] != 0;                                                                      \
    }                                                                                               \
    for (; i < n; i++) {                                                                            \
      T v = x[i];                                                                                   \
      C e = LOAD;                                                                                   \
      m = TAKES(C, e, m) ? e : m;                                                                   \
    }                                                                                               \
    return seen_nan ? NAN_VALUE_##C : m;                                                            \
  }                                                                                                 \
  /* Position of the first element equal to m (or the first NaN if m is NaN). */                    \
  RT_INLINE int64_t NAME##_find(const T *x, int64_t n, C m) {                                       \
    int64_t i = 0;                                                                                  \
    for (; i + RT_LANES <= n; i += RT_LANES) {                                                      \
      int hit = 0;                                                                                  \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                             \
        T v = x[i + k];                                                                             \
        C e = LOAD;                                                                                 \
        hit |= (e == m) | (NAN_##C(e) & NAN_##C(m));                                                \
      }                                                                                             \
      if (hit) break;                                                                               \
    }                                                                                               \
    for (; i < n; i++) {                                                                            \
      T v = x[i];                                                                                   \
      C e = LOAD;                                                                                   \
      if (e == m || (NAN_##C(e) && NAN_##C(m))) return i;                                           \
    }                                                                                               \
    return n;                                                                                       \
  }                                                                                                 \
  RT_SIMD_VOID(NAME, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r), (acc, b, r)) {    \
    (void)r;                                                                                        \
    C *restrict a = RT_ACC(acc, 0, C);                                                              \
    if (b->row_stride == (int64_t)sizeof(T)) {                                                      \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        C e = NAME##_run((const T *)(b->x + j * b->col_stride), b->rows);                           \
        a[j] = TAKES(C, e, a[j]) ? e : a[j];                                                        \
      }                                                                                             \
    } else if (b->col_stride == (int64_t)sizeof(T)) {                                               \
      for (int64_t i = 0; i < b->rows; i++) {                                                       \
        const T *restrict row = (const T *)(b->x + i * b->row_stride);                              \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = row[j];                                                                             \
          C e = LOAD;                                                                               \
          a[j] = TAKES(C, e, a[j]) ? e : a[j];                                                      \
        }                                                                                           \
      }                                                                                             \
    } else {                                                                                        \
      for (int64_t i = 0; i < b->rows; i++)                                                         \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = *(const T *)(b->x + i * b->row_stride + j * b->col_stride);                         \
          C e = LOAD;                                                                               \
          a[j] = TAKES(C, e, a[j]) ? e : a[j];                                                      \
        }                                                                                           \
    }                                                                                               \
  }                                                                                                 \
  RT_SIMD_VOID(NAME##_arg, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r),             \
                           (acc, b, r)) {                                                           \
    (void)r;                                                                                        \
    C *restrict a = RT_ACC(acc, 0, C);                                                              \
    int64_t *restrict ai = RT_ACC(acc, 1, int64_t);                                                 \
    if (b->row_stride == (int64_t)sizeof(T)) {                                                      \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        const T *x = (const T *)(b->x + j * b->col_stride);                                         \
        C e = NAME##_run(x, b->rows);                                                               \
        int64_t at = b->index + NAME##_find(x, b->rows, e) * b->index_step;                         \
        if (b->rows > 0 && BEATS(C, TAKES, e, at, a[j], ai[j])) {                                   \
          a[j] = e;                                                                                 \
          ai[j] = at;                                                                               \
        }                                                                                           \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    if (b->col_stride == (int64_t)sizeof(T) && b->rows <= 127) {                                    \
      /* The block's own extremes first, rows in order so the first wins                            \
       * (row numbers in an integer as wide as C, so the selects                                    \
       * vectorise), then one merge per column. */                                                  \
      C bv[BLOCK_COLS];                                                                             \
      IDX_##C bi[BLOCK_COLS];                                                                       \
      for (int64_t j0 = 0; j0 < b->cols; j0 += BLOCK_COLS) {                                        \
        int64_t w = b->cols - j0 < BLOCK_COLS ? b->cols - j0 : BLOCK_COLS;                          \
        const T *restrict first = (const T *)b->x + j0;                                             \
        for (int64_t j = 0; j < w; j++) {                                                           \
          T v = first[j];                                                                           \
          bv[j] = LOAD;                                                                             \
          bi[j] = 0;                                                                                \
        }                                                                                           \
        for (int64_t i = 1; i < b->rows; i++) {                                                     \
          const T *restrict row = (const T *)(b->x + i * b->row_stride) + j0;                       \
          for (int64_t j = 0; j < w; j++) {                                                         \
            T v = row[j];                                                                           \
            C e = LOAD;                                                                             \
            int take = TAKES(C, e, bv[j]);                                                          \
            bv[j] = take ? e : bv[j];                                                               \
            bi[j] = take ? (IDX_##C)i : bi[j];                                                      \
          }                                                                                         \
        }                                                                                           \
        for (int64_t j = 0; j < w; j++) {                                                           \
          int64_t at = b->index + (int64_t)bi[j] * b->index_step;                                   \
          if (BEATS(C, TAKES, bv[j], at, a[j0 + j], ai[j0 + j])) {                                  \
            a[j0 + j] = bv[j];                                                                      \
            ai[j0 + j] = at;                                                                        \
          }                                                                                         \
        }                                                                                           \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    for (int64_t i = 0; i < b->rows; i++) {                                                         \
      int64_t at = b->index + i * b->index_step;                                                    \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        T v = *(const T *)(b->x + i * b->row_stride + j * b->col_stride);                           \
        C e = LOAD;                                                                                 \
        if (BEATS(C, TAKES, e, at, a[j], ai[j])) {                                                  \
          a[j] = e;                                                                                 \
          ai[j] = at;                                                                               \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }

#define EXTREMES(DT, SUF, T, C, LOAD)                                                               \
  DEFINE_EXTREME(max_##SUF, MAX_TAKES, GREATER, LOWEST, T, C, LOAD)                                 \
  DEFINE_EXTREME(min_##SUF, MIN_TAKES, LESS, HIGHEST, T, C, LOAD)
RT_REDUCE_ALL_TYPES(EXTREMES)

#define MAX_ENTRY(DT, SUF, T, C, LOAD) [DT] = max_##SUF,
#define MIN_ENTRY(DT, SUF, T, C, LOAD) [DT] = min_##SUF,
#define ARGMAX_ENTRY(DT, SUF, T, C, LOAD) [DT] = max_##SUF##_arg,
#define ARGMIN_ENTRY(DT, SUF, T, C, LOAD) [DT] = min_##SUF##_arg,
static const rt_reduce_block_table max_blocks = {RT_REDUCE_ALL_TYPES(MAX_ENTRY)};
static const rt_reduce_block_table min_blocks = {RT_REDUCE_ALL_TYPES(MIN_ENTRY)};
static const rt_reduce_block_table argmax_blocks = {RT_REDUCE_ALL_TYPES(ARGMAX_ENTRY)};
static const rt_reduce_block_table argmin_blocks = {RT_REDUCE_ALL_TYPES(ARGMIN_ENTRY)};

/* Accumulator handling per compute type and direction: r->variant says
 * whether indices ride along. */
#define DEFINE_EXTREME_ACC(NAME, TAKES, IDENT, C)                                                   \
  static void NAME##_init(rt_acc acc, int64_t n, const rt_reducer *r) {                             \
    C *a = RT_ACC(acc, 0, C);                                                                       \
    for (int64_t j = 0; j < n; j++) a[j] = IDENT##_##C;                                             \
    if (r->variant) {                                                                               \
      int64_t *ai = RT_ACC(acc, 1, int64_t);                                                        \
      for (int64_t j = 0; j < n; j++) ai[j] = INT64_MAX;                                            \
    }                                                                                               \
  }                                                                                                 \
  static void NAME##_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {            \
    C *a = RT_ACC(acc, 0, C);                                                                       \
    const C *b = RT_ACC(later, 0, C);                                                               \
    if (!r->variant) {                                                                              \
      for (int64_t j = 0; j < n; j++) a[j] = TAKES(C, b[j], a[j]) ? b[j] : a[j];                    \
      return;                                                                                       \
    }                                                                                               \
    int64_t *ai = RT_ACC(acc, 1, int64_t);                                                          \
    const int64_t *bi = RT_ACC(later, 1, int64_t);                                                  \
    for (int64_t j = 0; j < n; j++)                                                                 \
      if (BEATS(C, TAKES, b[j], bi[j], a[j], ai[j])) {                                              \
        a[j] = b[j];                                                                                \
        ai[j] = bi[j];                                                                              \
      }                                                                                             \
  }                                                                                                 \
  static void NAME##_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,             \
                            const rt_reducer *r) {                                                  \
    (void)count;                                                                                    \
    memcpy(results[0], RT_ACC(acc, 0, C), (size_t)n * sizeof(C));                                   \
    if (r->variant) memcpy(results[1], RT_ACC(acc, 1, int64_t), (size_t)n * sizeof(int64_t));       \
  }
#define EXTREME_ACCS(C, SUF)                                                                        \
  DEFINE_EXTREME_ACC(max_acc_##SUF, MAX_TAKES, LOWEST, C)                                           \
  DEFINE_EXTREME_ACC(min_acc_##SUF, MIN_TAKES, HIGHEST, C)
EXTREME_ACCS(uint8_t, u8)
EXTREME_ACCS(int8_t, i8)
EXTREME_ACCS(int16_t, i16)
EXTREME_ACCS(int32_t, i32)
EXTREME_ACCS(int64_t, i64)
EXTREME_ACCS(float, f32)
EXTREME_ACCS(double, f64)

typedef struct extreme_accs {
  void (*init)(rt_acc, int64_t, const rt_reducer *);
  void (*combine)(rt_acc, rt_acc, int64_t, const rt_reducer *);
  void (*finish)(rt_acc, int64_t, int64_t, char *const *, const rt_reducer *);
} extreme_accs;

#define ACC_ENTRY(DIR, SUF) {DIR##_acc_##SUF##_init, DIR##_acc_##SUF##_combine, DIR##_acc_##SUF##_finish}
/* [is_min][compute dtype] */
static const extreme_accs extreme_acc_table[2][NRT_DTYPE_COUNT] = {
    {[NRT_BOOL] = ACC_ENTRY(max, u8), [NRT_UINT8] = ACC_ENTRY(max, u8),
     [NRT_INT8] = ACC_ENTRY(max, i8), [NRT_INT16] = ACC_ENTRY(max, i16),
     [NRT_INT32] = ACC_ENTRY(max, i32), [NRT_INT64] = ACC_ENTRY(max, i64),
     [NRT_FLOAT32] = ACC_ENTRY(max, f32), [NRT_FLOAT64] = ACC_ENTRY(max, f64)},
    {[NRT_BOOL] = ACC_ENTRY(min, u8), [NRT_UINT8] = ACC_ENTRY(min, u8),
     [NRT_INT8] = ACC_ENTRY(min, i8), [NRT_INT16] = ACC_ENTRY(min, i16),
     [NRT_INT32] = ACC_ENTRY(min, i32), [NRT_INT64] = ACC_ENTRY(min, i64),
     [NRT_FLOAT32] = ACC_ENTRY(min, f32), [NRT_FLOAT64] = ACC_ENTRY(min, f64)},
};

static nrt_status run_extreme(const nrt_op *op, int is_min, int with_index) {
  nrt_status s = rt_reduce_check_operands(op, 1, with_index ? 2 : 1);
  if (s) return s;
  const char *name = nrt_op_name(op->code);
  nrt_dtype in = op->operands[op->num_outputs].dtype;
  nrt_dtype compute = rt_compute_dtype(in);
  int values = !with_index || op->num_outputs == 2;
  if (values && op->operands[0].dtype != in)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: values must have the input's dtype %s, not %s",
                   name, nrt_dtype_name(in), nrt_dtype_name(op->operands[0].dtype));
  if (with_index && op->operands[op->num_outputs - 1].dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: indices must be int64", name);
  const extreme_accs *accs = &extreme_acc_table[is_min][compute];
  rt_reducer r = {
      .fields = with_index ? 2 : 1,
      .results = with_index ? 2 : 1,
      .result_dtype = {compute, NRT_INT64},
      .first_result = with_index && op->num_outputs == 1,
      .init = accs->init,
      .combine = accs->combine,
      .finish = accs->finish,
      .variant = with_index,
  };
  if (with_index)
    r.block = (is_min ? argmin_blocks : argmax_blocks)[in];
  else
    r.block = (is_min ? min_blocks : max_blocks)[in];
  if (nrt_view_numel(&op->operands[op->num_outputs]) == 0) {
    for (int k = 0; k < op->num_outputs; k++)
      if (nrt_view_numel(&op->operands[k]) != 0)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: cannot reduce an empty dimension", name);
  }
  return rt_reduce(op, &r);
}

nrt_status rt_kernel_amax(const nrt_op *op) { return run_extreme(op, 0, 0); }
nrt_status rt_kernel_amin(const nrt_op *op) { return run_extreme(op, 1, 0); }
nrt_status rt_kernel_argmax(const nrt_op *op) { return run_extreme(op, 0, 1); }
nrt_status rt_kernel_argmin(const nrt_op *op) { return run_extreme(op, 1, 1); }
