// Layer norm, RMS norm and group norm, forward and backward, on the
// runtime's norm ops (neuronrt/ops/nn.h).
//
// Argument checks are PyTorch's own (_check_layer_norm_inputs and friends);
// the statistics (mean, rstd) take PyTorch's dtype rule: the input's dtype,
// or float32 when float16/bfloat16 data comes with float32 parameters.
// Inputs are made contiguous, as PyTorch's CPU kernels do; the kernels see
// them as [rows, n] (layer/RMS norm) or [batch, channels, spatial] (group
// norm).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/layer_norm.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "neuron_device.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;


void check_norm_floating(const at::Tensor& t, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kFloat8_e5m2,
                              "\"", name, "\" not implemented for '", t.scalar_type(), "'");
}

// A 1-d parameter (weight, bias, statistics) as a contiguous tensor, or undefined.
at::Tensor flat(const at::Tensor& t) { return t.defined() ? t.contiguous().view({-1}) : t; }

// The statistics' shape: the input's leading dims, then 1 for each normalised dim.
std::vector<int64_t> stat_shape(const at::Tensor& input, size_t normalized_dims) {
  std::vector<int64_t> shape;
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_dims);
  for (int64_t d = 0; d < input.dim(); d++) shape.push_back(d < axis ? input.size(d) : 1);
  return shape;
}

// ---- layer norm --------------------------------------------------------------

Tensor3 layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                   const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
                   double eps) {
  NEURON_TRACK_OP("aten::native_layer_norm");
  c10::DeviceGuard guard(input.device());
  const at::Tensor &weight = value_or_undefined(weight_opt), &bias = value_or_undefined(bias_opt);
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  check_norm_floating(input, "LayerNormKernelImpl");
  at::Tensor X = input.contiguous(), w = flat(weight), b = flat(bias);
  at::Tensor Y = at::empty_like(X, at::MemoryFormat::Contiguous);
  auto dtype = at::native::param_scalar_type(input, at::native::is_mixed_type(input, weight, bias));
  at::Tensor mean = at::empty(stat_shape(input, normalized_shape.size()), X.options().dtype(dtype));
  at::Tensor rstd = at::empty_like(mean);
  if (M > 0) {
    const char* name = "native_layer_norm";
    launch_nn(NRT_OP_LAYER_NORM, X, 3,
              {contiguous_view(Y, {M, N}, name), contiguous_view(mean, {M}, name),
               contiguous_view(rstd, {M}, name), contiguous_view(X, {M, N}, name), vector_view(w, name),
               vector_view(b, name)},
              {float_scalar(eps)});
  }
  return {Y, mean, rstd};
}

Tensor3 layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                            at::IntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
                            const std::optional<at::Tensor>& weight_opt,
                            const std::optional<at::Tensor>& bias_opt, std::array<bool, 3> mask) {
  NEURON_TRACK_OP("aten::native_layer_norm_backward");
  c10::DeviceGuard guard(input.device());
  const at::Tensor &weight = value_or_undefined(weight_opt), &bias = value_or_undefined(bias_opt);
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  check_norm_floating(input, "LayerNormBackwardKernelImpl");
  const char* name = "native_layer_norm_backward";
  at::Tensor X = input.contiguous(), dY = grad_out.contiguous(), w = flat(weight);
  at::Tensor dX, dw, db;
  if (mask[0]) dX = at::empty_like(X, at::MemoryFormat::Contiguous);
  if (mask[1] && weight.defined()) dw = at::empty_like(weight, at::MemoryFormat::Contiguous);
  if (mask[2] && bias.defined()) db = at::empty_like(bias, at::MemoryFormat::Contiguous);
  if ((dX.defined() || dw.defined() || db.defined()) && N > 0) {
    at::Tensor m = flat(mean), r = flat(rstd);
    launch_nn(NRT_OP_LAYER_NORM_BACKWARD, X, 3,
              {dX.defined() && M > 0 ? contiguous_view(dX, {M, N}, name) : absent_view(),
               dw.defined() ? contiguous_view(dw, {N}, name) : absent_view(),
               db.defined() ? contiguous_view(db, {N}, name) : absent_view(),
               contiguous_view(dY, {M, N}, name), contiguous_view(X, {M, N}, name), vector_view(m, name),
               vector_view(r, name), vector_view(w, name)});
  }
  return {dX, dw, db};
}

