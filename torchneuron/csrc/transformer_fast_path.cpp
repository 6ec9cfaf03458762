// The inference "fast path" of nn.TransformerEncoderLayer and
// nn.MultiheadAttention: torch.nn calls these ATen ops on the PrivateUse1
// device as on cpu and cuda (eval mode, no grad). Each is composed here from
// native ops (matmul/addmm, bmm, softmax, layer norm, gelu/relu, adds), in
// the CPU kernels' order of steps, so the results, a fully masked row's NaN
// included, are the CPU fast path's. No element loop: every step launches a
// native kernel. Multi-head attention also takes a nested query (what
// nn.MultiheadAttention passes on for nested input), as the CPU does: the
// projected entries are padded into a batch, each entry's softmax runs over
// its own length, and the projection back takes each entry's rows.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include <cmath>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_softmax_dtype(const at::Tensor& t, const char* op) {
  const at::ScalarType s = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16, "\"",
                              op, "\" not implemented for '", s, "'");
}

// The dims [from, to) of a view merged where they step alike, dims of size
// 1 dropped: (size, stride) groups.
std::vector<std::pair<int64_t, int64_t>> merged_dims(const at::Tensor& t, int64_t from, int64_t to) {
  std::vector<std::pair<int64_t, int64_t>> groups;
  for (int64_t d = from; d < to; d++) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size == 1) continue;
    if (!groups.empty() && groups.back().second == size * stride)
      groups.back() = {groups.back().first * size, stride};
    else
      groups.emplace_back(size, stride);
  }
  return groups;
}

// The runtime's mask operand of a softmax along dim: the bool mask (of the
// input's shape, broadcast dims of stride 0 welcome) as [A, B, n, inner],
// A B = the dims before dim. A (B, L) padding mask over heads and queries
// or an (L, L) mask over batch and heads fits as it is; another layout is
// copied contiguous first.
nrt_tensor_view mask_view(const at::Tensor& mask, int64_t dim, const char* name) {
  if (mask.dim() == 0) return strided_view(mask, {1, 1, 1, 1}, {0, 0, 0, 0}, name);
  auto outer = merged_dims(mask, 0, dim), inner = merged_dims(mask, dim + 1, mask.dim());
  if (outer.size() > 2 || inner.size() > 1) return mask_view(mask.contiguous(), dim, name);
  while (outer.size() < 2) outer.insert(outer.begin(), {1, 0});
  if (inner.empty()) inner.emplace_back(1, 0);
  return strided_view(mask, {outer[0].first, outer[1].first, mask.size(dim), inner[0].first},
                      {outer[0].second, outer[1].second, mask.stride(dim), inner[0].second}, name);
}

// x seen as [outer, n, inner] around dim (x contiguous).
nrt_tensor_view around_dim(const at::Tensor& x, int64_t dim, const char* name) {
  if (x.dim() == 0) return contiguous_view(x, {1, 1, 1}, name);
  return contiguous_view(x,
                         {c10::multiply_integers(x.sizes().begin(), x.sizes().begin() + dim), x.size(dim),
                          c10::multiply_integers(x.sizes().begin() + dim + 1, x.sizes().end())},
                         name);
}

