/* LINALG_MATRIX_EXP against a plain reference twin and closed forms.
 *
 * Twin: a different algorithm on purpose, scaling and squaring with a
 * truncated Taylor series in long double (A / 2^s with ||A / 2^s||_1 <= 1/4,
 * terms until they stop changing the sum, then s squarings), by plain
 * loops. Checked: 1-norms that select each Pade degree (3, 5, 7, 9, 13) and
 * squarings, sizes that stay in loops and that reach the GEMM, float32 and
 * float64, the three layouts, batches (each matrix as alone); closed forms (a diagonal matrix, a
 * rotation generator, a nilpotent matrix, zero); NaN for non-finite input;
 * refusals. Complex64 and complex128 against the same Taylor twin in
 * complex long double, across the degrees and squarings, both layouts. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

#define CHECK_NEAR(x, want, tol) CHECK(fabs((x) - (want)) <= (tol))

static void plain_mul(const long double *a, const long double *b, long double *c, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      long double s = 0;
      for (int64_t p = 0; p < n; p++) s += a[i * n + p] * b[p * n + j];
      c[i * n + j] = s;
    }
}

/* r = exp(a) (n x n, row-major doubles). */
static void plain_expm(const double *a, int64_t n, double *r) {
  const int64_t nn = n * n;
  long double *x = malloc((size_t)nn * sizeof(long double) + 8), *term = malloc((size_t)nn * sizeof(long double) + 8);
  long double *sum = malloc((size_t)nn * sizeof(long double) + 8), *tmp = malloc((size_t)nn * sizeof(long double) + 8);
  double norm = 0;
  for (int64_t j = 0; j < n; j++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs(a[i * n + j]);
    if (s > norm) norm = s;
  }
  int s = 0;
  while (norm / ldexp(1.0, s) > 0.25) s++;
  for (int64_t t = 0; t < nn; t++) x[t] = (long double)a[t] / (long double)ldexp(1.0, s);
  for (int64_t t = 0; t < nn; t++) sum[t] = term[t] = (t / n == t % n);
  for (int k = 1; k < 60; k++) {
    plain_mul(term, x, tmp, n);
    int changed = 0;
    for (int64_t t = 0; t < nn; t++) {
      term[t] = tmp[t] / k;
      const long double before = sum[t];
      sum[t] += term[t];
      changed |= sum[t] != before;
    }
    if (!changed) break;
  }
  for (int q = 0; q < s; q++) {
    plain_mul(sum, sum, tmp, n);
    memcpy(sum, tmp, (size_t)nn * sizeof(long double));
  }
  for (int64_t t = 0; t < nn; t++) r[t] = (double)sum[t];
  free(x), free(term), free(sum), free(tmp);
}

/* exp of a batch (values av, batch x n x n row-major) through the op. */
static mats run_expm(nrt_dtype d, int64_t batch, int64_t n, int layout, const double *av, mats *a_out) {
  mats a = make_mats(d, batch, n, n, layout), e = make_mats(d, batch, n, n, (layout + 1) % 3);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) put(&a, b, i, j, av[(b * n + i) * n + j]);
  nrt_tensor_view ov[2] = {e.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_MATRIX_EXP, 1, 2, ov);
  CHECK_OK(nrt_op_execute(&op));
  *a_out = a;
  return e;
}

/* Random batch with every matrix scaled to 1-norm `norm`. */
static double *random_with_norm(int64_t batch, int64_t n, double norm) {
  double *v = malloc((size_t)(batch * n * n) * sizeof(double) + 8);
  for (int64_t b = 0; b < batch; b++) {
    double *m = v + b * n * n, best = 0;
    for (int64_t t = 0; t < n * n; t++) m[t] = 2 * urand() - 1;
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += fabs(m[i * n + j]);
      if (s > best) best = s;
    }
    for (int64_t t = 0; t < n * n; t++) m[t] *= norm / best;
  }
  return v;
}

static void test_expm_against_twin(void) {
  static const double norms[] = {1e-3, 0.01, 0.2, 0.9, 2.0, 5.0, 12.0, 40.0};
  static const int64_t sizes[] = {1, 2, 5, 17, 48};
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT32 : NRT_FLOAT64;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
      for (size_t ni = 0; ni < sizeof norms / sizeof *norms; ni++) {
        const int64_t n = sizes[si], batch = 2;
        const int layout = (int)((si + ni) % 3);
        double *av = random_with_norm(batch, n, norms[ni]);
        for (int64_t t = 0; t < batch * n * n; t++) av[t] = di ? (double)(float)av[t] : av[t];
        mats a;
        mats e = run_expm(d, batch, n, layout, av, &a);
        double *want = malloc((size_t)(n * n) * sizeof(double) + 8);
        for (int64_t b = 0; b < batch; b++) {
          plain_expm(av + b * n * n, n, want);
          double big = 0, err = 0;
          for (int64_t t = 0; t < n * n; t++) big = fmax(big, fabs(want[t]));
          for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) err = fmax(err, fabs(get(&e, b, i, j) - want[i * n + j]));
          /* the exponential's condition grows with the norm */
          const double tol = (di ? 4e-7 : 64 * eps_of(d) * (double)n) * (1 + norms[ni]);
          if (!(err <= tol * big))
            fprintf(stderr, "dtype %d n %lld norm %g: error %g of %g\n", di, (long long)n, norms[ni], err, big);
          CHECK(err <= tol * big);
        }
        free(want), free(av);
        nrt_free(a.dev), nrt_free(e.dev);
      }
  }
}

