/* Group norm, forward and backward (GROUP_NORM, GROUP_NORM_BACKWARD in
 * neuronrt/ops/nn.h).
 *
 * The input is [batch, channels, spatial]; one task per (batch, group)
 * walks the group's channels as runs of `spatial` elements. Statistics take
 * two passes (mean, then squared deviations); the output is x scale + shift
 * per channel. The backward keeps, per (batch, channel), the sums of
 * grad_out and grad_out (x - mean): they give grad_in of the group and,
 * summed over the batch in order afterwards, the weight and bias gradients.
 */
#include <stdatomic.h>
#include "ops/nn/nn_common.h"

#define DEFINE_GROUP_LOOPS(C, SUF)                                                                \
  RT_SIMD_RETURNS(double, sum_##SUF, (const C *restrict x, int64_t n), (x, n)) {                  \
    double s;                                                                                     \
    NN_SUM(C, n, s, x[j]);                                                                        \
    return s;                                                                                     \
  }                                                                                               \
  RT_SIMD_RETURNS(double, sq_dev_##SUF, (const C *restrict x, int64_t n, C mu), (x, n, mu)) {     \
    double s;                                                                                     \
    NN_SUM(C, n, s, (x[j] - mu) * (x[j] - mu));                                                   \
    return s;                                                                                     \
  }                                                                                               \
  RT_SIMD_VOID(affine_##SUF, (const C *restrict x, C *restrict y, int64_t n, C scale, C shift),   \
                             (x, y, n, scale, shift)) {                                           \
    for (int64_t j = 0; j < n; j++) y[j] = x[j] * scale + shift;                                  \
  }                                                                                               \
  RT_SIMD_VOID(grad_sums_##SUF, (const C *restrict gy, const C *restrict x, int64_t n, C mu,      \
                                 double *ds, double *db), (gy, x, n, mu, ds, db)) {               \
    NN_SUM(C, n, *ds, gy[j] * (x[j] - mu));                                                       \
    NN_SUM(C, n, *db, gy[j]);                                                                     \
  }                                                                                               \
  RT_SIMD_VOID(grad_in_##SUF, (const C *restrict gy, const C *restrict x, C *restrict gx,         \
                               int64_t n, C w_rs, C mu, C a, C q),                                \
                              (gy, x, gx, n, w_rs, mu, a, q)) {                                   \
    for (int64_t j = 0; j < n; j++) gx[j] = w_rs * gy[j] - a - (x[j] - mu) * q;                   \
  }

DEFINE_GROUP_LOOPS(float, f)
DEFINE_GROUP_LOOPS(double, d)

typedef struct group_job {
  nn_operand y, x, gy; /* [batch, channels, spatial]; y is grad_in in the backward */
  nrt_dtype c;
  int64_t batch, channels, spatial, groups, per_group;
  double eps;
  double *w, *b;       /* [channels] */
  double *mean, *rstd; /* [batch * groups] */
  double *ds, *db;     /* backward: [batch * channels] */
  atomic_int out_of_memory;
} group_job;

/* The run of channel ch of batch element n of operand o, in c. */
static const void *load_run(const nn_operand *o, int64_t n, int64_t ch, nrt_dtype c, int64_t len,
                            void *buf) {
  return nn_load(o->base + n * o->stride[0] + ch * o->stride[1], o->stride[2], o->dtype, c, len, buf);
}

static void group_forward_range(int64_t begin, int64_t end, void *ctx) {
  group_job *job = ctx;
  const nrt_dtype c = job->c;
  const int64_t S = job->spatial, D = job->per_group, cs = (int64_t)nrt_dtype_size(c);
  char *scratch = malloc((size_t)(2 * S * cs));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  const int dbl = c == NRT_FLOAT64;
  for (int64_t item = begin; item < end; item++) {
    int64_t n = item / job->groups, ch0 = (item % job->groups) * D;
    double s = 0, s2 = 0;
    for (int64_t ch = ch0; ch < ch0 + D; ch++) {
      const void *x = load_run(&job->x, n, ch, c, S, scratch);
      s += dbl ? sum_d(x, S) : sum_f(x, S);
    }
    double mu = D * S > 0 ? s / (double)(D * S) : 0; /* rstd is then NaN, as in PyTorch */
    if (!dbl) mu = (float)mu;
    for (int64_t ch = ch0; ch < ch0 + D; ch++) {
      const void *x = load_run(&job->x, n, ch, c, S, scratch);
      s2 += dbl ? sq_dev_d(x, S, mu) : sq_dev_f(x, S, (float)mu);
    }
    double rs = 1.0 / sqrt(s2 / (double)(D * S) + job->eps);
    if (!dbl) rs = (float)rs;
    for (int64_t ch = ch0; ch < ch0 + D; ch++) {
      const void *x = load_run(&job->x, n, ch, c, S, scratch + S * cs);
      char *py = job->y.base + n * job->y.stride[0] + ch * job->y.stride[1];
      void *y = nn_target(py, job->y.stride[2], job->y.dtype, c, S, scratch);
      double scale = rs * job->w[ch], shift = job->b[ch] - mu * scale;
      if (dbl)
        affine_d(x, y, S, scale, shift);
      else
        affine_f(x, y, S, (float)scale, (float)shift);
      nn_store(py, job->y.stride[2], job->y.dtype, c, S, y);
    }
    job->mean[item] = mu;
    job->rstd[item] = rs;
  }
  free(scratch);
}

