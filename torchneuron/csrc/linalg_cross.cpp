// linalg_cross (functional and out=): the cross product along a dim of
// length 3, with the batch dims broadcast, composed of native kernels:
// c_k = a_(k+1) b_(k+2) - a_(k+2) b_(k+1), each term a strided view of the
// operands (no gather). Checks and messages are the CPU's (the structured
// meta function and its kernel's dtype check).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

std::vector<int64_t> check_cross(const at::Tensor& self, const at::Tensor& other, int64_t& dim) {
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  TORCH_CHECK(self.size(dim) == 3 && other.size(dim) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(dim), " and ", other.size(dim));
  std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", other.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"cross\" not implemented for 'Bool'");
  return shape;
}

void cross_into(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  const at::Tensor a = self.expand(out.sizes()), b = other.expand(out.sizes());
  for (int64_t k = 0; k < 3; k++) {
    const int64_t i = (k + 1) % 3, j = (k + 2) % 3;
    at::Tensor slot = out.select(dim, k);
    at::mul_out(slot, a.select(dim, i), b.select(dim, j));
    slot.sub_(a.select(dim, j) * b.select(dim, i));
  }
}

at::Tensor& linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  NEURON_TRACK_OP("aten::linalg_cross.out");
  const std::vector<int64_t> shape = check_cross(self, other, dim);
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  const bool aliased = out.is_same(self) || out.is_same(other);
  at::Tensor target = aliased ? at::empty_like(out) : out;  // a term must not read what an earlier one wrote
  cross_into(self, other, dim, target);
  if (aliased) out.copy_(target);
  return out;
}

at::Tensor linalg_cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  NEURON_TRACK_OP("aten::linalg_cross");
  const std::vector<int64_t> shape = check_cross(self, other, dim);
  at::Tensor out = at::empty(shape, self.options());
  if (out.numel() > 0) cross_into(self, other, dim, out);
  return out;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("linalg_cross", linalg_cross);
  m.impl("linalg_cross.out", linalg_cross_out);
}

}  // namespace torchneuron
