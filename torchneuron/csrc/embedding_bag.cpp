// embedding_bag: _embedding_bag (and _forward_only), its dense backward and
// the backward of per_sample_weights, on the runtime's EMBEDDING_BAG ops
// (neuronrt/ops/nn.h). Argument checks are PyTorch's, with its messages;
// offsets and indices are checked by the kernel (an error at the next
// synchronisation, as on CUDA). The sparse gradient is a sparse layout,
// which the device does not have: it goes through the CPU fallback.
#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "index_launch.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

constexpr const char* kName = "embedding_bag";

// indices and offsets as one index dtype (PyTorch promotes them likewise).
std::pair<at::Tensor, at::Tensor> promote_indices(const at::Tensor& indices, const at::Tensor& offsets) {
  if (indices.scalar_type() == offsets.scalar_type()) return {indices, offsets};
  return {indices.to(at::kLong), offsets.to(at::kLong)};
}

void check_bag_arguments(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                         int64_t mode, const std::optional<at::Tensor>& psw) {
  at::checkScalarTypes(kName, at::TensorArg(indices, "indices", 1), {at::kLong, at::kInt});
  at::checkScalarTypes(kName, at::TensorArg(offsets, "offsets", 1), {at::kLong, at::kInt});
  at::checkScalarTypes(kName, at::TensorArg(weight, "weight", 1),
                       {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble});
  TORCH_CHECK(mode >= 0 && mode <= 2, "`mode` must be sum, mean, or max.");
  TORCH_CHECK(weight.dim() == 2, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  TORCH_CHECK(indices.dim() == 1, "embedding_bag: input has to be a 1D Tensor here, but got Tensor of dimension ",
              indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "embedding_bag: offsets has to be a 1D Tensor, but got Tensor of dimension ",
              offsets.dim());
  if (psw.has_value() && psw->defined()) {
    TORCH_CHECK(mode == 0, "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
                "for mode='sum' (got mode='", mode == 1 ? "mean" : "max", "'). Please open a feature request on "
                "GitHub.");
    at::checkSameType(kName, at::TensorArg(weight, "weight", 1), at::TensorArg(*psw, "per_sample_weights", 1));
    TORCH_CHECK(psw->dim() == 1 && psw->numel() == indices.numel(),
                "embedding_bag: per_sample_weights must be 1-d with as many elements as indices (",
                indices.numel(), "), got shape ", psw->sizes());
  }
  check_devices(kName, weight, {indices, offsets, psw.value_or(at::Tensor())});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_native(
    const at::Tensor& weight, const at::Tensor& indices_in, const at::Tensor& offsets_in, int64_t mode,
    const std::optional<at::Tensor>& psw, bool include_last_offset, int64_t padding_idx) {
  c10::DeviceGuard guard(weight.device());
  check_bag_arguments(weight, indices_in, offsets_in, mode, psw);
  auto [indices, offsets] = promote_indices(indices_in, offsets_in);
  const int64_t n = indices.size(0), d = weight.size(1);
  const int64_t bags = include_last_offset && offsets.size(0) > 0 ? offsets.size(0) - 1 : offsets.size(0);
  auto long_options = weight.options().dtype(at::kLong);
  at::Tensor out = at::empty({bags, d}, weight.options());
  at::Tensor offset2bag = at::empty({n}, long_options);
  at::Tensor bag_size = at::empty({bags}, long_options);
  at::Tensor max_indices = mode == 2 ? at::empty({bags, d}, long_options) : at::empty({bags}, long_options);
  if (n == 0 && bags == 0) return {out, offset2bag, bag_size, max_indices};
  nrt_op op{};
  op.code = NRT_OP_EMBEDDING_BAG;
  op.num_outputs = 4;
  op.num_operands = 8;
  const at::Tensor* tensors[7] = {&out, &offset2bag, &bag_size, &max_indices, &weight, &indices, &offsets};
  for (int k = 0; k < 7; k++) op.operands[k] = to_view(*tensors[k], kName);
  op.operands[7] = psw.has_value() && psw->defined() ? to_view(*psw, kName) : absent_view();
  op.num_scalars = 3;
  op.scalars[0].i = mode;
  op.scalars[1].i = padding_idx;
  op.scalars[2].i = include_last_offset;
  launch(weight.device().index(), op);
  return {out, offset2bag, bag_size, max_indices};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool /*scale_grad_by_freq*/,
    int64_t mode, bool /*sparse*/, const std::optional<at::Tensor>& psw, bool include_last_offset,
    int64_t padding_idx) {
  NEURON_TRACK_OP("aten::_embedding_bag");
  return embedding_bag_native(weight, indices, offsets, mode, psw, include_last_offset, padding_idx);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_forward_only(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool /*scale_grad_by_freq*/,
    int64_t mode, bool /*sparse*/, const std::optional<at::Tensor>& psw, bool include_last_offset,
    int64_t padding_idx) {
  NEURON_TRACK_OP("aten::_embedding_bag_forward_only");
  return embedding_bag_native(weight, indices, offsets, mode, psw, include_last_offset, padding_idx);
}

at::Tensor dense_backward_native(const at::Tensor& grad, const at::Tensor& indices_in, const at::Tensor& offset2bag,
                                 const at::Tensor& bag_size, const at::Tensor& max_indices, int64_t num_weights,
                                 bool scale_grad_by_freq, int64_t mode, const std::optional<at::Tensor>& psw,
                                 int64_t padding_idx) {
  const char* name = "embedding_bag_backward";
  c10::DeviceGuard guard(grad.device());
  at::checkScalarTypes(name, at::TensorArg(indices_in, "indices", 1), {at::kLong, at::kInt});
  TORCH_CHECK(mode >= 0 && mode <= 2, "`mode` must be sum, mean, or max.");
  TORCH_CHECK(grad.dim() == 2 && indices_in.dim() == 1, name, ": expects grad [B, D] and 1-d indices");
  check_devices(name, grad, {indices_in, offset2bag, bag_size, max_indices, psw.value_or(at::Tensor())});
  at::Tensor grad_weight = at::empty({num_weights, grad.size(1)}, grad.options());
  if (grad_weight.numel() == 0) return grad_weight;
  if (indices_in.numel() == 0 && mode != 2) return grad_weight.zero_();
  nrt_op op{};
  op.code = NRT_OP_EMBEDDING_BAG_BACKWARD;
  op.num_outputs = 1;
  op.num_operands = 7;
  op.operands[0] = to_view(grad_weight, name);
  op.operands[1] = to_view(grad, name);
  op.operands[2] = to_view(indices_in, name);
  op.operands[3] = to_view(offset2bag, name);
  op.operands[4] = to_view(bag_size, name);
  op.operands[5] = to_view(max_indices, name);
  op.operands[6] = psw.has_value() && psw->defined() ? to_view(*psw, name) : absent_view();
  op.num_scalars = 3;
  op.scalars[0].i = mode;
  op.scalars[1].i = padding_idx;
  op.scalars[2].i = scale_grad_by_freq;
  launch(grad.device().index(), op);
  return grad_weight;
}

at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                        const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                        const at::Tensor& max_indices, int64_t num_weights, bool scale_grad_by_freq,
                                        int64_t mode, const std::optional<at::Tensor>& psw, int64_t padding_idx) {
  NEURON_TRACK_OP("aten::_embedding_bag_dense_backward");
  return dense_backward_native(grad, indices, offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq,
                               mode, psw, padding_idx);
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                  const at::Tensor& max_indices, int64_t num_weights, bool scale_grad_by_freq,
                                  int64_t mode, bool sparse, const std::optional<at::Tensor>& psw,
                                  int64_t padding_idx) {
  if (sparse) {  // a sparse gradient: a layout the device does not have
    torch::jit::Stack stack{grad,      indices, offsets, offset2bag, bag_size, max_indices, num_weights,
                            scale_grad_by_freq, mode, sparse, psw, padding_idx};
    run_through_fallback("aten::_embedding_bag_backward", "", &stack);
    return stack.back().toTensor();
  }
  NEURON_TRACK_OP("aten::_embedding_bag_backward");
  return dense_backward_native(grad, indices, offset2bag, bag_size, max_indices, num_weights, scale_grad_by_freq,
                               mode, psw, padding_idx);
}

at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                     const at::Tensor& indices, const at::Tensor& /*offsets*/,
                                                     const at::Tensor& offset2bag, int64_t mode,
                                                     int64_t padding_idx) {
  NEURON_TRACK_OP("aten::_embedding_bag_per_sample_weights_backward");
  const char* name = "embedding_bag_per_sample_weights_backward";
  c10::DeviceGuard guard(grad.device());
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  TORCH_CHECK(grad.dim() == 2 && weight.dim() == 2 && indices.dim() == 1 && grad.size(1) == weight.size(1), name,
              ": expects grad [B, D], weight [V, D] and 1-d indices");
  check_devices(name, grad, {weight, indices, offset2bag});
  at::Tensor out = at::empty({indices.size(0)}, grad.options());
  if (out.numel() == 0) return out;
  nrt_op op{};
  op.code = NRT_OP_EMBEDDING_BAG_PSW_BACKWARD;
  op.num_outputs = 1;
  op.num_operands = 5;
  op.operands[0] = to_view(out, name);
  op.operands[1] = to_view(grad, name);
  op.operands[2] = to_view(weight, name);
  op.operands[3] = to_view(indices, name);
  op.operands[4] = to_view(offset2bag, name);
  op.num_scalars = 2;
  op.scalars[0].i = mode;
  op.scalars[1].i = padding_idx;
  launch(grad.device().index(), op);
  return out;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag_forward_only);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_dense_backward", embedding_bag_dense_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward);
}

}  // namespace torchneuron
