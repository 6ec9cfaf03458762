/* The linear-algebra kernels against reference twins and residuals.
 *
 * Twins: an unblocked textbook LU with the same pivot rule (first largest
 * |a|) and forward/back substitution, in double. The kernels' blocked LU
 * sums in another order, so values are compared with a tolerance and, on
 * random matrices (no near-ties), pivots exactly; factorisations are also
 * checked by their residual (P L U - A, L L^T - A, A X - B) as LAPACK's
 * own tests do. Cases: float32 and float64, row- and column-major storage,
 * sizes across the LU's 48-column panels, wide and tall LU, batches (with a
 * broadcast A), triangular solves with few right-hand sides (dot form) and
 * many (row form, one and two column blocks), singular and indefinite inputs (info), zero sizes, a bad
 * pivot, wrong dtypes and shapes. Complex64 and complex128: LU against a
 * textbook complex twin (pivots by |re| + |im|, as LAPACK), triangular
 * solves with and without conj by their residual, L L^H = A, and row
 * interchanges of 16-byte elements.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* ---- LU ------------------------------------------------------------------ */

/* The twin: textbook LU in double on one matrix (row-major, m x n). */
static int twin_lu(double *a, int64_t m, int64_t n, int32_t *piv) {
  int info = 0;
  for (int64_t k = 0; k < (m < n ? m : n); k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
    piv[k] = (int32_t)(p + 1);
    if (a[p * n + k] == 0) {
      if (!info) info = (int)k + 1;
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      double t = a[k * n + j];
      a[k * n + j] = a[p * n + j], a[p * n + j] = t;
    }
    for (int64_t i = k + 1; i < m; i++) {
      a[i * n + k] /= a[k * n + k];
      for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= a[i * n + k] * a[k * n + j];
    }
  }
  return info;
}

static void lu_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int col_major) {
  const int64_t k = m < n ? m : n;
  mats a = make_mats(d, batch, m, n, col_major), orig = make_mats(NRT_FLOAT64, batch, m, n, 0);
  mats piv = make_mats(NRT_INT32, batch, k, 1, 0), info = make_mats(NRT_INT32, batch, 1, 1, 0);
  piv.view.ndim = 2, info.view.ndim = 1;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double x = urand() * 2 - 1;
        put(&a, b, i, j, x);
        put(&orig, b, i, j, get(&a, b, i, j)); /* as stored */
      }
  nrt_tensor_view v[3] = {a.view, piv.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  CHECK_OK(nrt_op_execute(&op));
  double *t = malloc((size_t)(m * n) * sizeof(double) + 8);
  int32_t *tp = malloc((size_t)k * sizeof(int32_t) + 4);
  double worst_value = 0, worst_residual = 0;
  int pivots_equal = 1;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) t[i * n + j] = get(&orig, b, i, j);
    CHECK(twin_lu(t, m, n, tp) == (int)get(&info, b, 0, 0));
    for (int64_t i = 0; i < k; i++) pivots_equal &= tp[i] == (int32_t)get(&piv, b, i, 0);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) worst_value = fmax(worst_value, fabs(t[i * n + j] - get(&a, b, i, j)));
    /* Residual: rebuild L U, undo the row swaps, compare with A. */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p <= (i < j ? i : j) && p < k; p++)
          s += (p == i ? 1.0 : get(&a, b, i, p)) * get(&a, b, p, j);
        t[i * n + j] = s;
      }
    for (int64_t r = k - 1; r >= 0; r--) {
      int64_t p = (int64_t)get(&piv, b, r, 0) - 1;
      for (int64_t j = 0; j < n; j++) {
        double x = t[r * n + j];
        t[r * n + j] = t[p * n + j], t[p * n + j] = x;
      }
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        worst_residual = fmax(worst_residual, fabs(t[i * n + j] - get(&orig, b, i, j)));
  }
  const double tol = eps_of(d) * (double)(m > n ? m : n) * 64;
  if (!pivots_equal || worst_value > tol || worst_residual > tol)
    fprintf(stderr, "  lu %s batch %lld %lld x %lld col_major %d: pivots %d value %g residual %g\n",
            nrt_dtype_name(d), (long long)batch, (long long)m, (long long)n, col_major, pivots_equal,
            worst_value, worst_residual);
  CHECK(pivots_equal);
  CHECK(worst_value <= tol);
  CHECK(worst_residual <= tol);
  free(t), free(tp);
  nrt_free(a.dev), nrt_free(orig.dev), nrt_free(piv.dev), nrt_free(info.dev);
}

