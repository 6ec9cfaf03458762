/* Householder QR routines for one element type, included once per type
 * (see qr.h) with LA_T, LA_R, LA_CPLX, LA_DTYPE and LA_NAME(x) defined as
 * for dense_t.h (whose mul and conj of the same type this uses). Complex
 * reflectors are LAPACK's (zlarfg: H = I - tau v v^H, tau complex, beta
 * real) and run unblocked: the compact WY blocks and their GEMMs are real
 * only.
 * Matrices are row-major scratch; a reflector H = I - tau v v^T is applied
 * from the left as w = v^T C (row by row, so every inner loop runs along a
 * contiguous row) followed by C -= tau v w^T. Blocks of reflectors use the
 * compact WY form H_0 ... H_{b-1} = I - V T V^T (T upper triangular), whose
 * products are GEMMs. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ops/gemm/gemm.h"

/* ||x|| for x[0..len) at stride s, without overflow or underflow in the
 * squares: float32 sums in double; float64 scales when the largest |x| is
 * far from 1. */
#if LA_CPLX
static inline LA_R LA_NAME(norm2)(const LA_T *x, int64_t len, int64_t s) {
  double big = 0;
  for (int64_t i = 0; i < len; i++)
    big = fmax(big, fmax(fabs((double)__real__ x[i * s]), fabs((double)__imag__ x[i * s])));
  if (big == 0 || isnan(big) || isinf(big)) return (LA_R)big;
  const double inv = sizeof(LA_R) == sizeof(float) || (big > 1e-140 && big < 1e140) ? 1.0 : 1.0 / big;
  double acc = 0;
  for (int64_t i = 0; i < len; i++) {
    const double re = (double)__real__ x[i * s] * inv, im = (double)__imag__ x[i * s] * inv;
    acc += re * re + im * im;
  }
  return (LA_R)(inv == 1.0 ? sqrt(acc) : big * sqrt(acc));
}
#else
static inline LA_T LA_NAME(norm2)(const LA_T *x, int64_t len, int64_t s) {
  if (sizeof(LA_T) == sizeof(float)) {
    double acc = 0;
    for (int64_t i = 0; i < len; i++) acc += (double)x[i * s] * (double)x[i * s];
    return (LA_T)sqrt(acc);
  }
  double big = 0;
  for (int64_t i = 0; i < len; i++) big = fmax(big, fabs((double)x[i * s]));
  if (big == 0 || isnan(big) || isinf(big)) return (LA_T)big;
  if (big > 1e-140 && big < 1e140) {
    double acc = 0;
    for (int64_t i = 0; i < len; i++) acc += (double)x[i * s] * (double)x[i * s];
    return (LA_T)sqrt(acc);
  }
  const double inv = 1.0 / big;
  double acc = 0;
  for (int64_t i = 0; i < len; i++) {
    const double t = (double)x[i * s] * inv;
    acc += t * t;
  }
  return (LA_T)(big * sqrt(acc));
}
#endif

/* Chooses the reflector that maps (alpha, x) to (beta, 0): on exit *alpha
 * is beta = -sign(alpha) ||(alpha, x)||, x[0..len) (stride s) holds v below
 * its leading 1, and the return is tau. No reflection (tau 0) when x is 0. */
