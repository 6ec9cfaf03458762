/* Batch norm, forward (training and evaluation) and backward (BATCH_NORM,
 * BATCH_NORM_BACKWARD in neuronrt/ops/nn.h).
 *
 * The input is [batch, channels, spatial]. Work is cut into items (batch
 * element n, block of channels): one channel when the spatial dimension is
 * the inner one (NCHW), NN_COLS neighbouring channels when the channels are
 * (channels-last), so every run read is contiguous and the loops vectorise.
 * A statistic is a sum per (n, channel), kept apart and then added over n
 * in order: fixed blocking, so results do not depend on the thread count.
 * Statistics take two passes (mean, then squared deviations from it).
 *
 * Training: mean, var (biased), invstd = 1 / sqrt(var + eps); y = x alpha
 * + beta with alpha = invstd w, beta = b - mean alpha (as PyTorch's CPU
 * kernel evaluates it). Gradient: with dy = sum grad_out and dot = sum
 * grad_out (x - mean) over the channel's count elements,
 *   grad_in = w invstd (grad_out - dy / count - (x - mean) invstd^2 dot / count),
 *   grad_weight = dot invstd, grad_bias = dy.
 * Evaluation uses the running statistics and grad_in = grad_out w invstd.
 */
#include <stdatomic.h>
#include "ops/nn/nn_common.h"

#define NN_COLS 64

enum bn_pass { PASS_SUM, PASS_DEV, PASS_APPLY, PASS_GRAD_SUMS, PASS_GRAD_APPLY };

typedef struct bn_job {
  nn_operand y, x, gy; /* [batch, channels, spatial]; y is grad_in in the backward */
  nrt_dtype c;
  int64_t batch, channels, spatial, width, blocks;
  int channels_inner; /* channels are the contiguous dimension */
  enum bn_pass pass;
  double *mean;       /* [channels] */
  double *k0, *k1, *k2; /* per-channel coefficients of the apply passes */
  double *part0, *part1; /* [batch * channels] partial sums */
  atomic_int out_of_memory;
} bn_job;

/* The per-run loops. Spatial runs: one channel, coefficients scalars.
 * Channel runs: w channels, coefficient arrays. */
