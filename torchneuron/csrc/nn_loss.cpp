// Losses on the runtime's loss ops (neuronrt/ops/nn.h): nll_loss and
// nll_loss2d (which cross_entropy reaches after log_softmax), and the
// elementwise losses (MSE, smooth L1, Huber, binary cross entropy) with
// their gradients, and two pointwise ops loss formulas reach (xlogy, logit).
//
// nll_loss's checks and output shapes come from its meta function. The
// elementwise losses follow PyTorch's CPU structure: the loss of each
// element on a TensorIterator, then a mean or sum by the reduction ops
// (so the rounding matches PyTorch's); a gradient folds the reduction's
// scale into the same pass.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/nll_loss_backward_meta.h>
#include <ATen/ops/nll_loss_forward_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "neuron_device.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "pointwise.h"
#include "structured_outputs.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {


void check_reduction(int64_t reduction) {
  TORCH_CHECK(reduction >= at::Reduction::None && reduction <= at::Reduction::Sum, reduction,
              " is not a valid value for reduction");
}

// ---- nll_loss ----------------------------------------------------------------

// The target as int64 (PyTorch accepts int64 and uint8 targets).
at::Tensor long_target(const at::Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
  return target.scalar_type() == at::kLong ? target : target.to(at::kLong);
}

// t seen as [d0, d1, d2] (its elements in row-major order); a copy when
// its strides do not allow the view (kept in holder).
nrt_tensor_view view3(const at::Tensor& t, int64_t d0, int64_t d1, int64_t d2, at::Tensor& holder,
                      const char* name) {
  auto strides = at::detail::computeStride(t.sizes(), t.strides(), at::IntArrayRef{d0, d1, d2});
  holder = strides ? t : t.contiguous();
  if (!strides) strides = at::detail::computeStride(holder.sizes(), holder.strides(), at::IntArrayRef{d0, d1, d2});
  TORCH_INTERNAL_ASSERT(strides.has_value());
  return strided_view(holder, {d0, d1, d2}, {(*strides)[0], (*strides)[1], (*strides)[2]}, name);
}

// A [d0, d1] view of t (same rule).
nrt_tensor_view view2(const at::Tensor& t, int64_t d0, int64_t d1, at::Tensor& holder, const char* name) {
  nrt_tensor_view v = view3(t, 1, d0, d1, holder, name);
  v.ndim = 2;
  v.shape[0] = v.shape[1];
  v.shape[1] = v.shape[2];
  v.strides[0] = v.strides[1];
  v.strides[1] = v.strides[2];
  return v;
}

// Runs NLL_LOSS with the input as [batch, classes, spatial].
void nll_forward(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight, int64_t reduction,
                 int64_t ignore_index, int64_t batch, int64_t classes, int64_t spatial, const at::Tensor& output,
                 const at::Tensor& total_weight) {
  const char* name = "nll_loss_forward";
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"nll_loss_out_frame\" not implemented for '",
                              self.scalar_type(), "'");
  at::Tensor t = long_target(target), w = weight.defined() ? weight.contiguous() : weight;
  at::Tensor in_holder, t_holder, out_holder;
  bool none = reduction == at::Reduction::None;
  launch_nn(NRT_OP_NLL_LOSS, self, 2,
            {none ? view2(output, batch, spatial, out_holder, name) : to_view(output, name), to_view(total_weight, name),
             view3(self, batch, classes, spatial, in_holder, name), view2(t, batch, spatial, t_holder, name),
             vector_view(w, name)},
            {int_scalar(reduction), int_scalar(ignore_index)});
  if (out_holder.defined() && !out_holder.is_same(output)) const_cast<at::Tensor&>(output).copy_(out_holder);
}

void nll_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                  const at::Tensor& weight, int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                  int64_t batch, int64_t classes, int64_t spatial, const at::Tensor& grad_input) {
  const char* name = "nll_loss_backward";
  if (grad_input.numel() == 0) return;
  at::Tensor t = long_target(target), w = weight.defined() ? weight.contiguous() : weight;
  at::Tensor gi_holder, t_holder, go_holder;
  bool none = reduction == at::Reduction::None;
  nrt_tensor_view gi = view3(grad_input, batch, classes, spatial, gi_holder, name);
  launch_nn(NRT_OP_NLL_LOSS_BACKWARD, self, 1,
            {gi, none ? view2(grad_output, batch, spatial, go_holder, name) : to_view(grad_output, name),
             view2(t, batch, spatial, t_holder, name), vector_view(w, name), to_view(total_weight, name)},
            {int_scalar(reduction), int_scalar(ignore_index)});
  if (!gi_holder.is_same(grad_input)) const_cast<at::Tensor&>(grad_input).copy_(gi_holder);
}

