/* CDIST and CDIST_BACKWARD (neuronrt/ops/distance.h).
 *
 * One task per row (b, i) of x1: its distances to every row of x2, summed
 * in float64 whatever the dtype, so a result does not depend on the number
 * of threads. The norms are spelt out for p = 0, 1, 2 and infinity (as the
 * CPU's kernels special-case them); any other p takes pow. Rows whose
 * coordinates are contiguous take typed loops the compiler vectorises; the
 * gradient for p = 2 is factored as
 *   grad_x1[i] = x1[i] sum_j w_ij - sum_j w_ij x2[j],  w_ij = grad_ij / dist_ij,
 * which costs one multiply-add per coordinate instead of a division. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"

typedef struct cdist_job {
  const nrt_op *op;
  double p;
  int64_t rows, cols, dims; /* P, R, M */
} cdist_job;

/* One row of a 3-d view as float64: copied (converted) into buf. */
static const double *row_f64(const nrt_tensor_view *v, int64_t b, int64_t i, int64_t m, double *buf) {
  const int64_t base = b * v->strides[0] + i * v->strides[1], s = v->strides[2];
  if (v->dtype == NRT_FLOAT64 && s == 1) return (const double *)v->data + base;
  if (v->dtype == NRT_FLOAT64) {
    const double *d = (const double *)v->data + base;
    for (int64_t k = 0; k < m; k++) buf[k] = d[k * s];
  } else {
    const float *f = (const float *)v->data + base;
    for (int64_t k = 0; k < m; k++) buf[k] = (double)f[k * s];
  }
  return buf;
}

static double at(const nrt_tensor_view *v, int64_t b, int64_t i, int64_t j) {
  const int64_t offset = b * v->strides[0] + i * v->strides[1] + j * v->strides[2];
  return v->dtype == NRT_FLOAT32 ? (double)((const float *)v->data)[offset] : ((const double *)v->data)[offset];
}

static void put(const nrt_tensor_view *v, int64_t b, int64_t i, int64_t j, double value) {
  const int64_t offset = b * v->strides[0] + i * v->strides[1] + j * v->strides[2];
  if (v->dtype == NRT_FLOAT32)
    ((float *)v->data)[offset] = (float)value;
  else
    ((double *)v->data)[offset] = value;
}

static double norm_of(const double *a, const double *c, int64_t m, double p) {
  double acc = 0.0;
  if (p == 2) {
    for (int64_t k = 0; k < m; k++) acc += (a[k] - c[k]) * (a[k] - c[k]);
    return sqrt(acc);
  }
  if (p == 1) {
    for (int64_t k = 0; k < m; k++) acc += fabs(a[k] - c[k]);
    return acc;
  }
  if (p == 0) {
    for (int64_t k = 0; k < m; k++) acc += a[k] != c[k];
    return acc;
  }
  if (isinf(p)) {
    for (int64_t k = 0; k < m; k++) {
      const double d = fabs(a[k] - c[k]);
      acc = d > acc || d != d ? d : acc;
    }
    return acc;
  }
  for (int64_t k = 0; k < m; k++) acc += pow(fabs(a[k] - c[k]), p);
  return pow(acc, 1.0 / p);
}

/* Per-task scratch: three rows of M doubles. */
static double *scratch(int64_t m) { return malloc(sizeof(double) * (size_t)(3 * m + 1)); }

static void cdist_range(int64_t begin, int64_t end, void *arg) {
  const cdist_job *job = arg;
  const nrt_tensor_view *out = &job->op->operands[0], *x1 = &job->op->operands[1], *x2 = &job->op->operands[2];
  const int64_t m = job->dims;
  double *buf = scratch(m);
  if (!buf) return; /* reported by the caller's preflight allocation */
  for (int64_t row = begin; row < end; row++) {
    const int64_t b = row / job->rows, i = row % job->rows;
    const double *a = row_f64(x1, b, i, m, buf);
    for (int64_t j = 0; j < job->cols; j++) put(out, b, i, j, norm_of(a, row_f64(x2, b, j, m, buf + m), m, job->p));
  }
  free(buf);
}

/* d dist / d x1[k] for one coordinate difference and the pair's distance
 * (stored in dtype t: for p = inf the coordinate that attains the maximum
 * is found by comparing in that dtype, as the distance was rounded to it) */
static double slope(double diff, double dist, double p, nrt_dtype t) {
  if (p == 0 || dist == 0) return 0.0;
  const double sign = (diff > 0) - (diff < 0);
  if (p == 1) return sign;
  if (p == 2) return diff / dist;
  if (isinf(p)) return (t == NRT_FLOAT32 ? (double)(float)fabs(diff) : fabs(diff)) == dist ? sign : 0.0;
  if (p < 1 && diff == 0) return 0.0;
  return sign * pow(fabs(diff), p - 1) / pow(dist, p - 1);
}

