// Ops built from other native ops: they have no kernel of their own and no
// element loop here; each step launches a native kernel.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/util/MathConstants.h>
#include <torch/library.h>

#include "complex32.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// The gradient of unfold. The k-th element of every window comes from the
// positions k, k + step, k + 2 step ... of dim, so the gradient is one
// strided add per k; such a slice never overlaps itself, while the windows
// may overlap each other (step < size). float16/bfloat16 gradients add up
// in float32 and round once, as the CPU kernel does.
at::Tensor unfold_backward(const at::Tensor& grad, at::IntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  NEURON_TRACK_OP("aten::unfold_backward");
  // The CPU's checks, in its order and with its exception types.
  TORCH_CHECK_VALUE(step > 0, "step is ", step, " but must be > 0");
  TORCH_CHECK(size >= 0, "size is ", size, " but must be >= 0");
  if (input_sizes.empty()) return grad.reshape({}).clone();  // a 0-d input: one window of one
  dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  const bool reduced = grad.scalar_type() == at::kHalf || grad.scalar_type() == at::kBFloat16;
  at::Tensor sums = at::zeros(input_sizes, grad.options().dtype(reduced ? at::kFloat : grad.scalar_type()));
  const int64_t windows = grad.size(dim);
  if (windows > 0 && grad.numel() > 0)
    for (int64_t k = 0; k < size; k++)
      sums.slice(dim, k, k + (windows - 1) * step + 1, step).add_(grad.select(-1, k));
  return reduced ? sums.to(grad.scalar_type()) : sums;
}

// self[mask] = the first mask.sum() elements of source, in order: the
// count is read back (a synchronisation, as for masked_select), then the
// positions are written by index_put_ with the broadcast mask.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  NEURON_TRACK_OP("aten::masked_scatter_");
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got ",
              self.scalar_type(), " and ", source.scalar_type());
  TORCH_CHECK(self.device() == mask.device() && self.device() == source.device(),
              "masked_scatter_: expected self, mask and source on the same device, got ",
              self.device(), ", ", mask.device(), " and ", source.device());
  at::Tensor full_mask = mask.expand(self.sizes());
  const int64_t count = full_mask.sum().item<int64_t>();
  TORCH_CHECK(count <= source.numel(), "masked_scatter_: Number of elements of source < number of ones in mask");
  if (count == 0) return self;
  self.index_put_({full_mask}, source.reshape({-1}).narrow(0, 0, count));
  return self;
}

// The angle of a real number: pi for negative values, NaN for NaN, 0
// otherwise (-0 included), in the input's floating dtype or the default
// one for integers and bools, as the CPU computes it. A complex number's
// angle is atan2 of its imaginary and real planes (view_as_real).
at::Tensor angle(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::angle");
  refuse_complex32(self, "angle_cpu");
  if (self.is_complex()) {
    const at::Tensor planes = at::view_as_real(self.resolve_conj().resolve_neg());
    return at::atan2(planes.select(-1, 1), planes.select(-1, 0));
  }
  const at::ScalarType dtype =
      at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::typeMetaToScalarType(at::get_default_dtype())
                                                                 : self.scalar_type();
  const at::Tensor x = self.to(dtype);
  return at::where(x.lt(0), c10::pi<double>, at::where(x.isnan(), x, at::zeros({}, x.options())));
}

at::Tensor& angle_out(const at::Tensor& self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::angle.out");
  const at::Tensor result = torchneuron::angle(self);
  TORCH_CHECK(at::canCast(result.scalar_type(), out.scalar_type()), "result type ", result.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("unfold_backward", unfold_backward);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
  m.impl("masked_scatter_", masked_scatter_);
}

}  // namespace torchneuron
