/* LINALG_SVD (layout in neuronrt/ops/linalg.h): each matrix is read into
 * double (complex128) scratch, decomposed by la_svd_f64 (la_svd_c128;
 * svd_t.h: Householder QR, then one-sided Jacobi on the columns of R) and its
 * factors written back in the outputs' strides. Batches split across the
 * kernel threads; each matrix runs on one thread, so results do not depend
 * on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/svd.h"

typedef struct svd_job {
  const nrt_tensor_view *s, *u, *vh, *a;
  int64_t m, n;
  int full, want_uv;
  double tol;
  la_failure failure;
} svd_job;

static int64_t svd_elems(int64_t m, int64_t n, int full, int want_uv, int cplx) {
  const int64_t k = m < n ? m : n;
  return m * n + k + (want_uv ? m * (full ? m : k) + (full ? n : k) * n : 0) +
         (cplx ? la_svd_scratch_c128(m, n, full, want_uv) : la_svd_scratch_f64(m, n, full, want_uv));
}

/* One batch element in scratch of type W (double or double _Complex; the
 * storage type is T), through la_svd_SFX. */
#define SVD_ONE(T, W, SFX)                                                                                    \
  static void svd_one_##SFX##_##T(const svd_job *job, int64_t bi, W *buf, int64_t *order) {               \
    const nrt_tensor_view *av = job->a, *sv = job->s;                                                      \
    const int64_t m = job->m, n = job->n, k = m < n ? m : n;                                               \
    const int full = job->full, want_uv = job->want_uv;                                                    \
    const int64_t uc = full ? m : k, vr = full ? n : k;                                                    \
    W *a = buf, *sw = a + m * n, *u = sw + k, *vt = u + (want_uv ? m * uc : 0);                            \
    W *scratch = vt + (want_uv ? vr * n : 0);                                                              \
    double *s = (double *)sw;                                                                              \
    const T *ap = (const T *)la_batch_at(av, 2, bi);                                                       \
    const int64_t ars = av->strides[av->ndim - 2], acs = av->strides[av->ndim - 1];                        \
    for (int64_t i = 0; i < m; i++)                                                                        \
      for (int64_t j = 0; j < n; j++) a[i * n + j] = (W)ap[i * ars + j * acs];                             \
    la_svd_##SFX(a, n, 1, m, n, full, want_uv, job->tol, s, u, vt, scratch, order);                        \
    /* S is the real type of T: float for float and complex64. */                                        \
    char *so = la_batch_at(sv, 1, bi);                                                                     \
    const int64_t ss = sv->strides[sv->ndim - 1];                                                          \
    for (int64_t i = 0; i < k; i++) {                                                                      \
      if (sv->dtype == NRT_FLOAT64)                                                                        \
        ((double *)so)[i * ss] = s[i];                                                                     \
      else                                                                                                 \
        ((float *)so)[i * ss] = (float)s[i];                                                               \
    }                                                                                                      \
    if (!want_uv) return;                                                                                  \
    const nrt_tensor_view *uv = job->u, *vhv = job->vh;                                                    \
    T *uo = (T *)la_batch_at(uv, 2, bi), *vo = (T *)la_batch_at(vhv, 2, bi);                               \
    const int64_t urs = uv->strides[uv->ndim - 2], ucs = uv->strides[uv->ndim - 1];                        \
    const int64_t vrs = vhv->strides[vhv->ndim - 2], vcs = vhv->strides[vhv->ndim - 1];                    \
    for (int64_t i = 0; i < m; i++)                                                                        \
      for (int64_t j = 0; j < uc; j++) uo[i * urs + j * ucs] = (T)u[i * uc + j];                          \
    for (int64_t i = 0; i < vr; i++)                                                                       \
      for (int64_t j = 0; j < n; j++) vo[i * vrs + j * vcs] = (T)vt[i * n + j];                           \
  }
typedef float _Complex c64_t;
typedef double _Complex c128_t;
SVD_ONE(float, double, f64)
SVD_ONE(double, double, f64)
SVD_ONE(c64_t, c128_t, c128)
SVD_ONE(c128_t, c128_t, c128)

static void svd_range(int64_t begin, int64_t end, void *ctx) {
  svd_job *job = ctx;
  const nrt_dtype dt = job->a->dtype;
  const int cplx = dt == NRT_COMPLEX64 || dt == NRT_COMPLEX128;
  const int64_t N = job->m > job->n ? job->n : job->m;
  const size_t bytes = (size_t)svd_elems(job->m, job->n, job->full, job->want_uv, cplx) *
                       (cplx ? sizeof(c128_t) : sizeof(double));
  void *buf = malloc(bytes + 16);
  int64_t *order = malloc((size_t)N * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)bytes);
    return;
  }
  for (int64_t b = begin; b < end; b++) switch (dt) {
      case NRT_FLOAT64: svd_one_f64_double(job, b, buf, order); break;
      case NRT_COMPLEX64: svd_one_c128_c64_t(job, b, buf, order); break;
      case NRT_COMPLEX128: svd_one_c128_c128_t(job, b, buf, order); break;
      default: svd_one_f64_float(job, b, buf, order); break;
    }
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
  if ((st = la_check_dtype(name, "A", a, LA_OR_COMPLEX)) || (st = la_check_batch(name, "S", s, 1, a, 2)))
    return st;
  const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
  const int full = op->scalars[0].i != 0;
  const nrt_dtype sdt = a->dtype == NRT_FLOAT64 || a->dtype == NRT_COMPLEX128 ? NRT_FLOAT64 : NRT_FLOAT32;
  if (s->dtype != sdt || s->shape[s->ndim - 1] != k)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: S must be %s with %lld values per matrix", name,
                   nrt_dtype_name(sdt), (long long)k);
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
  const double eps = sdt == NRT_FLOAT64 ? 1.1102230246251565e-16 : 5.960464477539063e-08;
  svd_job job = {s, u, vh, a, m, n, full, want_uv, la_svd_tol(eps, k), {NRT_SUCCESS, 0, 0}};
  const double M = (double)(m > n ? m : n);
  rt_parallel_for(batch, la_grain(10.0 * M * (double)k * (double)k), svd_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
