/* LINALG_SVD (layout in neuronrt/ops/linalg.h): each matrix is read into
 * double scratch, decomposed by la_svd (svd_t.h: Householder QR, then
 * one-sided Jacobi on the columns of R, in double for both dtypes) and its
 * factors written back in the outputs' strides. Batches split across the
 * kernel threads; each matrix runs on one thread, so results do not depend
 * on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/svd_t.h"

typedef struct svd_job {
  const nrt_tensor_view *s, *u, *vh, *a;
  int64_t m, n;
  int full, want_uv;
  double tol;
  la_failure failure;
} svd_job;

static inline double load_at(const char *base, nrt_dtype d, int64_t off) {
  return d == NRT_FLOAT64 ? ((const double *)base)[off] : (double)((const float *)base)[off];
}

static inline void store_at(char *base, nrt_dtype d, int64_t off, double x) {
  if (d == NRT_FLOAT64)
    ((double *)base)[off] = x;
  else
    ((float *)base)[off] = (float)x;
}

/* rows x cols row-major doubles into the matrix at base (element strides). */
static void store_matrix(const double *src, int64_t rows, int64_t cols, char *base, nrt_dtype d, int64_t rs,
                         int64_t cs) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) store_at(base, d, i * rs + j * cs, src[i * cols + j]);
}

static int64_t svd_elems(int64_t m, int64_t n, int full, int want_uv) {
  const int64_t k = m < n ? m : n;
  return m * n + k + (want_uv ? m * (full ? m : k) + (full ? n : k) * n : 0) + la_svd_scratch(m, n, full, want_uv);
}

static void svd_one(const svd_job *job, int64_t bi, double *buf, int64_t *order) {
  const nrt_tensor_view *av = job->a;
  const nrt_dtype dt = av->dtype;
  const int64_t m = job->m, n = job->n, k = m < n ? m : n;
  const int full = job->full, want_uv = job->want_uv;
  const int64_t uc = full ? m : k, vr = full ? n : k;
  double *a = buf, *s = a + m * n, *u = s + k, *vt = u + (want_uv ? m * uc : 0);
  double *scratch = vt + (want_uv ? vr * n : 0);
  const char *ap = la_batch_at(av, 2, bi);
  const int64_t ars = av->strides[av->ndim - 2], acs = av->strides[av->ndim - 1];
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) a[i * n + j] = load_at(ap, dt, i * ars + j * acs);
  la_svd(a, n, 1, m, n, full, want_uv, job->tol, s, u, vt, scratch, order);
  const nrt_tensor_view *sv = job->s;
  store_matrix(s, 1, k, la_batch_at(sv, 1, bi), sv->dtype, 0, sv->strides[sv->ndim - 1]);
  if (!want_uv) return;
  const nrt_tensor_view *uv = job->u, *vhv = job->vh;
  store_matrix(u, m, uc, la_batch_at(uv, 2, bi), dt, uv->strides[uv->ndim - 2], uv->strides[uv->ndim - 1]);
  store_matrix(vt, vr, n, la_batch_at(vhv, 2, bi), dt, vhv->strides[vhv->ndim - 2], vhv->strides[vhv->ndim - 1]);
}

static void svd_range(int64_t begin, int64_t end, void *ctx) {
  svd_job *job = ctx;
  const int64_t N = job->m > job->n ? job->n : job->m;
  const int64_t elems = svd_elems(job->m, job->n, job->full, job->want_uv);
  double *buf = malloc((size_t)elems * sizeof(double) + 8);
  int64_t *order = malloc((size_t)N * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)elems * sizeof(double)));
    return;
  }
  for (int64_t b = begin; b < end; b++) svd_one(job, b, buf, order);
  free(buf), free(order);
}

nrt_status rt_kernel_linalg_svd(const nrt_op *op) {
  static const char *name = "linalg_svd";
  const int want_uv = op->num_outputs == 3;
  if (!((op->num_outputs == 1 && op->num_operands == 2) || (op->num_outputs == 3 && op->num_operands == 4)) ||
      op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected S, optionally U and Vh, then A, and full_matrices",
                   name);
  const nrt_tensor_view *s = &op->operands[0], *a = &op->operands[op->num_operands - 1];
  const nrt_tensor_view *u = want_uv ? &op->operands[1] : NULL, *vh = want_uv ? &op->operands[2] : NULL;
  if (a->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A must have 2 or more dims", name);
  nrt_status st;
  if ((st = la_check_dtype(name, "A", a, 1)) || (st = la_check_batch(name, "S", s, 1, a, 2))) return st;
  const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
  const int full = op->scalars[0].i != 0;
  if (s->dtype != a->dtype || s->shape[s->ndim - 1] != k)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: S must be %s with %lld values per matrix", name,
                   nrt_dtype_name(a->dtype), (long long)k);
  if (want_uv) {
    if ((st = la_check_batch(name, "U", u, 2, a, 2)) || (st = la_check_batch(name, "Vh", vh, 2, a, 2))) return st;
    const int64_t uc = full ? m : k, vr = full ? n : k;
    if (u->dtype != a->dtype || vh->dtype != a->dtype || u->shape[u->ndim - 2] != m ||
        u->shape[u->ndim - 1] != uc || vh->shape[vh->ndim - 2] != vr || vh->shape[vh->ndim - 1] != n)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: U must be %s (%lld x %lld) and Vh (%lld x %lld)", name,
                     nrt_dtype_name(a->dtype), (long long)m, (long long)uc, (long long)vr, (long long)n);
  }
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0 || k == 0) return NRT_SUCCESS; /* the shim fills the identity of an empty full SVD */
  const double eps = a->dtype == NRT_FLOAT64 ? 1.1102230246251565e-16 : 5.960464477539063e-08;
  svd_job job = {s, u, vh, a, m, n, full, want_uv, la_svd_tol(eps, k), {NRT_SUCCESS, 0, 0}};
  const double M = (double)(m > n ? m : n);
  rt_parallel_for(batch, la_grain(10.0 * M * (double)k * (double)k), svd_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