#define DEFINE_BN_LOOPS(C, SUF)                                                                   \
  RT_SIMD_VOID(run_sums_##SUF, (const C *restrict x, const C *restrict gy, int64_t n,             \
                                enum bn_pass pass, C mu, double *s0, double *s1),                 \
                               (x, gy, n, pass, mu, s0, s1)) {                                    \
    if (pass == PASS_SUM) {                                                                       \
      NN_SUM(C, n, *s0, x[j]);                                                                    \
    } else if (pass == PASS_DEV) {                                                                \
      NN_SUM(C, n, *s0, (x[j] - mu) * (x[j] - mu));                                               \
    } else {                                                                                      \
      NN_SUM(C, n, *s0, gy[j]);                                                                   \
      NN_SUM(C, n, *s1, gy[j] * (x[j] - mu));                                                     \
    }                                                                                             \
  }                                                                                               \
  RT_SIMD_VOID(run_apply_##SUF, (const C *restrict x, const C *restrict gy, C *restrict y,        \
                                 int64_t n, enum bn_pass pass, C mu, C k0, C k1, C k2),           \
                                (x, gy, y, n, pass, mu, k0, k1, k2)) {                            \
    if (pass == PASS_APPLY)                                                                       \
      for (int64_t j = 0; j < n; j++) y[j] = x[j] * k0 + k1;                                      \
    else                                                                                          \
      for (int64_t j = 0; j < n; j++) y[j] = gy[j] * k0 + (x[j] - mu) * k1 + k2;                  \
  }                                                                                               \
  RT_SIMD_VOID(cols_sums_##SUF, (const C *restrict x, const C *restrict gy, int64_t w,            \
                                 enum bn_pass pass, const C *restrict mu, C *restrict a0,         \
                                 C *restrict a1), (x, gy, w, pass, mu, a0, a1)) {                 \
    if (pass == PASS_SUM)                                                                         \
      for (int64_t j = 0; j < w; j++) a0[j] += x[j];                                              \
    else if (pass == PASS_DEV)                                                                    \
      for (int64_t j = 0; j < w; j++) a0[j] += (x[j] - mu[j]) * (x[j] - mu[j]);                   \
    else                                                                                          \
      for (int64_t j = 0; j < w; j++) {                                                           \
        a0[j] += gy[j];                                                                           \
        a1[j] += gy[j] * (x[j] - mu[j]);                                                          \
      }                                                                                           \
  }                                                                                               \
  RT_SIMD_VOID(cols_apply_##SUF, (const C *restrict x, const C *restrict gy, C *restrict y,       \
                                  int64_t w, enum bn_pass pass, const C *restrict mu,             \
                                  const C *restrict k0, const C *restrict k1,                     \
                                  const C *restrict k2), (x, gy, y, w, pass, mu, k0, k1, k2)) {   \
    if (pass == PASS_APPLY)                                                                       \
      for (int64_t j = 0; j < w; j++) y[j] = x[j] * k0[j] + k1[j];                                \
    else                                                                                          \
      for (int64_t j = 0; j < w; j++) y[j] = gy[j] * k0[j] + (x[j] - mu[j]) * k1[j] + k2[j];      \
  }                                                                                               \
  /* One item in channel-inner layout: channels [c0, c0 + w) of batch element n. */               \
  static void cols_item_##SUF(bn_job *job, int64_t n, int64_t c0, int64_t w, char *scratch) {     \
    C mu[NN_COLS], k0[NN_COLS], k1[NN_COLS], k2[NN_COLS], a0[NN_COLS], a1[NN_COLS];               \
    double s0[NN_COLS], s1[NN_COLS];                                                              \
    C *bx = (C *)(void *)scratch, *bg = bx + NN_COLS, *by = bg + NN_COLS;                         \
    const enum bn_pass pass = job->pass;                                                          \
    const int apply = pass == PASS_APPLY || pass == PASS_GRAD_APPLY;                              \
    const int grad = pass == PASS_GRAD_SUMS || pass == PASS_GRAD_APPLY;                           \
    for (int64_t j = 0; j < w; j++) {                                                             \
      mu[j] = job->mean ? (C)job->mean[c0 + j] : 0;                                               \
      k0[j] = apply ? (C)job->k0[c0 + j] : 0;                                                     \
      k1[j] = apply ? (C)job->k1[c0 + j] : 0;                                                     \
      k2[j] = apply && job->k2 ? (C)job->k2[c0 + j] : 0;                                          \
      a0[j] = a1[j] = 0;                                                                          \
      s0[j] = s1[j] = 0;                                                                          \
    }                                                                                             \
    const C *gy = NULL;                                                                           \
    for (int64_t s = 0; s < job->spatial; s++) {                                                  \
      const C *x = nn_load(job->x.base + n * job->x.stride[0] + c0 * job->x.stride[1] +           \
                               s * job->x.stride[2],                                              \
                           job->x.stride[1], job->x.dtype, job->c, w, bx);                        \
      if (grad)                                                                                   \
        gy = nn_load(job->gy.base + n * job->gy.stride[0] + c0 * job->gy.stride[1] +              \
                         s * job->gy.stride[2],                                                   \
                     job->gy.stride[1], job->gy.dtype, job->c, w, bg);                            \
      if (!apply) {                                                                               \
        cols_sums_##SUF(x, gy, w, pass, mu, a0, a1);                                              \
        if ((s + 1) % (NN_FLUSH / RT_LANES) == 0 || s + 1 == job->spatial)                        \
          for (int64_t j = 0; j < w; j++) {                                                       \
            s0[j] += a0[j];                                                                       \
            s1[j] += a1[j];                                                                       \
            a0[j] = a1[j] = 0;                                                                    \
          }                                                                                       \
        continue;                                                                                 \
      }                                                                                           \
      char *py = job->y.base + n * job->y.stride[0] + c0 * job->y.stride[1] + s * job->y.stride[2]; \
      C *y = nn_target(py, job->y.stride[1], job->y.dtype, job->c, w, by);                        \
      cols_apply_##SUF(x, gy, y, w, pass, mu, k0, k1, k2);                                        \
      nn_store(py, job->y.stride[1], job->y.dtype, job->c, w, y);                                 \
    }                                                                                             \
    if (!apply)                                                                                   \
      for (int64_t j = 0; j < w; j++) {                                                           \
        job->part0[n * job->channels + c0 + j] = s0[j];                                           \
        if (job->part1) job->part1[n * job->channels + c0 + j] = s1[j];                           \
      }                                                                                           \
  }                                                                                               \
  /* One item in spatial-inner layout: channel ch of batch element n. */                          \
  static void run_item_##SUF(bn_job *job, int64_t n, int64_t ch, char *scratch) {                 \
    const int64_t S = job->spatial, cs = (int64_t)sizeof(C);                                      \
    const enum bn_pass pass = job->pass;                                                          \
    const int apply = pass == PASS_APPLY || pass == PASS_GRAD_APPLY;                              \
    const int grad = pass == PASS_GRAD_SUMS || pass == PASS_GRAD_APPLY;                           \
    const C mu = job->mean ? (C)job->mean[ch] : 0;                                                \
    const C *x = nn_load(job->x.base + n * job->x.stride[0] + ch * job->x.stride[1],              \
                         job->x.stride[2], job->x.dtype, job->c, S, scratch);                     \
    const C *gy = grad ? nn_load(job->gy.base + n * job->gy.stride[0] + ch * job->gy.stride[1],   \
                                 job->gy.stride[2], job->gy.dtype, job->c, S, scratch + S * cs)   \
                       : NULL;                                                                    \
    if (!apply) {                                                                                 \
      double s0 = 0, s1 = 0;                                                                      \
      run_sums_##SUF(x, gy, S, pass, mu, &s0, &s1);                                               \
      job->part0[n * job->channels + ch] = s0;                                                    \
      if (job->part1) job->part1[n * job->channels + ch] = s1;                                    \
      return;                                                                                     \
    }                                                                                             \
    char *py = job->y.base + n * job->y.stride[0] + ch * job->y.stride[1];                        \
    C *y = nn_target(py, job->y.stride[2], job->y.dtype, job->c, S, scratch + 2 * S * cs);        \
    run_apply_##SUF(x, gy, y, S, pass, mu, (C)job->k0[ch], (C)job->k1[ch],                        \
                    job->k2 ? (C)job->k2[ch] : 0);                                                \
    nn_store(py, job->y.stride[2], job->y.dtype, job->c, S, y);                                   \
  }