static void test_lu_matches_twin(void) {
  const int64_t sizes[][2] = {{1, 1}, {3, 3}, {17, 17}, {48, 48}, {49, 49}, {130, 130},
                              {5, 9}, {9, 5}, {100, 60}, {60, 100}};
  for (int s = 0; s < 10; s++)
    for (int cm = 0; cm < 2; cm++) {
      lu_case(NRT_FLOAT32, 3, sizes[s][0], sizes[s][1], cm);
      lu_case(NRT_FLOAT64, 2, sizes[s][0], sizes[s][1], cm);
    }
  lu_case(NRT_FLOAT64, 1, 300, 300, 1); /* one matrix: the trailing update splits across threads */
}

static void test_lu_singular_and_empty(void) {
  /* Column 1 is zero below row 0 after elimination: info 2, and the rest
   * is still factored. */
  mats a = make_mats(NRT_FLOAT64, 1, 3, 3, 0), piv = make_mats(NRT_INT32, 1, 3, 1, 0),
       info = make_mats(NRT_INT32, 1, 1, 1, 0);
  piv.view.ndim = 2, info.view.ndim = 1;
  const double m[3][3] = {{1, 2, 3}, {2, 4, 7}, {3, 6, 1}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) put(&a, 0, i, j, m[i][j]);
  nrt_tensor_view v[3] = {a.view, piv.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(get(&info, 0, 0, 0) == 2);
  CHECK(get(&piv, 0, 0, 0) == 3);
  /* Zero rows or columns: info 0, nothing else written. */
  op.operands[0].shape[1] = 0, op.operands[1].shape[1] = 0;
  put(&info, 0, 0, 0, 7);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(get(&info, 0, 0, 0) == 0);
  /* Wrong pivots length and dtype are refused. */
  op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  op.operands[1].shape[1] = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  op.operands[0].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  nrt_free(a.dev), nrt_free(piv.dev), nrt_free(info.dev);
}

static void test_lu_pivot(void) {
  /* Forward then reverse application is the identity; a bad pivot fails. */
  mats x = make_mats(NRT_FLOAT32, 2, 4, 3, 1), piv = make_mats(NRT_INT32, 2, 3, 1, 0);
  piv.view.ndim = 2;
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++) put(&x, b, i, j, b * 100 + i * 10 + j);
  const int p[2][3] = {{3, 4, 3}, {1, 2, 4}};
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 3; i++) put(&piv, b, i, 0, p[b][i]);
  nrt_tensor_view v[2] = {x.view, piv.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_PIVOT, 1, 2, v);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  /* batch 0: swap 0<->2, 1<->3, 2<->2: rows become 2, 3, 0, 1 */
  const int rows0[4] = {2, 3, 0, 1};
  for (int i = 0; i < 4; i++) CHECK(get(&x, 0, i, 1) == rows0[i] * 10 + 1);
  CHECK(get(&x, 1, 2, 0) == 130 && get(&x, 1, 3, 2) == 122);
  op.scalars[0].i = 1;
  CHECK_OK(nrt_op_execute(&op));
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++) CHECK(get(&x, b, i, j) == b * 100 + i * 10 + j);
  put(&piv, 1, 2, 0, 5);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  put(&piv, 1, 2, 0, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  nrt_free(x.dev), nrt_free(piv.dev);
}

/* ---- triangular solve ---------------------------------------------------- */

