/* la_eig_real (eig.h): a real matrix's eigenpairs in real arithmetic up to
 * the real Schur form, so that complex eigenvalues come in exactly
 * conjugate pairs with exactly conjugate eigenvectors. */
#include <float.h>
#include <math.h>
#include <string.h>
#include "ops/linalg/eig.h"

#define EPS DBL_EPSILON
/* An eigenvector's components are kept below this during back substitution
 * (rescaling the vector) so that defective matrices do not overflow it. */
#define BIG 1e100

/* a <- Q^T a Q upper Hessenberg by Householder reflectors
 * H_k = I - beta u u^T (u over rows k+1..n-1, mapping column k below the
 * diagonal onto (alpha, 0, ...)); z <- Q = H_0 H_1 ... when z is not NULL.
 * u and s are scratch of n doubles. */
static void hessenberg(double *a, int64_t n, double *z, double *u, double *s) {
  if (z)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) z[i * n + j] = i == j;
  for (int64_t k = 0; k + 2 < n; k++) {
    double tail = 0;
    for (int64_t i = k + 2; i < n; i++) tail += a[i * n + k] * a[i * n + k];
    if (tail == 0) continue; /* column already Hessenberg */
    const double x0 = a[(k + 1) * n + k], norm = sqrt(x0 * x0 + tail), alpha = x0 >= 0 ? -norm : norm;
    u[k + 1] = x0 - alpha;
    for (int64_t i = k + 2; i < n; i++) u[i] = a[i * n + k];
    const double beta = 2.0 / (u[k + 1] * u[k + 1] + tail);
    /* Left: rows k+1.. of columns k+1.. (s = beta u^T A, row by row). */
    memset(s, 0, (size_t)n * sizeof(double));
    for (int64_t i = k + 1; i < n; i++)
      for (int64_t j = k + 1; j < n; j++) s[j] += u[i] * a[i * n + j];
    for (int64_t i = k + 1; i < n; i++) {
      const double f = beta * u[i];
      for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= f * s[j];
    }
    a[(k + 1) * n + k] = alpha;
    for (int64_t i = k + 2; i < n; i++) a[i * n + k] = 0;
    /* Right: columns k+1.. of every row (and of z). */
    for (double *m = a; m; m = m == a ? z : NULL)
      for (int64_t r = 0; r < n; r++) {
        double *row = m + r * n, dot = 0;
        for (int64_t j = k + 1; j < n; j++) dot += row[j] * u[j];
        dot *= beta;
        for (int64_t j = k + 1; j < n; j++) row[j] -= dot * u[j];
      }
  }
}

/* Rows k..k+len-1 (columns c0..c1) of m <- (I - beta u u^T) m. */
static void reflect_rows(double *m, int64_t n, int64_t k, int len, const double *u, double beta, int64_t c0,
                         int64_t c1) {
  for (int64_t j = c0; j <= c1; j++) {
    double *p = m + k * n + j;
    double dot = u[0] * p[0] + u[1] * p[n] + (len == 3 ? u[2] * p[2 * n] : 0);
    dot *= beta;
    p[0] -= dot * u[0];
    p[n] -= dot * u[1];
    if (len == 3) p[2 * n] -= dot * u[2];
  }
}

/* Columns k..k+len-1 (rows r0..r1) of m <- m (I - beta u u^T). */
static void reflect_cols(double *m, int64_t n, int64_t k, int len, const double *u, double beta, int64_t r0,
                         int64_t r1) {
  for (int64_t i = r0; i <= r1; i++) {
    double *p = m + i * n + k;
    double dot = u[0] * p[0] + u[1] * p[1] + (len == 3 ? u[2] * p[2] : 0);
    dot *= beta;
    p[0] -= dot * u[0];
    p[1] -= dot * u[1];
    if (len == 3) p[2] -= dot * u[2];
  }
}

/* The plane rotation G = [cs -sn; sn cs] as G^T on rows p, p+1 (columns
 * c0..c1) or as G on columns p, p+1 (rows r0..r1). */
static void rotate_rows(double *m, int64_t n, int64_t p, double cs, double sn, int64_t c0, int64_t c1) {
  for (int64_t j = c0; j <= c1; j++) {
    const double x = m[p * n + j], y = m[(p + 1) * n + j];
    m[p * n + j] = cs * x + sn * y;
    m[(p + 1) * n + j] = cs * y - sn * x;
  }
}
static void rotate_cols(double *m, int64_t n, int64_t p, double cs, double sn, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i <= r1; i++) {
    const double x = m[i * n + p], y = m[i * n + p + 1];
    m[i * n + p] = cs * x + sn * y;
    m[i * n + p + 1] = cs * y - sn * x;
  }
}

