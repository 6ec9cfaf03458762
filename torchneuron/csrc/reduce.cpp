// Reductions and scans: ATen calls mapped to the runtime's reduction ops.
//
// Shapes, result dtypes and argument errors come from PyTorch itself.
// Structured ops run their own meta function (at::meta::structured_*) on an
// adapter that allocates neuron outputs, or checks and resizes out= and
// in-place tensors, as PyTorch's generated code does; the others follow
// their CPU implementations with ATen's reduction helpers. The runtime then
// gets one op: the input and every output viewed in keepdim form (a
// dimension is reduced where the output has size 1 and the input does not).
// Like PyTorch, an input is converted to the result dtype first unless the
// runtime can read it exactly as it is (integers into int64, float16 and
// bfloat16 into float32, float32 into float64).
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/all_meta.h>
#include <ATen/ops/amax_meta.h>
#include <ATen/ops/amin_meta.h>
#include <ATen/ops/aminmax_meta.h>
#include <ATen/ops/any_meta.h>
#include <ATen/ops/argmax_meta.h>
#include <ATen/ops/argmin_meta.h>
#include <ATen/ops/cumprod_meta.h>
#include <ATen/ops/cumsum_meta.h>
#include <ATen/ops/hash_tensor_meta.h>
#include <ATen/ops/linalg_vector_norm_meta.h>
#include <ATen/ops/max_meta.h>
#include <ATen/ops/mean_meta.h>
#include <ATen/ops/min_meta.h>
#include <ATen/ops/norm_meta.h>
#include <ATen/ops/prod_meta.h>
#include <ATen/ops/sum_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <limits>

#include "op_tracking.h"
#include "complex_ops.h"
#include "complex_out.h"
#include "storage_fallback.h"
#include "structured_outputs.h"
#include "tensor_view.h"
#include "wide_unsigned.h"
#include "runtime_limits.h"
#include "op_scalars.h"

namespace torchneuron {
namespace {

using at::native::DimMask;
using c10::OptionalIntArrayRef;

// ---- launching -------------------------------------------------------------

// The input PyTorch would reduce: converted to the result dtype unless the
// runtime reads it exactly as it is.
at::Tensor input_for(const at::Tensor& self, at::ScalarType result) {
  at::ScalarType in = self.scalar_type();
  bool exact = in == result ||
               (at::isIntegralType(in, /*includeBool=*/true) && result == at::kLong) ||
               ((in == at::kHalf || in == at::kBFloat16) && (result == at::kFloat || result == at::kDouble)) ||
               (in == at::kFloat && result == at::kDouble);
  return exact ? self : self.to(result);
}

// out viewed with in's rank: every reduced dim (in mask) has size 1.
nrt_tensor_view keepdim_view(const at::Tensor& out, const at::Tensor& in, const DimMask& mask,
                             const char* name) {
  nrt_tensor_view v = to_view(out, name);
  if (out.dim() == in.dim()) return v;
  v.ndim = static_cast<int32_t>(in.dim());
  int64_t k = 0;
  for (int64_t d = 0; d < in.dim(); d++) {
    if (mask[d]) {
      v.shape[d] = 1;
      v.strides[d] = 0;
    } else {
      v.shape[d] = out.size(k);
      v.strides[d] = out.stride(k);
      k++;
    }
  }
  return v;
}

// Launches reduction `code` of `in` over the dims in mask into outs (with or
// without the reduced dims). An output that shares memory with the input is
// computed in a temporary and copied.
void launch_reduction(nrt_op_code code, const at::Tensor& in, const DimMask& mask,
                      std::initializer_list<at::Tensor> outs,
                      std::initializer_list<nrt_scalar> scalars = {}) {
  const char* name = nrt_op_name(code);
  constexpr size_t kMaxOutputs = 2;
  TORCH_INTERNAL_ASSERT(outs.size() <= kMaxOutputs && scalars.size() <= NRT_MAX_SCALARS);
  std::array<at::Tensor, kMaxOutputs> results;
  bool any_output = false;
  size_t k = 0;
  for (const at::Tensor& out : outs) {
    TORCH_CHECK(out.device() == in.device(), name, ": expected all tensors on ", in.device(),
                ", but an output is on ", out.device());
    at::assert_no_internal_overlap(out);
    if (k > 0) at::assert_no_overlap(out, *outs.begin());
    bool shares_input = at::get_overlap_status(out, in) != at::MemOverlapStatus::No;
    results[k++] = shares_input ? at::empty_like(out) : out;
    any_output |= out.numel() > 0;
  }
  if (!any_output) return;
  nrt_op op{};
  op.code = code;
  op.num_outputs = static_cast<int32_t>(outs.size());
  op.num_operands = op.num_outputs + 1;
  for (k = 0; k < outs.size(); k++) op.operands[k] = keepdim_view(results[k], in, mask, name);
  op.operands[k] = to_view(in, name);
  op.compute_dtype = op.operands[k].dtype;
  for (const nrt_scalar& s : scalars) op.scalars[op.num_scalars++] = s;
  launch(in.device().index(), op);
  k = 0;
  for (const at::Tensor& out : outs) {
    if (!results[k].is_same(out)) const_cast<at::Tensor&>(out).copy_(results[k]);
    k++;
  }
}

DimMask every_dim() { return DimMask().flip(); }

DimMask dims_mask(OptionalIntArrayRef dims, int64_t ndim, bool allow_empty = false) {
  return at::native::make_dim_mask(dims, ndim, allow_empty);
}

DimMask one_dim(int64_t dim, int64_t ndim) {
  DimMask mask;
  mask.set(static_cast<size_t>(at::maybe_wrap_dim(dim, ndim)));
  return mask;
}

// A non-structured reduction's result: a new tensor, or out checked and
// resized.
at::Tensor reduction_result(const at::Tensor& self, const DimMask& mask, bool keepdim,
                            at::ScalarType dtype, const at::Tensor* out) {
  auto shape = at::native::shape_from_dim_mask(self, mask, keepdim);
  if (!out) return at::empty(shape, self.options().dtype(dtype));
  TORCH_CHECK(out->device() == self.device(), "Expected out tensor to have device ", self.device(),
              ", but got ", out->device(), " instead");
  at::native::resize_output(*out, shape);
  return *out;
}

// ---- sum, nansum, trace, mean, prod ---------------------------------------

at::Tensor& sum_into(at::Tensor& result, const at::Tensor& self, const DimMask& mask) {
  launch_reduction(NRT_OP_SUM, input_for(self, result.scalar_type()), mask, {result});
  return result;
}

// A complex sum or mean is that of the real and imaginary planes: the real
// reduction over view_as_real (the same dims, named non-negative so that the
// trailing (real, imaginary) dim stays out of them; no dims: every one). A
// 0-d tensor reduced over everything is itself.
at::Tensor complex_reduce(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim, bool mean) {
  // a 0-d tensor as one element of a 1-d one: its planes' dim 0 is the pair
  if (self.dim() == 0) {
    if (dim) for (int64_t d : *dim) (void)at::maybe_wrap_dim(d, int64_t{0});  // the CPU's IndexError
    return complex_reduce(self.reshape({1}), at::IntArrayRef{0}, false, mean);
  }
  at::Tensor planes = at::view_as_real(self.is_conj() ? self.resolve_conj() : self);
  std::vector<int64_t> dims;
  if (dim && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(at::maybe_wrap_dim(d, self.dim()));
  } else {
    if (self.dim() == 0) return at::view_as_complex(planes.clone());
    for (int64_t d = 0; d < self.dim(); d++) dims.push_back(d);
  }
  if (!mean) return at::view_as_complex(at::sum(planes, dims, keepdim));
  // The CPU divides the complex sum by the count as complex numbers,
  // (a + bi) / (n + 0i) = (a + b*0) / n + (b - a*0) / n i (c10::complex,
  // NumPy's division): an infinite or NaN part makes the other part NaN.
  at::Tensor m = at::mean(planes, dims, keepdim);
  at::Tensor re = m.select(-1, 0), im = m.select(-1, 1);
  return at::view_as_complex(at::stack({re + im.mul(0), im - re.mul(0)}, -1));
}

at::Tensor sum_dim(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::sum.dim_IntList");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_sum_dim_IntList, 1> out;
  out.meta(self, dim, keepdim, dtype);
  return sum_into(out[0], self, dims_mask(dim, self.dim()));
}

at::Tensor& sum_dim_out(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype, at::Tensor& result) {
  NEURON_TRACK_OP("aten::sum.IntList_out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_sum_dim_IntList, 1> out({result});
  out.meta(self, dim, keepdim, dtype);
  sum_into(out[0], self, dims_mask(dim, self.dim()));
  return result;
}

at::Tensor sum_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::sum");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_sum_dim_IntList, 1> out;
  out.meta(self, std::nullopt, false, dtype);
  return sum_into(out[0], self, every_dim());
}

// nansum: integers have no NaN and take sum's path, as on the CPU; floating
// inputs one NANSUM pass (NaN read as zero).
at::Tensor& nansum_into(at::Tensor& result, const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  DimMask mask = dims_mask(dim, self.dim());
  at::native::resize_output(result, at::native::shape_from_dim_mask(self, mask, keepdim));
  launch_reduction(NRT_OP_NANSUM, input_for(self, result.scalar_type()), mask, {result});
  return result;
}

at::Tensor& nansum_out(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& result) {
  NEURON_TRACK_OP("aten::nansum.out");
  c10::DeviceGuard guard(self.device());
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return at::sum_out(result, self, dim, keepdim, dtype);
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  TORCH_CHECK(!dtype || *dtype == result.scalar_type(), "Expected the dtype for input and out to match, but got ",
              *dtype, " for input's dtype and ", result.scalar_type(), " for out's dtype.");
  TORCH_CHECK(result.device() == self.device(), "Expected out tensor to have device ", self.device(), ", but got ",
              result.device(), " instead");
  return nansum_into(result, self, dim, keepdim);
}

at::Tensor nansum(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::nansum");
  c10::DeviceGuard guard(self.device());
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return at::sum(self, dim, keepdim, dtype);
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  at::Tensor result = at::empty({0}, self.options().dtype(dtype.value_or(self.scalar_type())));
  return nansum_into(result, self, dim, keepdim);
}

// hash_tensor (mode 0, the only one): every element widened to its 64-bit
// float or integer form, and those bits XORed over the reduced dims. The
// XOR is a tree of native bitwise_xor passes over halves of the reduced
// length (log2 n launches); any order gives the same bits.
at::Tensor xor_rows(at::Tensor bits) {
  int64_t n = bits.size(-1);
  if (n == 0) return at::zeros(bits.sizes().slice(0, bits.dim() - 1), bits.options());
  while (n > 1) {
    const int64_t half = n / 2;
    at::Tensor folded = bits.narrow(-1, 0, half).bitwise_xor(bits.narrow(-1, half, half));
    if (n % 2) folded.narrow(-1, 0, 1).bitwise_xor_(bits.narrow(-1, n - 1, 1));
    bits = folded;
    n = half;
  }
  return bits.select(-1, 0);
}

std::optional<at::Tensor> hash_tensor_native(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode,
                                             at::Tensor* out) {
  if (is_storage_dtype(self.scalar_type())) return std::nullopt;  // the CPU's error, or its result
  NEURON_TRACK_OP(out ? "aten::hash_tensor.out" : "aten::hash_tensor");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_hash_tensor, 1> result(out ? std::array<at::Tensor, 1>{*out}
                                                          : std::array<at::Tensor, 1>{});
  result.meta(self, dim, keepdim, mode);
  TORCH_CHECK(mode == 0, "Unknown hash_tensor mode: ", mode);
  const bool floating = at::isFloatingType(self.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(floating || at::isIntegralType(self.scalar_type(), /*includeBool=*/true),
                              "\"xor_sum_cpu\" not implemented for '", at::toString(self.scalar_type()), "'");
  at::Tensor bits = self.to(floating ? at::kDouble : at::kLong);
  if (floating) bits = bits.view(at::kLong);
  const int64_t ndim = self.dim();
  DimMask mask = dims_mask(dim, ndim);
  std::vector<int64_t> kept, reduced;
  for (int64_t d = 0; d < ndim; d++) (mask[d] ? reduced : kept).push_back(d);
  std::vector<int64_t> order = kept, kept_sizes;
  order.insert(order.end(), reduced.begin(), reduced.end());
  int64_t length = 1;
  for (int64_t d : kept) kept_sizes.push_back(self.size(d));
  for (int64_t d : reduced) length *= self.size(d);
  kept_sizes.push_back(length);
  at::Tensor h = xor_rows(bits.permute(order).reshape(kept_sizes));
  at::Tensor& target = result[0];
  if (target.numel() > 0) target.view(at::kLong).copy_(h.reshape(target.sizes()));
  return target;
}

// The registrations' native kernels: reached only when hash_tensor_native
// declined, i.e. for a storage dtype, which the fallback takes first.
at::Tensor hash_tensor_checked(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode,
                               at::Tensor* out) {
  std::optional<at::Tensor> r = hash_tensor_native(self, dim, keepdim, mode, out);
  TORCH_CHECK(r, "hash_tensor: dtype ", self.scalar_type(), " is not supported on the neuron device");
  return *r;
}
at::Tensor hash_tensor_plain(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
  return hash_tensor_checked(self, dim, keepdim, mode, nullptr);
}
at::Tensor& hash_tensor_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, at::Tensor& out) {
  hash_tensor_checked(self, dim, keepdim, mode, &out);
  return out;
}

// trace: one SUM pass over the diagonal view; integers summed into int64,
// floating types in their own dtype, as the CPU's result dtypes.
at::Tensor trace(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::trace");
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"trace\" not implemented for 'Bool'");
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "trace: complex inputs are not supported on neuron");
  c10::DeviceGuard guard(self.device());
  at::ScalarType dtype = at::isIntegralType(self.scalar_type(), false) ? at::kLong : self.scalar_type();
  at::Tensor result = at::empty({}, self.options().dtype(dtype));
  if (self.numel() == 0) return result.zero_();
  return sum_into(result, self.diagonal(), every_dim());
}

