/* Layer norm, RMS norm and group norm, forward and backward (LAYER_NORM ...
 * GROUP_NORM_BACKWARD in neuronrt/ops/nn.h).
 *
 * Statistics take two passes over data still in cache: the mean, then the
 * squared deviations from it, which stays accurate where a single pass of
 * sums of squares cancels. Weight and bias are converted once per op to the
 * compute dtype (absent ones become ones and zeros), so that row loops read
 * contiguous arrays. Gradients use the centred form
 *   grad_in = rstd (g - mean(g) - xhat mean(g xhat)),  g = grad_out weight,
 * with sum(g xhat) taken as rstd sum(g (x - mean)). The weight and bias
 * gradients sum over rows: rows are cut into at most NN_BLOCKS fixed blocks,
 * each block's sums kept apart and added in block order afterwards, so the
 * result does not depend on the thread count.
 */
#include <stdatomic.h>
#include "ops/nn/nn_common.h"

#define NN_BLOCKS 64

/* ---- row loops ------------------------------------------------------------ */

#define DEFINE_ROW_NORM(C, SUF, SQRT)                                                             \
  /* y = normalised x; returns mean and rstd through m, r. */                                    \
  RT_SIMD_VOID(norm_row_##SUF, (const C *restrict x, C *restrict y, int64_t n,                   \
                                const C *restrict w, const C *restrict b, double eps, int rms,   \
                                C *m, C *r), (x, y, n, w, b, eps, rms, m, r)) {                  \
    double s = 0, s2;                                                                            \
    if (!rms) NN_SUM(C, n, s, x[j]);                                                             \
    const C mu = (C)(s / (double)n);                                                             \
    NN_SUM(C, n, s2, (x[j] - mu) * (x[j] - mu));                                                 \
    const C rs = (C)(1.0 / SQRT(s2 / (double)n + eps));                                          \
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mu) * rs * w[j] + b[j];                       \
    *m = mu;                                                                                     \
    *r = rs;                                                                                     \
  }                                                                                              \
  /* gx (if wanted) of one row; adds the row's terms to dw, db (if given). */                     \
  RT_SIMD_VOID(norm_bwd_row_##SUF, (const C *restrict gy, const C *restrict x,                   \
                                    const C *restrict w, C mu, C rs, int64_t n, int rms,         \
                                    C *restrict gx, C *restrict dw, C *restrict db),             \
                                   (gy, x, w, mu, rs, n, rms, gx, dw, db)) {                     \
    if (gx) {                                                                                    \
      double sg = 0, sgx;                                                                        \
      if (!rms) NN_SUM(C, n, sg, gy[j] * w[j]);                                                  \
      NN_SUM(C, n, sgx, gy[j] * w[j] * (x[j] - mu));                                             \
      const C a = (C)(sg / (double)n);                                                           \
      const C q = (C)(sgx * (double)rs * (double)rs / (double)n);                                \
      for (int64_t j = 0; j < n; j++) gx[j] = rs * (gy[j] * w[j] - a - (x[j] - mu) * q);         \
    }                                                                                            \
    if (dw)                                                                                      \
      for (int64_t j = 0; j < n; j++) dw[j] += gy[j] * (x[j] - mu) * rs;                         \
    if (db)                                                                                      \
      for (int64_t j = 0; j < n; j++) db[j] += gy[j];                                            \
  }

DEFINE_ROW_NORM(float, f, sqrt)
DEFINE_ROW_NORM(double, d, sqrt)

/* The forward row of contiguous bfloat16 input and output: norm_row_f's
 * arithmetic, so bitwise its result rounded once, with the conversions
 * inside its first and last loops (xf: the row widened, n floats). Through
 * the converters (a row loop each side) the two conversions took more time
 * than the row itself on a Zen 4; the input's cache misses now overlap the
 * first sum. */
RT_SIMD_VOID(norm_row_bf16, (const rt_bfloat16 *restrict x, rt_bfloat16 *restrict y, float *restrict xf,
                             int64_t n, const float *restrict w, const float *restrict b, double eps, int rms,
                             float *m, float *r), (x, y, xf, n, w, b, eps, rms, m, r)) {
  double s = 0, s2;
  if (rms)
    for (int64_t j = 0; j < n; j++) xf[j] = rt_bfloat16_to_float(x[j]);
  else
    NN_SUM(float, n, s, (xf[j] = rt_bfloat16_to_float(x[j])));
  const float mu = (float)(s / (double)n);
  NN_SUM(float, n, s2, (xf[j] - mu) * (xf[j] - mu));
  const float rs = (float)(1.0 / sqrt(s2 / (double)n + eps));
  for (int64_t j = 0; j < n; j++) y[j] = rt_bfloat16_from_float((xf[j] - mu) * rs * w[j] + b[j]);
  *m = mu;
  *r = rs;
}

