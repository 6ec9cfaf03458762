// cdist and pdist on the runtime's CDIST and CDIST_BACKWARD ops
// (neuronrt/ops/distance.h). Batch dims broadcast as the CPU's and are
// flattened to one for the kernel; pdist is the upper triangle of the full
// distance matrix of its rows (in the CPU's row-major pair order), and its
// gradient is CDIST_BACKWARD of the symmetrised pair gradient. Checks and
// messages are the CPU's.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_float(const at::Tensor& t, const char* name, const char* which) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), name, " only supports floating-point dtypes, ", which, " got: ",
              t.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, "\"", name,
                              "\" not implemented for '", at::toString(t.scalar_type()), "'");
}

void launch_distance(nrt_op_code code, std::initializer_list<at::Tensor> operands, double p) {
  nrt_op op{};
  op.code = code;
  op.num_outputs = 1;
  op.num_operands = static_cast<int32_t>(operands.size());
  int k = 0;
  for (const at::Tensor& t : operands) op.operands[k++] = to_view(t, code == NRT_OP_CDIST ? "cdist" : "cdist_backward");
  op.num_scalars = 1;
  op.scalars[0].is_float = 1;
  op.scalars[0].f = p;
  launch(operands.begin()->device().index(), op);
}

std::vector<int64_t> with_tail(at::IntArrayRef batch, int64_t a, int64_t b) {
  std::vector<int64_t> shape(batch.begin(), batch.end());
  shape.push_back(a);
  shape.push_back(b);
  return shape;
}

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  NEURON_TRACK_OP("aten::_cdist_forward");
  (void)compute_mode;  // every mode computes the distances directly
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  check_float(x1, "cdist", "X1");
  check_float(x2, "cdist", "X2");
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  TORCH_CHECK(x1.scalar_type() == x2.scalar_type(), "expected scalar type ", x1.scalar_type(), " but found ",
              x2.scalar_type());
  c10::DeviceGuard guard(x1.device());
  const int64_t P = x1.size(-2), R = x2.size(-2), M = x1.size(-1);
  const std::vector<int64_t> batch =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  at::Tensor out = at::empty(with_tail(batch, P, R), x1.options());
  if (out.numel() == 0) return out;
  if (M == 0) return out.zero_();  // an empty sum, for every p
  const int64_t B = c10::multiply_integers(batch);
  const at::Tensor a = x1.expand(with_tail(batch, P, M)).reshape({B, P, M});
  const at::Tensor b = x2.expand(with_tail(batch, R, M)).reshape({B, R, M});
  launch_distance(NRT_OP_CDIST, {out.view({B, P, R}), a, b}, p);
  return out;
}

at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& cdist) {
  NEURON_TRACK_OP("aten::_cdist_backward");
  check_float(x1, "cdist", "X1");
  c10::DeviceGuard guard(x1.device());
  const int64_t P = x1.size(-2), R = x2.size(-2), M = x1.size(-1);
  const at::IntArrayRef batch = grad.sizes().slice(0, grad.dim() - 2);
  at::Tensor out = at::empty(with_tail(batch, P, M), x1.options());
  if (out.numel() == 0) return out;
  if (R == 0) return out.zero_();
  const int64_t B = c10::multiply_integers(batch);
  launch_distance(NRT_OP_CDIST_BACKWARD,
                  {out.view({B, P, M}), grad.reshape({B, P, R}), x1.expand(with_tail(batch, P, M)).reshape({B, P, M}),
                   x2.expand(with_tail(batch, R, M)).reshape({B, R, M}), cdist.reshape({B, P, R})},
                  p);
  return out;
}

at::Tensor pdist_forward(const at::Tensor& self, double p) {
  NEURON_TRACK_OP("aten::_pdist_forward");
  TORCH_CHECK(self.is_contiguous(), "_pdist_forward requires contiguous input");
  check_float(self, "pdist", "input");
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  const int64_t n = self.size(0);
  if (n <= 1) return at::empty({0}, self.options());
  c10::DeviceGuard guard(self.device());
  const at::Tensor full = cdist_forward(self, self, p, std::nullopt);
  const at::Tensor pairs = at::triu_indices(n, n, 1, self.options().dtype(at::kLong));
  return full.index({pairs[0], pairs[1]});
}

at::Tensor pdist_backward(const at::Tensor& grad, const at::Tensor& self, double p, const at::Tensor& pdist) {
  NEURON_TRACK_OP("aten::_pdist_backward");
  (void)pdist;  // the full matrix is recomputed: the kernel reads distances per pair of rows
  TORCH_CHECK(self.is_contiguous(), "_pdist_backward requires self to be contiguous");
  const int64_t n = self.size(0);
  if (n <= 1 || self.size(1) == 0) return at::zeros_like(self);
  c10::DeviceGuard guard(self.device());
  const at::Tensor pairs = at::triu_indices(n, n, 1, self.options().dtype(at::kLong));
  at::Tensor pair_grad = at::zeros({n, n}, grad.options());
  pair_grad.index_put_({pairs[0], pairs[1]}, grad);
  const at::Tensor symmetric = pair_grad + pair_grad.t();
  const at::Tensor full = cdist_forward(self, self, p, std::nullopt);
  return cdist_backward(symmetric, self, self, p, full);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
  m.impl("_pdist_forward", pdist_forward);
  m.impl("_pdist_backward", pdist_backward);
}

}  // namespace torchneuron
