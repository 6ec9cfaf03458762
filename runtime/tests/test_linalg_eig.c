/* LINALG_EIG against matrices of known spectrum and by residuals, as
 * LAPACK's tests of geev do.
 *
 * Twin: A = Q T Q^H built in double from a chosen T - for real dtypes quasi
 * upper triangular with 1x1 blocks and 2x2 blocks [a b; -b a] (eigenvalues
 * a +- ib), for complex ones upper triangular with complex diagonal - and Q
 * a product of random Householder reflectors (unitary for complex), so the
 * exact eigenvalues are known. Checked: W against them (as sets), complex
 * pairs of real matrices exactly conjugate with the positive imaginary
 * part first, ||A v - w v|| / (||A|| n eps), unit columns whose largest
 * component is real, eigenvalues alone equal to those with vectors, a
 * triangular matrix's order kept, a defective matrix, row-, column-major
 * and strided storage, batches, zero sizes and refusals.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

static int is_complex(nrt_dtype d) { return d == NRT_COMPLEX64 || d == NRT_COMPLEX128; }
static nrt_dtype result_dtype(nrt_dtype d) {
  return d == NRT_FLOAT32 || d == NRT_COMPLEX64 ? NRT_COMPLEX64 : NRT_COMPLEX128;
}
static double complex aget(const mats *a, int64_t b, int64_t i, int64_t j) {
  return is_complex(a->view.dtype) ? cget(a, b, i, j) : get(a, b, i, j);
}
static void aput(mats *a, int64_t b, int64_t i, int64_t j, double complex x) {
  if (is_complex(a->view.dtype))
    cput(a, b, i, j, x);
  else
    put(a, b, i, j, creal(x));
}

/* a (n x n, row-major) = Q t Q^H, Q = H_0 ... H_{n-1} random reflectors
 * (complex ones when cplx). */
static void similar(double complex *a, const double complex *t, int64_t n, int cplx) {
  double complex *q = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double complex *v = malloc((size_t)n * sizeof(double complex) + 16);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) q[i * n + j] = i == j;
  for (int64_t r = 0; r < n; r++) {
    double vv = 0;
    for (int64_t i = 0; i < n; i++) {
      v[i] = (urand() * 2 - 1) + (cplx ? I * (urand() * 2 - 1) : 0);
      vv += creal(v[i] * conj(v[i]));
    }
    for (int64_t j = 0; j < n; j++) { /* q = (I - 2 v v^H / v^H v) q */
      double complex s = 0;
      for (int64_t i = 0; i < n; i++) s += conj(v[i]) * q[i * n + j];
      for (int64_t i = 0; i < n; i++) q[i * n + j] -= 2 * v[i] * s / vv;
    }
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex s = 0;
      for (int64_t p = 0; p < n; p++)
        for (int64_t k = 0; k < n; k++) s += q[i * n + p] * t[p * n + k] * conj(q[j * n + k]);
      a[i * n + j] = s;
    }
  free(q), free(v);
}

/* A chosen Schur form and its eigenvalues (pairs: positive part first). */
static void schur_form(double complex *t, double complex *lam, int64_t n, int cplx) {
  memset(t, 0, (size_t)(n * n) * sizeof(double complex));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i + 1; j < n; j++) t[i * n + j] = 0.5 * (urand() - 0.5) + (cplx ? 0.5 * I * (urand() - 0.5) : 0);
  for (int64_t i = 0; i < n; i++) {
    const double re = -3 + 6.0 * (double)i / (double)n;
    if (!cplx && i + 1 < n && i % 3 == 0) { /* a 2x2 block re +- i im */
      const double im = 0.5 + (double)i / (double)n;
      t[i * n + i] = t[(i + 1) * n + i + 1] = re;
      t[i * n + i + 1] = im, t[(i + 1) * n + i] = -im;
      lam[i] = re + I * im, lam[i + 1] = re - I * im;
      i++;
    } else {
      t[i * n + i] = lam[i] = re + (cplx ? I * (urand() * 2 - 1) : 0);
    }
  }
}

