/* RENORM (see ops/nn.h): every slice out[s] = x[s] * factor(s), where
 * factor = maxnorm / (norm + 1e-7) when the slice's p-norm exceeds maxnorm,
 * else 1. Norms are summed in double (more precise than, and within rounding
 * of, the CPU's float sums); the factor is rounded to the data's dtype
 * before the multiply, as PyTorch's factor tensor is (embedding_renorm_
 * rounds the norm to that dtype too, and computes the factor in double). Slices split across
 * threads, each walked serially, so nothing depends on the thread count.
 */
#include <math.h>
#include <string.h>
#include "ops/engine/iterate.h"
#include "ops/nn/nn_common.h"

typedef struct renorm_job {
  const nrt_op *op;
  double p, maxnorm;
  int embedding;
} renorm_job;

typedef struct renorm_walk {
  nrt_dtype dtype;
  double p, acc, factor;
} renorm_walk;

/* The float32 path of p = 2 over a contiguous run: squares summed in
 * double in 8 independent lanes (one chain of dependent adds took 4 cycles
 * an element, most of the op's time), folded in order, then the tail. The
 * squares of floats are exact in double, so a fused multiply-add rounds as
 * the multiply and add do; only the order of the sum differs from the
 * general loop (its reference), by double rounding. */
RT_SIMD_RETURNS(double, renorm_sum_squares_f32, (const float *x, int64_t n), (x, n)) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum = 0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) lane[k] += (double)x[j + k] * (double)x[j + k];
  for (int k = 0; k < 8; k++) sum += lane[k];
  for (; j < n; j++) sum += (double)x[j] * (double)x[j];
  return sum;
}

/* out = x * factor in float over contiguous runs, rounded once, as
 * scale_run's float32 branch computes it. */
RT_SIMD_VOID(renorm_scale_f32, (float *out, const float *x, float factor, int64_t n), (out, x, factor, n)) {
  for (int64_t j = 0; j < n; j++) out[j] = x[j] * factor;
}

static void norm_run(char **data, const int64_t *strides, int64_t n, void *ctx) {
  renorm_walk *w = ctx;
  if (w->dtype == NRT_FLOAT32 && w->p == 2 && strides[0] == (int64_t)sizeof(float)) {
    w->acc += renorm_sum_squares_f32((const float *)(const void *)data[0], n);
    return;
  }
  double buf[256];
  for (int64_t i = 0; i < n; i += 256) {
    int64_t m = n - i < 256 ? n - i : 256;
    nn_convert(buf, NRT_FLOAT64, 8, data[0] + i * strides[0], w->dtype, strides[0], m);
    if (isinf(w->p)) {
      for (int64_t j = 0; j < m; j++) {
        double a = fabs(buf[j]);
        if (a > w->acc || isnan(a)) w->acc = isnan(w->acc) ? w->acc : a;
      }
    } else if (w->p == 1) {
      for (int64_t j = 0; j < m; j++) w->acc += fabs(buf[j]);
    } else if (w->p == 2) {
      for (int64_t j = 0; j < m; j++) w->acc += buf[j] * buf[j];
    } else {
      for (int64_t j = 0; j < m; j++) w->acc += pow(fabs(buf[j]), w->p);
    }
  }
}

static void scale_run(char **data, const int64_t *strides, int64_t n, void *ctx) {
  renorm_walk *w = ctx;
  if (w->dtype == NRT_FLOAT32 && strides[0] == (int64_t)sizeof(float) && strides[1] == (int64_t)sizeof(float)) {
    renorm_scale_f32((float *)(void *)data[0], (const float *)(const void *)data[1], (float)w->factor, n);
    return;
  }
  double buf[256];
  for (int64_t i = 0; i < n; i += 256) {
    int64_t m = n - i < 256 ? n - i : 256;
    nn_convert(buf, NRT_FLOAT64, 8, data[1] + i * strides[1], w->dtype, strides[1], m);
    if (w->dtype != NRT_FLOAT64) /* float * float, rounded once, as the CPU's multiply */
      for (int64_t j = 0; j < m; j++) buf[j] = (double)((float)buf[j] * (float)w->factor);
    else
      for (int64_t j = 0; j < m; j++) buf[j] *= w->factor;
    nn_convert(data[0] + i * strides[0], w->dtype, strides[0], buf, NRT_FLOAT64, 8, m);
  }
}

