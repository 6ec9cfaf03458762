/* Device tensors of five dims for the convolution tests (conv3d, integer
 * convolution): contiguous, or channels-last with dim 1 innermost. */
#ifndef NEURONRT_TESTS_TENSOR5D_H
#define NEURONRT_TESTS_TENSOR5D_H

#include <string.h>
#include "check.h"
#include "neuronrt/nrt.h"

typedef struct tensor {
  nrt_tensor_view v;
  int64_t numel;
} tensor;

/* [a, b, c, d, e]: contiguous, or channels-last (dim 1 innermost) when cl. */
static inline tensor make(nrt_dtype t, const int64_t s[5], int cl) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.numel = s[0] * s[1] * s[2] * s[3] * s[4];
  CHECK_OK(nrt_malloc(0, (size_t)(x.numel > 0 ? x.numel : 1) * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 5;
  for (int d = 0; d < 5; d++) x.v.shape[d] = s[d];
  if (cl) {
    x.v.strides[1] = 1;
    x.v.strides[4] = s[1];
    x.v.strides[3] = s[1] * s[4];
    x.v.strides[2] = s[1] * s[4] * s[3];
    x.v.strides[0] = s[1] * s[4] * s[3] * s[2];
  } else {
    x.v.strides[4] = 1;
    for (int d = 3; d >= 0; d--) x.v.strides[d] = x.v.strides[d + 1] * s[d + 1];
  }
  return x;
}

#endif