// Mean of float16/bfloat16 accumulates in float (here float64) and rounds
// once, as PyTorch's CPU mean does.
at::Tensor& mean_into(at::Tensor& result, const at::Tensor& self, const DimMask& mask) {
  launch_reduction(NRT_OP_MEAN, input_for(self, result.scalar_type()), mask, {result});
  return result;
}

at::Tensor mean_dim(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::mean.dim");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_mean_dim, 1> out;
  out.meta(self, dim, keepdim, dtype);
  return mean_into(out[0], self, dims_mask(dim, self.dim()));
}

at::Tensor& mean_dim_out(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype, at::Tensor& result) {
  NEURON_TRACK_OP("aten::mean.out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_mean_dim, 1> out({result});
  out.meta(self, dim, keepdim, dtype);
  mean_into(out[0], self, dims_mask(dim, self.dim()));
  return result;
}

at::Tensor mean_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::mean");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_mean_dim, 1> out;
  out.meta(self, at::IntArrayRef{}, false, dtype);
  return mean_into(out[0], self, every_dim());
}

at::Tensor& prod_into(at::Tensor& result, const at::Tensor& self, const DimMask& mask) {
  launch_reduction(NRT_OP_PROD, input_for(self, result.scalar_type()), mask, {result});
  return result;
}

at::Tensor prod_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::prod");
  c10::DeviceGuard guard(self.device());
  at::Tensor result = at::empty({}, self.options().dtype(
                                        at::native::get_dtype_from_self(self, dtype, true)));
  return prod_into(result, self, every_dim());
}

at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::prod.dim_int");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_prod_dim_int, 1> out;
  out.meta(self, dim, keepdim, dtype);
  return prod_into(out[0], self, one_dim(dim, self.dim()));
}

at::Tensor& prod_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                         std::optional<at::ScalarType> dtype, at::Tensor& result) {
  NEURON_TRACK_OP("aten::prod.int_out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_prod_dim_int, 1> out({result});
  out.meta(self, dim, keepdim, dtype);
  prod_into(out[0], self, one_dim(dim, self.dim()));
  return result;
}

// ---- extremes --------------------------------------------------------------

template <class Meta>
at::Tensor extreme(nrt_op_code code, const at::Tensor& self, at::IntArrayRef dim, bool keepdim,
                   const at::Tensor* given) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out({given ? *given : at::Tensor()});
  out.meta(self, dim, keepdim);
  launch_reduction(code, self, dims_mask(dim, self.dim()), {out[0]});
  return out[0];
}

