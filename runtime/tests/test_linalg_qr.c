/* The Householder QR kernels (LINALG_GEQRF, LINALG_ORMQR) against a
 * reference twin and residuals.
 *
 * Twin: textbook unblocked Householder QR in double (one reflector at a
 * time, LAPACK's sign rule beta = -sign(alpha) ||x||), and Q formed
 * explicitly from its reflectors. The kernels block 32 reflectors at a time
 * and run the block updates on the GEMM, so values are compared with a
 * tolerance; factorisations are also checked by their residuals as
 * LAPACK's tests do: ||Q R - A|| / (||A|| max(m, n) eps) and
 * ||Q^T Q - I|| / (m eps). Cases: float32 and float64, row-, column-major
 * and strided storage, sizes across the block size and the blocked
 * threshold, wide and tall, batches, Q C and Q^T C, a broadcast reflector
 * operand, zero sizes, wrong dtypes and shapes. Complex64 and complex128:
 * against a textbook complex twin (LAPACK's zlarfg: complex tau, real
 * beta), with Q formed by ORMQR (Q, Q^H and conj(Q)) checked by Q R = A,
 * Q^H Q = I and Q^H A = R.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* ---- the twin ---------------------------------------------------------------- */

/* Unblocked Householder QR in double on a (m x n, row-major), tau[min(m, n)]. */
static void twin_geqrf(double *a, int64_t m, int64_t n, double *tau) {
  for (int64_t k = 0; k < m && k < n; k++) {
    double xs = 0;
    for (int64_t i = k + 1; i < m; i++) xs += a[i * n + k] * a[i * n + k];
    tau[k] = 0;
    if (xs == 0) continue;
    const double alpha = a[k * n + k], norm = sqrt(alpha * alpha + xs);
    const double beta = signbit(alpha) ? norm : -norm;
    tau[k] = (beta - alpha) / beta;
    for (int64_t i = k + 1; i < m; i++) a[i * n + k] /= alpha - beta;
    a[k * n + k] = beta;
    for (int64_t j = k + 1; j < n; j++) {
      double w = a[k * n + j];
      for (int64_t i = k + 1; i < m; i++) w += a[i * n + k] * a[i * n + j];
      a[k * n + j] -= tau[k] * w;
      for (int64_t i = k + 1; i < m; i++) a[i * n + j] -= tau[k] * a[i * n + k] * w;
    }
  }
}

/* q (m x m) = H_0 ... H_{k-1} from reflectors in the columns of a (m x n). */
static void twin_q(const double *a, int64_t m, int64_t n, int64_t k, const double *tau, double *q) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < m; j++) q[i * m + j] = i == j;
  for (int64_t r = k - 1; r >= 0; r--) /* q = H_r q */
    for (int64_t j = 0; j < m; j++) {
      double w = q[r * m + j];
      for (int64_t i = r + 1; i < m; i++) w += a[i * n + r] * q[i * m + j];
      q[r * m + j] -= tau[r] * w;
      for (int64_t i = r + 1; i < m; i++) q[i * m + j] -= tau[r] * a[i * n + r] * w;
    }
}

/* ---- geqrf and ormqr ----------------------------------------------------------- */

