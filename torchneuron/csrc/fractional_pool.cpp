// Fractional max pooling, 2-d and 3-d: fractional_max_pool{2,3}d with
// their backward ops and out= forms. The forward is the runtime op
// FRACTIONAL_MAX_POOL (windows drawn from the caller's random samples, as
// PyTorch draws them); the backward scatters through the indices with the
// max pools' backward ops, whose index convention it shares.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/fractional_max_pool2d_backward_meta.h>
#include <ATen/ops/fractional_max_pool2d_meta.h>
#include <ATen/ops/fractional_max_pool3d_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <tuple>

#include "op_tracking.h"
#include "vision3d_common.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;
using vision::Outputs;
using vision::volume_view;

// The [N, C, S] view of the samples (an unbatched call has [C, S]).
nrt_tensor_view samples_view(const at::Tensor& samples) {
  nrt_tensor_view v = to_view(samples, "fractional_max_pool");
  if (samples.dim() == 2) {  // unbatched: a batch of one
    v.shape[2] = v.shape[1], v.strides[2] = v.strides[1];
    v.shape[1] = v.shape[0], v.strides[1] = v.strides[0];
    v.shape[0] = 1, v.strides[0] = 0;
    v.ndim = 3;
  }
  return v;
}

// A 2-d image [N, C, H, W] (or [C, H, W]) as the 5-d view [N, C, 1, H, W].
nrt_tensor_view image_as_volume(const at::Tensor& t) {
  return volume_view(t.dim() == 3 ? t.unsqueeze(1) : t.unsqueeze(2), "fractional_max_pool2d");
}

void check_dtypes(const at::Tensor& self, const at::Tensor& samples, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", op, "\" not implemented for '",
                              self.scalar_type(), "'");
  TORCH_CHECK(samples.scalar_type() == self.scalar_type(), op, ": expected random_samples of dtype ",
              self.scalar_type(), " but got ", samples.scalar_type());
}

void pool_into(const at::Tensor& self, at::IntArrayRef k, const at::Tensor& samples, const at::Tensor& out,
               const at::Tensor& indices, bool two_d) {
  if (out.numel() == 0) return;
  OpBuilder b(NRT_OP_FRACTIONAL_MAX_POOL, 2);
  if (two_d) {
    b.view(image_as_volume(out)).view(image_as_volume(indices)).view(image_as_volume(self));
    b.view(samples_view(samples)).integer(1).integer(k[0]).integer(k[1]);
  } else {
    b.view(volume_view(out, "fractional_max_pool3d")).view(volume_view(indices, "fractional_max_pool3d"));
    b.view(volume_view(self, "fractional_max_pool3d")).view(samples_view(samples));
    b.integer(k[0]).integer(k[1]).integer(k[2]);
  }
  b.launch(out);
}

void backward_into(const at::Tensor& grad_output, const at::Tensor& indices, const at::Tensor& grad_input,
                   bool two_d) {
  if (grad_input.numel() == 0) return;
  TORCH_CHECK(grad_output.scalar_type() == grad_input.scalar_type(), "expected dtype ", grad_input.scalar_type(),
              " for `gradOutput` but got dtype ", grad_output.scalar_type());
  if (grad_output.numel() == 0) {
    grad_input.zero_();
    return;
  }
  if (two_d) {
    OpBuilder b(NRT_OP_MAX_POOL2D_BACKWARD, 1);
    b.image(grad_input).image(grad_output).image(indices).launch(grad_input);
  } else {
    OpBuilder b(NRT_OP_MAX_POOL3D_BACKWARD, 1);
    b.view(volume_view(grad_input, "fractional_max_pool3d_backward"))
        .view(volume_view(grad_output, "fractional_max_pool3d_backward"))
        .view(volume_view(indices, "fractional_max_pool3d_backward"));
    b.launch(grad_input);
  }
}

// ---- 2-d -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> fractional_max_pool2d(const at::Tensor& self, at::IntArrayRef k,
                                                         at::IntArrayRef output_size, const at::Tensor& samples) {
  NEURON_TRACK_OP("aten::fractional_max_pool2d");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool2d, 2> o;
  o.meta(self, k, output_size, samples);
  check_dtypes(self, samples, "fractional_max_pool2d");
  pool_into(self, k, samples, o[0], o[1], true);
  return {o[0], o[1]};
}

