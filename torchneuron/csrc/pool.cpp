// Pooling: max_pool2d_with_indices, avg_pool2d, adaptive_max_pool2d,
// _adaptive_avg_pool2d and their backward ops.
//
// The structured ops run PyTorch's own meta functions (argument checks,
// output sizes with ceil_mode, memory format) and register their out=
// overloads and functional forms; the 1-d pools, max_pool2d without
// indices and adaptive_avg_pool2d are composites of these (an adaptive
// average to 1x1 is a mean). The runtime gets [N, C, H, W] views of any
// strides (see neuronrt/ops/vision.h).
#include <ATen/ATen.h>
#include <ATen/ops/adaptive_max_pool2d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool2d_meta.h>
#include <ATen/ops/avg_pool2d_backward_meta.h>
#include <ATen/ops/avg_pool2d_meta.h>
#include <ATen/ops/max_pool2d_with_indices_backward_meta.h>
#include <ATen/ops/max_pool2d_with_indices_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;
using vision::Outputs;
using vision::pair_at;

OpBuilder& window_args(OpBuilder& b, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding) {
  for (size_t i = 0; i < 2; i++) b.integer(pair_at(kernel, i));
  for (size_t i = 0; i < 2; i++) b.integer(pair_at(stride, i, kernel));
  for (size_t i = 0; i < 2; i++) b.integer(pair_at(padding, i));
  return b;
}

// The backward ops (and adaptive average pooling) take floating dtypes.
void check_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '",
                              t.scalar_type(), "'");
}

// ---- max_pool2d_with_indices -------------------------------------------------

using MaxPoolMeta = at::meta::structured_max_pool2d_with_indices;

void max_pool_into(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, const at::Tensor& out,
                   const at::Tensor& indices) {
  // the CPU's refusal, at the call (the kernel would refuse it asynchronously)
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"max_pool2d\" not implemented for 'Bool'");
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_MAX_POOL2D, 2);
  b.image(out).image(indices).image(self);
  window_args(b, kernel, stride, padding);
  for (size_t i = 0; i < 2; i++) b.integer(pair_at(dilation, i));
  b.launch(self);
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  NEURON_TRACK_OP("aten::max_pool2d_with_indices");
  c10::DeviceGuard guard(self.device());
  Outputs<MaxPoolMeta, 2> o;
  o.meta(self, kernel, stride, padding, dilation, ceil_mode);
  max_pool_into(self, kernel, stride, padding, dilation, o[0], o[1]);
  return {o[0], o[1]};
}

std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::max_pool2d_with_indices.out");
  c10::DeviceGuard guard(self.device());
  Outputs<MaxPoolMeta, 2> o({out, indices});
  o.meta(self, kernel, stride, padding, dilation, ceil_mode);
  max_pool_into(self, kernel, stride, padding, dilation, out, indices);
  return {out, indices};
}

// The backward of both max pools: indices say where each gradient goes.
void max_pool_backward_into(const at::Tensor& grad_output, const at::Tensor& indices,
                            const at::Tensor& grad_input) {
  check_floating(grad_input, "max_pool2d_backward");
  if (grad_input.numel() == 0) return;
  OpBuilder b(NRT_OP_MAX_POOL2D_BACKWARD, 1);
  b.image(grad_input).image(grad_output).image(indices).launch(grad_input);
}

using MaxPoolBackwardMeta = at::meta::structured_max_pool2d_with_indices_backward;

at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                            const at::Tensor& indices) {
  NEURON_TRACK_OP("aten::max_pool2d_with_indices_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<MaxPoolBackwardMeta, 1> o;
  o.meta(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices);
  max_pool_backward_into(grad_output, indices, o[0]);
  return o[0];
}

at::Tensor& max_pool2d_with_indices_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation,
                                                 bool ceil_mode, const at::Tensor& indices,
                                                 at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::max_pool2d_with_indices_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<MaxPoolBackwardMeta, 1> o({grad_input});
  o.meta(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices);
  max_pool_backward_into(grad_output, indices, grad_input);
  return grad_input;
}

// ---- avg_pool2d ------------------------------------------------------------

using AvgPoolMeta = at::meta::structured_avg_pool2d;
using AvgPoolBackwardMeta = at::meta::structured_avg_pool2d_backward;

void avg_pool_args(OpBuilder& b, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  window_args(b, kernel, stride, padding);
  b.integer(count_include_pad ? 1 : 0).integer(divisor_override.value_or(0));
}

void avg_pool_into(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                   at::IntArrayRef padding, bool count_include_pad, std::optional<int64_t> divisor_override,
                   const at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || self.scalar_type() == at::kLong,
                              "\"avg_pool2d\" not implemented for '", self.scalar_type(), "'");
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_AVG_POOL2D, 1);
  b.image(out).image(self);
  avg_pool_args(b, kernel, stride, padding, count_include_pad, divisor_override);
  b.launch(self);
}

at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  NEURON_TRACK_OP("aten::avg_pool2d");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPoolMeta, 1> o;
  o.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool_into(self, kernel, stride, padding, count_include_pad, divisor_override, o[0]);
  return o[0];
}

at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  NEURON_TRACK_OP("aten::avg_pool2d.out");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPoolMeta, 1> o({out});
  o.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool_into(self, kernel, stride, padding, count_include_pad, divisor_override, out);
  return out;
}

