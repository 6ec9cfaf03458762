// Volumetric pooling: max_pool3d_with_indices, avg_pool3d,
// adaptive_max_pool3d, _adaptive_avg_pool3d (and adaptive_avg_pool3d.out)
// with their backward ops, on the runtime's 3-d pooling ops
// (neuronrt/ops/vision.h). The structured ops run PyTorch's meta functions;
// max_pool3d_with_indices and _adaptive_avg_pool3d, which are not
// structured, repeat the CPU kernels' checks with ATen's own shape helpers
// (ATen/native/Pool.h). Floating dtypes (and, as on the CPU, integers for
// max_pool3d and int64 for avg_pool3d forward); NCDHW and channels_last_3d.
#include <ATen/ATen.h>
#include <ATen/native/Pool.h>
#include <ATen/ops/adaptive_max_pool3d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool3d_meta.h>
#include <ATen/ops/avg_pool3d_backward_meta.h>
#include <ATen/ops/avg_pool3d_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "vision3d_common.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;
using vision::Outputs;
using vision::pack3;
using vision::volume_view;

void check_pool3d_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '",
                              t.scalar_type(), "'");
}

// Element i of a 3-d pooling argument given as one value or three; empty
// means fallback (a stride defaults to the kernel).
int64_t triple_at(at::IntArrayRef v, size_t i, at::IntArrayRef fallback = {}) {
  if (v.empty()) return triple_at(fallback, i);
  return v.size() == 1 ? v[0] : v[i];
}

int64_t packed(at::IntArrayRef v, const char* op, at::IntArrayRef fallback = {}) {
  return pack3(triple_at(v, 0, fallback), triple_at(v, 1, fallback), triple_at(v, 2, fallback), op);
}

OpBuilder& vol(OpBuilder& b, const at::Tensor& t) { return b.view(volume_view(t, b.name())); }

// ---- max_pool3d_with_indices (the CPU kernel's checks) ------------------------

struct MaxPool3dShape {
  int64_t kT, kH, kW, dT, dH, dW, pT, pH, pW, lT, lH, lW;
  int64_t nslices, itime, iheight, iwidth, otime, oheight, owidth;
};

MaxPool3dShape max_pool3d_shape(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                const char* fn) {
  TORCH_CHECK(kernel_size.size() == 1 || kernel_size.size() == 3,
              "max_pool3d: kernel_size must either be a single int, or a tuple of three ints")
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 3,
              "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints")
  TORCH_CHECK(padding.size() == 1 || padding.size() == 3,
              "max_pool3d: padding must either be a single int, or a tuple of three ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 3,
              "max_pool3d: dilation must be either a single int, or a tuple of three ints");
  TORCH_CHECK(input.ndimension() == 4 || input.ndimension() == 5,
              "non-empty 4D or 5D (batch mode) tensor expected for input");
  MaxPool3dShape s{};
  s.kT = triple_at(kernel_size, 0), s.kH = triple_at(kernel_size, 1), s.kW = triple_at(kernel_size, 2);
  s.dT = triple_at(stride, 0, kernel_size), s.dH = triple_at(stride, 1, kernel_size),
  s.dW = triple_at(stride, 2, kernel_size);
  s.pT = triple_at(padding, 0), s.pH = triple_at(padding, 1), s.pW = triple_at(padding, 2);
  s.lT = triple_at(dilation, 0), s.lH = triple_at(dilation, 1), s.lW = triple_at(dilation, 2);
  int64_t nd = input.dim();
  s.nslices = input.size(-4);
  s.itime = input.size(-3), s.iheight = input.size(-2), s.iwidth = input.size(-1);
  s.otime = at::native::pooling_output_shape<int64_t>(s.itime, s.kT, s.pT, s.dT, s.lT, ceil_mode);
  s.oheight = at::native::pooling_output_shape<int64_t>(s.iheight, s.kH, s.pH, s.dH, s.lH, ceil_mode);
  s.owidth = at::native::pooling_output_shape<int64_t>(s.iwidth, s.kW, s.pW, s.dW, s.lW, ceil_mode);
  at::native::pool3d_shape_check(input, s.nslices, s.kT, s.kH, s.kW, s.dT, s.dH, s.dW, s.pT, s.pH, s.pW, s.lT,
                                 s.lH, s.lW, s.itime, s.iheight, s.iwidth, s.otime, s.oheight, s.owidth, fn);
  (void)nd;
  return s;
}

