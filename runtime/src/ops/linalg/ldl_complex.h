/* Complex Bunch-Kaufman LDL (ldl.c) in complex128 for both complex dtypes:
 * A = L D L^T (symmetric, LAPACK's zsytf2/zsytrs with uplo 'L') or
 * A = L D L^H (Hermitian, zhetf2/zhetrs), the same pivoting as the real
 * bunch_kaufman with |re| + |im| (LAPACK's cabs1) as the size of an entry
 * and, when Hermitian, |re| of a diagonal one (its imaginary part is not
 * read and D's diagonal is real). Unblocked at every order. */
#ifndef NEURONRT_OPS_LINALG_LDL_COMPLEX_H
#define NEURONRT_OPS_LINALG_LDL_COMPLEX_H

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include "ops/linalg/dense.h"

typedef double _Complex ldl_c;

static inline double ldl_cabs1(ldl_c x) { return fabs(creal(x)) + fabs(cimag(x)); }
static inline ldl_c ldl_cj(ldl_c x, int herm) { return herm ? la_conj_c128(x) : x; }
static inline void ldl_swap_c(ldl_c *x, ldl_c *y) {
  const ldl_c t = *x;
  *x = *y, *y = t;
}

/* The factorisation in place on the lower triangle of a (n x n, row-major).
 * Returns info (the first k, 1-based, whose column and diagonal are zero). */
static int32_t ldl_factor_c(ldl_c *a, int64_t n, int32_t *piv, int herm) {
  const double alpha = (1.0 + sqrt(17.0)) / 8.0;
#define A(i, j) a[(i) * n + (j)]
#define DIAG_ABS(x) (herm ? fabs(creal(x)) : ldl_cabs1(x))
  int32_t info = 0;
  int64_t k = 0;
  while (k < n) {
    int64_t kstep = 1, kp = k, imax = k;
    const double absakk = DIAG_ABS(A(k, k));
    double colmax = 0;
    for (int64_t i = k + 1; i < n; i++)
      if (ldl_cabs1(A(i, k)) > colmax) colmax = ldl_cabs1(A(i, k)), imax = i;
    if ((absakk == 0 && colmax == 0) || isnan(absakk)) {
      if (info == 0) info = (int32_t)(k + 1);
      if (herm) A(k, k) = creal(A(k, k));
    } else {
      if (!(absakk >= alpha * colmax) && imax > k) {
        double rowmax = 0;
        for (int64_t j = k; j < imax; j++) rowmax = fmax(rowmax, ldl_cabs1(A(imax, j)));
        for (int64_t j = imax + 1; j < n; j++) rowmax = fmax(rowmax, ldl_cabs1(A(j, imax)));
        if (absakk >= alpha * colmax * (colmax / rowmax)) {
          kp = k;
        } else if (DIAG_ABS(A(imax, imax)) >= alpha * rowmax) {
          kp = imax;
        } else {
          kp = imax;
          kstep = 2;
        }
      }
      const int64_t kk = k + kstep - 1;
      if (kp != kk) { /* interchange of kk and kp (> kk) in the trailing matrix */
        for (int64_t i = kp + 1; i < n; i++) ldl_swap_c(&A(i, kk), &A(i, kp));
        for (int64_t j = kk + 1; j < kp; j++) { /* (j, kk) <-> (kp, j): across the diagonal when Hermitian */
          const ldl_c t = ldl_cj(A(j, kk), herm);
          A(j, kk) = ldl_cj(A(kp, j), herm);
          A(kp, j) = t;
        }
        if (herm) A(kp, kk) = la_conj_c128(A(kp, kk));
        ldl_swap_c(&A(kk, kk), &A(kp, kp));
        if (kstep == 2) ldl_swap_c(&A(k + 1, k), &A(kp, k));
      }
      if (herm) {
        A(k, k) = creal(A(k, k));
        if (kstep == 2) A(k + 1, k + 1) = creal(A(k + 1, k + 1));
      }
      if (kstep == 1) { /* A22 -= x d^-1 x^T (x^H), then x /= d */
        const ldl_c r = herm ? (ldl_c)(1.0 / creal(A(k, k))) : la_div_c128(1, A(k, k));
        for (int64_t j = k + 1; j < n; j++) {
          const ldl_c xj = la_mul_c128(ldl_cj(A(j, k), herm), r);
          if (xj == 0) continue;
          for (int64_t i = j; i < n; i++) A(i, j) -= la_mul_c128(A(i, k), xj);
          if (herm) A(j, j) = creal(A(j, j));
        }
        for (int64_t i = k + 1; i < n; i++) A(i, k) = la_mul_c128(A(i, k), r);
      } else if (k + 2 < n) {
        /* D = [[a, b~], [b, c]] (b~ = conj(b) or b): row j of the block
         * columns W becomes L = W D^-1, and A22 -= W L^H (L^T) */
        const ldl_c b = A(k + 1, k), bt = ldl_cj(b, herm);
        const ldl_c det = la_mul_c128(A(k, k), A(k + 1, k + 1)) - la_mul_c128(b, bt);
        for (int64_t j = k + 2; j < n; j++) {
          const ldl_c w0 = A(j, k), w1 = A(j, k + 1);
          const ldl_c l0 = la_div_c128(la_mul_c128(w0, A(k + 1, k + 1)) - la_mul_c128(w1, b), det);
          const ldl_c l1 = la_div_c128(la_mul_c128(w1, A(k, k)) - la_mul_c128(w0, bt), det);
          const ldl_c c0 = ldl_cj(l0, herm), c1 = ldl_cj(l1, herm);
          for (int64_t i = j; i < n; i++) A(i, j) -= la_mul_c128(A(i, k), c0) + la_mul_c128(A(i, k + 1), c1);
          if (herm) A(j, j) = creal(A(j, j));
          A(j, k) = l0;
          A(j, k + 1) = l1;
        }
      }
    }
    if (kstep == 1)
      piv[k] = (int32_t)(kp + 1);
    else
      piv[k] = piv[k + 1] = (int32_t)(-(kp + 1));
    k += kstep;
  }
#undef DIAG_ABS
#undef A
  return info;
}

