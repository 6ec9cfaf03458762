/* Balancing for la_eig_real and la_eig_complex (eig.h), as LAPACK's gebal
 * and gebak with job 'B' that geev applies: rows and columns that isolate
 * an eigenvalue are permuted to the bottom and to the left, and the rest
 * scaled by powers of 2 until its rows and columns have comparable norms.
 * The eigenvalues are those of the balanced matrix; its eigenvectors are
 * carried back by the same scaling and permutations. Permuting keeps the
 * CPU's eigenvalue order (a lower triangular matrix's comes out reversed,
 * as geev's), and scaling its accuracy on badly scaled matrices. Matrices
 * are doubles, `width` (1 real, 2 complex) per entry. */
#include <float.h>
#include <math.h>
#include "ops/linalg/eig.h"

#define RADIX 2.0

static int nonzero(const double *a, int64_t n, int width, int64_t i, int64_t j) {
  const double *p = a + (i * n + j) * width;
  return p[0] != 0 || (width == 2 && p[1] != 0);
}

/* Swaps rows i, k over columns c0.. and columns i, k over rows 0..r1. */
static void swap(double *a, int64_t n, int width, int64_t i, int64_t k, int64_t c0, int64_t r1) {
  for (int64_t j = c0 * width; j < n * width; j++) {
    const double t = a[i * n * width + j];
    a[i * n * width + j] = a[k * n * width + j], a[k * n * width + j] = t;
  }
  for (int64_t r = 0; r <= r1; r++)
    for (int w = 0; w < width; w++) {
      double *p = a + (r * n + i) * width + w, *q = a + (r * n + k) * width + w;
      const double t = *p;
      *p = *q, *q = t;
    }
}

void la_eig_balance(double *a, int64_t n, int width, double *scale, int64_t *ilo, int64_t *ihi) {
  int64_t lo = 0, hi = n - 1;
  for (int64_t i = 0; i < n; i++) scale[i] = 1;
  /* Rows with no off-diagonal entry in columns 0..hi go to the bottom. */
  for (int moved = 1; moved && hi > 0;) {
    moved = 0;
    for (int64_t i = hi; i >= 0 && hi > 0; i--) {
      int64_t j = 0;
      while (j <= hi && (j == i || !nonzero(a, n, width, i, j))) j++;
      if (j <= hi) continue;
      scale[hi] = (double)i;
      if (i != hi) swap(a, n, width, i, hi, lo, hi);
      moved = 1;
      hi--;
    }
  }
  /* Columns with no off-diagonal entry in rows lo..hi go to the left. */
  for (int moved = 1; moved && hi > 0;) {
    moved = 0;
    for (int64_t j = lo; j <= hi; j++) {
      int64_t i = lo;
      while (i <= hi && (i == j || !nonzero(a, n, width, i, j))) i++;
      if (i <= hi) continue;
      scale[lo] = (double)j;
      if (j != lo) swap(a, n, width, j, lo, lo, hi);
      moved = 1;
      lo++;
    }
  }
  *ilo = lo, *ihi = hi;
  if (hi <= lo) return;
  for (int64_t i = lo; i <= hi; i++) scale[i] = 1;
  const double sfmin1 = DBL_MIN / DBL_EPSILON, sfmax1 = 1 / sfmin1, sfmin2 = sfmin1 * RADIX, sfmax2 = 1 / sfmin2;
  for (int converged = 0; !converged;) {
    converged = 1;
    for (int64_t i = lo; i <= hi; i++) {
      double c = 0, r = 0, ca = 0, ra = 0;
      for (int64_t k = lo; k <= hi; k++)
        for (int w = 0; w < width; w++) {
          c += a[(k * n + i) * width + w] * a[(k * n + i) * width + w];
          r += a[(i * n + k) * width + w] * a[(i * n + k) * width + w];
        }
      c = sqrt(c), r = sqrt(r);
      for (int64_t k = 0; k <= hi; k++) { /* largest |re| + |im| in column i, rows 0..hi */
        double m = 0;
        for (int w = 0; w < width; w++) m += fabs(a[(k * n + i) * width + w]);
        ca = fmax(ca, m);
      }
      for (int64_t k = lo; k < n; k++) { /* and in row i, columns lo.. */
        double m = 0;
        for (int w = 0; w < width; w++) m += fabs(a[(i * n + k) * width + w]);
        ra = fmax(ra, m);
      }
      if (c == 0 || r == 0) continue;
      if (isnan(c + ca + r + ra)) return; /* never converges: leave the rest unscaled */
      double f = 1, g = r / RADIX;
      const double s = c + r;
      while (c < g && fmax(f, fmax(c, ca)) < sfmax2 && fmin(r, fmin(g, ra)) > sfmin2)
        f *= RADIX, c *= RADIX, ca *= RADIX, r /= RADIX, g /= RADIX, ra /= RADIX;
      g = c / RADIX;
      while (g >= r && fmax(r, ra) < sfmax2 && fmin(fmin(f, c), fmin(g, ca)) > sfmin2)
        f /= RADIX, c /= RADIX, g /= RADIX, ca /= RADIX, r *= RADIX, ra *= RADIX;
      if (c + r >= 0.95 * s) continue;
      if (f < 1 && scale[i] < 1 && f * scale[i] <= sfmin1) continue;
      if (f > 1 && scale[i] > 1 && scale[i] >= sfmax1 / f) continue;
      scale[i] *= f;
      converged = 0;
      for (int64_t k = lo * width; k < n * width; k++) a[i * n * width + k] /= f;
      for (int64_t k = 0; k <= hi; k++)
        for (int w = 0; w < width; w++) a[(k * n + i) * width + w] *= f;
    }
  }
}