/* max over the computed w of the distance to the nearest unused exact one. */
static double set_distance(const double complex *w, const double complex *exact, int64_t n) {
  char *used = calloc((size_t)n + 1, 1);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t best = -1;
    for (int64_t j = 0; j < n; j++)
      if (!used[j] && (best < 0 || cabs(w[i] - exact[j]) < cabs(w[i] - exact[best]))) best = j;
    used[best] = 1;
    worst = fmax(worst, cabs(w[i] - exact[best]));
  }
  free(used);
  return worst;
}

typedef struct eig_out {
  mats w, info, v;
} eig_out;

static eig_out run_eig(const mats *a, int want_v, nrt_status expect) {
  const int64_t batch = a->view.shape[0], n = a->view.shape[2];
  eig_out o;
  o.w = make_mats(result_dtype(a->view.dtype), batch, n, 1, 0);
  o.w.view.ndim = 2;
  o.info = make_mats(NRT_INT32, batch, 1, 1, 0);
  o.info.view.ndim = 1;
  o.v = make_mats(result_dtype(a->view.dtype), batch, n, n, 1);
  nrt_tensor_view ov[4] = {o.w.view, o.info.view, o.v.view, a->view};
  if (!want_v) ov[2] = a->view;
  nrt_op op = op_of(NRT_OP_LINALG_EIG, want_v ? 3 : 2, want_v ? 4 : 3, ov);
  CHECK_STATUS(nrt_op_execute(&op), expect);
  return o;
}

static void free_out(eig_out *o) { nrt_free(o->w.dev), nrt_free(o->info.dev), nrt_free(o->v.dev); }

static void eig_case(nrt_dtype d, int64_t batch, int64_t n, int layout) {
  const int cplx = is_complex(d);
  mats a = make_mats(d, batch, n, n, layout);
  double complex *t = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double complex *x = malloc((size_t)(n * n) * sizeof(double complex) + 16);
  double complex *lam = malloc((size_t)(batch * n) * sizeof(double complex) + 16);
  double complex *w = malloc((size_t)n * sizeof(double complex) + 16);
  double *anorm = malloc((size_t)batch * sizeof(double) + 8);
  for (int64_t b = 0; b < batch; b++) {
    schur_form(t, lam + b * n, n, cplx);
    similar(x, t, n, cplx);
    anorm[b] = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) aput(&a, b, i, j, x[i * n + j]), anorm[b] = fmax(anorm[b], cabs(x[i * n + j]));
  }
  eig_out o = run_eig(&a, 1, NRT_SUCCESS), e = run_eig(&a, 0, NRT_SUCCESS);
  const double eps = eps_of(d == NRT_COMPLEX64 ? NRT_FLOAT32 : d == NRT_COMPLEX128 ? NRT_FLOAT64 : d);
  double worst_w = 0, worst_res = 0, worst_norm = 0, worst_only = 0, worst_phase = 0;
  int conj_pairs = 1, info_zero = 1;
  for (int64_t b = 0; b < batch; b++) {
    info_zero &= *(int32_t *)elem(&o.info, b, 0, 0) == 0 && *(int32_t *)elem(&e.info, b, 0, 0) == 0;
    for (int64_t i = 0; i < n; i++) w[i] = cget(&o.w, b, i, 0);
    worst_w = fmax(worst_w, set_distance(w, lam + b * n, n) / anorm[b]);
    for (int64_t i = 0; i < n; i++) x[i] = cget(&e.w, b, i, 0);
    worst_only = fmax(worst_only, set_distance(x, w, n) / anorm[b]);
    for (int64_t k = 0; k < n; k++) {
      if (!cplx && cimag(w[k]) != 0 && (k == 0 || w[k - 1] != conj(w[k]))) {
        /* a pair's first: w[k+1] = conj(w[k]), and so their vectors */
        int ok = cimag(w[k]) > 0 && k + 1 < n && w[k + 1] == conj(w[k]);
        for (int64_t i = 0; ok && i < n; i++) ok = cget(&o.v, b, i, k + 1) == conj(cget(&o.v, b, i, k));
        conj_pairs &= ok;
      }
      double norm = 0, big = 0, phase = INFINITY;
      for (int64_t i = 0; i < n; i++) {
        double complex s = 0;
        for (int64_t p = 0; p < n; p++) s += aget(&a, b, i, p) * cget(&o.v, b, p, k);
        const double complex vi = cget(&o.v, b, i, k);
        worst_res = fmax(worst_res, cabs(s - w[k] * vi) / (anorm[b] * (double)n));
        norm += creal(vi * conj(vi));
        big = fmax(big, cabs(vi));
      }
      for (int64_t i = 0; i < n; i++) /* some component of the largest modulus is real */
        if (cabs(cget(&o.v, b, i, k)) >= big * (1 - 1e-5)) phase = fmin(phase, fabs(cimag(cget(&o.v, b, i, k))));
      worst_norm = fmax(worst_norm, fabs(sqrt(norm) - 1) / (double)n);
      worst_phase = fmax(worst_phase, phase);
    }
  }
  const double tol = 30 * eps;
  if (!(worst_w <= 100 * tol && worst_res <= tol && worst_norm <= tol && worst_only <= 100 * tol &&
        worst_phase <= tol && conj_pairs && info_zero))
    fprintf(stderr, "  eig %s batch %lld n %lld layout %d: W %g |AV-VW| %g |v|-1 %g only %g phase %g conj %d\n",
            nrt_dtype_name(d), (long long)batch, (long long)n, layout, worst_w / eps, worst_res / eps,
            worst_norm / eps, worst_only / eps, worst_phase / eps, conj_pairs);
  CHECK(info_zero);
  CHECK(worst_w <= 100 * tol);
  CHECK(worst_res <= tol);
  CHECK(worst_norm <= tol);
  CHECK(worst_only <= 100 * tol);
  CHECK(worst_phase <= tol);
  CHECK(conj_pairs);
  free_out(&o), free_out(&e);
  nrt_free(a.dev);
  free(t), free(x), free(lam), free(w), free(anorm);
}

