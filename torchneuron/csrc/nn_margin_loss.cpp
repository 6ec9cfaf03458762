// multi_margin_loss and multilabel_margin_loss (forward and backward),
// composed of native kernels with the CPU's checks and messages. Input is
// [N, C], [C] or a 0-d single score; the per-sample losses are
//   multi:      sum over i != y of w_y max(0, margin - x_y + x_i)^p / C
//   multilabel: sum over the targets t (the target row up to its first -1)
//               and the non-target classes i of max(0, 1 - x_t + x_i) / C
// built from gather, clamp, scatter and sums; the multilabel one forms the
// [N, targets, C] pairs, as many terms as the CPU's loops visit. A target
// class out of range is found by gather on the device (IndexOutOfRangeError,
// asynchronous) for multi_margin_loss, and by one check read back for
// multilabel_margin_loss, whose CPU kernel checks the range before it runs.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "structured_outputs.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// N and C of a margin loss's input, checked as the CPU checks them.
std::pair<int64_t, int64_t> margin_shape(const at::Tensor& input) {
  TORCH_CHECK(input.dim() == 0 || (input.dim() == 1 && input.size(0) > 0) || (input.dim() == 2 && input.size(1) > 0),
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", input.sizes());
  return {input.dim() == 2 ? input.size(0) : 1, input.dim() == 0 ? 1 : input.size(-1)};
}

void check_long_target(const at::Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong, "expected scalar type Long but found ", target.scalar_type());
}

void check_float_input(const at::Tensor& input, const char* cpu_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble, "\"",
                              cpu_name, "\" not implemented for '", at::toString(input.scalar_type()), "'");
}

at::Tensor reduce(const at::Tensor& per_sample, const at::Tensor& input, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return per_sample.mean();
  if (reduction == at::Reduction::Sum) return per_sample.sum();
  return input.dim() <= 1 ? per_sample.reshape({}) : per_sample;
}

// The gradient's per-sample scale: [N, 1] for no reduction, else a scalar.
at::Tensor grad_scale(const at::Tensor& grad_output, int64_t n, int64_t reduction) {
  if (reduction == at::Reduction::None) return grad_output.reshape({n, 1});
  return reduction == at::Reduction::Mean ? grad_output / static_cast<double>(n) : grad_output;
}

void check_multi_margin(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                        const std::optional<at::Tensor>& weight, int64_t n, int64_t c) {
  TORCH_CHECK(target.dim() <= 1 && target.numel() == n,
              "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples "
              "(batch size). Expected target size [", n, "], but got ", target.sizes(), ". Input has shape ",
              input.sizes(), ".");
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  if (weight.has_value() && weight->defined())
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == c, "inconsistent weight size, expected ", c, " but got ",
                weight->sizes());
  check_long_target(target);
}

// margin - x_y + x_i for every class i, and the target classes as [N, 1].
std::pair<at::Tensor, at::Tensor> margins(const at::Tensor& input, const at::Tensor& target, double margin,
                                          int64_t n, int64_t c) {
  const at::Tensor x = input.reshape({n, c});
  const at::Tensor y = target.reshape({n, 1});
  return {(margin - x.gather(1, y)) + x, y};
}

at::Tensor multi_margin_loss(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                             const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction) {
  NEURON_TRACK_OP("aten::multi_margin_loss");
  const auto [n, c] = margin_shape(input);
  check_multi_margin(input, target, p, weight, n, c);
  check_float_input(input, "multi_margin_loss_cpu_kernel");
  auto [z, y] = margins(input, target, margin.toDouble(), n, c);
  z = z.clamp_min(0).scatter(1, y, 0);  // no term for the target class itself
  if (p.toLong() == 2) z = z * z;
  if (weight.has_value() && weight->defined()) z = z * weight->reshape({c}).index_select(0, y.reshape({n})).reshape({n, 1});
  return reduce(z.sum(1) / static_cast<double>(c), input, reduction);
}

at::Tensor multi_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                      const at::Tensor& target, const at::Scalar& p, const at::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  NEURON_TRACK_OP("aten::multi_margin_loss_backward");
  const auto [n, c] = margin_shape(input);
  check_multi_margin(input, target, p, weight, n, c);
  check_float_input(input, "multi_margin_loss_backward_cpu_kernel");
  auto [z, y] = margins(input, target, margin.toDouble(), n, c);
  at::Tensor h = (z > 0).to(input.scalar_type()).scatter(1, y, 0);
  if (p.toLong() == 2) h = h * (2 * z);
  if (weight.has_value() && weight->defined()) h = h * weight->reshape({c}).index_select(0, y.reshape({n})).reshape({n, 1});
  h = h * (grad_scale(grad_output, n, reduction) / static_cast<double>(c));
  // d/dx_i is +h_i; d/dx_y collects -h_i of every other class.
  return h.scatter_add(1, y, -h.sum(1, true)).reshape(input.sizes());
}

at::Tensor& multi_margin_loss_out(const at::Tensor& input, const at::Tensor& target, const at::Scalar& p,
                                  const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction,
                                  at::Tensor& out) {
  NEURON_TRACK_OP("aten::multi_margin_loss.out");
  return assign_out(out, torchneuron::multi_margin_loss(input, target, p, margin, weight, reduction));
}