at::Tensor amax(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  NEURON_TRACK_OP("aten::amax");
  return extreme<at::meta::structured_amax>(NRT_OP_AMAX, self, dim, keepdim, nullptr);
}

at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& result) {
  NEURON_TRACK_OP("aten::amax.out");
  extreme<at::meta::structured_amax>(NRT_OP_AMAX, self, dim, keepdim, &result);
  return result;
}

at::Tensor amin(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  NEURON_TRACK_OP("aten::amin");
  return extreme<at::meta::structured_amin>(NRT_OP_AMIN, self, dim, keepdim, nullptr);
}

at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& result) {
  NEURON_TRACK_OP("aten::amin.out");
  extreme<at::meta::structured_amin>(NRT_OP_AMIN, self, dim, keepdim, &result);
  return result;
}

// aminmax: both extremes in one AMINMAX pass (PyTorch's meta function checks
// the arguments and states the outputs).
std::tuple<at::Tensor, at::Tensor> aminmax_into(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                const at::Tensor* min, const at::Tensor* max) {
  TORCH_CHECK(!self.is_complex(), "aminmax(): does not support complex input");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_aminmax, 2> out({min ? *min : at::Tensor(), max ? *max : at::Tensor()});
  out.meta(self, dim, keepdim);
  launch_reduction(NRT_OP_AMINMAX, self, dim ? one_dim(*dim, self.dim()) : every_dim(), {out[0], out[1]});
  return {out[0], out[1]};
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  NEURON_TRACK_OP("aten::aminmax");
  return aminmax_into(self, dim, keepdim, nullptr, nullptr);
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  NEURON_TRACK_OP("aten::aminmax.out");
  aminmax_into(self, dim, keepdim, &min, &max);
  return {min, max};
}

// max() / min() over everything (no identity: empty input is an error).
at::Tensor& extreme_all_into(nrt_op_code code, const char* name, const at::Tensor& self,
                             at::Tensor& out) {
  TORCH_CHECK(self.numel() > 0, name,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  c10::DeviceGuard guard(self.device());
  if (out.scalar_type() == self.scalar_type()) {
    launch_reduction(code, self, every_dim(), {out});
  } else {
    at::Tensor value = at::empty({}, self.options());
    launch_reduction(code, self, every_dim(), {value});
    out.copy_(value);
  }
  return out;
}

at::Tensor max_all(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::max");
  at::Tensor out = at::empty({}, self.options());
  return extreme_all_into(NRT_OP_AMAX, "max", self, out);
}

at::Tensor min_all(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::min");
  at::Tensor out = at::empty({}, self.options());
  return extreme_all_into(NRT_OP_AMIN, "min", self, out);
}

at::Tensor& extreme_all_out(nrt_op_code code, const char* name, const at::Tensor& self,
                            at::Tensor& out) {
  TORCH_CHECK(self.device() == out.device(), name, "(): expected out on ", self.device(),
              ", got ", out.device());
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), name, "(): the result type ",
              self.scalar_type(), " can't be cast to the out tensor's dtype ", out.scalar_type());
  at::native::resize_output(out, {});
  return extreme_all_into(code, name, self, out);
}

at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::max.unary_out");
  return extreme_all_out(NRT_OP_AMAX, "max", self, out);
}

at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::min.unary_out");
  return extreme_all_out(NRT_OP_AMIN, "min", self, out);
}

// max.dim / min.dim: values and the first index of the extreme.
template <class Meta>
std::tuple<at::Tensor, at::Tensor> extreme_dim(nrt_op_code code, const at::Tensor& self,
                                               int64_t dim, bool keepdim, const at::Tensor* values,
                                               const at::Tensor* indices) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 2> out({values ? *values : at::Tensor(), indices ? *indices : at::Tensor()});
  auto pre = out.meta(self, dim, keepdim);
  launch_reduction(code, self, one_dim(pre.dim, self.dim()), {out[0], out[1]});
  return {out[0], out[1]};
}

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  NEURON_TRACK_OP("aten::max.dim");
  return extreme_dim<at::meta::structured_max_dim>(NRT_OP_ARGMAX, self, dim, keepdim, nullptr,
                                                   nullptr);
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::max.dim_max");
  extreme_dim<at::meta::structured_max_dim>(NRT_OP_ARGMAX, self, dim, keepdim, &values, &indices);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  NEURON_TRACK_OP("aten::min.dim");
  return extreme_dim<at::meta::structured_min_dim>(NRT_OP_ARGMIN, self, dim, keepdim, nullptr,
                                                   nullptr);
}

std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::min.dim_min");
  extreme_dim<at::meta::structured_min_dim>(NRT_OP_ARGMIN, self, dim, keepdim, &values, &indices);
  return {values, indices};
}

template <class Meta>
at::Tensor arg_extreme(nrt_op_code code, const char* name, const at::Tensor& self,
                       std::optional<int64_t> dim, bool keepdim, const at::Tensor* given) {
  TORCH_CHECK(self.scalar_type() != at::kBool, name, "(): does not support bool input");
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out({given ? *given : at::Tensor()});
  out.meta(self, dim, keepdim);
  launch_reduction(code, self, dim ? one_dim(*dim, self.dim()) : every_dim(), {out[0]});
  return out[0];
}

at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  NEURON_TRACK_OP("aten::argmax");
  return arg_extreme<at::meta::structured_argmax>(NRT_OP_ARGMAX, "argmax", self, dim, keepdim,
                                                  nullptr);
}

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& result) {
  NEURON_TRACK_OP("aten::argmax.out");
  arg_extreme<at::meta::structured_argmax>(NRT_OP_ARGMAX, "argmax", self, dim, keepdim, &result);
  return result;
}

at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  NEURON_TRACK_OP("aten::argmin");
  return arg_extreme<at::meta::structured_argmin>(NRT_OP_ARGMIN, "argmin", self, dim, keepdim,
                                                  nullptr);
}

at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& result) {
  NEURON_TRACK_OP("aten::argmin.out");
  arg_extreme<at::meta::structured_argmin>(NRT_OP_ARGMIN, "argmin", self, dim, keepdim, &result);
  return result;
}

// ---- var / std ---------------------------------------------------------------

// var, std, var_mean, std_mean with a correction, into var (and mean).
void var_into(const char* fname, const at::Tensor& self, OptionalIntArrayRef dim,
              const std::optional<at::Scalar>& correction, bool keepdim, bool take_sqrt,
              at::Tensor& var, const at::Tensor* mean) {
  // the CPU's cast check first: a floating self never casts to an integral out=
  TORCH_CHECK(at::canCast(self.scalar_type(), var.scalar_type()), "result type ",
              self.scalar_type(), " can't be cast to the desired output type ", var.scalar_type());
  TORCH_CHECK(at::isFloatingType(var.scalar_type()), fname, ": result dtype ",
              var.scalar_type(), " is not a floating dtype");
  DimMask mask = dims_mask(dim, self.dim());
  double c = correction ? correction->toDouble() : 1.0;
  int64_t outputs = var.numel();
  int64_t reducing = outputs == 0 ? 0 : self.numel() / outputs;
  if (static_cast<double>(reducing) - c <= 0)
    TORCH_WARN(fname, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  at::Tensor in = input_for(self, var.scalar_type());
  if (mean)
    launch_reduction(NRT_OP_VAR, in, mask, {var, *mean}, {float_scalar(c), float_scalar(take_sqrt)});
  else
    launch_reduction(NRT_OP_VAR, in, mask, {var}, {float_scalar(c), float_scalar(take_sqrt)});
}

void check_var_input(const at::Tensor& self, const char* what) {
  TORCH_CHECK(self.layout() == at::kStrided, what, " only supports strided layout, got: ",
              self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), what,
              " only support floating point and complex dtypes");
}

at::Tensor var_or_std(const char* fname, const at::Tensor& self, OptionalIntArrayRef dim,
                      const std::optional<at::Scalar>& correction, bool keepdim, bool take_sqrt,
                      const at::Tensor* out) {
  check_var_input(self, "std and var");
  c10::DeviceGuard guard(self.device());
  DimMask mask = dims_mask(dim, self.dim());
  at::Tensor result = reduction_result(self, mask, keepdim, self.scalar_type(), out);
  var_into(fname, self, dim, correction, keepdim, take_sqrt, result, nullptr);
  return result;
}