static inline LA_T LA_NAME(reflector)(LA_T *alpha, LA_T *x, int64_t len, int64_t s) {
#if LA_CPLX /* also reflects a lone complex alpha, so that beta (R's diagonal) is real */
  const LA_R xnorm = LA_NAME(norm2)(x, len, s);
  const LA_T a = *alpha;
  const LA_R ar = __real__ a, ai = __imag__ a;
  if (xnorm == 0 && ai == 0) return 0;
  LA_R beta = (LA_R)hypot(hypot((double)ar, (double)ai), (double)xnorm);
  if (!signbit(ar)) beta = -beta;
  const LA_T tau = LA_CX((beta - ar) / beta, -ai / beta);
  const LA_T scale = LA_NAME(div)(1, a - beta);
  for (int64_t i = 0; i < len; i++) x[i * s] = LA_NAME(mul)(x[i * s], scale);
  *alpha = beta;
  return tau;
#else
  const LA_T xnorm = LA_NAME(norm2)(x, len, s);
  if (xnorm == 0) return 0;
  const LA_T a = *alpha;
  LA_T beta = (LA_T)hypot((double)a, (double)xnorm);
  if (!signbit(a)) beta = -beta; /* Fortran SIGN: -0 counts as negative */
  const LA_T tau = (beta - a) / beta;
  const LA_T scale = (LA_T)1 / (a - beta);
  for (int64_t i = 0; i < len; i++) x[i * s] *= scale;
  *alpha = beta;
  return tau;
#endif
}

/* C (rows x cols, row stride ldc) = (I - tau v v^H) C, with v[0] = 1 (not
 * read) and v[1..rows) at stride vs. w is scratch for cols values. */
static inline void LA_NAME(apply_reflector)(const LA_T *v, int64_t vs, LA_T tau, LA_T *c, int64_t rows,
                                            int64_t cols, int64_t ldc, LA_T *w) {
  if (tau == 0 || cols == 0) return;
  memcpy(w, c, (size_t)cols * sizeof(LA_T));
  for (int64_t i = 1; i < rows; i++) {
    const LA_T vi = LA_NAME(conj)(v[i * vs]);
    if (vi == 0) continue;
    const LA_T *ci = c + i * ldc;
    for (int64_t j = 0; j < cols; j++) w[j] += LA_NAME(mul)(vi, ci[j]);
  }
  for (int64_t j = 0; j < cols; j++) c[j] -= LA_NAME(mul)(tau, w[j]);
  for (int64_t i = 1; i < rows; i++) {
    const LA_T f = LA_NAME(mul)(tau, v[i * vs]);
    if (f == 0) continue;
    LA_T *ci = c + i * ldc;
    for (int64_t j = 0; j < cols; j++) ci[j] -= LA_NAME(mul)(f, w[j]);
  }
}

/* Unblocked Householder QR of columns [c0, c1) of a (m x n, row-major):
 * each reflector is applied to the columns after it up to column `apply_end`. */
static inline void LA_NAME(geqr2)(LA_T *a, int64_t m, int64_t n, int64_t c0, int64_t c1,
                                  int64_t apply_end, LA_T *tau, LA_T *w) {
  for (int64_t k = c0; k < c1 && k < m; k++) {
    LA_T *akk = a + k * n + k;
    tau[k] = LA_NAME(reflector)(akk, akk + n, m - k - 1, n);
    /* H^H applied, as LAPACK's geqr2 (the same H for real) */
    LA_NAME(apply_reflector)(akk, n, LA_NAME(conj)(tau[k]), akk + 1, m - k, apply_end - k - 1, n, w);
  }
}

#if !LA_CPLX
/* T (b x b, row-major, upper) of the compact WY form of H_0 ... H_{b-1},
 * reflectors in the columns of V (rows x b, row stride ldv, unit diagonal
 * and zeros above stored explicitly). */
static inline void LA_NAME(larft)(const LA_T *v, int64_t ldv, int64_t rows, int64_t b, const LA_T *tau,
                                  LA_T *t) {
  memset(t, 0, (size_t)(b * b) * sizeof(LA_T));
  for (int64_t i = 0; i < b; i++) {
    t[i * b + i] = tau[i];
    if (tau[i] == 0 || i == 0) continue;
    /* z = -tau_i V[:, 0:i]^T v_i, in column i of T; v_i is 0 above row i. */
    for (int64_t j = 0; j < i; j++) t[j * b + i] = 0;
    for (int64_t r = i; r < rows; r++) {
      const LA_T vri = v[r * ldv + i];
      if (vri == 0) continue;
      for (int64_t j = 0; j < i; j++) t[j * b + i] += v[r * ldv + j] * vri;
    }
    for (int64_t j = 0; j < i; j++) t[j * b + i] *= -tau[i];
    /* T[0:i, i] = T[0:i, 0:i] z, upper triangular, top row first. */
    for (int64_t j = 0; j < i; j++) {
      LA_T s = 0;
      for (int64_t p = j; p < i; p++) s += t[j * b + p] * t[p * b + i];
      t[j * b + i] = s;
    }
  }
}