/* The deflated 2x2 block at rows p, p+1 of the window starting at l,
 * standardised as LAPACK's lanv2 leaves it, by a rotation G = [cs -sn;
 * sn cs] (G^T block G, applied to the rest of h and to z): real eigenvalues
 * split by the rotation whose first column is the eigenvector of d + zz,
 * making the block upper triangular; a complex pair (positive imaginary
 * part first) as [w b; c w] with equal diagonal entries, which the
 * eigenvectors' start and so their phase (geev's) depend on. */
static void deflate_pair(double *h, int64_t n, int64_t p, int64_t l, double *z, double _Complex *w) {
  const int full = z != NULL;
  double *hp = h + p * n + p, *hq = h + (p + 1) * n + p;
  const double a = hp[0], b = hp[1], c = hq[0], d = hq[1];
  const double half = 0.5 * (a - d), q = half * half + b * c;
  double cs = 1, sn = 0;
  if (q >= 0) {
    if (c == 0) {
      w[p] = a, w[p + 1] = d;
      return;
    }
    const double root = sqrt(q), zz = half + (half >= 0 ? root : -root), r = hypot(zz, c);
    cs = zz / r, sn = c / r;
  } else if (a != d) {
    const double sigma = b + c, tau = hypot(sigma, a - d);
    cs = sqrt(0.5 * (1 + fabs(sigma) / tau));
    sn = -(half / (tau * cs)) * (sigma >= 0 ? 1 : -1);
  }
  if (sn != 0) {
    rotate_rows(h, n, p, cs, sn, p, full ? n - 1 : p + 1);
    rotate_cols(h, n, p, cs, sn, full ? 0 : l, p + 1);
    if (z) rotate_cols(z, n, p, cs, sn, 0, n - 1);
  }
  if (q >= 0) {
    hq[0] = 0;
    w[p] = hp[0], w[p + 1] = hq[1];
    return;
  }
  const double mean = 0.5 * (hp[0] + hq[1]), im = sqrt(fabs(hp[1])) * sqrt(fabs(hq[0]));
  hp[0] = hq[1] = mean;
  w[p] = CMPLX(mean, im);
  w[p + 1] = CMPLX(mean, -im);
}

/* Whether h[k][k-1] (within the window ending at hi) is negligible: small
 * next to its diagonal neighbours, and then (the criterion of Ahues and
 * Tisseur that LAPACK's lahqr uses) small enough that setting it to zero
 * perturbs the eigenvalues of the 2x2 block around it no more than
 * rounding does. */
static int negligible(const double *h, int64_t n, int64_t k, int64_t hi, double anorm) {
  const double sub = fabs(h[k * n + k - 1]), hkk = h[k * n + k], hpp = h[(k - 1) * n + k - 1];
  if (sub < DBL_MIN) return 1;
  double tst = fabs(hpp) + fabs(hkk);
  if (tst == 0) {
    if (k >= 2) tst += fabs(h[(k - 1) * n + k - 2]);
    if (k + 1 <= hi) tst += fabs(h[(k + 1) * n + k]);
  }
  if (tst == 0) tst = anorm;
  if (sub > EPS * tst) return 0;
  const double sup = fabs(h[(k - 1) * n + k]), ab = fmax(sub, sup), ba = fmin(sub, sup);
  const double aa = fmax(fabs(hkk), fabs(hpp - hkk)), bb = fmin(fabs(hkk), fabs(hpp - hkk)), s = aa + ab;
  return ba * (ab / s) <= fmax(DBL_MIN, EPS * (bb * (aa / s)));
}

/* Francis double-shift QR iterations on the Hessenberg h down to real
 * Schur form (the whole of h and z updated when z is not NULL, so that
 * h = z^T A z; else only the active window). Eigenvalues into w. Returns 0
 * or 1 + the row whose eigenvalue did not converge. */
