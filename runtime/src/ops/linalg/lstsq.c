/* LINALG_LSTSQ (layout in neuronrt/ops/linalg.h): least squares
 * min ||A X - B|| with LAPACK's four drivers' contracts, each matrix in
 * double (complex128) scratch whatever its dtype (the drivers: lstsq_t.h;
 * complex ones take Q^H, A^H and conjugates where these say T):
 *   gels   A = Q R (m >= n: X = R^-1 (Q^T B)[0:n], rows n..m-1 of the
 *          output keep (Q^T B)[n:m], whose squares sum to the residual) or
 *          A^T = Q R (m < n: the minimum-norm X = Q [R^-T B; 0]); a zero on
 *          R's diagonal is info = its 1-based index, as LAPACK reports it;
 *   gelsy  QR with column pivoting A P = Q R (qrcp.h, on A column-major,
 *          blocked, its trailing updates GEMMs), the effective rank r from R by
 *          incremental condition estimation (the largest r whose leading
 *          triangle R11 has estimated condition below 1 / rcond, as LAPACK's
 *          gelsy defines it), then the minimum-norm solution of
 *          [R11 R12] P^T x = (Q^T B)[0:r]: directly by back substitution
 *          when r = n, otherwise through the complete orthogonal
 *          factorisation [R11 R12] = [L 0] Z (a Householder QR of the
 *          transpose, Z^T = Q2) as x = P Z^T [L^-1 (Q^T B)[0:r]; 0]; r is
 *          written, rows n..m-1 of the output keep (Q^T B)[n:m];
 *   gelsd, gelss   the minimum-norm solution of the effective rank
 *          r = #{s_i > rcond s_1} from the SVD (svd_t.h) A = U diag(s) V^T:
 *          X = V_r diag(1/s_r) U_r^T B; r and (gelsd, gelss) s are written;
 *          when m > n and r = n, row n holds the residual norm of each
 *          column and rows n+1..m-1 zeros (the same sum of squares).
 * Batches split across the kernel threads, one matrix per thread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"
#include "ops/linalg/qrcp.h"
#include "ops/linalg/svd.h"

enum { LSTSQ_GELS = 0, LSTSQ_GELSY = 1, LSTSQ_GELSD = 2, LSTSQ_GELSS = 3 };

typedef struct lstsq_job {
  const nrt_tensor_view *x, *info, *rank, *s, *a;
  int64_t m, n, k;
  int driver;
  double rcond, tol;
  double eps2; /* the default rcond: the real dtype's machine epsilon */
  la_failure failure;
} lstsq_job;

#define LA_T double
#define LA_R double
#define LA_CPLX 0
#define LA_NAME(x) la_##x##_f64
#include "ops/linalg/lstsq_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_NAME
#define LA_T double _Complex
#define LA_R double
#define LA_CPLX 1
#define LA_CX(re, im) CMPLX(re, im)
#define LA_NAME(x) la_##x##_c128
#include "ops/linalg/lstsq_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_CX
#undef LA_NAME

/* One batch element: A and B read into scratch of type W (double or
 * double _Complex) from storage type T, solved by the driver, X written
 * back; S (real) in the precision of T. */
#define LSTSQ_ONE(T, W, SFX)                                                                                 \
  static void lstsq_one_##SFX##_##T(const lstsq_job *job, int64_t b, W *buf, int64_t *order) {            \
    const int64_t m = job->m, n = job->n, k = job->k, M = m > n ? m : n, N = m < n ? m : n;                \
    const nrt_tensor_view *av = job->a, *xv = job->x;                                                     \
    const int64_t ars = av->strides[av->ndim - 2], acs = av->strides[av->ndim - 1];                       \
    const int64_t xrs = xv->strides[xv->ndim - 2], xcs = xv->strides[xv->ndim - 1];                       \
    W *a = buf, *c = a + m * n, *y = c + M * k, *rest = y + (job->driver == LSTSQ_GELSY ? n : N) * k;     \
    const T *ap = (const T *)la_batch_at(av, 2, b);                                                       \
    T *xp = (T *)la_batch_at(xv, 2, b);                                                                   \
    /* gels factors A^H when wide; gelsy works on A column-major */                                      \
    const int gels_wide = job->driver == LSTSQ_GELS && m < n, cm = job->driver == LSTSQ_GELSY;           \
    for (int64_t i = 0; i < m; i++)                                                                       \
      for (int64_t j = 0; j < n; j++) {                                                                   \
        const W x = (W)ap[i * ars + j * acs];                                                             \
        if (gels_wide)                                                                                    \
          a[j * m + i] = la_conj_##SFX(x);                                                                \
        else                                                                                              \
          a[cm ? j * m + i : i * n + j] = x;                                                              \
      }                                                                                                   \
    for (int64_t i = 0; i < M; i++)                                                                       \
      for (int64_t j = 0; j < k; j++) c[i * k + j] = i < m ? (W)xp[i * xrs + j * xcs] : 0;               \
    int32_t info = 0;                                                                                     \
    if (job->driver == LSTSQ_GELS) {                                                                      \
      info = la_gels_one_##SFX(job, a, c, rest);                                                          \
    } else if (job->driver == LSTSQ_GELSY) {                                                              \
      const int64_t r = la_gelsy_one_##SFX(job, a, c, y, rest);                                           \
      if (job->rank) ((int64_t *)la_batch_at(job->rank, 0, b))[0] = r;                                    \
    } else {                                                                                              \
      double *s = (double *)rest;                                                                         \
      const int64_t r = la_svd_solve_one_##SFX(job, a, c, y, s, rest + N, order);                         \
      if (job->rank) ((int64_t *)la_batch_at(job->rank, 0, b))[0] = r;                                    \
      if (job->s) {                                                                                       \
        const nrt_tensor_view *sv = job->s;                                                               \
        char *sp = la_batch_at(sv, 1, b);                                                                 \
        const int64_t ss = sv->strides[sv->ndim - 1];                                                     \
        for (int64_t i = 0; i < N; i++) {                                                                 \
          if (sv->dtype == NRT_FLOAT64)                                                                   \
            ((double *)sp)[i * ss] = s[i];                                                                \
          else                                                                                            \
            ((float *)sp)[i * ss] = (float)s[i];                                                          \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    if (job->info) ((int32_t *)la_batch_at(job->info, 0, b))[0] = info;                                   \
    if (info) return; /* LAPACK leaves B as it was */                                                     \
    for (int64_t i = 0; i < M; i++)                                                                       \
      for (int64_t j = 0; j < k; j++) xp[i * xrs + j * xcs] = (T)c[i * k + j];                            \
  }
typedef float _Complex c64_t;
typedef double _Complex c128_t;
LSTSQ_ONE(float, double, f64)
LSTSQ_ONE(double, double, f64)
LSTSQ_ONE(c64_t, c128_t, c128)
LSTSQ_ONE(c128_t, c128_t, c128)

static void lstsq_range(int64_t begin, int64_t end, void *ctx) {
  lstsq_job *job = ctx;
  const nrt_dtype dt = job->a->dtype;
  const int cplx = dt == NRT_COMPLEX64 || dt == NRT_COMPLEX128;
  const int64_t N = job->m < job->n ? job->m : job->n;
  const size_t bytes = cplx ? (size_t)la_lstsq_elems_c128(job->m, job->n, job->k, job->driver) * sizeof(c128_t)
                            : (size_t)la_lstsq_elems_f64(job->m, job->n, job->k, job->driver) * sizeof(double);
  void *buf = malloc(bytes + 16);
  int64_t *order = malloc((size_t)N * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)bytes);
    return;
  }
  for (int64_t b = begin; b < end; b++) switch (dt) {
      case NRT_FLOAT64: lstsq_one_f64_double(job, b, buf, order); break;
      case NRT_COMPLEX64: lstsq_one_c128_c64_t(job, b, buf, order); break;
      case NRT_COMPLEX128: lstsq_one_c128_c128_t(job, b, buf, order); break;
      default: lstsq_one_f64_float(job, b, buf, order); break;
    }
  free(buf), free(order);
}