void avg_pool_backward_into(const at::Tensor& grad_output, at::IntArrayRef kernel, at::IntArrayRef stride,
                            at::IntArrayRef padding, bool count_include_pad,
                            std::optional<int64_t> divisor_override, const at::Tensor& grad_input) {
  check_floating(grad_input, "avg_pool2d_backward");
  if (grad_input.numel() == 0) return;
  OpBuilder b(NRT_OP_AVG_POOL2D_BACKWARD, 1);
  b.image(grad_input).image(grad_output);
  avg_pool_args(b, kernel, stride, padding, count_include_pad, divisor_override);
  b.launch(grad_input);
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  NEURON_TRACK_OP("aten::avg_pool2d_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPoolBackwardMeta, 1> o;
  o.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool_backward_into(grad_output, kernel, stride, padding, count_include_pad, divisor_override, o[0]);
  return o[0];
}

at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::avg_pool2d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPoolBackwardMeta, 1> o({grad_input});
  o.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool_backward_into(grad_output, kernel, stride, padding, count_include_pad, divisor_override, grad_input);
  return grad_input;
}

// ---- adaptive_max_pool2d ---------------------------------------------------

using AdaptiveMaxMeta = at::meta::structured_adaptive_max_pool2d;
using AdaptiveMaxBackwardMeta = at::meta::structured_adaptive_max_pool2d_backward;

void adaptive_max_into(const at::Tensor& self, const at::Tensor& out, const at::Tensor& indices) {
  check_floating(self, "adaptive_max_pool2d");  // as the CPU: floating dtypes only
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_ADAPTIVE_MAX_POOL2D, 2);
  b.image(out).image(indices).image(self).launch(self);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& self, at::IntArrayRef output_size) {
  NEURON_TRACK_OP("aten::adaptive_max_pool2d");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxMeta, 2> o;
  o.meta(self, output_size);
  adaptive_max_into(self, o[0], o[1]);
  return {o[0], o[1]};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::adaptive_max_pool2d.out");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxMeta, 2> o({out, indices});
  o.meta(self, output_size);
  adaptive_max_into(self, out, indices);
  return {out, indices};
}

at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& indices) {
  NEURON_TRACK_OP("aten::adaptive_max_pool2d_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxBackwardMeta, 1> o;
  o.meta(grad_output, self, indices);
  max_pool_backward_into(grad_output, indices, o[0]);
  return o[0];
}

at::Tensor& adaptive_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             const at::Tensor& indices, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::adaptive_max_pool2d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxBackwardMeta, 1> o({grad_input});
  o.meta(grad_output, self, indices);
  max_pool_backward_into(grad_output, indices, grad_input);
  return grad_input;
}

// ---- _adaptive_avg_pool2d (not structured: the CPU kernel's checks) --------

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef sym_output_size) {
  NEURON_TRACK_OP("aten::_adaptive_avg_pool2d");
  c10::DeviceGuard guard(self.device());
  auto output_size = C10_AS_INTARRAYREF_SLOW(sym_output_size);
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 ",
              "but received {", output_size[0], ", ", output_size[1], "}");
  int64_t ndim = self.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", self.sizes());
  for (int64_t i = ndim - 2; i < ndim; i++)
    TORCH_CHECK(self.size(i) > 0,
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ", self.sizes(), " with dimension ", i, " being empty");
  check_floating(self, "adaptive_avg_pool2d");
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[ndim - 2] = output_size[0];
  sizes[ndim - 1] = output_size[1];
  at::Tensor out = at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  OpBuilder(NRT_OP_ADAPTIVE_AVG_POOL2D, 1).image(out).image(self).launch(self);
  return out;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  NEURON_TRACK_OP("aten::_adaptive_avg_pool2d_backward");
  c10::DeviceGuard guard(self.device());
  int64_t ndim = grad_output.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4, "adaptive_avg_pool2d_backward(): Expected 3D or 4D grad_output, but got ",
              grad_output.sizes());
  TORCH_CHECK(self.dim() == ndim, "adaptive_avg_pool2d_backward(): grad_output and input must have one rank");
  for (int64_t i = 0; i < ndim - 2; i++)
    TORCH_CHECK(grad_output.size(i) == self.size(i), "adaptive_avg_pool2d_backward(): grad_output has sizes ",
                grad_output.sizes(), " but input has sizes ", self.sizes());
  TORCH_CHECK(self.dtype() == grad_output.dtype(), "expected dtype ", self.dtype(),
              " for `grad_output` but got dtype ", grad_output.dtype());
  check_floating(self, "adaptive_avg_pool2d_backward");
  at::Tensor grad_input = at::empty_like(self, self.suggest_memory_format());
  if (grad_input.numel() == 0) return grad_input;
  OpBuilder(NRT_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, 1).image(grad_input).image(grad_output).launch(self);
  return grad_input;
}

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices.out", max_pool2d_with_indices_out);
  m.impl("max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward_out);
  m.impl("avg_pool2d", avg_pool2d);
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool2d_backward", avg_pool2d_backward);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  m.impl("adaptive_max_pool2d", adaptive_max_pool2d);
  m.impl("adaptive_max_pool2d.out", adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool2d_backward", adaptive_max_pool2d_backward);
  m.impl("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward_out);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
}

}  // namespace
}  // namespace torchneuron