int64_t batch_of(const at::Tensor& self) { return self.dim() == 1 ? 1 : self.size(0); }

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index) {
  NEURON_TRACK_OP("aten::nll_loss_forward");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_nll_loss_forward, 2> out;
  out.meta(self, target, at::OptionalTensorRef(value_or_undefined(weight)), reduction, ignore_index);
  nll_forward(self, target, value_or_undefined(weight), reduction, ignore_index, batch_of(self), self.size(-1), 1,
              out[0], out[1]);
  return {out[0], out[1]};
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                                          int64_t ignore_index, at::Tensor& output,
                                                          at::Tensor& total_weight) {
  NEURON_TRACK_OP("aten::nll_loss_forward.output");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_nll_loss_forward, 2> out({output, total_weight});
  out.meta(self, target, at::OptionalTensorRef(value_or_undefined(weight)), reduction, ignore_index);
  nll_forward(self, target, value_or_undefined(weight), reduction, ignore_index, batch_of(self), self.size(-1), 1,
              output, total_weight);
  return {output, total_weight};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  NEURON_TRACK_OP("aten::nll_loss_backward");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_nll_loss_backward, 1> out;
  out.meta(grad_output, self, target, at::OptionalTensorRef(value_or_undefined(weight)), reduction, ignore_index,
           total_weight);
  nll_backward(grad_output, self, target, value_or_undefined(weight), reduction, ignore_index, total_weight,
               batch_of(self), self.size(-1), 1, out[0]);
  return out[0];
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::nll_loss_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_nll_loss_backward, 1> out({grad_input});
  out.meta(grad_output, self, target, at::OptionalTensorRef(value_or_undefined(weight)), reduction, ignore_index,
           total_weight);
  nll_backward(grad_output, self, target, value_or_undefined(weight), reduction, ignore_index, total_weight,
               batch_of(self), self.size(-1), 1, grad_input);
  return grad_input;
}

// ---- nll_loss2d ----------------------------------------------------------------

void check_nll2d(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(!weight.defined() || weight.numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes(), ")");
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss2d_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                            const std::optional<at::Tensor>& weight_opt,
                                                            int64_t reduction, int64_t ignore_index,
                                                            at::Tensor& output, at::Tensor& total_weight) {
  NEURON_TRACK_OP("aten::nll_loss2d_forward.output");
  c10::DeviceGuard guard(self.device());
  const at::Tensor& weight = value_or_undefined(weight_opt);
  check_reduction(reduction);
  check_nll2d(self, target, weight);
  const int64_t N = self.size(0), C = self.size(1), S = self.size(2) * self.size(3);
  at::native::resize_output(total_weight, {});
  if (reduction == at::Reduction::None)
    at::native::resize_output(output, {N, self.size(2), self.size(3)});
  else
    at::native::resize_output(output, {});
  nll_forward(self, target, weight, reduction, ignore_index, N, C, S, output, total_weight);
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight, int64_t reduction,
                                                      int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({}, self.options());
  nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& nll_loss2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight_opt, int64_t reduction,
                                    int64_t ignore_index, const at::Tensor& total_weight, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::nll_loss2d_backward.grad_input");
  c10::DeviceGuard guard(self.device());
  const at::Tensor& weight = value_or_undefined(weight_opt);
  check_reduction(reduction);
  check_nll2d(self, target, weight);
  TORCH_CHECK(total_weight.numel() == 1, "expected total_weight to be a single element tensor, got: ",
              total_weight.sizes(), " (", total_weight.numel(), " elements)");
  const int64_t N = self.size(0), C = self.size(1), S = self.size(2) * self.size(3);
  if (reduction == at::Reduction::None)
    at::check_dim_size(grad_output, 3, 0, N);
  else
    TORCH_CHECK(grad_output.numel() == 1, "grad_output must be a single value when reduced");
  at::native::resize_output(grad_input, self.sizes());
  nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight, N, C, S, grad_input);
  return grad_input;
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  return nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

// ---- elementwise losses ------------------------------------------------------------

void check_floating_loss(const at::TensorIteratorBase& iter, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(iter.common_dtype()), "\"", name, "\" not implemented for '",
                              iter.common_dtype(), "'");
}

// loss = code(x, y) per element, then reduced into result (or returned).
at::Tensor reduce_loss(const at::Tensor& loss, int64_t reduction, at::Tensor* result) {
  if (reduction == at::Reduction::None) {
    if (result && !result->is_same(loss)) {
      at::native::resize_output(*result, loss.sizes());
      result->copy_(loss);
    }
    return result ? *result : loss;
  }
  if (!result) return reduction == at::Reduction::Mean ? loss.mean() : loss.sum();
  if (reduction == at::Reduction::Mean)
    at::mean_out(*result, loss, at::IntArrayRef{});
  else
    at::sum_out(*result, loss, at::IntArrayRef{});
  return *result;
}

