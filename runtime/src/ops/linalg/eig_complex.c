/* la_eig_complex (eig.h): a complex matrix's eigenpairs by unitary
 * Hessenberg reduction, single-shift QR to triangular Schur form and back
 * substitution. */
#include <float.h>
#include <math.h>
#include <string.h>
#include "ops/linalg/dense.h"
#include "ops/linalg/eig.h"

#define EPS DBL_EPSILON
#define BIG 1e100 /* back substitution rescales the vector above this */

typedef double _Complex cplx;

/* Products spelt out on the parts (dense_t.h): C's operator checks each
 * for NaN through a library call. */
#define MUL la_mul_c128
#define CONJ la_conj_c128

static double abs1(cplx x) { return fabs(creal(x)) + fabs(cimag(x)); }

/* a <- Q^H a Q upper Hessenberg by reflectors H_k = I - beta u u^H that
 * map column k below the diagonal onto (alpha, 0, ...), alpha of the phase
 * opposite to its first entry's; z <- Q = H_0 H_1 ... when not NULL. u and
 * s are scratch of n entries. */
static void hessenberg(cplx *a, int64_t n, cplx *z, cplx *u, cplx *s) {
  if (z)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) z[i * n + j] = i == j;
  for (int64_t k = 0; k + 2 < n; k++) {
    double tail = 0;
    for (int64_t i = k + 2; i < n; i++) tail += creal(a[i * n + k] * conj(a[i * n + k]));
    if (tail == 0) continue;
    const cplx x0 = a[(k + 1) * n + k];
    const double ax0 = cabs(x0), norm = sqrt(ax0 * ax0 + tail);
    const cplx phase = ax0 > 0 ? x0 / ax0 : 1, alpha = -phase * norm;
    u[k + 1] = phase * (ax0 + norm);
    for (int64_t i = k + 2; i < n; i++) u[i] = a[i * n + k];
    const double beta = 2.0 / ((ax0 + norm) * (ax0 + norm) + tail);
    memset(s, 0, (size_t)n * sizeof(cplx));
    for (int64_t i = k + 1; i < n; i++) /* s = u^H A, rows k+1.. */
      for (int64_t j = k + 1; j < n; j++) s[j] += MUL(CONJ(u[i]), a[i * n + j]);
    for (int64_t i = k + 1; i < n; i++) {
      const cplx f = beta * u[i];
      for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= MUL(f, s[j]);
    }
    a[(k + 1) * n + k] = alpha;
    for (int64_t i = k + 2; i < n; i++) a[i * n + k] = 0;
    for (cplx *m = a; m; m = m == a ? z : NULL) /* m <- m H_k */
      for (int64_t r = 0; r < n; r++) {
        cplx *row = m + r * n, dot = 0;
        for (int64_t j = k + 1; j < n; j++) dot += MUL(row[j], u[j]);
        dot *= beta;
        for (int64_t j = k + 1; j < n; j++) row[j] -= MUL(dot, CONJ(u[j]));
      }
  }
}

/* The rotation G = [c s; -conj(s) c] (c real) with G [f; g] = [r; 0]. */
static void givens(cplx f, cplx g, double *c, cplx *s) {
  const double af = cabs(f), ag = cabs(g);
  if (ag == 0) {
    *c = 1, *s = 0;
  } else if (af == 0) {
    *c = 0, *s = conj(g) / ag;
  } else {
    const double d = hypot(af, ag);
    *c = af / d;
    *s = (f / af) * conj(g) / d;
  }
}

/* Single-shift QR iterations on the Hessenberg h down to triangular form
 * (all of h and z when z is not NULL, so that h = z^H A z). Returns 0 or 1 +
 * the row whose eigenvalue did not converge. */
