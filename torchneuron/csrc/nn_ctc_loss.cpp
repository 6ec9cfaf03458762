// CTC loss (_ctc_loss and its backward, with int[] or tensor lengths) on
// the runtime's CTC_LOSS ops (neuronrt/ops/nn.h). torch.ctc_loss and
// F.ctc_loss are PyTorch's composites over these (the reduction, the
// unbatched form, zero_infinity's forward masking).
//
// The arguments are checked as the CPU checks them, with its messages. The
// per-item lengths and target offsets travel to the kernel as one small
// int64 [N, 3] tensor; targets, padded [N, S] or concatenated [sum L], are
// handed over as one contiguous 1-d run. A label outside [0, C), which the
// CPU does not check, is an IndexOutOfRangeError at the next
// synchronisation.
#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

constexpr const char* kCheckedFrom = "ctc_loss_allocate_outputs";

struct CtcArgs {
  at::Tensor targets;  // contiguous, 1-d
  at::Tensor meta;     // int64 [N, 3] on the device: input length, target length, target offset
  int64_t max_target_length = 0;
};

// The CPU's argument checks, then the kernel's view of targets and lengths.
CtcArgs prepare(const at::Tensor& log_probs, const at::Tensor& targets, at::IntArrayRef input_lengths,
                at::IntArrayRef target_lengths, int64_t blank) {
  TORCH_CHECK(log_probs.numel() > 0, "log_probs tensor must not be empty");
  at::TensorArg lp_arg{log_probs, "log_probs", 1}, tg_arg{targets, "targets", 2};
  at::checkDim(kCheckedFrom, lp_arg, 3);
  TORCH_CHECK_NOT_IMPLEMENTED(log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble,
                              "\"ctc_loss\" not implemented for '", log_probs.scalar_type(), "'");
  const int64_t T = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2);
  TORCH_CHECK(blank >= 0 && blank < C, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == N, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == N, "target_lengths must be of size batch_size");
  if (targets.scalar_type() != at::kLong) at::checkScalarType(kCheckedFrom, tg_arg, at::kInt);
  at::checkDimRange(kCheckedFrom, tg_arg, 1, 3);
  TORCH_CHECK(targets.device() == log_probs.device(), "ctc_loss: expected targets on ", log_probs.device(),
              ", got ", targets.device());

  at::Tensor meta = at::empty({N, 3}, at::TensorOptions().dtype(at::kLong));
  int64_t* m = meta.mutable_data_ptr<int64_t>();
  int64_t offset = 0, max_target = 0;
  for (int64_t n = 0; n < N; n++) {
    const int64_t il = input_lengths[n], tl = target_lengths[n];
    TORCH_CHECK(tl >= 0, "Expected target_lengths to have value at least 0, but got value ", tl,
                " (while checking arguments for ", kCheckedFrom, ")");
    TORCH_CHECK(il >= 0, "Expected input_lengths to have value at least 0, but got value ", il,
                " (while checking arguments for ", kCheckedFrom, ")");
    TORCH_CHECK(il <= T, "Expected input_lengths to have value at most ", T, ", but got value ", il,
                " (while checking arguments for ", kCheckedFrom, ")");
    max_target = std::max(max_target, tl);
    m[3 * n] = il;
    m[3 * n + 1] = tl;
    if (targets.dim() == 1) {
      m[3 * n + 2] = offset;
      offset += tl;
    }
  }
  if (targets.dim() == 1) {
    at::checkSize(kCheckedFrom, tg_arg, 0, offset);
  } else {
    at::checkSize(kCheckedFrom, tg_arg, 0, N);
    TORCH_CHECK(targets.size(1) >= max_target, "Expected tensor to have size at least ", max_target,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets'",
                " (while checking arguments for ", kCheckedFrom, ")");
    for (int64_t n = 0; n < N; n++) m[3 * n + 2] = n * targets.size(1);
  }
  CtcArgs a;
  a.targets = targets.contiguous().view({-1});
  a.meta = meta.to(log_probs.device());
  a.max_target_length = max_target;
  return a;
}

