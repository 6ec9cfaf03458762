/* LINALG_LDL_FACTOR and LINALG_LDL_SOLVE (Bunch-Kaufman, LAPACK sytrf's
 * convention) by reconstruction and against known factorisations.
 *
 * Twin: the product form LAPACK documents, rebuilt by plain loops from LD
 * and the pivots: A = P_1 L_1 P_2 L_2 ... D ... L_2^T P_2^T L_1^T P_1^T,
 * each P_k one interchange and each L_k the identity with block k's
 * column(s) of L below the block; checked against the input for random
 * symmetric matrices (1x1 and 2x2 pivots, interchanges), with the pivot
 * structure, for float32 and float64, layouts and batches. Known results (LAPACK's):
 * [[0, 1, 2], [1, 0, 3], [2, 3, 0]] pivots [-3, -3, 3]; a diagonally
 * dominant matrix pivots [1, 2, ..., n]; zero gives info 1. Solve: the
 * residual ||A X - B|| against A, batched right-hand sides. Refusals and
 * invalid pivots. The blocked factorisation (n >= 96) against a plain
 * right-looking twin: equal pivots and info, LD within rounding.
 * Complex64/128, symmetric and Hermitian: rebuilt by the complex twin
 * (L D L^T or L D L^H) against the input, zero upper triangle, and the
 * solve's residual. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* Rebuilds A (n x n, row-major) from LD (lower triangle) and pivots. */
static void plain_rebuild(const double *ld, const int32_t *piv, int64_t n, double *a) {
  double *t = malloc((size_t)(n * n) * sizeof(double) + 8), *lk = malloc((size_t)(n * n) * sizeof(double) + 8);
  memset(a, 0, (size_t)(n * n) * sizeof(double));
  int64_t starts[512], sizes[512], blocks = 0;
  for (int64_t k = 0; k < n;) {
    const int64_t s = piv[k] > 0 ? 1 : 2;
    starts[blocks] = k, sizes[blocks++] = s;
    a[k * n + k] = ld[k * n + k];
    if (s == 2) {
      a[(k + 1) * n + k + 1] = ld[(k + 1) * n + k + 1];
      a[(k + 1) * n + k] = a[k * n + k + 1] = ld[(k + 1) * n + k];
    }
    k += s;
  }
  for (int64_t q = blocks - 1; q >= 0; q--) {
    const int64_t k = starts[q], s = sizes[q];
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) lk[i * n + j] = i == j;
    for (int64_t c = k; c < k + s; c++)
      for (int64_t i = k + s; i < n; i++) lk[i * n + c] = ld[i * n + c];
    /* a <- L_k a L_k^T */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double v = 0;
        for (int64_t p = 0; p < n; p++) v += lk[i * n + p] * a[p * n + j];
        t[i * n + j] = v;
      }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double v = 0;
        for (int64_t p = 0; p < n; p++) v += t[i * n + p] * lk[j * n + p];
        a[i * n + j] = v;
      }
    /* a <- P_k a P_k^T, P_k swapping k + s - 1 and |piv| - 1 */
    const int64_t r = k + s - 1, p = (piv[k] > 0 ? piv[k] : -piv[k]) - 1;
    if (p != r) {
      for (int64_t j = 0; j < n; j++) {
        const double x = a[r * n + j];
        a[r * n + j] = a[p * n + j], a[p * n + j] = x;
      }
      for (int64_t i = 0; i < n; i++) {
        const double x = a[i * n + r];
        a[i * n + r] = a[i * n + p], a[i * n + p] = x;
      }
    }
  }
  free(t), free(lk);
}

typedef struct ldl_out {
  mats ld, piv, info;
} ldl_out;

static ldl_out run_factor(nrt_dtype d, int64_t batch, int64_t n, int layout, const double *av) {
  ldl_out o;
  o.ld = make_mats(d, batch, n, n, layout);
  o.piv = make_mats(NRT_INT32, batch, n, 1, 0);
  o.info = make_mats(NRT_INT32, batch, 1, 1, 0);
  o.piv.view.ndim = 2, o.info.view.ndim = 1;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) /* upper triangle garbage: must not be read */
        put(&o.ld, b, i, j, j <= i ? av[(b * n + i) * n + j] : 1e30);
  nrt_tensor_view ov[3] = {o.ld.view, o.piv.view, o.info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LDL_FACTOR, 3, 3, ov);
  CHECK_OK(nrt_op_execute(&op));
  return o;
}

