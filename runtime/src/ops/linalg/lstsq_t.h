/* The least-squares drivers of LINALG_LSTSQ (lstsq.c) for one element type,
 * included by lstsq.c for double (suffix _f64) and complex128 (_c128): both
 * dtypes of a kind compute there. Complex follows LAPACK's z-drivers: Q^H
 * where the real ones take Q^T, A^H (not A^T) factored by gels when wide,
 * conj(U)^T and conj(V) in the SVD solution; gelsy's pivoted QR is
 * unblocked (qrcp2 below) and its rank estimate the real one on moduli. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if LA_CPLX
static inline LA_R LA_NAME(lsq_abs2)(LA_T x) { return __real__ x * __real__ x + __imag__ x * __imag__ x; }
#else
static inline LA_R LA_NAME(lsq_abs2)(LA_T x) { return x * x; }
#endif

#if LA_CPLX
/* Unblocked QR with column pivoting (zgeqp3's contract, as la_geqp3 for
 * double): at holds A column-major (n x m row-major), on exit R on and
 * above the diagonal of A (R[i][j] = at[j * m + i], i <= j, real diagonal)
 * and the reflectors' v below it; the pivot is the first remaining column
 * of largest partial norm, recomputed at each step (norms: n scratch). */
static inline void LA_NAME(qrcp2)(LA_T *at, int64_t m, int64_t n, LA_T *tau, int64_t *perm, LA_R *norms) {
  const int64_t kmax = m < n ? m : n;
  for (int64_t j = 0; j < n; j++) perm[j] = j;
  for (int64_t k = 0; k < kmax; k++) {
    int64_t pvt = k;
    for (int64_t c = k; c < n; c++) {
      norms[c] = LA_NAME(norm2)(at + c * m + k, m - k, 1);
      if (norms[c] > norms[pvt]) pvt = c;
    }
    if (pvt != k) {
      LA_T *x = at + pvt * m, *y = at + k * m;
      for (int64_t i = 0; i < m; i++) {
        const LA_T t = x[i];
        x[i] = y[i], y[i] = t;
      }
      const int64_t tp = perm[pvt];
      perm[pvt] = perm[k], perm[k] = tp;
    }
    LA_T *v = at + k * m + k;
    const int64_t len = m - k;
    tau[k] = LA_NAME(reflector)(v, v + 1, len - 1, 1);
    const LA_T beta = v[0], th = LA_NAME(conj)(tau[k]); /* H^H on the trailing columns */
    v[0] = 1;
    if (th != 0)
      for (int64_t c = k + 1; c < n; c++) {
        LA_T *x = at + c * m + k;
        const LA_T d = LA_NAME(mul)(th, LA_NAME(dotc)(x, v, len)); /* conj(tau) v^H x */
        for (int64_t i = 0; i < len; i++) x[i] -= LA_NAME(mul)(d, v[i]);
      }
    v[0] = beta;
  }
}

/* la_ice_rank for complex R: the estimates of [R w; 0 gamma] depend only
 * on |alpha| (alpha = x^H w), |gamma| and sest, so each step is the real
 * one on those, its weights given the phases of alpha and gamma (M's
 * eigenvector is D times the real one, D = diag(alpha/|alpha|, gamma/|gamma|)). */
static inline int64_t LA_NAME(ice_rank)(const LA_T *r, int64_t rs, int64_t cs, int64_t n, double rcond,
                                        LA_T *work) {
  if (n == 0) return 0;
  LA_T *xmin = work, *xmax = work + n;
  double smax = cabs(r[0]), smin = smax;
  if (smax == 0) return 0;
  xmin[0] = xmax[0] = 1;
  int64_t rank = 1;
  while (rank < n) {
    const int64_t i = rank;
    LA_T amin = 0, amax = 0;
    for (int64_t p = 0; p < i; p++) {
      amin += LA_NAME(mul)(LA_NAME(conj)(xmin[p]), r[p * rs + i * cs]);
      amax += LA_NAME(mul)(LA_NAME(conj)(xmax[p]), r[p * rs + i * cs]);
    }
    const LA_T gamma = r[i * (rs + cs)];
    const double an = cabs(amin), ax = cabs(amax), gn = cabs(gamma);
    const LA_T pn = an > 0 ? amin / an : 1, px = ax > 0 ? amax / ax : 1, pg = gn > 0 ? gamma / gn : 1;
    double s1, c1, s2, c2;
    const double sminpr = la_ice_step(0, smin, an, gn, &s1, &c1);
    const double smaxpr = la_ice_step(1, smax, ax, gn, &s2, &c2);
    if (!(smaxpr * rcond <= sminpr)) break;
    for (int64_t p = 0; p < i; p++) xmin[p] = LA_NAME(mul)(xmin[p], s1 * pn), xmax[p] = LA_NAME(mul)(xmax[p], s2 * px);
    xmin[i] = c1 * pg, xmax[i] = c2 * pg;
    smin = sminpr, smax = smaxpr;
    rank++;
  }
  return rank;
}
#endif