DEFINE_BN_LOOPS(float, f)
DEFINE_BN_LOOPS(double, d)

static void bn_range(int64_t begin, int64_t end, void *ctx) {
  bn_job *job = ctx;
  const int64_t cs = (int64_t)nrt_dtype_size(job->c);
  const int64_t len = job->channels_inner ? NN_COLS : job->spatial;
  char *scratch = malloc((size_t)(3 * (len > 0 ? len : 1) * cs));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  for (int64_t item = begin; item < end; item++) {
    int64_t n = item / job->blocks, blk = item % job->blocks;
    if (job->channels_inner) {
      int64_t c0 = blk * NN_COLS, w = job->channels - c0 < NN_COLS ? job->channels - c0 : NN_COLS;
      if (job->c == NRT_FLOAT64)
        cols_item_d(job, n, c0, w, scratch);
      else
        cols_item_f(job, n, c0, w, scratch);
    } else if (job->c == NRT_FLOAT64) {
      run_item_d(job, n, blk, scratch);
    } else {
      run_item_f(job, n, blk, scratch);
    }
  }
  free(scratch);
}

/* Runs one pass over every item; sums passes leave per-channel totals
 * (added over the batch in order) in part0[0..channels), part1[...]. */
static nrt_status bn_pass_run(bn_job *job, enum bn_pass pass, const char *name) {
  job->pass = pass;
  int64_t per_item = job->spatial * (job->channels_inner ? NN_COLS : 1);
  rt_parallel_for(job->batch * job->blocks, nn_grain(per_item), bn_range, job);
  if (atomic_load(&job->out_of_memory)) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  if (pass == PASS_APPLY || pass == PASS_GRAD_APPLY) return NRT_SUCCESS;
  for (int64_t ch = 0; ch < job->channels; ch++) {
    double t0 = 0, t1 = 0;
    for (int64_t n = 0; n < job->batch; n++) {
      t0 += job->part0[n * job->channels + ch];
      if (job->part1) t1 += job->part1[n * job->channels + ch];
    }
    job->part0[ch] = t0; /* entry (0, ch) was read above and is not read again */
    if (job->part1) job->part1[ch] = t1;
  }
  return NRT_SUCCESS;
}

static nrt_status bn_setup(const nrt_op *op, int x_k, bn_job *job) {
  const nrt_tensor_view *x = &op->operands[x_k];
  if (x->ndim != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input must be a [batch, channels, spatial] view",
                   nrt_op_name(op->code));
  job->batch = x->shape[0];
  job->channels = x->shape[1];
  job->spatial = x->shape[2];
  job->c = nn_compute(x->dtype);
  job->x = nn_operand_of(x);
  job->channels_inner = job->channels > 1 && job->x.stride[1] == (int64_t)nrt_dtype_size(x->dtype) &&
                        (job->spatial == 1 || llabs(job->x.stride[2]) > job->x.stride[1]);
  job->blocks = job->channels_inner ? (job->channels + NN_COLS - 1) / NN_COLS : job->channels;
  return NRT_SUCCESS;
}