static void trsm_case(nrt_dtype d, int64_t batch, int64_t n, int64_t k, int upper, int unit,
                      int col_major, int broadcast_a) {
  mats a = make_mats(d, broadcast_a ? 1 : batch, n, n, col_major), x = make_mats(d, batch, n, k, col_major != 1);
  mats b0 = make_mats(NRT_FLOAT64, batch, n, k, 0);
  for (int64_t b = 0; b < (broadcast_a ? 1 : batch); b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        int inside = upper ? j >= i : j <= i;
        /* a dominant diagonal keeps the solve well conditioned; the other
         * triangle holds garbage the kernel must not read */
        put(&a, b, i, j, i == j ? (unit ? 1e30 : 2 + urand()) : inside ? urand() - 0.5 : 1e30);
      }
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) {
        put(&x, b, i, j, urand() * 2 - 1);
        put(&b0, b, i, j, get(&x, b, i, j));
      }
  nrt_tensor_view av = a.view;
  if (broadcast_a) av.shape[0] = batch, av.strides[0] = 0;
  nrt_tensor_view v[2] = {x.view, av};
  nrt_op op = op_of(NRT_OP_LINALG_TRIANGULAR_SOLVE, 1, 2, v);
  op.num_scalars = 2;
  op.scalars[0].i = upper, op.scalars[1].i = unit;
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  for (int64_t b = 0; b < batch; b++) {
    int64_t ab = broadcast_a ? 0 : b;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) {
        double s = 0;
        for (int64_t p = upper ? i : 0; p <= (upper ? n - 1 : i); p++)
          s += (p == i && unit ? 1.0 : get(&a, ab, i, p)) * get(&x, b, p, j);
        worst = fmax(worst, fabs(s - get(&b0, b, i, j)));
      }
  }
  const double tol = eps_of(d) * (double)n * 16;
  if (!(worst <= tol))
    fprintf(stderr, "  trsm %s batch %lld n %lld k %lld upper %d unit %d cm %d bcast %d: %g\n",
            nrt_dtype_name(d), (long long)batch, (long long)n, (long long)k, upper, unit, col_major,
            broadcast_a, worst);
  CHECK(worst <= tol);
  nrt_free(a.dev), nrt_free(x.dev), nrt_free(b0.dev);
}

static void test_triangular_solve(void) {
  for (int upper = 0; upper < 2; upper++)
    for (int unit = 0; unit < 2; unit++)
      for (int cm = 0; cm < 3; cm++) {
        trsm_case(NRT_FLOAT32, 3, 20, 5, upper, unit, cm, 0);  /* few columns: dot form */
        trsm_case(NRT_FLOAT32, 2, 30, 20, upper, unit, cm, 0); /* row form */
        trsm_case(NRT_FLOAT64, 2, 33, 1, upper, unit, cm, cm);
        trsm_case(NRT_FLOAT64, 1, 40, 300, upper, unit, cm, 0); /* two column blocks */
      }
  trsm_case(NRT_FLOAT32, 1, 1, 1, 0, 0, 0, 0);
}

/* ---- Cholesky ------------------------------------------------------------ */

static void cholesky_case(nrt_dtype d, int64_t batch, int64_t n, int col_major) {
  mats l = make_mats(d, batch, n, n, col_major), a0 = make_mats(NRT_FLOAT64, batch, n, n, 0);
  mats info = make_mats(NRT_INT32, batch, 1, 1, 0);
  info.view.ndim = 1;
  for (int64_t b = 0; b < batch; b++) {
    /* A = M M^T + n I, symmetric positive definite; the upper triangle of
     * the input holds garbage the kernel must not read */
    double *mm = malloc((size_t)(n * n) * sizeof(double) + 8);
    for (int64_t i = 0; i < n * n; i++) mm[i] = urand() - 0.5;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        double s = i == j ? (double)n : 0;
        for (int64_t p = 0; p < n; p++) s += mm[i * n + p] * mm[j * n + p];
        put(&l, b, i, j, s);
        put(&a0, b, i, j, get(&l, b, i, j));
        put(&a0, b, j, i, get(&l, b, i, j));
        if (j < i) put(&l, b, j, i, 1e30);
      }
    free(mm);
  }
  nrt_tensor_view v[2] = {l.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_CHOLESKY, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  int zeros = 1;
  for (int64_t b = 0; b < batch; b++) {
    CHECK(get(&info, b, 0, 0) == 0);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        if (j > i) zeros &= get(&l, b, i, j) == 0;
        double s = 0;
        for (int64_t p = 0; p <= (i < j ? i : j); p++) s += get(&l, b, i, p) * get(&l, b, j, p);
        worst = fmax(worst, fabs(s - get(&a0, b, i, j)) / (double)n);
      }
  }
  const double tol = eps_of(d) * (double)n * 8;
  if (!(worst <= tol) || !zeros)
    fprintf(stderr, "  cholesky %s batch %lld n %lld cm %d: %g zeros %d\n", nrt_dtype_name(d),
            (long long)batch, (long long)n, col_major, worst, zeros);
  CHECK(worst <= tol);
  CHECK(zeros);
  nrt_free(l.dev), nrt_free(a0.dev), nrt_free(info.dev);
}

