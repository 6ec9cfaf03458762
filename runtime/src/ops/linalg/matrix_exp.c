/* LINALG_MATRIX_EXP (layout in neuronrt/ops/linalg.h): the matrix
 * exponential by scaling and squaring with a diagonal Pade approximant
 * (Higham, "The scaling and squaring method for the matrix exponential
 * revisited", SIAM J. Matrix Anal. Appl. 26(4), 2005):
 *   the degree m in {3, 5, 7, 9, 13} is the smallest whose bound theta_m
 *   (the largest 1-norm for which r_m(A) = q_m(A)^-1 p_m(A) has backward
 *   error below the unit roundoff of double) is at least ||A||_1; above
 *   theta_13, A is scaled by 2^-s with s = ceil(log2(||A||_1 / theta_13))
 *   and r_13(A / 2^s) squared s times.
 * p_m(x) = sum_j c_j x^j with c_j = (2m-j)! m! / ((2m)! j! (m-j)!) and
 * q_m(x) = p_m(-x); with U the odd part of p_m(A) and V the even part,
 * r_m(A) = (V - U)^-1 (V + U), solved by LU with partial pivoting. Each
 * matrix is computed in double (float32 inputs too, rounded once at the
 * end); the matrix products run on the runtime's GEMM (qr_t.h's la_gemm,
 * loops for small products), one matrix per thread across the batch. A
 * matrix with a non-finite entry gives NaN. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"
#include "ops/linalg/qr.h"

/* Higham 2005, Table 2.3 (double): theta_m for m = 3, 5, 7, 9, 13. */
static const int kExpDegree[5] = {3, 5, 7, 9, 13};
static const double kExpTheta[5] = {1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                                    2.097847961257068e0, 5.371920351148152e0};

typedef struct expm_job {
  const nrt_tensor_view *e, *a;
  int64_t n;
  la_failure failure;
} expm_job;

/* c[0..m] of the degree-m diagonal Pade approximant's numerator. */
static void pade_coefficients(int m, double *c) {
  c[0] = 1;
  for (int j = 1; j <= m; j++) c[j] = c[j - 1] * (double)(m - j + 1) / ((double)j * (double)(2 * m - j + 1));
}

/* dst = sum_i w[i] * p[i] (n x n each; p[0] is the identity, not read). */
static void combine(double *dst, int64_t n, const double *w, double *const *p, int count) {
  const int64_t nn = n * n;
  for (int64_t t = 0; t < nn; t++) dst[t] = 0;
  for (int64_t i = 0; i < n; i++) dst[i * n + i] = w[0];
  for (int q = 1; q < count; q++) {
    if (w[q] == 0) continue;
    for (int64_t t = 0; t < nn; t++) dst[t] += w[q] * p[q][t];
  }
}

/* c = a b (n x n, row-major); beta 1 adds to c. */
static void mul(int64_t n, const double *a, const double *b, double beta, double *c) {
  la_gemm_f64(n, n, n, 1.0, a, n, 1, b, n, beta, c, n);
}

/* r = exp(a) (n x n, row-major; a is overwritten). w holds 7 n^2 doubles,
 * piv n ints. */