/* Scratch (elements) for one matrix. */
static int64_t LA_NAME(lstsq_elems)(int64_t m, int64_t n, int64_t k, int driver) {
  const int64_t M = m > n ? m : n, N = m > n ? n : m, nb = LA_QR_BLOCK;
  int64_t e = m * n + M * k + N * k;
  if (driver == LSTSQ_GELS) {
    e += N * N + N + LA_NAME(geqrf_scratch)(M, N, nb) + nb * nb + nb * (k > 1 ? k : 1);
  } else if (driver == LSTSQ_GELSY) {
    const int64_t g = LA_NAME(geqrf_scratch)(n, N, nb), o = nb * nb + nb * (k > 1 ? k : 1);
    e += n * k + 2 * N + n + la_geqp3_scratch(m, n, nb) + 2 * n + m * N + n * N + (g > o ? g : o);
  } else {
    e += N + m * N + N * n + LA_NAME(svd_scratch)(m, n, 0, 1);
  }
  return e;
}

/* a holds A (m >= n) or A^H (m < n), row-major. Returns info (0, or the
 * 1-based index of a zero on R's diagonal). */
static int32_t LA_NAME(gels_one)(const lstsq_job *job, LA_T *a, LA_T *c, LA_T *scratch) {
  const int64_t m = job->m, n = job->n, k = job->k, nb = LA_QR_BLOCK;
  const int64_t M = m > n ? m : n, N = m > n ? n : m;
  LA_T *r = scratch, *tau = r + N * N, *qs = tau + N;
  LA_NAME(geqrf)(a, M, N, tau, nb, qs);
  for (int64_t i = 0; i < N; i++) {
    if (a[i * N + i] == 0) return (int32_t)(i + 1);
    for (int64_t j = 0; j < N; j++) r[i * N + j] = j < i ? 0 : a[i * N + j];
    for (int64_t j = i; j < N; j++) a[i * N + j] = j == i; /* explicit reflectors for ormqr */
  }
  if (m >= n) {
    LA_NAME(ormqr)(a, M, N, tau, /*trans=*/1, c, k, nb, qs); /* c <- Q^H B */
    for (int64_t i = n - 1; i >= 0; i--) /* R X = c[0:n] */
      for (int64_t j = 0; j < k; j++) {
        LA_T v = c[i * k + j];
        for (int64_t p = i + 1; p < n; p++) v -= LA_NAME(mul)(r[i * N + p], c[p * k + j]);
        c[i * k + j] = LA_NAME(div)(v, r[i * N + i]);
      }
    return 0;
  }
  for (int64_t i = 0; i < m; i++) /* R^H Y = B, in place in c's first m rows */
    for (int64_t j = 0; j < k; j++) {
      LA_T v = c[i * k + j];
      for (int64_t p = 0; p < i; p++) v -= LA_NAME(mul)(LA_NAME(conj)(r[p * N + i]), c[p * k + j]);
      c[i * k + j] = LA_NAME(div)(v, LA_NAME(conj)(r[i * N + i]));
    }
  for (int64_t i = m; i < n; i++)
    for (int64_t j = 0; j < k; j++) c[i * k + j] = 0;
  LA_NAME(ormqr)(a, M, N, tau, /*trans=*/0, c, k, nb, qs); /* X = Q [Y; 0] */
  return 0;
}

/* gelsy on a (A column-major: n x m row-major, destroyed) and c (max(m, n)
 * x k, B in its first m rows; X in its first n on return). Returns the
 * effective rank. */
