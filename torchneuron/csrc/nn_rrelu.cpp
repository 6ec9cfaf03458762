// rrelu_with_noise (functional, in-place, out=), composed of native
// kernels. Training: every element that is not positive is multiplied by a
// slope drawn uniformly from [lower, upper] (from the given generator) and
// the slopes are written to `noise` (1 for the positive elements, as on the
// CPU); evaluation: leaky_relu with the mean slope, noise untouched. The
// draws differ from the CPU's (which draws only for the non-positive
// elements, in order), as any two devices' random streams do.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_rrelu(const at::Tensor& self, const at::Tensor& noise, const char* cpu_name) {
  TORCH_CHECK(self.sizes() == noise.sizes(), "noise tensor shape must match self tensor shape. Got self.shape = ",
              self.sizes(), " noise.shape = ", noise.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", cpu_name, "\" not implemented for '",
                              at::toString(self.scalar_type()), "'");
}

// self times the slopes, into out (which may be self).
at::Tensor& rrelu_into(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                       bool training, std::optional<at::Generator> generator, at::Tensor& out) {
  if (!training) {
    const double slope = (lower.to<double>() + upper.to<double>()) / 2;
    return at::leaky_relu_out(out, self, slope);
  }
  TORCH_CHECK(lower.to<double>() <= upper.to<double>(),
              "Expected from <= to to be true, but got false.  (Could this error message be improved?  If so, "
              "please report an enhancement request to PyTorch.)");
  noise.uniform_(lower.to<double>(), upper.to<double>(), generator);
  noise.masked_fill_(self > 0, 1);
  return at::mul_out(out, self, noise);
}

at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                 const at::Scalar& upper, bool training, std::optional<at::Generator> generator,
                                 at::Tensor& out) {
  NEURON_TRACK_OP("aten::rrelu_with_noise.out");
  check_rrelu(self, noise, "rrelu_with_noise_out_cpu");
  at::native::resize_output(out, self.sizes());
  return rrelu_into(self, noise, lower, upper, training, std::move(generator), out);
}

at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  NEURON_TRACK_OP("aten::rrelu_with_noise");
  check_rrelu(self, noise, "rrelu_with_noise_out_cpu");
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  return rrelu_into(self, noise, lower, upper, training, std::move(generator), out);
}

at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                              bool training, std::optional<at::Generator> generator) {
  NEURON_TRACK_OP("aten::rrelu_with_noise_");
  check_rrelu(self, noise, "rrelu_with_noise_out_cpu");
  return rrelu_into(self, noise, lower, upper, training, std::move(generator), self);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("rrelu_with_noise", rrelu_with_noise);
  m.impl("rrelu_with_noise_", rrelu_with_noise_);
  m.impl("rrelu_with_noise.out", rrelu_with_noise_out);
}

}  // namespace torchneuron
