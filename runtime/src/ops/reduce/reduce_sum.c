/* Folds: reductions whose accumulator is one value combined by an
 * associative operation. SUM, NANSUM (NaN read as zero), MEAN, PROD and COUNT_NONZERO accumulate in
 * float64 (floating inputs) or in int64 with wrap-around (integer inputs,
 * as unsigned 64-bit arithmetic to keep overflow defined); ANY and ALL in
 * one byte.
 *
 * Row loops keep RT_LANES partial results that the compiler maps to vector
 * registers, each lane summing every RT_LANES-th element, and combine them
 * in a fixed tree: a blocked summation, accurate and fast (float sums add
 * groups of 16 elements per lane in float, then the groups in float64).
 * Column loops fold four rows of the block at a time into the accumulators
 * of all its outputs.
 */
#include "ops/reduce/reduce.h"

/* Row runs fold into FOLD_WIDTH partial results: four times the lanes, so
 * that four vector accumulators hide the latency of the vector add (with
 * one, a float32 sum is bound by that latency rather than by memory). */
#define FOLD_WIDTH (4 * RT_LANES)

/* bfloat16 sums read a 32-bit word as two elements: each is a float32
 * once moved to the word's high half (a shift for the low element, a mask
 * for the high one). This needs no widening shuffles, which bound the
 * generic loop (28 instead of 16 G elements/s per core in cache).
 * Groups of PAIR_GROUP elements are summed in float in 8 vectors (even and
 * odd elements of 4 vectors of words), then added to float64 lanes, as the
 * generic float loop does with groups of FOLD_WIDTH * 16. */
typedef uint32_t words16 __attribute__((vector_size(64)));
typedef float floats16 __attribute__((vector_size(64)));
#define PAIR_STEP 128 /* elements per step: 4 vectors of 16 words */
#define PAIR_GROUP 1024
RT_INLINE double bf16_pair_sum(const rt_bfloat16 *x, int64_t n) {
  const char *bytes = (const char *)(const void *)x;
  double lanes[RT_LANES] = {0};
  int64_t i = 0;
  while (i + PAIR_STEP <= n) {
    floats16 acc[8] = {{0}};
    int64_t end = i + PAIR_GROUP < n ? i + PAIR_GROUP : n;
    for (; i + PAIR_STEP <= end; i += PAIR_STEP)
      for (int v = 0; v < 4; v++) {
        words16 w;
        memcpy(&w, bytes + 2 * (i + 32 * v), sizeof w);
        acc[2 * v] += (floats16)(w << 16);
        acc[2 * v + 1] += (floats16)(w & 0xffff0000u);
      }
    floats16 part = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (int k = 0; k < RT_LANES; k++) lanes[k] += (double)part[k];
  }
  for (int k = 0; i < n; i++, k = (k + 1) % RT_LANES) lanes[k] += (double)rt_load_bf16(x[i]);
  for (int w = RT_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) lanes[k] += lanes[k + w];
  return lanes[0];
}

/* NAME folds elements of storage type T, read by LOAD (of v) as P, with OP
 * into A. Row runs fold groups of FOLD_WIDTH * 16 elements into lanes of P
 * (float for float sums: half the vector width of double), then each group's
 * four partial results per lane into lanes of A. PAIRS (a constant) says
 * that the run is a bfloat16 sum, done by bf16_pair_sum instead. */
