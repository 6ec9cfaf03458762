/* LINALG_EIGH (layout in neuronrt/ops/linalg.h): each matrix is packed
 * from its lower or upper triangle into full symmetric row-major scratch,
 * diagonalised, and its eigenpairs written back sorted by ascending
 * eigenvalue. Below EIGH_QL_MIN rows by cyclic Jacobi (eigh_t.h: accurate
 * to the last bits of small eigenvalues, but O(n^3) per sweep); from there
 * by Householder reduction to tridiagonal form and implicit QL iterations
 * (tridiag_ql below, in double for both dtypes; normwise backward stable as
 * LAPACK's syevd, and falling back to Jacobi should an eigenvalue not
 * converge). Hermitian (complex) matrices the same way: complex Jacobi
 * rotations (eigh_t.h), or from EIGH_QL_MIN the Householder reduction to a
 * real symmetric tridiagonal form (hermitian_tridiag_ql below) and the
 * same QL, in complex128 for both complex dtypes. Batches split across the
 * kernel threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"

#include "ops/linalg/qr.h" /* la_reflector_c128; through dense.h la_mul_*, la_conj_*, la_re_* */
#define LA_TEMPLATE "ops/linalg/eigh_t.h"
#include "ops/linalg/instantiate.h"
#undef LA_TEMPLATE

#define EIGH_QL_MIN 64

/* Implicit QL on the real symmetric tridiagonal (d, e; e[n-1] = 0):
 * for each l, while some e[m] (m >= l, the first) is not negligible next to
 * |d[m]| + |d[m+1]|, one implicit QL sweep from m up to l with the shift
 * of the leading 2x2 block's eigenvalue nearer d[l], its plane rotations
 * (real) applied to rows i, i+1 of zt, whose elements are ZT (double, or
 * double _Complex for a Hermitian matrix's tridiagonal form). Returns 0,
 * or -1 if an eigenvalue took over 60 iterations. */
#define QL_SWEEPS(SFX, ZT)                                             \
  static int ql_sweeps_##SFX(double *d, double *e, ZT *zt, int64_t n, int want_v) {\
    const double eps = 2.220446049250313e-16;                          \
    for (int64_t l = 0; l < n; l++) {                                    \
      int iter = 0;                                                      \
      for (;;) {                                                         \
        int64_t m = l;                                                   \
        for (; m + 1 < n; m++)                                           \
          if (fabs(e[m]) <= eps * (fabs(d[m]) + fabs(d[m + 1]))) break;  \
        if (m == l) break;                                               \
        if (++iter > 60) return -1;                                      \
        double g = (d[l + 1] - d[l]) / (2.0 * e[l]);                     \
        double r = hypot(g, 1.0);                                        \
        g = d[m] - d[l] + e[l] / (g + (g >= 0 ? r : -r));                \
        double s = 1, c = 1, shift = 0;                                  \
        int split = 0;                                                   \
        for (int64_t i = m - 1; i >= l; i--) {                           \
          const double f = s * e[i], b = c * e[i];                       \
          r = hypot(f, g);                                               \
          e[i + 1] = r;                                                  \
          if (r == 0) { /* underflow: the matrix splits here */          \
            d[i + 1] -= shift;                                           \
            e[m] = 0;                                                    \
            split = 1;                                                   \
            break;                                                       \
          }                                                              \
          s = f / r;                                                     \
          c = g / r;                                                     \
          g = d[i + 1] - shift;                                          \
          r = (d[i] - g) * s + 2.0 * c * b;                              \
          shift = s * r;                                                 \
          d[i + 1] = g + shift;                                          \
          g = c * r - b;                                                 \
          if (want_v) {                                                  \
            ZT *zi = zt + i * n, *zn = zt + (i + 1) * n;                 \
            for (int64_t j = 0; j < n; j++) {                            \
              const ZT y = zi[j], x = zn[j];                             \
              zn[j] = s * y + c * x;                                     \
              zi[j] = c * y - s * x;                                     \
            }                                                            \
          }                                                              \
        }                                                                \
        if (split) continue;                                             \
        d[l] -= shift;                                                   \
        e[l] = g;                                                        \
        e[m] = 0;                                                        \
      }                                                                  \
    }                                                                    \
    return 0;                                                            \
  }