at::Tensor var_correction(const at::Tensor& self, OptionalIntArrayRef dim,
                          const std::optional<at::Scalar>& correction, bool keepdim) {
  NEURON_TRACK_OP("aten::var.correction");
  return var_or_std("var", self, dim, correction, keepdim, false, nullptr);
}

at::Tensor& var_correction_out(const at::Tensor& self, OptionalIntArrayRef dim,
                               const std::optional<at::Scalar>& correction, bool keepdim,
                               at::Tensor& out) {
  NEURON_TRACK_OP("aten::var.correction_out");
  var_or_std("var", self, dim, correction, keepdim, false, &out);
  return out;
}

at::Tensor std_correction(const at::Tensor& self, OptionalIntArrayRef dim,
                          const std::optional<at::Scalar>& correction, bool keepdim) {
  NEURON_TRACK_OP("aten::std.correction");
  return var_or_std("std", self, dim, correction, keepdim, true, nullptr);
}

at::Tensor& std_correction_out(const at::Tensor& self, OptionalIntArrayRef dim,
                               const std::optional<at::Scalar>& correction, bool keepdim,
                               at::Tensor& out) {
  NEURON_TRACK_OP("aten::std.correction_out");
  var_or_std("std", self, dim, correction, keepdim, true, &out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> var_mean_of(const char* fname, const at::Tensor& self,
                                               OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>& correction,
                                               bool keepdim, bool take_sqrt) {
  check_var_input(self, fname);
  c10::DeviceGuard guard(self.device());
  DimMask mask = dims_mask(dim, self.dim());
  at::Tensor var = reduction_result(self, mask, keepdim, self.scalar_type(), nullptr);
  at::Tensor mean = reduction_result(self, mask, keepdim, self.scalar_type(), nullptr);
  var_into(fname, self, dim, correction, keepdim, take_sqrt, var, &mean);
  return {var, mean};
}

std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor& self,
                                                       OptionalIntArrayRef dim,
                                                       const std::optional<at::Scalar>& correction,
                                                       bool keepdim) {
  NEURON_TRACK_OP("aten::var_mean.correction");
  return var_mean_of("var_mean", self, dim, correction, keepdim, false);
}

std::tuple<at::Tensor, at::Tensor> std_mean_correction(const at::Tensor& self,
                                                       OptionalIntArrayRef dim,
                                                       const std::optional<at::Scalar>& correction,
                                                       bool keepdim) {
  NEURON_TRACK_OP("aten::std_mean.correction");
  return var_mean_of("std_mean", self, dim, correction, keepdim, true);
}

// ---- norms -------------------------------------------------------------------

void norm_into(at::Tensor& result, const at::Tensor& self, double ord, const DimMask& mask) {
  launch_reduction(NRT_OP_NORM, input_for(self, result.scalar_type()), mask, {result},
                   {float_scalar(ord)});
}

DimMask vector_norm_mask(OptionalIntArrayRef dim, int64_t ndim) {
  return dim && !dim->empty() ? dims_mask(dim, ndim) : every_dim();
}

at::Tensor linalg_vector_norm(const at::Tensor& self, const at::Scalar& ord,
                              OptionalIntArrayRef dim, bool keepdim,
                              std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::linalg_vector_norm");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_linalg_vector_norm, 1> out;
  out.meta(self, ord, dim, keepdim, dtype);
  norm_into(out[0], self, ord.toDouble(), vector_norm_mask(dim, self.dim()));
  return out[0];
}

at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const at::Scalar& ord,
                                   OptionalIntArrayRef dim, bool keepdim,
                                   std::optional<at::ScalarType> dtype, at::Tensor& result) {
  NEURON_TRACK_OP("aten::linalg_vector_norm.out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_linalg_vector_norm, 1> out({result});
  out.meta(self, ord, dim, keepdim, dtype);
  norm_into(out[0], self, ord.toDouble(), vector_norm_mask(dim, self.dim()));
  return result;
}

double norm_order(const std::optional<at::Scalar>& p) { return p ? p->toDouble() : 2.0; }

at::OptionalScalarRef scalar_ref(const std::optional<at::Scalar>& p) {
  return p ? at::OptionalScalarRef(&p.value()) : at::OptionalScalarRef();
}

at::Tensor norm_dim(const at::Tensor& self, const std::optional<at::Scalar>& p,
                    at::IntArrayRef dim, bool keepdim) {
  NEURON_TRACK_OP("aten::norm.ScalarOpt_dim");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_norm_ScalarOpt_dim, 1> out;
  out.meta(self, scalar_ref(p), dim, keepdim);
  norm_into(out[0], self, norm_order(p), dims_mask(dim, self.dim()));
  return out[0];
}

at::Tensor& norm_dim_out(const at::Tensor& self, const std::optional<at::Scalar>& p,
                         at::IntArrayRef dim, bool keepdim, at::Tensor& result) {
  NEURON_TRACK_OP("aten::norm.out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_norm_ScalarOpt_dim, 1> out({result});
  out.meta(self, scalar_ref(p), dim, keepdim);
  norm_into(out[0], self, norm_order(p), dims_mask(dim, self.dim()));
  return result;
}

at::Tensor norm_dim_dtype(const at::Tensor& self, const std::optional<at::Scalar>& p,
                          at::IntArrayRef dim, bool keepdim, at::ScalarType dtype) {
  NEURON_TRACK_OP("aten::norm.ScalarOpt_dim_dtype");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_norm_ScalarOpt_dim_dtype, 1> out;
  out.meta(self, scalar_ref(p), dim, keepdim, dtype);
  norm_into(out[0], self, norm_order(p), dims_mask(dim, self.dim()));
  return out[0];
}

at::Tensor& norm_dim_dtype_out(const at::Tensor& self, const std::optional<at::Scalar>& p,
                               at::IntArrayRef dim, bool keepdim, at::ScalarType dtype,
                               at::Tensor& result) {
  NEURON_TRACK_OP("aten::norm.dtype_out");
  c10::DeviceGuard guard(self.device());
  Outputs<at::meta::structured_norm_ScalarOpt_dim_dtype, 1> out({result});
  out.meta(self, scalar_ref(p), dim, keepdim, dtype);
  norm_into(out[0], self, norm_order(p), dims_mask(dim, self.dim()));
  return result;
}

// ---- logsumexp -----------------------------------------------------------------

at::Tensor& logsumexp_into(const at::Tensor& self, at::IntArrayRef dims, bool keepdim,
                           at::Tensor& result) {
  TORCH_CHECK(at::isFloatingType(result.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, but got: ",
              result.scalar_type());
  c10::DeviceGuard guard(self.device());
  DimMask mask = dims_mask(dims, self.dim());
  // PyTorch adds the keepdim maxima back to a result reduced without
  // keepdim; with dims=[] that broadcast fails, and so does the op.
  if (dims.empty() && self.dim() > 0 && self.numel() > 0 && !keepdim) {
    std::vector<int64_t> ones(static_cast<size_t>(self.dim()), 1);
    TORCH_CHECK(false, "output with shape [] doesn't match the broadcast shape ",
                at::IntArrayRef(ones));
  }
  at::Tensor in = self;
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true))
    in = self.to(c10::typeMetaToScalarType(c10::get_default_dtype()));
  at::native::resize_output(result, at::native::shape_from_dim_mask(self, mask, keepdim));
  launch_reduction(NRT_OP_LOGSUMEXP, input_for(in, result.scalar_type()), mask, {result});
  return result;
}

at::Tensor logsumexp(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  NEURON_TRACK_OP("aten::logsumexp");
  at::ScalarType dtype = at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                             ? c10::typeMetaToScalarType(c10::get_default_dtype())
                             : self.scalar_type();
  c10::DeviceGuard guard(self.device());
  auto shape = at::native::shape_from_dim_mask(self, dims_mask(dims, self.dim()), keepdim);
  at::Tensor result = at::empty(shape, self.options().dtype(dtype));
  return logsumexp_into(self, dims, keepdim, result);
}

at::Tensor& logsumexp_out(const at::Tensor& self, at::IntArrayRef dims, bool keepdim,
                          at::Tensor& result) {
  NEURON_TRACK_OP("aten::logsumexp.out");
  return logsumexp_into(self, dims, keepdim, result);
}

// ---- any, all, count_nonzero ---------------------------------------------------

template <class Meta, class... Args>
at::Tensor logical(nrt_op_code code, const at::Tensor& self, const DimMask& mask,
                   const at::Tensor* given, Args... args) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out({given ? *given : at::Tensor()});
  out.meta(self, args...);
  launch_reduction(code, self, mask, {out[0]});
  return out[0];
}

