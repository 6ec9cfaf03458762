// Volumetric convolution (5-d inputs) for convolution_overrideable and
// convolution_backward_overrideable (conv.cpp dispatches here).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace torchneuron {

// The dtypes convolution computes on the neuron device: the floating ones,
// and for the forward only (integers have no gradient) the integer dtypes
// PyTorch's CPU convolves, wrapping as its integer arithmetic does (every
// geometry for each: the CPU computes transposed and dilated ones for int64
// only).
inline bool conv_dtype_supported(at::ScalarType t, bool backward) {
  if (at::isFloatingType(t)) return true;
  bool integer = t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt || t == at::kLong;
  return integer && !backward;
}

// The kernel a dtype refusal names, as the CPU's does: the backend ATen
// picks by geometry ("slow_conv2d_cpu" not implemented for 'Bool').
inline const char* conv_kernel_name(int64_t dim, bool transposed, at::IntArrayRef dilation, bool backward) {
  if (backward) return "convolution_backward";
  if (transposed) return dim == 5 ? "slow_conv_transpose3d_out_cpu" : "slow_conv_transpose2d_out_cpu";
  for (int64_t d : dilation)
    if (d != 1) return "slow_conv_dilated<>";
  return dim == 5 ? "compute_columns3d" : "slow_conv2d_cpu";
}

at::Tensor convolution3d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                         at::IntArrayRef output_padding, int64_t groups);

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution3d_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask);

}  // namespace torchneuron