static int schur(double *h, int64_t n, double *z, double _Complex *w) {
  const int full = z != NULL;
  double anorm = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i > 0 ? i - 1 : 0; j < n; j++) anorm += fabs(h[i * n + j]);
  const int64_t maxit = la_eig_max_iterations(n);
  int64_t hi = n - 1, its = 0;
  while (hi >= 0) {
    int64_t l = hi;
    for (; l > 0 && !negligible(h, n, l, hi, anorm); l--) {}
    if (l > 0) h[l * n + l - 1] = 0;
    if (l == hi) {
      w[hi] = h[hi * n + hi];
      hi--, its = 0;
      continue;
    }
    if (l == hi - 1) {
      deflate_pair(h, n, hi - 1, l, z, w);
      hi -= 2, its = 0;
      continue;
    }
    if (its >= maxit) return (int)(hi + 1);
    its++;
    /* Shifts as their sum s and product t: the trailing 2x2 block's
     * eigenvalues, or every tenth iteration an exceptional pair to break
     * a cycle. */
    double s, t;
    if (its % 10 == 0) {
      const double ex = fabs(h[hi * n + hi - 1]) + fabs(h[(hi - 1) * n + hi - 2]), c = h[hi * n + hi] + 0.75 * ex;
      s = 2 * c;
      t = c * c + 0.4375 * ex * ex;
    } else {
      const double a = h[(hi - 1) * n + hi - 1], b = h[(hi - 1) * n + hi], c = h[hi * n + hi - 1], d = h[hi * n + hi];
      s = a + d;
      t = a * d - b * c;
      const double half = 0.5 * (a - d), q = half * half + b * c;
      if (q >= 0) { /* real: twice the eigenvalue nearer d, as LAPACK's lahqr */
        const double root = sqrt(q), e1 = d + half + root, e2 = d + half - root;
        const double e = fabs(e1 - d) <= fabs(e2 - d) ? e1 : e2;
        s = 2 * e;
        t = e * e;
      }
    }
    /* First column of (H - s1 I)(H - s2 I) = H^2 - s H + t I, then the
     * bulge chased down by 3-element reflectors (2 in the last step). */
    const double h00 = h[l * n + l], h01 = h[l * n + l + 1], h10 = h[(l + 1) * n + l];
    double x = h00 * h00 + h01 * h10 - s * h00 + t, y = h10 * (h00 + h[(l + 1) * n + l + 1] - s),
           zz = h10 * h[(l + 2) * n + l + 1];
    for (int64_t k = l; k < hi; k++) {
      const int len = k + 2 <= hi ? 3 : 2;
      if (k > l) {
        x = h[k * n + k - 1];
        y = h[(k + 1) * n + k - 1];
        zz = len == 3 ? h[(k + 2) * n + k - 1] : 0;
      }
      const double nrm = hypot(hypot(x, y), zz);
      if (nrm == 0) continue;
      const double alpha = x >= 0 ? -nrm : nrm, u[3] = {x - alpha, y, zz};
      const double beta = 2.0 / (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
      reflect_rows(h, n, k, len, u, beta, k > l ? k - 1 : l, full ? n - 1 : hi);
      if (k > l) {
        h[k * n + k - 1] = alpha;
        h[(k + 1) * n + k - 1] = 0;
        if (len == 3) h[(k + 2) * n + k - 1] = 0;
      }
      reflect_cols(h, n, k, len, u, beta, full ? 0 : l, k + 3 < hi ? k + 3 : hi);
      if (z) reflect_cols(z, n, k, len, u, beta, 0, n - 1);
    }
  }
  return 0;
}

/* x (k + size entries) <- -x scaled so that |r / d| stays below BIG. */
static double _Complex guarded_div(double _Complex r, double _Complex d, double smin, double _Complex *x,
                                   int64_t from, int64_t to) {
  if (cabs(d) < smin) d = smin;
  const double rm = cabs(r), dm = cabs(d);
  if (rm > dm * BIG) {
    const double f = dm * BIG / rm;
    for (int64_t j = from; j <= to; j++) x[j] *= f;
    r *= f;
  }
  return r / d;
}

/* Solves [m00 m01; m10 m11] [x0; x1] = [r0; r1] by elimination with
 * partial pivoting, pivots no smaller than smin. */