/* c = alpha * a b + beta * c (m x n, k inner), a at element strides
 * (ars, acs), b and c with contiguous rows (row strides ldb, ldc): the
 * runtime's GEMM for large products (falling back to loops if it cannot
 * get memory), plain loops for small ones. beta is 0 or 1. */
static inline void LA_NAME(gemm)(int64_t m, int64_t n, int64_t k, LA_T alpha, const LA_T *a, int64_t ars,
                                 int64_t acs, const LA_T *b, int64_t ldb, LA_T beta, LA_T *c, int64_t ldc) {
  if ((double)m * (double)n * (double)k >= 65536.0) {
    rt_gemm_args g;
    memset(&g, 0, sizeof g);
    g.batch = 1, g.m = m, g.n = n, g.k = k, g.kslices = 1;
    g.ab_dtype = g.c_dtype = LA_DTYPE;
    g.a = a, g.a_rs = ars, g.a_cs = acs;
    g.b = b, g.b_rs = ldb, g.b_cs = 1;
    g.c = c, g.c_rs = ldc, g.c_cs = 1;
    g.cin = beta != 0 ? c : NULL, g.cin_rs = ldc, g.cin_cs = 1;
    g.alpha = alpha, g.beta = beta;
    if (rt_gemm(&g) == NRT_SUCCESS) return;
  }
  for (int64_t i = 0; i < m; i++) {
    LA_T *ci = c + i * ldc;
    if (beta == 0) memset(ci, 0, (size_t)n * sizeof(LA_T));
    for (int64_t p = 0; p < k; p++) {
      const LA_T f = alpha * a[i * ars + p * acs];
      if (f == 0) continue;
      const LA_T *bp = b + p * ldb;
      for (int64_t j = 0; j < n; j++) ci[j] += f * bp[j];
    }
  }
}

/* C (rows x cols, row stride ldc) = (I - V T V^T) C, or with T^T when
 * trans (that is Q C or Q^T C for Q = H_0 ... H_{b-1}); V as for larft,
 * w scratch for b x cols values. */
static inline void LA_NAME(larfb)(const LA_T *v, int64_t ldv, const LA_T *t, int64_t b, int trans, LA_T *c,
                                  int64_t rows, int64_t cols, int64_t ldc, LA_T *w) {
  if (cols == 0 || b == 0) return;
  /* W = V^T C */
  LA_NAME(gemm)(b, cols, rows, 1, v, 1, ldv, c, ldc, 0, w, cols);
  /* W = T W (upper: rows top down) or T^T W (lower: rows bottom up), in place. */
  if (!trans) {
    for (int64_t i = 0; i < b; i++) {
      LA_T *wi = w + i * cols;
      const LA_T d = t[i * b + i];
      for (int64_t j = 0; j < cols; j++) wi[j] *= d;
      for (int64_t p = i + 1; p < b; p++) {
        const LA_T f = t[i * b + p];
        if (f == 0) continue;
        const LA_T *wp = w + p * cols;
        for (int64_t j = 0; j < cols; j++) wi[j] += f * wp[j];
      }
    }
  } else {
    for (int64_t i = b - 1; i >= 0; i--) {
      LA_T *wi = w + i * cols;
      const LA_T d = t[i * b + i];
      for (int64_t j = 0; j < cols; j++) wi[j] *= d;
      for (int64_t p = 0; p < i; p++) {
        const LA_T f = t[p * b + i];
        if (f == 0) continue;
        const LA_T *wp = w + p * cols;
        for (int64_t j = 0; j < cols; j++) wi[j] += f * wp[j];
      }
    }
  }
  /* C -= V W */
  LA_NAME(gemm)(rows, cols, b, -1, v, ldv, 1, w, cols, 1, c, ldc);
}