static int64_t LA_NAME(gelsy_one)(const lstsq_job *job, LA_T *a, LA_T *c, LA_T *y, LA_T *scratch) {
  const int64_t m = job->m, n = job->n, k = job->k, N = m < n ? m : n, nb = LA_QR_BLOCK;
  LA_T *tau = scratch, *tau2 = tau + N, *permd = tau2 + N, *qs = permd + n;
  LA_T *ice = qs + la_geqp3_scratch(m, n, nb), *v = ice + 2 * n, *t = v + m * N, *ws = t + n * N;
  int64_t *perm = (int64_t *)permd;
#define R(i, j) a[(j) * m + (i)] /* R[i][j], i <= j; v_j[i] for i > j */
  const double rc = job->rcond < 0 ? (job->eps2) : job->rcond;
#if LA_CPLX
  LA_NAME(qrcp2)(a, m, n, tau, perm, (LA_R *)qs);
  const int64_t r = LA_NAME(ice_rank)(a, 1, m, N, rc, ice);
#else
  la_geqp3(a, m, n, tau, perm, nb, qs);
  const int64_t r = la_ice_rank(a, 1, m, N, rc, ice);
#endif
  if (r == 0) {
    memset(c, 0, (size_t)(n * k) * sizeof(LA_T));
    return 0;
  }
  /* c[0:r] = (Q^H B)[0:r]: only the first r reflectors reach those rows. */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < r; j++) v[i * r + j] = i == j ? 1 : i < j ? 0 : R(i, j);
  LA_NAME(ormqr)(v, m, r, tau, /*trans=*/1, c, k, nb, ws);
  if (r == n) { /* R x = c[0:n], R upper n x n */
    for (int64_t i = n - 1; i >= 0; i--) {
      LA_T *ci = c + i * k;
      for (int64_t p = i + 1; p < n; p++) LA_NAME(axpy_neg)(ci, R(i, p), c + p * k, k);
      const LA_T d = R(i, i);
      for (int64_t j = 0; j < k; j++) ci[j] = LA_NAME(div)(ci[j], d);
    }
  } else { /* [R11 R12]^H = Q2 R2: x' = Q2 [R2^-H c[0:r]; 0] */
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < r; i++) t[j * r + i] = j < i ? 0 : LA_NAME(conj)(R(i, j));
    LA_NAME(geqrf)(t, n, r, tau2, nb, ws);
    for (int64_t i = 0; i < r; i++) { /* R2^H lower: forward substitution */
      LA_T *ci = c + i * k;
      for (int64_t p = 0; p < i; p++) LA_NAME(axpy_neg)(ci, LA_NAME(conj)(t[p * r + i]), c + p * k, k);
      const LA_T d = LA_NAME(conj)(t[i * r + i]);
      for (int64_t j = 0; j < k; j++) ci[j] = LA_NAME(div)(ci[j], d);
    }
    memset(c + r * k, 0, (size_t)((n - r) * k) * sizeof(LA_T));
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = i; j < r; j++) t[i * r + j] = j == i; /* explicit reflectors for ormqr */
    LA_NAME(ormqr)(t, n, r, tau2, /*trans=*/0, c, k, nb, ws);
  }
#undef R
  /* Undo the column permutation: x[perm[i]] = x'[i]. */
  for (int64_t i = 0; i < n; i++) memcpy(y + perm[i] * k, c + i * k, (size_t)k * sizeof(LA_T));
  memcpy(c, y, (size_t)(n * k) * sizeof(LA_T));
  return r;
}

/* Returns the effective rank; s gets the singular values. */
static int64_t LA_NAME(svd_solve_one)(const lstsq_job *job, const LA_T *a, LA_T *c, LA_T *y, LA_R *s,
                                      LA_T *scratch, int64_t *order) {
  const int64_t m = job->m, n = job->n, k = job->k, N = m < n ? m : n;
  LA_T *u = scratch, *vt = u + m * N, *ws = vt + N * n;
  LA_NAME(svd)(a, n, 1, m, n, 0, 1, job->tol, s, u, vt, ws, order);
  const double rc = job->rcond < 0 ? job->eps2 : job->rcond;
  int64_t r = 0;
  while (r < N && s[r] > rc * s[0]) r++;
  for (int64_t i = 0; i < r; i++) /* y = diag(1/s_r) U_r^H B */
    for (int64_t j = 0; j < k; j++) {
      LA_T v = 0;
      for (int64_t p = 0; p < m; p++) v += LA_NAME(mul)(LA_NAME(conj)(u[p * N + i]), c[p * k + j]);
      y[i * k + j] = v / s[i];
    }
  const int residual_rows = m > n && r == n;
  if (residual_rows)
    for (int64_t j = 0; j < k; j++) { /* ||B - U_r U_r^H B|| per column, into row n */
      LA_R ss = 0;
      for (int64_t p = 0; p < m; p++) {
        LA_T v = c[p * k + j];
        for (int64_t i = 0; i < r; i++) v -= LA_NAME(mul)(u[p * N + i], y[i * k + j]) * s[i];
        ss += LA_NAME(lsq_abs2)(v);
      }
      c[n * k + j] = sqrt(ss);
      for (int64_t p = n + 1; p < m; p++) c[p * k + j] = 0;
    }
  for (int64_t i = 0; i < n; i++) /* X = V_r y = Vh_r^H y */
    for (int64_t j = 0; j < k; j++) {
      LA_T v = 0;
      for (int64_t p = 0; p < r; p++) v += LA_NAME(mul)(LA_NAME(conj)(vt[p * n + i]), y[p * k + j]);
      c[i * k + j] = v;
    }
  return r;
}