std::tuple<at::Tensor&, at::Tensor&> fractional_max_pool2d_out(const at::Tensor& self, at::IntArrayRef k,
                                                               at::IntArrayRef output_size,
                                                               const at::Tensor& samples, at::Tensor& output,
                                                               at::Tensor& indices) {
  NEURON_TRACK_OP("aten::fractional_max_pool2d.output");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool2d, 2> o({output, indices});
  o.meta(self, k, output_size, samples);
  check_dtypes(self, samples, "fractional_max_pool2d");
  pool_into(self, k, samples, output, indices, true);
  return {output, indices};
}

at::Tensor fractional_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                          at::IntArrayRef k, at::IntArrayRef output_size,
                                          const at::Tensor& indices) {
  NEURON_TRACK_OP("aten::fractional_max_pool2d_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool2d_backward, 1> o;
  o.meta(grad_output, self, k, output_size, indices);
  backward_into(grad_output, indices, o[0], true);
  return o[0];
}

at::Tensor& fractional_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                               at::IntArrayRef k, at::IntArrayRef output_size,
                                               const at::Tensor& indices, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::fractional_max_pool2d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool2d_backward, 1> o({grad_input});
  o.meta(grad_output, self, k, output_size, indices);
  backward_into(grad_output, indices, grad_input, true);
  return grad_input;
}

// ---- 3-d -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> fractional_max_pool3d(const at::Tensor& self, at::IntArrayRef k,
                                                         at::IntArrayRef output_size, const at::Tensor& samples) {
  NEURON_TRACK_OP("aten::fractional_max_pool3d");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool3d, 2> o;
  o.meta(self, k, output_size, samples);
  check_dtypes(self, samples, "fractional_max_pool3d");
  pool_into(self, k, samples, o[0], o[1], false);
  return {o[0], o[1]};
}

std::tuple<at::Tensor&, at::Tensor&> fractional_max_pool3d_out(const at::Tensor& self, at::IntArrayRef k,
                                                               at::IntArrayRef output_size,
                                                               const at::Tensor& samples, at::Tensor& output,
                                                               at::Tensor& indices) {
  NEURON_TRACK_OP("aten::fractional_max_pool3d.output");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_fractional_max_pool3d, 2> o({output, indices});
  o.meta(self, k, output_size, samples);
  check_dtypes(self, samples, "fractional_max_pool3d");
  pool_into(self, k, samples, output, indices, false);
  return {output, indices};
}

// Not structured in PyTorch: the CPU's checks, then grad_input shaped as self.
at::Tensor& fractional_max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                               at::IntArrayRef k, at::IntArrayRef output_size,
                                               const at::Tensor& indices, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::fractional_max_pool3d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(output_size.size() == 3, "fractional_max_pool3d_backward: output_size must have 3 values");
  int64_t d = self.dim() == 5 ? 2 : 1;
  TORCH_CHECK(grad_output.dim() == self.dim() && grad_output.size(d) == output_size[0] &&
                  grad_output.size(d + 1) == output_size[1] && grad_output.size(d + 2) == output_size[2],
              "fractional_max_pool3d_backward_out(): gradOutput size unexpected");
  TORCH_CHECK(indices.sizes() == grad_output.sizes(), "fractional_max_pool3d_backward_out(): indices size unexpected");
  at::native::resize_output(grad_input, self.sizes());
  backward_into(grad_output, indices, grad_input, false);
  return grad_input;
}

at::Tensor fractional_max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                          at::IntArrayRef k, at::IntArrayRef output_size,
                                          const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return fractional_max_pool3d_backward_out(grad_output, self, k, output_size, indices, grad_input);
}

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("fractional_max_pool2d", fractional_max_pool2d);
  m.impl("fractional_max_pool2d.output", fractional_max_pool2d_out);
  m.impl("fractional_max_pool2d_backward", fractional_max_pool2d_backward);
  m.impl("fractional_max_pool2d_backward.grad_input", fractional_max_pool2d_backward_out);
  m.impl("fractional_max_pool3d", fractional_max_pool3d);
  m.impl("fractional_max_pool3d.output", fractional_max_pool3d_out);
  m.impl("fractional_max_pool3d_backward", fractional_max_pool3d_backward);
  m.impl("fractional_max_pool3d_backward.grad_input", fractional_max_pool3d_backward_out);
}

}  // namespace
}  // namespace torchneuron