QL_SWEEPS(f64, double)
QL_SWEEPS(c128, double _Complex)

/* Eigenvalues (d) and, when want_v, eigenvectors (rows of zt: zt = V^T) of
 * the symmetric a (n x n, row-major, full; destroyed), with e, row and v
 * (n each) as scratch. Returns 0, or -1 if an eigenvalue took over 60
 * iterations.
 * Reduction: for k = 0 .. n-3, the reflector H_k = I - beta v v^T (v over
 * rows k+1..n-1, kept in column k below the diagonal) maps a's column k
 * below the diagonal onto (alpha, 0, ...), alpha = -sign(x_0) ||x||, and
 * the trailing block becomes H_k A22 H_k = A22 - v w^T - w v^T with
 * w = p - (beta / 2)(v^T p) v, p = beta A22 v. Then A = Q T Q^T with
 * Q = H_0 ... H_{n-3}, so zt starts as Q^T = H_{n-3} ... H_0.
 * QL: for each l, while some e[m] (m >= l, the first) is not negligible
 * next to |d[m]| + |d[m+1]|, one implicit QL sweep from m up to l with the
 * shift of the leading 2x2 block's eigenvalue nearer d[l], its plane
 * rotations applied to rows i, i+1 of zt. */
static int tridiag_ql(double *a, int64_t n, double *d, double *e, double *zt, double *row, double *v,
                      int want_v) {
  for (int64_t k = 0; k + 2 < n; k++) {
    const double x0 = a[(k + 1) * n + k];
    double tail = 0;
    for (int64_t i = k + 2; i < n; i++) tail += a[i * n + k] * a[i * n + k];
    if (tail == 0) {
      e[k] = x0;
      row[k] = 0; /* beta_k */
      continue;
    }
    const double norm = sqrt(x0 * x0 + tail), alpha = x0 >= 0 ? -norm : norm;
    const double v0 = x0 - alpha, beta = 2.0 / (v0 * v0 + tail);
    a[(k + 1) * n + k] = v0;
    e[k] = alpha;
    row[k] = beta;
    const int64_t lo = k + 1;
    double *p = d; /* d is free until the end of the reduction */
    for (int64_t i = lo; i < n; i++) v[i] = a[i * n + k]; /* contiguous copy of v */
    double vp = 0;
    for (int64_t i = lo; i < n; i++) {
      double sum = 0;
      const double *ai = a + i * n;
      for (int64_t j = lo; j < n; j++) sum += ai[j] * v[j];
      p[i] = beta * sum;
      vp += v[i] * p[i];
    }
    const double kk = 0.5 * beta * vp;
    for (int64_t i = lo; i < n; i++) p[i] -= kk * v[i]; /* w */
    for (int64_t i = lo; i < n; i++) {
      const double vi = v[i], wi = p[i];
      double *ai = a + i * n;
      for (int64_t j = lo; j < n; j++) ai[j] -= vi * p[j] + wi * v[j];
    }
  }
  if (n >= 2) e[n - 2] = a[(n - 1) * n + n - 2];
  e[n - 1] = 0;
  for (int64_t i = 0; i < n; i++) d[i] = a[i * n + i];
  if (want_v) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) zt[i * n + j] = i == j;
    double *acc = malloc((size_t)n * sizeof(double) + 8);
    if (!acc) return -1;
    for (int64_t k = 0; k + 2 < n; k++) { /* zt <- H_k zt, rows k+1..n-1 */
      const double beta = row[k];
      if (beta == 0) continue;
      memset(acc, 0, (size_t)n * sizeof(double));
      for (int64_t i = k + 1; i < n; i++) {
        const double vi = a[i * n + k];
        const double *zi = zt + i * n;
        for (int64_t j = 0; j < n; j++) acc[j] += vi * zi[j];
      }
      for (int64_t i = k + 1; i < n; i++) {
        const double f = beta * a[i * n + k];
        double *zi = zt + i * n;
        for (int64_t j = 0; j < n; j++) zi[j] -= f * acc[j];
      }
    }
    free(acc);
  }
  return ql_sweeps_f64(d, e, zt, n, want_v);
}