static void test_cholesky(void) {
  const int64_t sizes[] = {1, 2, 7, 16, 50, 97};
  for (int s = 0; s < 6; s++)
    for (int cm = 0; cm < 2; cm++) {
      cholesky_case(NRT_FLOAT32, 3, sizes[s], cm);
      cholesky_case(NRT_FLOAT64, 2, sizes[s], cm);
    }
  /* Not positive definite at order 2; a NaN stops at once. */
  mats l = make_mats(NRT_FLOAT64, 2, 2, 2, 0), info = make_mats(NRT_INT32, 2, 1, 1, 0);
  info.view.ndim = 1;
  put(&l, 0, 0, 0, 1), put(&l, 0, 1, 0, 2), put(&l, 0, 1, 1, 1);
  put(&l, 1, 0, 0, NAN), put(&l, 1, 1, 0, 0), put(&l, 1, 1, 1, 1);
  nrt_tensor_view v[2] = {l.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_CHOLESKY, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(get(&info, 0, 0, 0) == 2);
  CHECK(get(&info, 1, 0, 0) == 1);
  op.operands[0].shape[2] = 1; /* not square */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(l.dev), nrt_free(info.dev);
}

/* ---- complex ------------------------------------------------------------- */

static double complex crand(void) {
  const double re = urand() * 2 - 1;
  return CMPLX(re, urand() * 2 - 1);
}
static double abs1(double complex z) { return fabs(creal(z)) + fabs(cimag(z)); }
static double ceps_of(nrt_dtype d) { return d == NRT_COMPLEX64 ? 1.2e-7 : 2.3e-16; }

/* The twin: textbook complex LU in double, pivots by |re| + |im|. */
static int twin_clu(double complex *a, int64_t m, int64_t n, int32_t *piv) {
  int info = 0;
  for (int64_t k = 0; k < (m < n ? m : n); k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; i++)
      if (abs1(a[i * n + k]) > abs1(a[p * n + k])) p = i;
    piv[k] = (int32_t)(p + 1);
    if (a[p * n + k] == 0) {
      if (!info) info = (int)k + 1;
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      double complex t = a[k * n + j];
      a[k * n + j] = a[p * n + j], a[p * n + j] = t;
    }
    for (int64_t i = k + 1; i < m; i++) {
      a[i * n + k] /= a[k * n + k];
      for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= a[i * n + k] * a[k * n + j];
    }
  }
  return info;
}

static void clu_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int col_major) {
  const int64_t k = m < n ? m : n;
  mats a = make_mats(d, batch, m, n, col_major), piv = make_mats(NRT_INT32, batch, k, 1, 0);
  mats info = make_mats(NRT_INT32, batch, 1, 1, 0);
  piv.view.ndim = 2, info.view.ndim = 1;
  double complex *orig = malloc((size_t)(batch * m * n) * sizeof(double complex) + 16);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        cput(&a, b, i, j, crand());
        orig[(b * m + i) * n + j] = cget(&a, b, i, j); /* as stored */
      }
  nrt_tensor_view v[3] = {a.view, piv.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  CHECK_OK(nrt_op_execute(&op));
  double complex *t = malloc((size_t)(m * n) * sizeof(double complex) + 16);
  int32_t *tp = malloc((size_t)k * sizeof(int32_t) + 4);
  double worst_value = 0, worst_residual = 0;
  int pivots_equal = 1;
  for (int64_t b = 0; b < batch; b++) {
    memcpy(t, orig + b * m * n, (size_t)(m * n) * sizeof(double complex));
    CHECK(twin_clu(t, m, n, tp) == (int)get(&info, b, 0, 0));
    for (int64_t i = 0; i < k; i++) pivots_equal &= tp[i] == (int32_t)get(&piv, b, i, 0);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) worst_value = fmax(worst_value, cabs(t[i * n + j] - cget(&a, b, i, j)));
    /* Residual: L U with the row swaps undone is A. */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex s = 0;
        for (int64_t p = 0; p <= (i < j ? i : j) && p < k; p++)
          s += (p == i ? 1.0 : cget(&a, b, i, p)) * cget(&a, b, p, j);
        t[i * n + j] = s;
      }
    for (int64_t r = k - 1; r >= 0; r--) {
      int64_t p = (int64_t)get(&piv, b, r, 0) - 1;
      for (int64_t j = 0; j < n; j++) {
        double complex x = t[r * n + j];
        t[r * n + j] = t[p * n + j], t[p * n + j] = x;
      }
    }
    for (int64_t i = 0; i < m * n; i++)
      worst_residual = fmax(worst_residual, cabs(t[i] - orig[b * m * n + i]));
  }
  const double tol = ceps_of(d) * (double)(m > n ? m : n) * 64;
  if (!pivots_equal || worst_value > tol || worst_residual > tol)
    fprintf(stderr, "  clu %s batch %lld %lld x %lld col_major %d: pivots %d value %g residual %g\n",
            nrt_dtype_name(d), (long long)batch, (long long)m, (long long)n, col_major, pivots_equal,
            worst_value, worst_residual);
  CHECK(pivots_equal);
  CHECK(worst_value <= tol);
  CHECK(worst_residual <= tol);
  free(t), free(tp), free(orig);
  nrt_free(a.dev), nrt_free(piv.dev), nrt_free(info.dev);
}