std::vector<int64_t> pooled_sizes(const at::Tensor& input, int64_t t, int64_t h, int64_t w) {
  std::vector<int64_t> sizes = input.sizes().vec();
  size_t n = sizes.size();
  sizes[n - 3] = t, sizes[n - 2] = h, sizes[n - 1] = w;
  return sizes;
}

void max_pool3d_into(const at::Tensor& self, const MaxPool3dShape& s, const at::Tensor& out,
                     const at::Tensor& indices) {
  // as on the CPU: floating and integer dtypes (not bool)
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) ||
                                  at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"max_pool3d\" not implemented for '", self.scalar_type(), "'");
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_MAX_POOL3D, 2);
  vol(vol(vol(b, out), indices), self);
  b.integer(pack3(s.kT, s.kH, s.kW, b.name()))
      .integer(pack3(s.dT, s.dH, s.dW, b.name()))
      .integer(pack3(s.pT, s.pH, s.pW, b.name()))
      .integer(pack3(s.lT, s.lH, s.lW, b.name()));
  b.launch(self);
}

std::tuple<at::Tensor&, at::Tensor&> max_pool3d_with_indices_out(const at::Tensor& self, at::IntArrayRef kernel,
                                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                                 at::IntArrayRef dilation, bool ceil_mode,
                                                                 at::Tensor& out, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::max_pool3d_with_indices.out");
  c10::DeviceGuard guard(self.device());
  MaxPool3dShape s = max_pool3d_shape(self, kernel, stride, padding, dilation, ceil_mode,
                                      "max_pool3d_with_indices_out_cpu_template()");
  auto sizes = pooled_sizes(self, s.otime, s.oheight, s.owidth);
  auto fmt = self.dim() == 5 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
  at::native::resize_output(out, sizes);
  at::native::resize_output(indices, sizes);
  if (self.dim() == 5 && fmt == at::MemoryFormat::ChannelsLast3d) {
    out.unsafeGetTensorImpl()->empty_tensor_restride(fmt);
    indices.unsafeGetTensorImpl()->empty_tensor_restride(fmt);
  }
  TORCH_CHECK(indices.scalar_type() == at::kLong, "max_pool3d: indices must be int64");
  max_pool3d_into(self, s, out, indices);
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> max_pool3d_with_indices(const at::Tensor& self, at::IntArrayRef kernel,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  NEURON_TRACK_OP("aten::max_pool3d_with_indices");
  c10::DeviceGuard guard(self.device());
  MaxPool3dShape s = max_pool3d_shape(self, kernel, stride, padding, dilation, ceil_mode,
                                      "max_pool3d_with_indices_out_cpu_template()");
  auto sizes = pooled_sizes(self, s.otime, s.oheight, s.owidth);
  auto fmt = self.dim() == 5 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
  at::Tensor out = at::empty(sizes, self.options().memory_format(fmt));
  at::Tensor indices = at::empty(sizes, self.options().dtype(at::kLong).memory_format(fmt));
  max_pool3d_into(self, s, out, indices);
  return {out, indices};
}

void max_pool3d_backward_into(const at::Tensor& grad_output, const at::Tensor& indices,
                              const at::Tensor& grad_input) {
  check_pool3d_floating(grad_input, "max_pool3d_with_indices_backward");
  TORCH_CHECK(grad_output.scalar_type() == grad_input.scalar_type(), "expected dtype ", grad_input.scalar_type(),
              " for `gradOutput` but got dtype ", grad_output.scalar_type());
  if (grad_input.numel() == 0) return;
  OpBuilder b(NRT_OP_MAX_POOL3D_BACKWARD, 1);
  vol(vol(vol(b, grad_input), grad_output), indices);
  b.launch(grad_input);
}

at::Tensor& max_pool3d_with_indices_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                 at::IntArrayRef kernel, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation,
                                                 bool ceil_mode, const at::Tensor& indices,
                                                 at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::max_pool3d_with_indices_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  MaxPool3dShape s = max_pool3d_shape(self, kernel, stride, padding, dilation, ceil_mode,
                                      "max_pool3d_with_indices_backward_out_cpu_template()");
  at::native::max_pool3d_backward_shape_check(self, grad_output, indices, s.nslices, s.kT, s.kH, s.kW, s.dT, s.dH,
                                              s.dW, s.pT, s.pH, s.pW, s.lT, s.lH, s.lW, s.itime, s.iheight,
                                              s.iwidth, s.otime, s.oheight, s.owidth,
                                              "max_pool3d_with_indices_backward_out_cpu_template()");
  at::native::resize_output(grad_input, self.sizes());
  if (self.dim() == 5 && self.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d)
    grad_input.unsafeGetTensorImpl()->empty_tensor_restride(at::MemoryFormat::ChannelsLast3d);
  max_pool3d_backward_into(grad_output, indices, grad_input);
  return grad_input;
}

