// histc on the runtime's HISTC op (neuronrt/ops/reduce.h). The range is
// settled here as PyTorch's CPU settles it: min == max takes the data's
// extrema (a synchronisation, as on the CPU), an empty range widens by one
// on each side, and a range that is not finite or not increasing is an
// error at the call.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>

#include "index_launch.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

at::Tensor& histc_into(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                       at::Tensor& out) {
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histc: input tensor and hist tensor should have the ",
              "same dtype, but got input ", self.scalar_type(), " and hist ", out.scalar_type());
  check_devices("histc", self, {out});
  double left = min.to<double>(), right = max.to<double>();
  if (left == right && self.numel() > 0) {
    auto [lo, hi] = at::aminmax(self);
    at::Tensor both = at::stack({lo, hi}).to(at::kDouble).cpu();
    left = both[0].item<double>();
    right = both[1].item<double>();
  }
  if (left == right) {
    left -= 1;
    right += 1;
  }
  TORCH_CHECK(std::isfinite(left) && std::isfinite(right), "torch.histc: range of [", left, ", ", right,
              "] is not finite");
  TORCH_CHECK(left < right, "torch.histc: max must be larger than min");
  // After the range checks, as on the CPU: an integer input with min > max
  // is told about the range first, then (the CPU writes the bin edges into a
  // tensor of the input's dtype with linspace) about edges its dtype cannot
  // hold (float16 too), and only then that histc has no integer kernel.
  if (self.scalar_type() == at::kBool) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"linspace_cpu\" not implemented for 'Bool'");
  }
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false) || self.scalar_type() == at::kHalf) {
    AT_DISPATCH_INTEGRAL_TYPES_AND(at::kHalf, self.scalar_type(), "histc", [&] {
      (void)at::Scalar(left).to<scalar_t>();
      (void)at::Scalar(right).to<scalar_t>();
    });
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) && has_runtime_dtype(self.scalar_type()),
                              "\"histogram_cpu\" not implemented for '", toString(self.scalar_type()), "'");
  at::native::resize_output(out, {bins});
  nrt_op op{};
  op.code = NRT_OP_HISTC;
  op.num_outputs = 1;
  op.num_operands = 2;
  op.operands[0] = to_view(out, "histc");
  op.operands[1] = to_view(self, "histc");
  op.num_scalars = 3;
  op.scalars[0].i = bins;
  op.scalars[1].is_float = 1;
  op.scalars[1].f = left;
  op.scalars[2].is_float = 1;
  op.scalars[2].f = right;
  launch(self.device().index(), op);
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  NEURON_TRACK_OP("aten::histc");
  at::Tensor out = at::empty({0}, self.options());
  return histc_into(self, bins, min, max, out);
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  NEURON_TRACK_OP("aten::histc.out");
  return histc_into(self, bins, min, max, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
}

}  // namespace torchneuron