#define DEFINE_FOLD(NAME, T, A, P, LOAD, OP, IDENT, PAIRS)                                          \
  RT_INLINE A NAME##_run(const T *x, int64_t n) {                                                   \
    if (PAIRS) return (A)bf16_pair_sum((const rt_bfloat16 *)(const void *)x, n);                    \
    A lanes[RT_LANES];                                                                              \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = (IDENT);                                          \
    int64_t i = 0;                                                                                  \
    while (i + RT_LANES <= n) {                                                                     \
      P part[FOLD_WIDTH];                                                                           \
      for (int k = 0; k < FOLD_WIDTH; k++) part[k] = (IDENT);                                       \
      int64_t end = i + FOLD_WIDTH * 16 < n ? i + FOLD_WIDTH * 16 : n;                              \
      for (; i + FOLD_WIDTH <= end; i += FOLD_WIDTH)                                                \
        RT_LANE_LOOP for (int k = 0; k < FOLD_WIDTH; k++) {                                         \
          T v = x[i + k];                                                                           \
          part[k] = OP(part[k], (P)(LOAD));                                                         \
        }                                                                                           \
      for (; i + RT_LANES <= end; i += RT_LANES)                                                    \
        RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                           \
          T v = x[i + k];                                                                           \
          part[k] = OP(part[k], (P)(LOAD));                                                         \
        }                                                                                           \
      for (int k = 0; k < RT_LANES; k++)                                                            \
        lanes[k] = OP(lanes[k], (A)OP(OP(part[k], part[k + RT_LANES]),                              \
                                      OP(part[k + 2 * RT_LANES], part[k + 3 * RT_LANES])));         \
    }                                                                                               \
    for (int k = 0; i < n; i++, k++) {                                                              \
      T v = x[i];                                                                                   \
      lanes[k] = OP(lanes[k], (A)(LOAD));                                                           \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) lanes[k] = OP(lanes[k], lanes[k + w]);                            \
    return lanes[0];                                                                                \
  }                                                                                                 \
  RT_SIMD_VOID(NAME, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r), (acc, b, r)) {    \
    (void)r;                                                                                        \
    A *restrict a = RT_ACC(acc, 0, A);                                                              \
    if (b->row_stride == (int64_t)sizeof(T)) {                                                      \
      for (int64_t j = 0; j < b->cols; j++)                                                         \
        a[j] = OP(a[j], NAME##_run((const T *)(b->x + j * b->col_stride), b->rows));                \
    } else if (b->col_stride == (int64_t)sizeof(T)) {                                               \
      /* Four rows per pass: a quarter of the accumulator traffic. */                               \
      int64_t i = 0, rs = b->row_stride;                                                            \
      for (; i + 4 <= b->rows; i += 4) {                                                            \
        const T *restrict r0 = (const T *)(b->x + i * rs);                                          \
        const T *restrict r1 = (const T *)(b->x + (i + 1) * rs);                                    \
        const T *restrict r2 = (const T *)(b->x + (i + 2) * rs);                                    \
        const T *restrict r3 = (const T *)(b->x + (i + 3) * rs);                                    \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = r0[j];                                                                              \
          A e0 = (A)(LOAD);                                                                         \
          v = r1[j];                                                                                \
          A e1 = (A)(LOAD);                                                                         \
          v = r2[j];                                                                                \
          A e2 = (A)(LOAD);                                                                         \
          v = r3[j];                                                                                \
          A e3 = (A)(LOAD);                                                                         \
          a[j] = OP(a[j], OP(OP(e0, e1), OP(e2, e3)));                                              \
        }                                                                                           \
      }                                                                                             \
      for (; i < b->rows; i++) {                                                                    \
        const T *restrict row = (const T *)(b->x + i * rs);                                         \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = row[j];                                                                             \
          a[j] = OP(a[j], (A)(LOAD));                                                               \
        }                                                                                           \
      }                                                                                             \
    } else {                                                                                        \
      for (int64_t i = 0; i < b->rows; i++)                                                         \
        for (int64_t j = 0; j < b->cols; j++) {                                                     \
          T v = *(const T *)(b->x + i * b->row_stride + j * b->col_stride);                         \
          a[j] = OP(a[j], (A)(LOAD));                                                               \
        }                                                                                           \
    }                                                                                               \
  }

#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define OR(a, b) ((uint8_t)((a) | (b)))
#define AND(a, b) ((uint8_t)((a) & (b)))

/* Reads of an element (v, already in its compute type by LOAD) per fold. */
#define INT_VALUE(LOAD) ((uint64_t)(int64_t)(LOAD))
#define NONZERO(LOAD) ((LOAD) != 0)
#define NAN_AS_ZERO(LOAD) ((LOAD) != (LOAD) ? 0 : (LOAD))

