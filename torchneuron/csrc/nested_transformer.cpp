// Nested tensors on the neuron device, as far as the transformer fast path
// takes them: nn.TransformerEncoder in eval mode turns a padded batch and its
// key padding mask into a nested tensor (_nested_tensor_from_mask), runs each
// layer's _transformer_encoder_layer_fwd on it, and pads the result back
// (to_padded_tensor); torch.nested.nested_tensor(..., device="neuron") feeds
// the layer directly. A nested tensor here is PyTorch's NestedTensorImpl: a
// contiguous neuron buffer holding the entries one after another, and the
// entries' sizes in a CPU tensor. Every step copies whole entries with
// native kernels; the loops are over the entries, never their elements.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "op_tracking.h"

namespace torchneuron {
namespace {

at::native::NestedTensorImpl* contiguous_nested(const at::Tensor& t, const char* op) {
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(t);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl), op,
              ": a non-contiguous nested tensor is not supported on neuron");
  return impl;
}

// Entry i's sizes (one row of the [N, rank] CPU size tensor).
std::vector<int64_t> entry_sizes(const at::Tensor& nested_sizes, int64_t i) {
  const at::Tensor row = nested_sizes[i].contiguous();
  const int64_t* p = row.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + row.numel());
}

// An empty nested tensor's size tensor may have no dims at all.
int64_t entry_count(const at::Tensor& nested_sizes) { return nested_sizes.dim() == 0 ? 0 : nested_sizes.size(0); }

at::Tensor make_nested(const at::Tensor& buffer, const at::Tensor& nested_sizes) {
  return at::detail::make_tensor<at::native::NestedTensorImpl>(buffer.reshape({-1}), nested_sizes);
}

// The [N, 2] sizes of N entries of lengths[i] rows of D.
at::Tensor row_sizes(const std::vector<int64_t>& lengths, int64_t D) {
  at::Tensor sizes = at::empty({static_cast<int64_t>(lengths.size()), 2}, at::kLong);
  int64_t* p = sizes.data_ptr<int64_t>();
  for (size_t i = 0; i < lengths.size(); i++) {
    p[2 * i] = lengths[i];
    p[2 * i + 1] = D;
  }
  return sizes;
}

void check_mask_and_input(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of ScalarType Bool, but got ",
              mask.scalar_type(), " instead.");
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1), "Mask size should match input size");
}

// Each row's count of kept (true) positions, read back to the host.
std::vector<int64_t> kept_counts(const at::Tensor& mask) {
  const at::Tensor counts = mask.sum(1).to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = counts.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + counts.numel());
}

// Every row keeps a prefix: position j is kept exactly when j < its count.
bool left_aligned(const at::Tensor& mask) {
  const at::Tensor counts = mask.sum(1, false, at::kLong);
  const at::Tensor prefix = at::arange(mask.size(1), counts.options()).unsqueeze(0).lt(counts.unsqueeze(1));
  return at::equal(prefix, mask);
}

bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  NEURON_TRACK_OP("aten::_nested_tensor_from_mask_left_aligned");
  check_mask_and_input(t, mask);
  return left_aligned(mask);
}

// Entry i is the first count_i rows of t[i] (count_i = mask[i].sum()).
at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  NEURON_TRACK_OP("aten::_nested_tensor_from_mask");
  check_mask_and_input(t, mask);
  if (mask_check) TORCH_CHECK(left_aligned(mask), "Mask must be left-aligned without gaps");
  const std::vector<int64_t> lengths = kept_counts(mask);
  std::vector<at::Tensor> rows;
  for (size_t i = 0; i < lengths.size(); i++) rows.push_back(t[i].narrow(0, 0, lengths[i]));
  const at::Tensor buffer = rows.empty() ? at::empty({0}, t.options()) : at::cat(rows, 0);
  return make_nested(buffer, row_sizes(lengths, t.size(2)));
}

