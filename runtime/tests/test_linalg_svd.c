/* LINALG_SVD (QR + one-sided Jacobi) against matrices of known singular
 * values, by residuals as LAPACK's tests do, and against a plain twin.
 *
 * Known values: A = P diag(s) Q^T built in double from a chosen descending
 * s (with a repeated value, and zeros for rank-deficient cases) and P, Q
 * products of random Householder reflectors. Checked: S against s,
 * ||A - U diag(S) Vh|| / (||A|| max(m, n) eps), ||U^T U - I|| and
 * ||Vh Vh^T - I|| / (n eps), for square, tall and wide matrices, reduced
 * and full, with and without vectors, row-, column-major and strided
 * storage, batches, zero sizes, non-finite input and refusals; complex64
 * and complex128 the same way with P, Q random unitary (U^H U = I).
 *
 * Twin: a plain one-sided Jacobi on the columns of A itself (no QR, no
 * scaling, no blocking), whose sorted column norms must agree with S.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* q (n x n, row-major) = a product of n random Householder reflectors. */
static void random_orthogonal(double *q, int64_t n) {
  double *v = malloc((size_t)n * sizeof(double) + 8);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) q[i * n + j] = i == j;
  for (int64_t r = 0; r < n; r++) {
    double vv = 0;
    for (int64_t i = 0; i < n; i++) v[i] = urand() * 2 - 1, vv += v[i] * v[i];
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += v[i] * q[i * n + j];
      for (int64_t i = 0; i < n; i++) q[i * n + j] -= 2 * v[i] * s / vv;
    }
  }
  free(v);
}

/* a (m x n) = P diag(s) Q^T. */
static void known_values(double *a, int64_t m, int64_t n, const double *s) {
  const int64_t k = m < n ? m : n;
  double *p = malloc((size_t)(m * m) * sizeof(double) + 8), *q = malloc((size_t)(n * n) * sizeof(double) + 8);
  random_orthogonal(p, m);
  random_orthogonal(q, n);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double t = 0;
      for (int64_t r = 0; r < k; r++) t += p[i * m + r] * s[r] * q[j * n + r];
      a[i * n + j] = t;
    }
  free(p), free(q);
}

/* The twin: singular values of a (m x n, m >= n, row-major, destroyed) by
 * plain one-sided Jacobi on its columns, descending. */
static void plain_singular_values(double *a, int64_t m, int64_t n, double *s) {
  for (int sweep = 0; sweep < 60; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < n; p++)
      for (int64_t q = p + 1; q < n; q++) {
        double al = 0, be = 0, ga = 0;
        for (int64_t i = 0; i < m; i++) {
          al += a[i * n + p] * a[i * n + p];
          be += a[i * n + q] * a[i * n + q];
          ga += a[i * n + p] * a[i * n + q];
        }
        if (al == 0 || be == 0 || fabs(ga) <= 1e-15 * sqrt(al * be)) continue;
        rotated = 1;
        const double zeta = (be - al) / (2 * ga);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        const double c = 1 / sqrt(1 + t * t), sn = c * t;
        for (int64_t i = 0; i < m; i++) {
          const double x = a[i * n + p], y = a[i * n + q];
          a[i * n + p] = c * x - sn * y;
          a[i * n + q] = sn * x + c * y;
        }
      }
    if (!rotated) break;
  }
  for (int64_t j = 0; j < n; j++) {
    double t = 0;
    for (int64_t i = 0; i < m; i++) t += a[i * n + j] * a[i * n + j];
    s[j] = sqrt(t);
  }
  for (int64_t i = 1; i < n; i++)
    for (int64_t j = i; j > 0 && s[j - 1] < s[j]; j--) {
      const double t = s[j];
      s[j] = s[j - 1], s[j - 1] = t;
    }
}