/* ---- layer norm and RMS norm ------------------------------------------------ */

typedef struct row_job {
  nn_operand y, x, gy; /* [1, rows, n]; y is grad_in in the backward */
  nrt_dtype c;
  int64_t rows, n, block_rows;
  int rms;
  double eps;
  void *w, *b;         /* vectors [n] in c */
  void *mean, *rstd;   /* vectors [rows] in c */
  void *dw, *db;       /* backward: [blocks, n] partial sums in c, or NULL */
  atomic_int out_of_memory;
} row_job;

#define AT(p, c, i) ((void *)((char *)(p) + (size_t)(i) * rt_dtype_size(c)))

static void norm_range(int64_t begin, int64_t end, void *ctx) {
  row_job *job = ctx;
  const nrt_dtype c = job->c;
  const int64_t n = job->n, cs = (int64_t)rt_dtype_size(c);
  char *scratch = malloc((size_t)(2 * n * cs));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  for (int64_t i = begin; i < end; i++) {
    const char *px = job->x.base + i * job->x.stride[1];
    char *py = job->y.base + i * job->y.stride[1];
    if (c == NRT_FLOAT32 && job->x.dtype == NRT_BFLOAT16 && job->y.dtype == NRT_BFLOAT16 &&
        job->x.stride[2] == 2 && job->y.stride[2] == 2) {
      norm_row_bf16((const rt_bfloat16 *)(const void *)px, (rt_bfloat16 *)(void *)py, (float *)(void *)scratch,
                    n, job->w, job->b, job->eps, job->rms, AT(job->mean, c, i), AT(job->rstd, c, i));
      continue;
    }
    const void *x = nn_load(px, job->x.stride[2], job->x.dtype, c, n, scratch + n * cs);
    void *y = nn_target(py, job->y.stride[2], job->y.dtype, c, n, scratch);
    if (c == NRT_FLOAT64)
      norm_row_d(x, y, n, job->w, job->b, job->eps, job->rms, AT(job->mean, c, i), AT(job->rstd, c, i));
    else
      norm_row_f(x, y, n, job->w, job->b, job->eps, job->rms, AT(job->mean, c, i), AT(job->rstd, c, i));
    nn_store(py, job->y.stride[2], job->y.dtype, c, n, y);
  }
  free(scratch);
}

/* One task per block of block_rows rows. */
static void norm_backward_range(int64_t begin, int64_t end, void *ctx) {
  row_job *job = ctx;
  const nrt_dtype c = job->c;
  const int64_t n = job->n, cs = (int64_t)rt_dtype_size(c);
  const int want_gx = job->y.base != NULL;
  char *scratch = malloc((size_t)(3 * n * cs));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  for (int64_t blk = begin; blk < end; blk++) {
    void *dw = job->dw ? AT(job->dw, c, blk * n) : NULL, *db = job->db ? AT(job->db, c, blk * n) : NULL;
    if (dw) memset(dw, 0, (size_t)(n * cs));
    if (db) memset(db, 0, (size_t)(n * cs));
    int64_t last = (blk + 1) * job->block_rows < job->rows ? (blk + 1) * job->block_rows : job->rows;
    for (int64_t i = blk * job->block_rows; i < last; i++) {
      const void *x = nn_load(job->x.base + i * job->x.stride[1], job->x.stride[2], job->x.dtype, c, n,
                              scratch + n * cs);
      const void *gy = nn_load(job->gy.base + i * job->gy.stride[1], job->gy.stride[2], job->gy.dtype,
                               c, n, scratch + 2 * n * cs);
      char *pgx = want_gx ? job->y.base + i * job->y.stride[1] : NULL;
      void *gx = want_gx ? nn_target(pgx, job->y.stride[2], job->y.dtype, c, n, scratch) : NULL;
      if (c == NRT_FLOAT64)
        norm_bwd_row_d(gy, x, job->w, job->mean ? ((double *)job->mean)[i] : 0, ((double *)job->rstd)[i],
                       n, job->rms, gx, dw, db);
      else
        norm_bwd_row_f(gy, x, job->w, job->mean ? ((float *)job->mean)[i] : 0, ((float *)job->rstd)[i],
                       n, job->rms, gx, dw, db);
      if (gx) nn_store(pgx, job->y.stride[2], job->y.dtype, c, n, gx);
    }
  }
  free(scratch);
}

/* Sums the block partials of columns [begin, end) into the first block. */
typedef struct block_sum {
  void *part[2];
  nrt_dtype c;
  int64_t blocks, n;
} block_sum;

/* Columns go SUM_COLS at a time, each block's row of them added to
 * double totals: contiguous loads that vectorise (one column at a time,
 * striding over the blocks, took a third as long as the rows' work). Each
 * column still sums its blocks in block order. */