#endif

/* Scratch (in elements) that geqrf needs for an m x n matrix besides a and
 * tau: the panel's V, its T and the product workspace. */
static inline int64_t LA_NAME(geqrf_scratch)(int64_t m, int64_t n, int64_t nb) {
  return m * nb + nb * nb + nb * (n > 1 ? n : 1) + n + 1;
}

/* A = Q R in place on a (m x n, row-major), writing tau[0..min(m, n)):
 * blocks of nb columns are factored unblocked, then applied to the
 * trailing columns as one block reflector when that is large enough. */
static inline void LA_NAME(geqrf)(LA_T *a, int64_t m, int64_t n, LA_T *tau, int64_t nb, LA_T *scratch) {
  const int64_t kmax = m < n ? m : n;
  LA_T *v = scratch, *t = v + m * nb, *w = t + nb * nb;
  for (int64_t k0 = 0; k0 < kmax; k0 += nb) {
    const int64_t kb = kmax - k0 < nb ? kmax - k0 : nb, j0 = k0 + kb, rows = m - k0;
    const int blocked = !LA_CPLX && n - j0 > 0 && (double)rows * (double)(n - j0) * (double)kb >= 65536.0;
    LA_NAME(geqr2)(a, m, n, k0, j0, blocked ? j0 : n, tau, w);
    if (!blocked) continue;
#if !LA_CPLX
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < kb; j++)
        v[r * kb + j] = r == j ? 1 : r < j ? 0 : a[(k0 + r) * n + k0 + j];
    LA_NAME(larft)(v, kb, rows, kb, tau + k0, t);
    LA_NAME(larfb)(v, kb, t, kb, /*trans=*/1, a + k0 * n + j0, rows, n - j0, n, w);
#else
    (void)v, (void)t;
#endif
  }
}

/* C (m x cols, row-major) = Q C or Q^H C, Q = H_0 ... H_{k-1} with the
 * reflectors in the columns of v (m x k, row-major, unit diagonal and zeros
 * above stored explicitly). Blocks of nb reflectors at a time; scratch
 * holds nb * nb + nb * cols elements. */
static inline void LA_NAME(ormqr)(const LA_T *v, int64_t m, int64_t k, const LA_T *tau, int trans, LA_T *c,
                                  int64_t cols, int64_t nb, LA_T *scratch) {
  LA_T *t = scratch, *w = t + nb * nb;
  const int64_t nblocks = (k + nb - 1) / nb;
  for (int64_t s = 0; s < nblocks; s++) {
    /* Q C applies the last block first; Q^T C the first. */
    const int64_t blk = trans ? s : nblocks - 1 - s;
    const int64_t k0 = blk * nb, kb = k - k0 < nb ? k - k0 : nb, rows = m - k0;
    const LA_T *vb = v + k0 * k + k0;
    if (LA_CPLX || (double)rows * (double)cols * (double)kb < 65536.0 || kb == 1) {
      for (int64_t q = 0; q < kb; q++) {
        const int64_t j = trans ? q : kb - 1 - q;
        const LA_T tj = trans ? LA_NAME(conj)(tau[k0 + j]) : tau[k0 + j]; /* H^H for Q^H */
        LA_NAME(apply_reflector)(vb + j * k + j, k, tj, c + (k0 + j) * cols, rows - j, cols, cols, w);
      }
      continue;
    }
#if !LA_CPLX
    LA_NAME(larft)(vb, k, rows, kb, tau + k0, t);
    LA_NAME(larfb)(vb, k, t, kb, trans, c + k0 * cols, rows, cols, cols, w);
#else
    (void)t;
#endif
  }
}