static void test_eig_known_spectrum(void) {
  const nrt_dtype dtypes[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_COMPLEX64, NRT_COMPLEX128};
  const int64_t sizes[] = {1, 2, 3, 7, 24};
  for (int d = 0; d < 4; d++)
    for (int s = 0; s < 5; s++)
      for (int layout = 0; layout < 3; layout++) eig_case(dtypes[d], s == 4 ? 1 : 3, sizes[s], layout);
  eig_case(NRT_FLOAT64, 1, 60, 0);
  eig_case(NRT_COMPLEX128, 1, 60, 0);
}

/* An upper triangular matrix is its own Schur form: its diagonal, in order. */
static void test_eig_triangular_keeps_order(void) {
  const nrt_dtype dtypes[] = {NRT_FLOAT64, NRT_COMPLEX64};
  for (int d = 0; d < 2; d++) {
    const int64_t n = 6;
    mats a = make_mats(dtypes[d], 1, n, n, 0);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        aput(&a, 0, i, j, j < i ? 0 : (urand() * 2 - 1) + (is_complex(dtypes[d]) ? I * urand() : 0));
    eig_out o = run_eig(&a, 1, NRT_SUCCESS);
    for (int64_t i = 0; i < n; i++) CHECK(cabs(cget(&o.w, 0, i, 0) - aget(&a, 0, i, i)) <= 1e-6);
    free_out(&o);
    nrt_free(a.dev);
  }
}

/* Balancing: a lower triangular matrix's eigenvalues come out in reverse
 * (geev's permutations), and a matrix scaled by D = diag(2^e_i), e_i up to
 * +-20, keeps its eigenvalues to the accuracy of the unscaled one, which
 * the QR iteration alone would lose to ||D A D^-1|| ~ 2^40 ||A||. */
