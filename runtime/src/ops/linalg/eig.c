/* LINALG_EIG (layout in neuronrt/ops/linalg.h): each matrix is copied into
 * double (or complex128) row-major scratch, decomposed by la_eig_real or
 * la_eig_complex (eig.h) and its eigenvalues, eigenvectors and info written
 * back in the outputs' own dtype and strides. Batches split across the
 * kernel threads. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/eig.h"

typedef struct eig_job {
  const nrt_tensor_view *w, *info, *v, *a;
  int64_t n;
  la_failure failure;
} eig_job;

static double _Complex read_entry(const char *p, nrt_dtype d) {
  switch (d) {
    case NRT_FLOAT32: return *(const float *)p;
    case NRT_FLOAT64: return *(const double *)p;
    case NRT_COMPLEX64: return *(const float _Complex *)p;
    default: return *(const double _Complex *)p;
  }
}

static void write_entry(char *p, nrt_dtype d, double _Complex x) {
  if (d == NRT_COMPLEX64)
    *(float _Complex *)p = (float _Complex)x;
  else
    *(double _Complex *)p = x;
}

static void eig_range(int64_t begin, int64_t end, void *ctx) {
  eig_job *job = ctx;
  const int64_t n = job->n;
  const nrt_tensor_view *a = job->a, *w = job->w, *v = job->v;
  const int cplx = a->dtype == NRT_COMPLEX64 || a->dtype == NRT_COMPLEX128;
  /* The matrix (n^2 doubles, twice that complex), eigenvalues, eigenvectors
   * and the decomposition's scratch. */
  const size_t doubles = (size_t)(2 * n * n + 2 * n + (v ? 2 * n * n : 0) + la_eig_work(n));
  double *buf = malloc(doubles * sizeof(double));
  if (!buf) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)(doubles * sizeof(double)));
    return;
  }
  double _Complex *vals = (double _Complex *)(buf + 2 * n * n), *vecs = v ? vals + n : NULL;
  double *work = (double *)(vecs ? vecs + n * n : vals + n);
  const int64_t ars = a->strides[a->ndim - 2], acs = a->strides[a->ndim - 1];
  const size_t asize = nrt_dtype_size(a->dtype), wsize = nrt_dtype_size(w->dtype);
  const int64_t ws = w->strides[w->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    const char *src = la_batch_at(a, 2, b);
    int info;
    if (cplx) {
      double _Complex *m = (double _Complex *)buf;
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) m[i * n + j] = read_entry(src + (i * ars + j * acs) * asize, a->dtype);
      info = la_eig_complex(m, n, vals, vecs, work);
    } else {
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) buf[i * n + j] = creal(read_entry(src + (i * ars + j * acs) * asize, a->dtype));
      info = la_eig_real(buf, n, vals, vecs, work);
    }
    *(int32_t *)la_batch_at(job->info, 0, b) = info;
    if (info != 0) /* not meaningful: NaN rather than a partial result */
      for (int64_t i = 0; i < n; i++) vals[i] = CMPLX(NAN, NAN);
    char *wout = la_batch_at(w, 1, b);
    for (int64_t i = 0; i < n; i++) write_entry(wout + i * ws * (int64_t)wsize, w->dtype, vals[i]);
    if (v) {
      char *vout = la_batch_at(v, 2, b);
      const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1];
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
          write_entry(vout + (i * rs + j * cs) * (int64_t)wsize, v->dtype, info ? CMPLX(NAN, NAN) : vecs[i * n + j]);
    }
  }
  free(buf);
}

nrt_status rt_kernel_linalg_eig(const nrt_op *op) {
  static const char *name = "linalg_eig";
  if (op->num_outputs < 2 || op->num_outputs > 3 || op->num_operands != op->num_outputs + 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected W, info, optionally V, and A", name);
  const nrt_tensor_view *w = &op->operands[0], *info = &op->operands[1];
  const nrt_tensor_view *v = op->num_outputs == 3 ? &op->operands[2] : NULL, *a = &op->operands[op->num_outputs];
  if (a->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "A", a, LA_OR_COMPLEX)) || (s = la_check_batch(name, "W", w, 1, a, 2)) ||
      (s = la_check_batch(name, "info", info, 0, a, 2)) || (s = la_check_dtype(name, "info", info, 0)) ||
      (v && (s = la_check_batch(name, "V", v, 2, a, 2))))
    return s;
  const int single = a->dtype == NRT_FLOAT32 || a->dtype == NRT_COMPLEX64;
  const nrt_dtype want = single ? NRT_COMPLEX64 : NRT_COMPLEX128;
  if (w->dtype != want || (v && v->dtype != want))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: W and V must be %s for %s A", name, nrt_dtype_name(want),
                   nrt_dtype_name(a->dtype));
  const int64_t n = a->shape[a->ndim - 1];
  if (a->shape[a->ndim - 2] != n || w->shape[w->ndim - 1] != n ||
      (v && (v->shape[v->ndim - 2] != n || v->shape[v->ndim - 1] != n)))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A must be square, W hold its %lld eigenvalues and V be %lld x %lld",
                   name, (long long)n, (long long)n, (long long)n);
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0) return NRT_SUCCESS;
  if (n == 0) {
    for (int64_t b = 0; b < batch; b++) *(int32_t *)la_batch_at(info, 0, b) = 0;
    return NRT_SUCCESS;
  }
  eig_job job = {w, info, v, a, n, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(25.0 * n * n * n), eig_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