static const nrt_tensor_view *present(const nrt_tensor_view *v) {
  int64_t numel = 1;
  for (int d = 0; d < v->ndim; d++) numel *= v->shape[d];
  return v->data && numel > 0 ? v : NULL;
}

nrt_status rt_kernel_linalg_lstsq(const nrt_op *op) {
  static const char *name = "linalg_lstsq";
  if (op->num_operands != 5 || op->num_outputs != 4 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected X, info, rank, S, A, driver and rcond", name);
  const nrt_tensor_view *x = &op->operands[0], *a = &op->operands[4];
  const nrt_tensor_view *info = present(&op->operands[1]), *rank = present(&op->operands[2]);
  const nrt_tensor_view *s = present(&op->operands[3]);
  const int driver = (int)op->scalars[0].i;
  if (driver < LSTSQ_GELS || driver > LSTSQ_GELSS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown driver %d", name, driver);
  if (a->ndim < 2 || x->ndim != a->ndim)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A and X must be batches of matrices of the same rank", name);
  nrt_status e;
  if ((e = la_check_dtype(name, "A", a, LA_OR_COMPLEX)) || (e = la_check_batch(name, "X", x, 2, a, 2))) return e;
  const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = x->shape[x->ndim - 1];
  const int64_t M = m > n ? m : n, N = m < n ? m : n;
  if (x->dtype != a->dtype || x->shape[x->ndim - 2] != M)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: X must be %s with max(m, n) = %lld rows", name,
                   nrt_dtype_name(a->dtype), (long long)M);
  if (info && (info->dtype != NRT_INT32 || (e = la_check_batch(name, "info", info, 0, a, 2))))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: info must be int32", name);
  if (rank && (rank->dtype != NRT_INT64 || (e = la_check_batch(name, "rank", rank, 0, a, 2))))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: rank must be int64", name);
  const int f64 = a->dtype == NRT_FLOAT64 || a->dtype == NRT_COMPLEX128;
  const nrt_dtype sdt = f64 ? NRT_FLOAT64 : NRT_FLOAT32;
  if (s && (s->dtype != sdt || (e = la_check_batch(name, "S", s, 1, a, 2)) || s->shape[s->ndim - 1] != N))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: S must be %s with min(m, n) values", name,
                           nrt_dtype_name(sdt));
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0) return NRT_SUCCESS;
  if (N == 0 || k == 0) { /* nothing to solve: X's first n rows are zero, rank 0, info 0 */
    for (int64_t b = 0; b < batch; b++) {
      if (rank) ((int64_t *)la_batch_at(rank, 0, b))[0] = 0;
      if (info) ((int32_t *)la_batch_at(info, 0, b))[0] = 0;
      char *xp = la_batch_at(x, 2, b);
      const size_t es = nrt_dtype_size(x->dtype);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++)
          memset(xp + (i * x->strides[x->ndim - 2] + j * x->strides[x->ndim - 1]) * (int64_t)es, 0, es);
    }
    return NRT_SUCCESS;
  }
  const double eps = f64 ? 1.1102230246251565e-16 : 5.960464477539063e-08;
  lstsq_job job = {x,      info, rank, s, a, m, n, k, driver, op->scalars[1].f, la_svd_tol(eps, N), 2 * eps,
                   {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(10.0 * (double)M * (double)N * (double)(N + k)), lstsq_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
