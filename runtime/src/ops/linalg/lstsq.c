/* LINALG_LSTSQ (layout in neuronrt/ops/linalg.h): least squares
 * min ||A X - B|| with LAPACK's four drivers' contracts, each matrix in
 * double scratch whatever its dtype:
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
  la_failure failure;
} lstsq_job;

static inline double ld(const char *p, nrt_dtype d, int64_t off) {
  return d == NRT_FLOAT64 ? ((const double *)p)[off] : (double)((const float *)p)[off];
}
static inline void st(char *p, nrt_dtype d, int64_t off, double v) {
  if (d == NRT_FLOAT64)
    ((double *)p)[off] = v;
  else
    ((float *)p)[off] = (float)v;
}

static int64_t lstsq_elems(int64_t m, int64_t n, int64_t k, int driver) {
  const int64_t M = m > n ? m : n, N = m > n ? n : m, nb = LA_QR_BLOCK;
  int64_t e = m * n + M * k + N * k;
  if (driver == LSTSQ_GELS) {
    e += N * N + N + la_geqrf_scratch_f64(M, N, nb) + nb * nb + nb * (k > 1 ? k : 1);
  } else if (driver == LSTSQ_GELSY) {
    const int64_t g = la_geqrf_scratch_f64(n, N, nb), o = nb * nb + nb * (k > 1 ? k : 1);
    e += n * k + 2 * N + n + la_geqp3_scratch(m, n, nb) + 2 * n + m * N + n * N + (g > o ? g : o);
  } else {
    e += N + m * N + N * n + la_svd_scratch_f64(m, n, 0, 1);
  }
  return e;
}

/* a holds A (m >= n) or A^T (m < n), row-major. Returns info (0, or the
 * 1-based index of a zero on R's diagonal). */
static int32_t gels_one(const lstsq_job *job, double *a, double *c, double *scratch) {
  const int64_t m = job->m, n = job->n, k = job->k, nb = LA_QR_BLOCK;
  const int64_t M = m > n ? m : n, N = m > n ? n : m;
  double *r = scratch, *tau = r + N * N, *qs = tau + N;
  la_geqrf_f64(a, M, N, tau, nb, qs);
  for (int64_t i = 0; i < N; i++) {
    if (a[i * N + i] == 0) return (int32_t)(i + 1);
    for (int64_t j = 0; j < N; j++) r[i * N + j] = j < i ? 0 : a[i * N + j];
    for (int64_t j = i; j < N; j++) a[i * N + j] = j == i; /* explicit reflectors for ormqr */
  }
  if (m >= n) {
    la_ormqr_f64(a, M, N, tau, /*trans=*/1, c, k, nb, qs); /* c <- Q^T B */
    for (int64_t i = n - 1; i >= 0; i--) /* R X = c[0:n] */
      for (int64_t j = 0; j < k; j++) {
        double v = c[i * k + j];
        for (int64_t p = i + 1; p < n; p++) v -= r[i * N + p] * c[p * k + j];
        c[i * k + j] = v / r[i * N + i];
      }
    return 0;
  }
  for (int64_t i = 0; i < m; i++) /* R^T Y = B, in place in c's first m rows */
    for (int64_t j = 0; j < k; j++) {
      double v = c[i * k + j];
      for (int64_t p = 0; p < i; p++) v -= r[p * N + i] * c[p * k + j];
      c[i * k + j] = v / r[i * N + i];
    }
  for (int64_t i = m; i < n; i++)
    for (int64_t j = 0; j < k; j++) c[i * k + j] = 0;
  la_ormqr_f64(a, M, N, tau, /*trans=*/0, c, k, nb, qs); /* X = Q [Y; 0] */
  return 0;
}

/* gelsy on a (A column-major: n x m row-major, destroyed) and c (max(m, n)
 * x k, B in its first m rows; X in its first n on return). Returns the
 * effective rank. */
