// torch.equal on neuron, composed of native ops: same sizes, and every
// element equal after type promotion (eq, then all). Reading the verdict is a
// synchronisation, as on CUDA. NaN equals nothing, as on the CPU.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "complex32.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

bool equal(const at::Tensor& self, const at::Tensor& other) {
  NEURON_TRACK_OP("aten::equal");
  refuse_complex32(self, "equal_notnan_cpu");
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  c10::DeviceGuard guard(self.device());
  return at::eq(self, other).all().item<bool>();
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("equal", torchneuron::equal);
}
