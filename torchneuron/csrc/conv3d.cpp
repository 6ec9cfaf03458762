// Volumetric convolution (Conv3d, ConvTranspose3d) on the runtime's CONV3D,
// CONV3D_INPUT_GRAD and CONV3D_WEIGHT_GRAD (neuronrt/ops/vision.h), in the
// roles conv.cpp gives their 2-d twins: a transposed convolution's forward
// is the input gradient of a convolution whose image is its output.
#include "conv3d.h"

#include <ATen/native/ConvUtils.h>
#include <c10/core/DeviceGuard.h>

#include "op_tracking.h"
#include "vision_common.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;

constexpr int64_t kFieldLimit = int64_t{1} << 21;

// (D, H, W) values packed as three 21-bit fields, D highest.
int64_t pack3(at::IntArrayRef v, const char* what) {
  TORCH_CHECK(v.size() == 3, "convolution: expected 3 ", what, " values for a 3-d convolution, got ", v.size());
  int64_t packed = 0;
  for (int64_t x : v) {
    TORCH_CHECK(x >= 0, "convolution: negative ", what, " is not supported");
    TORCH_CHECK_NOT_IMPLEMENTED(x < kFieldLimit, "convolution: ", what, " ", x,
                                " is too large for the neuron device's 3-d convolution");
    packed = (packed << 21) | x;
  }
  return packed;
}

struct Conv3dGeometry {
  int64_t stride, padding, dilation, groups;
};

Conv3dGeometry geometry(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return {pack3(stride, "stride"), pack3(padding, "padding"), pack3(dilation, "dilation"), groups};
}

void scalars(OpBuilder& b, const Conv3dGeometry& g) { b.integer(g.stride).integer(g.padding).integer(g.dilation).integer(g.groups); }

// CONV3D [O, I, w (, bias)] or CONV3D_INPUT_GRAD [I, O, w (, bias)].
void launch_conv3d(nrt_op_code code, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, const Conv3dGeometry& g) {
  OpBuilder b(code, 1);
  b.view(to_view(dst, b.name())).view(to_view(src, b.name())).view(to_view(weight, b.name()));
  if (bias.has_value() && bias->defined()) b.view(to_view(*bias, b.name()));
  scalars(b, g);
  b.launch(dst);
}

void launch_conv3d_weight_grad(const at::Tensor& grad_weight, const at::Tensor& image, const at::Tensor& columns,
                        const Conv3dGeometry& g) {
  OpBuilder b(NRT_OP_CONV3D_WEIGHT_GRAD, 1);
  b.view(to_view(grad_weight, b.name())).view(to_view(image, b.name())).view(to_view(columns, b.name()));
  scalars(b, g);
  b.launch(grad_weight);
}

void check_conv3d_input(const at::Tensor& input, const at::Tensor& weight, const char* op, bool backward,
                 const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(conv_dtype_supported(input.scalar_type(), backward), "\"", kernel,
                              "\" not implemented for '", input.scalar_type(), "'");
  TORCH_CHECK(weight.dim() == 5, op, ": expected a 5-d weight, got ", weight.dim(), " dims");
  TORCH_CHECK(weight.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
}

at::MemoryFormat memory_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d ||
      weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d)
    return at::MemoryFormat::ChannelsLast3d;
  return at::MemoryFormat::Contiguous;
}

}  // namespace

at::Tensor convolution3d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                         at::IntArrayRef output_padding, int64_t groups) {
  check_conv3d_input(input, weight, "convolution", false, conv_kernel_name(input.dim(), transposed, dilation, false));
  Conv3dGeometry g = geometry(stride, padding, dilation, groups);
  std::vector<int64_t> sizes =
      transposed ? at::native::conv_input_size(input.sizes(), weight.sizes(), padding, output_padding, stride,
                                               dilation, groups)
                 : at::native::conv_output_size(input.sizes(), weight.sizes(), padding, stride, dilation);
  for (int64_t s : sizes)
    TORCH_CHECK(s >= 0, "convolution: computed output size ", c10::IntArrayRef(sizes), " is too small");
  at::Tensor out = at::empty(sizes, input.options().memory_format(memory_format(input, weight)));
  if (out.numel() == 0) return out;
  if (bias.has_value() && bias->defined())
    TORCH_CHECK(bias->scalar_type() == input.scalar_type(), "convolution: bias dtype ", bias->scalar_type(),
                " does not match the input's ", input.scalar_type());
  launch_conv3d(transposed ? NRT_OP_CONV3D_INPUT_GRAD : NRT_OP_CONV3D, out, input, weight, bias, g);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution3d_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  check_conv3d_input(input, weight, "convolution_backward", true, "convolution_backward");
  TORCH_CHECK(grad_output.dim() == 5 && grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output must match the input's rank and dtype");
  Conv3dGeometry g = geometry(stride, padding, dilation, groups);
  at::Tensor grad_input, grad_weight, grad_bias;
  const at::Tensor& image = transposed ? grad_output : input;
  const at::Tensor& columns = transposed ? input : grad_output;
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options().memory_format(memory_format(input, weight)));
    if (grad_input.numel() > 0)
      launch_conv3d(transposed ? NRT_OP_CONV3D : NRT_OP_CONV3D_INPUT_GRAD, grad_input, grad_output, weight,
                  std::nullopt, g);
  }
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
    if (grad_weight.numel() > 0) launch_conv3d_weight_grad(grad_weight, image, columns, g);
  }
  if (output_mask[2]) grad_bias = grad_output.sum({0, 2, 3, 4});
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace torchneuron