static void free_out(ldl_out *o) { nrt_free(o->ld.dev), nrt_free(o->piv.dev), nrt_free(o->info.dev); }

static double *random_symmetric(int64_t batch, int64_t n, double diag) {
  double *a = malloc((size_t)(batch * n * n) * sizeof(double) + 8);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        const double v = 2 * urand() - 1 + (i == j ? diag : 0);
        a[(b * n + i) * n + j] = a[(b * n + j) * n + i] = v;
      }
  return a;
}

static void test_ldl_factor_rebuilds(void) {
  static const int64_t sizes[] = {1, 2, 3, 7, 20, 45};
  static const double diags[] = {0.0, 0.3, -5.0};
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT32 : NRT_FLOAT64;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
      for (size_t gi = 0; gi < sizeof diags / sizeof *diags; gi++) {
        const int64_t n = sizes[si], batch = 3;
        double *av = random_symmetric(batch, n, diags[gi]);
        for (int64_t t = 0; t < batch * n * n; t++) av[t] = di ? (double)(float)av[t] : av[t];
        ldl_out o = run_factor(d, batch, n, (int)((si + gi) % 3), av);
        double *ld = malloc((size_t)(n * n) * sizeof(double) + 8), *re = malloc((size_t)(n * n) * sizeof(double) + 8);
        int32_t *piv = malloc((size_t)n * sizeof(int32_t) + 8);
        int saw_two = 0;
        for (int64_t b = 0; b < batch; b++) {
          CHECK(get(&o.info, b, 0, 0) == 0);
          double big = 0;
          for (int64_t i = 0; i < n; i++) {
            piv[i] = (int32_t)get(&o.piv, b, i, 0);
            for (int64_t j = 0; j < n; j++) {
              ld[i * n + j] = get(&o.ld, b, i, j);
              if (j > i) CHECK(ld[i * n + j] == 0); /* zeros above */
              big = fmax(big, fabs(av[(b * n + i) * n + j]));
            }
          }
          for (int64_t i = 0; i < n;) { /* pivot structure */
            CHECK(piv[i] != 0);
            if (piv[i] > 0) {
              CHECK(piv[i] >= i + 1 && piv[i] <= n);
              i += 1;
            } else {
              saw_two = 1;
              CHECK(i + 1 < n && piv[i + 1] == piv[i] && -piv[i] >= i + 2 && -piv[i] <= n);
              i += 2;
            }
          }
          plain_rebuild(ld, piv, n, re);
          double err = 0;
          for (int64_t t = 0; t < n * n; t++) err = fmax(err, fabs(re[t] - av[b * n * n + t]));
          const double tol = 200 * eps_of(d) * (double)n * big * (di ? 10 : 1);
          if (!(err <= tol)) fprintf(stderr, "n %lld diag %g dtype %d: error %g\n", (long long)n, diags[gi], di, err);
          CHECK(err <= tol);
        }
        if (n >= 20 && diags[gi] == 0.0) CHECK(saw_two); /* random indefinite matrices take 2x2 pivots */
        free(ld), free(re), free(piv), free(av);
        free_out(&o);
      }
  }
}

/* Plain twin of the unblocked diagonal pivoting (LAPACK's sytf2, lower):
 * right-looking, the whole trailing matrix updated after every step, kept
 * symmetric in full (both triangles) so that rows and columns are swapped
 * plainly. LD and pivots as the kernel writes them. */