static void test_complex_lu_matches_twin(void) {
  const int64_t sizes[][2] = {{1, 1}, {3, 3}, {49, 49}, {100, 100}, {9, 5}, {60, 30}, {30, 60}};
  for (int s = 0; s < 7; s++)
    for (int cm = 0; cm < 2; cm++) {
      clu_case(NRT_COMPLEX64, 2, sizes[s][0], sizes[s][1], cm);
      clu_case(NRT_COMPLEX128, 2, sizes[s][0], sizes[s][1], cm);
    }
  /* A zero column: info, as the twin's. */
  mats a = make_mats(NRT_COMPLEX128, 1, 2, 2, 0), piv = make_mats(NRT_INT32, 1, 2, 1, 0),
       info = make_mats(NRT_INT32, 1, 1, 1, 0);
  piv.view.ndim = 2, info.view.ndim = 1;
  cput(&a, 0, 0, 0, 0), cput(&a, 0, 1, 0, 0), cput(&a, 0, 0, 1, CMPLX(1, 2)), cput(&a, 0, 1, 1, 3);
  nrt_tensor_view v[3] = {a.view, piv.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_FACTOR, 3, 3, v);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(get(&info, 0, 0, 0) == 1);
  nrt_free(a.dev), nrt_free(piv.dev), nrt_free(info.dev);
}

static void test_complex_lu_pivot(void) {
  /* 16-byte rows move whole: forward then reverse is the identity. */
  mats x = make_mats(NRT_COMPLEX128, 1, 3, 2, 1), piv = make_mats(NRT_INT32, 1, 2, 1, 0);
  piv.view.ndim = 2;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) cput(&x, 0, i, j, CMPLX(i, j));
  put(&piv, 0, 0, 0, 3), put(&piv, 0, 1, 0, 2);
  nrt_tensor_view v[2] = {x.view, piv.view};
  nrt_op op = op_of(NRT_OP_LINALG_LU_PIVOT, 1, 2, v);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(cget(&x, 0, 0, 1) == CMPLX(2, 1) && cget(&x, 0, 2, 0) == CMPLX(0, 0));
  op.scalars[0].i = 1;
  CHECK_OK(nrt_op_execute(&op));
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) CHECK(cget(&x, 0, i, j) == CMPLX(i, j));
  nrt_free(x.dev), nrt_free(piv.dev);
}

/* Solves A X = B, or conj(A) X = B, and checks the residual. */
static void ctrsm_case(nrt_dtype d, int64_t batch, int64_t n, int64_t k, int upper, int unit, int cj,
                       int layout) {
  mats a = make_mats(d, batch, n, n, layout), x = make_mats(d, batch, n, k, layout != 1);
  double complex *b0 = malloc((size_t)(batch * n * k) * sizeof(double complex) + 16);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        int inside = upper ? j >= i : j <= i;
        cput(&a, b, i, j, i == j ? (unit ? 1e30 : 2 + crand()) : inside ? crand() * 0.5 : 1e30);
      }
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) {
        cput(&x, b, i, j, crand());
        b0[(b * n + i) * k + j] = cget(&x, b, i, j);
      }
  nrt_tensor_view v[2] = {x.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_TRIANGULAR_SOLVE, 1, 2, v);
  op.num_scalars = 3;
  op.scalars[0].i = upper, op.scalars[1].i = unit, op.scalars[2].i = cj;
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) {
        double complex s = 0;
        for (int64_t p = upper ? i : 0; p <= (upper ? n - 1 : i); p++) {
          const double complex aip = p == i && unit ? 1.0 : cget(&a, b, i, p);
          s += (cj ? conj(aip) : aip) * cget(&x, b, p, j);
        }
        worst = fmax(worst, cabs(s - b0[(b * n + i) * k + j]));
      }
  const double tol = ceps_of(d) * (double)n * 16;
  if (!(worst <= tol))
    fprintf(stderr, "  ctrsm %s n %lld k %lld upper %d unit %d conj %d layout %d: %g\n", nrt_dtype_name(d),
            (long long)n, (long long)k, upper, unit, cj, layout, worst);
  CHECK(worst <= tol);
  free(b0);
  nrt_free(a.dev), nrt_free(x.dev);
}