/* x rounded to dtype t (a float dtype). */
static double round_to(nrt_dtype t, double x) {
  char stored[8];
  double back;
  nn_convert(stored, t, 8, &x, NRT_FLOAT64, 8, 1);
  nn_convert(&back, NRT_FLOAT64, 8, stored, t, 8, 1);
  return back;
}

/* A slice s of view v: its dims after the first, at element s of the first. */
static nrt_tensor_view renorm_slice(const nrt_tensor_view *v, int64_t s) {
  nrt_tensor_view r = *v;
  r.data = (char *)v->data + s * v->strides[0] * (int64_t)nrt_dtype_size(v->dtype);
  r.ndim = v->ndim - 1;
  memmove(r.shape, v->shape + 1, sizeof(int64_t) * (size_t)r.ndim);
  memmove(r.strides, v->strides + 1, sizeof(int64_t) * (size_t)r.ndim);
  return r;
}

static void renorm_range(int64_t s0, int64_t s1, void *arg) {
  renorm_job *job = arg;
  const nrt_tensor_view *out = &job->op->operands[0], *x = &job->op->operands[1];
  for (int64_t s = s0; s < s1; s++) {
    nrt_tensor_view views[2] = {renorm_slice(out, s), renorm_slice(x, s)};
    renorm_walk w = {.dtype = x->dtype, .p = job->p, .acc = 0};
    rt_iterate_serial(1, &views[1], norm_run, &w);
    double norm = isinf(w.p) ? w.acc : w.p == 1 ? w.acc : w.p == 2 ? sqrt(w.acc) : pow(w.acc, 1.0 / w.p);
    if (job->embedding) {
      /* embedding_renorm_: the norm is a tensor of the data's dtype, the
       * factor a double that the in-place multiply rounds to that dtype */
      norm = round_to(x->dtype, norm);
      w.factor = round_to(x->dtype, norm > job->maxnorm ? job->maxnorm / (norm + 1e-7) : 1.0);
    } else {
      /* renorm: norm and factor are float for float32/float16/bfloat16
       * data, and the factor is a tensor of the data's dtype */
      if (x->dtype != NRT_FLOAT64) norm = (float)norm;
      double factor = norm > job->maxnorm ? job->maxnorm / (norm + 1e-7) : 1.0;
      w.factor = round_to(x->dtype, x->dtype != NRT_FLOAT64 ? (float)factor : factor);
    }
    rt_iterate_serial(2, views, scale_run, &w);
  }
}

nrt_status rt_kernel_renorm(const nrt_op *op) {
  const char *name = "renorm";
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [out, x] and scalars [p, maxnorm]", name);
  const nrt_tensor_view *out = &op->operands[0], *x = &op->operands[1];
  if (out->ndim != x->ndim || out->ndim < 1 || out->dtype != x->dtype || !nn_is_float(x->dtype) ||
      memcmp(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects out and x of one floating dtype and shape, at least 1-d (the slices along dim 0)",
                   name);
  renorm_job job = {.op = op, .p = op->scalars[0].f, .maxnorm = op->scalars[1].f,
                    .embedding = op->num_scalars > 2 && op->scalars[2].i != 0};
  if (!(job.p > 0)) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: non-positive-norm not supported", name);
  if (!(job.maxnorm >= 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected maxnorm to be >= 0 but got %g", name, job.maxnorm);
  int64_t slices = x->shape[0], numel = nrt_view_numel(x);
  if (numel == 0) return NRT_SUCCESS;
  rt_parallel_for(slices, nn_grain(2 * numel / slices), renorm_range, &job);
  return NRT_SUCCESS;
}