static int32_t plain_sytf2(double *a, int64_t n, int32_t *piv) {
  const double alpha = (1 + sqrt(17.0)) / 8;
  int32_t info = 0;
  for (int64_t k = 0; k < n;) {
    int64_t imax = k, kp = k, kstep = 1;
    double colmax = 0;
    for (int64_t i = k + 1; i < n; i++)
      if (fabs(a[i * n + k]) > colmax) colmax = fabs(a[i * n + k]), imax = i;
    const double absakk = fabs(a[k * n + k]);
    if ((absakk == 0 && colmax == 0) || isnan(absakk)) {
      if (!info) info = (int32_t)(k + 1);
      piv[k] = (int32_t)(k + 1);
      k++;
      continue;
    }
    if (absakk < alpha * colmax) {
      double rowmax = 0;
      for (int64_t j = k; j < n; j++)
        if (j != imax) rowmax = fmax(rowmax, fabs(a[imax * n + j]));
      if (absakk >= alpha * colmax * (colmax / rowmax))
        kp = k;
      else if (fabs(a[imax * n + imax]) >= alpha * rowmax)
        kp = imax;
      else
        kp = imax, kstep = 2;
    }
    const int64_t kk = k + kstep - 1;
    if (kp != kk) { /* swap rows and columns kk, kp of the trailing matrix (columns k.. and rows k..) */
      for (int64_t j = k; j < n; j++) {
        const double t = a[kk * n + j];
        a[kk * n + j] = a[kp * n + j], a[kp * n + j] = t;
      }
      for (int64_t i = k; i < n; i++) {
        const double t = a[i * n + kk];
        a[i * n + kk] = a[i * n + kp], a[i * n + kp] = t;
      }
    }
    if (kstep == 1) {
      const double d = a[k * n + k];
      for (int64_t i = k + 1; i < n; i++)
        for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= a[i * n + k] * a[k * n + j] / d;
      for (int64_t i = k + 1; i < n; i++) a[i * n + k] /= d, a[k * n + i] = 0;
      piv[k] = (int32_t)(kp + 1);
    } else {
      const double d11 = a[k * n + k], d21 = a[(k + 1) * n + k], d22 = a[(k + 1) * n + k + 1];
      const double det = d11 * d22 - d21 * d21;
      for (int64_t i = k + 2; i < n; i++) { /* L(i, k:k+2) = A(i, k:k+2) D^-1 */
        const double x0 = a[i * n + k], x1 = a[i * n + k + 1];
        const double l0 = (x0 * d22 - x1 * d21) / det, l1 = (x1 * d11 - x0 * d21) / det;
        for (int64_t j = k + 2; j < n; j++) a[i * n + j] -= l0 * a[k * n + j] + l1 * a[(k + 1) * n + j];
        a[i * n + k] = l0, a[i * n + k + 1] = l1;
      }
      for (int64_t i = k + 2; i < n; i++) a[k * n + i] = a[(k + 1) * n + i] = 0;
      a[k * n + k + 1] = 0;
      piv[k] = piv[k + 1] = (int32_t)(-(kp + 1));
    }
    k += kstep;
  }
  return info;
}

/* The blocked factorisation (n >= 96: several panels, 2x2 pivots and
 * interchanges across panel boundaries) against the plain twin: the same
 * pivots and info, LD within rounding. Also singular matrices. */
static void test_ldl_blocked_twin(void) {
  static const int64_t sizes[] = {96, 131, 200};
  static const double diags[] = {0.0, 0.3, -5.0};
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT32 : NRT_FLOAT64;
    for (int si = 0; si < 3; si++)
      for (int gi = 0; gi < 3; gi++) {
        const int64_t n = sizes[si], batch = 2;
        double *av = random_symmetric(batch, n, diags[gi]);
        for (int64_t t = 0; t < batch * n * n; t++) av[t] = di ? (double)(float)av[t] : av[t];
        if (gi == 1) /* a zero row and column in the second matrix: info */
          for (int64_t i = 0; i < n; i++) av[(n + i) * n + 40] = av[(n + 40) * n + i] = 0;
        ldl_out o = run_factor(d, batch, n, (si + gi) % 3, av);
        double *a = malloc((size_t)(n * n) * sizeof(double) + 8);
        int32_t *piv = malloc((size_t)n * sizeof(int32_t) + 8);
        for (int64_t b = 0; b < batch; b++) {
          memcpy(a, av + b * n * n, (size_t)(n * n) * sizeof(double));
          const int32_t info = plain_sytf2(a, n, piv);
          CHECK(get(&o.info, b, 0, 0) == info);
          if (gi == 1 && b == 1) CHECK(info > 0);
          int same = 1;
          for (int64_t i = 0; i < n; i++) same &= (int32_t)get(&o.piv, b, i, 0) == piv[i];
          CHECK(same);
          double err = 0, big = 1;
          for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j <= i; j++) {
              big = fmax(big, fabs(a[i * n + j]));
              err = fmax(err, fabs(get(&o.ld, b, i, j) - a[i * n + j]));
            }
          const double tol = (di ? 2e-3 : 1e-9) * big;
          if (!(err <= tol)) fprintf(stderr, "blocked ldl n %lld diag %g dtype %d: error %g\n", (long long)n, diags[gi], di, err);
          CHECK(err <= tol);
        }
        free(a), free(piv), free(av);
        free_out(&o);
      }
  }
}

