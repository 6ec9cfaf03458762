// scaled_dot_product_attention on neuron: PyTorch's overrideable SDPA entry.
//
// torch.nn.functional.scaled_dot_product_attention asks the device's
// _fused_sdp_choice which backend to use; ours picks "overrideable" for the
// shapes and dtypes the runtime's flash-style kernels handle (and math
// otherwise), so the call becomes _scaled_dot_product_fused_attention_
// overrideable and, under autograd, its _backward. Each is a few runtime ops
// (neuronrt/ops/attention.h): the forward saves the log-sum-exp and the
// Philox seed and offset of its dropout, which the backward reuses.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "neuron_device.h"
#include "generator.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"
#include "op_scalars.h"

namespace torchneuron {
namespace {


bool kernel_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// True when the runtime kernels handle this call; otherwise PyTorch's math
// composition runs (and raises PyTorch's own errors for bad shapes).
bool kernel_handles(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const std::optional<at::Tensor>& mask, bool enable_gqa) {
  if (q.dim() != k.dim() || q.dim() != v.dim() || (q.dim() != 3 && q.dim() != 4)) return false;
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type() ||
      !kernel_dtype(q.scalar_type()))
    return false;
  for (const at::Tensor* t : {&k, &v})
    if (t->device() != q.device()) return false;
  // Symbolic sizes (sym_size), so that tracing under dynamic shapes adds
  // guards on these relations instead of fixing every size to a constant.
  c10::SymInt E = q.sym_size(-1), Ev = v.sym_size(-1);
  if (E > NRT_ATTENTION_MAX_HEAD_DIM || Ev > NRT_ATTENTION_MAX_HEAD_DIM || k.sym_size(-1) != E)
    return false;
  if (k.sym_size(-2) != v.sym_size(-2)) return false;
  for (int64_t d = 0; d + 3 < q.dim(); d++)
    if (k.sym_size(d) != q.sym_size(d) || v.sym_size(d) != q.sym_size(d)) return false;
  c10::SymInt H = q.sym_size(-3), Hk = k.sym_size(-3);
  if (v.sym_size(-3) != Hk) return false;
  if (H != Hk && !(enable_gqa && Hk > 0 && H % Hk == 0)) return false;
  if (mask && mask->defined()) {
    const at::Tensor& m = *mask;
    if (m.device() != q.device() || m.dim() > 4) return false;
    if (m.scalar_type() != at::kBool && !at::isFloatingType(m.scalar_type())) return false;
    std::vector<c10::SymInt> full = {q.dim() == 4 ? q.sym_size(0) : c10::SymInt(1), H, q.sym_size(-2),
                                     k.sym_size(-2)};
    if (!at::is_expandable_to(m.sym_sizes(), full)) return false;
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  bool ours = ctx.userEnabledOverrideableSDP() && kernel_handles(query, key, value, attn_mask, enable_gqa);
  if (!ours && !ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::error);
  return static_cast<int64_t>(ours ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

at::Tensor as4d(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

// An empty tensor of `sizes` whose memory order follows like's strides (as
// the meta function's alloc_with_matching_layout), so that out of a
// (B, L, H, E) query viewed as (B, H, L, E) is that view of a dense tensor.
at::Tensor empty_like_layout(const at::Tensor& like, at::IntArrayRef sizes, at::TensorOptions opts) {
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> permuted(sizes.size());
  for (size_t d = 0; d < order.size(); d++) permuted[d] = sizes[order[d]];
  std::vector<int64_t> inverse(order.size());
  for (size_t d = 0; d < order.size(); d++) inverse[order[d]] = static_cast<int64_t>(d);
  return at::empty(permuted, opts).permute(inverse);
}

struct AttentionOp {
  nrt_op op{};
  AttentionOp(nrt_op_code code, int outputs, double scale, bool causal, double dropout_p,
              int64_t seed, int64_t offset) {
    op.code = code;
    op.num_outputs = outputs;
    op.num_scalars = 5;
    op.scalars[0] = float_scalar(scale);
    op.scalars[1] = int_scalar(causal);
    op.scalars[2] = float_scalar(dropout_p);
    op.scalars[3] = int_scalar(seed);
    op.scalars[4] = int_scalar(offset);
  }
  AttentionOp& operand(const at::Tensor& t) {
    op.operands[op.num_operands++] = to_view(t, nrt_op_name(op.code));
    return *this;
  }
  void launch(const at::Tensor& on) {
    c10::DeviceGuard guard(on.device());
    torchneuron::launch(on.device().index(), op);
  }
};

void check_inputs(const char* name, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 3 || q.dim() == 4, name, ": query must be 3-d or 4-d, got ", q.dim(), "-d");
  TORCH_CHECK(k.dim() == q.dim() && v.dim() == q.dim(), name,
              ": query, key and value must have the same number of dimensions");
  for (const at::Tensor* t : {&q, &k, &v})
    TORCH_CHECK(t->device().type() == kNeuron && t->device() == q.device(), name,
                ": expected query, key and value on one neuron device, got ", t->device());
  TORCH_CHECK(kernel_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              name, ": query, key and value must share a dtype among float32, bfloat16 and "
              "float16, got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
}

// The mask as (B, H, L, S), broadcast; undefined when absent.
at::Tensor mask4d(const std::optional<at::Tensor>& mask, int64_t B, int64_t H, int64_t L, int64_t S,
                  const char* name) {
  if (!mask || !mask->defined()) return at::Tensor();
  TORCH_CHECK(mask->dim() <= 4, name, ": attn_mask must have at most 4 dimensions");
  TORCH_CHECK(mask->scalar_type() == at::kBool || at::isFloatingType(mask->scalar_type()), name,
              ": attn_mask must be bool or floating, got ", mask->scalar_type());
  return mask->expand({B, H, L, S});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
sdpa_forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
             const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
             bool return_debug_mask, std::optional<double> scale) {
  NEURON_TRACK_OP("aten::_scaled_dot_product_fused_attention_overrideable");
  const char* name = "scaled_dot_product_attention";
  check_inputs(name, query, key, value);
  TORCH_CHECK(dropout_p >= 0 && dropout_p <= 1, name, ": dropout_p must be in [0, 1], got ", dropout_p);
  at::Tensor q = as4d(query), k = as4d(key), v = as4d(value);
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2), Ev = v.size(3);
  at::Tensor mask = mask4d(attn_bias, B, H, L, S, name);
  double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
  std::vector<int64_t> out_sizes = query.sizes().vec();
  out_sizes.back() = Ev;
  at::Tensor out = empty_like_layout(query, out_sizes, query.options());
  at::Tensor lse = at::empty({B, H, L}, query.options().dtype(at::kFloat));
  int64_t seed = 0, offset = 0;
  if (dropout_p > 0) {
    auto* g = at::check_generator<NeuronGeneratorImpl>(default_generator(query.device().index()));
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed = static_cast<int64_t>(g->current_seed());
    offset = static_cast<int64_t>(g->reserve(NRT_RANDOM_BLOCKS(static_cast<uint64_t>(B * H * L * S))));
  }
  AttentionOp op(NRT_OP_SDPA_FORWARD, 2, sc, is_causal, dropout_p, seed, offset);
  op.operand(as4d(out)).operand(lse).operand(q).operand(k).operand(v);
  if (mask.defined()) op.operand(mask);
  op.launch(query);
  auto cpu_long = at::TensorOptions().dtype(at::kLong);
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(L), c10::SymInt(S),
          at::scalar_tensor(seed, cpu_long), at::scalar_tensor(offset, cpu_long), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  NEURON_TRACK_OP("aten::_scaled_dot_product_fused_attention_overrideable_backward");
  const char* name = "scaled_dot_product_attention backward";
  check_inputs(name, query, key, value);
  at::Tensor q = as4d(query), k = as4d(key), v = as4d(value);
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2);
  at::Tensor g = as4d(grad_out), o = as4d(out);
  TORCH_CHECK(g.sizes() == o.sizes() && g.scalar_type() == q.scalar_type(), name,
              ": grad_out must match out's shape and dtype");
  at::Tensor mask = mask4d(attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt,
                           B, H, L, S, name);
  double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
  int64_t seed = 0, offset = 0;
  if (dropout_p > 0) {
    TORCH_CHECK(philox_seed.defined() && philox_offset.defined() && philox_seed.is_cpu(), name,
                ": dropout needs the forward pass's philox_seed and philox_offset");
    seed = philox_seed.item<int64_t>();
    offset = philox_offset.item<int64_t>();
  }
  at::Tensor stats = at::empty({B, H, L, 2}, q.options().dtype(at::kFloat));
  AttentionOp(NRT_OP_SDPA_BACKWARD_STATS, 1, sc, is_causal, dropout_p, seed, offset)
      .operand(stats).operand(g).operand(o).operand(logsumexp.dim() == 2 ? logsumexp.unsqueeze(0) : logsumexp)
      .launch(query);
  at::Tensor grad_q, grad_k, grad_v, grad_bias;
  bool want_bias = grad_input_mask[3] && attn_bias.defined();
  // The key/value pass completes grad_q as well (without a mask: with one,
  // the op would exceed NRT_MAX_OPERANDS).
  bool q_in_kv = grad_input_mask[0] && !mask.defined();
  if (grad_input_mask[1] || grad_input_mask[2] || q_in_kv) {
    grad_k = at::empty_like(key);
    grad_v = at::empty_like(value);
    if (q_in_kv) grad_q = at::empty_like(query);
    AttentionOp op(NRT_OP_SDPA_BACKWARD_KV, q_in_kv ? 3 : 2, sc, is_causal, dropout_p, seed, offset);
    op.operand(as4d(grad_k)).operand(as4d(grad_v));
    if (q_in_kv) op.operand(as4d(grad_q));
    op.operand(g).operand(q).operand(k).operand(v).operand(stats);
    if (mask.defined()) op.operand(mask);
    op.launch(query);
  }
  if ((grad_input_mask[0] && !q_in_kv) || want_bias) {
    grad_q = at::empty_like(query);
    at::Tensor grad_scores;
    if (want_bias) grad_scores = at::empty({B, H, L, S}, q.options().dtype(at::kFloat));
    AttentionOp op(NRT_OP_SDPA_BACKWARD_Q, want_bias ? 2 : 1, sc, is_causal, dropout_p, seed, offset);
    op.operand(as4d(grad_q));
    if (want_bias) op.operand(grad_scores);
    op.operand(g).operand(q).operand(k).operand(v).operand(stats);
    if (mask.defined()) op.operand(mask);
    op.launch(query);
    if (want_bias) grad_bias = grad_scores.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  if (!grad_input_mask[0]) grad_q = at::Tensor();
  if (!grad_input_mask[1]) grad_k = at::Tensor();
  if (!grad_input_mask[2]) grad_v = at::Tensor();
  return {grad_q, grad_k, grad_v, grad_bias};
}

}  // namespace
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::fused_sdp_choice)
}  // namespace at::native

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", torchneuron::sdpa_forward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", torchneuron::sdpa_backward);
}
