/* What the linear-algebra C tests share: a seeded uniform generator,
 * batches of matrices in device memory in three layouts (row-major,
 * column-major, neither), element access through double, each dtype's
 * epsilon, and an op over given views. Included by one test file each. */
#ifndef NEURONRT_TESTS_LINALG_MATS_H
#define NEURONRT_TESTS_LINALG_MATS_H

#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng_state = 11;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A batch of m x n matrices of dtype d in device memory, row- or
 * column-major, seen as a 3-d view (batch, m, n). */
typedef struct mats {
  void *dev;
  nrt_tensor_view view;
} mats;

/* layout 0: row-major, 1: column-major, 2: every other element of a
 * row-major matrix twice as wide (neither rows nor columns contiguous). */
static mats make_mats(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int layout) {
  mats a;
  memset(&a, 0, sizeof a);
  const int64_t spread = layout == 2 ? 2 : 1;
  CHECK_OK(nrt_malloc(0, (size_t)(batch * m * n * spread) * nrt_dtype_size(d) + 8, &a.dev));
  a.view.data = a.dev;
  a.view.dtype = d;
  a.view.ndim = 3;
  a.view.shape[0] = batch, a.view.shape[1] = m, a.view.shape[2] = n;
  a.view.strides[0] = m * n * spread;
  a.view.strides[1] = layout == 1 ? 1 : n * spread;
  a.view.strides[2] = layout == 1 ? m : spread;
  return a;
}

static char *elem(const mats *a, int64_t b, int64_t i, int64_t j) {
  const nrt_tensor_view *v = &a->view;
  int64_t off = b * v->strides[0] + i * v->strides[1] + (v->ndim > 2 ? j * v->strides[2] : 0);
  return (char *)nrt_device_to_host(a->dev) + off * (int64_t)nrt_dtype_size(v->dtype);
}
static double get(const mats *a, int64_t b, int64_t i, int64_t j) {
  char *p = elem(a, b, i, j);
  switch (a->view.dtype) {
    case NRT_FLOAT32: return *(float *)p;
    case NRT_INT32: return *(int32_t *)p;
    default: return *(double *)p;
  }
}
static void put(mats *a, int64_t b, int64_t i, int64_t j, double x) {
  char *p = elem(a, b, i, j);
  switch (a->view.dtype) {
    case NRT_FLOAT32: *(float *)p = (float)x; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)x; break;
    default: *(double *)p = x; break;
  }
}

/* Complex elements (complex64 or complex128 matrices), read and written as
 * complex double; inline, so files without complex cases do not warn. */
static inline double complex cget(const mats *a, int64_t b, int64_t i, int64_t j) {
  char *p = elem(a, b, i, j);
  return a->view.dtype == NRT_COMPLEX64 ? (double complex)(*(float complex *)p) : *(double complex *)p;
}
static inline void cput(mats *a, int64_t b, int64_t i, int64_t j, double complex x) {
  char *p = elem(a, b, i, j);
  if (a->view.dtype == NRT_COMPLEX64) *(float complex *)p = (float complex)x;
  else *(double complex *)p = x;
}

/* q (n x n, row-major) = a product of n random complex Householder
 * reflectors I - 2 v v^H / (v^H v): a random unitary matrix. */
static inline void random_unitary(double complex *q, int64_t n) {
  double complex *v = malloc((size_t)n * sizeof(double complex) + 16);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) q[i * n + j] = i == j;
  for (int64_t r = 0; r < n; r++) {
    double vv = 0;
    for (int64_t i = 0; i < n; i++) {
      v[i] = CMPLX(urand() * 2 - 1, urand() * 2 - 1);
      vv += creal(v[i] * conj(v[i]));
    }
    for (int64_t j = 0; j < n; j++) {
      double complex s = 0;
      for (int64_t i = 0; i < n; i++) s += conj(v[i]) * q[i * n + j];
      for (int64_t i = 0; i < n; i++) q[i * n + j] -= 2 * v[i] * s / vv;
    }
  }
  free(v);
}

static double eps_of(nrt_dtype d) { return d == NRT_FLOAT32 || d == NRT_COMPLEX64 ? 1.2e-7 : 2.3e-16; }

static nrt_op op_of(nrt_op_code code, int outputs, int operands, const nrt_tensor_view *v) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  op.num_operands = operands;
  for (int k = 0; k < operands; k++) op.operands[k] = v[k];
  return op;
}

#endif
