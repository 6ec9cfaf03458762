// The legacy THNN entry point torch._C._nn.slow_conv3d (ATen
// slow_conv3d_forward and its out= form): the CPU's shape checks, in its
// order and words, then the 3-d convolution kernel (conv3d.cpp) with unit
// dilation, symmetric padding and the groups the CPU infers from the
// channel counts.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "conv3d.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void expect_dim_size(const at::Tensor& t, int64_t dim, int64_t dim_size, int64_t size) {
  TORCH_CHECK(t.dim() == dim && t.size(dim_size) == size, "Expected a tensor of dimension ", dim,
              " and tensor.size[", dim_size, "] == ", size, " but got: dimension ", t.dim(), " and tensor.size[",
              dim_size, "] = ", t.size(dim_size));
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Checks the arguments as the CPU does and returns the weight as a 5-d
// [O, I / groups, kD, kH, kW] tensor and the groups.
std::pair<at::Tensor, int64_t> checked_weight(const at::Tensor& self, const at::Tensor& weight,
                                              at::IntArrayRef k, const std::optional<at::Tensor>& bias,
                                              at::IntArrayRef stride, at::IntArrayRef padding) {
  TORCH_CHECK(k.size() == 3 && stride.size() == 3 && padding.size() == 3,
              "slow_conv3d_forward: expected 3 kernel_size, stride and padding values");
  TORCH_CHECK(k[0] > 0 && k[1] > 0 && k[2] > 0, "kernel size should be greater than zero, but got: ", k[0], " x ",
              k[1], " x ", k[2], " (TxHxW)");
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "stride should be greater than zero, but got: ",
              stride[0], " x ", stride[1], " x ", stride[2], " (TxHxW)");
  TORCH_CHECK(weight.numel() > 0 && (weight.dim() == 2 || weight.dim() == 5),
              "non-empty 2D or 5D weight tensor expected, but got: ", weight.sizes());
  if (bias.has_value() && bias->defined()) expect_dim_size(*bias, 1, 0, weight.size(0));
  const int64_t ndim = self.dim();
  const bool valid_empty = ndim == 5 && self.size(0) == 0 && self.size(1) != 0 && self.size(2) != 0 &&
                           self.size(3) != 0 && self.size(4) != 0;
  TORCH_CHECK((self.numel() > 0 || valid_empty) && ndim == 5, "non-empty 5D input tensor expected but got: ",
              self.sizes());
  int64_t padded[3], out[3];
  for (int i = 0; i < 3; i++) padded[i] = self.size(2 + i) + 2 * padding[i];
  TORCH_CHECK(padded[0] >= k[0] && padded[1] >= k[1] && padded[2] >= k[2],
              "Calculated padded input size per channel: (", padded[0], " x ", padded[1], " x ", padded[2], "). ",
              "Kernel size: (", k[0], " x ", k[1], " x ", k[2],
              "). Kernel size can't be greater than actual input size");
  for (int i = 0; i < 3; i++) out[i] = floor_div(padded[i] - k[i], stride[i]) + 1;
  TORCH_CHECK(out[0] >= 1 && out[1] >= 1 && out[2] >= 1, "Given input size per channel: (", self.size(2), " x ",
              self.size(3), " x ", self.size(4), "). Calculated output size per channel: (", out[0], " x ", out[1],
              " x ", out[2], "). Output size is too small");
  // The CPU's groups: input channels over the weight's second dim; a 2-d
  // weight's columns count kH * kW per input channel there.
  const int64_t groups = self.size(1) / weight.size(1);
  const int64_t planes = weight.dim() == 2 ? weight.size(1) / (k[1] * k[2]) : weight.size(1);
  TORCH_CHECK(groups > 0, "none zero group size expected");
  expect_dim_size(self, ndim, 1, planes * groups);
  TORCH_CHECK(weight.size(0) % groups == 0, "slow_conv3d_forward: ", weight.size(0),
              " output channels do not split into ", groups, " groups");
  at::Tensor w = weight;
  if (weight.dim() == 2) {
    TORCH_CHECK(weight.size(1) % (k[0] * k[1] * k[2]) == 0, "slow_conv3d_forward: a 2-d weight of ",
                weight.sizes(), " does not hold whole ", k[0], "x", k[1], "x", k[2], " kernels");
    w = weight.reshape({weight.size(0), weight.size(1) / (k[0] * k[1] * k[2]), k[0], k[1], k[2]});
  } else {
    TORCH_CHECK(weight.size(2) == k[0] && weight.size(3) == k[1] && weight.size(4) == k[2],
                "slow_conv3d_forward: kernel_size ", k, " does not match the weight's ", weight.sizes());
  }
  return {w, groups};
}

at::Tensor forward(const at::Tensor& self, const at::Tensor& weight, at::IntArrayRef kernel_size,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding) {
  auto [w, groups] = checked_weight(self, weight, kernel_size, bias, stride, padding);
  // The CPU convolves the floating and integer dtypes (its column builder
  // refuses bool and complex); so does the conv3d kernel.
  TORCH_CHECK_NOT_IMPLEMENTED(conv_dtype_supported(self.scalar_type(), false),
                              "\"compute_columns3d\" not implemented for '", self.scalar_type(), "'");
  const std::vector<int64_t> dilation{1, 1, 1}, output_padding{0, 0, 0};
  return convolution3d(self, w, bias, stride, padding, dilation, false, output_padding, groups);
}

at::Tensor slow_conv3d_forward(const at::Tensor& self, const at::Tensor& weight, at::IntArrayRef kernel_size,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding) {
  NEURON_TRACK_OP("aten::slow_conv3d_forward");
  return forward(self, weight, kernel_size, bias, stride, padding);
}

at::Tensor& slow_conv3d_forward_out(const at::Tensor& self, const at::Tensor& weight, at::IntArrayRef kernel_size,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::Tensor& output) {
  NEURON_TRACK_OP("aten::slow_conv3d_forward.output");
  const at::Tensor result = forward(self, weight, kernel_size, bias, stride, padding);
  TORCH_CHECK(output.scalar_type() == result.scalar_type(), "slow_conv3d_forward: expected an output of dtype ",
              result.scalar_type(), ", got ", output.scalar_type());
  at::native::resize_output(output, result.sizes());
  output.copy_(result);
  return output;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("slow_conv3d_forward", slow_conv3d_forward);
  m.impl("slow_conv3d_forward.output", slow_conv3d_forward_out);
}

}  // namespace torchneuron