// Entries padded with `padding` to the largest size in each dim, or to
// output_size ([N, ...], each at least that largest size).
at::Tensor to_padded_tensor(const at::Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  NEURON_TRACK_OP("aten::to_padded_tensor");
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(self);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl),  // the CPU's words
              "for now to_padded_tensor only supports contiguous nested tensor");
  const at::Tensor& nested_sizes = impl->get_nested_sizes();
  // No entries, or scalar ones: the buffer as it is; then the CPU's refusal
  // of entries that are all empty.
  if (nested_sizes.dim() == 0 || nested_sizes.numel() == 0) return impl->get_buffer().clone();
  TORCH_CHECK(self.numel() > 0, "to_padded_tensor: at least one constituent tensor should have non-zero numel");
  const int64_t n = entry_count(nested_sizes), rank = nested_sizes.size(1);
  std::vector<int64_t> shape{n};
  for (int64_t d = 0; d < rank; d++)
    shape.push_back(n == 0 ? 0 : nested_sizes.select(1, d).max().item<int64_t>());
  if (output_size.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(output_size->size()) == rank + 1,
                "Length of output_size does not match NestedTensor dims. Broadcasting is not supported.");
    for (int64_t d = 0; d <= rank; d++) {
      TORCH_CHECK((*output_size)[d] >= shape[d], "Value in output_size is less than NestedTensor padded size. ",
                  "Truncation is not supported.");
      shape[d] = (*output_size)[d];
    }
  }
  const at::Tensor buffer = impl->get_buffer();
  at::Tensor out = at::full(shape, padding, buffer.options());
  const at::Tensor offsets = impl->get_storage_offsets().contiguous();
  const int64_t* offset = offsets.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < n; i++) {
    const std::vector<int64_t> sizes = entry_sizes(nested_sizes, i);
    at::Tensor dst = out[i];
    for (int64_t d = 0; d < rank; d++) dst = dst.narrow(d, 0, sizes[d]);
    if (dst.numel() > 0) dst.copy_(buffer.narrow(0, offset[i], dst.numel()).view(sizes));
  }
  return out;
}

// The encoder layer on [n_i, D] entries: padded to [N, L, D] with the
// padding masked out as keys (a masked key adds exactly 0 to the softmax),
// run through the dense native op, and each entry's rows taken back.
at::Tensor transformer_encoder_layer_fwd_nested(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  NEURON_TRACK_OP("aten::_transformer_encoder_layer_fwd(nested)");
  at::native::NestedTensorImpl* impl = contiguous_nested(src, "_transformer_encoder_layer_fwd");
  const at::Tensor buffer = impl->get_buffer();
  const at::Tensor& nested_sizes = impl->get_nested_sizes();
  // An empty input comes back as it is (a new tensor on the same sizes).
  if (buffer.numel() == 0) return make_nested(buffer.clone(), nested_sizes.clone());
  TORCH_CHECK(!(mask.has_value() && mask->defined()), "NestedTensor with mask is not supported yet");
  TORCH_CHECK(nested_sizes.dim() == 2 && nested_sizes.size(1) == 2,
              "_transformer_encoder_layer_fwd: expected nested entries of 2 dims [rows, embed_dim]");
  const int64_t n = nested_sizes.size(0);
  std::vector<int64_t> lengths(n);
  for (int64_t i = 0; i < n; i++) {
    const std::vector<int64_t> sizes = entry_sizes(nested_sizes, i);
    TORCH_CHECK(sizes[1] == embed_dim, "_transformer_encoder_layer_fwd: nested entry ", i, " has ", sizes[1],
                " features, expected embed_dim ", embed_dim);
    lengths[i] = sizes[0];
  }
  const at::Tensor padded = to_padded_tensor(src, 0.0, std::nullopt);
  const int64_t L = padded.size(1);
  const at::Tensor length_t = at::tensor(lengths, at::kLong);
  const at::Tensor key_padding =
      at::arange(L, at::kLong).unsqueeze(0).ge(length_t.unsqueeze(1)).to(padded.device());
  const at::Tensor out = at::_transformer_encoder_layer_fwd(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
      key_padding, 1);
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < n; i++) rows.push_back(out[i].narrow(0, 0, lengths[i]));
  return make_nested(at::cat(rows, 0), nested_sizes.clone());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", nested_tensor_from_mask);
  m.impl("_nested_tensor_from_mask_left_aligned", nested_tensor_from_mask_left_aligned);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("to_padded_tensor", to_padded_tensor);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd_nested);
}

}  // namespace torchneuron