at::Tensor max_pool3d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                            const at::Tensor& indices) {
  NEURON_TRACK_OP("aten::max_pool3d_with_indices_backward");
  c10::DeviceGuard guard(self.device());
  MaxPool3dShape s = max_pool3d_shape(self, kernel, stride, padding, dilation, ceil_mode,
                                      "max_pool3d_with_indices_backward_out_cpu_template()");
  at::native::max_pool3d_backward_shape_check(self, grad_output, indices, s.nslices, s.kT, s.kH, s.kW, s.dT, s.dH,
                                              s.dW, s.pT, s.pH, s.pW, s.lT, s.lH, s.lW, s.itime, s.iheight,
                                              s.iwidth, s.otime, s.oheight, s.owidth,
                                              "max_pool3d_with_indices_backward_out_cpu_template()");
  auto fmt = self.dim() == 5 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
  at::Tensor grad_input = at::empty(self.sizes(), self.options().memory_format(fmt));
  max_pool3d_backward_into(grad_output, indices, grad_input);
  return grad_input;
}

// ---- avg_pool3d (structured) ----------------------------------------------------

using AvgPool3dMeta = at::meta::structured_avg_pool3d;
using AvgPool3dBackwardMeta = at::meta::structured_avg_pool3d_backward;

void avg_pool3d_args(OpBuilder& b, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  b.integer(packed(kernel, b.name())).integer(packed(stride, b.name(), kernel)).integer(packed(padding, b.name()));
  b.integer(count_include_pad ? 1 : 0).integer(divisor_override.value_or(0));
}

void avg_pool3d_into(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, bool count_include_pad, std::optional<int64_t> divisor_override,
                     const at::Tensor& out) {
  // as on the CPU: floating dtypes and int64
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || self.scalar_type() == at::kLong,
                              "\"avg_pool3d_out_frame\" not implemented for '", self.scalar_type(), "'");
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_AVG_POOL3D, 1);
  vol(vol(b, out), self);
  avg_pool3d_args(b, kernel, stride, padding, count_include_pad, divisor_override);
  b.launch(self);
}

at::Tensor avg_pool3d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  NEURON_TRACK_OP("aten::avg_pool3d");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPool3dMeta, 1> o;
  o.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool3d_into(self, kernel, stride, padding, count_include_pad, divisor_override, o[0]);
  return o[0];
}

at::Tensor& avg_pool3d_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  NEURON_TRACK_OP("aten::avg_pool3d.out");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPool3dMeta, 1> o({out});
  o.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool3d_into(self, kernel, stride, padding, count_include_pad, divisor_override, out);
  return out;
}

