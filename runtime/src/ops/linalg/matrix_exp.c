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
 * end), complex ones in complex128 (matrix_exp_t.h, with |a| the modulus
 * in the 1-norm); the real matrix products run on the runtime's GEMM
 * (qr_t.h's la_gemm, loops for small products), the complex ones as
 * loops, one matrix per thread across the batch. A
 * matrix with a non-finite entry gives NaN. */
#include <complex.h>
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

#define LA_T double
#define LA_CPLX 0
#define LA_ABS(x) fabs(x)
#define LA_NAME(x) expm_##x##_f64
#define LA_NAME2(x) la_##x##_f64
#include "ops/linalg/matrix_exp_t.h"
#undef LA_T
#undef LA_CPLX
#undef LA_ABS
#undef LA_NAME
#undef LA_NAME2

#define LA_T double _Complex
#define LA_CPLX 1
#define LA_ABS(x) cabs(x)
#define LA_NAME(x) expm_##x##_c128
#define LA_NAME2(x) la_##x##_c128
#include "ops/linalg/matrix_exp_t.h"
#undef LA_T
#undef LA_CPLX
#undef LA_ABS
#undef LA_NAME
#undef LA_NAME2

/* Matrix b of v into row-major a (double or complex128 elements), or back. */
static void load(const nrt_tensor_view *v, int64_t b, int64_t n, void *a) {
  const char *p = la_batch_at(v, 2, b);
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1];
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      const int64_t at = i * rs + j * cs, to = i * n + j;
      switch (v->dtype) {
        case NRT_FLOAT64: ((double *)a)[to] = ((const double *)p)[at]; break;
        case NRT_FLOAT32: ((double *)a)[to] = ((const float *)p)[at]; break;
        case NRT_COMPLEX128: ((double _Complex *)a)[to] = ((const double _Complex *)p)[at]; break;
        default: ((double _Complex *)a)[to] = ((const float _Complex *)p)[at]; break;
      }
    }
}

static void store(const void *r, int64_t n, const nrt_tensor_view *v, int64_t b) {
  char *p = la_batch_at(v, 2, b);
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1];
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      const int64_t at = i * rs + j * cs, from = i * n + j;
      switch (v->dtype) {
        case NRT_FLOAT64: ((double *)p)[at] = ((const double *)r)[from]; break;
        case NRT_FLOAT32: ((float *)p)[at] = (float)((const double *)r)[from]; break;
        case NRT_COMPLEX128: ((double _Complex *)p)[at] = ((const double _Complex *)r)[from]; break;
        default: ((float _Complex *)p)[at] = (float _Complex)((const double _Complex *)r)[from]; break;
      }
    }
}

static void expm_range(int64_t begin, int64_t end, void *ctx) {
  expm_job *job = ctx;
  const int64_t n = job->n, nn = n * n;
  const int cplx = job->a->dtype == NRT_COMPLEX64 || job->a->dtype == NRT_COMPLEX128;
  const size_t esize = cplx ? sizeof(double _Complex) : sizeof(double);
  const size_t bytes = (size_t)(9 * nn) * esize + (size_t)n * sizeof(int32_t) + 8;
  char *buf = malloc(bytes);
  if (!buf) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)bytes);
    return;
  }
  char *a = buf, *r = a + (size_t)nn * esize, *w = r + (size_t)nn * esize;
  int32_t *piv = (int32_t *)(w + (size_t)(7 * nn) * esize);
  for (int64_t b = begin; b < end; b++) {
    load(job->a, b, n, a);
    if (cplx)
      expm_matrix_exp_c128((double _Complex *)a, n, (double _Complex *)r, (double _Complex *)w, piv);
    else
      expm_matrix_exp_f64((double *)a, n, (double *)r, (double *)w, piv);
    store(r, n, job->e, b);
  }
  free(buf);
}

nrt_status rt_kernel_linalg_matrix_exp(const nrt_op *op) {
  static const char *name = "linalg_matrix_exp";
  if (op->num_operands != 2 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected E and A", name);
  const nrt_tensor_view *e = &op->operands[0], *a = &op->operands[1];
  nrt_status st;
  if ((st = la_check_dtype(name, "A", a, LA_OR_COMPLEX))) return st;
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