static void qr_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int layout) {
  const int64_t k = m < n ? m : n;
  mats a = make_mats(d, batch, m, n, layout), orig = make_mats(NRT_FLOAT64, batch, m, n, 0);
  mats tau = make_mats(d, batch, k, 1, 0);
  tau.view.ndim = 2;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        put(&a, b, i, j, urand() * 2 - 1);
        put(&orig, b, i, j, get(&a, b, i, j));
      }
  nrt_tensor_view v[2] = {a.view, tau.view};
  nrt_op op = op_of(NRT_OP_LINALG_GEQRF, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));

  /* Q (m x m) through the kernel: Q I, and Q^T applied to Q for the
   * orthogonality check; C = the original A for Q^T A = R. */
  mats q = make_mats(d, batch, m, m, layout == 1), qtq = make_mats(d, batch, m, m, 0);
  mats qta = make_mats(d, batch, m, n, 0);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < m; j++) put(&q, b, i, j, i == j);
      for (int64_t j = 0; j < n; j++) put(&qta, b, i, j, get(&orig, b, i, j));
    }
  nrt_tensor_view ov[3] = {q.view, a.view, tau.view};
  op = op_of(NRT_OP_LINALG_ORMQR, 1, 3, ov);
  op.num_scalars = 1;
  op.scalars[0].i = 0;
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) put(&qtq, b, i, j, get(&q, b, i, j));
  op.operands[0] = qtq.view, op.scalars[0].i = 1;
  CHECK_OK(nrt_op_execute(&op));
  op.operands[0] = qta.view;
  CHECK_OK(nrt_op_execute(&op));

  double *t = malloc((size_t)(m * n) * sizeof(double) + 8), *tt = malloc((size_t)k * sizeof(double) + 8);
  double *tq = malloc((size_t)(m * m) * sizeof(double) + 8);
  double worst_value = 0, worst_q = 0, worst_res = 0, worst_orth = 0, worst_qta = 0;
  for (int64_t b = 0; b < batch; b++) {
    double anorm = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        t[i * n + j] = get(&orig, b, i, j);
        anorm = fmax(anorm, fabs(t[i * n + j]));
      }
    twin_geqrf(t, m, n, tt);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) worst_value = fmax(worst_value, fabs(t[i * n + j] - get(&a, b, i, j)));
    for (int64_t i = 0; i < k; i++) worst_value = fmax(worst_value, fabs(tt[i] - get(&tau, b, i, 0)));
    twin_q(t, m, n, k, tt, tq);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) worst_q = fmax(worst_q, fabs(tq[i * m + j] - get(&q, b, i, j)));
    /* ||Q R - A||, R from the kernel's upper triangle, Q from the kernel. */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p <= j && p < k; p++) s += get(&q, b, i, p) * get(&a, b, p, j);
        worst_res = fmax(worst_res, fabs(s - get(&orig, b, i, j)) / (anorm * (double)(m > n ? m : n)));
        /* Q^T A is R: upper triangle equal, zero below. */
        const double r = i <= j ? get(&a, b, i, j) : 0;
        worst_qta = fmax(worst_qta, fabs(get(&qta, b, i, j) - r) / (anorm * (double)(m > n ? m : n)));
      }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++)
        worst_orth = fmax(worst_orth, fabs(get(&qtq, b, i, j) - (i == j)) / (double)m);
  }
  const double eps = eps_of(d), tol = 30 * eps;
  const double vtol = eps * (double)(m > n ? m : n) * 64;
  if (!(worst_value <= vtol && worst_q <= vtol && worst_res <= tol && worst_orth <= tol && worst_qta <= tol))
    fprintf(stderr, "  qr %s batch %lld %lld x %lld layout %d: value %g Q %g |QR-A| %g |QtQ-I| %g |QtA-R| %g\n",
            nrt_dtype_name(d), (long long)batch, (long long)m, (long long)n, layout, worst_value, worst_q,
            worst_res / eps, worst_orth / eps, worst_qta / eps);
  CHECK(worst_value <= vtol);
  CHECK(worst_q <= vtol);
  CHECK(worst_res <= tol);
  CHECK(worst_orth <= tol);
  CHECK(worst_qta <= tol);
  free(t), free(tt), free(tq);
  nrt_free(a.dev), nrt_free(orig.dev), nrt_free(tau.dev), nrt_free(q.dev), nrt_free(qtq.dev), nrt_free(qta.dev);
}

static void test_qr_matches_twin(void) {
  const int64_t sizes[][2] = {{1, 1}, {2, 1}, {1, 3}, {5, 5}, {17, 9}, {9, 17}, {32, 32}, {33, 33},
                              {100, 100}, {130, 70}, {70, 130}, {200, 65}};
  for (int s = 0; s < 12; s++)
    for (int layout = 0; layout < 3; layout++) {
      qr_case(NRT_FLOAT32, 3, sizes[s][0], sizes[s][1], layout);
      qr_case(NRT_FLOAT64, 2, sizes[s][0], sizes[s][1], layout);
    }
  qr_case(NRT_FLOAT64, 1, 300, 300, 1); /* one matrix: the block updates split across threads */
  qr_case(NRT_FLOAT32, 1, 260, 200, 0);
}

/* A zero column below the diagonal gives tau 0 (no reflection, R keeps the
 * sign of a), and a column that is zero everywhere too. */