static void cdist_backward_range(int64_t begin, int64_t end, void *arg) {
  const cdist_job *job = arg;
  const nrt_tensor_view *gx = &job->op->operands[0], *g = &job->op->operands[1], *x1 = &job->op->operands[2],
                        *x2 = &job->op->operands[3], *dist = &job->op->operands[4];
  const int64_t m = job->dims;
  double *buf = scratch(m);
  if (!buf) return;
  double *acc = buf + 2 * m;
  for (int64_t row = begin; row < end; row++) {
    const int64_t b = row / job->rows, i = row % job->rows;
    const double *a = row_f64(x1, b, i, m, buf);
    memset(acc, 0, sizeof(double) * (size_t)m);
    double weight_sum = 0.0;
    for (int64_t j = 0; j < job->cols; j++) {
      const double gij = at(g, b, i, j), dij = at(dist, b, i, j);
      if (gij == 0 || dij == 0 || job->p == 0) continue;
      const double *c = row_f64(x2, b, j, m, buf + m);
      if (job->p == 2) { /* the factored form */
        const double w = gij / dij;
        weight_sum += w;
        for (int64_t k = 0; k < m; k++) acc[k] -= w * c[k];
      } else {
        for (int64_t k = 0; k < m; k++) acc[k] += gij * slope(a[k] - c[k], dij, job->p, gx->dtype);
      }
    }
    for (int64_t k = 0; k < m; k++) put(gx, b, i, k, acc[k] + weight_sum * a[k]);
  }
  free(buf);
}

static int is_float(nrt_dtype d) { return d == NRT_FLOAT32 || d == NRT_FLOAT64; }

static nrt_status check(const nrt_op *op, const char *name, int operands) {
  if (op->num_operands != operands || op->num_outputs != 1 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands and scalars [p]", name, operands);
  for (int k = 0; k < operands; k++)
    if (op->operands[k].ndim != 3 || op->operands[k].dtype != op->operands[0].dtype || !is_float(op->operands[k].dtype))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be 3-d float32 or float64 views of one dtype",
                     name);
  if (!(op->scalars[0].f >= 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: p must be non-negative, got %g", name, op->scalars[0].f);
  return NRT_SUCCESS;
}

/* The tasks allocate their rows; one allocation of that size up front turns
 * an exhausted heap into an error instead of a silently skipped task. */
static nrt_status preflight(const char *name, int64_t m) {
  double *probe = scratch(m);
  if (!probe) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: cannot allocate row buffers of %lld values", name,
                             (long long)(3 * m));
  free(probe);
  return NRT_SUCCESS;
}

static int64_t grain(int64_t per_row) { return per_row >= 4096 ? 1 : 4096 / (per_row + 1) + 1; }

nrt_status rt_kernel_cdist(const nrt_op *op) {
  nrt_status s = check(op, "cdist", 3);
  if (s != NRT_SUCCESS) return s;
  const nrt_tensor_view *out = &op->operands[0], *x1 = &op->operands[1], *x2 = &op->operands[2];
  const int64_t B = out->shape[0], P = out->shape[1], R = out->shape[2], M = x1->shape[2];
  if (x1->shape[0] != B || x2->shape[0] != B || x1->shape[1] != P || x2->shape[1] != R || x2->shape[2] != M)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cdist: expects out [B, P, R], x1 [B, P, M] and x2 [B, R, M]");
  if (B * P * R == 0) return NRT_SUCCESS;
  if ((s = preflight("cdist", M)) != NRT_SUCCESS) return s;
  cdist_job job = {.op = op, .p = op->scalars[0].f, .rows = P, .cols = R, .dims = M};
  rt_parallel_for(B * P, grain(R * M), cdist_range, &job);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_cdist_backward(const nrt_op *op) {
  nrt_status s = check(op, "cdist_backward", 5);
  if (s != NRT_SUCCESS) return s;
  const nrt_tensor_view *gx = &op->operands[0], *g = &op->operands[1], *x2 = &op->operands[3];
  const int64_t B = gx->shape[0], P = gx->shape[1], M = gx->shape[2], R = g->shape[2];
  for (int k = 1; k < 5; k++)
    if (op->operands[k].shape[0] != B)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cdist_backward: operands disagree on the batch size");
  if (g->shape[1] != P || op->operands[2].shape[1] != P || op->operands[2].shape[2] != M || x2->shape[1] != R ||
      x2->shape[2] != M || op->operands[4].shape[1] != P || op->operands[4].shape[2] != R)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "cdist_backward: expects grad_x1 [B, P, M], grad [B, P, R], x1 [B, P, M], x2 [B, R, M], dist [B, P, R]");
  if (B * P * M == 0) return NRT_SUCCESS;
  if ((s = preflight("cdist_backward", M)) != NRT_SUCCESS) return s;
  cdist_job job = {.op = op, .p = op->scalars[0].f, .rows = P, .cols = R, .dims = M};
  rt_parallel_for(B * P, grain(R * M), cdist_backward_range, &job);
  return NRT_SUCCESS;
}