void la_eig_unbalance(double _Complex *v, int64_t n, const double *scale, int64_t ilo, int64_t ihi) {
  if (ihi > ilo)
    for (int64_t i = ilo; i <= ihi; i++)
      for (int64_t j = 0; j < n; j++) v[i * n + j] *= scale[i];
  /* The interchanges undone in reverse: the left ones from ilo-1 down,
   * the bottom ones from ihi+1 up (each row swap commutes with the other
   * group's). */
  for (int64_t i = ilo - 1; i >= 0; i--) {
    const int64_t k = (int64_t)scale[i];
    if (k != i)
      for (int64_t j = 0; j < n; j++) {
        const double _Complex t = v[i * n + j];
        v[i * n + j] = v[k * n + j], v[k * n + j] = t;
      }
  }
  for (int64_t i = ihi + 1; i < n; i++) {
    const int64_t k = (int64_t)scale[i];
    if (k != i)
      for (int64_t j = 0; j < n; j++) {
        const double _Complex t = v[i * n + j];
        v[i * n + j] = v[k * n + j], v[k * n + j] = t;
      }
  }
}

void la_eig_normalise(double _Complex *v, int64_t n, int64_t col, int mode) {
  double norm = 0, best = -1;
  int64_t at = 0;
  for (int64_t r = 0; r < n; r++) {
    const double _Complex s = v[r * n + col];
    const double m = creal(s) * creal(s) + cimag(s) * cimag(s);
    norm += m;
    if (m > best) best = m, at = r;
  }
  double _Complex f = norm > 0 ? 1.0 / sqrt(norm) : 1.0;
  const int turn = mode != LA_EIG_REAL && best > 0;
  if (turn) {
    const double re = creal(v[at * n + col]), im = cimag(v[at * n + col]);
    const double sign = mode == LA_EIG_SIGN_OF_REAL && re < 0 && fabs(re) > fabs(im) ? -1 : 1;
    f *= sign * conj(v[at * n + col]) / sqrt(best);
  }
  for (int64_t r = 0; r < n; r++) v[r * n + col] *= f;
  if (turn) v[at * n + col] = creal(v[at * n + col]);
}