/* rank < min(m, n) makes the trailing values zero; big scales them all. */
static void svd_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int layout, int full, int want_uv,
                     int64_t rank, double big) {
  const int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  mats a = make_mats(d, batch, m, n, layout), a0 = make_mats(NRT_FLOAT64, batch, m, n, 0);
  mats s = make_mats(d, batch, k, 1, 0);
  s.view.ndim = 2;
  mats u = make_mats(d, batch, m, uc, layout == 1 ? 1 : 0), vh = make_mats(d, batch, vr, n, layout);
  double *t = malloc((size_t)(m * n) * sizeof(double) + 8), *sv = malloc((size_t)(batch * k + 1) * sizeof(double));
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < k; i++) sv[b * k + i] = i < rank ? big * (3.0 - 2.5 * (double)i / (double)k) : 0;
    if (rank > 3) sv[b * k + 2] = sv[b * k + 1]; /* a repeated value */
    known_values(t, m, n, sv + b * k);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        put(&a, b, i, j, t[i * n + j]);
        put(&a0, b, i, j, get(&a, b, i, j)); /* the values the kernel sees */
      }
  }
  nrt_tensor_view ov[4] = {s.view, u.view, vh.view, a.view};
  if (!want_uv) ov[1] = a.view;
  nrt_op op = op_of(NRT_OP_LINALG_SVD, want_uv ? 3 : 1, want_uv ? 4 : 2, ov);
  op.num_scalars = 1;
  op.scalars[0].i = full;
  CHECK_OK(nrt_op_execute(&op));
  const double eps = eps_of(d), mx = (double)(m > n ? m : n);
  double worst_s = 0, worst_res = 0, worst_u = 0, worst_v = 0;
  int descending = 1;
  for (int64_t b = 0; b < batch; b++) {
    double anorm = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) anorm = fmax(anorm, fabs(get(&a0, b, i, j)));
    for (int64_t i = 0; i < k; i++) {
      worst_s = fmax(worst_s, fabs(get(&s, b, i, 0) - sv[b * k + i]) / (3 * big));
      if (i) descending &= get(&s, b, i - 1, 0) >= get(&s, b, i, 0);
    }
    if (!want_uv) continue;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double r = 0;
        for (int64_t p = 0; p < k; p++) r += get(&u, b, i, p) * get(&s, b, p, 0) * get(&vh, b, p, j);
        worst_res = fmax(worst_res, fabs(r - get(&a0, b, i, j)) / (anorm > 0 ? anorm * mx : 1));
      }
    for (int64_t i = 0; i < uc; i++)
      for (int64_t j = 0; j < uc; j++) {
        double o = 0;
        for (int64_t p = 0; p < m; p++) o += get(&u, b, p, i) * get(&u, b, p, j);
        worst_u = fmax(worst_u, fabs(o - (i == j)) / (double)m);
      }
    for (int64_t i = 0; i < vr; i++)
      for (int64_t j = 0; j < vr; j++) {
        double o = 0;
        for (int64_t p = 0; p < n; p++) o += get(&vh, b, i, p) * get(&vh, b, j, p);
        worst_v = fmax(worst_v, fabs(o - (i == j)) / (double)n);
      }
  }
  const double tol = 30 * eps;
  if (!(worst_s <= tol * mx && worst_res <= tol && worst_u <= tol && worst_v <= tol && descending))
    fprintf(stderr, "  svd %s batch %lld %lldx%lld layout %d full %d uv %d rank %lld: S %g res %g U %g V %g desc %d\n",
            nrt_dtype_name(d), (long long)batch, (long long)m, (long long)n, layout, full, want_uv,
            (long long)rank, worst_s / eps, worst_res / eps, worst_u / eps, worst_v / eps, descending);
  CHECK(descending);
  CHECK(worst_s <= tol * mx);
  CHECK(worst_res <= tol);
  CHECK(worst_u <= tol);
  CHECK(worst_v <= tol);
  free(t), free(sv);
  nrt_free(a.dev), nrt_free(a0.dev), nrt_free(s.dev), nrt_free(u.dev), nrt_free(vh.dev);
}

static void test_svd_known_values(void) {
  const int64_t dims[][2] = {{1, 1}, {2, 2}, {3, 3}, {8, 8}, {5, 3}, {3, 5}, {40, 7}, {7, 40}, {33, 33}, {1, 6}, {6, 1}};
  for (int c = 0; c < 11; c++)
    for (int layout = 0; layout < 3; layout++)
      for (int full = 0; full < 2; full++) {
        const int64_t m = dims[c][0], n = dims[c][1], k = m < n ? m : n;
        svd_case(NRT_FLOAT32, 3, m, n, layout, full, 1, k, 1.0);
        svd_case(NRT_FLOAT64, 2, m, n, layout, full, 1, k, 1.0);
      }
  svd_case(NRT_FLOAT64, 2, 20, 12, 0, 0, 0, 12, 1.0);
  svd_case(NRT_FLOAT32, 2, 12, 20, 1, 1, 0, 12, 1.0);
}

static void test_svd_rank_deficient_and_scaled(void) {
  for (int full = 0; full < 2; full++) {
    svd_case(NRT_FLOAT64, 2, 9, 9, 0, full, 1, 4, 1.0);
    svd_case(NRT_FLOAT64, 2, 12, 6, 1, full, 1, 2, 1.0);
    svd_case(NRT_FLOAT32, 2, 6, 12, 2, full, 1, 3, 1.0);
    svd_case(NRT_FLOAT64, 1, 5, 7, 0, full, 1, 0, 1.0); /* the zero matrix */
    svd_case(NRT_FLOAT64, 2, 10, 8, 0, full, 1, 8, 1e200);
    svd_case(NRT_FLOAT64, 2, 8, 10, 1, full, 1, 8, 1e-200);
    svd_case(NRT_FLOAT32, 2, 10, 8, 0, full, 1, 8, 1e30);
  }
}