static void la_matrix_exp_f64(double *a, int64_t n, double *r, double *w, int32_t *piv) {
  const int64_t nn = n * n;
  double norm = 0;
  for (int64_t j = 0; j < n; j++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs(a[i * n + j]);
    if (!(s <= norm)) norm = s; /* also takes a NaN */
  }
  if (!isfinite(norm)) {
    for (int64_t t = 0; t < nn; t++) r[t] = NAN;
    return;
  }
  int d = 4, s = 0;
  for (int q = 0; q < 4; q++)
    if (norm <= kExpTheta[q]) {
      d = q;
      break;
    }
  if (d == 4 && norm > kExpTheta[4]) {
    s = (int)ceil(log2(norm / kExpTheta[4]));
    if (s < 0) s = 0;
    for (int64_t t = 0; t < nn; t++) a[t] = ldexp(a[t], -s);
  }
  const int m = kExpDegree[d];
  double c[14];
  pade_coefficients(m, c);
  /* Even powers A^2, A^4, A^6 (A^8 for m = 9) in w; U and V after them. */
  double *p[5] = {NULL, w, w + nn, w + 2 * nn, w + 3 * nn};
  double *u = w + 4 * nn, *v = w + 5 * nn, *t = w + 6 * nn;
  const int powers = m == 13 ? 3 : (m - 1) / 2; /* highest even power / 2 */
  mul(n, a, a, 0, p[1]);
  if (powers >= 2) mul(n, p[1], p[1], 0, p[2]);
  if (powers >= 3) mul(n, p[2], p[1], 0, p[3]);
  if (powers >= 4) mul(n, p[2], p[2], 0, p[4]);
  if (m < 13) {
    double wu[5], wv[5];
    for (int q = 0; q <= powers; q++) wu[q] = c[2 * q + 1], wv[q] = c[2 * q];
    combine(t, n, wu, p, powers + 1);
    combine(v, n, wv, p, powers + 1);
  } else {
    /* U = A [A^6 (c13 A^6 + c11 A^4 + c9 A^2) + c7 A^6 + c5 A^4 + c3 A^2 + c1 I],
     * V = A^6 (c12 A^6 + c10 A^4 + c8 A^2) + c6 A^6 + c4 A^4 + c2 A^2 + c0 I. */
    const double hu[4] = {0, c[9], c[11], c[13]}, lu[4] = {c[1], c[3], c[5], c[7]};
    const double hv[4] = {0, c[8], c[10], c[12]}, lv[4] = {c[0], c[2], c[4], c[6]};
    combine(u, n, hu, p, 4);
    combine(t, n, lu, p, 4);
    mul(n, p[3], u, 1, t);
    combine(u, n, hv, p, 4);
    combine(v, n, lv, p, 4);
    mul(n, p[3], u, 1, v);
  }
  mul(n, a, t, 0, u);
  /* (V - U) R = V + U */
  for (int64_t q = 0; q < nn; q++) {
    const double vq = v[q], uq = u[q];
    t[q] = vq - uq;
    r[q] = vq + uq;
  }
  la_lu_f64(t, n, n, piv);
  for (int64_t i = 0; i < n; i++) {
    const int64_t pi = piv[i] - 1;
    if (pi != i)
      for (int64_t j = 0; j < n; j++) {
        const double x = r[i * n + j];
        r[i * n + j] = r[pi * n + j];
        r[pi * n + j] = x;
      }
  }
  la_trsm_f64((const char *)t, n, 1, n, r, n, /*upper=*/0, /*unit=*/1);
  la_trsm_f64((const char *)t, n, 1, n, r, n, /*upper=*/1, /*unit=*/0);
  for (int q = 0; q < s; q++) { /* r <- r^2, through t */
    mul(n, r, r, 0, t);
    memcpy(r, t, (size_t)nn * sizeof(double));
  }
}

static void expm_range(int64_t begin, int64_t end, void *ctx) {
  expm_job *job = ctx;
  const int64_t n = job->n, nn = n * n;
  const size_t bytes = (size_t)(9 * nn) * sizeof(double) + (size_t)n * sizeof(int32_t) + 8;
  double *buf = malloc(bytes);
  if (!buf) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)bytes);
    return;
  }
  double *a = buf, *r = a + nn, *w = r + nn;
  int32_t *piv = (int32_t *)(w + 7 * nn);
  const nrt_tensor_view *av = job->a, *ev = job->e;
  const int64_t ars = av->strides[av->ndim - 2], acs = av->strides[av->ndim - 1];
  const int64_t ers = ev->strides[ev->ndim - 2], ecs = ev->strides[ev->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    const char *ap = la_batch_at(av, 2, b);
    char *ep = la_batch_at(ev, 2, b);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        a[i * n + j] = av->dtype == NRT_FLOAT64 ? ((const double *)ap)[i * ars + j * acs]
                                                : (double)((const float *)ap)[i * ars + j * acs];
    la_matrix_exp_f64(a, n, r, w, piv);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        if (ev->dtype == NRT_FLOAT64)
          ((double *)ep)[i * ers + j * ecs] = r[i * n + j];
        else
          ((float *)ep)[i * ers + j * ecs] = (float)r[i * n + j];
      }
  }
  free(buf);
}

nrt_status rt_kernel_linalg_matrix_exp(const nrt_op *op) {
  static const char *name = "linalg_matrix_exp";
  if (op->num_operands != 2 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected E and A", name);
  const nrt_tensor_view *e = &op->operands[0], *a = &op->operands[1];
  nrt_status st;
  if ((st = la_check_dtype(name, "A", a, 1))) return st;
  if (a->ndim < 2 || a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A must be a batch of square matrices", name);
  if ((st = la_check_batch(name, "E", e, 2, a, 2))) return st;
  const int64_t n = a->shape[a->ndim - 1];
  if (e->dtype != a->dtype || e->shape[e->ndim - 1] != n || e->shape[e->ndim - 2] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: E must be %s with A's shape", name, nrt_dtype_name(a->dtype));
  const int64_t batch = la_batch_count(a, 2);
  if (batch == 0 || n == 0) return NRT_SUCCESS;
  expm_job job = {e, a, n, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(12.0 * (double)n * (double)n * (double)n), expm_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
