/* LINALG_EIGH (cyclic Jacobi below n = 64, tridiagonal QL from there: the
 * n = 80 cases) against matrices of known spectrum and by residuals, as
 * LAPACK's tests do.
 *
 * Twin: A = Q diag(w) Q^T built in double from a chosen ascending w
 * (with a repeated value and a negative one) and Q a product of random
 * Householder reflectors, so the exact eigenvalues are known. Checked:
 * W against w, ||A V - V diag(W)|| / (||A|| n eps), ||V^T V - I|| / (n eps),
 * lower and upper triangles (the other holds garbage that must not be read),
 * row-, column-major and strided storage, batches, eigenvalues only,
 * zero sizes and refusals. Complex64/128: the same with A = Q diag(w) Q^H,
 * Q random unitary, V^H V = I, and garbage in the unread triangle and the
 * diagonal's imaginary parts.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* a (n x n, row-major) = Q diag(w) Q^T, Q = H_0 ... H_{n-1} random. */
static void known_spectrum(double *a, int64_t n, const double *w) {
  double *q = malloc((size_t)(n * n) * sizeof(double) + 8), *v = malloc((size_t)n * sizeof(double) + 8);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) q[i * n + j] = i == j;
  for (int64_t r = 0; r < n; r++) {
    double vv = 0;
    for (int64_t i = 0; i < n; i++) v[i] = urand() * 2 - 1, vv += v[i] * v[i];
    for (int64_t j = 0; j < n; j++) { /* q = (I - 2 v v^T / v^T v) q */
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += v[i] * q[i * n + j];
      for (int64_t i = 0; i < n; i++) q[i * n + j] -= 2 * v[i] * s / vv;
    }
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < n; p++) s += q[i * n + p] * w[p] * q[j * n + p];
      a[i * n + j] = s;
    }
  free(q), free(v);
}

/* The verdict of one eigh case: eigenvalues within 30 n eps of the known
 * spectrum, residual and orthogonality within 30 eps, ascending order. */
static void check_eigh_errors(nrt_dtype d, int64_t batch, int64_t n, int layout, int upper, int want_v,
                              const char *vt, double worst_w, double worst_res, double worst_orth,
                              int ascending) {
  const double eps = eps_of(d), tol = 30 * eps;
  if (!(worst_w <= tol * (double)n && worst_res <= tol && worst_orth <= tol && ascending))
    fprintf(stderr, "  eigh %s batch %lld n %lld layout %d upper %d v %d: W %g |AV-VW| %g |%sV-I| %g asc %d\n",
            nrt_dtype_name(d), (long long)batch, (long long)n, layout, upper, want_v, worst_w / eps,
            worst_res / eps, vt, worst_orth / eps, ascending);
  CHECK(ascending);
  CHECK(worst_w <= tol * (double)n);
  CHECK(worst_res <= tol);
  CHECK(worst_orth <= tol);
}

static void eigh_case(nrt_dtype d, int64_t batch, int64_t n, int layout, int upper, int want_v) {
  mats v = make_mats(d, batch, n, n, layout), a0 = make_mats(NRT_FLOAT64, batch, n, n, 0);
  mats w = make_mats(d, batch, n, 1, 0);
  w.view.ndim = 2;
  double *t = malloc((size_t)(n * n) * sizeof(double) + 8), *ws = malloc((size_t)(batch * n) * sizeof(double) + 8);
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) ws[b * n + i] = -3 + 6.0 * (double)i / (double)n;
    if (n > 2) ws[b * n + 1] = ws[b * n + 2]; /* a repeated eigenvalue */
    known_spectrum(t, n, ws + b * n);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        const int read = upper ? j >= i : j <= i;
        put(&v, b, i, j, read ? t[i * n + j] : 1e30);
        put(&a0, b, i, j, t[i * n + j]);
      }
  }
  nrt_tensor_view ov[2] = {w.view, v.view};
  nrt_op op = op_of(NRT_OP_LINALG_EIGH, 2, 2, ov);
  op.num_scalars = 2;
  op.scalars[0].i = upper, op.scalars[1].i = want_v;
  CHECK_OK(nrt_op_execute(&op));
  double worst_w = 0, worst_res = 0, worst_orth = 0;
  int ascending = 1;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) {
      worst_w = fmax(worst_w, fabs(get(&w, b, i, 0) - ws[b * n + i]) / 3);
      if (i) ascending &= get(&w, b, i - 1, 0) <= get(&w, b, i, 0);
    }
    if (!want_v) continue;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0, o = 0;
        for (int64_t p = 0; p < n; p++) {
          s += get(&a0, b, i, p) * get(&v, b, p, j);
          o += get(&v, b, p, i) * get(&v, b, p, j);
        }
        worst_res = fmax(worst_res, fabs(s - get(&v, b, i, j) * get(&w, b, j, 0)) / (3.0 * (double)n));
        worst_orth = fmax(worst_orth, fabs(o - (i == j)) / (double)n);
      }
  }
  check_eigh_errors(d, batch, n, layout, upper, want_v, "Vt", worst_w, worst_res, worst_orth, ascending);
  free(t), free(ws);
  nrt_free(v.dev), nrt_free(a0.dev), nrt_free(w.dev);
}

