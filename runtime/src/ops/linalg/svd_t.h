/* The SVD of one matrix for one element type, included once per type by
 * svd.h (instantiate.h): Householder QR (qr_t.h) then one-sided Jacobi on
 * the columns of R. Used in double and complex128 (both dtypes of a kind
 * compute there) by LINALG_SVD (svd.c) and the SVD-based least-squares
 * drivers. A complex pair is first given a real inner product by a unit
 * phase on its second row, then rotated as a real pair (the plane
 * rotations stay real, the accumulated X unitary). */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if LA_CPLX
static inline LA_R LA_NAME(svd_abs2)(LA_T x) { return __real__ x * __real__ x + __imag__ x * __imag__ x; }
static inline LA_R LA_NAME(svd_absmax)(LA_T x) { return fmax(fabs(__real__ x), fabs(__imag__ x)); }
static inline int LA_NAME(svd_finite)(LA_T x) { return isfinite(__real__ x) && isfinite(__imag__ x); }
#else
static inline LA_R LA_NAME(svd_abs2)(LA_T x) { return x * x; }
static inline LA_R LA_NAME(svd_absmax)(LA_T x) { return fabs(x); }
static inline int LA_NAME(svd_finite)(LA_T x) { return isfinite(x); }
#endif

/* ||w_p||^2, ||w_q||^2 and w_p . conj(w_q) in one pass, four running sums
 * each in a fixed order. */
static inline void LA_NAME(svd_gram)(const LA_T *p, const LA_T *q, int64_t n, LA_R *pp, LA_R *qq, LA_T *pq) {
  LA_R a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
  LA_T g[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int t = 0; t < 4; t++) {
      const LA_T x = p[k + t], y = q[k + t];
      a[t] += LA_NAME(svd_abs2)(x), b[t] += LA_NAME(svd_abs2)(y), g[t] += LA_NAME(mul)(x, LA_NAME(conj)(y));
    }
  for (; k < n; k++) {
    const LA_T x = p[k], y = q[k];
    a[0] += LA_NAME(svd_abs2)(x), b[0] += LA_NAME(svd_abs2)(y), g[0] += LA_NAME(mul)(x, LA_NAME(conj)(y));
  }
  *pp = (a[0] + a[2]) + (a[1] + a[3]);
  *qq = (b[0] + b[2]) + (b[1] + b[3]);
  *pq = (g[0] + g[2]) + (g[1] + g[3]);
}

/* (p, q) <- (c p - s ph q, s p + c ph q) over n entries (ph = 1 when real). */
static inline void LA_NAME(svd_rotate)(LA_T *restrict p, LA_T *restrict q, int64_t n, LA_R c, LA_R s, LA_T ph) {
  for (int64_t k = 0; k < n; k++) {
    const LA_T x = p[k], y = LA_CPLX ? LA_NAME(mul)(ph, q[k]) : q[k];
    p[k] = c * x - s * y;
    q[k] = s * x + c * y;
  }
}

/* w (n rows of length len, row-major) is rotated by cyclic sweeps over
 * the pairs (p, q), p < q, until a sweep finds every pair with
 * |w_p . conj(w_q)| <= tol ||w_p|| ||w_q|| (or a row below LA_SVD_SMALL),
 * at most max_sweeps. Each rotation is the one that makes its pair
 * orthogonal (Hestenes); x (n x n), when given, holds the identity on entry
 * and the same operations on its rows on exit, so that with W0 the input
 * W = X W0 (X orthogonal, or unitary). Returns the sweeps run. */