static int64_t gelsy_one(const lstsq_job *job, double *a, double *c, double *y, double *scratch) {
  const int64_t m = job->m, n = job->n, k = job->k, N = m < n ? m : n, nb = LA_QR_BLOCK;
  double *tau = scratch, *tau2 = tau + N, *permd = tau2 + N, *qs = permd + n;
  double *ice = qs + la_geqp3_scratch(m, n, nb), *v = ice + 2 * n, *t = v + m * N, *ws = t + n * N;
  int64_t *perm = (int64_t *)permd;
#define R(i, j) a[(j) * m + (i)] /* R[i][j], i <= j; v_j[i] for i > j */
  la_geqp3(a, m, n, tau, perm, nb, qs);
  const double rc = job->rcond < 0 ? (job->a->dtype == NRT_FLOAT64 ? 2.220446049250313e-16 : 1.1920928955078125e-07)
                                   : job->rcond;
  const int64_t r = la_ice_rank(a, 1, m, N, rc, ice);
  if (r == 0) {
    memset(c, 0, (size_t)(n * k) * sizeof(double));
    return 0;
  }
  /* c[0:r] = (Q^T B)[0:r]: only the first r reflectors reach those rows. */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < r; j++) v[i * r + j] = i == j ? 1 : i < j ? 0 : R(i, j);
  la_ormqr_f64(v, m, r, tau, /*trans=*/1, c, k, nb, ws);
  if (r == n) { /* R x = c[0:n], R upper n x n */
    for (int64_t i = n - 1; i >= 0; i--) {
      double *ci = c + i * k;
      for (int64_t p = i + 1; p < n; p++) la_axpy_neg_f64(ci, R(i, p), c + p * k, k);
      const double d = R(i, i);
      for (int64_t j = 0; j < k; j++) ci[j] /= d;
    }
  } else { /* [R11 R12]^T = Q2 [L^T; 0]: x' = Q2 [L^-1 c[0:r]; 0] */
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < r; i++) t[j * r + i] = j < i ? 0 : R(i, j);
    la_geqrf_f64(t, n, r, tau2, nb, ws);
    for (int64_t i = 0; i < r; i++) { /* L = R2^T lower: forward substitution */
      double *ci = c + i * k;
      for (int64_t p = 0; p < i; p++) la_axpy_neg_f64(ci, t[p * r + i], c + p * k, k);
      const double d = t[i * r + i];
      for (int64_t j = 0; j < k; j++) ci[j] /= d;
    }
    memset(c + r * k, 0, (size_t)((n - r) * k) * sizeof(double));
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = i; j < r; j++) t[i * r + j] = j == i; /* explicit reflectors for ormqr */
    la_ormqr_f64(t, n, r, tau2, /*trans=*/0, c, k, nb, ws);
  }
#undef R
  /* Undo the column permutation: x[perm[i]] = x'[i]. */
  for (int64_t i = 0; i < n; i++) memcpy(y + perm[i] * k, c + i * k, (size_t)k * sizeof(double));
  memcpy(c, y, (size_t)(n * k) * sizeof(double));
  return r;
}

/* Returns the effective rank; s gets the singular values. */
static int64_t svd_solve_one(const lstsq_job *job, const double *a, double *c, double *y, double *s,
                             double *scratch, int64_t *order) {
  const int64_t m = job->m, n = job->n, k = job->k, N = m < n ? m : n;
  double *u = scratch, *vt = u + m * N, *ws = vt + N * n;
  la_svd_f64(a, n, 1, m, n, 0, 1, job->tol, s, u, vt, ws, order);
  const double rc = job->rcond < 0 ? (job->a->dtype == NRT_FLOAT64 ? 2.220446049250313e-16 : 1.1920928955078125e-07)
                                   : job->rcond;
  int64_t r = 0;
  while (r < N && s[r] > rc * s[0]) r++;
  for (int64_t i = 0; i < r; i++) /* y = diag(1/s_r) U_r^T B */
    for (int64_t j = 0; j < k; j++) {
      double v = 0;
      for (int64_t p = 0; p < m; p++) v += u[p * N + i] * c[p * k + j];
      y[i * k + j] = v / s[i];
    }
  const int residual_rows = m > n && r == n;
  if (residual_rows)
    for (int64_t j = 0; j < k; j++) { /* ||B - U_r U_r^T B|| per column, into row n */
      double ss = 0;
      for (int64_t p = 0; p < m; p++) {
        double v = c[p * k + j];
        for (int64_t i = 0; i < r; i++) v -= u[p * N + i] * y[i * k + j] * s[i];
        ss += v * v;
      }
      c[n * k + j] = sqrt(ss);
      for (int64_t p = n + 1; p < m; p++) c[p * k + j] = 0;
    }
  for (int64_t i = 0; i < n; i++) /* X = V_r y */
    for (int64_t j = 0; j < k; j++) {
      double v = 0;
      for (int64_t p = 0; p < r; p++) v += vt[p * n + i] * y[p * k + j];
      c[i * k + j] = v;
    }
  return r;
}

