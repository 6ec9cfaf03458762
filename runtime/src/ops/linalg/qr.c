/* LINALG_GEQRF and LINALG_ORMQR (layouts in neuronrt/ops/linalg.h).
 *
 * Each matrix is packed into row-major scratch, worked on there (qr_t.h)
 * and written back, so any strides work. Batches split across the kernel
 * threads; a single large matrix puts its block updates on the runtime's
 * GEMM, which splits them instead. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"
#include "ops/linalg/qr.h"

static nrt_status report_oom(const char *op, const la_failure *f) {
  if (f->status == NRT_SUCCESS) return NRT_SUCCESS;
  return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", op,
                 (long long)f->value);
}

/* ---- geqrf ---------------------------------------------------------------- */

typedef struct geqrf_job {
  const nrt_tensor_view *a, *tau;
  int64_t m, n, k;
  la_failure failure;
} geqrf_job;

static void geqrf_range(int64_t begin, int64_t end, void *ctx) {
  geqrf_job *job = ctx;
  const nrt_tensor_view *av = job->a;
  const int64_t m = job->m, n = job->n, k = job->k, nb = LA_QR_BLOCK;
  const size_t esize = nrt_dtype_size(av->dtype);
  const int64_t elems = m * n + k + la_geqrf_scratch_f64(m, n, nb);
  char *buf = malloc((size_t)elems * esize + 8);
  if (!buf) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)elems * esize));
    return;
  }
  const int64_t rs = av->strides[av->ndim - 2], cs = av->strides[av->ndim - 1];
  const int64_t ts = job->tau->strides[job->tau->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *a = la_batch_at(av, 2, b);
    char *tau = la_batch_at(job->tau, 1, b);
#define GEQRF_ONE(sfx, T)                                               \
  do {                                                                  \
    T *s = (T *)buf, *t = s + m * n;                                    \
    la_pack_##sfx(a, m, n, rs, cs, s);                                  \
    la_geqrf_##sfx(s, m, n, t, nb, t + k);                              \
    la_unpack_##sfx(s, m, n, a, rs, cs);                                \
    for (int64_t i = 0; i < k; i++) ((T *)tau)[i * ts] = t[i];          \
  } while (0)
    switch (av->dtype) {
      case NRT_FLOAT64: GEQRF_ONE(f64, double); break;
      case NRT_COMPLEX64: GEQRF_ONE(c64, float _Complex); break;
      case NRT_COMPLEX128: GEQRF_ONE(c128, double _Complex); break;
      default: GEQRF_ONE(f32, float); break;
    }
#undef GEQRF_ONE
  }
  free(buf);
}

nrt_status rt_kernel_linalg_geqrf(const nrt_op *op) {
  static const char *name = "linalg_geqrf";
  if (op->num_operands != 2 || op->num_outputs != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 2 outputs (A, tau)", name);
  const nrt_tensor_view *a = &op->operands[0], *tau = &op->operands[1];
  if (a->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "A", a, LA_OR_COMPLEX)) || (s = la_check_batch(name, "tau", tau, 1, a, 2)))
    return s;
  if (tau->dtype != a->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: tau is %s, A is %s", name, nrt_dtype_name(tau->dtype),
                   nrt_dtype_name(a->dtype));
  const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
  if (tau->shape[tau->ndim - 1] != k)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: tau has %lld entries per matrix, expected %lld", name,
                   (long long)tau->shape[tau->ndim - 1], (long long)k);
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0 || k == 0) return NRT_SUCCESS;
  geqrf_job job = {a, tau, m, n, k, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(2.0 * m * n * k), geqrf_range, &job);
  return report_oom(name, &job.failure);
}

/* ---- ormqr ---------------------------------------------------------------- */

typedef struct ormqr_job {
  const nrt_tensor_view *c, *v, *tau;
  int64_t m, cols, k;
  int trans, conj;
  la_failure failure;
} ormqr_job;

/* The reflectors of matrix b as ormqr reads them: v (m x k, row-major)
 * with the unit diagonal and zeros above it, and tau; conjugated for
 * conj(Q) (H_j's conjugate is made of conj(v_j) and conj(tau_j)). */