std::vector<int64_t> host_lengths(const at::Tensor& lengths, const char* what) {
  TORCH_CHECK(at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false), what, " must be integral");
  at::Tensor l = lengths.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(l.const_data_ptr<int64_t>(), l.const_data_ptr<int64_t>() + l.numel());
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                                            int64_t blank, bool /*zero_infinity: the backward's*/) {
  NEURON_TRACK_OP("aten::_ctc_loss");
  const char* name = "_ctc_loss";
  CtcArgs a = prepare(log_probs, targets, input_lengths, target_lengths, blank);
  c10::DeviceGuard guard(log_probs.device());
  const int64_t T = log_probs.size(0), N = log_probs.size(1);
  at::Tensor nll = at::empty({N}, log_probs.options());
  at::Tensor log_alpha = at::empty({N, T, 2 * a.max_target_length + 1}, log_probs.options());
  launch_nn(NRT_OP_CTC_LOSS, log_probs, 2,
            {to_view(nll, name), to_view(log_alpha, name), to_view(log_probs, name), to_view(a.targets, name),
             to_view(a.meta, name)},
            {int_scalar(blank)});
  return {nll, log_alpha};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths,
                                                   const at::Tensor& target_lengths, int64_t blank,
                                                   bool zero_infinity) {
  const std::vector<int64_t> il = host_lengths(input_lengths, "input_lengths");
  const std::vector<int64_t> tl = host_lengths(target_lengths, "target_lengths");
  return ctc_loss(log_probs, targets, il, tl, blank, zero_infinity);
}

at::Tensor ctc_loss_backward(const at::Tensor& grad_out, const at::Tensor& log_probs, const at::Tensor& targets,
                             at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                             const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                             bool zero_infinity) {
  NEURON_TRACK_OP("aten::_ctc_loss_backward");
  const char* name = "_ctc_loss_backward";
  CtcArgs a = prepare(log_probs, targets, input_lengths, target_lengths, blank);
  const int64_t T = log_probs.size(0), N = log_probs.size(1);
  TORCH_CHECK(log_alpha.dim() == 3 && log_alpha.size(0) == N && log_alpha.size(1) == T &&
                  log_alpha.size(2) >= 2 * a.max_target_length + 1,
              name, ": expected log_alpha of shape [", N, ", ", T, ", >= ", 2 * a.max_target_length + 1,
              "], got ", log_alpha.sizes());
  TORCH_CHECK(neg_log_likelihood.numel() == N && grad_out.numel() == N, name,
              ": expected grad and neg_log_likelihood of ", N, " elements, got ", grad_out.numel(), " and ",
              neg_log_likelihood.numel());
  c10::DeviceGuard guard(log_probs.device());
  const auto dtype = log_probs.scalar_type();
  at::Tensor grad = at::empty_like(log_probs, at::MemoryFormat::Contiguous);
  launch_nn(NRT_OP_CTC_LOSS_BACKWARD, log_probs, 1,
            {to_view(grad, name), to_view(grad_out.to(dtype).reshape({N}), name), to_view(log_probs, name),
             to_view(a.targets, name), to_view(a.meta, name), to_view(neg_log_likelihood.to(dtype).reshape({N}), name),
             to_view(log_alpha.to(dtype), name)},
            {int_scalar(blank), int_scalar(zero_infinity ? 1 : 0)});
  return grad;
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad_out, const at::Tensor& log_probs,
                                    const at::Tensor& targets, const at::Tensor& input_lengths,
                                    const at::Tensor& target_lengths, const at::Tensor& neg_log_likelihood,
                                    const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  const std::vector<int64_t> il = host_lengths(input_lengths, "input_lengths");
  const std::vector<int64_t> tl = host_lengths(target_lengths, "target_lengths");
  return ctc_loss_backward(grad_out, log_probs, targets, il, tl, neg_log_likelihood, log_alpha, blank,
                           zero_infinity);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor));
}

}  // namespace torchneuron