static void group_backward_range(int64_t begin, int64_t end, void *ctx) {
  group_job *job = ctx;
  const nrt_dtype c = job->c;
  const int64_t S = job->spatial, D = job->per_group, cs = (int64_t)nrt_dtype_size(c);
  char *scratch = malloc((size_t)(3 * S * cs));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  const int dbl = c == NRT_FLOAT64;
  for (int64_t item = begin; item < end; item++) {
    int64_t n = item / job->groups, ch0 = (item % job->groups) * D;
    double mu = job->mean[item], rs = job->rstd[item], sum_wdb = 0, sum_wds = 0;
    for (int64_t ch = ch0; ch < ch0 + D; ch++) {
      const void *x = load_run(&job->x, n, ch, c, S, scratch + S * cs);
      const void *gy = load_run(&job->gy, n, ch, c, S, scratch + 2 * S * cs);
      double ds, db;
      if (dbl)
        grad_sums_d(gy, x, S, mu, &ds, &db);
      else
        grad_sums_f(gy, x, S, (float)mu, &ds, &db);
      job->ds[n * job->channels + ch] = ds;
      job->db[n * job->channels + ch] = db;
      sum_wdb += job->w[ch] * db;
      sum_wds += job->w[ch] * ds;
    }
    if (!job->y.base) continue;
    double count = (double)(D * S), a = sum_wdb * rs / count, q = sum_wds * rs * rs * rs / count;
    for (int64_t ch = ch0; ch < ch0 + D; ch++) {
      const void *x = load_run(&job->x, n, ch, c, S, scratch + S * cs);
      const void *gy = load_run(&job->gy, n, ch, c, S, scratch + 2 * S * cs);
      char *pgx = job->y.base + n * job->y.stride[0] + ch * job->y.stride[1];
      void *gx = nn_target(pgx, job->y.stride[2], job->y.dtype, c, S, scratch);
      double w_rs = job->w[ch] * rs;
      if (dbl)
        grad_in_d(gy, x, gx, S, w_rs, mu, a, q);
      else
        grad_in_f(gy, x, gx, S, (float)w_rs, (float)mu, (float)a, (float)q);
      nn_store(pgx, job->y.stride[2], job->y.dtype, c, S, gx);
    }
  }
  free(scratch);
}

static nrt_status check_bcs(const nrt_op *op, int k, const nrt_tensor_view *like) {
  const nrt_tensor_view *v = &op->operands[k];
  if (v->ndim != 3 || v->shape[0] != like->shape[0] || v->shape[1] != like->shape[1] ||
      v->shape[2] != like->shape[2])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a [batch, channels, spatial] view",
                   nrt_op_name(op->code), k);
  return NRT_SUCCESS;
}

/* Sets the geometry from the input view x and scalar groups. */
static nrt_status group_geometry(const nrt_op *op, const nrt_tensor_view *x, group_job *job) {
  const char *name = nrt_op_name(op->code);
  if (x->ndim != 3) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input must be a 3-d view", name);
  job->batch = x->shape[0];
  job->channels = x->shape[1];
  job->spatial = x->shape[2];
  job->groups = op->num_scalars > 0 ? op->scalars[0].i : 0;
  if (job->groups <= 0 || job->channels % job->groups)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %lld channels do not split into %lld groups", name,
                   (long long)job->channels, (long long)job->groups);
  job->per_group = job->channels / job->groups;
  job->c = nn_compute(x->dtype);
  job->x = nn_operand_of(x);
  return NRT_SUCCESS;
}

static nrt_status load_params(const nrt_op *op, int w_k, int b_k, group_job *job) {
  nrt_status s;
  void *w = NULL, *b = NULL;
  if ((s = nn_load_vector(op, w_k, NRT_FLOAT64, job->channels, &w))) return s;
  if (b_k >= 0 && (s = nn_load_vector(op, b_k, NRT_FLOAT64, job->channels, &b))) {
    free(w);
    return s;
  }
  job->w = w ? w : malloc((size_t)(job->channels + 1) * sizeof(double));
  job->b = b ? b : calloc((size_t)(job->channels + 1), sizeof(double));
  if (!job->w || !job->b)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(op->code));
  if (!w)
    for (int64_t ch = 0; ch < job->channels; ch++) job->w[ch] = 1.0;
  return NRT_SUCCESS;
}