static void test_svd_against_twin(void) {
  const int64_t m = 30, n = 17;
  mats a = make_mats(NRT_FLOAT64, 1, m, n, 1), s = make_mats(NRT_FLOAT64, 1, n, 1, 0);
  s.view.ndim = 2;
  double *t = malloc((size_t)(m * n) * sizeof(double)), *ref = malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      t[i * n + j] = urand() * 2 - 1 + (i == j ? 1e-3 : 0) * (double)j;
      put(&a, 0, i, j, t[i * n + j]);
    }
  plain_singular_values(t, m, n, ref);
  nrt_tensor_view ov[2] = {s.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_SVD, 1, 2, ov);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(get(&s, 0, i, 0) - ref[i]) / ref[0]);
  CHECK(worst <= 1e-14);
  free(t), free(ref);
  nrt_free(a.dev), nrt_free(s.dev);
}

/* Complex: A = P diag(s) Q^H, P and Q random unitary; U^H U = I,
 * Vh Vh^H = I, S real and descending. */
static void svd_complex_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int layout, int full, int want_uv,
                             int64_t rank) {
  const int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  const nrt_dtype rd = d == NRT_COMPLEX64 ? NRT_FLOAT32 : NRT_FLOAT64;
  mats a = make_mats(d, batch, m, n, layout), a0 = make_mats(NRT_COMPLEX128, batch, m, n, 0);
  mats s = make_mats(rd, batch, k, 1, 0);
  s.view.ndim = 2;
  mats u = make_mats(d, batch, m, uc, layout == 1 ? 1 : 0), vh = make_mats(d, batch, vr, n, layout);
  double complex *p = malloc((size_t)(m * m) * sizeof(double complex) + 16);
  double complex *q = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double *sv = malloc((size_t)(batch * k + 1) * sizeof(double));
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < k; i++) sv[b * k + i] = i < rank ? 3.0 - 2.5 * (double)i / (double)k : 0;
    if (rank > 3) sv[b * k + 2] = sv[b * k + 1];
    random_unitary(p, m);
    random_unitary(q, n);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex t = 0;
        for (int64_t r = 0; r < k; r++) t += p[i * m + r] * sv[b * k + r] * conj(q[j * n + r]);
        cput(&a, b, i, j, t);
        cput(&a0, b, i, j, cget(&a, b, i, j));
      }
  }
  nrt_tensor_view ov[4] = {s.view, u.view, vh.view, a.view};
  if (!want_uv) ov[1] = a.view;
  nrt_op op = op_of(NRT_OP_LINALG_SVD, want_uv ? 3 : 1, want_uv ? 4 : 2, ov);
  op.num_scalars = 1;
  op.scalars[0].i = full;
  CHECK_OK(nrt_op_execute(&op));
  const double eps = eps_of(d), mx = (double)(m > n ? m : n);
  double worst_s = 0, worst_res = 0, worst_u = 0, worst_v = 0;
  int descending = 1;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < k; i++) {
      worst_s = fmax(worst_s, fabs(get(&s, b, i, 0) - sv[b * k + i]) / 3);
      if (i) descending &= get(&s, b, i - 1, 0) >= get(&s, b, i, 0);
    }
    if (!want_uv) continue;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex r = 0;
        for (int64_t t = 0; t < k; t++) r += cget(&u, b, i, t) * get(&s, b, t, 0) * cget(&vh, b, t, j);
        worst_res = fmax(worst_res, cabs(r - cget(&a0, b, i, j)) / (3 * mx));
      }
    for (int64_t i = 0; i < uc; i++)
      for (int64_t j = 0; j < uc; j++) {
        double complex o = 0;
        for (int64_t t = 0; t < m; t++) o += conj(cget(&u, b, t, i)) * cget(&u, b, t, j);
        worst_u = fmax(worst_u, cabs(o - (i == j)) / (double)m);
      }
    for (int64_t i = 0; i < vr; i++)
      for (int64_t j = 0; j < vr; j++) {
        double complex o = 0;
        for (int64_t t = 0; t < n; t++) o += cget(&vh, b, i, t) * conj(cget(&vh, b, j, t));
        worst_v = fmax(worst_v, cabs(o - (i == j)) / (double)n);
      }
  }
  const double tol = 30 * eps;
  if (!(worst_s <= tol * mx && worst_res <= tol && worst_u <= tol && worst_v <= tol && descending))
    fprintf(stderr, "  svd %s batch %lld %lldx%lld layout %d full %d uv %d rank %lld: S %g res %g U %g V %g desc %d\n",
            nrt_dtype_name(d), (long long)batch, (long long)m, (long long)n, layout, full, want_uv,
            (long long)rank, worst_s / eps, worst_res / eps, worst_u / eps, worst_v / eps, descending);
  CHECK(descending);
  CHECK(worst_s <= tol * mx);
  CHECK(worst_res <= tol);
  CHECK(worst_u <= tol);
  CHECK(worst_v <= tol);
  free(p), free(q), free(sv);
  nrt_free(a.dev), nrt_free(a0.dev), nrt_free(s.dev), nrt_free(u.dev), nrt_free(vh.dev);
}