/* The eigenpairs of a (n x n, full symmetric, type T) by tridiag_ql: the
 * eigenvalues onto a's diagonal and V^T into vt, as la_jacobi leaves them.
 * Returns 0, or -1 (a untouched) without memory or convergence. */
#define EIGH_QL(T)                                                                                   \
  static int eigh_ql_##T(T *a, int64_t n, T *vt, int want_v) {                                      \
    double *w = malloc((size_t)(2 * n * n + 4 * n) * sizeof(double) + 8);                           \
    if (!w) return -1;                                                                              \
    double *x = w, *zt = x + n * n, *d = zt + n * n, *e = d + n, *row = e + n;                       \
    for (int64_t i = 0; i < n * n; i++) x[i] = (double)a[i];                                        \
    if (tridiag_ql(x, n, d, e, zt, row, row + n, want_v) != 0) {                                    \
      free(w);                                                                                      \
      return -1;                                                                                    \
    }                                                                                               \
    for (int64_t i = 0; i < n; i++) a[i * (n + 1)] = (T)d[i];                                       \
    if (want_v)                                                                                     \
      for (int64_t i = 0; i < n * n; i++) vt[i] = (T)zt[i];                                         \
    free(w);                                                                                        \
    return 0;                                                                                       \
  }
EIGH_QL(float)
EIGH_QL(double)

/* The Hermitian a (n x n, row-major, full; destroyed) reduced to a real
 * symmetric tridiagonal (d, e) as LAPACK's zhetrd (uplo 'L'): for k = 0 ..
 * n-2, the reflector H_k = I - tau v v^H (la_reflector_c128: its beta, the
 * new subdiagonal entry, is real; v over rows k+1..n-1, kept in column k)
 * with H_k^H a[k+1:, k] = (beta, 0, ...), and the trailing block becomes
 * H_k^H A22 H_k = A22 - v w^H - w v^H, w = p - (tau / 2)(p^H v) v,
 * p = tau A22 v. Then A = Q T Q^H, Q = H_0 ... H_{n-2}, so zt starts as
 * Q^T = H_{n-2}^T ... H_0^T and the real QL rotations of T act on its rows:
 * zt = V^T. tau, v and p are n scratch each. */
static int hermitian_tridiag_ql(double _Complex *a, int64_t n, double *d, double *e, double _Complex *zt,
                                double _Complex *tau, double _Complex *v, double _Complex *p, int want_v) {
  for (int64_t k = 0; k + 1 < n; k++) {
    const int64_t lo = k + 1, len = n - lo;
    for (int64_t i = 0; i < len; i++) v[i] = a[(lo + i) * n + k];
    const double _Complex t = la_reflector_c128(v, v + 1, len - 1, 1);
    e[k] = creal(v[0]);
    v[0] = 1;
    tau[k] = t;
    for (int64_t i = 0; i < len; i++) a[(lo + i) * n + k] = v[i]; /* v for Q */
    if (t == 0) continue;
    double _Complex pv = 0;
    for (int64_t i = 0; i < len; i++) {
      const double _Complex *ai = a + (lo + i) * n + lo;
      double _Complex sum = 0;
      for (int64_t j = 0; j < len; j++) sum += la_mul_c128(ai[j], v[j]);
      p[i] = la_mul_c128(t, sum);
      pv += la_mul_c128(la_conj_c128(p[i]), v[i]);
    }
    const double _Complex half = -0.5 * la_mul_c128(t, pv);
    for (int64_t i = 0; i < len; i++) p[i] += la_mul_c128(half, v[i]); /* w */
    for (int64_t i = 0; i < len; i++) {
      const double _Complex vi = v[i], wi = p[i];
      double _Complex *ai = a + (lo + i) * n + lo;
      for (int64_t j = 0; j < len; j++)
        ai[j] -= la_mul_c128(vi, la_conj_c128(p[j])) + la_mul_c128(wi, la_conj_c128(v[j]));
    }
  }
  e[n - 1] = 0;
  for (int64_t i = 0; i < n; i++) d[i] = creal(a[i * n + i]);
  if (want_v) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) zt[i * n + j] = i == j;
    for (int64_t k = 0; k + 1 < n; k++) { /* zt <- H_k^T zt = zt - tau conj(v) (v^T zt), rows k+1.. */
      if (tau[k] == 0) continue;
      for (int64_t j = 0; j < n; j++) p[j] = 0;
      for (int64_t i = k + 1; i < n; i++) {
        const double _Complex vi = a[i * n + k];
        const double _Complex *zi = zt + i * n;
        for (int64_t j = 0; j < n; j++) p[j] += la_mul_c128(vi, zi[j]);
      }
      for (int64_t i = k + 1; i < n; i++) {
        const double _Complex f = la_mul_c128(tau[k], la_conj_c128(a[i * n + k]));
        double _Complex *zi = zt + i * n;
        for (int64_t j = 0; j < n; j++) zi[j] -= la_mul_c128(f, p[j]);
      }
    }
  }
  return ql_sweeps_c128(d, e, zt, n, want_v);
}