// softmax(self) over dim where mask is false, in one pass of the runtime's
// masked SOFTMAX: masked entries are 0 and a row masked whole is NaN, as the
// CPU's masked host softmax gives (-inf minus a -inf maximum). Mask types: 0 an (L, L) attention mask, 1 a (B, L) padding
// mask of a (B, H, L, L) input, 2 (and any other rank) the input's shape.
at::Tensor masked_softmax(const at::Tensor& self, const at::Tensor& mask_in, std::optional<int64_t> dim_in,
                          std::optional<int64_t> mask_type_in) {
  NEURON_TRACK_OP("aten::_masked_softmax");
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  check_softmax_dtype(self, "masked_softmax");
  std::optional<int64_t> mask_type = mask_type_in;
  if (mask_in.dim() != 2 || self.dim() != 4) mask_type = 2;  // types 0 and 1 need a 2-d mask, a 4-d input
  TORCH_CHECK(mask_type.has_value(), "Mask Type should be defined");
  at::Tensor mask = mask_in;
  if (mask_type == 1) {
    TORCH_CHECK(self.size(0) == mask.size(0) && self.size(2) == mask.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    mask = mask.reshape({self.size(0), 1, 1, self.size(2)});
  } else if (mask_type == 0) {
    TORCH_CHECK(self.size(2) == mask.size(0) && self.size(2) == mask.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    mask = mask.reshape({1, 1, self.size(2), self.size(2)});
  } else {
    TORCH_CHECK(self.sizes() == mask.sizes(), "For mask_type == 2 mask shape should match input shape");
  }
  const int64_t dim = at::maybe_wrap_dim(dim_in.value_or(self.dim() - 1), self.dim());
  TORCH_CHECK(mask.device() == self.device(), "_masked_softmax: expected the mask on ", self.device(), ", got ",
              mask.device());
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  if (self.numel() == 0) return out;
  const at::Tensor x = self.contiguous();
  launch_nn(NRT_OP_SOFTMAX, self, 1,
            {around_dim(out, dim, "_masked_softmax"), around_dim(x, dim, "_masked_softmax"),
             mask_view(mask.expand(self.sizes()), dim, "_masked_softmax")});
  return out;
}

// The gradient of masked_softmax: output * (grad - sum(grad * output)),
// the sum over unmasked entries, zero where masked; one runtime pass.
at::Tensor masked_softmax_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& mask,
                                   std::optional<int64_t> dim_in) {
  NEURON_TRACK_OP("aten::_masked_softmax_backward");
  TORCH_CHECK(grad.sizes() == mask.sizes(), "Mask shape should match grad shape");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  check_softmax_dtype(grad, "masked_softmax_backward");
  TORCH_CHECK(output.sizes() == grad.sizes(), "_masked_softmax_backward: output shape ", output.sizes(),
              " should match grad shape ", grad.sizes());
  check_softmax_dtype(output, "masked_softmax_backward");
  TORCH_CHECK(output.device() == grad.device() && mask.device() == grad.device(),
              "_masked_softmax_backward: expected all tensors on ", grad.device());
  c10::DeviceGuard guard(grad.device());
  at::Tensor grad_in = at::empty(grad.sizes(), grad.options().memory_format(at::MemoryFormat::Contiguous));
  if (grad.numel() == 0) return grad_in;
  const int64_t dim = at::maybe_wrap_dim(dim_in.value_or(output.dim() - 1), grad.dim());
  const char* name = "_masked_softmax_backward";
  const at::Tensor g = grad.contiguous(), y = output.contiguous();
  launch_nn(NRT_OP_SOFTMAX_BACKWARD, grad, 1,
            {around_dim(grad_in, dim, name), around_dim(g, dim, name), around_dim(y, dim, name),
             mask_view(mask, dim, name)});
  return grad_in;
}

// q = (q + q_bias) / sqrt(dim_per_head), k = k + k_bias, v = v + v_bias,
// each [B, H, T, dim_per_head] from a [B, T, 3 D] projection; the three are
// slices of one [3, B, H, T, dh] buffer, as on the CPU. The CPU's checks in
// its order and words; then ours where it reads past the tensors (a qkv of
// more dims, a short bias) and where it divides by zero heads.
std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv(const at::Tensor& qkv,
                                                                          const at::Tensor& qkv_bias,
                                                                          int64_t num_head) {
  NEURON_TRACK_OP("aten::_transform_bias_rescale_qkv");
  const int64_t B = qkv.size(0), T = qkv.size(1), three_d = qkv.size(2), D = three_d / 3;
  TORCH_CHECK(num_head > 0, "_transform_bias_rescale_qkv: num_heads must be positive, got ", num_head);
  TORCH_CHECK(D % num_head == 0, "Expected D % num_head == 0 to be true, but got false.  ",
              "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)");
  TORCH_CHECK(three_d % 3 == 0, "Expected _3D % 3 == 0 to be true, but got false.  ",
              "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)");
  check_softmax_dtype(qkv, "transform_bias_rescale_qkv");
  TORCH_CHECK(qkv.dim() == 3, "_transform_bias_rescale_qkv: expected a 3-d qkv, got ", qkv.dim(), " dims");
  TORCH_CHECK(qkv_bias.dim() == 1 && qkv_bias.size(0) == three_d,
              "_transform_bias_rescale_qkv: expected a bias of ", three_d, " elements, got ", qkv_bias.sizes());
  const int64_t dh = D / num_head;
  at::Tensor q_k_v = at::add(qkv, qkv_bias).reshape({B, T, 3, num_head, dh}).permute({2, 0, 3, 1, 4}).contiguous();
  // The CPU rounds 1/sqrt(dh) to the tensor's dtype before multiplying.
  double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(dh));
  if (qkv.scalar_type() != at::kDouble) inv_sqrt = static_cast<float>(1.0 / std::sqrt(static_cast<float>(dh)));
  q_k_v.select(0, 0).mul_(inv_sqrt);
  return {q_k_v.select(0, 0), q_k_v.select(0, 1), q_k_v.select(0, 2)};
}