static void test_ldl_known(void) {
  const double a[9] = {0, 1, 2, 1, 0, 3, 2, 3, 0};
  ldl_out o = run_factor(NRT_FLOAT64, 1, 3, 0, a);
  const int32_t want_piv[3] = {-3, -3, 3};
  const double want_ld[9] = {0, 0, 0, 2, 0, 0, 1.5, 0.5, -3};
  for (int i = 0; i < 3; i++) {
    CHECK(get(&o.piv, 0, i, 0) == want_piv[i]);
    for (int j = 0; j < 3; j++) CHECK(fabs(get(&o.ld, 0, i, j) - want_ld[i * 3 + j]) <= 1e-15);
  }
  CHECK(get(&o.info, 0, 0, 0) == 0);
  free_out(&o);
  double *dd = random_symmetric(1, 6, 10.0); /* diagonally dominant: no interchange */
  o = run_factor(NRT_FLOAT64, 1, 6, 1, dd);
  for (int i = 0; i < 6; i++) CHECK(get(&o.piv, 0, i, 0) == i + 1);
  free_out(&o);
  free(dd);
  const double z[4] = {0, 0, 0, 0}, z2[4] = {1, 0, 0, 0};
  o = run_factor(NRT_FLOAT32, 1, 2, 0, z);
  CHECK(get(&o.info, 0, 0, 0) == 1);
  CHECK(get(&o.piv, 0, 0, 0) == 1 && get(&o.piv, 0, 1, 0) == 2);
  free_out(&o);
  o = run_factor(NRT_FLOAT64, 1, 2, 2, z2);
  CHECK(get(&o.info, 0, 0, 0) == 2);
  free_out(&o);
}

static void test_ldl_solve(void) {
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT32 : NRT_FLOAT64;
    const int64_t n = 30, batch = 2, k = 3;
    double *av = random_symmetric(batch, n, 0.0);
    for (int64_t t = 0; t < batch * n * n; t++) av[t] = di ? (double)(float)av[t] : av[t];
    ldl_out o = run_factor(d, batch, n, 1, av);
    mats x = make_mats(d, batch, n, k, 2);
    double *bv = malloc((size_t)(batch * n * k) * sizeof(double) + 8);
    for (int64_t t = 0; t < batch * n * k; t++) bv[t] = 2 * urand() - 1;
    for (int64_t b = 0; b < batch; b++)
      for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < k; c++) put(&x, b, i, c, bv[(b * n + i) * k + c]);
    nrt_tensor_view ov[3] = {x.view, o.ld.view, o.piv.view};
    nrt_op op = op_of(NRT_OP_LINALG_LDL_SOLVE, 1, 3, ov);
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t b = 0; b < batch; b++) {
      double err = 0, xmax = 0;
      for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < k; c++) {
          double r = -bv[(b * n + i) * k + c];
          for (int64_t p = 0; p < n; p++) r += av[(b * n + i) * n + p] * get(&x, b, p, c);
          err = fmax(err, fabs(r));
          xmax = fmax(xmax, fabs(get(&x, b, i, c)));
        }
      CHECK(err <= 1000 * eps_of(d) * (double)n * (1 + xmax));
    }
    /* Invalid pivots (a 2x2 pair that does not match) are refused. */
    int32_t *p0 = (int32_t *)elem(&o.piv, 0, 0, 0);
    const int32_t saved0 = p0[0], saved1 = p0[1];
    p0[0] = -2, p0[1] = -3;
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
    p0[0] = (int32_t)n + 1;
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
    p0[0] = saved0, p0[1] = saved1;
    op.operands[0].shape[1] = n - 1; /* X's rows must be n */
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
    op.operands[0].shape[1] = n;
    op.operands[2].dtype = NRT_INT64;
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
    op.operands[2].dtype = NRT_INT32;
    op.num_operands = 2;
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
    nrt_free(x.dev);
    free(bv), free(av);
    free_out(&o);
  }
}