// ---- RMS norm ------------------------------------------------------------------

// eps when not given: the machine epsilon of the type PyTorch computes in.
double rms_eps(const at::Tensor& input, std::optional<double> eps) {
  if (eps.has_value()) return *eps;
  return input.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
}

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                            const std::optional<at::Tensor>& weight_opt,
                                            std::optional<double> eps) {
  NEURON_TRACK_OP("aten::_fused_rms_norm");
  c10::DeviceGuard guard(input.device());
  const at::Tensor& weight = value_or_undefined(weight_opt);
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, at::Tensor());
  check_norm_floating(input, "rms_norm");
  const char* name = "_fused_rms_norm";
  at::Tensor X = input.contiguous(), w = flat(weight);
  // As PyTorch's composite: the result takes the promoted dtype of input and
  // weight; rstd is kept in the compute dtype.
  auto out_dtype = weight.defined() ? at::promote_types(input.scalar_type(), weight.scalar_type())
                                    : input.scalar_type();
  at::Tensor Y = at::empty(X.sizes(), X.options().dtype(out_dtype));
  at::Tensor rstd = at::empty(stat_shape(input, normalized_shape.size()),
                              X.options().dtype(at::toOpMathType(input.scalar_type())));
  if (M > 0)
    launch_nn(NRT_OP_RMS_NORM, X, 2,
              {contiguous_view(Y, {M, N}, name), contiguous_view(rstd, {M}, name),
               contiguous_view(X, {M, N}, name), vector_view(w, name)},
              {float_scalar(rms_eps(input, eps))});
  return {Y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight_opt,
                                                     std::array<bool, 2> mask) {
  NEURON_TRACK_OP("aten::_fused_rms_norm_backward");
  c10::DeviceGuard guard(input.device());
  const at::Tensor& weight = value_or_undefined(weight_opt);
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, at::Tensor());
  check_norm_floating(input, "rms_norm_backward");
  const char* name = "_fused_rms_norm_backward";
  at::Tensor X = input.contiguous(), dY = grad_out.contiguous(), w = flat(weight);
  at::Tensor dX, dw;
  if (mask[0]) dX = at::empty_like(X, at::MemoryFormat::Contiguous);
  if (mask[1] && weight.defined()) dw = at::empty_like(weight, at::MemoryFormat::Contiguous);
  if ((dX.defined() || dw.defined()) && N > 0) {
    at::Tensor r = flat(rstd);
    launch_nn(NRT_OP_RMS_NORM_BACKWARD, X, 2,
              {dX.defined() && M > 0 ? contiguous_view(dX, {M, N}, name) : absent_view(),
               dw.defined() ? contiguous_view(dw, {N}, name) : absent_view(),
               contiguous_view(dY, {M, N}, name), contiguous_view(X, {M, N}, name), vector_view(r, name),
               vector_view(w, name)});
  }
  return {dX, dw};
}

// ---- group norm ----------------------------------------------------------------

void check_group_norm(const at::Tensor& X, const at::Tensor& gamma, const at::Tensor& beta, int64_t N,
                      int64_t C, int64_t HxW, int64_t group) {
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", X.sizes(), " and num_groups=", group);
  TORCH_CHECK(X.numel() == N * C * HxW, "native_group_norm: input of shape ", X.sizes(),
              " does not hold N * C * HxW = ", N, " * ", C, " * ", HxW, " elements");
  TORCH_CHECK(!gamma.defined() || gamma.numel() == C, "Expected weight to be a vector of size equal to ",
              "the number of channels in input, but got weight of shape ", gamma.sizes(),
              " and input of shape ", X.sizes());
  TORCH_CHECK(!beta.defined() || beta.numel() == C, "Expected bias to be a vector of size equal to ",
              "the number of channels in input, but got bias of shape ", beta.sizes(),
              " and input of shape ", X.sizes());
  check_norm_floating(X, "GroupNormKernelImpl");
  // As on the CPU: group_norm makes its input contiguous before calling this.
  TORCH_CHECK(X.is_contiguous(X.suggest_memory_format()), "Expected X.is_contiguous(memory_format) to be true, "
              "but got false.");
}