static int schur(cplx *h, int64_t n, cplx *z, cplx *w) {
  const int full = z != NULL;
  double anorm = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i > 0 ? i - 1 : 0; j < n; j++) anorm += abs1(h[i * n + j]);
  const int64_t maxit = la_eig_max_iterations(n);
  int64_t hi = n - 1, its = 0;
  while (hi >= 0) {
    int64_t l = hi;
    for (; l > 0; l--) {
      double s = abs1(h[(l - 1) * n + l - 1]) + abs1(h[l * n + l]);
      if (s == 0) s = anorm;
      if (abs1(h[l * n + l - 1]) <= EPS * s || abs1(h[l * n + l - 1]) < DBL_MIN) {
        h[l * n + l - 1] = 0;
        break;
      }
    }
    if (l == hi) {
      w[hi] = h[hi * n + hi];
      hi--, its = 0;
      continue;
    }
    if (its >= maxit) return (int)(hi + 1);
    its++;
    /* Wilkinson's shift: the trailing 2x2 block's eigenvalue nearer its
     * last diagonal entry; every tenth iteration an exceptional one. */
    const cplx d = h[hi * n + hi];
    cplx mu;
    if (its % 10 == 0) {
      mu = d + 0.75 * abs1(h[hi * n + hi - 1]);
    } else {
      const cplx a = h[(hi - 1) * n + hi - 1], b = h[(hi - 1) * n + hi], c = h[hi * n + hi - 1];
      const cplx half = 0.5 * (a - d), disc = csqrt(half * half + b * c);
      const cplx e1 = half + disc, e2 = half - disc;
      mu = d + (cabs(e1) < cabs(e2) ? e1 : e2);
    }
    cplx f = h[l * n + l] - mu, g = h[(l + 1) * n + l];
    for (int64_t k = l; k < hi; k++) {
      if (k > l) f = h[k * n + k - 1], g = h[(k + 1) * n + k - 1];
      double c;
      cplx s;
      givens(f, g, &c, &s);
      for (int64_t j = k > l ? k - 1 : l, last = full ? n - 1 : hi; j <= last; j++) {
        const cplx x = h[k * n + j], y = h[(k + 1) * n + j];
        h[k * n + j] = c * x + MUL(s, y);
        h[(k + 1) * n + j] = c * y - MUL(CONJ(s), x);
      }
      if (k > l) h[(k + 1) * n + k - 1] = 0;
      for (cplx *m = h; m; m = m == h ? z : NULL) /* columns k, k+1 <- G^H from the right */
        for (int64_t i = full ? 0 : l, last = m == h ? (k + 2 < hi ? k + 2 : hi) : n - 1; i <= last; i++) {
          const cplx x = m[i * n + k], y = m[i * n + k + 1];
          m[i * n + k] = c * x + MUL(CONJ(s), y);
          m[i * n + k + 1] = c * y - MUL(s, x);
        }
    }
  }
  return 0;
}

/* Eigenvector of the upper triangular t for its k-th eigenvalue, by back
 * substitution (singular pivots replaced by smin, the vector rescaled
 * before a component could pass BIG), carried back by z into column k of
 * v (not normalised). */
static void eigenvector(const cplx *t, const cplx *z, int64_t n, int64_t k, cplx *x, cplx *v) {
  const cplx lambda = t[k * n + k];
  const double smin = fmax(EPS * abs1(lambda), DBL_MIN * (double)n / EPS);
  x[k] = 1;
  for (int64_t i = k - 1; i >= 0; i--) {
    cplx r = 0;
    for (int64_t j = i + 1; j <= k; j++) r -= MUL(t[i * n + j], x[j]);
    cplx d = t[i * n + i] - lambda;
    if (abs1(d) < smin) d = smin;
    const double rm = cabs(r), dm = cabs(d);
    if (rm > dm * BIG) {
      const double f = dm * BIG / rm;
      for (int64_t j = i + 1; j <= k; j++) x[j] *= f;
      r *= f;
    }
    x[i] = r / d;
  }
  for (int64_t r = 0; r < n; r++) {
    cplx s = 0;
    for (int64_t j = 0; j <= k; j++) s += MUL(z[r * n + j], x[j]);
    v[r * n + k] = s;
  }
}

int la_eig_complex(cplx *a, int64_t n, cplx *w, cplx *v, double *work) {
  cplx *z = v ? (cplx *)work : NULL, *u = (cplx *)work + n * n, *s = u + n, *x = s + n;
  double *scale = (double *)(x + n);
  int64_t ilo, ihi;
  la_eig_balance((double *)a, n, 2, scale, &ilo, &ihi);
  hessenberg(a, n, z, u, s);
  const int info = schur(a, n, z, w);
  if (info != 0 || !v) return info;
  for (int64_t k = 0; k < n; k++) eigenvector(a, z, n, k, x, v);
  la_eig_unbalance(v, n, scale, ilo, ihi);
  for (int64_t k = 0; k < n; k++) la_eig_normalise(v, n, k, LA_EIG_POSITIVE);
  return 0;
}