// A nested qkv ([T_i, 3 D] entries) is padded with zeros to [B, T, 3 D] and
// transformed as a batch, as on the CPU: the padded rows come back holding
// the bias (q's rescaled).
std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv_nested(const at::Tensor& qkv,
                                                                                 const at::Tensor& qkv_bias,
                                                                                 int64_t num_head) {
  NEURON_TRACK_OP("aten::_transform_bias_rescale_qkv(nested)");
  TORCH_CHECK(qkv.is_nested() && !qkv_bias.is_nested(),
              "_transform_bias_rescale_qkv: expected a nested qkv and a dense bias");
  return transform_bias_rescale_qkv(qkv.to_padded_tensor(0.0), qkv_bias, num_head);
}

// [B, H, T, S] scores of a nested query's entries padded to T: each entry's
// softmax over its first T_i keys for its first T_i queries, 0 elsewhere
// (the CPU's result, which takes the entries one by one). Here one masked
// softmax with the keys past each length masked, then the padded queries'
// rows zeroed (a zero-length entry's NaN rows among them).
at::Tensor nested_softmax_with_shape(const at::Tensor& self, const at::Tensor& query) {
  NEURON_TRACK_OP("aten::_nested_tensor_softmax_with_shape(nested)");
  TORCH_CHECK_INDEX(self.dim() >= 4, "too many indices for tensor of dimension ", self.dim());
  TORCH_CHECK(self.dim() == 4 && !self.is_nested() && query.is_nested(),
              "_nested_tensor_softmax_with_shape: expected dense [B, H, T, T] scores and a nested query");
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(query);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl) && impl->get_nested_sizes().dim() == 2,
              "_nested_tensor_softmax_with_shape: expected a contiguous nested query of [T_i, D] entries");
  const at::Tensor lengths = impl->get_nested_sizes().select(1, 0).unsqueeze(1);
  const int64_t B = self.size(0), T = self.size(2), S = self.size(3);
  TORCH_CHECK_INDEX(lengths.size(0) <= B, "index ", B, " is out of bounds for dimension 0 with size ", B);
  TORCH_CHECK(lengths.size(0) == B, "_nested_tensor_softmax_with_shape: the query has ", lengths.size(0),
              " entries for scores of batch ", B);
  const at::Tensor past_key = at::arange(S, at::kLong).unsqueeze(0).ge(lengths).to(self.device());
  const at::Tensor past_query = at::arange(T, at::kLong).unsqueeze(0).ge(lengths).to(self.device());
  at::Tensor out = masked_softmax(self, past_key.view({B, 1, 1, S}).expand(self.sizes()), 3, 2);
  return out.masked_fill_(past_query.view({B, 1, T, 1}), 0);
}

