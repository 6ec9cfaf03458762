// Helpers of the volumetric vision registrations (3-d pooling): 5-d
// [N, C, D, H, W] views of batched or unbatched tensors, and (D, H, W)
// triples packed into one scalar as the runtime's 3-d ops expect them
// (neuronrt/ops/vision.h).
#pragma once

#include <ATen/ATen.h>

#include "tensor_view.h"

namespace torchneuron {
namespace vision {

// The [N, C, D, H, W] view of a 5-d tensor, or of a 4-d one as a batch of one.
inline nrt_tensor_view volume_view(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.dim() == 4 || t.dim() == 5, op, ": expected a 4-d or 5-d tensor, got ", t.dim(), " dims");
  nrt_tensor_view v = to_view(t, op);
  int shift = 5 - static_cast<int>(t.dim());
  for (int64_t d = 0; d < t.dim(); d++) {
    v.shape[d + shift] = t.size(d);
    v.strides[d + shift] = t.stride(d);
  }
  if (shift) {
    v.shape[0] = 1;
    v.strides[0] = 0;
  }
  v.ndim = 5;
  return v;
}

// (D, H, W) as three 21-bit fields, D highest; values must lie in [0, 2^21).
inline int64_t pack3(int64_t d, int64_t h, int64_t w, const char* op) {
  for (int64_t x : {d, h, w})
    TORCH_CHECK_NOT_IMPLEMENTED(x >= 0 && x < (int64_t{1} << 21), op, ": window parameter ", x,
                                " is out of the range the neuron device supports");
  return d << 42 | h << 21 | w;
}

}  // namespace vision
}  // namespace torchneuron