static void test_eigh_known_spectrum(void) {
  const int64_t sizes[] = {1, 2, 3, 8, 33, 80};
  for (int s = 0; s < 6; s++)
    for (int layout = 0; layout < 3; layout++)
      for (int upper = 0; upper < 2; upper++) {
        eigh_case(NRT_FLOAT32, 3, sizes[s], layout, upper, 1);
        eigh_case(NRT_FLOAT64, 2, sizes[s], layout, upper, 1);
      }
  eigh_case(NRT_FLOAT64, 2, 20, 0, 0, 0);
  eigh_case(NRT_FLOAT32, 2, 20, 1, 1, 0);
}

/* Hermitian: A = Q diag(w) Q^H, Q random unitary; the unread triangle and
 * the diagonal's imaginary parts hold garbage (LAPACK's heevd ignores both). */
static void eigh_complex_case(nrt_dtype d, int64_t batch, int64_t n, int layout, int upper, int want_v) {
  const nrt_dtype rd = d == NRT_COMPLEX64 ? NRT_FLOAT32 : NRT_FLOAT64;
  mats v = make_mats(d, batch, n, n, layout), a0 = make_mats(NRT_COMPLEX128, batch, n, n, 0);
  mats w = make_mats(rd, batch, n, 1, 0);
  w.view.ndim = 2;
  double complex *q = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double *ws = malloc((size_t)(batch * n) * sizeof(double) + 8);
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) ws[b * n + i] = -3 + 6.0 * (double)i / (double)n;
    if (n > 2) ws[b * n + 1] = ws[b * n + 2];
    random_unitary(q, n);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex t = 0;
        for (int64_t p = 0; p < n; p++) t += q[i * n + p] * ws[b * n + p] * conj(q[j * n + p]);
        if (i == j) t = creal(t);
        const int read = upper ? j >= i : j <= i;
        cput(&v, b, i, j, !read ? CMPLX(1e30, -1e30) : i == j ? CMPLX(creal(t), 7.0) : t);
        cput(&a0, b, i, j, t);
      }
  }
  nrt_tensor_view ov[2] = {w.view, v.view};
  nrt_op op = op_of(NRT_OP_LINALG_EIGH, 2, 2, ov);
  op.num_scalars = 2;
  op.scalars[0].i = upper, op.scalars[1].i = want_v;
  CHECK_OK(nrt_op_execute(&op));
  double worst_w = 0, worst_res = 0, worst_orth = 0;
  int ascending = 1;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) {
      worst_w = fmax(worst_w, fabs(get(&w, b, i, 0) - ws[b * n + i]) / 3);
      if (i) ascending &= get(&w, b, i - 1, 0) <= get(&w, b, i, 0);
    }
    if (!want_v) continue;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex s = 0, o = 0;
        for (int64_t p = 0; p < n; p++) {
          s += cget(&a0, b, i, p) * cget(&v, b, p, j);
          o += conj(cget(&v, b, p, i)) * cget(&v, b, p, j);
        }
        worst_res = fmax(worst_res, cabs(s - cget(&v, b, i, j) * get(&w, b, j, 0)) / (3.0 * (double)n));
        worst_orth = fmax(worst_orth, cabs(o - (i == j)) / (double)n);
      }
  }
  check_eigh_errors(d, batch, n, layout, upper, want_v, "Vh", worst_w, worst_res, worst_orth, ascending);
  free(q), free(ws);
  nrt_free(v.dev), nrt_free(a0.dev), nrt_free(w.dev);
}

static void test_eigh_hermitian(void) {
  const int64_t sizes[] = {1, 2, 3, 8, 33, 80};
  for (int s = 0; s < 6; s++)
    for (int layout = 0; layout < 3; layout++)
      for (int upper = 0; upper < 2; upper++) {
        eigh_complex_case(NRT_COMPLEX64, 2, sizes[s], layout, upper, 1);
        eigh_complex_case(NRT_COMPLEX128, 2, sizes[s], layout, upper, 1);
      }
  eigh_complex_case(NRT_COMPLEX128, 2, 20, 0, 0, 0);
  eigh_complex_case(NRT_COMPLEX64, 2, 20, 1, 1, 0);
}

static void test_eigh_refusals(void) {
  mats v = make_mats(NRT_FLOAT64, 2, 3, 3, 0), w = make_mats(NRT_FLOAT64, 2, 3, 1, 0);
  mats iv = make_mats(NRT_INT32, 2, 3, 3, 0);
  w.view.ndim = 2;
  nrt_tensor_view ov[2] = {w.view, v.view};
  nrt_op op = op_of(NRT_OP_LINALG_EIGH, 2, 2, ov);
  op.num_scalars = 2;
  op.operands[1].shape[2] = 2; /* not square */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1] = iv.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[1] = v.view;
  op.operands[0].dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].dtype = NRT_COMPLEX128; /* complex V has real W of its precision */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].dtype = NRT_FLOAT64;
  op.operands[0].dtype = NRT_FLOAT64;
  op.num_scalars = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_scalars = 2;
  op.operands[0].shape[1] = 0, op.operands[1].shape[1] = 0, op.operands[1].shape[2] = 0;
  CHECK_OK(nrt_op_execute(&op));
  nrt_free(v.dev), nrt_free(w.dev), nrt_free(iv.dev);
}

int main(void) {
  RUN(test_eigh_known_spectrum);
  RUN(test_eigh_hermitian);
  RUN(test_eigh_refusals);
  return CHECK_MAIN_RESULT();
}