static void lstsq_range(int64_t begin, int64_t end, void *ctx) {
  lstsq_job *job = ctx;
  const int64_t m = job->m, n = job->n, k = job->k, M = m > n ? m : n, N = m < n ? m : n;
  const int64_t elems = lstsq_elems(m, n, k, job->driver);
  double *buf = malloc((size_t)elems * sizeof(double) + 8);
  int64_t *order = malloc((size_t)N * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)elems * sizeof(double)));
    return;
  }
  const nrt_tensor_view *av = job->a, *xv = job->x;
  const nrt_dtype dt = av->dtype;
  const int64_t ars = av->strides[av->ndim - 2], acs = av->strides[av->ndim - 1];
  const int64_t xrs = xv->strides[xv->ndim - 2], xcs = xv->strides[xv->ndim - 1];
  double *a = buf, *c = a + m * n, *y = c + M * k, *rest = y + (job->driver == LSTSQ_GELSY ? n : N) * k;
  for (int64_t b = begin; b < end; b++) {
    const char *ap = la_batch_at(av, 2, b);
    char *xp = la_batch_at(xv, 2, b);
    /* gels factors A^T when wide; gelsy works on A column-major */
    const int tr = (job->driver == LSTSQ_GELS && m < n) || job->driver == LSTSQ_GELSY;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) a[tr ? j * m + i : i * n + j] = ld(ap, dt, i * ars + j * acs);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < k; j++) c[i * k + j] = i < m ? ld(xp, dt, i * xrs + j * xcs) : 0;
    int32_t info = 0;
    if (job->driver == LSTSQ_GELS) {
      info = gels_one(job, a, c, rest);
    } else if (job->driver == LSTSQ_GELSY) {
      const int64_t r = gelsy_one(job, a, c, y, rest);
      if (job->rank) ((int64_t *)la_batch_at(job->rank, 0, b))[0] = r;
    } else {
      double *s = rest;
      const int64_t r = svd_solve_one(job, a, c, y, s, rest + N, order);
      if (job->rank) ((int64_t *)la_batch_at(job->rank, 0, b))[0] = r;
      if (job->s) {
        const nrt_tensor_view *sv = job->s;
        char *sp = la_batch_at(sv, 1, b);
        for (int64_t i = 0; i < N; i++) st(sp, sv->dtype, i * sv->strides[sv->ndim - 1], s[i]);
      }
    }
    if (job->info) ((int32_t *)la_batch_at(job->info, 0, b))[0] = info;
    if (info) continue; /* LAPACK leaves B as it was */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < k; j++) st(xp, dt, i * xrs + j * xcs, c[i * k + j]);
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
  if ((e = la_check_dtype(name, "A", a, 1)) || (e = la_check_batch(name, "X", x, 2, a, 2))) return e;
  const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = x->shape[x->ndim - 1];
  const int64_t M = m > n ? m : n, N = m < n ? m : n;
  if (x->dtype != a->dtype || x->shape[x->ndim - 2] != M)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: X must be %s with max(m, n) = %lld rows", name,
                   nrt_dtype_name(a->dtype), (long long)M);
  if (info && (info->dtype != NRT_INT32 || (e = la_check_batch(name, "info", info, 0, a, 2))))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: info must be int32", name);
  if (rank && (rank->dtype != NRT_INT64 || (e = la_check_batch(name, "rank", rank, 0, a, 2))))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: rank must be int64", name);
  if (s && (s->dtype != a->dtype || (e = la_check_batch(name, "S", s, 1, a, 2)) || s->shape[s->ndim - 1] != N))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: S must be %s with min(m, n) values", name,
                           nrt_dtype_name(a->dtype));
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0) return NRT_SUCCESS;
  if (N == 0 || k == 0) { /* nothing to solve: X's first n rows are zero, rank 0, info 0 */
    for (int64_t b = 0; b < batch; b++) {
      if (rank) ((int64_t *)la_batch_at(rank, 0, b))[0] = 0;
      if (info) ((int32_t *)la_batch_at(info, 0, b))[0] = 0;
      char *xp = la_batch_at(x, 2, b);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) st(xp, x->dtype, i * x->strides[x->ndim - 2] + j * x->strides[x->ndim - 1], 0);
    }
    return NRT_SUCCESS;
  }
  const double eps = a->dtype == NRT_FLOAT64 ? 1.1102230246251565e-16 : 5.960464477539063e-08;
  lstsq_job job = {x, info, rank, s, a, m, n, k, driver, op->scalars[1].f, la_svd_tol(eps, N), {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(10.0 * (double)M * (double)N * (double)(N + k)), lstsq_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
