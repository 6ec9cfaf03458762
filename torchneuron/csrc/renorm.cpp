// renorm (functional, in-place, out=) on the runtime's RENORM op
// (neuronrt/ops/nn.h): the renormed dim is moved to the front of both
// views (a change of strides, no copy). The checks and messages are
// PyTorch's (renorm's meta function and linalg.vector_norm's dtype check).
// embedding_renorm_ (embedding's max_norm) is the same op on the rows its
// indices name, once each: gathered, renormed, written back.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <vector>

#include "fallback.h"
#include "index_launch.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_renorm(const at::Tensor& self, const at::Scalar& p, const at::Scalar& maxnorm) {
  TORCH_CHECK(!p.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p.toDouble() > 0.0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
}

// A complex slice's norm is the norm of its moduli and its factor is real,
// maxnorm / (norm + 1e-7) where the norm exceeds maxnorm (the CPU's rule),
// so the result is z times the factor: real kernels, then one complex mul.
void complex_renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                    const at::Tensor& out) {
  std::vector<int64_t> reduce;
  for (int64_t d = 0; d < self.dim(); d++)
    if (d != dim) reduce.push_back(d);
  const at::Tensor norm = at::linalg_vector_norm(at::abs(self), p, reduce, /*keepdim=*/true);
  const at::Tensor factor = at::where(norm > maxnorm, at::full_like(norm, maxnorm).div_(norm + 1e-7), 1.0);
  at::mul_out(const_cast<at::Tensor&>(out), self, factor);
}

void launch_renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                   const at::Tensor& out, bool embedding = false) {
  if (self.numel() == 0) return;
  dim = c10::maybe_wrap_dim(dim, self.dim());
  if (self.is_complex()) return complex_renorm(self, p, dim, maxnorm, out);
  nrt_op op{};
  op.code = NRT_OP_RENORM;
  op.num_outputs = 1;
  op.num_operands = 2;
  op.operands[0] = to_view(out.movedim(dim, 0), "renorm");
  op.operands[1] = to_view(self.movedim(dim, 0), "renorm");
  op.num_scalars = 3;
  op.scalars[2].i = embedding;
  op.scalars[0].is_float = 1;
  op.scalars[0].f = p.toDouble();
  op.scalars[1].is_float = 1;
  op.scalars[1].f = maxnorm.toDouble();
  launch(self.device().index(), op);
}

at::Tensor& renorm_out(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                       at::Tensor& out) {
  NEURON_TRACK_OP("aten::renorm.out");
  c10::DeviceGuard guard(self.device());
  check_renorm(self, p, maxnorm);
  (void)c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "renorm: expected out of dtype ", self.scalar_type(),
              ", got ", out.scalar_type());
  check_devices("renorm", self, {out});
  at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  if (!out.is_same(self)) at::assert_no_partial_overlap(out, self);
  launch_renorm(self, p, dim, maxnorm, out);
  return out;
}

at::Tensor renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  NEURON_TRACK_OP("aten::renorm");
  c10::DeviceGuard guard(self.device());
  check_renorm(self, p, maxnorm);
  (void)c10::maybe_wrap_dim(dim, self.dim());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  launch_renorm(self, p, dim, maxnorm, out);
  return out;
}

at::Tensor& renorm_(at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  NEURON_TRACK_OP("aten::renorm_");
  c10::DeviceGuard guard(self.device());
  check_renorm(self, p, maxnorm);
  (void)c10::maybe_wrap_dim(dim, self.dim());
  at::assert_no_internal_overlap(self);
  launch_renorm(self, p, dim, maxnorm, self);
  return self;
}

at::Tensor& embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  if (!(norm_type > 0)) {  // p-"norms" the kernel does not take (count of nonzeros, negative p)
    torch::jit::Stack stack{self, indices, max_norm, norm_type};
    run_through_fallback("aten::embedding_renorm_", "", &stack);
    return self;
  }
  NEURON_TRACK_OP("aten::embedding_renorm_");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_(): expected weight to be 2-D, but got ", self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected indices to be Long or Int, got ", indices.scalar_type());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "embedding_renorm_(): expected a floating weight, got ",
              self.scalar_type());
  check_devices("embedding_renorm_", self, {indices});
  if (indices.numel() == 0 || self.numel() == 0) return self;
  at::Tensor rows = std::get<0>(at::_unique(indices.reshape({-1}), /*sorted=*/true, /*return_inverse=*/false));
  at::Tensor picked = self.index_select(0, rows);
  launch_renorm(picked, norm_type, 0, max_norm, picked, /*embedding=*/true);
  self.index_copy_(0, rows, picked);
  return self;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("embedding_renorm_", embedding_renorm_);
  m.impl("renorm", renorm);
  m.impl("renorm.out", renorm_out);
  m.impl("renorm_", renorm_);
}

}  // namespace torchneuron