static void test_eig_balancing(void) {
  const int64_t n = 6;
  mats a = make_mats(NRT_FLOAT64, 1, n, n, 0);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) put(&a, 0, i, j, j > i ? 0 : urand() * 2 - 1);
  eig_out o = run_eig(&a, 1, NRT_SUCCESS);
  for (int64_t i = 0; i < n; i++) CHECK(cabs(cget(&o.w, 0, i, 0) - get(&a, 0, n - 1 - i, n - 1 - i)) <= 1e-12);
  free_out(&o);
  nrt_free(a.dev);
  const nrt_dtype dtypes[] = {NRT_FLOAT64, NRT_COMPLEX128};
  for (int d = 0; d < 2; d++) {
    const int64_t m = 8;
    double complex *t = malloc(sizeof(double complex) * (size_t)(m * m));
    double complex *x = malloc(sizeof(double complex) * (size_t)(m * m));
    double complex *lam = malloc(sizeof(double complex) * (size_t)m), *w = malloc(sizeof(double complex) * (size_t)m);
    mats b = make_mats(dtypes[d], 1, m, m, 0);
    schur_form(t, lam, m, d);
    similar(x, t, m, d);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) /* D A D^-1, D = diag(2^(40 i / (m - 1))) */
        aput(&b, 0, i, j, x[i * m + j] * ldexp(1.0, (int)(40 * i / (m - 1) - 40 * j / (m - 1))));
    eig_out e = run_eig(&b, 1, NRT_SUCCESS);
    for (int64_t i = 0; i < m; i++) w[i] = cget(&e.w, 0, i, 0);
    CHECK(set_distance(w, lam, m) <= 1e-12);
    free_out(&e);
    nrt_free(b.dev);
    free(t), free(x), free(lam), free(w);
  }
}

/* A Jordan block (defective: one eigenvector) and a zero matrix converge,
 * with finite unit vectors. */
static void test_eig_defective(void) {
  const int64_t n = 5;
  mats a = make_mats(NRT_FLOAT64, 2, n, n, 0);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) put(&a, 0, i, j, i == j ? 2.0 : j == i + 1), put(&a, 1, i, j, 0);
  eig_out o = run_eig(&a, 1, NRT_SUCCESS);
  for (int64_t b = 0; b < 2; b++)
    for (int64_t k = 0; k < n; k++) {
      CHECK(cabs(cget(&o.w, b, k, 0) - (b ? 0 : 2)) <= 1e-2); /* perturbed by eps^(1/n) */
      double norm = 0;
      for (int64_t i = 0; i < n; i++) norm += pow(cabs(cget(&o.v, b, i, k)), 2);
      CHECK(fabs(sqrt(norm) - 1) <= 1e-12);
    }
  free_out(&o);
  nrt_free(a.dev);
}

static void test_eig_refusals(void) {
  mats a = make_mats(NRT_FLOAT64, 2, 3, 3, 0), ia = make_mats(NRT_INT32, 2, 3, 3, 0);
  for (int64_t b = 0; b < 2; b++)
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 3; j++) put(&a, b, i, j, urand());
  eig_out o = run_eig(&a, 1, NRT_SUCCESS);
  nrt_tensor_view ov[4] = {o.w.view, o.info.view, o.v.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_EIG, 3, 4, ov);
  op.operands[3].shape[2] = 2; /* not square */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[3] = ia.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[3] = a.view;
  op.operands[0].dtype = NRT_COMPLEX64; /* float64 A gives complex128 */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].dtype = NRT_COMPLEX128;
  op.num_operands = 3; /* A missing */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_operands = 4;
  op.operands[1].shape[0] = 3; /* info's batch */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].shape[0] = 2;
  for (int k = 0; k < 4; k++) op.operands[k].shape[0] = 0; /* no matrices */
  CHECK_OK(nrt_op_execute(&op));
  for (int k = 0; k < 4; k++) op.operands[k].shape[0] = 2;
  op.operands[0].shape[1] = 0; /* 0 x 0 matrices: info 0 */
  op.operands[2].shape[1] = op.operands[2].shape[2] = op.operands[3].shape[1] = op.operands[3].shape[2] = 0;
  *(int32_t *)elem(&o.info, 1, 0, 0) = 7;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(*(int32_t *)elem(&o.info, 1, 0, 0) == 0);
  free_out(&o);
  nrt_free(a.dev), nrt_free(ia.dev);
}

int main(void) {
  RUN(test_eig_known_spectrum);
  RUN(test_eig_triangular_keeps_order);
  RUN(test_eig_balancing);
  RUN(test_eig_defective);
  RUN(test_eig_refusals);
  return CHECK_MAIN_RESULT();
}