static void test_complex_triangular_solve(void) {
  for (int upper = 0; upper < 2; upper++)
    for (int unit = 0; unit < 2; unit++)
      for (int cj = 0; cj < 2; cj++)
        for (int layout = 0; layout < 3; layout++) {
          ctrsm_case(NRT_COMPLEX64, 2, 20, 3, upper, unit, cj, layout);   /* dot and axpy forms */
          ctrsm_case(NRT_COMPLEX128, 2, 25, 30, upper, unit, cj, layout); /* row form */
        }
}

static void ccholesky_case(nrt_dtype d, int64_t batch, int64_t n, int col_major) {
  mats l = make_mats(d, batch, n, n, col_major), info = make_mats(NRT_INT32, batch, 1, 1, 0);
  info.view.ndim = 1;
  double complex *a0 = malloc((size_t)(batch * n * n) * sizeof(double complex) + 16);
  double complex *mm = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  for (int64_t b = 0; b < batch; b++) {
    /* A = M M^H + n I; the upper triangle and the diagonal's imaginary
     * parts hold garbage the kernel must not read */
    for (int64_t i = 0; i < n * n; i++) mm[i] = crand() * 0.5;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        double complex s = i == j ? (double)n : 0;
        for (int64_t p = 0; p < n; p++) s += mm[i * n + p] * conj(mm[j * n + p]);
        if (i == j) s = creal(s);
        cput(&l, b, i, j, i == j ? s + CMPLX(0, 1e30) : s);
        a0[(b * n + i) * n + j] = i == j ? creal(cget(&l, b, i, j)) : cget(&l, b, i, j);
        a0[(b * n + j) * n + i] = conj(a0[(b * n + i) * n + j]);
        if (j < i) cput(&l, b, j, i, 1e30);
      }
  }
  nrt_tensor_view v[2] = {l.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_CHOLESKY, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  int zeros = 1, real_diagonal = 1;
  for (int64_t b = 0; b < batch; b++) {
    CHECK(get(&info, b, 0, 0) == 0);
    for (int64_t i = 0; i < n; i++) {
      real_diagonal &= cimag(cget(&l, b, i, i)) == 0;
      for (int64_t j = 0; j < n; j++) {
        if (j > i) zeros &= cget(&l, b, i, j) == 0;
        double complex s = 0;
        for (int64_t p = 0; p <= (i < j ? i : j); p++) s += cget(&l, b, i, p) * conj(cget(&l, b, j, p));
        worst = fmax(worst, cabs(s - a0[(b * n + i) * n + j]) / (double)n);
      }
    }
  }
  const double tol = ceps_of(d) * (double)n * 8;
  if (!(worst <= tol) || !zeros || !real_diagonal)
    fprintf(stderr, "  ccholesky %s n %lld cm %d: %g zeros %d real diagonal %d\n", nrt_dtype_name(d),
            (long long)n, col_major, worst, zeros, real_diagonal);
  CHECK(worst <= tol);
  CHECK(zeros);
  CHECK(real_diagonal);
  free(a0), free(mm);
  nrt_free(l.dev), nrt_free(info.dev);
}

static void test_complex_cholesky(void) {
  const int64_t sizes[] = {1, 7, 40};
  for (int s = 0; s < 3; s++)
    for (int cm = 0; cm < 2; cm++) {
      ccholesky_case(NRT_COMPLEX64, 2, sizes[s], cm);
      ccholesky_case(NRT_COMPLEX128, 2, sizes[s], cm);
    }
}

int main(void) {
  RUN(test_lu_matches_twin);
  RUN(test_lu_singular_and_empty);
  RUN(test_lu_pivot);
  RUN(test_triangular_solve);
  RUN(test_cholesky);
  RUN(test_complex_lu_matches_twin);
  RUN(test_complex_lu_pivot);
  RUN(test_complex_triangular_solve);
  RUN(test_complex_cholesky);
  return CHECK_MAIN_RESULT();
}