/* The eigenpairs of the Hermitian a (complex T) by hermitian_tridiag_ql,
 * as eigh_ql_float/double leave them; -1 (a untouched) without memory or
 * convergence. */
#define EIGH_HQL(T, SFX)                                                                                \
  static int eigh_hql_##SFX(T *a, int64_t n, T *vt, int want_v) {                                       \
    double _Complex *w = malloc((size_t)(2 * n * n + 3 * n) * sizeof(double _Complex) +                 \
                                (size_t)(2 * n) * sizeof(double) + 16);                                 \
    if (!w) return -1;                                                                                  \
    double _Complex *x = w, *zt = x + n * n, *tau = zt + n * n, *v = tau + n, *p = v + n;               \
    double *d = (double *)(p + n), *e = d + n;                                                          \
    for (int64_t i = 0; i < n * n; i++) x[i] = (double _Complex)a[i];                                   \
    if (hermitian_tridiag_ql(x, n, d, e, zt, tau, v, p, want_v) != 0) {                                 \
      free(w);                                                                                          \
      return -1;                                                                                        \
    }                                                                                                   \
    for (int64_t i = 0; i < n; i++) a[i * (n + 1)] = (T)d[i];                                           \
    if (want_v)                                                                                         \
      for (int64_t i = 0; i < n * n; i++) vt[i] = (T)zt[i];                                             \
    free(w);                                                                                            \
    return 0;                                                                                           \
  }
EIGH_HQL(float _Complex, c64)
EIGH_HQL(double _Complex, c128)

/* The eigenpairs of one packed matrix, as la_jacobi leaves them: Jacobi
 * below EIGH_QL_MIN, tridiagonal QL from there (Jacobi should it fail). */
static void eigh_solve_f32(float *a, int64_t n, float *vt, int want_v) {
  if (n < EIGH_QL_MIN || eigh_ql_float(a, n, vt, want_v) != 0) la_jacobi_f32(a, n, vt, want_v);
}
static void eigh_solve_f64(double *a, int64_t n, double *vt, int want_v) {
  if (n < EIGH_QL_MIN || eigh_ql_double(a, n, vt, want_v) != 0) la_jacobi_f64(a, n, vt, want_v);
}
static void eigh_solve_c64(float _Complex *a, int64_t n, float _Complex *vt, int want_v) {
  if (n < EIGH_QL_MIN || eigh_hql_c64(a, n, vt, want_v) != 0) la_jacobi_c64(a, n, vt, want_v);
}
static void eigh_solve_c128(double _Complex *a, int64_t n, double _Complex *vt, int want_v) {
  if (n < EIGH_QL_MIN || eigh_hql_c128(a, n, vt, want_v) != 0) la_jacobi_c128(a, n, vt, want_v);
}

typedef struct eigh_job {
  const nrt_tensor_view *w, *v;
  int64_t n;
  int upper, want_v;
  la_failure failure;
} eigh_job;

/* One matrix of element type T (real part R, suffix SFX): packed full
 * (Hermitian: the mirrored triangle conjugated, the diagonal's imaginary
 * part ignored, as LAPACK's heevd), diagonalised, written back sorted. */
