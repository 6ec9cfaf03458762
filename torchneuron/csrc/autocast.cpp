// torch.autocast("neuron"): the AutocastPrivateUse1 kernels.
//
// The policies are CUDA's, taken from the op lists PyTorch publishes in
// ATen/autocast_mode.h: matrix products, convolutions and attention run in
// the autocast dtype (lower_precision_fp), numerically sensitive ops
// (exp, log, pow, norms, losses, softmax, sums) in float32 (fp32 and
// fp32_set_opt_dtype), and mixed-input ops at the widest input dtype
// (promote). Every other op falls through to the neuron kernels unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

// binary_cross_entropy on autocast outputs loses too much precision, so
// CUDA refuses it under autocast; do the same.
at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast. A sigmoid right before the loss is better fused into the loss: use "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which are safe to autocast.");
}

// The op-list macros name ATen types unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_LOWER_PRECISION
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE
  m.impl("aten::binary_cross_entropy", TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace
}  // namespace torchneuron
