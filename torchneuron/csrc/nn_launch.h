// Describing the operands of the normalisation, softmax and loss ops
// (neuronrt/ops/nn.h): tensors seen as the fixed-rank views those kernels
// read, and absent optional operands.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>

#include "neuronrt/nrt.h"
#include "tensor_view.h"
#include "op_scalars.h"

namespace torchneuron {

// An absent optional operand (or an output that is not wanted).
inline nrt_tensor_view absent_view() {
  nrt_tensor_view v{};
  v.dtype = NRT_FLOAT32;
  v.ndim = 1;
  return v;
}

// t (whose elements are laid out as a contiguous block, in any order of
// its own dims) seen with the given sizes and element strides.
inline nrt_tensor_view strided_view(const at::Tensor& t, std::initializer_list<int64_t> sizes,
                                    std::initializer_list<int64_t> strides, const char* name) {
  nrt_tensor_view v = to_view(t, name);
  v.ndim = static_cast<int32_t>(sizes.size());
  int d = 0;
  for (int64_t s : sizes) v.shape[d++] = s;
  d = 0;
  for (int64_t s : strides) v.strides[d++] = s;
  return v;
}

// A contiguous tensor seen as a row-major view of the given sizes.
inline nrt_tensor_view contiguous_view(const at::Tensor& t, std::initializer_list<int64_t> sizes,
                                       const char* name) {
  TORCH_INTERNAL_ASSERT(t.is_contiguous());
  nrt_tensor_view v = to_view(t, name);
  v.ndim = static_cast<int32_t>(sizes.size());
  int d = 0;
  for (int64_t s : sizes) v.shape[d++] = s;
  int64_t stride = 1;
  for (int k = v.ndim - 1; k >= 0; k--) {
    v.strides[k] = stride;
    stride *= v.shape[k];
  }
  return v;
}

// An optional tensor as a 1-d view of its elements, or absent. The tensor
// must be 1-d or contiguous.
inline nrt_tensor_view vector_view(const at::Tensor& t, const char* name) {
  if (!t.defined() || t.numel() == 0) return absent_view();
  if (t.dim() == 1) return to_view(t, name);
  return contiguous_view(t, {t.numel()}, name);
}

// Fills in and launches op `code` on the device of `device_of`.
inline void launch_nn(nrt_op_code code, const at::Tensor& device_of, int num_outputs,
                      std::initializer_list<nrt_tensor_view> operands,
                      std::initializer_list<nrt_scalar> scalars = {}) {
  nrt_op op{};
  op.code = code;
  op.compute_dtype = NRT_FLOAT32;
  op.num_outputs = num_outputs;
  for (const nrt_tensor_view& v : operands) op.operands[op.num_operands++] = v;
  for (const nrt_scalar& s : scalars) op.scalars[op.num_scalars++] = s;
  launch(device_of.device().index(), op);
}

}  // namespace torchneuron