// x W^T: matmul for a dense x; for a nested one (the CPU's nested matmul) one
// product over its buffer of rows, after the CPU's checks in its words.
at::Tensor gemm_nt(const at::Tensor& x, const at::Tensor& w) {
  if (!x.is_nested()) return at::matmul(x, w.t());
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(x);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl),
              "for now linear only supports contiguous nested tensor");
  const std::optional<int64_t> last = impl->opt_size(-1);
  TORCH_CHECK(last.has_value(),
              "Expected all tensors in nested tensor to have the same trailing dimension, instead last dimension "
              "equals: ",
              impl->get_nested_sizes().select(1, -1));
  TORCH_CHECK(*last == w.size(1), "Shape mismatch for NestedTensor Matmul: Expected input's (a nested tensor) ",
              "'last_dim' to equal 'weight.size(0), but got: last_dim = ", *last, ", and weight.size(0) = ",
              w.size(1));
  at::Tensor sizes = impl->get_nested_sizes().clone();
  sizes.select(1, -1).fill_(w.size(0));
  const at::Tensor rows = at::mm(impl->get_buffer().view({-1, *last}), w.t());
  return at::detail::make_tensor<at::native::NestedTensorImpl>(rows.reshape({-1}), sizes);
}

// [B, T, 3 D]: one product for self-attention, else the q, k, v rows of
// the weight applied to query, key and value apart (nested ones joined by
// the nested cat, which wants the same lengths, as on the CPU).
at::Tensor qkv_projection(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
                          const at::Tensor& qkv_weight) {
  if (key.is_same(value)) {
    if (query.is_same(key)) return gemm_nt(query, qkv_weight);
    auto w = qkv_weight.split_with_sizes({embed_dim, 2 * embed_dim}, 0);
    return at::cat({gemm_nt(query, w[0]), gemm_nt(key, w[1])}, 2);
  }
  auto w = qkv_weight.chunk(3, 0);
  return at::cat({gemm_nt(query, w[0]), gemm_nt(key, w[1]), gemm_nt(value, w[2])}, 2);
}

// The CPU's kernel takes dense inputs and a nested query alike (a nested
// query with a nested key and value of the same lengths for cross-attention).
std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask_in, bool need_weights,
    bool average_attn_weights, std::optional<int64_t> mask_type) {
  const bool nested = query.is_nested() || key.is_nested() || value.is_nested();
  if (nested)
    NEURON_TRACK_OP("aten::_native_multi_head_attention(nested)");
  else
    NEURON_TRACK_OP("aten::_native_multi_head_attention");
  const bool has_mask = mask_in.has_value() && mask_in->defined();
  // The CPU's checks, in its order and words.
  TORCH_CHECK(!has_mask || !query.is_nested(), "NestedTensor with mask is not supported yet");
  const int64_t D = embed_dim;
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.is_nested() || query.size(2) == embed_dim, "passed-in embed_dim ", embed_dim,
              " didn't match last dim of query ", query.size(2));
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(nested || (query.sizes() == key.sizes() && key.sizes() == value.sizes()),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(D * 3 == qkv_weight.size(0), "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(D == qkv_weight.size(1), "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.size(0) == 3 * D, "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(num_head > 0 && D % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");

  at::Tensor qkv = qkv_projection(query, key, value, embed_dim, qkv_weight);
  if (!qkv.is_nested() && qkv.numel() == 0) return {at::empty_like(query), at::Tensor()};
  auto [q, k, v] = qkv.is_nested() ? transform_bias_rescale_qkv_nested(qkv, qkv_bias, num_head)
                                   : transform_bias_rescale_qkv(qkv, qkv_bias, num_head);
  qkv = at::Tensor();
  // [B, H, T, dh], T the longest entry's length for a nested query.
  const int64_t B = q.size(0), T = q.size(2), dh = D / num_head;
  at::Tensor scores = at::bmm(q.view({B * num_head, T, dh}), k.view({B * num_head, T, dh}).transpose(1, 2))
                          .view({B, num_head, T, T});
  // Any non-bool mask counts as "masked" where it is non-zero (the CPU casts
  // it to bool), so an additive float mask of 0 / -inf keeps its meaning.
  if (query.is_nested() && !has_mask)
    scores = nested_softmax_with_shape(scores, query);
  else if (has_mask)
    scores = masked_softmax(scores, mask_in->scalar_type() == at::kBool ? *mask_in : mask_in->to(at::kBool), 3,
                            mask_type);
  else
    scores = at::_softmax(scores, 3, false);
  at::Tensor context = at::bmm(scores.view({B * num_head, T, T}), v.view({B * num_head, T, dh}));
  // [B, H, T, dh] -> [B T, D] (each entry's rows for a nested query), then
  // the output projection.
  at::Tensor proj;
  at::Tensor rows = context.view({B, num_head, T, dh}).permute({0, 2, 1, 3}).reshape({B * T, D});
  if (query.is_nested()) {
    // The CPU's _nested_from_padded (a mask per entry, a masked_select) in
    // one gather of the entries' rows.
    const at::Tensor& sizes = at::native::get_nested_tensor_impl(query)->get_nested_sizes();
    const at::Tensor keep = at::arange(T, at::kLong).unsqueeze(0).lt(sizes.select(1, 0).unsqueeze(1));
    const at::Tensor index = at::arange(B * T, at::kLong).view({B, T}).masked_select(keep).to(rows.device());
    at::Tensor out_sizes = sizes.clone();
    out_sizes.select(1, -1).fill_(proj_weight.size(0));
    proj = at::detail::make_tensor<at::native::NestedTensorImpl>(
        at::addmm(proj_bias, rows.index_select(0, index), proj_weight.t()).reshape({-1}), out_sizes);
  } else {
    proj = at::linear(rows, proj_weight, proj_bias).view({B, T, proj_weight.size(0)});
  }
  if (!need_weights) return {proj, at::Tensor()};
  if (average_attn_weights) scores = scores.sum(1).div_(num_head);
  return {proj, scores};
}