#define DEFINE_ANY_ALL(NAME, CODE)                                                              \
  at::Tensor NAME##_all(const at::Tensor& self) {                                               \
    NEURON_TRACK_OP("aten::" #NAME);                                                            \
    return logical<at::meta::structured_##NAME>(CODE, self, every_dim(), nullptr);               \
  }                                                                                             \
  at::Tensor& NAME##_all_out(const at::Tensor& self, at::Tensor& result) {                      \
    NEURON_TRACK_OP("aten::" #NAME ".all_out");                                                 \
    logical<at::meta::structured_##NAME>(CODE, self, every_dim(), &result);                      \
    return result;                                                                              \
  }                                                                                             \
  at::Tensor NAME##_dim(const at::Tensor& self, int64_t dim, bool keepdim) {                    \
    NEURON_TRACK_OP("aten::" #NAME ".dim");                                                     \
    return logical<at::meta::structured_##NAME##_dim>(CODE, self, one_dim(dim, self.dim()),     \
                                                      nullptr, dim, keepdim);                   \
  }                                                                                             \
  at::Tensor& NAME##_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,                 \
                             at::Tensor& result) {                                              \
    NEURON_TRACK_OP("aten::" #NAME ".out");                                                     \
    logical<at::meta::structured_##NAME##_dim>(CODE, self, one_dim(dim, self.dim()), &result,   \
                                               dim, keepdim);                                   \
    return result;                                                                              \
  }                                                                                             \
  at::Tensor NAME##_dims(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim) {       \
    NEURON_TRACK_OP("aten::" #NAME ".dims");                                                    \
    return logical<at::meta::structured_##NAME##_dims>(                                         \
        CODE, self, dims_mask(dim, self.dim(), /*allow_empty=*/true), nullptr, dim, keepdim);   \
  }                                                                                             \
  at::Tensor& NAME##_dims_out(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,    \
                              at::Tensor& result) {                                             \
    NEURON_TRACK_OP("aten::" #NAME ".dims_out");                                                \
    logical<at::meta::structured_##NAME##_dims>(                                                \
        CODE, self, dims_mask(dim, self.dim(), /*allow_empty=*/true), &result, dim, keepdim);   \
    return result;                                                                              \
  }
DEFINE_ANY_ALL(any, NRT_OP_ANY)
DEFINE_ANY_ALL(all, NRT_OP_ALL)

at::Tensor count_nonzero_dims(const at::Tensor& self, at::IntArrayRef dims) {
  NEURON_TRACK_OP("aten::count_nonzero.dim_IntList");
  c10::DeviceGuard guard(self.device());
  DimMask mask = dims_mask(dims, self.dim());
  at::Tensor result = reduction_result(self, mask, false, at::kLong, nullptr);
  launch_reduction(NRT_OP_COUNT_NONZERO, self, mask, {result});
  return result;
}

// ---- scans -----------------------------------------------------------------------

template <class Meta>
at::Tensor scan(nrt_op_code code, const char* name, const at::Tensor& self, int64_t dim,
                std::optional<at::ScalarType> dtype, const at::Tensor* given, bool inplace) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out({given ? *given : at::Tensor()}, inplace);
  out.meta(self, dim, dtype);
  at::Tensor result = out[0];
  TORCH_CHECK_NOT_IMPLEMENTED(result.scalar_type() != at::kBool, name,
                              ": not implemented for 'Bool' results");
  if (result.numel() == 0) return result;
  at::Tensor in = input_for(self, result.scalar_type());
  bool same_place = in.is_same(result) || (in.data_ptr() == result.data_ptr() &&
                                           in.strides() == result.strides() &&
                                           in.scalar_type() == result.scalar_type());
  at::Tensor target = result;
  if (!same_place && at::get_overlap_status(result, in) != at::MemOverlapStatus::No)
    target = at::empty_like(result);
  at::assert_no_internal_overlap(target);
  nrt_op op{};
  op.code = code;
  op.num_outputs = 1;
  op.num_operands = 2;
  op.operands[0] = to_view(target, name);
  op.operands[1] = to_view(in, name);
  op.compute_dtype = op.operands[1].dtype;
  op.num_scalars = 1;
  op.scalars[0].i = at::maybe_wrap_dim(dim, self.dim());
  launch(self.device().index(), op);
  if (!target.is_same(result)) result.copy_(target);
  return result;
}

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::cumsum");
  return scan<at::meta::structured_cumsum>(NRT_OP_CUMSUM, "cumsum", self, dim, dtype, nullptr, false);
}

at::Tensor& cumsum_(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::cumsum_");
  scan<at::meta::structured_cumsum>(NRT_OP_CUMSUM, "cumsum", self, dim, dtype, &self, true);
  return self;
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                       at::Tensor& result) {
  NEURON_TRACK_OP("aten::cumsum.out");
  scan<at::meta::structured_cumsum>(NRT_OP_CUMSUM, "cumsum", self, dim, dtype, &result, false);
  return result;
}

at::Tensor cumprod(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::cumprod");
  return scan<at::meta::structured_cumprod>(NRT_OP_CUMPROD, "cumprod", self, dim, dtype, nullptr,
                                            false);
}

at::Tensor& cumprod_(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::cumprod_");
  scan<at::meta::structured_cumprod>(NRT_OP_CUMPROD, "cumprod", self, dim, dtype, &self, true);
  return self;
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                        at::Tensor& result) {
  NEURON_TRACK_OP("aten::cumprod.out");
  scan<at::meta::structured_cumprod>(NRT_OP_CUMPROD, "cumprod", self, dim, dtype, &result, false);
  return result;
}

// logcumsumexp (PyTorch's composite calls _logcumsumexp): floating and
// complex (64/128), the result in the input's dtype, as the CPU kernel.
at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& result) {
  NEURON_TRACK_OP("aten::_logcumsumexp.out");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || self.scalar_type() == at::kComplexFloat ||
                                  self.scalar_type() == at::kComplexDouble,
                              "\"logcumsumexp_out_cpu\" not implemented for '", at::toString(self.scalar_type()), "'");
  TORCH_CHECK(result.scalar_type() == self.scalar_type(), "logcumsumexp: expected out to have dtype ",
              self.scalar_type(), ", got ", result.scalar_type());
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(result, self.sizes());
  if (result.numel() == 0) return result;
  at::Tensor target = at::get_overlap_status(result, self) == at::MemOverlapStatus::No ? result : at::empty_like(self);
  at::assert_no_internal_overlap(target);
  nrt_op op{};
  op.code = NRT_OP_LOGCUMSUMEXP;
  op.num_outputs = 1;
  op.num_operands = 2;
  op.operands[0] = to_view(target, "logcumsumexp");
  op.operands[1] = to_view(self, "logcumsumexp");
  op.compute_dtype = op.operands[1].dtype;
  op.num_scalars = 1;
  op.scalars[0].i = d;
  launch(self.device().index(), op);
  if (!target.is_same(result)) result.copy_(target);
  return result;
}

// cummax / cummin: PyTorch's composite (cummax_out) checks, resizes and
// handles 0-d and empty inputs, then calls this helper with values of the
// input's dtype and int64 indices of its shape.
void cum_extreme_helper(nrt_op_code code, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                        int64_t dim) {
  const char* name = nrt_op_name(code);
  TORCH_CHECK(values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong, name,
              ": expected values of dtype ", self.scalar_type(), " and int64 indices, got ", values.scalar_type(),
              " and ", indices.scalar_type());
  TORCH_CHECK(values.sizes() == self.sizes() && indices.sizes() == self.sizes(), name,
              ": values and indices must have the input's shape ", self.sizes());
  TORCH_CHECK(values.device() == self.device() && indices.device() == self.device(), name,
              ": expected all tensors on ", self.device());
  if (self.numel() == 0) return;
  c10::DeviceGuard guard(self.device());
  auto separate = [&](at::Tensor& t) {
    return at::get_overlap_status(t, self) == at::MemOverlapStatus::No ? t : at::empty_like(t);
  };
  at::Tensor v = separate(values), i = separate(indices);
  at::assert_no_internal_overlap(v);
  at::assert_no_internal_overlap(i);
  at::assert_no_overlap(v, i);
  nrt_op op{};
  op.code = code;
  op.num_outputs = 2;
  op.num_operands = 3;
  op.operands[0] = to_view(v, name);
  op.operands[1] = to_view(i, name);
  op.operands[2] = to_view(self, name);
  op.compute_dtype = op.operands[2].dtype;
  op.num_scalars = 1;
  op.scalars[0].i = at::maybe_wrap_dim(dim, self.dim());
  launch(self.device().index(), op);
  if (!v.is_same(values)) values.copy_(v);
  if (!i.is_same(indices)) indices.copy_(i);
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  NEURON_TRACK_OP("aten::_cummax_helper");
  cum_extreme_helper(NRT_OP_CUMMAX, self, values, indices, dim);
}

