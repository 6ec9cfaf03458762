/* 1-d device vectors for the C tests of the fused optimizer and AMP ops:
 * a buffer of n elements of a dtype at an element stride, and reading or
 * writing element i as a double through the host alias of device memory. */
#ifndef NEURONRT_TESTS_VECTOR_BUF_H
#define NEURONRT_TESTS_VECTOR_BUF_H

#include <stdint.h>
#include <string.h>
#include "check.h"
#include "ops/engine/scalar_types.h"

typedef struct buf {
  void *dev;
  nrt_tensor_view view;
} buf;

static inline buf make(nrt_dtype d, int64_t n, int64_t stride) {
  buf b;
  memset(&b, 0, sizeof b);
  CHECK_OK(nrt_malloc(0, (size_t)(n * stride) * nrt_dtype_size(d) + 8, &b.dev));
  b.view.data = b.dev;
  b.view.dtype = d;
  b.view.ndim = 1;
  b.view.shape[0] = n;
  b.view.strides[0] = stride;
  return b;
}

static inline char *at(const buf *b, int64_t i) {
  return (char *)nrt_device_to_host(b->dev) + i * b->view.strides[0] * (int64_t)nrt_dtype_size(b->view.dtype);
}

static inline void put(buf *b, int64_t i, double v) {
  char *p = at(b, i);
  switch (b->view.dtype) {
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    case NRT_INT32: *(int32_t *)p = (int32_t)v; break;
    default: *(double *)p = v; break;
  }
}

static inline double get(const buf *b, int64_t i) {
  char *p = at(b, i);
  switch (b->view.dtype) {
    case NRT_FLOAT32: return *(float *)p;
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(uint16_t *)p);
    case NRT_FLOAT16: return rt_half_to_float(*(uint16_t *)p);
    case NRT_INT32: return *(int32_t *)p;
    default: return *(double *)p;
  }
}

#endif