static void test_qr_zero_columns(void) {
  mats a = make_mats(NRT_FLOAT64, 1, 3, 3, 0), tau = make_mats(NRT_FLOAT64, 1, 3, 1, 0);
  tau.view.ndim = 2;
  const double m[3][3] = {{-2, 1, 0}, {0, 3, 0}, {0, 4, 0}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) put(&a, 0, i, j, m[i][j]);
  nrt_tensor_view v[2] = {a.view, tau.view};
  nrt_op op = op_of(NRT_OP_LINALG_GEQRF, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(get(&tau, 0, 0, 0) == 0 && get(&a, 0, 0, 0) == -2);
  CHECK(fabs(get(&a, 0, 1, 1) + 5) < 1e-15); /* -sign(3) * 5 */
  CHECK(fabs(get(&tau, 0, 1, 0) - 1.6) < 1e-15);
  CHECK(get(&tau, 0, 2, 0) == 0 && get(&a, 0, 2, 2) == 0);
  nrt_free(a.dev), nrt_free(tau.dev);
}

/* A random C, Q C and Q^T C against the twin's explicit Q, with fewer
 * reflectors than rows, one reflector operand broadcast over the batch and
 * C column-major. */
static void ormqr_case(nrt_dtype d, int64_t batch, int64_t m, int64_t p, int64_t k, int64_t cols, int trans) {
  mats v = make_mats(d, 1, m, p, 0), tau = make_mats(d, 1, k, 1, 0), c = make_mats(d, batch, m, cols, 1);
  mats c0 = make_mats(NRT_FLOAT64, batch, m, cols, 0);
  tau.view.ndim = 2;
  double *tv = malloc((size_t)(m * p) * sizeof(double) + 8), *tt = malloc((size_t)p * sizeof(double) + 8);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < p; j++) tv[i * p + j] = urand() * 2 - 1;
  twin_geqrf(tv, m, p, tt);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < p; j++) {
      put(&v, 0, i, j, i > j ? tv[i * p + j] : 1e30); /* above and on the diagonal: not read */
      tv[i * p + j] = get(&v, 0, i, j);
    }
  for (int64_t j = 0; j < k; j++) {
    put(&tau, 0, j, 0, tt[j]);
    tt[j] = get(&tau, 0, j, 0);
  }
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < cols; j++) {
        put(&c, b, i, j, urand() * 2 - 1);
        put(&c0, b, i, j, get(&c, b, i, j));
      }
  nrt_tensor_view ov[3] = {c.view, v.view, tau.view};
  ov[1].shape[0] = batch, ov[1].strides[0] = 0;
  ov[2].shape[0] = batch, ov[2].strides[0] = 0;
  nrt_op op = op_of(NRT_OP_LINALG_ORMQR, 1, 3, ov);
  op.num_scalars = 1;
  op.scalars[0].i = trans;
  CHECK_OK(nrt_op_execute(&op));
  double *q = malloc((size_t)(m * m) * sizeof(double) + 8);
  twin_q(tv, m, p, k, tt, q);
  double worst = 0;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < cols; j++) {
        double s = 0;
        for (int64_t r = 0; r < m; r++) s += (trans ? q[r * m + i] : q[i * m + r]) * get(&c0, b, r, j);
        worst = fmax(worst, fabs(s - get(&c, b, i, j)));
      }
  const double tol = eps_of(d) * (double)m * 16;
  if (!(worst <= tol))
    fprintf(stderr, "  ormqr %s batch %lld m %lld p %lld k %lld cols %lld trans %d: %g\n", nrt_dtype_name(d),
            (long long)batch, (long long)m, (long long)p, (long long)k, (long long)cols, trans, worst);
  CHECK(worst <= tol);
  free(tv), free(tt), free(q);
  nrt_free(v.dev), nrt_free(tau.dev), nrt_free(c.dev), nrt_free(c0.dev);
}

static void test_ormqr(void) {
  for (int trans = 0; trans < 2; trans++) {
    ormqr_case(NRT_FLOAT64, 3, 7, 5, 5, 4, trans);
    ormqr_case(NRT_FLOAT32, 2, 7, 5, 3, 9, trans);
    ormqr_case(NRT_FLOAT64, 2, 150, 90, 90, 120, trans); /* blocked, a partial last block */
    ormqr_case(NRT_FLOAT32, 1, 150, 150, 70, 150, trans);
    ormqr_case(NRT_FLOAT64, 1, 40, 40, 40, 1, trans);
  }
}