void avg_pool3d_backward_into(const at::Tensor& grad_output, at::IntArrayRef kernel, at::IntArrayRef stride,
                              at::IntArrayRef padding, bool count_include_pad,
                              std::optional<int64_t> divisor_override, const at::Tensor& grad_input) {
  check_pool3d_floating(grad_input, "avg_pool3d_backward");
  if (grad_input.numel() == 0) return;
  OpBuilder b(NRT_OP_AVG_POOL3D_BACKWARD, 1);
  vol(vol(b, grad_input), grad_output);
  avg_pool3d_args(b, kernel, stride, padding, count_include_pad, divisor_override);
  b.launch(grad_input);
}

at::Tensor avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  NEURON_TRACK_OP("aten::avg_pool3d_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPool3dBackwardMeta, 1> o;
  o.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool3d_backward_into(grad_output, kernel, stride, padding, count_include_pad, divisor_override, o[0]);
  return o[0];
}

at::Tensor& avg_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::avg_pool3d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<AvgPool3dBackwardMeta, 1> o({grad_input});
  o.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  avg_pool3d_backward_into(grad_output, kernel, stride, padding, count_include_pad, divisor_override, grad_input);
  return grad_input;
}

// ---- adaptive_max_pool3d (structured) --------------------------------------------

using AdaptiveMaxPool3dMeta = at::meta::structured_adaptive_max_pool3d;
using AdaptiveMaxPool3dBackwardMeta = at::meta::structured_adaptive_max_pool3d_backward;

void adaptive_max3d_into(const at::Tensor& self, const at::Tensor& out, const at::Tensor& indices) {
  check_pool3d_floating(self, "adaptive_max_pool3d_cpu");
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_ADAPTIVE_MAX_POOL3D, 2);
  vol(vol(vol(b, out), indices), self);
  b.launch(self);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool3d(const at::Tensor& self, at::IntArrayRef output_size) {
  NEURON_TRACK_OP("aten::adaptive_max_pool3d");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxPool3dMeta, 2> o;
  o.meta(self, output_size);
  adaptive_max3d_into(self, o[0], o[1]);
  return {o[0], o[1]};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool3d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::adaptive_max_pool3d.out");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxPool3dMeta, 2> o({out, indices});
  o.meta(self, output_size);
  adaptive_max3d_into(self, out, indices);
  return {out, indices};
}

at::Tensor adaptive_max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& indices) {
  NEURON_TRACK_OP("aten::adaptive_max_pool3d_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxPool3dBackwardMeta, 1> o;
  o.meta(grad_output, self, indices);
  max_pool3d_backward_into(grad_output, indices, o[0]);
  return o[0];
}

at::Tensor& adaptive_max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             const at::Tensor& indices, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::adaptive_max_pool3d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<AdaptiveMaxPool3dBackwardMeta, 1> o({grad_input});
  o.meta(grad_output, self, indices);
  max_pool3d_backward_into(grad_output, indices, grad_input);
  return grad_input;
}

// ---- _adaptive_avg_pool3d (not structured: the CPU kernel's checks) -------------

std::vector<int64_t> adaptive_avg3d_sizes(const at::Tensor& self, at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 1 || output_size.size() == 3,
              "adaptive_avg_pool3d: output_size must be 3");
  int64_t ndim = self.dim();
  TORCH_CHECK(ndim == 4 || ndim == 5, "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got ", self.sizes());
  for (int64_t i = 1; i < ndim; i++)
    TORCH_CHECK(self.size(i) > 0,
                "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ", self.sizes(), " with dimension ", i, " being empty");
  check_pool3d_floating(self, "adaptive_avg_pool3d_cpu");
  return pooled_sizes(self, triple_at(output_size, 0), triple_at(output_size, 1), triple_at(output_size, 2));
}

