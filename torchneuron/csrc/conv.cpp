// Convolution: convolution_overrideable and convolution_backward_overrideable,
// the entry points PyTorch's _convolution and convolution_backward choose for
// a PrivateUse1 tensor (after their own shape checks, 'same' padding and the
// view of a 1-d convolution as a 2-d one of height 1).
//
// The runtime has three ops over an image I and a column side O tied by
// the weight (neuronrt/ops/vision.h); a transposed convolution swaps their
// roles: its forward is the input gradient of a convolution, and so on.
// The bias gradient is a sum over batch and positions (a native reduction).
#include <ATen/ATen.h>
#include <ATen/native/ConvUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "conv3d.h"
#include "op_tracking.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;

struct ConvArgs {
  at::IntArrayRef stride, padding, dilation;
  int64_t groups;
  bool one_d;  // [N, C, L] tensors with [K, C, kL] weights
};

// A weight as [K, C / groups, kH, kW].
nrt_tensor_view weight_view(const at::Tensor& w, bool one_d, const char* op) {
  nrt_tensor_view v = to_view(w, op);
  if (!one_d) return v;
  v.ndim = 4;
  v.shape[3] = v.shape[2];
  v.strides[3] = v.strides[2];
  v.shape[2] = 1;
  v.strides[2] = 0;
  return v;
}

void geometry_args(OpBuilder& b, const ConvArgs& a) {
  // scalars [sH, sW, pH, pW, dH, dW, groups]; a 1-d convolution has height 1
  auto pair = [&](at::IntArrayRef v, int64_t height_value) {
    if (a.one_d)
      b.integer(height_value).integer(v[0]);
    else
      b.integer(v[0]).integer(v[1]);
  };
  pair(a.stride, 1);
  pair(a.padding, 0);
  pair(a.dilation, 1);
  b.integer(a.groups);
}

// CONV2D [dst = O, src = I, w (, bias)] or CONV2D_INPUT_GRAD [dst = I, src = O, w (, bias)].
void launch_conv(nrt_op_code code, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, const ConvArgs& a) {
  OpBuilder b(code, 1);
  b.image(dst, a.one_d).image(src, a.one_d).view(weight_view(weight, a.one_d, b.name()));
  if (bias.has_value() && bias->defined()) b.view(to_view(*bias, b.name()));
  geometry_args(b, a);
  b.launch(dst);
}

// CONV2D_WEIGHT_GRAD [grad_weight, I, O].
void launch_weight_grad(const at::Tensor& grad_weight, const at::Tensor& image, const at::Tensor& columns,
                        const ConvArgs& a) {
  OpBuilder b(NRT_OP_CONV2D_WEIGHT_GRAD, 1);
  b.view(weight_view(grad_weight, a.one_d, b.name())).image(image, a.one_d).image(columns, a.one_d);
  geometry_args(b, a);
  b.launch(grad_weight);
}

void check_input(const at::Tensor& input, const at::Tensor& weight, const char* op, bool backward,
                 const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(input.dim() == 3 || input.dim() == 4, op,
                              ": only 1-d, 2-d and 3-d convolutions are supported on the neuron device, got a ",
                              input.dim(), "-d input");
  TORCH_CHECK_NOT_IMPLEMENTED(conv_dtype_supported(input.scalar_type(), backward), "\"", kernel,
                              "\" not implemented for '", input.scalar_type(), "'");
  TORCH_CHECK(weight.dim() == input.dim(), op, ": expected a ", input.dim(), "-d weight, got ", weight.dim(),
              " dims");
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
}

at::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.dim() == 4 && (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                           weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast))
    return at::MemoryFormat::ChannelsLast;
  return at::MemoryFormat::Contiguous;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  NEURON_TRACK_OP("aten::convolution_overrideable");
  c10::DeviceGuard guard(input.device());
  if (input.dim() == 5)
    return convolution3d(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  check_input(input, weight, "convolution", false, conv_kernel_name(input.dim(), transposed, dilation, false));
  ConvArgs a{stride, padding, dilation, groups, input.dim() == 3};
  std::vector<int64_t> sizes =
      transposed ? at::native::conv_input_size(input.sizes(), weight.sizes(), padding, output_padding, stride,
                                               dilation, groups)
                 : at::native::conv_output_size(input.sizes(), weight.sizes(), padding, stride, dilation);
  for (int64_t s : sizes)
    TORCH_CHECK(s >= 0, "convolution: computed output size ", c10::IntArrayRef(sizes), " is too small");
  at::Tensor out = at::empty(sizes, input.options().memory_format(conv_memory_format(input, weight)));
  if (out.numel() == 0) return out;
  if (bias.has_value() && bias->defined())
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), "convolution: bias dtype ", bias->scalar_type(),
                " does not match the input's ", input.scalar_type());
  launch_conv(transposed ? NRT_OP_CONV2D_INPUT_GRAD : NRT_OP_CONV2D, out, input, weight, bias, a);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  NEURON_TRACK_OP("aten::convolution_backward_overrideable");
  c10::DeviceGuard guard(input.device());
  if (input.dim() == 5)
    return convolution3d_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                  groups, output_mask);
  check_input(input, weight, "convolution_backward", true, "convolution_backward");
  TORCH_CHECK(grad_output.dim() == input.dim() && grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output must match the input's rank and dtype");
  ConvArgs a{stride, padding, dilation, groups, input.dim() == 3};
  at::Tensor grad_input, grad_weight, grad_bias;
  // The image side of the runtime's ops is the convolution's input, or its
  // output (grad_output) when transposed.
  const at::Tensor& image = transposed ? grad_output : input;
  const at::Tensor& columns = transposed ? input : grad_output;
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options().memory_format(conv_memory_format(input, weight)));
    if (grad_input.numel() > 0) {
      if (transposed)
        launch_conv(NRT_OP_CONV2D, grad_input, grad_output, weight, std::nullopt, a);
      else
        launch_conv(NRT_OP_CONV2D_INPUT_GRAD, grad_input, grad_output, weight, std::nullopt, a);
    }
  }
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
    if (grad_weight.numel() > 0) launch_weight_grad(grad_weight, image, columns, a);
  }
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad_output.dim(); d++) dims.push_back(d);
    grad_bias = grad_output.sum(dims);
  }
  return {grad_input, grad_weight, grad_bias};
}

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace
}  // namespace torchneuron
