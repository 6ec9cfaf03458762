/* The SVD of one matrix in double scratch (both dtypes compute in double):
 * Householder QR (qr_t.h) then one-sided Jacobi on the columns of R. Used
 * by LINALG_SVD (svd.c) and the SVD-based least-squares drivers. */
#ifndef NEURONRT_OPS_LINALG_SVD_T_H
#define NEURONRT_OPS_LINALG_SVD_T_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ops/linalg/qr.h"

/* Norms below this (the matrix is scaled so that its largest |a| is in
 * [0.5, 1)) are taken as exact zeros: such rows are not rotated, and their
 * left singular vectors are completed to an orthonormal basis instead. */
#define LA_SVD_SMALL 1e-140

/* ||w_p||^2, ||w_q||^2 and w_p . w_q in one pass, four running sums each
 * in a fixed order. */
static inline void la_svd_gram(const double *p, const double *q, int64_t n, double *pp, double *qq,
                               double *pq) {
  double a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0}, g[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int t = 0; t < 4; t++) {
      const double x = p[k + t], y = q[k + t];
      a[t] += x * x, b[t] += y * y, g[t] += x * y;
    }
  for (; k < n; k++) {
    const double x = p[k], y = q[k];
    a[0] += x * x, b[0] += y * y, g[0] += x * y;
  }
  *pp = (a[0] + a[2]) + (a[1] + a[3]);
  *qq = (b[0] + b[2]) + (b[1] + b[3]);
  *pq = (g[0] + g[2]) + (g[1] + g[3]);
}

/* (p, q) <- (c p - s q, s p + c q) over n entries. */
static inline void la_svd_rotate(double *restrict p, double *restrict q, int64_t n, double c, double s) {
  for (int64_t k = 0; k < n; k++) {
    const double x = p[k], y = q[k];
    p[k] = c * x - s * y;
    q[k] = s * x + c * y;
  }
}

/* w (n rows of length len, row-major) is rotated by cyclic sweeps over
 * the pairs (p, q), p < q, until a sweep finds every pair with
 * |w_p . w_q| <= tol ||w_p|| ||w_q|| (or a row below LA_SVD_SMALL), at most
 * max_sweeps. Each rotation is the one that makes its pair orthogonal
 * (Hestenes); x (n x n), when given, holds the identity on entry and the
 * same rotations of its rows on exit, so that with W0 the input
 * W = X W0 (X orthogonal). Returns the sweeps run. */
static inline int la_svd_jacobi(double *w, int64_t n, int64_t len, double *x, double tol, int max_sweeps) {
  int sweep = 0;
  const double small2 = LA_SVD_SMALL * LA_SVD_SMALL;
  for (; sweep < max_sweeps; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p + 1 < n; p++)
      for (int64_t q = p + 1; q < n; q++) {
        double *wp = w + p * len, *wq = w + q * len;
        double a, b, g;
        la_svd_gram(wp, wq, len, &a, &b, &g);
        if (!(a > small2 && b > small2)) continue;
        if (!(fabs(g) > tol * sqrt(a) * sqrt(b))) continue; /* also stops on NaN */
        rotated = 1;
        const double zeta = (b - a) / (2 * g);
        const double t = copysign(1.0, zeta) / (fabs(zeta) + hypot(1.0, zeta));
        const double c = 1 / sqrt(1 + t * t), s = c * t;
        la_svd_rotate(wp, wq, len, c, s);
        if (x) la_svd_rotate(x + p * n, x + q * n, n, c, s);
      }
    if (!rotated) break;
  }
  return sweep;
}

/* Rows [r, n) of u (n x n, row-major; rows [0, r) orthonormal) are set to
 * complete an orthonormal basis: each is the first unit vector e_k whose
 * part orthogonal to the rows before it has norm above 0.5 / sqrt(n) (one
 * always has: the squares of those norms sum to at least 1),
 * orthogonalised twice and normalised. */
static inline void la_svd_complete(double *u, int64_t n, int64_t r) {
  const double floor_norm = 0.5 / sqrt((double)n);
  for (int64_t j = r; j < n; j++) {
    double *x = u + j * n;
    for (int64_t k = 0; k < n; k++) {
      for (int64_t i = 0; i < n; i++) x[i] = i == k;
      for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < j; i++) {
          const double *v = u + i * n;
          double d = 0;
          for (int64_t e = 0; e < n; e++) d += v[e] * x[e];
          for (int64_t e = 0; e < n; e++) x[e] -= d * v[e];
        }
      double nn = 0;
      for (int64_t e = 0; e < n; e++) nn += x[e] * x[e];
      nn = sqrt(nn);
      if (nn > floor_norm) {
        for (int64_t e = 0; e < n; e++) x[e] /= nn;
        break;
      }
    }
  }
}

/* Scratch (doubles) that la_svd needs for an m x n matrix. */
static inline int64_t la_svd_scratch(int64_t m, int64_t n, int full, int want_uv) {
  const int64_t M = m > n ? m : n, N = m > n ? n : m, nb = LA_QR_BLOCK, ucols = full ? M : N;
  int64_t e = M * N + N + la_geqrf_scratch_f64(M, N, nb) + 2 * N * N + N;
  if (want_uv) e += N * N + M * ucols + nb * nb + nb * (ucols > 1 ? ucols : 1);
  return e;
}