/* X (n x k, row-major) <- A^-1 X for A = P L D L^T P^T (L D L^H) as
 * ldl_factor_c leaves it (l: its lower triangle, column-major). */
static void ldl_solve_c(const ldl_c *l, const int32_t *piv, int64_t n, ldl_c *x, int64_t k, int herm) {
#define L(i, j) l[(j) * n + (i)]
#define SWAP_ROWS(r, s)                                                              \
  do {                                                                                \
    if ((r) != (s))                                                                   \
      for (int64_t c = 0; c < k; c++) ldl_swap_c(&x[(r) * k + c], &x[(s) * k + c]);  \
  } while (0)
  for (int64_t i = 0; i < n;) { /* forward: D Y = L^-1 P^T B, and D^-1 */
    if (piv[i] > 0) {
      SWAP_ROWS(i, (int64_t)piv[i] - 1);
      for (int64_t r = i + 1; r < n; r++) {
        const ldl_c f = L(r, i);
        if (f != 0)
          for (int64_t c = 0; c < k; c++) x[r * k + c] -= la_mul_c128(f, x[i * k + c]);
      }
      const ldl_c d = herm ? (ldl_c)creal(L(i, i)) : L(i, i);
      for (int64_t c = 0; c < k; c++) x[i * k + c] = la_div_c128(x[i * k + c], d);
      i += 1;
    } else {
      SWAP_ROWS(i + 1, (int64_t)(-piv[i]) - 1);
      for (int64_t r = i + 2; r < n; r++) {
        const ldl_c f0 = L(r, i), f1 = L(r, i + 1);
        for (int64_t c = 0; c < k; c++)
          x[r * k + c] -= la_mul_c128(f0, x[i * k + c]) + la_mul_c128(f1, x[(i + 1) * k + c]);
      }
      /* D = [[a, b~], [b, c]]: x = D^-1 y by its adjugate */
      const ldl_c b = L(i + 1, i), bt = ldl_cj(b, herm);
      const ldl_c a = herm ? (ldl_c)creal(L(i, i)) : L(i, i), cc = herm ? (ldl_c)creal(L(i + 1, i + 1)) : L(i + 1, i + 1);
      const ldl_c det = la_mul_c128(a, cc) - la_mul_c128(b, bt);
      for (int64_t c = 0; c < k; c++) {
        const ldl_c y0 = x[i * k + c], y1 = x[(i + 1) * k + c];
        x[i * k + c] = la_div_c128(la_mul_c128(cc, y0) - la_mul_c128(bt, y1), det);
        x[(i + 1) * k + c] = la_div_c128(la_mul_c128(a, y1) - la_mul_c128(b, y0), det);
      }
      i += 2;
    }
  }
  for (int64_t i = n - 1; i >= 0;) { /* back: X = P L^-T Y (L^-H) */
    if (piv[i] > 0) {
      for (int64_t r = i + 1; r < n; r++) {
        const ldl_c f = ldl_cj(L(r, i), herm);
        if (f != 0)
          for (int64_t c = 0; c < k; c++) x[i * k + c] -= la_mul_c128(f, x[r * k + c]);
      }
      SWAP_ROWS(i, (int64_t)piv[i] - 1);
      i -= 1;
    } else { /* the 2x2 block's rows i-1, i */
      for (int64_t r = i + 1; r < n; r++) {
        const ldl_c f0 = ldl_cj(L(r, i - 1), herm), f1 = ldl_cj(L(r, i), herm);
        for (int64_t c = 0; c < k; c++) {
          x[(i - 1) * k + c] -= la_mul_c128(f0, x[r * k + c]);
          x[i * k + c] -= la_mul_c128(f1, x[r * k + c]);
        }
      }
      SWAP_ROWS(i, (int64_t)(-piv[i]) - 1);
      i -= 2;
    }
  }
#undef SWAP_ROWS
#undef L
}

#endif