static nrt_status check_like_input(const nrt_op *op, int k, const nrt_tensor_view *x) {
  const nrt_tensor_view *v = &op->operands[k];
  for (int d = 0; d < 3; d++)
    if (v->ndim != 3 || v->shape[d] != x->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must have the input's shape",
                     nrt_op_name(op->code), k);
  return NRT_SUCCESS;
}

/* Allocates the per-channel arrays named by the mask (mean k0 k1 k2) and partials. */
static nrt_status bn_alloc(bn_job *job, int partials, const char *name) {
  size_t c = (size_t)job->channels + 1, p = (size_t)(job->batch * job->channels) + c;
  job->mean = calloc(c, sizeof(double));
  job->k0 = calloc(c, sizeof(double));
  job->k1 = calloc(c, sizeof(double));
  job->k2 = calloc(c, sizeof(double));
  job->part0 = calloc(p, sizeof(double));
  job->part1 = partials > 1 ? calloc(p, sizeof(double)) : NULL;
  if (!job->mean || !job->k0 || !job->k1 || !job->k2 || !job->part0 || (partials > 1 && !job->part1))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  return NRT_SUCCESS;
}

static void bn_free(bn_job *job) {
  free(job->mean);
  free(job->k0);
  free(job->k1);
  free(job->k2);
  free(job->part0);
  free(job->part1);
}

/* BATCH_NORM [out, save_mean, save_invstd, running_mean, running_var, in, weight, bias]
 * scalars [training, momentum, eps] */