static inline int LA_NAME(svd_jacobi)(LA_T *w, int64_t n, int64_t len, LA_T *x, double tol, int max_sweeps) {
  int sweep = 0;
  const double small2 = LA_SVD_SMALL * LA_SVD_SMALL;
  for (; sweep < max_sweeps; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p + 1 < n; p++)
      for (int64_t q = p + 1; q < n; q++) {
        LA_T *wp = w + p * len, *wq = w + q * len;
        LA_R a, b;
        LA_T gc;
        LA_NAME(svd_gram)(wp, wq, len, &a, &b, &gc);
        if (!(a > small2 && b > small2)) continue;
#if LA_CPLX
        const double g = hypot(__real__ gc, __imag__ gc);
        const LA_T ph = g > 0 ? LA_CX(__real__ gc / g, __imag__ gc / g) : 1; /* g = |gc|: w_q <- ph w_q */
#else
        const double g = gc;
        const LA_T ph = 1;
#endif
        if (!(fabs(g) > tol * sqrt(a) * sqrt(b))) continue; /* also stops on NaN */
        rotated = 1;
        const double zeta = (b - a) / (2 * g);
        const double t = copysign(1.0, zeta) / (fabs(zeta) + hypot(1.0, zeta));
        const double c = 1 / sqrt(1 + t * t), s = c * t;
        LA_NAME(svd_rotate)(wp, wq, len, c, s, ph);
        if (x) LA_NAME(svd_rotate)(x + p * n, x + q * n, n, c, s, ph);
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
static inline void LA_NAME(svd_complete)(LA_T *u, int64_t n, int64_t r) {
  const double floor_norm = 0.5 / sqrt((double)n);
  for (int64_t j = r; j < n; j++) {
    LA_T *x = u + j * n;
    for (int64_t k = 0; k < n; k++) {
      for (int64_t i = 0; i < n; i++) x[i] = i == k;
      for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < j; i++) {
          const LA_T *v = u + i * n;
          LA_T d = 0;
          for (int64_t e = 0; e < n; e++) d += LA_NAME(mul)(LA_NAME(conj)(v[e]), x[e]);
          for (int64_t e = 0; e < n; e++) x[e] -= LA_NAME(mul)(d, v[e]);
        }
      LA_R nn = 0;
      for (int64_t e = 0; e < n; e++) nn += LA_NAME(svd_abs2)(x[e]);
      nn = sqrt(nn);
      if (nn > floor_norm) {
        for (int64_t e = 0; e < n; e++) x[e] /= nn;
        break;
      }
    }
  }
}

/* Scratch (elements) that la_svd needs for an m x n matrix. */
static inline int64_t LA_NAME(svd_scratch)(int64_t m, int64_t n, int full, int want_uv) {
  const int64_t M = m > n ? m : n, N = m > n ? n : m, nb = LA_QR_BLOCK, ucols = full ? M : N;
  int64_t e = M * N + N + LA_NAME(geqrf_scratch)(M, N, nb) + 2 * N * N + N;
  if (want_uv) e += N * N + M * ucols + nb * nb + nb * (ucols > 1 ? ucols : 1);
  return e;
}

/* A = U diag(s) Vh for a (m x n, element (i, j) at a[i * rs + j * cs]),
 * k = min(m, n), M = max(m, n), N = k:
 *   1. B = A (m >= n) or A^T (m < n), M x N, scaled by a power of two so
 *      that its largest |part| is in [0.5, 1) (no overflow or underflow in
 *      the squared norms; undone on s);
 *   2. B = Q R by Householder QR when M > N (R = B when square);
 *   3. one-sided Jacobi on the rows of R^T (the columns of R):
 *      X R^T = diag(s) U_R^T, X unitary, accumulated when want_uv, so that
 *      R = U_R diag(s) conj(X);
 *   4. s = the rotated rows' norms, sorted descending (stable); U_R's
 *      columns are the rotated rows over their norms, completed to an
 *      orthonormal basis where a norm is 0;
 *   5. U_B = Q [U_R 0; 0 I] (ormqr), its first N columns unless full, and
 *      Vh_B = the rows of conj(X) in the order of s;
 * then U = U_B, Vh = Vh_B (m >= n) or U = Vh_B^T, Vh = U_B^T (m < n).
 * u is m x (full ? m : k) and vt (full ? n : k) x n, row-major, written
 * only when want_uv. Returns 0 (and NaN results) for a non-finite A. */
static inline int LA_NAME(svd)(const LA_T *a, int64_t rs, int64_t cs, int64_t m, int64_t n, int full, int want_uv,
                               double tol, LA_R *s, LA_T *u, LA_T *vt, LA_T *scratch, int64_t *order) {
  const int64_t nb = LA_QR_BLOCK;
  const int trans = m < n;
  const int64_t M = trans ? n : m, N = trans ? m : n, ucols = full ? M : N;
  LA_T *b = scratch, *tau = b + M * N, *qs = tau + N, *w = qs + LA_NAME(geqrf_scratch)(M, N, nb);
  LA_T *x = w + N * N, *sigs = x + N * N, *ut = sigs + N, *c = ut + N * N, *os = c + M * ucols;
  LA_R *sig = (LA_R *)sigs;
  const int64_t brs = trans ? cs : rs, bcs = trans ? rs : cs;
  double amax = 0;
  int finite = 1;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const LA_T v = a[i * brs + j * bcs];
      b[i * N + j] = v;
      if (!LA_NAME(svd_finite)(v)) finite = 0;
      else amax = fmax(amax, LA_NAME(svd_absmax)(v));
    }
  int ex = 0;
  if (amax > 0) frexp(amax, &ex); /* amax = f 2^ex, f in [0.5, 1) */
  const LA_R scale = ldexp(1.0, -ex), unscale = ldexp(1.0, ex);
  for (int64_t i = 0; i < M * N; i++) b[i] *= scale;

  /* R^T into w; Q's reflectors stay in b. */
  if (M > N && finite) LA_NAME(geqrf)(b, M, N, tau, nb, qs);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < N; j++) w[i * N + j] = (M > N && j > i) ? 0 : b[j * N + i];
  if (want_uv)
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++) x[i * N + j] = i == j;
  if (finite) LA_NAME(svd_jacobi)(w, N, N, want_uv ? x : NULL, tol, 60);

  for (int64_t i = 0; i < N; i++) {
    LA_R ss = 0;
    for (int64_t k = 0; k < N; k++) ss += LA_NAME(svd_abs2)(w[i * N + k]);
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
    const LA_R sj = sig[order[j]];
    const LA_T *src = w + order[j] * N;
    if (!finite) {
      for (int64_t k = 0; k < N; k++) ut[j * N + k] = NAN;
      r++;
    } else if (sj >= LA_SVD_SMALL) {
      for (int64_t k = 0; k < N; k++) ut[j * N + k] = src[k] / sj;
      r++;
    }
  }
  if (finite) LA_NAME(svd_complete)(ut, N, r);

  /* U_B = Q [U_R 0; 0 I] (M x ucols). */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < ucols; j++) c[i * ucols + j] = (i < N && j < N) ? ut[j * N + i] : (LA_T)(i == j);
  if (M > N && finite) {
    for (int64_t i = 0; i < N; i++) /* reflectors with their unit diagonal and zeros above */
      for (int64_t j = i; j < N; j++) b[i * N + j] = j == i;
    LA_NAME(ormqr)(b, M, N, tau, /*trans=*/0, c, ucols, nb, os);
  }
  if (!trans) {
    memcpy(u, c, (size_t)(M * ucols) * sizeof(LA_T)); /* U = U_B */
    for (int64_t i = 0; i < N; i++)                    /* Vh_B = conj(X) */
      for (int64_t j = 0; j < N; j++) vt[i * N + j] = LA_NAME(conj)(x[order[i] * N + j]);
  } else {
    for (int64_t i = 0; i < N; i++) /* U = Vh_B^T (m x m) */
      for (int64_t j = 0; j < N; j++) u[i * N + j] = LA_NAME(conj)(x[order[j] * N + i]);
    for (int64_t i = 0; i < ucols; i++) /* Vh = U_B^T (ucols x n) */
      for (int64_t j = 0; j < M; j++) vt[i * M + j] = c[j * ucols + i];
  }
  return finite;
}