static void test_qr_refusals(void) {
  mats a = make_mats(NRT_FLOAT64, 2, 4, 3, 0), tau = make_mats(NRT_FLOAT64, 2, 3, 1, 0);
  mats c = make_mats(NRT_FLOAT64, 2, 4, 2, 0), ia = make_mats(NRT_INT32, 2, 4, 3, 0);
  tau.view.ndim = 2;
  for (int64_t b = 0; b < 2; b++)
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 3; j++) put(&a, b, i, j, urand());
  nrt_tensor_view v[2] = {a.view, tau.view};
  nrt_op op = op_of(NRT_OP_LINALG_GEQRF, 2, 2, v);
  op.operands[1].shape[1] = 2; /* tau too short */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].shape[1] = 3;
  op.operands[0] = ia.view; /* integer A */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[0] = a.view;
  op.operands[1].shape[0] = 1; /* batch mismatch */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  /* Zero rows: nothing to do, tau empty. */
  op = op_of(NRT_OP_LINALG_GEQRF, 2, 2, v);
  op.operands[0].shape[1] = 0, op.operands[1].shape[1] = 0;
  CHECK_OK(nrt_op_execute(&op));

  nrt_tensor_view ov[3] = {c.view, a.view, tau.view};
  op = op_of(NRT_OP_LINALG_ORMQR, 1, 3, ov);
  op.num_scalars = 1;
  CHECK_OK(nrt_op_execute(&op));
  op.operands[1].shape[1] = 5; /* V's rows differ from C's */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].shape[1] = 4;
  op.operands[2].shape[1] = 4; /* more reflectors than V's columns */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[2].shape[1] = 3;
  op.operands[2].dtype = NRT_FLOAT32; /* tau's dtype */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_scalars = 0;
  op.operands[2].dtype = NRT_FLOAT64;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(a.dev), nrt_free(tau.dev), nrt_free(c.dev), nrt_free(ia.dev);
}

/* ---- complex ------------------------------------------------------------- */


/* The twin: unblocked complex Householder QR in double as LAPACK's zgeqr2
 * (H = I - tau v v^H; H^H applied to the columns after each reflector). */
static void twin_zgeqrf(double complex *a, int64_t m, int64_t n, double complex *tau) {
  for (int64_t k = 0; k < (m < n ? m : n); k++) {
    double xnorm = 0;
    for (int64_t i = k + 1; i < m; i++) xnorm = hypot(xnorm, cabs(a[i * n + k]));
    const double complex alpha = a[k * n + k];
    if (xnorm == 0 && cimag(alpha) == 0) {
      tau[k] = 0;
      continue;
    }
    double beta = hypot(cabs(alpha), xnorm);
    if (!signbit(creal(alpha))) beta = -beta;
    tau[k] = CMPLX((beta - creal(alpha)) / beta, -cimag(alpha) / beta);
    for (int64_t i = k + 1; i < m; i++) a[i * n + k] /= alpha - beta;
    a[k * n + k] = beta;
    for (int64_t j = k + 1; j < n; j++) { /* column j -= conj(tau) v (v^H column j) */
      double complex w = a[k * n + j];
      for (int64_t i = k + 1; i < m; i++) w += conj(a[i * n + k]) * a[i * n + j];
      w *= conj(tau[k]);
      a[k * n + j] -= w;
      for (int64_t i = k + 1; i < m; i++) a[i * n + j] -= a[i * n + k] * w;
    }
  }
}

