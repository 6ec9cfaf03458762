// Nested tensors on the neuron device beyond the transformer fast path:
// moving them between devices, arithmetic, activations, softmax, linear and
// matmul, layer norm, views. PyTorch's own nested kernels (NestedTensorCPU
// and NestedTensorCUDA share most of them) are device generic: they map the
// dense op over the nested tensor's buffer or its entries, so under
// NestedTensorPrivateUse1 they run neuron's native kernels. Registered here
// are those, each counted as "aten::<op>(nested)"; layer norm (forward and
// backward) is neuron's own, since ATen's calls the CPU or CUDA layer-norm
// kernel by device type, and so is sum over the last dim (ATen's is a loop
// over host memory).
// What is not listed keeps PyTorch's "Could not run ... NestedTensorneuron"
// error (docs/conformance.md, "Nested tensors on neuron").
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorMath.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <string>
#include <tuple>
#include <utility>

#include "op_tracking.h"

namespace torchneuron {
namespace {

// fn, counted as the native op it serves each time it runs.
template <auto Fn>
struct Counted;
template <class R, class... A, R (*Fn)(A...)>
struct Counted<Fn> {
  static inline std::atomic<int64_t>* counter = nullptr;
  static R call(A... args) {
    counter->fetch_add(1, std::memory_order_relaxed);
    native_op_total.fetch_add(1, std::memory_order_relaxed);
    return Fn(std::forward<A>(args)...);
  }
};

template <auto Fn>
void counted(torch::Library& m, const char* schema, const char* suffix = "(nested)") {
  if (!Counted<Fn>::counter)
    Counted<Fn>::counter = native_op_counter(("aten::" + std::string(schema) + suffix).c_str());
  m.impl(schema, TORCH_FN(Counted<Fn>::call));
}

// Layer norm over the last dims of every entry: the entries, laid out one
// after another in a contiguous buffer, are rows of the normalised size, so
// it is the dense op on the buffer seen as [rows, normalised size]. The
// CPU's checks, in its order and words.
std::tuple<at::Tensor, at::Tensor, at::Tensor> nested_layer_norm(const at::Tensor& input,
                                                                 at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight_in,
                                                                 const std::optional<at::Tensor>& bias_in, double eps) {
  TORCH_CHECK_VALUE(weight_in.has_value() && weight_in->defined() && bias_in.has_value() && bias_in->defined(),
                    "NestedTensor layer_norm requires weight and bias");
  const at::Tensor &weight = *weight_in, &bias = *bias_in;
  TORCH_CHECK(!weight.is_nested(), "NestedTensor weight not supported for layer_norm");
  TORCH_CHECK(!bias.is_nested(), "NestedTensor bias not supported for layer_norm");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(k >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., ",
              "containing at least one element, but got normalized_shape = ", normalized_shape);
  TORCH_CHECK(weight.sizes().equals(normalized_shape), "Expected weight to be of same shape as normalized_shape, ",
              "but got weight of shape ", weight.sizes(), " and normalized_shape = ", normalized_shape);
  TORCH_CHECK(bias.sizes().equals(normalized_shape), "Expected bias to be of same shape as normalized_shape, ",
              "but got bias of shape ", bias.sizes(), " and normalized_shape = ", normalized_shape);
  const at::Tensor x = input.contiguous();
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(x);
  int64_t row = 1;
  for (int64_t i = 0; i < k; i++) {
    const std::optional<int64_t> size = impl->opt_size(impl->dim() - k + i);
    TORCH_CHECK(size.has_value(), "normalized_shape extends into irregular dimensions for the nested tensor");
    TORCH_CHECK(*size == normalized_shape[i], "The shape at dimension ", i,
                "of normalized_shape doesn't match the input");
    row *= normalized_shape[i];
  }
  const at::Tensor buffer = impl->get_buffer();
  auto [out, mean, rstd] =
      at::native_layer_norm(buffer.view({-1, row}), {row}, weight.reshape({row}), bias.reshape({row}), eps);
  return {at::detail::make_tensor<at::native::NestedTensorImpl>(out.view({-1}), impl->get_nested_sizes().clone()),
          mean, rstd};
}

// Its backward, over the same [rows, normalised size] view of the buffers,
// after ATen's own checks of the nested input (the CPU's words). dgamma and
// dbeta come back in the weight's shape; an input gradient left out is a
// nested tensor of zeros, as the CPU returns it.
std::tuple<at::Tensor, at::Tensor, at::Tensor> nested_layer_norm_backward(
    const at::Tensor& grad, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight_in, const std::optional<at::Tensor>& bias_in,
    std::array<bool, 3> mask) {
  const at::Tensor x = input.contiguous(), g = grad.contiguous();
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(x);
  const at::Tensor weight = weight_in.value_or(at::Tensor()), bias = bias_in.value_or(at::Tensor());
  const int64_t row = at::native::_check_nested_layer_norm_inputs(*impl, normalized_shape, weight, bias).second;
  const at::Tensor buffer = impl->get_buffer().view({-1, row});
  const at::Tensor grad_buffer = at::native::get_nested_tensor_impl(g)->get_buffer().view({-1, row});
  auto flat = [&](const at::Tensor& t) {
    return t.defined() ? std::optional<at::Tensor>(t.reshape({row})) : std::nullopt;
  };
  auto [dx, dw, db] =
      at::native_layer_norm_backward(grad_buffer, buffer, {row}, mean, rstd, flat(weight), flat(bias), mask);
  if (!mask[0]) dx = at::zeros_like(buffer);
  if (dw.defined()) dw = dw.view(weight.sizes());
  if (db.defined()) db = db.view(bias.sizes());
  return {at::detail::make_tensor<at::native::NestedTensorImpl>(dx.reshape({-1}), impl->get_nested_sizes().clone()),
          dw, db};
}

// The dtypes the CPU's nested sum dispatches over (all but bool, complex and
// the wide unsigned ones).
bool nested_sum_dtype(at::ScalarType t) {
  switch (t) {
    case at::kByte: case at::kChar: case at::kShort: case at::kInt: case at::kLong:
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
      return true;
    default:
      return false;
  }
}

// sum over the last dim, kept, in self's dtype: the CPU's checks in its
// order and words, then the dense sum over the buffer's rows (one op when
// every entry has the same last size, one per entry otherwise).
at::Tensor nested_sum_dim(const at::Tensor& self, at::OptionalIntArrayRef opt_dims, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  const at::IntArrayRef dims = opt_dims.value_or(at::IntArrayRef{});
  TORCH_CHECK(dims.size() == 1, "NestedTensor only allows reduction of a single dimension for now.");
  const int64_t dim = at::maybe_wrap_dim(dims[0], self.dim());
  TORCH_CHECK(dim == self.dim() - 1, "NestedTensor can only be reduced across the last dimension for now ",
              "got dimension ", dim, " instead.");
  TORCH_CHECK(keepdim, "NestedTensor always requires keepdim=True for now.");
  TORCH_CHECK(!dtype, "NestedTensor does not support dtype argument for now.");
  at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(self);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl),
              "NestedTensor does not support reductions when the input is noncontiguous for now.");
  if (impl->size(0) == 0) return self;
  const at::ScalarType type = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(nested_sum_dtype(type), "\"nested_sum_dim_cpu\" not implemented for '", type, "'");
  at::Tensor sizes = impl->get_nested_sizes().clone();
  sizes.select(1, -1).fill_(1);
  const at::Tensor buffer = impl->get_buffer();
  at::Tensor out;
  if (const std::optional<int64_t> last = impl->opt_size(-1); last && *last > 0) {
    out = buffer.view({-1, *last}).sum(-1, false, type);
  } else if (last) {
    out = at::zeros({sizes.prod(1).sum().item<int64_t>()}, buffer.options());
  } else {
    std::vector<at::Tensor> rows;
    for (const at::Tensor& entry : self.unbind()) rows.push_back(entry.sum(-1, true, type).reshape({-1}));
    out = at::cat(rows);
  }
  return at::detail::make_tensor<at::native::NestedTensorImpl>(out, sizes);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  using namespace at::native;
  // Devices, copies and fills.
  counted<_to_copy_nested>(m, "_to_copy");
  counted<clone_nested>(m, "clone");
  counted<copy_nested_>(m, "copy_");
  counted<empty_like_nested>(m, "empty_like");
  counted<zero_nested_>(m, "zero_");
  counted<static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(fill_nested_)>(m, "fill_.Scalar");
  counted<static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(fill_nested_)>(m, "fill_.Tensor");
  // Arithmetic, nested with nested or with a scalar or dense tensor.
  counted<NestedTensor_add_Tensor>(m, "add.Tensor");
  counted<NestedTensor_add__Tensor>(m, "add_.Tensor");
  counted<NestedTensor_sub_Tensor>(m, "sub.Tensor");
  counted<NestedTensor_mul_Tensor>(m, "mul.Tensor");
  counted<NestedTensor_mul__Tensor>(m, "mul_.Tensor");
  counted<NestedTensor_mul_Scalar>(m, "mul.Scalar");
  counted<NestedTensor_mul__Scalar>(m, "mul_.Scalar");
  counted<NestedTensor_div_Tensor>(m, "div.Tensor");
  counted<NestedTensor_div_Scalar>(m, "div.Scalar");
  counted<NestedTensor_masked_fill>(m, "masked_fill.Scalar");
  counted<NestedTensor_where>(m, "where.self");
  counted<NestedTensor_where_out>(m, "where.self_out");
  counted<NestedTensor_all>(m, "all.dim");
  counted<eq_scalar_nested>(m, "eq.Scalar");
  counted<eq_tensor_nested>(m, "eq.Tensor");
  counted<ge_scalar_nested>(m, "ge.Scalar");
  counted<gt_scalar_nested>(m, "gt.Scalar");
  // Unary ops and activations over the buffer.
  counted<NestedTensor_relu>(m, "relu");
  counted<NestedTensor_relu_>(m, "relu_");
  counted<NestedTensor_gelu>(m, "gelu");
  counted<NestedTensor_gelu_>(m, "gelu_");
  counted<NestedTensor_silu>(m, "silu");
  counted<NestedTensor_silu_>(m, "silu_");
  counted<NestedTensor_tanh>(m, "tanh");
  counted<NestedTensor_tanh_>(m, "tanh_");
  counted<NestedTensor_abs>(m, "abs");
  counted<NestedTensor_abs_>(m, "abs_");
  counted<NestedTensor_neg>(m, "neg");
  counted<NestedTensor_neg_>(m, "neg_");
  counted<NestedTensor_sgn>(m, "sgn");
  counted<NestedTensor_sgn_>(m, "sgn_");
  counted<NestedTensor_sin>(m, "sin");
  counted<NestedTensor_cos>(m, "cos");
  counted<NestedTensor_sqrt>(m, "sqrt");
  counted<NestedTensor_logical_not>(m, "logical_not");
  counted<NestedTensor_logical_not_>(m, "logical_not_");
  counted<NestedTensor_isnan>(m, "isnan");
  counted<NestedTensor_isinf>(m, "isinf");
  counted<NestedTensor_isposinf>(m, "isposinf");
  counted<NestedTensor_isneginf>(m, "isneginf");
  // Softmax, products, layer norm (per entry or over the buffer).
  counted<softmax_nested>(m, "_softmax");
  counted<nested_softmax_backward>(m, "_softmax_backward_data");
  counted<nested_linear>(m, "linear");
  counted<matmul_nested>(m, "matmul");
  counted<bmm_nested>(m, "bmm");
  counted<nested_layer_norm>(m, "native_layer_norm");
  counted<nested_layer_norm_backward>(m, "native_layer_norm_backward");
  counted<_safe_softmax>(m, "_safe_softmax");
  counted<nested_sum_dim>(m, "sum.dim_IntList");
  // Gradients, dropout, embedding.
  counted<nested_linear_backward>(m, "linear_backward");
  counted<matmul_backward_nested>(m, "matmul_backward");
  counted<gelu_backwards_nested>(m, "gelu_backward");
  counted<silu_backward_nested>(m, "silu_backward");
  counted<threshold_backwards_nested>(m, "threshold_backward");
  counted<native_dropout_nested>(m, "native_dropout");
  counted<normal_nested_>(m, "normal_");
  counted<NestedTensor_embedding>(m, "embedding");
  // Views and metadata.
  counted<transpose_nested>(m, "transpose.int");
  counted<view_nested>(m, "view");
  counted<select_nested>(m, "select.int");
  counted<_nested_select_backward_symint>(m, "_nested_select_backward");
  counted<narrow_nested_symint>(m, "narrow");
  counted<unsqueeze_nested>(m, "unsqueeze");
  counted<squeeze_nested>(m, "squeeze");
  counted<static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(squeeze_dim_nested)>(m, "squeeze.dim");
  counted<static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(squeeze_dim_nested)>(m, "squeeze.dims");
  counted<chunk_nested_tensor>(m, "chunk");
  counted<cat_nested>(m, "cat");
  counted<split_with_sizes_nested>(m, "split_with_sizes");
  counted<alias_nested>(m, "alias");
  counted<detach>(m, "detach");
  counted<values_nested>(m, "values");
  counted<NestedTensor_unbind>(m, "unbind.int");
  counted<_nested_tensor_size>(m, "_nested_tensor_size");
  counted<_nested_tensor_strides>(m, "_nested_tensor_strides");
  counted<_nested_tensor_storage_offsets>(m, "_nested_tensor_storage_offsets");
  counted<nested_is_same_size>(m, "is_same_size");
  // to_padded_tensor's backward: the padded gradient back to the example's entries
  counted<NestedTensor_from_padded_and_nested_example>(m, "_nested_from_padded_and_nested_example");
}

// A dense padded tensor (on neuron) to a nested one of the given sizes:
// ATen's generic kernel (masks padded to the largest entry, a masked_select),
// which the CPU registers too.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  counted<at::native::nested_from_padded_generic>(m, "_nested_from_padded", "");
}

}  // namespace torchneuron
