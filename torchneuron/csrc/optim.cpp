// The fused optimizers on neuron: _fused_adam_, _fused_adamw_ and
// _fused_sgd_ (torch.optim's fused=True), one runtime op per parameter
// (neuronrt/ops/optim.h). A learning rate given as a tensor and the
// gradient scaler's grad_scale and found_inf stay on the device: they are
// copied into one small control vector that every op of the call reads, so
// the step never waits for the device.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "neuron_device.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"
#include "op_scalars.h"

namespace torchneuron {
namespace {


// [lr, grad_scale, found_inf] as float64 on `device`, from whichever are
// tensors; undefined when none is. Sets the CONTROL flags it provides.
at::Tensor control_vector(c10::Device device, const at::Tensor* lr,
                          const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf, int& flags, const char* name) {
  bool amp = grad_scale.has_value() && grad_scale->defined();
  bool inf = found_inf.has_value() && found_inf->defined();
  if (!lr && !amp && !inf) return at::Tensor();
  at::Tensor c = at::zeros({3}, at::TensorOptions().device(device).dtype(at::kDouble));
  if (lr) {
    TORCH_CHECK(lr->numel() == 1, name, ": lr must be a tensor with one element");
    c.narrow(0, 0, 1).copy_(lr->reshape({1}));
    flags |= NRT_OPTIM_CONTROL_LR;
  }
  if (amp || inf) {
    c.narrow(0, 1, 1).fill_(1.0);
    if (amp) {
      TORCH_CHECK(grad_scale->numel() == 1, name, ": grad_scale must have one element");
      c.narrow(0, 1, 1).copy_(grad_scale->reshape({1}));
    }
    if (inf) {
      TORCH_CHECK(found_inf->numel() == 1, name, ": found_inf must have one element");
      c.narrow(0, 2, 1).copy_(found_inf->reshape({1}));
    }
    flags |= NRT_OPTIM_CONTROL_AMP;
  }
  return c;
}

void check_lists(const char* name, at::TensorList params, std::initializer_list<at::TensorList> others) {
  for (at::TensorList l : others)
    TORCH_CHECK(l.size() == params.size(), name, ": every tensor list must have ", params.size(),
                " tensors (one per parameter), got ", l.size());
  for (const at::Tensor& p : params)
    TORCH_CHECK(p.device().type() == kNeuron, name, ": expected neuron parameters, got one on ",
                p.device());
}

class OptimOp {
 public:
  OptimOp(nrt_op_code code, int outputs) : name_(nrt_op_name(code)) {
    op_.code = code;
    op_.num_outputs = outputs;
  }
  OptimOp& operand(const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == kNeuron, name_, ": expected a neuron tensor, got one on ",
                t.device());
    op_.operands[op_.num_operands++] = to_view(t, name_);
    return *this;
  }
  OptimOp& scalar(nrt_scalar s) {
    op_.scalars[op_.num_scalars++] = s;
    return *this;
  }
  void launch(const at::Tensor& on) {
    c10::DeviceGuard guard(on.device());
    torchneuron::launch(on.device().index(), op_);
  }