/* A = U diag(s) Vt for a (m x n, element (i, j) at a[i * rs + j * cs]),
 * k = min(m, n), M = max(m, n), N = k:
 *   1. B = A (m >= n) or A^T (m < n), M x N, scaled by a power of two so
 *      that its largest |b| is in [0.5, 1) (no overflow or underflow in the
 *      squared norms; undone on s);
 *   2. B = Q R by Householder QR when M > N (R = B when square);
 *   3. one-sided Jacobi on the rows of R^T (the columns of R):
 *      R X^T = U_R diag(s), X orthogonal, accumulated when want_uv;
 *   4. s = the rotated columns' norms, sorted descending (stable); U_R's
 *      columns are the rotated columns over their norms, completed to an
 *      orthonormal basis where a norm is 0;
 *   5. U_B = Q [U_R 0; 0 I] (ormqr), its first N columns unless full, and
 *      V_B^T = the rows of X in the order of s;
 * then U = U_B, Vt = V_B^T (m >= n) or U = V_B, Vt = U_B^T (m < n).
 * u is m x (full ? m : k) and vt (full ? n : k) x n, row-major, written
 * only when want_uv. Returns 0 (and NaN results) for a non-finite A. */
static inline int la_svd(const double *a, int64_t rs, int64_t cs, int64_t m, int64_t n, int full, int want_uv,
                         double tol, double *s, double *u, double *vt, double *scratch, int64_t *order) {
  const int64_t nb = LA_QR_BLOCK;
  const int trans = m < n;
  const int64_t M = trans ? n : m, N = trans ? m : n, ucols = full ? M : N;
  double *b = scratch, *tau = b + M * N, *qs = tau + N, *w = qs + la_geqrf_scratch_f64(M, N, nb);
  double *x = w + N * N, *sig = x + N * N, *ut = sig + N, *c = ut + N * N, *os = c + M * ucols;
  const int64_t brs = trans ? cs : rs, bcs = trans ? rs : cs;
  double amax = 0;
  int finite = 1;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const double v = a[i * brs + j * bcs];
      b[i * N + j] = v;
      if (!isfinite(v)) finite = 0;
      else if (fabs(v) > amax) amax = fabs(v);
    }
  int ex = 0;
  if (amax > 0) frexp(amax, &ex); /* amax = f 2^ex, f in [0.5, 1) */
  const double scale = ldexp(1.0, -ex), unscale = ldexp(1.0, ex);
  for (int64_t i = 0; i < M * N; i++) b[i] *= scale;

  /* R^T into w; Q's reflectors stay in b. */
  if (M > N && finite) la_geqrf_f64(b, M, N, tau, nb, qs);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < N; j++) w[i * N + j] = (M > N && j > i) ? 0 : b[j * N + i];
  if (want_uv)
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++) x[i * N + j] = i == j;
  if (finite) la_svd_jacobi(w, N, N, want_uv ? x : NULL, tol, 60);

  for (int64_t i = 0; i < N; i++) {
    double ss = 0;
    for (int64_t k = 0; k < N; k++) ss += w[i * N + k] * w[i * N + k];
    sig[i] = finite ? sqrt(ss) : NAN;
    order[i] = i;
  }
  for (int64_t i = 1; i < N; i++) { /* insertion sort: stable, descending */
    const int64_t o = order[i];
    int64_t j = i;
    for (; j > 0 && sig[order[j - 1]] < sig[o]; j--) order[j] = order[j - 1];
    order[j] = o;
  }
  for (int64_t j = 0; j < N; j++) s[j] = sig[order[j]] * unscale;
  if (!want_uv) return finite;

  /* Rows of ut are U_R's columns; the zero ones are completed. */
  int64_t r = 0;
  for (int64_t j = 0; j < N; j++) {
    const double sj = sig[order[j]];
    const double *src = w + order[j] * N;
    if (!finite) {
      for (int64_t k = 0; k < N; k++) ut[j * N + k] = NAN;
      r++;
    } else if (sj >= LA_SVD_SMALL) {
      for (int64_t k = 0; k < N; k++) ut[j * N + k] = src[k] / sj;
      r++;
    }
  }
  if (finite) la_svd_complete(ut, N, r);

  /* U_B = Q [U_R 0; 0 I] (M x ucols). */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < ucols; j++) c[i * ucols + j] = (i < N && j < N) ? ut[j * N + i] : (double)(i == j);
  if (M > N && finite) {
    for (int64_t i = 0; i < N; i++) /* reflectors with their unit diagonal and zeros above */
      for (int64_t j = i; j < N; j++) b[i * N + j] = j == i;
    la_ormqr_f64(b, M, N, tau, /*trans=*/0, c, ucols, nb, os);
  }
  if (!trans) {
    memcpy(u, c, (size_t)(M * ucols) * sizeof(double));                        /* U = U_B */
    for (int64_t i = 0; i < N; i++) memcpy(vt + i * N, x + order[i] * N, (size_t)N * sizeof(double)); /* V_B^T */
  } else {
    for (int64_t i = 0; i < N; i++) /* U = V_B (m x m) */
      for (int64_t j = 0; j < N; j++) u[i * N + j] = x[order[j] * N + i];
    for (int64_t i = 0; i < ucols; i++) /* Vt = U_B^T (ucols x n) */
      for (int64_t j = 0; j < M; j++) vt[i * M + j] = c[j * ucols + i];
  }
  return finite;
}

/* The tolerance of the Jacobi sweeps for results of dtype eps `eps` and
 * order-N rotations (LAPACK's gesvj uses sqrt(M) eps). */
static inline double la_svd_tol(double eps, int64_t n) { return eps * (n > 1 ? sqrt((double)n) : 1.0); }

#endif
