// addcmul and addcdiv of complex tensors on the planes, in the CPU's order
// of operations: self + (value t1) * t2 and self + (value t1) / t2, value
// first rounded to the dtype as the CPU casts it, the quotient in Smith's
// form (cmath::divide). Functional, out= and in-place forms; every step is
// a native op on a float32 or float64 plane.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <string>

#include "complex_math.h"
#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

using cmath::Planes;

bool neuron_of(const c10::IValue& v, at::ScalarType dtype, c10::Device device) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() == dtype &&
         v.toTensor().device() == device;
}


}  // namespace

bool try_native_complex_addc(const std::string& name, torch::jit::Stack* stack) {
  // addcmul, addcmul_, addcmul.out (addcdiv likewise): (self, t1, t2, value[, out])
  const bool divide = name.rfind("addcdiv", 0) == 0;
  const bool inplace = name.size() > 7 && name[7] == '_';
  const bool has_out = name.size() > 4 && name.compare(name.size() - 4, 4, ".out") == 0;
  const size_t nargs = has_out ? 5 : 4;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (!args[0].isTensor() || !args[3].isScalar()) return false;
  const at::Tensor self = args[0].toTensor();
  if (!self.defined() || !self.is_complex() || self.scalar_type() == at::kComplexHalf ||
      self.device().type() != c10::DeviceType::PrivateUse1)
    return false;
  const at::ScalarType dtype = self.scalar_type();
  const c10::Device device = self.device();
  // mixed dtypes and devices: the CPU's promotion and errors, from the fallback
  if (!neuron_of(args[1], dtype, device) || !neuron_of(args[2], dtype, device)) return false;
  const at::Tensor t1 = args[1].toTensor(), t2 = args[2].toTensor();
  at::Tensor target;
  if (has_out) {
    if (!neuron_of(args[4], dtype, device)) return false;
    target = args[4].toTensor();
  }
  if (inplace) target = self;
  if (target.defined() && (target.is_conj() || target.is_neg())) return false;
  if (inplace) check_inplace_broadcast(self.sizes(), {t1.sizes(), t2.sizes()});
  if (divide)
    NEURON_TRACK_OP("aten::addcdiv(complex)");
  else
    NEURON_TRACK_OP("aten::addcmul(complex)");
  c10::DeviceGuard guard(device);
  c10::complex<double> value = args[3].toScalar().toComplexDouble();
  if (dtype == at::kComplexFloat) value = c10::complex<double>(static_cast<c10::complex<float>>(value));
  const Planes scaled = cmath::times_number(cmath::resolved_planes(t1), value);
  const Planes p = divide ? cmath::divide(scaled, cmath::resolved_planes(t2)) : cmath::multiply(scaled, cmath::resolved_planes(t2));
  const Planes s = cmath::resolved_planes(self);
  const Planes r{s.re + p.re, s.im + p.im};
  at::Tensor result = cmath::assemble(r, self.options(), target.defined() ? &target : nullptr);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace torchneuron