/* GROUP_NORM [out, mean, rstd, in, weight, bias] scalars [groups, eps] */
nrt_status rt_kernel_group_norm(const nrt_op *op) {
  const char *name = "group_norm";
  group_job job = {0};
  nrt_status s = nn_check_operands(op, 6, 3, 0x3fu);
  if (s || (s = group_geometry(op, &op->operands[3], &job)) || (s = check_bcs(op, 0, &op->operands[3])))
    return s;
  if (op->num_scalars < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [groups, eps]", name);
  job.eps = op->scalars[1].f;
  int64_t items = job.batch * job.groups;
  if ((s = nn_check_vector(op, 1, items)) || (s = nn_check_vector(op, 2, items))) return s;
  if (items == 0) return NRT_SUCCESS;
  job.y = nn_operand_of(&op->operands[0]);
  job.mean = malloc((size_t)items * sizeof(double));
  job.rstd = malloc((size_t)items * sizeof(double));
  if (!job.mean || !job.rstd) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  if (!s) s = load_params(op, 4, 5, &job);
  if (!s) {
    rt_parallel_for(items, nn_grain(3 * job.per_group * job.spatial), group_forward_range, &job);
    if (atomic_load(&job.out_of_memory)) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  }
  if (!s) {
    nn_store_vector(op, 1, NRT_FLOAT64, items, job.mean);
    nn_store_vector(op, 2, NRT_FLOAT64, items, job.rstd);
  }
  free(job.mean);
  free(job.rstd);
  free(job.w);
  free(job.b);
  return s;
}

/* GROUP_NORM_BACKWARD [grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight]
 * scalars [groups] */
nrt_status rt_kernel_group_norm_backward(const nrt_op *op) {
  const char *name = "group_norm_backward";
  group_job job = {0};
  nrt_status s = nn_check_operands(op, 8, 3, 0xffu);
  if (s || (s = group_geometry(op, &op->operands[4], &job)) || (s = check_bcs(op, 3, &op->operands[4])))
    return s;
  const int want_gx = nn_present(&op->operands[0]);
  if ((want_gx && (s = check_bcs(op, 0, &op->operands[4]))) || (s = nn_check_vector(op, 1, job.channels)) ||
      (s = nn_check_vector(op, 2, job.channels)))
    return s;
  int64_t items = job.batch * job.groups;
  if (want_gx) job.y = nn_operand_of(&op->operands[0]);
  job.gy = nn_operand_of(&op->operands[3]);
  void *mean = NULL, *rstd = NULL;
  if ((s = load_params(op, 7, -1, &job)) || (s = nn_load_vector(op, 5, NRT_FLOAT64, items, &mean)) ||
      (s = nn_load_vector(op, 6, NRT_FLOAT64, items, &rstd)))
    goto done;
  job.mean = mean;
  job.rstd = rstd;
  /* row 0 receives the results, so there is one even for an empty batch */
  size_t sums = (size_t)((job.batch > 0 ? job.batch : 1) * job.channels + 1);
  job.ds = calloc(sums, sizeof(double));
  job.db = calloc(sums, sizeof(double));
  if (!job.ds || !job.db) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    goto done;
  }
  if (items > 0 && job.spatial > 0) {
    if (!job.mean || !job.rstd) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the saved statistics are missing", name);
      goto done;
    }
    rt_parallel_for(items, nn_grain(4 * job.per_group * job.spatial), group_backward_range, &job);
    if (atomic_load(&job.out_of_memory)) {
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      goto done;
    }
  }
  /* Per channel: sum over the batch, in order. */
  for (int64_t ch = 0; ch < job.channels; ch++) {
    double dw = 0, db = 0;
    for (int64_t n = 0; n < job.batch && job.spatial > 0; n++) {
      dw += job.ds[n * job.channels + ch] * job.rstd[n * job.groups + ch / job.per_group];
      db += job.db[n * job.channels + ch];
    }
    job.ds[ch] = dw; /* row 0 is no longer needed: reuse it for the results */
    job.db[ch] = db;
  }
  nn_store_vector(op, 1, NRT_FLOAT64, job.channels, job.ds);
  nn_store_vector(op, 2, NRT_FLOAT64, job.channels, job.db);
done:
  free(job.w);
  free(job.b);
  free(mean);
  free(rstd);
  free(job.ds);
  free(job.db);
  return s;
}
