/* Batched matrices for the linear-algebra kernels: operands share their
 * leading (batch) dims and end in 0, 1 or 2 matrix dims; batch element b is
 * found by unravelling b over the batch dims with each view's own strides,
 * so broadcast (stride 0) and transposed operands need no copy. */
#ifndef NEURONRT_OPS_LINALG_BATCH_H
#define NEURONRT_OPS_LINALG_BATCH_H

#include <stdint.h>
#include "internal.h"

/* Number of batch elements of v when its last `tail` dims are not batch. */
static inline int64_t la_batch_count(const nrt_tensor_view *v, int tail) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim - tail; d++) n *= v->shape[d];
  return n;
}

/* Address of batch element b of v (its last `tail` dims are not batch). */
static inline char *la_batch_at(const nrt_tensor_view *v, int tail, int64_t b) {
  int64_t offset = 0;
  for (int d = v->ndim - tail - 1; d >= 0; d--) {
    offset += (b % v->shape[d]) * v->strides[d];
    b /= v->shape[d];
  }
  return (char *)v->data + offset * (int64_t)nrt_dtype_size(v->dtype);
}

/* Checks that v has `tail` non-batch dims after exactly ref's batch dims. */
static inline nrt_status la_check_batch(const char *op, const char *what, const nrt_tensor_view *v,
                                        int tail, const nrt_tensor_view *ref, int ref_tail) {
  int batch = ref->ndim - ref_tail;
  if (v->ndim != batch + tail)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s has %d dims, expected %d", op, what,
                   (int)v->ndim, batch + tail);
  for (int d = 0; d < batch; d++)
    if (v->shape[d] != ref->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s's batch dim %d is %lld, expected %lld", op,
                     what, d, (long long)v->shape[d], (long long)ref->shape[d]);
  return NRT_SUCCESS;
}

/* floating: 0 int32, 1 float32 or float64, LA_OR_COMPLEX those or complex64/128. */
enum { LA_OR_COMPLEX = 2 };
static inline nrt_status la_check_dtype(const char *op, const char *what, const nrt_tensor_view *v,
                                        int floating) {
  const int real = v->dtype == NRT_FLOAT32 || v->dtype == NRT_FLOAT64;
  const int cplx = v->dtype == NRT_COMPLEX64 || v->dtype == NRT_COMPLEX128;
  int ok = floating == LA_OR_COMPLEX ? real || cplx : floating ? real : v->dtype == NRT_INT32;
  if (!ok)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: %s must be %s, got %s", op, what,
                   floating == LA_OR_COMPLEX ? "float32, float64, complex64 or complex128"
                   : floating                ? "float32 or float64"
                                             : "int32",
                   nrt_dtype_name(v->dtype));
  return NRT_SUCCESS;
}

/* Work split over batch elements: a failure (out of memory, a bad pivot)
 * is kept here by the worker and reported by the calling thread. */
typedef struct la_failure {
  int status; /* nrt_status, written once with compare-and-swap */
  int64_t batch;
  int64_t value;
} la_failure;

static inline void la_fail_at(la_failure *f, nrt_status s, int64_t batch, int64_t value) {
  int expected = NRT_SUCCESS;
  if (__atomic_compare_exchange_n(&f->status, &expected, (int)s, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    f->batch = batch;
    f->value = value;
  }
}

/* Batch elements per parallel range for matrices of `work` flops each. */
static inline int64_t la_grain(double work) {
  double g = 65536.0 / (work > 1.0 ? work : 1.0);
  return g < 1.0 ? 1 : (int64_t)g;
}

#endif