at::Tensor binary_loss(nrt_op_code code, const at::Tensor& x, const at::Tensor& y, int64_t reduction,
                       std::vector<c10::IValue> scalars, at::Tensor* result) {
  c10::DeviceGuard guard(x.device());
  check_reduction(reduction);
  bool direct = result && reduction == at::Reduction::None;
  at::Tensor loss = direct ? *result : at::Tensor();
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .add_output(loss)
                  .add_const_input(x)
                  .add_const_input(y)
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  check_floating_loss(iter, nrt_op_name(code));
  launch_iterator(code, iter, scalars);
  return reduce_loss(iter.output(), reduction, direct ? nullptr : result);
}

// grad_input = code(grad_output, x, y) with the reduction's scale.
at::Tensor& binary_loss_backward(nrt_op_code code, const at::Tensor& grad_output, const at::Tensor& x,
                                 const at::Tensor& y, std::vector<c10::IValue> scalars, at::Tensor& grad_input) {
  c10::DeviceGuard guard(x.device());
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .add_output(grad_input)
                  .add_const_input(grad_output)
                  .add_const_input(x)
                  .add_const_input(y)
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  check_floating_loss(iter, nrt_op_name(code));
  launch_iterator(code, iter, scalars);
  return grad_input;
}

double mean_scale(const at::Tensor& x, int64_t reduction) {
  check_reduction(reduction);
  return reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(x.numel()) : 1.0;
}

at::Tensor mse_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction) {
  NEURON_TRACK_OP("aten::mse_loss");
  return binary_loss(NRT_OP_MSE_LOSS, x, y, reduction, {}, nullptr);
}
at::Tensor& mse_loss_out(const at::Tensor& x, const at::Tensor& y, int64_t reduction, at::Tensor& out) {
  NEURON_TRACK_OP("aten::mse_loss.out");
  binary_loss(NRT_OP_MSE_LOSS, x, y, reduction, {}, &out);
  return out;
}
at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                                  int64_t reduction, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::mse_loss_backward.grad_input");
  return binary_loss_backward(NRT_OP_MSE_LOSS_BACKWARD, grad_output, x, y, {2.0 * mean_scale(x, reduction)},
                              grad_input);
}
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                             int64_t reduction) {
  NEURON_TRACK_OP("aten::mse_loss_backward");
  at::Tensor grad_input = at::empty_like(x, at::MemoryFormat::Contiguous);
  return binary_loss_backward(NRT_OP_MSE_LOSS_BACKWARD, grad_output, x, y, {2.0 * mean_scale(x, reduction)},
                              grad_input);
}

at::Tensor smooth_l1_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double beta) {
  NEURON_TRACK_OP("aten::smooth_l1_loss");
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return binary_loss(NRT_OP_SMOOTH_L1_LOSS, x, y, reduction, {beta}, nullptr);
}
at::Tensor& smooth_l1_loss_out(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double beta,
                               at::Tensor& out) {
  NEURON_TRACK_OP("aten::smooth_l1_loss.out");
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  binary_loss(NRT_OP_SMOOTH_L1_LOSS, x, y, reduction, {beta}, &out);
  return out;
}
at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                                        int64_t reduction, double beta, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::smooth_l1_loss_backward.grad_input");
  return binary_loss_backward(NRT_OP_SMOOTH_L1_LOSS_BACKWARD, grad_output, x, y,
                              {beta, mean_scale(x, reduction)}, grad_input);
}

at::Tensor huber_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double delta) {
  NEURON_TRACK_OP("aten::huber_loss");
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return binary_loss(NRT_OP_HUBER_LOSS, x, y, reduction, {delta}, nullptr);
}
at::Tensor& huber_loss_out(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double delta,
                           at::Tensor& out) {
  NEURON_TRACK_OP("aten::huber_loss.out");
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  binary_loss(NRT_OP_HUBER_LOSS, x, y, reduction, {delta}, &out);
  return out;
}
at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::huber_loss_backward.out");
  return binary_loss_backward(NRT_OP_HUBER_LOSS_BACKWARD, grad_output, x, y, {delta, mean_scale(x, reduction)},
                              grad_input);
}

// ---- binary cross entropy -------------------------------------------------------------

// The weight operand: the given weight, or 1 as a host value.
at::Tensor bce_weight(const at::Tensor& weight) {
  return weight.defined() ? weight : at::native::wrapped_scalar_tensor(1.0);
}

void check_bce(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "Found dtype ", y.scalar_type(), " but expected ",
              x.scalar_type());
}

