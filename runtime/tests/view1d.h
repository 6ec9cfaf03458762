/* A one-dimensional tensor view over host or device memory, for tests that
 * call kernels on strided runs. */
#ifndef NEURONRT_TESTS_VIEW1D_H
#define NEURONRT_TESTS_VIEW1D_H

#include <string.h>
#include "neuronrt/nrt.h"

static inline nrt_tensor_view view_1d(void *data, nrt_dtype dtype, int64_t n, int64_t stride) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = 1;
  v.shape[0] = n;
  v.strides[0] = stride;
  return v;
}

#endif