#define SUM_COLS 64
#define DEFINE_BLOCK_SUM(C)                                                                      \
  RT_SIMD_VOID(block_sum_##C, (C *part, int64_t blocks, int64_t n, int64_t j0, int64_t w),       \
                              (part, blocks, n, j0, w)) {                                        \
    double total[SUM_COLS] = {0};                                                                \
    for (int64_t blk = 0; blk < blocks; blk++)                                                   \
      for (int64_t j = 0; j < w; j++) total[j] += part[blk * n + j0 + j];                        \
    for (int64_t j = 0; j < w; j++) part[j0 + j] = (C)total[j];                                  \
  }
DEFINE_BLOCK_SUM(float)
DEFINE_BLOCK_SUM(double)

static void block_sum_range(int64_t begin, int64_t end, void *ctx) {
  const block_sum *bs = ctx;
  for (int k = 0; k < 2; k++) {
    if (!bs->part[k]) continue;
    for (int64_t j0 = begin; j0 < end; j0 += SUM_COLS) {
      int64_t w = end - j0 < SUM_COLS ? end - j0 : SUM_COLS;
      if (bs->c == NRT_FLOAT64)
        block_sum_double(bs->part[k], bs->blocks, bs->n, j0, w);
      else
        block_sum_float(bs->part[k], bs->blocks, bs->n, j0, w);
    }
  }
}

/* A vector of n ones (fill 1) or zeros (fill 0) in c, for absent weights. */
static void *filled_vector(nrt_dtype c, int64_t n, double fill) {
  void *v = aligned_alloc(64, ((size_t)(n > 0 ? n : 1) * rt_dtype_size(c) + 63) & ~(size_t)63);
  if (!v) return NULL;
  for (int64_t j = 0; j < n; j++) {
    if (c == NRT_FLOAT64)
      ((double *)v)[j] = fill;
    else
      ((float *)v)[j] = (float)fill;
  }
  return v;
}

/* The weight (or bias) vector of operand k, or `fill` everywhere if absent. */
static nrt_status param_vector(const nrt_op *op, int k, nrt_dtype c, int64_t n, double fill, void **out) {
  nrt_status s = nn_load_vector(op, k, c, n, out);
  if (s || *out) return s;
  *out = filled_vector(c, n, fill);
  return *out ? NRT_SUCCESS : rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(op->code));
}

static nrt_status check_rows_view(const nrt_op *op, int k, int64_t rows, int64_t n) {
  const nrt_tensor_view *v = &op->operands[k];
  if (v->ndim != 2 || v->shape[0] != rows || v->shape[1] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a [%lld, %lld] view",
                   nrt_op_name(op->code), k, (long long)rows, (long long)n);
  return NRT_SUCCESS;
}