nrt_status rt_kernel_batch_norm(const nrt_op *op) {
  const char *name = "batch_norm";
  bn_job job = {0};
  nrt_status s = nn_check_operands(op, 8, 5, 0xffu);
  if (s || (s = bn_setup(op, 5, &job)) || (s = check_like_input(op, 0, &op->operands[5]))) return s;
  if (op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [training, momentum, eps]", name);
  const int training = op->scalars[0].i != 0;
  const double momentum = op->scalars[1].f, eps = op->scalars[2].f;
  const int64_t C = job.channels, count = job.batch * job.spatial;
  for (int k = 1; k < 8; k++)
    if (k != 5 && (s = nn_check_vector(op, k, C))) return s;
  if (!training && (!nn_present(&op->operands[3]) || !nn_present(&op->operands[4])) && C > 0 && count > 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: evaluation needs the running statistics", name);
  void *w = NULL, *b = NULL, *rm = NULL, *rv = NULL;
  double *invstd = NULL, *var_unbiased = NULL;
  if ((s = bn_alloc(&job, 1, name)) || (s = nn_load_vector(op, 6, NRT_FLOAT64, C, &w)) ||
      (s = nn_load_vector(op, 7, NRT_FLOAT64, C, &b)) || (s = nn_load_vector(op, 3, NRT_FLOAT64, C, &rm)) ||
      (s = nn_load_vector(op, 4, NRT_FLOAT64, C, &rv)))
    goto done;
  invstd = calloc((size_t)C + 1, sizeof(double));
  var_unbiased = calloc((size_t)C + 1, sizeof(double));
  if (!invstd || !var_unbiased) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    goto done;
  }
  if (training) {
    if (count > 0 && (s = bn_pass_run(&job, PASS_SUM, name))) goto done;
    for (int64_t ch = 0; ch < C; ch++) {
      double mu = job.part0[ch] / (double)count;
      job.mean[ch] = job.c == NRT_FLOAT64 ? mu : (float)mu;
    }
    if (count > 0 && (s = bn_pass_run(&job, PASS_DEV, name))) goto done;
    for (int64_t ch = 0; ch < C; ch++) {
      double m2 = job.part0[ch];
      invstd[ch] = 1.0 / sqrt(m2 / (double)count + eps);
      var_unbiased[ch] = m2 / (double)(count - 1);
    }
  } else {
    for (int64_t ch = 0; ch < C; ch++) {
      job.mean[ch] = rm ? ((double *)rm)[ch] : 0;
      invstd[ch] = 1.0 / sqrt((rv ? ((double *)rv)[ch] : 1.0) + eps);
    }
  }
  /* y = x alpha + beta, the form PyTorch's CPU kernel evaluates */
  for (int64_t ch = 0; ch < C; ch++) {
    job.k0[ch] = invstd[ch] * (w ? ((double *)w)[ch] : 1.0);
    job.k1[ch] = (b ? ((double *)b)[ch] : 0.0) - job.mean[ch] * job.k0[ch];
  }
  job.y = nn_operand_of(&op->operands[0]);
  if (count > 0 && C > 0 && (s = bn_pass_run(&job, PASS_APPLY, name))) goto done;
  if (training) {
    nn_store_vector(op, 1, NRT_FLOAT64, C, job.mean);
    nn_store_vector(op, 2, NRT_FLOAT64, C, invstd);
    if (rm) {
      for (int64_t ch = 0; ch < C; ch++)
        ((double *)rm)[ch] = (1 - momentum) * ((double *)rm)[ch] + momentum * job.mean[ch];
      nn_store_vector(op, 3, NRT_FLOAT64, C, rm);
    }
    if (rv) {
      for (int64_t ch = 0; ch < C; ch++)
        ((double *)rv)[ch] = (1 - momentum) * ((double *)rv)[ch] + momentum * var_unbiased[ch];
      nn_store_vector(op, 4, NRT_FLOAT64, C, rv);
    }
  }
done:
  free(w);
  free(b);
  free(rm);
  free(rv);
  free(invstd);
  free(var_unbiased);
  bn_free(&job);
  return s;
}

/* BATCH_NORM_BACKWARD [grad_in, grad_weight, grad_bias, grad_out, in, weight, mean,
 * invstd_or_var] scalars [training, eps] */
nrt_status rt_kernel_batch_norm_backward(const nrt_op *op) {
  const char *name = "batch_norm_backward";
  bn_job job = {0};
  nrt_status s = nn_check_operands(op, 8, 3, 0xffu);
  if (s || (s = bn_setup(op, 4, &job)) || (s = check_like_input(op, 3, &op->operands[4]))) return s;
  if (op->num_scalars < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [training, eps]", name);
  const int training = op->scalars[0].i != 0, want_gx = nn_present(&op->operands[0]);
  const double eps = op->scalars[1].f;
  const int64_t C = job.channels, count = job.batch * job.spatial;
  if (want_gx && (s = check_like_input(op, 0, &op->operands[4]))) return s;
  for (int k = 1; k < 8; k++)
    if (k != 3 && k != 4 && (s = nn_check_vector(op, k, C))) return s;
  void *w = NULL, *mean = NULL, *stat = NULL;
  if ((s = bn_alloc(&job, 2, name)) || (s = nn_load_vector(op, 5, NRT_FLOAT64, C, &w)) ||
      (s = nn_load_vector(op, 6, NRT_FLOAT64, C, &mean)) || (s = nn_load_vector(op, 7, NRT_FLOAT64, C, &stat)))
    goto done;
  if (C > 0 && (!mean || !stat)) {
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the mean and invstd (or running var) are required", name);
    goto done;
  }
  double *invstd = job.k2; /* reuse: filled before k2's own use */
  for (int64_t ch = 0; ch < C; ch++) {
    job.mean[ch] = ((double *)mean)[ch];
    invstd[ch] = training ? ((double *)stat)[ch] : 1.0 / sqrt(((double *)stat)[ch] + eps);
  }
  job.gy = nn_operand_of(&op->operands[3]);
  if (count > 0 && C > 0 && (s = bn_pass_run(&job, PASS_GRAD_SUMS, name))) goto done;
  /* part0: sum grad_out, part1: sum grad_out (x - mean) */
  for (int64_t ch = 0; ch < C; ch++) {
    double r = invstd[ch], wr = (w ? ((double *)w)[ch] : 1.0) * r;
    double dy = count > 0 ? job.part0[ch] : 0, dot = count > 0 ? job.part1[ch] : 0;
    job.k0[ch] = wr;
    job.k1[ch] = training ? -wr * r * r * dot / (double)count : 0;
    job.part1[ch] = dot * r; /* grad_weight */
    job.part0[ch] = dy;      /* grad_bias */
    invstd[ch] = training ? -wr * dy / (double)count : 0; /* now k2 */
  }
  if (want_gx && count > 0 && C > 0) {
    job.y = nn_operand_of(&op->operands[0]);
    if ((s = bn_pass_run(&job, PASS_GRAD_APPLY, name))) goto done;
  }
  nn_store_vector(op, 1, NRT_FLOAT64, C, job.part1);
  nn_store_vector(op, 2, NRT_FLOAT64, C, job.part0);
done:
  free(w);
  free(mean);
  free(stat);
  bn_free(&job);
  return s;
}