void adaptive_avg3d_into(const at::Tensor& self, const at::Tensor& out) {
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_ADAPTIVE_AVG_POOL3D, 1);
  vol(vol(b, out), self);
  b.launch(self);
}

at::Tensor adaptive_avg_pool3d(const at::Tensor& self, c10::SymIntArrayRef sym_output_size) {
  NEURON_TRACK_OP("aten::_adaptive_avg_pool3d");
  c10::DeviceGuard guard(self.device());
  auto sizes = adaptive_avg3d_sizes(self, C10_AS_INTARRAYREF_SLOW(sym_output_size));
  at::Tensor out = at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  adaptive_avg3d_into(self, out);
  return out;
}

at::Tensor& adaptive_avg_pool3d_out(const at::Tensor& self, c10::SymIntArrayRef sym_output_size, at::Tensor& out) {
  NEURON_TRACK_OP("aten::adaptive_avg_pool3d.out");
  c10::DeviceGuard guard(self.device());
  auto sizes = adaptive_avg3d_sizes(self, C10_AS_INTARRAYREF_SLOW(sym_output_size));
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "adaptive_avg_pool3d: expected out dtype ",
              self.scalar_type(), " but got ", out.scalar_type());
  at::native::resize_output(out, sizes);
  adaptive_avg3d_into(self, out);
  return out;
}

at::Tensor adaptive_avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  NEURON_TRACK_OP("aten::_adaptive_avg_pool3d_backward");
  c10::DeviceGuard guard(self.device());
  int64_t ndim = grad_output.dim();
  TORCH_CHECK(ndim == 4 || ndim == 5, "adaptive_avg_pool3d_backward(): Expected 4D or 5D grad_output, but got ",
              grad_output.sizes());
  TORCH_CHECK(self.dim() == ndim, "adaptive_avg_pool3d_backward(): grad_output and input must have one rank");
  for (int64_t i = 0; i < ndim - 3; i++)
    TORCH_CHECK(grad_output.size(i) == self.size(i), "adaptive_avg_pool3d_backward(): grad_output has sizes ",
                grad_output.sizes(), " but input has sizes ", self.sizes());
  TORCH_CHECK(self.dtype() == grad_output.dtype(), "expected dtype ", self.dtype(),
              " for `grad_output` but got dtype ", grad_output.dtype());
  check_pool3d_floating(self, "adaptive_avg_pool3d_backward");
  at::Tensor grad_input = at::empty_like(self, self.suggest_memory_format());
  if (grad_input.numel() == 0) return grad_input;
  OpBuilder b(NRT_OP_ADAPTIVE_AVG_POOL3D_BACKWARD, 1);
  vol(vol(b, grad_input), grad_output);
  b.launch(self);
  return grad_input;
}

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("max_pool3d_with_indices", max_pool3d_with_indices);
  m.impl("max_pool3d_with_indices.out", max_pool3d_with_indices_out);
  m.impl("max_pool3d_with_indices_backward", max_pool3d_with_indices_backward);
  m.impl("max_pool3d_with_indices_backward.grad_input", max_pool3d_with_indices_backward_out);
  m.impl("avg_pool3d", avg_pool3d);
  m.impl("avg_pool3d.out", avg_pool3d_out);
  m.impl("avg_pool3d_backward", avg_pool3d_backward);
  m.impl("avg_pool3d_backward.grad_input", avg_pool3d_backward_out);
  m.impl("adaptive_max_pool3d", adaptive_max_pool3d);
  m.impl("adaptive_max_pool3d.out", adaptive_max_pool3d_out);
  m.impl("adaptive_max_pool3d_backward", adaptive_max_pool3d_backward);
  m.impl("adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward_out);
  m.impl("_adaptive_avg_pool3d", adaptive_avg_pool3d);
  m.impl("adaptive_avg_pool3d.out", adaptive_avg_pool3d_out);
  m.impl("_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward);
}

}  // namespace
}  // namespace torchneuron