static void test_expm_closed_forms(void) {
  /* diag(-1, 0.5, 3): exp of each entry; a rotation generator; a nilpotent
   * Jordan block; zero (the identity). */
  double diag[9] = {-1, 0, 0, 0, 0.5, 0, 0, 0, 3};
  double rot[4] = {0, -2.5, 2.5, 0};
  double nil[9] = {0, 1, 0, 0, 0, 1, 0, 0, 0};
  double zero[9] = {0};
  mats a, e = run_expm(NRT_FLOAT64, 1, 3, 0, diag, &a);
  const double dv[3] = {exp(-1.0), exp(0.5), exp(3.0)};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK_NEAR(get(&e, 0, i, j), i == j ? dv[i] : 0, 1e-14 * dv[2]);
  nrt_free(a.dev), nrt_free(e.dev);
  e = run_expm(NRT_FLOAT64, 1, 2, 1, rot, &a);
  CHECK_NEAR(get(&e, 0, 0, 0), cos(2.5), 1e-14);
  CHECK_NEAR(get(&e, 0, 0, 1), -sin(2.5), 1e-14);
  CHECK_NEAR(get(&e, 0, 1, 0), sin(2.5), 1e-14);
  CHECK_NEAR(get(&e, 0, 1, 1), cos(2.5), 1e-14);
  nrt_free(a.dev), nrt_free(e.dev);
  e = run_expm(NRT_FLOAT64, 1, 3, 2, nil, &a);
  const double want[9] = {1, 1, 0.5, 0, 1, 1, 0, 0, 1};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK_NEAR(get(&e, 0, i, j), want[i * 3 + j], 1e-15);
  nrt_free(a.dev), nrt_free(e.dev);
  e = run_expm(NRT_FLOAT32, 1, 3, 0, zero, &a);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK(get(&e, 0, i, j) == (i == j));
  nrt_free(a.dev), nrt_free(e.dev);
}

static void test_expm_nonfinite_and_batch(void) {
  /* A NaN or an infinity in one matrix gives NaN there only. */
  double *av = random_with_norm(3, 4, 3.0);
  av[16 + 5] = NAN;
  av[32 + 2] = INFINITY;
  mats a, e = run_expm(NRT_FLOAT64, 3, 4, 0, av, &a);
  CHECK(isfinite(get(&e, 0, 1, 1)));
  CHECK(isnan(get(&e, 1, 0, 0)) && isnan(get(&e, 2, 3, 3)));
  nrt_free(a.dev), nrt_free(e.dev);
  free(av);
}

/* Each matrix of a batch split across the kernel threads gives the bits it
 * gives alone. */
static void test_expm_batch_split_independent(void) {
  const int64_t batch = 6, n = 40;
  double *av = random_with_norm(batch, n, 7.0);
  mats a1, a2;
  mats e1 = run_expm(NRT_FLOAT64, batch, n, 0, av, &a1);
  for (int64_t b = 0; b < batch; b++) {
    mats e2 = run_expm(NRT_FLOAT64, 1, n, 0, av + b * n * n, &a2);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) CHECK(get(&e1, b, i, j) == get(&e2, 0, i, j));
    nrt_free(a2.dev), nrt_free(e2.dev);
  }
  nrt_free(a1.dev), nrt_free(e1.dev);
  free(av);
}

static void test_expm_refusals(void) {
  double av[9] = {0};
  mats a, e = run_expm(NRT_FLOAT64, 1, 3, 0, av, &a);
  nrt_tensor_view ov[2] = {e.view, a.view};
  nrt_op op = op_of(NRT_OP_LINALG_MATRIX_EXP, 1, 2, ov);
  op.operands[1].shape[2] = 2; /* not square */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].shape[2] = 3;
  op.operands[0].shape[1] = 2; /* E is not A's shape */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].shape[1] = 3;
  op.operands[1].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[1].dtype = NRT_FLOAT64;
  op.operands[0].dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].dtype = NRT_FLOAT64;
  op.num_operands = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_operands = 2;
  op.operands[0].shape[0] = op.operands[1].shape[0] = 0; /* empty batch */
  CHECK_OK(nrt_op_execute(&op));
  nrt_free(a.dev), nrt_free(e.dev);
}

/* ---- complex ------------------------------------------------------------- */

