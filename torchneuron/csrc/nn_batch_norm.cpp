// Batch norm on the runtime's BATCH_NORM ops (neuronrt/ops/nn.h): every
// ATen entry F.batch_norm reaches in training and evaluation, with the
// running statistics updated in place, and their gradients.
//
// The kernels see the input as [batch, channels, spatial] with its own
// strides when the spatial dims merge (contiguous and channels-last
// tensors), so no copy is made; outputs keep the input's memory format.
// Saved statistics follow PyTorch's dtype rule: float32 when float16 or
// bfloat16 data comes with float32 parameters, else the input's dtype.
#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <tuple>

#include "neuron_device.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;


// t as a [batch, channels, spatial] view; falls back to a contiguous copy
// (kept in `holder`) when the spatial dims do not merge.
nrt_tensor_view bcs_view(const at::Tensor& t, at::Tensor& holder, const char* name) {
  const int64_t N = t.size(0), C = t.size(1);
  int64_t S = 1;
  for (int64_t d = 2; d < t.dim(); d++) S *= t.size(d);
  auto strides = at::detail::computeStride(t.sizes(), t.strides(), at::IntArrayRef{N, C, S});
  holder = strides ? t : t.contiguous();
  if (!strides) strides = at::detail::computeStride(holder.sizes(), holder.strides(), at::IntArrayRef{N, C, S});
  TORCH_INTERNAL_ASSERT(strides.has_value());
  return strided_view(holder, {N, C, S}, {(*strides)[0], (*strides)[1], (*strides)[2]}, name);
}

nrt_tensor_view param_view(const at::Tensor& t, int64_t C, const char* what, const char* name) {
  if (!t.defined()) return absent_view();
  TORCH_CHECK(t.numel() == C, what, " should contain ", C, " elements not ", t.numel());
  return t.dim() == 1 ? to_view(t, name) : vector_view(t.contiguous(), name);
}

void check_input(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ",
              input.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"batch_norm\" not implemented for '",
                              input.scalar_type(), "'");
}

at::ScalarType stat_dtype(const at::Tensor& input, const at::Tensor& w, const at::Tensor& b,
                          const at::Tensor& rm, const at::Tensor& rv) {
  return at::native::param_scalar_type(input, at::native::is_mixed_type(input, w, b, rm, rv));
}

// The forward: writes out and, when training, save_mean and save_invstd
// (both [C]); updates the running statistics that are given.
void forward(const at::Tensor& input, const at::Tensor& w, const at::Tensor& b, const at::Tensor& rm,
             const at::Tensor& rv, bool training, double momentum, double eps, const at::Tensor& out,
             const at::Tensor& save_mean, const at::Tensor& save_invstd) {
  const char* name = "native_batch_norm";
  const int64_t C = input.size(1);
  TORCH_CHECK(training || (rm.defined() && rv.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  if (input.numel() == 0 && !training) return;
  at::Tensor x_holder, out_holder;
  nrt_tensor_view x = bcs_view(input, x_holder, name), y = bcs_view(out, out_holder, name);
  at::Tensor rm_c = rm.defined() && rm.dim() != 1 ? rm.contiguous() : rm;
  at::Tensor rv_c = rv.defined() && rv.dim() != 1 ? rv.contiguous() : rv;
  launch_nn(NRT_OP_BATCH_NORM, input, 5,
            {y, training ? param_view(save_mean, C, "save_mean", name) : absent_view(),
             training ? param_view(save_invstd, C, "save_invstd", name) : absent_view(),
             param_view(rm_c, C, "running_mean", name), param_view(rv_c, C, "running_var", name), x,
             param_view(w, C, "weight", name), param_view(b, C, "bias", name)},
            {int_scalar(training), float_scalar(momentum), float_scalar(eps)});
  if (!out_holder.is_same(out)) const_cast<at::Tensor&>(out).copy_(out_holder);
  if (rm_c.defined() && !rm_c.is_same(rm)) const_cast<at::Tensor&>(rm).copy_(rm_c.view_as(rm));
  if (rv_c.defined() && !rv_c.is_same(rv)) const_cast<at::Tensor&>(rv).copy_(rv_c.view_as(rv));
}

Tensor3 batch_norm_impl(const at::Tensor& input, const at::Tensor& w, const at::Tensor& b,
                        const at::Tensor& rm, const at::Tensor& rv, bool training, double momentum,
                        double eps) {
  c10::DeviceGuard guard(input.device());
  check_input(input);
  at::Tensor out = at::empty_like(input);
  auto options = input.options().dtype(stat_dtype(input, w, b, rm, rv));
  at::Tensor save_mean = at::empty({training ? input.size(1) : 0}, options);
  at::Tensor save_invstd = at::empty({training ? input.size(1) : 0}, options);
  forward(input, w, b, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
  return {out, save_mean, save_invstd};
}

Tensor3 native_batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& w,
                          const std::optional<at::Tensor>& b, const std::optional<at::Tensor>& rm,
                          const std::optional<at::Tensor>& rv, bool training, double momentum, double eps) {
  NEURON_TRACK_OP("aten::native_batch_norm");
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), value_or_undefined(rm),
                         value_or_undefined(rv), training, momentum, eps);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w_opt, const std::optional<at::Tensor>& b_opt,
    const std::optional<at::Tensor>& rm_opt, const std::optional<at::Tensor>& rv_opt, bool training,
    double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  NEURON_TRACK_OP("aten::native_batch_norm.out");
  c10::DeviceGuard guard(input.device());
  check_input(input);
  const at::Tensor &w = value_or_undefined(w_opt), &b = value_or_undefined(b_opt);
  const at::Tensor &rm = value_or_undefined(rm_opt), &rv = value_or_undefined(rv_opt);
  at::native::resize_output(out, input.sizes());
  at::native::resize_output(save_mean, {training ? input.size(1) : 0});
  at::native::resize_output(save_invstd, {training ? input.size(1) : 0});
  forward(input, w, b, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b, at::Tensor& rm,
    at::Tensor& rv, bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  NEURON_TRACK_OP("aten::_native_batch_norm_legit.out");
  return native_batch_norm_out(input, w, b, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legit_no_stats_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b, bool training,
    double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  NEURON_TRACK_OP("aten::_native_batch_norm_legit.no_stats_out");
  return native_batch_norm_out(input, w, b, std::nullopt, std::nullopt, training, momentum, eps, out, save_mean,
                               save_invstd);
}

Tensor3 legit(const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
              at::Tensor& rm, at::Tensor& rv, bool training, double momentum, double eps) {
  NEURON_TRACK_OP("aten::_native_batch_norm_legit");
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), rm, rv, training, momentum, eps);
}