#define PACK_REFLECTORS(sfx, T)                                                  \
  do {                                                                           \
    T *vv = (T *)v, *tt = (T *)t;                                                \
    const char *src = la_batch_at(job->v, 2, b);                                 \
    for (int64_t i = 0; i < m; i++)                                              \
      for (int64_t j = 0; j < k; j++)                                            \
        vv[i * k + j] = i == j ? 1 : i < j ? 0 : ((const T *)src)[i * vrs + j * vcs]; \
    const T *ts = (const T *)la_batch_at(job->tau, 1, b);                        \
    for (int64_t j = 0; j < k; j++) tt[j] = ts[j * tst];                         \
    if (job->conj) {                                                             \
      for (int64_t i = 0; i < m * k; i++) vv[i] = la_conj_##sfx(vv[i]);          \
      for (int64_t j = 0; j < k; j++) tt[j] = la_conj_##sfx(tt[j]);              \
    }                                                                            \
  } while (0)

static void ormqr_range(int64_t begin, int64_t end, void *ctx) {
  ormqr_job *job = ctx;
  const nrt_tensor_view *cv = job->c;
  const int64_t m = job->m, cols = job->cols, k = job->k, nb = LA_QR_BLOCK;
  const size_t esize = nrt_dtype_size(cv->dtype);
  const int64_t elems = m * cols + m * k + k + nb * nb + nb * (cols > 1 ? cols : 1) + 1;
  char *buf = malloc((size_t)elems * esize + 8);
  if (!buf) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)elems * esize));
    return;
  }
  char *c = buf, *v = c + (size_t)(m * cols) * esize, *t = v + (size_t)(m * k) * esize,
       *w = t + (size_t)k * esize;
  const int64_t rs = cv->strides[cv->ndim - 2], cs = cv->strides[cv->ndim - 1];
  const int64_t vrs = job->v->strides[job->v->ndim - 2], vcs = job->v->strides[job->v->ndim - 1];
  const int64_t tst = job->tau->strides[job->tau->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *dst = la_batch_at(cv, 2, b);
#define ORMQR_ONE(sfx, T)                                                               \
  do {                                                                                  \
    PACK_REFLECTORS(sfx, T);                                                            \
    la_pack_##sfx(dst, m, cols, rs, cs, (T *)c);                                        \
    la_ormqr_##sfx((T *)v, m, k, (T *)t, job->trans, (T *)c, cols, nb, (T *)w);         \
    la_unpack_##sfx((T *)c, m, cols, dst, rs, cs);                                      \
  } while (0)
    switch (cv->dtype) {
      case NRT_FLOAT64: ORMQR_ONE(f64, double); break;
      case NRT_COMPLEX64: ORMQR_ONE(c64, float _Complex); break;
      case NRT_COMPLEX128: ORMQR_ONE(c128, double _Complex); break;
      default: ORMQR_ONE(f32, float); break;
    }
#undef ORMQR_ONE
  }
  free(buf);
}

nrt_status rt_kernel_linalg_ormqr(const nrt_op *op) {
  static const char *name = "linalg_ormqr";
  if (op->num_operands != 3 || op->num_outputs != 1 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected C, V, tau and transpose", name);
  const nrt_tensor_view *c = &op->operands[0], *v = &op->operands[1], *tau = &op->operands[2];
  if (c->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: C must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "C", c, LA_OR_COMPLEX)) || (s = la_check_batch(name, "V", v, 2, c, 2)) ||
      (s = la_check_batch(name, "tau", tau, 1, c, 2)))
    return s;
  if (v->dtype != c->dtype || tau->dtype != c->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V (%s) and tau (%s) must have C's dtype %s", name,
                   nrt_dtype_name(v->dtype), nrt_dtype_name(tau->dtype), nrt_dtype_name(c->dtype));
  const int64_t m = c->shape[c->ndim - 2], cols = c->shape[c->ndim - 1];
  const int64_t k = tau->shape[tau->ndim - 1];
  if (v->shape[v->ndim - 2] != m)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V has %lld rows, C has %lld", name,
                   (long long)v->shape[v->ndim - 2], (long long)m);
  if (k > m || k > v->shape[v->ndim - 1])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %lld reflectors for V of %lld x %lld", name, (long long)k,
                   (long long)m, (long long)v->shape[v->ndim - 1]);
  const int64_t batch = la_batch_count(c, 2);
  if (batch == 0 || k == 0 || cols == 0) return NRT_SUCCESS;
  const int conj = op->num_scalars > 1 && op->scalars[1].i != 0;
  ormqr_job job = {c, v, tau, m, cols, k, op->scalars[0].i != 0, conj, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(4.0 * m * cols * k), ormqr_range, &job);
  return report_oom(name, &job.failure);
}
