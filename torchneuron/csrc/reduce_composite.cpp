// Reductions PyTorch's CPU has dedicated kernels for, composed here of the
// native ones (reduce.cpp, pointwise_ops.cpp) so that none falls back:
//   aminmax  = amin and amax (two passes over the input where the CPU makes
//              one; see benchmarks/reduce.py)
//   nansum   = sum of where(isnan(x), 0, x) (integers: sum)
//   trace    = sum of the diagonal view, integers summed into int64
// (nanmean is PyTorch's composite of nansum and runs natively through it.)
// Checks and messages are the CPU kernels'.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "op_tracking.h"

namespace torchneuron {
namespace {

// The dims aminmax reduces (empty: all), after PyTorch's empty-input checks.
std::vector<int64_t> aminmax_dims(const at::Tensor& self, std::optional<int64_t> dim) {
  TORCH_CHECK(!self.is_complex(), "aminmax(): does not support complex input");
  if (!dim) {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    return {};
  }
  const int64_t d = c10::maybe_wrap_dim(*dim, self.dim());
  if (self.numel() == 0 && self.dim() > 0)
    TORCH_CHECK_INDEX(self.size(d) != 0, "aminmax: Expected reduction dim ", d, " to have non-zero size.");
  return {d};
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  NEURON_TRACK_OP("aten::aminmax.out");
  std::vector<int64_t> dims = aminmax_dims(self, dim);
  TORCH_CHECK(min.scalar_type() == self.scalar_type() && max.scalar_type() == self.scalar_type(),
              "Expected out tensor to have dtype ", self.scalar_type(), ", but got ", min.scalar_type(), " instead");
  c10::DeviceGuard guard(self.device());
  at::amin_out(min, self, dims, keepdim);
  at::amax_out(max, self, dims, keepdim);
  return {min, max};
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  NEURON_TRACK_OP("aten::aminmax");
  std::vector<int64_t> dims = aminmax_dims(self, dim);
  c10::DeviceGuard guard(self.device());
  return {at::amin(self, dims, keepdim), at::amax(self, dims, keepdim)};
}

at::Tensor nan_as_zero(const at::Tensor& self) {
  if (!at::isFloatingType(self.scalar_type())) return self;
  return at::where(at::isnan(self), at::zeros({}, self.options()), self);
}

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  NEURON_TRACK_OP("aten::nansum.out");
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  c10::DeviceGuard guard(self.device());
  return at::sum_out(out, nan_as_zero(self), dim, keepdim, dtype);
}

at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  NEURON_TRACK_OP("aten::nansum");
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  c10::DeviceGuard guard(self.device());
  return at::sum(nan_as_zero(self), dim, keepdim, dtype);
}

at::Tensor trace(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::trace");
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"trace\" not implemented for 'Bool'");
  c10::DeviceGuard guard(self.device());
  // sum gives integers (int64) and floats (their own dtype) the CPU's result dtype
  return at::sum(self.diagonal());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("aminmax", TORCH_FN(aminmax));
  m.impl("aminmax.out", TORCH_FN(aminmax_out));
  m.impl("nansum", TORCH_FN(nansum));
  m.impl("nansum.out", TORCH_FN(nansum_out));
  m.impl("trace", TORCH_FN(trace));
}

}  // namespace torchneuron