#define EIGH_ONE(T, R, SFX)                                                              \
  do {                                                                                       \
    T *a = (T *)buf, *vt = a + n * n;                                                        \
    const T *src = (const T *)m;                                                             \
    for (int64_t i = 0; i < n; i++)                                                          \
      for (int64_t j = 0; j < n; j++) {                                                      \
        const int64_t hi = i > j ? i : j, lo = i > j ? j : i; /* lower: (hi, lo) */         \
        const T x = job->upper ? src[lo * rs + hi * cs] : src[hi * rs + lo * cs];            \
        a[i * n + j] = (job->upper ? i > j : i < j) ? la_conj_##SFX(x) : x;                  \
      }                                                                                      \
    for (int64_t i = 0; i < n; i++) a[i * (n + 1)] = la_re_##SFX(a[i * (n + 1)]);            \
    eigh_solve_##SFX(a, n, vt, job->want_v);                                                 \
    for (int64_t i = 0; i < n; i++) order[i] = i;                                            \
    for (int64_t i = 1; i < n; i++) { /* insertion sort: stable, ascending */               \
      const int64_t x = order[i];                                                            \
      int64_t j = i;                                                                         \
      for (; j > 0 && la_re_##SFX(a[order[j - 1] * (n + 1)]) > la_re_##SFX(a[x * (n + 1)]); j--) \
        order[j] = order[j - 1];                                                             \
      order[j] = x;                                                                          \
    }                                                                                        \
    R *wout = (R *)la_batch_at(job->w, 1, b);                                                \
    for (int64_t r = 0; r < n; r++) wout[r * ws] = la_re_##SFX(a[order[r] * (n + 1)]);       \
    if (job->want_v) {                                                                       \
      T *dst = (T *)m;                                                                       \
      for (int64_t r = 0; r < n; r++)                                                        \
        for (int64_t k = 0; k < n; k++) dst[k * rs + r * cs] = vt[order[r] * n + k];         \
    }                                                                                        \
  } while (0)

static void eigh_range(int64_t begin, int64_t end, void *ctx) {
  eigh_job *job = ctx;
  const int64_t n = job->n;
  const nrt_dtype dt = job->v->dtype;
  const size_t esize = nrt_dtype_size(dt);
  char *buf = malloc((size_t)(2 * n * n) * esize + 8);
  int64_t *order = malloc((size_t)n * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(2 * n * n) * esize));
    return;
  }
  const nrt_tensor_view *v = job->v;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1];
  const int64_t ws = job->w->strides[job->w->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *m = la_batch_at(v, 2, b);
    switch (dt) {
      case NRT_FLOAT64: EIGH_ONE(double, double, f64); break;
      case NRT_COMPLEX64: EIGH_ONE(float _Complex, float, c64); break;
      case NRT_COMPLEX128: EIGH_ONE(double _Complex, double, c128); break;
      default: EIGH_ONE(float, float, f32); break;
    }
  }
  free(buf), free(order);
}

nrt_status rt_kernel_linalg_eigh(const nrt_op *op) {
  static const char *name = "linalg_eigh";
  if (op->num_operands != 2 || op->num_outputs != 2 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected W, V, upper and compute_v", name);
  const nrt_tensor_view *w = &op->operands[0], *v = &op->operands[1];
  if (v->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "V", v, LA_OR_COMPLEX)) || (s = la_check_batch(name, "W", w, 1, v, 2))) return s;
  const nrt_dtype wdt = v->dtype == NRT_COMPLEX64 ? NRT_FLOAT32 : v->dtype == NRT_COMPLEX128 ? NRT_FLOAT64 : v->dtype;
  if (w->dtype != wdt)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: W is %s, expected %s for V of %s", name,
                   nrt_dtype_name(w->dtype), nrt_dtype_name(wdt), nrt_dtype_name(v->dtype));
  const int64_t n = v->shape[v->ndim - 1];
  if (v->shape[v->ndim - 2] != n || w->shape[w->ndim - 1] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V must be square and W hold its %lld eigenvalues", name,
                   (long long)n);
  const int64_t batch = la_batch_count(v, 2);
  if (batch == 0 || n == 0) return NRT_SUCCESS;
  eigh_job job = {w, v, n, op->scalars[0].i != 0, op->scalars[1].i != 0, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(20.0 * n * n * n), eigh_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