/* ---- complex ------------------------------------------------------------- */

/* plain_rebuild for complex LD: A = ... L_k D L_k^T ... (L_k^H and a
 * Hermitian D block when herm). */
static void plain_rebuild_c(const double complex *ld, const int32_t *piv, int64_t n, int herm, double complex *a) {
  double complex *t = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double complex *lk = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  memset(a, 0, (size_t)(n * n) * sizeof(double complex));
  int64_t starts[512], sizes[512], blocks = 0;
  for (int64_t k = 0; k < n;) {
    const int64_t s = piv[k] > 0 ? 1 : 2;
    starts[blocks] = k, sizes[blocks++] = s;
    a[k * n + k] = herm ? creal(ld[k * n + k]) : ld[k * n + k];
    if (s == 2) {
      a[(k + 1) * n + k + 1] = herm ? creal(ld[(k + 1) * n + k + 1]) : ld[(k + 1) * n + k + 1];
      a[(k + 1) * n + k] = ld[(k + 1) * n + k];
      a[k * n + k + 1] = herm ? conj(ld[(k + 1) * n + k]) : ld[(k + 1) * n + k];
    }
    k += s;
  }
  for (int64_t q = blocks - 1; q >= 0; q--) {
    const int64_t k = starts[q], s = sizes[q];
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) lk[i * n + j] = i == j;
    for (int64_t c = k; c < k + s; c++)
      for (int64_t i = k + s; i < n; i++) lk[i * n + c] = ld[i * n + c];
    for (int64_t i = 0; i < n; i++) /* a <- L_k a L_k^T (L_k^H) */
      for (int64_t j = 0; j < n; j++) {
        double complex v = 0;
        for (int64_t p = 0; p < n; p++) v += lk[i * n + p] * a[p * n + j];
        t[i * n + j] = v;
      }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex v = 0;
        for (int64_t p = 0; p < n; p++) v += t[i * n + p] * (herm ? conj(lk[j * n + p]) : lk[j * n + p]);
        a[i * n + j] = v;
      }
    const int64_t r = k + s - 1, p = (piv[k] > 0 ? piv[k] : -piv[k]) - 1;
    if (p != r) {
      for (int64_t j = 0; j < n; j++) {
        const double complex x = a[r * n + j];
        a[r * n + j] = a[p * n + j], a[p * n + j] = x;
      }
      for (int64_t i = 0; i < n; i++) {
        const double complex x = a[i * n + r];
        a[i * n + r] = a[i * n + p], a[i * n + p] = x;
      }
    }
  }
  free(t), free(lk);
}

/* Random symmetric or Hermitian matrices (diagonal shifted by diag; zero
 * makes 2x2 pivots and interchanges likely) factored, rebuilt by the twin
 * and compared with the input; then A X = B solved with the factors. The
 * unread upper triangle (and, Hermitian, the diagonal's imaginary parts)
 * hold garbage. */