Tensor3 legit_no_stats(const at::Tensor& input, const std::optional<at::Tensor>& w,
                       const std::optional<at::Tensor>& b, bool training, double momentum, double eps) {
  NEURON_TRACK_OP("aten::_native_batch_norm_legit.no_stats");
  return batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), at::Tensor(), at::Tensor(),
                         training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    at::Tensor& rm, at::Tensor& rv, double momentum, double eps) {
  NEURON_TRACK_OP("aten::_batch_norm_with_update");
  auto [out, mean, invstd] =
      batch_norm_impl(input, value_or_undefined(w), value_or_undefined(b), rm, rv, true, momentum, eps);
  at::Tensor reserve = at::empty({0}, input.options().dtype(at::kByte));
  return {out, mean, invstd, reserve};
}

// ---- backward --------------------------------------------------------------------

Tensor3 backward_impl(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& w,
                      const at::Tensor& rm, const at::Tensor& rv, const at::Tensor& save_mean,
                      const at::Tensor& save_invstd, bool train, double eps, std::array<bool, 3> mask) {
  c10::DeviceGuard guard(input.device());
  check_input(input);
  const char* name = "native_batch_norm_backward";
  const int64_t C = input.size(1);
  const at::Tensor& mean = train ? save_mean : rm;
  const at::Tensor& stat = train ? save_invstd : rv;
  TORCH_CHECK(mean.defined() && stat.defined(), name, ": the ",
              train ? "saved mean and invstd" : "running mean and variance", " are required");
  auto param_options = w.defined() ? w.options() : input.options().dtype(stat_dtype(input, w, w, rm, rv));
  at::Tensor dX, dw, db;
  if (mask[0]) dX = at::empty_like(input);
  if (mask[1]) dw = at::empty({C}, param_options);
  if (mask[2]) db = at::empty({C}, param_options);
  if (C == 0 || (!dX.defined() && !dw.defined() && !db.defined())) return {dX, dw, db};
  at::Tensor x_holder, gy_holder, dx_holder;
  nrt_tensor_view x = bcs_view(input, x_holder, name), gy = bcs_view(grad_out, gy_holder, name);
  nrt_tensor_view gx = dX.defined() && dX.numel() > 0 ? bcs_view(dX, dx_holder, name) : absent_view();
  launch_nn(NRT_OP_BATCH_NORM_BACKWARD, input, 3,
            {gx, dw.defined() ? to_view(dw, name) : absent_view(),
             db.defined() ? to_view(db, name) : absent_view(), gy, x, param_view(w, C, "weight", name),
             param_view(mean, C, "mean", name), param_view(stat, C, train ? "invstd" : "running_var", name)},
            {int_scalar(train), float_scalar(eps)});
  if (dx_holder.defined() && !dx_holder.is_same(dX)) dX.copy_(dx_holder);
  return {dX, dw, db};
}

Tensor3 native_batch_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                   const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& rm,
                                   const std::optional<at::Tensor>& rv, const std::optional<at::Tensor>& save_mean,
                                   const std::optional<at::Tensor>& save_invstd, bool train, double eps,
                                   std::array<bool, 3> mask) {
  NEURON_TRACK_OP("aten::native_batch_norm_backward");
  return backward_impl(grad_out, input, value_or_undefined(w), value_or_undefined(rm), value_or_undefined(rv),
                       value_or_undefined(save_mean), value_or_undefined(save_invstd), train, eps, mask);
}

Tensor3 batch_norm_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& w,
                            const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv,
                            const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var,
                            bool update, double eps, std::array<bool, 3> mask, const at::Tensor& reserve) {
  NEURON_TRACK_OP("aten::batch_norm_backward");
  (void)reserve;
  return backward_impl(grad_out, input, w, value_or_undefined(rm), value_or_undefined(rv),
                       value_or_undefined(save_mean), value_or_undefined(save_var), update, eps, mask);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("native_batch_norm.out", TORCH_FN(native_batch_norm_out));
  m.impl("_native_batch_norm_legit", TORCH_FN(legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(legit_no_stats));
  m.impl("_native_batch_norm_legit.out", TORCH_FN(legit_out));
  m.impl("_native_batch_norm_legit.no_stats_out", TORCH_FN(legit_no_stats_out));
  m.impl("_batch_norm_with_update", TORCH_FN(with_update));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward));
}

}  // namespace torchneuron