static void cqr_case(nrt_dtype d, int64_t m, int64_t n, int col_major) {
  const int64_t k = m < n ? m : n;
  mats a = make_mats(d, 1, m, n, col_major), tau = make_mats(d, 1, k, 1, 0);
  tau.view.ndim = 2;
  double complex *orig = malloc((size_t)(m * n) * sizeof(double complex) + 16);
  double complex *t = malloc((size_t)(m * n) * sizeof(double complex) + 16);
  double complex *tt = malloc((size_t)(k + 1) * sizeof(double complex));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const double re = urand() * 2 - 1;
      cput(&a, 0, i, j, CMPLX(re, urand() * 2 - 1));
      orig[i * n + j] = t[i * n + j] = cget(&a, 0, i, j);
    }
  nrt_tensor_view v[2] = {a.view, tau.view};
  nrt_op op = op_of(NRT_OP_LINALG_GEQRF, 2, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  twin_zgeqrf(t, m, n, tt);
  double worst_value = 0;
  int real_diagonal = 1;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) worst_value = fmax(worst_value, cabs(t[i * n + j] - cget(&a, 0, i, j)));
  for (int64_t j = 0; j < k; j++) {
    worst_value = fmax(worst_value, cabs(tt[j] - cget(&tau, 0, j, 0)));
    real_diagonal &= cimag(cget(&a, 0, j, j)) == 0;
  }
  /* Q (m x m) as Q I, conj(Q) I and Q^H A by ORMQR. */
  mats q = make_mats(d, 3, m, m, 0), qa = make_mats(d, 1, m, n, 0);
  for (int64_t b = 0; b < 3; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) cput(&q, b, i, j, i == j);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) cput(&qa, 0, i, j, orig[i * n + j]);
  for (int b = 0; b < 3; b++) {
    nrt_tensor_view ov[3] = {q.view, a.view, tau.view};
    ov[0].shape[0] = 1, ov[0].data = (char *)q.dev + b * q.view.strides[0] * (int64_t)nrt_dtype_size(d);
    if (b == 2) ov[0] = qa.view;
    nrt_op o = op_of(NRT_OP_LINALG_ORMQR, 1, 3, ov);
    o.num_scalars = 2;
    o.scalars[0].i = b == 2, o.scalars[1].i = b == 1;
    CHECK_OK(nrt_op_execute(&o));
  }
  double worst_residual = 0, worst_orth = 0, worst_conj = 0, worst_qha = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < m; j++) {
      double complex s = 0;
      for (int64_t r = 0; r < m; r++) s += conj(cget(&q, 0, r, i)) * cget(&q, 0, r, j);
      worst_orth = fmax(worst_orth, cabs(s - (double)(i == j)));
      worst_conj = fmax(worst_conj, cabs(cget(&q, 1, i, j) - conj(cget(&q, 0, i, j))));
    }
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex s = 0;
      for (int64_t r = 0; r <= (j < k - 1 ? j : k - 1); r++) s += cget(&q, 0, i, r) * cget(&a, 0, r, j);
      worst_residual = fmax(worst_residual, cabs(s - orig[i * n + j]));
      const double complex want = i <= j ? cget(&a, 0, i, j) : 0; /* Q^H A = R */
      worst_qha = fmax(worst_qha, cabs(cget(&qa, 0, i, j) - want));
    }
  const double tol = (d == NRT_COMPLEX64 ? 1.2e-7 : 2.3e-16) * (double)(m > n ? m : n) * 32;
  if (!(worst_value <= tol && worst_residual <= tol && worst_orth <= tol && worst_conj == 0 &&
        worst_qha <= tol && real_diagonal))
    fprintf(stderr, "  cqr %s %lld x %lld cm %d: value %g residual %g orth %g conj %g qha %g real %d\n",
            nrt_dtype_name(d), (long long)m, (long long)n, col_major, worst_value, worst_residual, worst_orth,
            worst_conj, worst_qha, real_diagonal);
  CHECK(worst_value <= tol);
  CHECK(worst_residual <= tol);
  CHECK(worst_orth <= tol);
  CHECK(worst_conj == 0);
  CHECK(worst_qha <= tol);
  CHECK(real_diagonal);
  free(orig), free(t), free(tt);
  nrt_free(a.dev), nrt_free(tau.dev), nrt_free(q.dev), nrt_free(qa.dev);
}

static void test_complex_qr_matches_twin(void) {
  const int64_t sizes[][2] = {{1, 1}, {4, 4}, {9, 5}, {5, 9}, {40, 33}};
  for (int s = 0; s < 5; s++)
    for (int cm = 0; cm < 2; cm++) {
      cqr_case(NRT_COMPLEX64, sizes[s][0], sizes[s][1], cm);
      cqr_case(NRT_COMPLEX128, sizes[s][0], sizes[s][1], cm);
    }
}

int main(void) {
  RUN(test_qr_matches_twin);
  RUN(test_qr_zero_columns);
  RUN(test_ormqr);
  RUN(test_qr_refusals);
  RUN(test_complex_qr_matches_twin);
  return CHECK_MAIN_RESULT();
}