/* LAYER_NORM [out, mean, rstd, in, weight, bias]; RMS_NORM [out, rstd, in, weight]. */
static nrt_status row_norm_forward(const nrt_op *op, int rms) {
  const char *name = nrt_op_name(op->code);
  const int nops = rms ? 4 : 6, in_k = rms ? 2 : 3, rstd_k = rms ? 1 : 2;
  nrt_status s = nn_check_operands(op, nops, rms ? 2 : 3, (1u << nops) - 1);
  if (s) return s;
  if (op->num_scalars < 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [eps]", name);
  const nrt_tensor_view *x = &op->operands[in_k];
  if (x->ndim != 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input must be a 2-d view", name);
  row_job job = {.rows = x->shape[0], .n = x->shape[1], .rms = rms, .eps = op->scalars[0].f};
  if ((s = check_rows_view(op, 0, job.rows, job.n)) || (s = nn_check_vector(op, rstd_k, job.rows)) ||
      (!rms && (s = nn_check_vector(op, 1, job.rows))))
    return s;
  if (job.rows == 0) return NRT_SUCCESS;
  job.c = nn_compute(x->dtype);
  job.x = nn_operand_of(x);
  job.y = nn_operand_of(&op->operands[0]);
  const size_t cs = rt_dtype_size(job.c);
  job.mean = malloc((size_t)job.rows * cs);
  job.rstd = malloc((size_t)job.rows * cs);
  if (!job.mean || !job.rstd) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  if (!s) s = param_vector(op, in_k + 1, job.c, job.n, 1.0, &job.w);
  if (!s && rms && !(job.b = filled_vector(job.c, job.n, 0.0)))
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  if (!s && !rms) s = param_vector(op, 5, job.c, job.n, 0.0, &job.b);
  if (!s && job.n > 0) {
    rt_parallel_for(job.rows, nn_grain(2 * job.n), norm_range, &job);
    if (atomic_load(&job.out_of_memory)) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  } else if (!s) {
    /* no elements: the mean is NaN (0/0) and rstd 1/sqrt(eps) as in PyTorch */
    for (int64_t i = 0; i < job.rows; i++) {
      if (job.c == NRT_FLOAT64) {
        ((double *)job.mean)[i] = NAN;
        ((double *)job.rstd)[i] = 1.0 / sqrt(job.eps);
      } else {
        ((float *)job.mean)[i] = NAN;
        ((float *)job.rstd)[i] = (float)(1.0 / sqrt(job.eps));
      }
    }
  }
  if (!s) {
    if (!rms) nn_store_vector(op, 1, job.c, job.rows, job.mean);
    nn_store_vector(op, rstd_k, job.c, job.rows, job.rstd);
  }
  free(job.mean);
  free(job.rstd);
  free(job.w);
  free(job.b);
  return s;
}

nrt_status rt_kernel_layer_norm(const nrt_op *op) { return row_norm_forward(op, 0); }
nrt_status rt_kernel_rms_norm(const nrt_op *op) { return row_norm_forward(op, 1); }

/* LAYER_NORM_BACKWARD [grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight];
 * RMS_NORM_BACKWARD [grad_in, grad_weight, grad_out, in, rstd, weight]. */
static nrt_status row_norm_backward(const nrt_op *op, int rms) {
  const char *name = nrt_op_name(op->code);
  const int nops = rms ? 6 : 8, nout = rms ? 2 : 3;
  const int gy_k = nout, x_k = nout + 1, rstd_k = rms ? 4 : 6, w_k = nops - 1;
  nrt_status s = nn_check_operands(op, nops, nout, (1u << nops) - 1);
  if (s) return s;
  const nrt_tensor_view *x = &op->operands[x_k];
  if (x->ndim != 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input must be a 2-d view", name);
  row_job job = {.rows = x->shape[0], .n = x->shape[1], .rms = rms};
  const int want_gx = nn_present(&op->operands[0]), want_dw = nn_present(&op->operands[1]);
  const int want_db = !rms && nn_present(&op->operands[2]);
  if ((s = check_rows_view(op, gy_k, job.rows, job.n)) ||
      (want_gx && (s = check_rows_view(op, 0, job.rows, job.n))) ||
      (s = nn_check_vector(op, 1, job.n)) || (!rms && (s = nn_check_vector(op, 2, job.n))))
    return s;
  if (job.n == 0) return NRT_SUCCESS;
  job.c = nn_compute(x->dtype);
  const size_t cs = rt_dtype_size(job.c);
  job.x = nn_operand_of(x);
  job.gy = nn_operand_of(&op->operands[gy_k]);
  if (want_gx) job.y = nn_operand_of(&op->operands[0]);
  int64_t blocks = job.rows < NN_BLOCKS ? job.rows : NN_BLOCKS;
  if (blocks < 1) blocks = 1;
  job.block_rows = (job.rows + blocks - 1) / blocks;
  if (job.block_rows < 1) job.block_rows = 1;
  blocks = (job.rows + job.block_rows - 1) / job.block_rows;
  if (blocks < 1) blocks = 1;
  if ((s = param_vector(op, w_k, job.c, job.n, 1.0, &job.w)) ||
      (s = nn_load_vector(op, rstd_k, job.c, job.rows, &job.rstd)) ||
      (!rms && (s = nn_load_vector(op, 5, job.c, job.rows, &job.mean))))
    goto done;
  if (job.rows > 0 && (!job.rstd || (!rms && !job.mean))) {
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the saved statistics are missing", name);
    goto done;
  }
  if (want_dw) job.dw = calloc((size_t)(blocks * job.n), cs);
  if (want_db) job.db = calloc((size_t)(blocks * job.n), cs);
  if ((want_dw && !job.dw) || (want_db && !job.db)) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    goto done;
  }
  if (job.rows > 0 && (want_gx || want_dw || want_db)) {
    rt_parallel_for(blocks, nn_grain(job.block_rows * 3 * job.n), norm_backward_range, &job);
    if (atomic_load(&job.out_of_memory)) {
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      goto done;
    }
  }
  block_sum bs = {.part = {job.dw, job.db}, .c = job.c, .blocks = job.rows > 0 ? blocks : 0, .n = job.n};
  rt_parallel_for(job.n, nn_grain(blocks * 2), block_sum_range, &bs);
  if (want_dw) nn_store_vector(op, 1, job.c, job.n, job.dw);
  if (want_db) nn_store_vector(op, 2, job.c, job.n, job.db);
done:
  free(job.w);
  free(job.rstd);
  free(job.mean);
  free(job.dw);
  free(job.db);
  return s;
}

nrt_status rt_kernel_layer_norm_backward(const nrt_op *op) { return row_norm_backward(op, 0); }
nrt_status rt_kernel_rms_norm_backward(const nrt_op *op) { return row_norm_backward(op, 1); }