static void test_svd_complex(void) {
  const int64_t dims[][2] = {{1, 1}, {2, 2}, {3, 3}, {8, 8}, {5, 3}, {3, 5}, {40, 7}, {7, 40}, {1, 6}, {6, 1}};
  for (int c = 0; c < 10; c++)
    for (int layout = 0; layout < 3; layout++)
      for (int full = 0; full < 2; full++) {
        const int64_t m = dims[c][0], n = dims[c][1], k = m < n ? m : n;
        svd_complex_case(NRT_COMPLEX64, 2, m, n, layout, full, 1, k);
        svd_complex_case(NRT_COMPLEX128, 2, m, n, layout, full, 1, k);
      }
  for (int full = 0; full < 2; full++) { /* rank-deficient: completed null spaces */
    svd_complex_case(NRT_COMPLEX128, 2, 9, 9, 0, full, 1, 4);
    svd_complex_case(NRT_COMPLEX64, 2, 12, 6, 1, full, 1, 2);
    svd_complex_case(NRT_COMPLEX128, 2, 6, 12, 2, full, 1, 3);
    svd_complex_case(NRT_COMPLEX128, 1, 5, 7, 0, full, 1, 0);
  }
  svd_complex_case(NRT_COMPLEX128, 2, 20, 12, 0, 0, 0, 12);
  svd_complex_case(NRT_COMPLEX64, 2, 12, 20, 1, 1, 0, 12);
}

static void test_svd_non_finite(void) {
  mats a = make_mats(NRT_FLOAT64, 1, 3, 3, 0), s = make_mats(NRT_FLOAT64, 1, 3, 1, 0);
  mats u = make_mats(NRT_FLOAT64, 1, 3, 3, 0), vh = make_mats(NRT_FLOAT64, 1, 3, 3, 0);
  s.view.ndim = 2;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 3; j++) put(&a, 0, i, j, i == 1 && j == 2 ? NAN : 1.0);
  nrt_tensor_view ov[4] = {s.view, u.view, vh.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_SVD, 3, 4, ov);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(isnan(get(&s, 0, 0, 0)) && isnan(get(&u, 0, 1, 1)));
  nrt_free(a.dev), nrt_free(s.dev), nrt_free(u.dev), nrt_free(vh.dev);
}

static void test_svd_refusals(void) {
  mats a = make_mats(NRT_FLOAT64, 2, 4, 3, 0), s = make_mats(NRT_FLOAT64, 2, 3, 1, 0);
  mats u = make_mats(NRT_FLOAT64, 2, 4, 3, 0), vh = make_mats(NRT_FLOAT64, 2, 3, 3, 0);
  mats ia = make_mats(NRT_INT32, 2, 4, 3, 0);
  s.view.ndim = 2;
  nrt_tensor_view ov[4] = {s.view, u.view, vh.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_SVD, 3, 4, ov);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  op.scalars[0].i = 1; /* full needs U 4 x 4 */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.scalars[0].i = 0;
  op.operands[3] = ia.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[3] = a.view;
  op.operands[0].dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].dtype = NRT_FLOAT64;
  op.operands[0].shape[1] = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].shape[1] = 3;
  op.num_outputs = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_outputs = 3;
  op.num_scalars = 0;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_scalars = 1;
  op.operands[3].shape[1] = 0, op.operands[0].shape[1] = 0, op.operands[1].shape[1] = 0,
  op.operands[1].shape[2] = 0, op.operands[2].shape[1] = 0; /* A 0 x 3: U 0 x 0, Vh 0 x 3 */
  CHECK_OK(nrt_op_execute(&op));
  nrt_free(a.dev), nrt_free(s.dev), nrt_free(u.dev), nrt_free(vh.dev), nrt_free(ia.dev);
}

int main(void) {
  RUN(test_svd_known_values);
  RUN(test_svd_rank_deficient_and_scaled);
  RUN(test_svd_against_twin);
  RUN(test_svd_complex);
  RUN(test_svd_non_finite);
  RUN(test_svd_refusals);
  return CHECK_MAIN_RESULT();
}