static void cplain_mul(const long double complex *a, const long double complex *b, long double complex *c,
                       int64_t n) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      long double complex s = 0;
      for (int64_t p = 0; p < n; p++) s += a[i * n + p] * b[p * n + j];
      c[i * n + j] = s;
    }
}

/* The twin: the real twin's Taylor series with squarings, in complex long double. */
static void cplain_expm(const double complex *a, int64_t n, double complex *r) {
  const int64_t nn = n * n;
  long double complex *x = malloc((size_t)(4 * nn) * sizeof(long double complex));
  long double complex *term = x + nn, *sum = term + nn, *t = sum + nn;
  long double norm = 0;
  for (int64_t j = 0; j < n; j++) {
    long double s = 0;
    for (int64_t i = 0; i < n; i++) s += cabsl(a[i * n + j]);
    if (s > norm) norm = s;
  }
  int s = 0;
  while (norm > 0.25L) norm /= 2, s++;
  for (int64_t q = 0; q < nn; q++) {
    x[q] = ldexpl(1.0L, -s) * a[q];
    term[q] = sum[q] = (q % (n + 1) == 0);
  }
  for (int k = 1; k < 60; k++) {
    cplain_mul(term, x, t, n);
    for (int64_t q = 0; q < nn; q++) term[q] = t[q] / k, sum[q] += term[q];
  }
  for (int q = 0; q < s; q++) {
    cplain_mul(sum, sum, t, n);
    memcpy(sum, t, (size_t)nn * sizeof(long double complex));
  }
  for (int64_t q = 0; q < nn; q++) r[q] = (double complex)sum[q];
  free(x);
}

static void test_complex_expm_against_twin(void) {
  const double norms[] = {0.01, 0.2, 0.9, 2.0, 5.0, 40.0}; /* degrees 3 .. 13, then squarings */
  const nrt_dtype dtypes[2] = {NRT_COMPLEX64, NRT_COMPLEX128};
  for (int di = 0; di < 2; di++)
    for (int ni = 0; ni < 6; ni++)
      for (int layout = 0; layout < 2; layout++) {
        const nrt_dtype d = dtypes[di];
        const int64_t n = 7, batch = 2;
        mats a = make_mats(d, batch, n, n, layout), e = make_mats(d, batch, n, n, 1 - layout);
        double complex *av = malloc((size_t)(n * n) * sizeof(double complex)),
                       *want = malloc((size_t)(n * n) * sizeof(double complex));
        double worst = 0;
        for (int64_t b = 0; b < batch; b++) {
          double colmax = 0;
          for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
              const double re = urand() * 2 - 1;
              av[i * n + j] = CMPLX(re, urand() * 2 - 1);
              s += cabs(av[i * n + j]);
            }
            colmax = fmax(colmax, s);
          }
          for (int64_t q = 0; q < n * n; q++) av[q] *= norms[ni] / colmax;
          for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
              char *p = elem(&a, b, i, j);
              if (d == NRT_COMPLEX64) {
                *(float complex *)p = (float complex)av[i * n + j];
                av[i * n + j] = *(float complex *)p; /* as stored */
              } else {
                *(double complex *)p = av[i * n + j];
              }
            }
        }
        nrt_tensor_view ov[2] = {e.view, a.view};
        nrt_op op = op_of(NRT_OP_LINALG_MATRIX_EXP, 1, 2, ov);
        CHECK_OK(nrt_op_execute(&op));
        for (int64_t b = 0; b < batch; b++) {
          for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
              const char *p = elem(&a, b, i, j);
              av[i * n + j] = d == NRT_COMPLEX64 ? (double complex)(*(const float complex *)p)
                                                 : *(const double complex *)p;
            }
          cplain_expm(av, n, want);
          double scale = 0;
          for (int64_t q = 0; q < n * n; q++) scale = fmax(scale, cabs(want[q]));
          for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
              const char *p = elem(&e, b, i, j);
              const double complex got = d == NRT_COMPLEX64 ? (double complex)(*(const float complex *)p)
                                                            : *(const double complex *)p;
              worst = fmax(worst, cabs(got - want[i * n + j]) / scale);
            }
        }
        /* computed in complex128 whatever the dtype: complex64 is one rounding away */
        const double tol = d == NRT_COMPLEX64 ? 2e-7 : 1e-13;
        if (!(worst <= tol))
          fprintf(stderr, "  cexpm %s norm %g layout %d: %g\n", nrt_dtype_name(d), norms[ni], layout, worst);
        CHECK(worst <= tol);
        free(av), free(want);
        nrt_free(a.dev), nrt_free(e.dev);
      }
}

int main(void) {
  RUN(test_expm_against_twin);
  RUN(test_expm_closed_forms);
  RUN(test_expm_nonfinite_and_batch);
  RUN(test_expm_batch_split_independent);
  RUN(test_expm_refusals);
  RUN(test_complex_expm_against_twin);
  return CHECK_MAIN_RESULT();
}