#define INT_FOLDS(DT, SUF, T, C, LOAD)                                                              \
  DEFINE_FOLD(sum_##SUF, T, uint64_t, uint64_t, INT_VALUE(LOAD), ADD, 0, 0)                         \
  DEFINE_FOLD(prod_##SUF, T, uint64_t, uint64_t, INT_VALUE(LOAD), MUL, 1, 0)
/* Float sums have a second variant, float64 throughout, for float64
 * outputs of narrower inputs (PyTorch sums those in float64). */
#define FLOAT_FOLDS(DT, SUF, T, C, LOAD)                                                            \
  DEFINE_FOLD(sum_##SUF, T, double, C, LOAD, ADD, 0, DT == NRT_BFLOAT16)                            \
  DEFINE_FOLD(sum_wide_##SUF, T, double, double, LOAD, ADD, 0, 0)                                   \
  DEFINE_FOLD(prod_##SUF, T, double, double, LOAD, MUL, 1, 0)                                      \
  DEFINE_FOLD(nansum_##SUF, T, double, C, NAN_AS_ZERO(LOAD), ADD, 0, 0)                             \
  DEFINE_FOLD(nansum_wide_##SUF, T, double, double, NAN_AS_ZERO(LOAD), ADD, 0, 0)
#define LOGICAL_FOLDS(DT, SUF, T, C, LOAD)                                                          \
  DEFINE_FOLD(nonzero_##SUF, T, uint64_t, uint64_t, NONZERO(LOAD), ADD, 0, 0)                       \
  DEFINE_FOLD(any_##SUF, T, uint8_t, uint8_t, NONZERO(LOAD), OR, 0, 0)                              \
  DEFINE_FOLD(all_##SUF, T, uint8_t, uint8_t, NONZERO(LOAD), AND, 1, 0)
RT_REDUCE_INT_TYPES(INT_FOLDS)
RT_REDUCE_FLOAT_TYPES(FLOAT_FOLDS)
RT_REDUCE_ALL_TYPES(LOGICAL_FOLDS)

#define SUM_ENTRY(DT, SUF, T, C, LOAD) [DT] = sum_##SUF,
#define SUM_WIDE_ENTRY(DT, SUF, T, C, LOAD) [DT] = sum_wide_##SUF,
#define PROD_ENTRY(DT, SUF, T, C, LOAD) [DT] = prod_##SUF,
#define NONZERO_ENTRY(DT, SUF, T, C, LOAD) [DT] = nonzero_##SUF,
#define ANY_ENTRY(DT, SUF, T, C, LOAD) [DT] = any_##SUF,
#define ALL_ENTRY(DT, SUF, T, C, LOAD) [DT] = all_##SUF,
static const rt_reduce_block_table sum_blocks = {RT_REDUCE_ALL_TYPES(SUM_ENTRY)};
static const rt_reduce_block_table sum_wide_blocks = {RT_REDUCE_FLOAT_TYPES(SUM_WIDE_ENTRY)};
/* Integers have no NaN: their NANSUM is SUM. */
#define NANSUM_ENTRY(DT, SUF, T, C, LOAD) [DT] = nansum_##SUF,
#define NANSUM_WIDE_ENTRY(DT, SUF, T, C, LOAD) [DT] = nansum_wide_##SUF,
static const rt_reduce_block_table nansum_blocks = {RT_REDUCE_INT_TYPES(SUM_ENTRY) RT_REDUCE_FLOAT_TYPES(NANSUM_ENTRY)};
static const rt_reduce_block_table nansum_wide_blocks = {RT_REDUCE_FLOAT_TYPES(NANSUM_WIDE_ENTRY)};
static const rt_reduce_block_table prod_blocks = {RT_REDUCE_ALL_TYPES(PROD_ENTRY)};
static const rt_reduce_block_table nonzero_blocks = {RT_REDUCE_ALL_TYPES(NONZERO_ENTRY)};
static const rt_reduce_block_table any_blocks = {RT_REDUCE_ALL_TYPES(ANY_ENTRY)};
static const rt_reduce_block_table all_blocks = {RT_REDUCE_ALL_TYPES(ALL_ENTRY)};

/* Accumulator handling per accumulator type and operation. */
#define DEFINE_ACC_OPS(NAME, A, OP, IDENT)                                                          \
  static void NAME##_init(rt_acc acc, int64_t n, const rt_reducer *r) {                             \
    (void)r;                                                                                        \
    A *a = RT_ACC(acc, 0, A);                                                                       \
    for (int64_t j = 0; j < n; j++) a[j] = (IDENT);                                                 \
  }                                                                                                 \
  static void NAME##_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {            \
    (void)r;                                                                                        \
    A *a = RT_ACC(acc, 0, A);                                                                       \
    const A *b = RT_ACC(later, 0, A);                                                               \
    for (int64_t j = 0; j < n; j++) a[j] = OP(a[j], b[j]);                                          \
  }                                                                                                 \
  static void NAME##_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,             \
                            const rt_reducer *r) {                                                  \
    (void)r;                                                                                        \
    (void)count;                                                                                    \
    memcpy(results[0], acc.base, (size_t)n * sizeof(A));                                            \
  }
DEFINE_ACC_OPS(int_sum, uint64_t, ADD, 0)
DEFINE_ACC_OPS(int_prod, uint64_t, MUL, 1)
DEFINE_ACC_OPS(float_sum, double, ADD, 0)
DEFINE_ACC_OPS(float_prod, double, MUL, 1)
DEFINE_ACC_OPS(any, uint8_t, OR, 0)
DEFINE_ACC_OPS(all, uint8_t, AND, 1)

static void mean_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,
                        const rt_reducer *r) {
  (void)r;
  const double *a = RT_ACC(acc, 0, double);
  double *out = (double *)(void *)results[0];
  for (int64_t j = 0; j < n; j++) out[j] = a[j] / (double)count;
}

typedef enum fold_kind { FOLD_SUM, FOLD_NANSUM, FOLD_MEAN, FOLD_PROD, FOLD_NONZERO, FOLD_ANY, FOLD_ALL } fold_kind;

static nrt_status run_fold(const nrt_op *op, fold_kind kind) {
  nrt_status s = rt_reduce_check_operands(op, 1, 1);
  if (s) return s;
  const char *name = nrt_op_name(op->code);
  nrt_dtype in = op->operands[1].dtype, out = op->operands[0].dtype;
  int float_in = nrt_dtype_is_floating(in);
  rt_reducer r = {.fields = 1, .results = 1};
  const rt_reduce_block_fn *blocks = NULL;
  switch (kind) {
    case FOLD_SUM:
    case FOLD_NANSUM:
    case FOLD_MEAN:
    case FOLD_PROD:
      if (float_in != nrt_dtype_is_floating(out) || (kind == FOLD_MEAN && !float_in))
        return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: cannot reduce %s into %s", name,
                       nrt_dtype_name(in), nrt_dtype_name(out));
      int wide = out == NRT_FLOAT64 && in != NRT_FLOAT64;
      blocks = kind == FOLD_PROD     ? prod_blocks
               : kind == FOLD_NANSUM ? (wide ? nansum_wide_blocks : nansum_blocks)
               : wide                ? sum_wide_blocks
                                     : sum_blocks;
      r.result_dtype[0] = float_in ? NRT_FLOAT64 : NRT_INT64;
      if (kind == FOLD_PROD) {
        r.init = float_in ? float_prod_init : int_prod_init;
        r.combine = float_in ? float_prod_combine : int_prod_combine;
        r.finish = float_in ? float_prod_finish : int_prod_finish;
      } else {
        r.init = float_in ? float_sum_init : int_sum_init;
        r.combine = float_in ? float_sum_combine : int_sum_combine;
        r.finish = kind == FOLD_MEAN ? mean_finish : float_in ? float_sum_finish : int_sum_finish;
      }
      break;
    case FOLD_NONZERO:
      blocks = nonzero_blocks;
      r.result_dtype[0] = NRT_INT64;
      r.init = int_sum_init;
      r.combine = int_sum_combine;
      r.finish = int_sum_finish;
      break;
    case FOLD_ANY:
    case FOLD_ALL:
      if (out != NRT_BOOL && out != NRT_UINT8)
        return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: output must be bool or uint8, not %s", name,
                       nrt_dtype_name(out));
      blocks = kind == FOLD_ANY ? any_blocks : all_blocks;
      r.result_dtype[0] = NRT_BOOL;
      r.init = kind == FOLD_ANY ? any_init : all_init;
      r.combine = kind == FOLD_ANY ? any_combine : all_combine;
      r.finish = kind == FOLD_ANY ? any_finish : all_finish;
      break;
  }
  r.block = blocks[in];
  return rt_reduce(op, &r);
}

nrt_status rt_kernel_sum(const nrt_op *op) { return run_fold(op, FOLD_SUM); }
nrt_status rt_kernel_nansum(const nrt_op *op) { return run_fold(op, FOLD_NANSUM); }
nrt_status rt_kernel_mean(const nrt_op *op) { return run_fold(op, FOLD_MEAN); }
nrt_status rt_kernel_prod(const nrt_op *op) { return run_fold(op, FOLD_PROD); }
nrt_status rt_kernel_count_nonzero(const nrt_op *op) { return run_fold(op, FOLD_NONZERO); }
nrt_status rt_kernel_any(const nrt_op *op) { return run_fold(op, FOLD_ANY); }
nrt_status rt_kernel_all(const nrt_op *op) { return run_fold(op, FOLD_ALL); }