static void solve2(double _Complex m00, double _Complex m01, double _Complex m10, double _Complex m11,
                   double _Complex r0, double _Complex r1, double _Complex *x0, double _Complex *x1, double smin) {
  if (cabs(m10) > cabs(m00)) {
    double _Complex t = m00;
    m00 = m10, m10 = t;
    t = m01, m01 = m11, m11 = t;
    t = r0, r0 = r1, r1 = t;
  }
  if (cabs(m00) < smin) m00 = smin;
  const double _Complex f = m10 / m00;
  m11 -= f * m01;
  r1 -= f * r0;
  if (cabs(m11) < smin) m11 = smin;
  *x1 = r1 / m11;
  *x0 = (r0 - m01 * *x1) / m00;
}

/* The eigenvector x (entries 0..end) of the quasi-triangular t for the
 * eigenvalue lambda of its block at rows k..end (end = k or k + 1): the
 * block's own null vector, then back substitution upwards through the
 * 1x1 and 2x2 blocks above, singular pivots replaced by smin. */
static void quasi_vector(const double *t, int64_t n, int64_t k, int64_t end, double _Complex lambda,
                         double _Complex *x) {
  const double smin = fmax(EPS * (fabs(creal(lambda)) + fabs(cimag(lambda))), DBL_MIN * (double)n / EPS);
  if (end == k) {
    x[k] = 1;
  } else if (fabs(t[k * n + end]) >= fabs(t[end * n + k])) { /* trevc's start on [w b; c w] */
    x[k] = 1;
    x[end] = CMPLX(0, cimag(lambda) / t[k * n + end]);
  } else {
    x[k] = -cimag(lambda) / t[end * n + k];
    x[end] = CMPLX(0, 1);
  }
  for (int64_t i = k - 1; i >= 0;) {
    double _Complex r = 0;
    if (i > 0 && t[i * n + i - 1] != 0) { /* 2x2 block at rows i-1, i */
      double _Complex r0 = 0;
      for (int64_t j = i + 1; j <= end; j++) r0 -= t[(i - 1) * n + j] * x[j], r -= t[i * n + j] * x[j];
      solve2(t[(i - 1) * n + i - 1] - lambda, t[(i - 1) * n + i], t[i * n + i - 1], t[i * n + i] - lambda, r0, r,
             &x[i - 1], &x[i], smin);
      const double big = fmax(cabs(x[i - 1]), cabs(x[i]));
      if (big > BIG)
        for (int64_t j = i - 1; j <= end; j++) x[j] /= big;
      i -= 2;
    } else {
      for (int64_t j = i + 1; j <= end; j++) r -= t[i * n + j] * x[j];
      x[i] = guarded_div(r, t[i * n + i] - lambda, smin, x, i + 1, end);
      i--;
    }
  }
}

/* Column col of v (n x n, row-major) <- z[:, 0..end] x (real when real). */
static void back_transform(const double *z, int64_t n, int64_t end, const double _Complex *x, double _Complex *v,
                           int64_t col, int real) {
  for (int64_t r = 0; r < n; r++) {
    double _Complex s = 0;
    for (int64_t j = 0; j <= end; j++) s += z[r * n + j] * x[j];
    v[r * n + col] = real ? creal(s) : s;
  }
}

int la_eig_real(double *a, int64_t n, double _Complex *w, double _Complex *v, double *work) {
  double *z = v ? work : NULL, *u = work + n * n, *s = u + n, *scale = s + n;
  double _Complex *x = (double _Complex *)(scale + n);
  int64_t ilo, ihi;
  la_eig_balance(a, n, 1, scale, &ilo, &ihi);
  hessenberg(a, n, z, u, s);
  const int info = schur(a, n, z, w);
  if (info != 0 || !v) return info;
  for (int64_t k = 0; k < n; k++) {
    const int pair = k + 1 < n && a[(k + 1) * n + k] != 0;
    const int64_t end = pair ? k + 1 : k;
    quasi_vector(a, n, k, end, w[k], x);
    back_transform(z, n, end, x, v, k, !pair);
    k = end;
  }
  la_eig_unbalance(v, n, scale, ilo, ihi);
  for (int64_t k = 0; k < n; k++) {
    const int pair = k + 1 < n && a[(k + 1) * n + k] != 0;
    la_eig_normalise(v, n, k, pair ? LA_EIG_SIGN_OF_REAL : LA_EIG_REAL);
    if (pair) { /* the conjugate's vector: exactly the conjugate */
      for (int64_t r = 0; r < n; r++) v[r * n + k + 1] = conj(v[r * n + k]);
      k++;
    }
  }
  return 0;
}