static void complex_ldl_case(nrt_dtype d, int64_t n, int layout, int herm, double diag) {
  const int64_t batch = 2, k = 3;
  mats ld = make_mats(d, batch, n, n, layout), pv = make_mats(NRT_INT32, batch, n, 1, 0);
  mats info = make_mats(NRT_INT32, batch, 1, 1, 0), x = make_mats(d, batch, n, k, layout);
  pv.view.ndim = 2, info.view.ndim = 1;
  double complex *a = malloc((size_t)(batch * n * n) * sizeof(double complex) + 16);
  double complex *bv = malloc((size_t)(batch * n * k) * sizeof(double complex) + 16);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        double complex v = CMPLX(2 * urand() - 1, 2 * urand() - 1);
        if (i == j) v = herm ? creal(v) + diag : v + diag;
        cput(&ld, b, i, j, v);
        v = cget(&ld, b, i, j); /* the values the kernel sees */
        a[(b * n + i) * n + j] = v;
        a[(b * n + j) * n + i] = herm ? conj(v) : v;
        if (i != j) cput(&ld, b, j, i, CMPLX(1e30, 1e30));
        else if (herm) cput(&ld, b, i, i, CMPLX(creal(v), 5.0));
      }
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) {
        cput(&x, b, i, c, CMPLX(2 * urand() - 1, 2 * urand() - 1));
        bv[(b * n + i) * k + c] = cget(&x, b, i, c);
      }
  nrt_tensor_view fv[3] = {ld.view, pv.view, info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LDL_FACTOR, 3, 3, fv);
  op.num_scalars = 1;
  op.scalars[0].i = herm;
  CHECK_OK(nrt_op_execute(&op));
  nrt_tensor_view sv[3] = {x.view, ld.view, pv.view};
  nrt_op sop = op_of(NRT_OP_LINALG_LDL_SOLVE, 1, 3, sv);
  sop.num_scalars = 1;
  sop.scalars[0].i = herm;
  CHECK_OK(nrt_op_execute(&sop));
  double complex *l = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double complex *r = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  int32_t *piv = malloc((size_t)n * sizeof(int32_t) + 8);
  double worst = 0, worst_x = 0;
  for (int64_t b = 0; b < batch; b++) {
    CHECK(get(&info, b, 0, 0) == 0);
    double anorm = 0;
    for (int64_t i = 0; i < n; i++) {
      piv[i] = (int32_t)get(&pv, b, i, 0);
      for (int64_t j = 0; j < n; j++) {
        l[i * n + j] = cget(&ld, b, i, j);
        anorm = fmax(anorm, cabs(a[(b * n + i) * n + j]));
        if (j > i) CHECK(l[i * n + j] == 0);
      }
    }
    plain_rebuild_c(l, piv, n, herm, r);
    for (int64_t i = 0; i < n * n; i++) worst = fmax(worst, cabs(r[i] - a[b * n * n + i]) / (anorm * (double)n));
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) {
        double complex v = -bv[(b * n + i) * k + c];
        for (int64_t p = 0; p < n; p++) v += a[(b * n + i) * n + p] * cget(&x, b, p, c);
        worst_x = fmax(worst_x, cabs(v) / (anorm * (double)n));
      }
  }
  const double eps = eps_of(d);
  if (!(worst <= 100 * eps && worst_x <= 1e4 * eps))
    fprintf(stderr, "  ldl %s n %lld layout %d herm %d diag %g: rebuild %g solve %g\n", nrt_dtype_name(d),
            (long long)n, layout, herm, diag, worst / eps, worst_x / eps);
  CHECK(worst <= 100 * eps);
  CHECK(worst_x <= 1e4 * eps); /* the residual scales with the condition number */
  free(a), free(bv), free(l), free(r), free(piv);
  nrt_free(ld.dev), nrt_free(pv.dev), nrt_free(info.dev), nrt_free(x.dev);
}

static void test_ldl_complex(void) {
  static const int64_t sizes[] = {1, 2, 3, 7, 20, 45};
  for (int s = 0; s < 6; s++)
    for (int layout = 0; layout < 3; layout++)
      for (int herm = 0; herm < 2; herm++) {
        complex_ldl_case(NRT_COMPLEX128, sizes[s], layout, herm, 0.0);
        complex_ldl_case(NRT_COMPLEX64, sizes[s], layout, herm, 0.0);
        complex_ldl_case(NRT_COMPLEX128, sizes[s], layout, herm, 6.0);
      }
}

static void test_ldl_refusals(void) {
  double a[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  ldl_out o = run_factor(NRT_FLOAT64, 1, 3, 0, a);
  nrt_tensor_view ov[3] = {o.ld.view, o.piv.view, o.info.view};
  nrt_op op = op_of(NRT_OP_LINALG_LDL_FACTOR, 3, 3, ov);
  op.operands[0].shape[2] = 2; /* not square */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].shape[2] = 3;
  op.operands[1].shape[1] = 2; /* pivots hold n values */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].shape[1] = 3;
  op.operands[0].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[0].dtype = NRT_FLOAT64;
  op.operands[2].dtype = NRT_INT64;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[2].dtype = NRT_INT32;
  op.num_operands = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_operands = 3;
  CHECK_OK(nrt_op_execute(&op));
  free_out(&o);
}

int main(void) {
  RUN(test_ldl_factor_rebuilds);
  RUN(test_ldl_blocked_twin);
  RUN(test_ldl_known);
  RUN(test_ldl_solve);
  RUN(test_ldl_complex);
  RUN(test_ldl_refusals);
  return CHECK_MAIN_RESULT();
}