Tensor3 group_norm(const at::Tensor& input, const std::optional<at::Tensor>& gamma_opt,
                   const std::optional<at::Tensor>& beta_opt, int64_t N, int64_t C, int64_t HxW,
                   int64_t group, double eps) {
  NEURON_TRACK_OP("aten::native_group_norm");
  c10::DeviceGuard guard(input.device());
  const at::Tensor &gamma = value_or_undefined(gamma_opt), &beta = value_or_undefined(beta_opt);
  check_group_norm(input, gamma, beta, N, C, HxW, group);
  const char* name = "native_group_norm";
  at::Tensor X = input.contiguous(), w = flat(gamma), b = flat(beta);
  at::Tensor Y = at::empty_like(X, at::MemoryFormat::Contiguous);
  auto dtype = at::native::param_scalar_type(input, at::native::is_mixed_type(input, gamma, beta));
  at::Tensor mean = at::empty({N, group}, X.options().dtype(dtype)), rstd = at::empty_like(mean);
  if (N * group > 0)
    launch_nn(NRT_OP_GROUP_NORM, X, 3,
              {contiguous_view(Y, {N, C, HxW}, name), contiguous_view(mean, {N * group}, name),
               contiguous_view(rstd, {N * group}, name), contiguous_view(X, {N, C, HxW}, name),
               vector_view(w, name), vector_view(b, name)},
              {int_scalar(group), float_scalar(eps)});
  return {Y, mean, rstd};
}

Tensor3 group_norm_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                            const at::Tensor& rstd, const std::optional<at::Tensor>& gamma_opt, int64_t N,
                            int64_t C, int64_t HxW, int64_t group, std::array<bool, 3> mask) {
  NEURON_TRACK_OP("aten::native_group_norm_backward");
  c10::DeviceGuard guard(input.device());
  const at::Tensor& gamma = value_or_undefined(gamma_opt);
  check_group_norm(input, gamma, at::Tensor(), N, C, HxW, group);
  const char* name = "native_group_norm_backward";
  at::Tensor X = input.contiguous(), dY = grad_out.contiguous(), w = flat(gamma);
  auto param_options = gamma.defined() ? gamma.options() : X.options();
  at::Tensor dX, dw, db;
  if (mask[0]) dX = at::empty_like(X, at::MemoryFormat::Contiguous);
  if (mask[1]) dw = at::empty({C}, param_options);
  if (mask[2]) db = at::empty({C}, param_options);
  if (C > 0 && (dX.defined() || dw.defined() || db.defined())) {
    at::Tensor m = flat(mean), r = flat(rstd);
    launch_nn(NRT_OP_GROUP_NORM_BACKWARD, X, 3,
              {dX.defined() && dX.numel() > 0 ? contiguous_view(dX, {N, C, HxW}, name) : absent_view(),
               dw.defined() ? contiguous_view(dw, {C}, name) : absent_view(),
               db.defined() ? contiguous_view(db, {C}, name) : absent_view(),
               contiguous_view(dY, {N, C, HxW}, name), contiguous_view(X, {N, C, HxW}, name),
               vector_view(m, name), vector_view(r, name), vector_view(w, name)},
              {int_scalar(group)});
  }
  return {dX, dw, db};
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("native_layer_norm", TORCH_FN(layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
  m.impl("_fused_rms_norm", TORCH_FN(rms_norm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(rms_norm_backward));
  m.impl("native_group_norm", TORCH_FN(group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(group_norm_backward));
}

}  // namespace torchneuron
