// lerp of complex tensors on the planes, in the CPU's two forms: with
// d = end - self, self + w d where |w| < 0.5 and end - d (1 - w) elsewhere
// (the form that is exact at the end it is near). A Python-number weight
// picks its form once; a tensor weight picks per element. Every step is a
// native op on a float32 or float64 plane; nothing here touches elements.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <string>

#include "complex_math.h"
#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

using cmath::Planes;

bool neuron_of(const at::Tensor& t, at::ScalarType dtype, c10::Device device) {
  return t.defined() && t.scalar_type() == dtype && t.device() == device;
}

Planes sub_planes(const Planes& x, const Planes& y) { return {x.re - y.re, x.im - y.im}; }
Planes add_planes(const Planes& x, const Planes& y) { return {x.re + y.re, x.im + y.im}; }


}  // namespace

bool try_native_complex_lerp(const std::string& name, torch::jit::Stack* stack) {
  // lerp.Scalar, lerp_.Scalar, lerp.Scalar_out, lerp.Tensor, lerp_.Tensor, lerp.Tensor_out
  const bool inplace = name.rfind("lerp_", 0) == 0;
  const bool tensor_weight = name.find(".Tensor") != std::string::npos;
  const bool has_out = name.size() > 4 && name.compare(name.size() - 4, 4, "_out") == 0;
  const size_t nargs = has_out ? 4 : 3;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (!args[0].isTensor() || !args[1].isTensor()) return false;
  const at::Tensor self = args[0].toTensor(), end = args[1].toTensor();
  if (!self.defined() || !self.is_complex() || self.scalar_type() == at::kComplexHalf ||
      self.device().type() != c10::DeviceType::PrivateUse1)
    return false;
  const at::ScalarType dtype = self.scalar_type();
  const c10::Device device = self.device();
  if (!neuron_of(end, dtype, device)) return false;  // the CPU's dtype errors come from the fallback
  at::Tensor weight;
  c10::complex<double> w_number;
  if (tensor_weight) {
    if (!args[2].isTensor() || !args[2].toTensor().defined()) return false;
    weight = args[2].toTensor();
    // a 0-d weight (on the host too, or of another dtype) is read as a
    // number by the CPU: converted to the inputs' dtype on the device
    if (weight.dim() == 0 && (weight.is_cpu() || weight.device() == device) &&
        weight.scalar_type() != at::kBool && weight.scalar_type() != at::kComplexHalf)
      weight = weight.to(device, dtype);
    if (!neuron_of(weight, dtype, device)) return false;
  } else {
    if (!args[2].isScalar()) return false;
    w_number = args[2].toScalar().toComplexDouble();
  }
  at::Tensor target;
  if (has_out) target = args[3].toTensor();
  if (inplace) target = self;
  if (target.defined() && (!neuron_of(target, dtype, device) || target.is_conj() || target.is_neg())) return false;
  if (inplace) check_inplace_broadcast(self.sizes(), {end.sizes(), weight.defined() ? weight.sizes() : self.sizes()});
  // Shapes that do not broadcast get the CPU's error here, before any work.
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), end.sizes());
  if (weight.defined()) (void)at::infer_size(shape, weight.sizes());
  native_op_counter("aten::lerp(complex)")->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  c10::DeviceGuard guard(device);
  const Planes s = cmath::resolved_planes(self), e = cmath::resolved_planes(end);
  const Planes d = sub_planes(e, s);
  Planes r;
  if (weight.defined()) {
    const Planes w = cmath::resolved_planes(weight);
    const Planes near_self = add_planes(s, cmath::multiply(w, d));
    const Planes near_end = sub_planes(e, cmath::multiply(d, {1 - w.re, -w.im}));
    const at::Tensor small = at::hypot(w.re, w.im).lt(0.5);
    r = {at::where(small, near_self.re, near_end.re), at::where(small, near_self.im, near_end.im)};
  } else {
    // the number as the dtype holds it, as the CPU casts it
    c10::complex<double> w = w_number;
    if (dtype == at::kComplexFloat) w = c10::complex<double>(static_cast<c10::complex<float>>(w_number));
    r = std::abs(w) < 0.5 ? add_planes(s, cmath::times_number(d, w)) : sub_planes(e, cmath::times_number(d, c10::complex<double>(1.0) - w));
  }
  at::Tensor result = cmath::assemble(r, self.options(), target.defined() ? &target : nullptr);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace torchneuron