void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  NEURON_TRACK_OP("aten::_cummin_helper");
  cum_extreme_helper(NRT_OP_CUMMIN, self, values, indices, dim);
}

// A complex neuron input (and out) the native scan takes; anything else
// with a complex dtype (a conjugate view, an out on another device) is the
// fallback's.
bool complex_scan_input(const at::Tensor& self, const at::Tensor* out) {
  auto ok = [&](const at::Tensor& t) {
    return t.defined() && (t.scalar_type() == at::kComplexFloat || t.scalar_type() == at::kComplexDouble) &&
           t.device() == self.device() && !t.is_conj() && !t.is_neg();
  };
  return self.device().type() == c10::DeviceType::PrivateUse1 && ok(self) && (!out || ok(*out));
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  NEURON_TRACK_OP("aten::_logcumsumexp");
  at::Tensor result = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, result);
}

// sum.dim_IntList of a complex neuron tensor (no dtype= or the same one,
// not a 0-d tensor) on the real planes; any other storage-dtype call goes to
// the fallback (but wide unsigned inputs: wide_unsigned.h), the rest to sum_dim.
at::Tensor sum_dim_or_complex(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                              std::optional<at::ScalarType> dtype) {
  if (self.is_complex() && self.scalar_type() != at::kComplexHalf && (!dtype || *dtype == self.scalar_type()) &&
         !self.is_neg()) {
    NEURON_TRACK_OP("aten::sum.dim_IntList");
    c10::DeviceGuard guard(self.device());
    return complex_reduce(self, dim, keepdim, /*mean=*/false);
  }
  if (auto r = wide_unsigned_accumulate(self, dtype, nullptr,
                                        [&](const at::Tensor& s) { return at::sum(s, dim, keepdim, dtype); }))
    return *r;
  if (is_storage_dtype(self.scalar_type()) || (dtype && is_storage_dtype(*dtype))) {
    torch::jit::Stack stack;
    stack.emplace_back(self);
    stack.emplace_back(dim);
    stack.emplace_back(keepdim);
    stack.emplace_back(dtype);
    run_through_fallback("aten::sum", "dim_IntList", &stack);
    return stack.back().toTensor();
  }
  return sum_dim(self, dim, keepdim, dtype);
}

// (not complex32: the CPU has no sum or mean for it, and the fallback
// raises its error)
bool plain_complex_reduction(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return self.is_complex() && self.scalar_type() != at::kComplexHalf && (!dtype || *dtype == self.scalar_type()) &&
         !self.is_neg();
}

at::Tensor sum_all_or_complex(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (plain_complex_reduction(self, dtype)) {
    NEURON_TRACK_OP("aten::sum(complex)");
    c10::DeviceGuard guard(self.device());
    return complex_reduce(self, {}, /*keepdim=*/false, /*mean=*/false);
  }
  if (auto r = wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) { return at::sum(s, dtype); }))
    return *r;
  if (is_storage_dtype(self.scalar_type()) || (dtype && is_storage_dtype(*dtype))) {
    torch::jit::Stack stack{self, dtype};
    run_through_fallback("aten::sum", "", &stack);
    return stack.back().toTensor();
  }
  return sum_all(self, dtype);
}

at::Tensor mean_all_or_complex(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (plain_complex_reduction(self, dtype)) {
    NEURON_TRACK_OP("aten::mean(complex)");
    c10::DeviceGuard guard(self.device());
    return complex_reduce(self, {}, /*keepdim=*/false, /*mean=*/true);
  }
  // (without dtype= the CPU refuses an integer input)
  if (auto r = dtype ? wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) { return at::mean(s, dtype); })
                     : std::nullopt)
    return *r;
  if (is_storage_dtype(self.scalar_type()) || (dtype && is_storage_dtype(*dtype))) {
    torch::jit::Stack stack{self, dtype};
    run_through_fallback("aten::mean", "", &stack);
    return stack.back().toTensor();
  }
  return mean_all(self, dtype);
}

// mean.dim of a complex neuron tensor: the real mean of its planes.
at::Tensor mean_dim_or_complex(const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype) {
  if (self.is_complex() && self.scalar_type() != at::kComplexHalf && (!dtype || *dtype == self.scalar_type()) &&
         !self.is_neg()) {
    NEURON_TRACK_OP("aten::mean.dim");
    c10::DeviceGuard guard(self.device());
    return complex_reduce(self, dim, keepdim, /*mean=*/true);
  }
  if (auto r = dtype ? wide_unsigned_accumulate(self, dtype, nullptr,
                                                [&](const at::Tensor& s) { return at::mean(s, dim, keepdim, dtype); })
                     : std::nullopt)
    return *r;
  if (is_storage_dtype(self.scalar_type()) || (dtype && is_storage_dtype(*dtype))) {
    torch::jit::Stack stack;
    stack.emplace_back(self);
    stack.emplace_back(dim);
    stack.emplace_back(keepdim);
    stack.emplace_back(dtype);
    run_through_fallback("aten::mean", "dim", &stack);
    return stack.back().toTensor();
  }
  return mean_dim(self, dim, keepdim, dtype);
}

// all/any's out= forms of a complex self: z != 0 reduced, into a bool out.
// The CPU also takes a uint8 out, and then reduces self cast to uint8 (its
// real part, truncated: all([1, -1j]) is 0); that out is left to the
// fallback, which does just that. An out of any other dtype on the device is
// refused here in the CPU's words.
template <class Reduce>
std::optional<at::Tensor> complex_nonzero_into(const char* name, const at::Tensor& self, at::Tensor& out,
                                               Reduce reduce) {
  if (self.defined() && self.is_complex() && out.defined() && out.device() == self.device()) {
    TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, name,
                " only supports bool tensor for result, got: ", out.scalar_type());
  }
  return complex_into_out(self, at::kBool, out, [&]() -> std::optional<at::Tensor> {
    std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
    if (!nz) return std::nullopt;
    return reduce(*nz);
  });
}

// var/std out= of a complex self: a real out takes the real variance as the
// functional form computes it (complex_into_out); an out of self's own
// complex dtype takes it as the CPU writes it there, the real variance with
// imaginary part 0, and for std the complex square root of that (so a NaN
// variance gives nan+nanj, as csqrt does). Other outs go to the fallback.
std::optional<at::Tensor> complex_var_into(const at::Tensor& self, OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim,
                                           at::Tensor& out, bool take_sqrt) {
  if (self.defined() && self.is_complex() && out.defined() && out.scalar_type() == self.scalar_type() &&
      out.device() == self.device() && !out.is_conj() && !out.is_neg()) {
    std::optional<at::Tensor> v = try_native_complex_var(self, dim, correction, keepdim, false);
    if (!v) return std::nullopt;
    c10::DeviceGuard guard(out.device());
    at::native::resize_output(out, v->sizes());
    if (out.numel() > 0) {
      out.copy_(*v);
      if (take_sqrt) out.sqrt_();
    }
    return out;
  }
  return complex_into_out(self, c10::toRealValueType(self.scalar_type()), out, [&] {
    return try_native_complex_var(self, dim, correction, keepdim, take_sqrt);
  });
}

}  // namespace


NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_logcumsumexp", complex_first("_logcumsumexp", logcumsumexp, [](const at::Tensor& self, int64_t dim) {
           return complex_scan_input(self, nullptr) ? std::optional<at::Tensor>(torchneuron::logcumsumexp(self, dim)) : std::nullopt;
         }));
  m.impl("_logcumsumexp.out",
         complex_first("_logcumsumexp.out", logcumsumexp_out, [](const at::Tensor& self, int64_t dim, at::Tensor& out) {
           return complex_scan_input(self, &out) ? std::optional<at::Tensor>(torchneuron::logcumsumexp_out(self, dim, out))
                                                 : std::nullopt;
         }));
  m.impl("_cummax_helper", native_or_fallback("_cummax_helper", cummax_helper));
  m.impl("_cummin_helper", native_or_fallback("_cummin_helper", cummin_helper));
  m.impl("aminmax", native_or_fallback("aminmax", aminmax));
  m.impl("aminmax.out", native_or_fallback("aminmax.out", aminmax_out));
  m.impl("hash_tensor", complex_first("hash_tensor", hash_tensor_plain,
                                      [](const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
                                        return hash_tensor_native(self, dim, keepdim, mode, nullptr);
                                      }));
  m.impl("hash_tensor.out",
         complex_first("hash_tensor.out", hash_tensor_out,
                       [](const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, at::Tensor& out) {
                         return hash_tensor_native(self, dim, keepdim, mode, &out);
                       }));
  m.impl("nansum", complex_first("nansum", nansum,
                                 [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                    std::optional<at::ScalarType> dtype) {
                                   return wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) {
                                     return at::nansum(s, dim, keepdim, dtype);
                                   });
                                 }));
  m.impl("nansum.out", complex_first("nansum.out", nansum_out,
                                     [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                        std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                       return wide_unsigned_accumulate(self, dtype, &out, [&](const at::Tensor& s) {
                                         return at::nansum_out(out, s, dim, keepdim, dtype);
                                       });
                                     }));
  m.impl("trace", complex_first("trace", trace, try_native_complex_trace));
  m.impl("sum", sum_all_or_complex);
  m.impl("sum.dim_IntList", sum_dim_or_complex);
  m.impl("sum.IntList_out", complex_first("sum.IntList_out", sum_dim_out,
                                          [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                            if (auto r = wide_unsigned_accumulate(self, dtype, &out, [&](const at::Tensor& s) {
                                                  return at::sum_out(out, s, dim, keepdim, dtype);
                                                }))
                                              return r;
                                            return complex_into_out(self, self.scalar_type(), out, [&] {
                                              return plain_complex_reduction(self, dtype)
                                                         ? std::optional<at::Tensor>(sum_dim_or_complex(self, dim, keepdim, dtype))
                                                         : std::nullopt;
                                            });
                                          }));
  m.impl("mean", mean_all_or_complex);
  m.impl("mean.dim", mean_dim_or_complex);
  m.impl("mean.out", complex_first("mean.out", mean_dim_out,
                                   [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                      std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                     return complex_into_out(self, self.scalar_type(), out, [&] {
                                       return plain_complex_reduction(self, dtype)
                                                  ? std::optional<at::Tensor>(mean_dim_or_complex(self, dim, keepdim, dtype))
                                                  : std::nullopt;
                                     });
                                   }));
  m.impl("prod", complex_first("prod", prod_all, [](const at::Tensor& self, std::optional<at::ScalarType> dtype) {
           if (auto r = wide_unsigned_accumulate(self, dtype, nullptr,
                                                 [&](const at::Tensor& s) { return at::prod(s, dtype); }))
             return r;
           return try_native_complex_prod(self, std::nullopt, false, dtype, nullptr);
         }));
  m.impl("prod.dim_int", complex_first("prod.dim_int", prod_dim,
                                       [](const at::Tensor& self, int64_t dim, bool keepdim,
                                          std::optional<at::ScalarType> dtype) {
                                         if (auto r = wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) {
                                               return at::prod(s, dim, keepdim, dtype);
                                             }))
                                           return r;
                                         return try_native_complex_prod(self, dim, keepdim, dtype, nullptr);
                                       }));
  m.impl("prod.int_out", complex_first("prod.int_out", prod_dim_out,
                                       [](const at::Tensor& self, int64_t dim, bool keepdim,
                                          std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                         if (auto r = wide_unsigned_accumulate(self, dtype, &out, [&](const at::Tensor& s) {
                                               return at::prod_out(out, s, dim, keepdim, dtype);
                                             }))
                                           return r;
                                         return try_native_complex_prod(self, dim, keepdim, dtype, &out);
                                       }));
  m.impl("amax", native_or_fallback("amax", amax));
  m.impl("amax.out", native_or_fallback("amax.out", amax_out));
  m.impl("amin", native_or_fallback("amin", amin));
  m.impl("amin.out", native_or_fallback("amin.out", amin_out));
  m.impl("max", native_or_fallback("max", max_all));
  m.impl("max.unary_out", native_or_fallback("max.unary_out", max_unary_out));
  m.impl("max.dim", native_or_fallback("max.dim", max_dim));
  m.impl("max.dim_max", native_or_fallback("max.dim_max", max_dim_out));
  m.impl("min", native_or_fallback("min", min_all));
  m.impl("min.unary_out", native_or_fallback("min.unary_out", min_unary_out));
  m.impl("min.dim", native_or_fallback("min.dim", min_dim));
  m.impl("min.dim_min", native_or_fallback("min.dim_min", min_dim_out));
  m.impl("argmax", native_or_fallback("argmax", argmax));
  m.impl("argmax.out", native_or_fallback("argmax.out", argmax_out));
  m.impl("argmin", native_or_fallback("argmin", argmin));
  m.impl("argmin.out", native_or_fallback("argmin.out", argmin_out));
  m.impl("var.correction", complex_first("var.correction", var_correction,
                                         [](const at::Tensor& self, OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
                                           return try_native_complex_var(self, dim, correction, keepdim, false);
                                         }));
  m.impl("var.correction_out", complex_first("var.correction_out", var_correction_out,
                                             [](const at::Tensor& self, OptionalIntArrayRef dim,
                                                const std::optional<at::Scalar>& correction, bool keepdim,
                                                at::Tensor& out) {
                                               return complex_var_into(self, dim, correction, keepdim, out, false);
                                             }));
  m.impl("std.correction", complex_first("std.correction", std_correction,
                                         [](const at::Tensor& self, OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
                                           return try_native_complex_var(self, dim, correction, keepdim, true);
                                         }));
  m.impl("std.correction_out", complex_first("std.correction_out", std_correction_out,
                                             [](const at::Tensor& self, OptionalIntArrayRef dim,
                                                const std::optional<at::Scalar>& correction, bool keepdim,
                                                at::Tensor& out) {
                                               return complex_var_into(self, dim, correction, keepdim, out, true);
                                             }));
  m.impl("var_mean.correction", complex_first("var_mean.correction", var_mean_correction,
                                              [](const at::Tensor& self, OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim) {
                                                return try_native_complex_var_mean(self, dim, correction, keepdim,
                                                                                   false);
                                              }));
  m.impl("std_mean.correction", complex_first("std_mean.correction", std_mean_correction,
                                              [](const at::Tensor& self, OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim) {
                                                return try_native_complex_var_mean(self, dim, correction, keepdim,
                                                                                   true);
                                              }));
  m.impl("linalg_vector_norm", complex_first("linalg_vector_norm", linalg_vector_norm, try_native_complex_vector_norm));
  m.impl("linalg_vector_norm.out",
         complex_first("linalg_vector_norm.out", linalg_vector_norm_out,
                       [](const at::Tensor& self, const at::Scalar& ord, OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor& out) {
                         return complex_into_out(self, c10::toRealValueType(dtype.value_or(self.scalar_type())), out,
                                                 [&] { return try_native_complex_vector_norm(self, ord, dim, keepdim, dtype); });
                       }));
  m.impl("norm.ScalarOpt_dim", complex_first("norm.ScalarOpt_dim", norm_dim,
                                              [](const at::Tensor& self, const std::optional<at::Scalar>& p,
                                                 at::IntArrayRef dim, bool keepdim) {
                                                return try_native_complex_norm(self, p, dim, keepdim, std::nullopt);
                                              }));
  m.impl("norm.out", complex_first("norm.out", norm_dim_out,
                                   [](const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                                      bool keepdim, at::Tensor& out) {
                                     return complex_into_out(self, c10::toRealValueType(self.scalar_type()), out, [&] {
                                       return try_native_complex_norm(self, p, dim, keepdim, std::nullopt);
                                     });
                                   }));
  m.impl("norm.ScalarOpt_dim_dtype", complex_first("norm.ScalarOpt_dim_dtype", norm_dim_dtype,
                                                    [](const at::Tensor& self, const std::optional<at::Scalar>& p,
                                                       at::IntArrayRef dim, bool keepdim, at::ScalarType dtype) {
                                                      return try_native_complex_norm(self, p, dim, keepdim, dtype);
                                                    }));
  m.impl("norm.dtype_out", complex_first("norm.dtype_out", norm_dim_dtype_out,
                                         [](const at::Tensor& self, const std::optional<at::Scalar>& p,
                                            at::IntArrayRef dim, bool keepdim, at::ScalarType dtype, at::Tensor& out) {
                                           return complex_into_out(self, c10::toRealValueType(dtype), out, [&] {
                                             return try_native_complex_norm(self, p, dim, keepdim, dtype);
                                           });
                                         }));
  m.impl("logsumexp", complex_first("logsumexp", logsumexp, try_native_complex_logsumexp));
  m.impl("logsumexp.out", complex_first("logsumexp.out", logsumexp_out,
                                        [](const at::Tensor& self, at::IntArrayRef dims, bool keepdim, at::Tensor& out) {
                                          return complex_into_out(self, self.scalar_type(), out, [&] {
                                            return try_native_complex_logsumexp(self, dims, keepdim);
                                          });
                                        }));
  m.impl("any", complex_first("any", any_all, [](const at::Tensor& self) {
           if (auto r = wide_unsigned_nonzero(self, [](const at::Tensor& s) { return s.any(); })) return r;
           return try_native_complex_any(self);
         }));
  m.impl("any.all_out", complex_first("any.all_out", any_all_out, [](const at::Tensor& self, at::Tensor& out) {
           if (auto r = wide_unsigned_nonzero(self, [&](const at::Tensor& s) { return at::any_out(out, s); })) return r;
           return complex_nonzero_into("any", self, out, [](const at::Tensor& nz) { return nz.any(); });
         }));
  m.impl("any.dim", complex_first("any.dim", any_dim, [](const at::Tensor& self, int64_t dim, bool keepdim) {
           if (auto r = wide_unsigned_nonzero(self, [&](const at::Tensor& s) { return s.any(dim, keepdim); })) return r;
           std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
           return nz ? std::optional<at::Tensor>(nz->any(dim, keepdim)) : std::nullopt;
         }));
  m.impl("any.out", complex_first("any.out", any_dim_out,
                                  [](const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
                                    if (auto r = wide_unsigned_nonzero(
                                            self, [&](const at::Tensor& s) { return at::any_out(out, s, dim, keepdim); }))
                                      return r;
                                    return complex_nonzero_into("any", self, out,
                                                                [&](const at::Tensor& nz) { return nz.any(dim, keepdim); });
                                  }));
  m.impl("any.dims", complex_first("any.dims", any_dims,
                                   [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim) {
                                     if (auto r = wide_unsigned_nonzero(
                                             self, [&](const at::Tensor& s) { return at::any(s, dim, keepdim); }))
                                       return r;
                                     std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
                                     return nz ? std::optional<at::Tensor>(at::any(*nz, dim, keepdim)) : std::nullopt;
                                   }));
  m.impl("any.dims_out", complex_first("any.dims_out", any_dims_out,
                                       [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                          at::Tensor& out) {
                                         if (auto r = wide_unsigned_nonzero(
                                                 self, [&](const at::Tensor& s) { return at::any_out(out, s, dim, keepdim); }))
                                           return r;
                                         return complex_nonzero_into("any", self, out, [&](const at::Tensor& nz) {
                                           return at::any(nz, dim, keepdim);
                                         });
                                       }));
  m.impl("all", complex_first("all", all_all, [](const at::Tensor& self) {
           if (auto r = wide_unsigned_nonzero(self, [](const at::Tensor& s) { return s.all(); })) return r;
           std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
           return nz ? std::optional<at::Tensor>(nz->all()) : std::nullopt;
         }));
  m.impl("all.all_out", complex_first("all.all_out", all_all_out, [](const at::Tensor& self, at::Tensor& out) {
           if (auto r = wide_unsigned_nonzero(self, [&](const at::Tensor& s) { return at::all_out(out, s); })) return r;
           return complex_nonzero_into("all", self, out, [](const at::Tensor& nz) { return nz.all(); });
         }));
  m.impl("all.dim", complex_first("all.dim", all_dim, [](const at::Tensor& self, int64_t dim, bool keepdim) {
           if (auto r = wide_unsigned_nonzero(self, [&](const at::Tensor& s) { return s.all(dim, keepdim); })) return r;
           std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
           return nz ? std::optional<at::Tensor>(nz->all(dim, keepdim)) : std::nullopt;
         }));
  m.impl("all.out", complex_first("all.out", all_dim_out,
                                  [](const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
                                    if (auto r = wide_unsigned_nonzero(
                                            self, [&](const at::Tensor& s) { return at::all_out(out, s, dim, keepdim); }))
                                      return r;
                                    return complex_nonzero_into("all", self, out,
                                                                [&](const at::Tensor& nz) { return nz.all(dim, keepdim); });
                                  }));
  m.impl("all.dims", complex_first("all.dims", all_dims,
                                   [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim) {
                                     if (auto r = wide_unsigned_nonzero(
                                             self, [&](const at::Tensor& s) { return at::all(s, dim, keepdim); }))
                                       return r;
                                     std::optional<at::Tensor> nz = try_native_complex_nonzero(self);
                                     return nz ? std::optional<at::Tensor>(at::all(*nz, dim, keepdim)) : std::nullopt;
                                   }));
  m.impl("all.dims_out", complex_first("all.dims_out", all_dims_out,
                                       [](const at::Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                                          at::Tensor& out) {
                                         if (auto r = wide_unsigned_nonzero(
                                                 self, [&](const at::Tensor& s) { return at::all_out(out, s, dim, keepdim); }))
                                           return r;
                                         return complex_nonzero_into("all", self, out, [&](const at::Tensor& nz) {
                                           return at::all(nz, dim, keepdim);
                                         });
                                       }));
  m.impl("count_nonzero.dim_IntList",
         complex_first("count_nonzero.dim_IntList", count_nonzero_dims,
                       [](const at::Tensor& self, at::IntArrayRef dims) {
                         // (no dims: the CPU's all-elements kernel, which refuses them)
                         if (auto r = dims.empty() ? std::nullopt : wide_unsigned_nonzero(
                                 self, [&](const at::Tensor& s) { return at::count_nonzero(s, dims); }))
                           return r;
                         return try_native_complex_count_nonzero(self, dims);
                       }));
  m.impl("cumsum", complex_first("cumsum", cumsum,
                                    [](const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
                                      if (auto r = wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) { return at::cumsum(s, dim, dtype); }))
                                        return r;
                                      return try_native_complex_scan(false, self, dim, dtype, nullptr);
                                    }));
  m.impl("cumsum_", complex_first("cumsum_", cumsum_,
                                    [](at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) { return try_native_complex_scan(false, self, dim, dtype, &self); }));
  m.impl("cumsum.out", complex_first("cumsum.out", cumsum_out,
                                    [](const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                      if (auto r = wide_unsigned_accumulate(self, dtype, &out, [&](const at::Tensor& s) { return at::cumsum_out(out, s, dim, dtype); }))
                                        return r;
                                      return try_native_complex_scan(false, self, dim, dtype, &out);
                                    }));
  m.impl("cumprod", complex_first("cumprod", cumprod,
                                    [](const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
                                      if (auto r = wide_unsigned_accumulate(self, dtype, nullptr, [&](const at::Tensor& s) { return at::cumprod(s, dim, dtype); }))
                                        return r;
                                      return try_native_complex_scan(true, self, dim, dtype, nullptr);
                                    }));
  m.impl("cumprod_", complex_first("cumprod_", cumprod_,
                                    [](at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) { return try_native_complex_scan(true, self, dim, dtype, &self); }));
  m.impl("cumprod.out", complex_first("cumprod.out", cumprod_out,
                                    [](const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
                                      if (auto r = wide_unsigned_accumulate(self, dtype, &out, [&](const at::Tensor& s) { return at::cumprod_out(out, s, dim, dtype); }))
                                        return r;
                                      return try_native_complex_scan(true, self, dim, dtype, &out);
                                    }));
}

// This file's macros end here (the unity build puts files one after another).
#undef DEFINE_ANY_ALL
}  // namespace torchneuron
