// neg, abs, angle and eq/ne of complex tensors in their functional, out=
// and in-place forms, on the real view: neg negates both planes, abs and
// angle are hypot and atan2 of the planes, and two numbers are equal when
// both parts are. Every step is a native neuron op. abs and angle write
// into an out= of another dtype through the native conversion copy, as the
// CPU casts; neg, and abs into a complex out=, raise the CPU's error for
// any dtype but self's. Calls these do not cover (a tensor on another
// device, an out= the CPU refuses to cast into) return false for the
// counted fallback, which raises the CPU's error.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <string>

#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

// The three forms an overload name spells: "neg", "neg_", "neg.out",
// "eq.Tensor", "eq_.Tensor", "eq.Tensor_out".
struct Form {
  std::string base;
  bool inplace = false, has_out = false;
};

Form form_of(const std::string& name) {
  const size_t dot = name.find('.');
  Form f{name.substr(0, dot)};
  const std::string variant = dot == std::string::npos ? "" : name.substr(dot + 1);
  f.inplace = !f.base.empty() && f.base.back() == '_';
  if (f.inplace) f.base.pop_back();
  f.has_out = variant == "out" || variant == "Tensor_out";
  return f;
}

bool neuron_complex(const c10::IValue& v) {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  return t.defined() && t.is_complex() && t.scalar_type() != at::kComplexHalf &&
         t.device().type() == c10::DeviceType::PrivateUse1;
}

// A tensor the result is written into (self in place, out=): on the
// device, without conjugate or negative bits (those views' planes are not
// what they show), in a dtype the result casts to as the CPU allows.
bool writable(const at::Tensor& t, const c10::Device& device, at::ScalarType result) {
  return t.defined() && t.device() == device && !t.is_conj() && !t.is_neg() && at::canCast(result, t.scalar_type());
}

// The result into out= (resized as out= resizes, cast by the copy), or as is.
at::Tensor deliver(const at::Tensor& result, const at::Tensor* out) {
  if (!out) return result;
  at::Tensor target = *out;
  at::native::resize_output(target, result.sizes());
  if (target.numel() > 0) target.copy_(result);
  return target;
}

// The CPU's unary ops that keep the dtype (neg, abs into a complex out=)
// write only into an out= of self's dtype: complex64 and complex128 do not
// mix, though either could hold the other's values.
void check_out_dtype_is_self(const at::Tensor& out, const at::Tensor& self) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
              self.scalar_type());
}

void replace_args(torch::jit::Stack* stack, size_t nargs, at::Tensor result) {
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

bool try_native_complex_neg(const std::string& name, torch::jit::Stack* stack) {
  const Form f = form_of(name);
  const size_t nargs = f.has_out ? 2 : 1;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (!neuron_complex(args[0])) return false;
  const at::Tensor self = args[0].toTensor();
  const c10::Device device = self.device();
  if (f.inplace && !writable(self, device, self.scalar_type())) return false;
  if (f.has_out && args[1].isTensor() && args[1].toTensor().device() == device)
    check_out_dtype_is_self(args[1].toTensor(), self);
  if (f.has_out && (!args[1].isTensor() || !writable(args[1].toTensor(), device, self.scalar_type()))) return false;
  NEURON_TRACK_OP("aten::neg(complex)");
  c10::DeviceGuard guard(device);
  if (f.inplace) {
    at::view_as_real(self).neg_();
    replace_args(stack, nargs, self);
    return true;
  }
  const at::Tensor negated = at::view_as_complex(at::neg(at::view_as_real(self.resolve_conj().resolve_neg())));
  replace_args(stack, nargs, deliver(negated, f.has_out ? &args[1].toTensor() : nullptr));
  return true;
}

bool try_native_complex_unary_real(const std::string& name, torch::jit::Stack* stack) {
  const Form f = form_of(name);
  const size_t nargs = f.has_out ? 2 : 1;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (!neuron_complex(args[0])) return false;
  const at::Tensor self = args[0].toTensor();
  const at::ScalarType real = c10::toRealValueType(self.scalar_type());
  // The CPU's refusal (abs_ would have to write a real number into a complex self).
  TORCH_CHECK(!f.inplace, "In-place ", f.base, " is not supported for complex tensors.");
  const bool angle = f.base == "angle";
  if (f.has_out && args[1].isTensor() && args[1].toTensor().device() == self.device()) {
    const at::Tensor& out = args[1].toTensor();
    // abs into a complex out= is the CPU's plain unary op (angle's is not);
    // otherwise the real result casts as the CPU casts it, or not at all.
    if (!angle && out.is_complex()) check_out_dtype_is_self(out, self);
    TORCH_CHECK(at::canCast(real, out.scalar_type()), "result type ", real,
                " can't be cast to the desired output type ", out.scalar_type());
  }
  if (f.has_out && (!args[1].isTensor() || !writable(args[1].toTensor(), self.device(), real))) return false;
  NEURON_TRACK_OP(angle ? "aten::angle(complex)" : "aten::abs(complex)");
  c10::DeviceGuard guard(self.device());
  const at::Tensor z = self.resolve_conj().resolve_neg();
  const at::Tensor re = complex_plane(z, 0), im = complex_plane(z, 1);
  const at::Tensor result = angle ? at::atan2(im, re) : at::hypot(re, im);
  replace_args(stack, nargs, deliver(result, f.has_out ? &args[1].toTensor() : nullptr));
  return true;
}

bool try_native_complex_compare(const std::string& name, torch::jit::Stack* stack) {
  const Form f = form_of(name);
  const size_t nargs = f.has_out ? 3 : 2;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (!neuron_complex(args[0]) || !neuron_complex(args[1])) return false;
  const at::Tensor a = args[0].toTensor(), b = args[1].toTensor();
  const c10::Device device = a.device();
  if (b.scalar_type() != a.scalar_type() || b.device() != device) return false;
  if (f.inplace && !writable(a, device, a.scalar_type())) return false;
  if (f.has_out && (!args[2].isTensor() || !writable(args[2].toTensor(), device, at::kBool))) return false;
  if (f.inplace) check_inplace_broadcast(a.sizes(), {b.sizes()});
  const bool not_equal = f.base == "ne";
  NEURON_TRACK_OP(not_equal ? "aten::ne.Tensor(complex)" : "aten::eq.Tensor(complex)");
  c10::DeviceGuard guard(device);
  // Equal when both parts are: per-plane comparisons, then over the last dim.
  const at::Tensor ra = at::view_as_real(a.resolve_conj().resolve_neg());
  const at::Tensor rb = at::view_as_real(b.resolve_conj().resolve_neg());
  const at::Tensor result = not_equal ? at::ne(ra, rb).any(-1) : at::eq(ra, rb).all(-1);
  if (f.inplace) {
    if (a.numel() > 0) a.copy_(result);  // 1 + 0i where true, as the CPU writes it
    replace_args(stack, nargs, a);
    return true;
  }
  replace_args(stack, nargs, deliver(result, f.has_out ? &args[2].toTensor() : nullptr));
  return true;
}

}  // namespace torchneuron