 private:
  const char* name_;
  nrt_op op_{};
};

void adam(const char* name, bool decoupled, at::TensorList params, at::TensorList grads,
          at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
          at::TensorList state_steps, double lr, const at::Tensor* lr_tensor, double beta1,
          double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
          const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  check_lists(name, params, {grads, exp_avgs, exp_avg_sqs, state_steps});
  if (amsgrad) check_lists(name, params, {max_exp_avg_sqs});
  if (params.empty()) return;
  int flags = (amsgrad ? NRT_OPTIM_AMSGRAD : 0) | (maximize ? NRT_OPTIM_MAXIMIZE : 0) |
              (decoupled ? NRT_OPTIM_DECOUPLED : 0);
  at::Tensor control = control_vector(params[0].device(), lr_tensor, grad_scale, found_inf, flags, name);
  for (size_t i = 0; i < params.size(); i++) {
    const at::Tensor& p = params[i];
    at::Tensor step = state_steps[i].device() == p.device() ? state_steps[i] : state_steps[i].to(p.device());
    OptimOp op(NRT_OP_FUSED_ADAM, amsgrad ? 5 : 4);
    op.operand(p).operand(grads[i]).operand(exp_avgs[i]).operand(exp_avg_sqs[i]);
    if (amsgrad) op.operand(max_exp_avg_sqs[i]);
    op.operand(step);
    if (control.defined()) {
      TORCH_CHECK(p.device() == control.device(), name, ": all parameters must be on one device");
      op.operand(control);
    }
    op.scalar(float_scalar(lr)).scalar(float_scalar(beta1)).scalar(float_scalar(beta2))
        .scalar(float_scalar(weight_decay)).scalar(float_scalar(eps)).scalar(int_scalar(flags));
    op.launch(p);
  }
}

void sgd(const char* name, at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
         double weight_decay, double momentum, double lr, const at::Tensor* lr_tensor,
         double dampening, bool nesterov, bool maximize, bool is_first_step,
         const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  bool with_momentum = momentum != 0;
  check_lists(name, params, {grads});
  if (with_momentum) check_lists(name, params, {momentum_buffers});
  if (params.empty()) return;
  int flags = (maximize ? NRT_OPTIM_MAXIMIZE : 0) | (nesterov ? NRT_OPTIM_NESTEROV : 0) |
              (is_first_step ? NRT_OPTIM_FIRST_STEP : 0);
  at::Tensor control = control_vector(params[0].device(), lr_tensor, grad_scale, found_inf, flags, name);
  for (size_t i = 0; i < params.size(); i++) {
    const at::Tensor& p = params[i];
    OptimOp op(NRT_OP_FUSED_SGD, with_momentum ? 3 : 2);
    op.operand(p).operand(grads[i]);
    if (with_momentum) op.operand(momentum_buffers[i]);
    if (control.defined()) op.operand(control);
    op.scalar(float_scalar(lr)).scalar(float_scalar(weight_decay)).scalar(float_scalar(momentum))
        .scalar(float_scalar(dampening)).scalar(int_scalar(flags));
    op.launch(p);
  }
}

// The schema's overloads, each a thin adapter.

// Adam and AdamW (decoupled weight decay) share a kernel; each has an
// overload with lr as a number and one with lr as a tensor.
template <bool kDecoupled>
void fused_adam(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                at::TensorList state_steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  NEURON_TRACK_OP(kDecoupled ? "aten::_fused_adamw_" : "aten::_fused_adam_");
  adam(kDecoupled ? "_fused_adamw_" : "_fused_adam_", kDecoupled, self, grads, exp_avgs,
       exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, nullptr, beta1, beta2, weight_decay, eps,
       amsgrad, maximize, grad_scale, found_inf);
}

template <bool kDecoupled>
void fused_adam_tensor_lr(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                          at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                          at::TensorList state_steps, const at::Tensor& lr, double beta1,
                          double beta2, double weight_decay, double eps, bool amsgrad,
                          bool maximize, const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  NEURON_TRACK_OP(kDecoupled ? "aten::_fused_adamw_.tensor_lr" : "aten::_fused_adam_.tensor_lr");
  adam(kDecoupled ? "_fused_adamw_" : "_fused_adam_", kDecoupled, self, grads, exp_avgs,
       exp_avg_sqs, max_exp_avg_sqs, state_steps, 0, &lr, beta1, beta2, weight_decay, eps,
       amsgrad, maximize, grad_scale, found_inf);
}

void fused_sgd(at::TensorList self, at::TensorList grads, at::TensorList momentum_buffer_list,
               double weight_decay, double momentum, double lr, double dampening, bool nesterov,
               bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf) {
  NEURON_TRACK_OP("aten::_fused_sgd_");
  sgd("_fused_sgd_", self, grads, momentum_buffer_list, weight_decay, momentum, lr, nullptr,
      dampening, nesterov, maximize, is_first_step, grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList self, at::TensorList grads,
                         at::TensorList momentum_buffer_list, double weight_decay, double momentum,
                         const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                         bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                         const std::optional<at::Tensor>& found_inf) {
  NEURON_TRACK_OP("aten::_fused_sgd_.tensor_lr");
  sgd("_fused_sgd_", self, grads, momentum_buffer_list, weight_decay, momentum, 0, &lr, dampening,
      nesterov, maximize, is_first_step, grad_scale, found_inf);
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_fused_adam_", torchneuron::fused_adam<false>);
  m.impl("_fused_adam_.tensor_lr", torchneuron::fused_adam_tensor_lr<false>);
  m.impl("_fused_adamw_", torchneuron::fused_adam<true>);
  m.impl("_fused_adamw_.tensor_lr", torchneuron::fused_adam_tensor_lr<true>);
  m.impl("_fused_sgd_", torchneuron::fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", torchneuron::fused_sgd_tensor_lr);
}
