// where and masked_fill of complex tensors, on the real view: a complex
// tensor of shape S is a real tensor of shape S + [2] (view_as_real), so
// where(c, a, b) is the real where with the condition given a trailing
// size-1 dim, and masked_fill fills each part's plane with that part of the
// value. Selection copies bits, so the result is the CPU's exactly. Every
// step is a native neuron op.
//
// Autograd's complex formulas reach these (pow's and angle's backward mask
// the points where the derivative is undefined; sgn's masks zeros).
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

bool on_device(const at::Tensor& t, const c10::Device& device) { return t.defined() && t.device() == device; }

// A where/masked_fill operand on `device` in `dtype` with its conjugate and
// negative bits materialised; a 0-d CPU tensor (a wrapped Python number)
// is moved over, as CUDA takes CPU scalars. Nothing for any other tensor.
std::optional<at::Tensor> operand(const at::Tensor& t, const c10::Device& device, at::ScalarType dtype) {
  if (!t.defined()) return std::nullopt;
  if (t.device() != device && !(t.device().is_cpu() && t.dim() == 0)) return std::nullopt;
  return t.to(device, dtype).resolve_conj().resolve_neg();
}

// where.self (condition, self, other) and where.self_out (..., out).
bool try_where(torch::jit::Stack* stack, bool has_out) {
  const size_t nargs = has_out ? 4 : 3;
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  for (size_t k = 0; k < nargs; k++)
    if (!args[k].isTensor()) return false;
  const at::Tensor cond = args[0].toTensor(), a = args[1].toTensor(), b = args[2].toTensor();
  // the condition's dtype errors and uint8 warning are the fallback's
  if (!cond.defined() || cond.scalar_type() != at::kBool || cond.device().type() != c10::DeviceType::PrivateUse1 ||
      !a.defined() || !b.defined())
    return false;
  const c10::Device device = cond.device();
  const at::ScalarType dtype = at::result_type(a, b);
  if (!at::isComplexType(dtype) || dtype == at::kComplexHalf) return false;
  at::Tensor out;
  if (has_out) {
    out = args[3].toTensor();
    if (!on_device(out, device) || out.scalar_type() != dtype || out.is_conj() || out.is_neg()) return false;
  }
  c10::DeviceGuard guard(device);
  const std::optional<at::Tensor> x = operand(a, device, dtype), y = operand(b, device, dtype);
  if (!x || !y) return false;  // a tensor on another device: the fallback raises the CPU's error
  if (has_out)
    NEURON_TRACK_OP("aten::where.self_out(complex)");
  else
    NEURON_TRACK_OP("aten::where.self(complex)");
  at::Tensor result = at::view_as_complex(at::where(cond.unsqueeze(-1), at::view_as_real(*x), at::view_as_real(*y)));
  if (has_out) {
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    result = out;
  }
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
  return true;
}

// masked_fill of a real tensor with a complex value: the value converts to
// self's dtype as the CPU converts it (c10's checked conversion: an
// imaginary part is an overflow error), then the real fill runs natively.
bool masked_fill_real_with_complex(torch::jit::Stack* stack, const at::Tensor& self, const at::Tensor& mask,
                                   const c10::IValue& value, bool inplace) {
  c10::Scalar number;
  if (value.isScalar()) {
    number = value.toScalar();
  } else {
    const at::Tensor t = value.toTensor();
    TORCH_CHECK(t.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                t.dim(), " dimension(s).");
    number = t.item();  // the CPU reads the value on the host too
  }
  at::Scalar converted;
  AT_DISPATCH_V2(self.scalar_type(), "masked_fill", AT_WRAP([&] { converted = number.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  at::Tensor result = inplace ? self.masked_fill_(mask, converted) : self.masked_fill(mask, converted);
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
  return true;
}

// masked_fill(_).Scalar / .Tensor (self, mask, value).
bool try_masked_fill(torch::jit::Stack* stack, bool inplace) {
  if (stack->size() < 3) return false;
  const c10::IValue* args = stack->data() + (stack->size() - 3);
  if (!args[0].isTensor() || !args[1].isTensor()) return false;
  const at::Tensor self = args[0].toTensor(), mask = args[1].toTensor();
  const bool complex_value = (args[2].isScalar() && args[2].toScalar().isComplex()) ||
                             (args[2].isTensor() && args[2].toTensor().defined() && args[2].toTensor().is_complex());
  if (self.defined() && !self.is_complex() && self.device().type() == c10::DeviceType::PrivateUse1 &&
      on_device(mask, self.device()) && complex_value)
    return masked_fill_real_with_complex(stack, self, mask, args[2], inplace);
  if (!self.defined() || !self.is_complex() || self.scalar_type() == at::kComplexHalf ||
      self.device().type() != c10::DeviceType::PrivateUse1 || self.is_conj() || self.is_neg())
    return false;
  const c10::Device device = self.device();
  if (!on_device(mask, device) || mask.scalar_type() != at::kBool) return false;
  // the functional form broadcasts self with the mask
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const bool same_shape = shape == self.sizes().vec();
  c10::DeviceGuard guard(device);
  // the value's two parts, as numbers or as 0-d neuron tensors
  std::optional<c10::Scalar> re_number, im_number;
  at::Tensor re_tensor, im_tensor;
  if (args[2].isScalar()) {
    const c10::complex<double> v = args[2].toScalar().toComplexDouble();
    re_number = v.real();
    im_number = v.imag();
  } else if (args[2].isTensor()) {
    const at::Tensor value = args[2].toTensor();
    if (!value.defined() || value.dim() != 0) return false;  // the CPU's error
    const std::optional<at::Tensor> v = operand(value, device, self.scalar_type());
    if (!v) return false;
    const at::Tensor parts = at::view_as_real(*v);
    re_tensor = parts.select(0, 0);
    im_tensor = parts.select(0, 1);
  } else {
    return false;
  }
  // in place, a larger mask is the CPU's error (after the value's own)
  if (inplace) check_inplace_broadcast(self.sizes(), {mask.sizes()});
  if (inplace)
    NEURON_TRACK_OP("aten::masked_fill_(complex)");
  else
    NEURON_TRACK_OP("aten::masked_fill(complex)");
  at::Tensor result = inplace       ? self
                      : same_shape ? self.clone(at::MemoryFormat::Preserve)
                                   : self.expand(shape).contiguous();
  at::Tensor re = complex_plane(result, 0), im = complex_plane(result, 1);
  if (re_number) {
    re.masked_fill_(mask, *re_number);
    im.masked_fill_(mask, *im_number);
  } else {
    re.masked_fill_(mask, re_tensor);
    im.masked_fill_(mask, im_tensor);
  }
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace

bool try_native_complex_select(const std::string& name, torch::jit::Stack* stack) {
  if (name == "where.self") return try_where(stack, false);
  if (name == "where.self_out") return try_where(stack, true);
  if (name == "masked_fill_.Scalar" || name == "masked_fill_.Tensor") return try_masked_fill(stack, true);
  if (name == "masked_fill.Scalar" || name == "masked_fill.Tensor") return try_masked_fill(stack, false);
  return false;
}

}  // namespace torchneuron