at::Tensor& multi_margin_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                           const at::Tensor& target, const at::Scalar& p, const at::Scalar& margin,
                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                           at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::multi_margin_loss_backward.grad_input");
  return assign_out(grad_input,
                    torchneuron::multi_margin_loss_backward(grad_output, input, target, p, margin, weight, reduction));
}

// The targets of each sample: the classes (clamped, so -1 gathers class 0)
// and whether each position is before the row's first -1.
std::pair<at::Tensor, at::Tensor> label_targets(const at::Tensor& target, const at::Tensor& input, int64_t n,
                                                int64_t c) {
  const at::Tensor t = target.reshape({n, c});
  const at::Tensor valid = (t >= 0).to(input.scalar_type()).cumprod(1);
  return {t.clamp_min(0), valid};
}

void check_multilabel(const at::Tensor& input, const at::Tensor& target, int64_t c) {
  TORCH_CHECK(target.sizes() == input.sizes(), "inconsistent target size: ", target.sizes(),
              " for input of size: ", input.sizes());
  check_long_target(target);
  const bool in_range = ((target >= -1) & (target < c)).all().item<bool>();  // the CPU checks before it runs
  TORCH_CHECK(in_range, "argument #2 'target' is out of range");
}

// 1 - x_t + x_i for every (target position, class) pair: [N, C, C].
at::Tensor label_margins(const at::Tensor& x, const at::Tensor& classes) {
  return (1 - x.gather(1, classes)).unsqueeze(2) + x.unsqueeze(1);
}

std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(const at::Tensor& input, const at::Tensor& target,
                                                                  int64_t reduction) {
  NEURON_TRACK_OP("aten::multilabel_margin_loss_forward");
  const auto [n, c] = margin_shape(input);
  check_multilabel(input, target, c);
  check_float_input(input, "multilabel_margin_loss_forward_out_frame");
  const at::Tensor x = input.reshape({n, c});
  const auto [classes, valid] = label_targets(target, input, n, c);
  const at::Tensor is_target = at::zeros({n, c}, input.options()).scatter_add(1, classes, valid).gt(0).to(input.scalar_type());
  const at::Tensor pairs =
      label_margins(x, classes).clamp_min(0) * valid.unsqueeze(2) * (1 - is_target).unsqueeze(1);
  const at::Tensor per_sample = pairs.sum({1, 2}) / static_cast<double>(c);
  return {reduce(per_sample, input, reduction), is_target.reshape(input.sizes())};
}

at::Tensor multilabel_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                           const at::Tensor& target, int64_t reduction, const at::Tensor& is_target) {
  NEURON_TRACK_OP("aten::multilabel_margin_loss_backward");
  const auto [n, c] = margin_shape(input);
  check_multilabel(input, target, c);
  check_float_input(input, "multilabel_margin_loss_backward_out_frame");
  const at::Tensor x = input.reshape({n, c});
  const auto [classes, valid] = label_targets(target, input, n, c);
  at::Tensor h = label_margins(x, classes).gt(0).to(input.scalar_type()) * valid.unsqueeze(2) *
                 (1 - is_target.reshape({n, c})).unsqueeze(1);
  h = h * (grad_scale(grad_output, n, reduction).reshape({-1, 1, 1}) / static_cast<double>(c));
  // d/dx_i is +h over the targets; d/dx_t collects -h over the classes.
  return h.sum(1).scatter_add(1, classes, -h.sum(2)).reshape(input.sizes());
}

std::tuple<at::Tensor&, at::Tensor&> multilabel_margin_loss_forward_out(const at::Tensor& input,
                                                                        const at::Tensor& target, int64_t reduction,
                                                                        at::Tensor& output, at::Tensor& is_target) {
  NEURON_TRACK_OP("aten::multilabel_margin_loss_forward.output");
  const auto [loss, targets] = torchneuron::multilabel_margin_loss_forward(input, target, reduction);
  return {assign_out(output, loss), assign_out(is_target, targets)};
}

at::Tensor& multilabel_margin_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                                const at::Tensor& target, int64_t reduction,
                                                const at::Tensor& is_target, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::multilabel_margin_loss_backward.grad_input");
  return assign_out(grad_input,
                    torchneuron::multilabel_margin_loss_backward(grad_output, input, target, reduction, is_target));
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("multi_margin_loss", multi_margin_loss);
  m.impl("multi_margin_loss.out", multi_margin_loss_out);
  m.impl("multi_margin_loss_backward", multi_margin_loss_backward);
  m.impl("multi_margin_loss_backward.grad_input", multi_margin_loss_backward_out);
  m.impl("multilabel_margin_loss_forward", multilabel_margin_loss_forward);
  m.impl("multilabel_margin_loss_forward.output", multilabel_margin_loss_forward_out);
  m.impl("multilabel_margin_loss_backward", multilabel_margin_loss_backward);
  m.impl("multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward_out);
}

}  // namespace torchneuron