at::Tensor& bce_out(const at::Tensor& x, const at::Tensor& y, const std::optional<at::Tensor>& weight,
                    int64_t reduction, at::Tensor& out) {
  NEURON_TRACK_OP("aten::binary_cross_entropy.out");
  c10::DeviceGuard guard(x.device());
  check_reduction(reduction);
  check_bce(x, y);
  at::Tensor loss = reduction == at::Reduction::None ? out : at::Tensor();
  if (loss.defined()) at::native::resize_output(loss, x.sizes());
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .allow_cpu_scalars(true)
                  .add_output(loss)
                  .add_const_input(x)
                  .add_const_input(y)
                  .add_owned_const_input(bce_weight(value_or_undefined(weight)))
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  check_floating_loss(iter, "binary_cross_entropy");
  TORCH_CHECK(iter.output().sizes() == x.sizes(), "binary_cross_entropy: the weight of shape ",
              value_or_undefined(weight).sizes(), " does not broadcast to the input's shape ", x.sizes());
  launch_iterator(NRT_OP_BINARY_CROSS_ENTROPY, iter, {});
  if (reduction != at::Reduction::None) reduce_loss(iter.output(), reduction, &out);
  return out;
}

at::Tensor bce(const at::Tensor& x, const at::Tensor& y, const std::optional<at::Tensor>& weight,
               int64_t reduction) {
  NEURON_TRACK_OP("aten::binary_cross_entropy");
  at::Tensor out = reduction == at::Reduction::None ? at::empty_like(x, at::MemoryFormat::Contiguous)
                                                    : at::empty({}, x.options());
  return bce_out(x, y, weight, reduction, out);
}

at::Tensor& bce_backward_out(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                             const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::binary_cross_entropy_backward.grad_input");
  c10::DeviceGuard guard(x.device());
  double scale = mean_scale(x, reduction);
  at::native::resize_output(grad_input, x.sizes());
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .allow_cpu_scalars(true)
                  .add_output(grad_input)
                  .add_const_input(grad_output)
                  .add_const_input(x)
                  .add_const_input(y)
                  .add_owned_const_input(bce_weight(value_or_undefined(weight)))
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  check_floating_loss(iter, "binary_cross_entropy_backward");
  launch_iterator(NRT_OP_BINARY_CROSS_ENTROPY_BACKWARD, iter, {scale});
  return grad_input;
}

at::Tensor bce_backward(const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& y,
                        const std::optional<at::Tensor>& weight, int64_t reduction) {
  NEURON_TRACK_OP("aten::binary_cross_entropy_backward");
  at::Tensor grad_input = at::empty_like(x, at::MemoryFormat::Contiguous);
  return bce_backward_out(grad_output, x, y, weight, reduction, grad_input);
}

// ---- pointwise helpers of loss formulas (kl_div's xlogy, the logit in
// binary_cross_entropy's target gradient), on the pointwise table ---------------------

constexpr DtypeSet kFloating{dtype_bit(at::kHalf) | dtype_bit(at::kBFloat16) | dtype_bit(at::kFloat) |
                             dtype_bit(at::kDouble)};

// logit's eps=None is -1 for the kernel: no clamp.
void prepare_logit(PointwiseCall& call) {
  if (call.scalars[0].isNone()) call.scalars[0] = c10::IValue(-1.0);
}

const PointwiseOp kLossHelpers[] = {
    {"xlogy.Tensor xlogy_.Tensor xlogy.OutTensor", NRT_OP_XLOGY, PointwiseDtypes::FloatResult, kFloating},
    {"logit logit_ logit.out", NRT_OP_LOGIT, PointwiseDtypes::FloatResult, kFloating, prepare_logit},
    {"logit_backward logit_backward.grad_input", NRT_OP_LOGIT_BACKWARD, PointwiseDtypes::Arithmetic, kFloating,
     prepare_logit},
};

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  register_pointwise_ops(m, kLossHelpers, sizeof kLossHelpers / sizeof kLossHelpers[0]);
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nll_loss2d_forward_out));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nll_loss2d_backward_out));
  m.impl("mse_loss", TORCH_FN(mse_loss));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(mse_loss_backward_out));
  m.impl("smooth_l1_loss", TORCH_FN(smooth_l1_loss));
  m.impl("smooth_l1_loss.out", TORCH_FN(smooth_l1_loss_out));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_loss_backward_out));
  m.impl("huber_loss", TORCH_FN(huber_loss));
  m.impl("huber_loss.out", TORCH_FN(huber_loss_out));
  m.impl("huber_loss_backward.out", TORCH_FN(huber_loss_backward_out));
  m.impl("binary_cross_entropy", TORCH_FN(bce));
  m.impl("binary_cross_entropy.out", TORCH_FN(bce_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(bce_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(bce_backward_out));
}

}  // namespace torchneuron