at::Tensor layer_norm(const at::Tensor& x, int64_t embed_dim, double eps, const at::Tensor& weight,
                      const at::Tensor& bias) {
  return at::layer_norm(x, {embed_dim}, weight, bias, eps, true);
}

// One encoder layer: self-attention and a feed-forward block, each added to
// its input, with the two layer norms before (norm_first) or after them.
at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  NEURON_TRACK_OP("aten::_transformer_encoder_layer_fwd");
  TORCH_CHECK(!src.is_nested(), "_transformer_encoder_layer_fwd: nested tensors are not supported on neuron");
  if (src.numel() == 0) return src.clone();
  at::Tensor x = norm_first ? layer_norm(src, embed_dim, eps, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                              proj_bias, mask, false, true, mask_type));
  x.add_(src);
  if (!norm_first) x = layer_norm(x, embed_dim, eps, norm_weight_1, norm_bias_1);
  const at::Tensor residual = x;
  if (norm_first) x = layer_norm(x, embed_dim, eps, norm_weight_2, norm_bias_2);
  // The CPU's ffn: a batched (3-d) input and 2-d weights.
  TORCH_CHECK(x.dim() == 3, "batched input size should be 3");
  TORCH_CHECK(ffn_weight_1.dim() == 2 && ffn_weight_2.dim() == 2, "2d weights expected");
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2);
  x.add_(residual);
  if (!norm_first) x = layer_norm(x, embed_dim, eps, norm_weight_2, norm_bias_2);
  return x;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_masked_softmax", masked_softmax);
  m.impl("_masked_softmax_backward", masked_softmax_backward);
  m.impl("_transform_bias_rescale_qkv", transform_bias_rescale_qkv);
  m.impl("_native_multi_head_attention", native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transform_bias_rescale_qkv", transform_bias_rescale_qkv_nested);
  m.impl("_nested_tensor_softmax_with_shape", nested_softmax_with_shape);
  m.impl("_native_multi_head_attention", native_multi_head_attention);
}

}  // namespace torchneuron
