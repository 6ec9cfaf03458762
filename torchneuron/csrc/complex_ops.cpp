// Complex ops composed from the runtime's real kernels, on the real and
// imaginary parts (view_as_real of each operand, one plane per part): the
// complex product as four real products and two sums, polar as cos/sin and
// products, torch.complex as two plane copies. Every step is a native
// neuron op; nothing here touches elements.
// The cases they do not cover (a CPU scalar operand, mixed dtypes, type
// promotion) keep to the counted CPU fallback.
#include "neuron_device.h"
#include "complex_ops.h"
#include "complex_add.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {


// out = a * b for complex a, b of one dtype (out of their broadcast shape).
void complex_mul_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  at::Tensor ar = complex_plane(a, 0), ai = complex_plane(a, 1), br = complex_plane(b, 0), bi = complex_plane(b, 1);
  at::Tensor re = complex_plane(out, 0), im = complex_plane(out, 1);
  at::mul_out(re, ar, br);
  re.sub_(at::mul(ai, bi));
  at::mul_out(im, ar, bi);
  im.add_(at::mul(ai, br));
}

bool plain_complex(const at::Tensor& t, at::ScalarType dtype) {
  return is_neuron(t) && t.scalar_type() == dtype && !t.is_conj() && !t.is_neg();
}

}  // namespace

bool try_native_complex_mul(torch::jit::Stack* stack) {
  if (stack->size() < 2 || !(*stack)[stack->size() - 2].isTensor() ||
      !(*stack)[stack->size() - 1].isTensor())
    return false;
  const at::Tensor a = (*stack)[stack->size() - 2].toTensor();
  const at::Tensor b = (*stack)[stack->size() - 1].toTensor();
  if (!a.defined() || !a.is_complex() || !plain_complex(b, a.scalar_type()) ||
      !plain_complex(a, a.scalar_type()) || a.device() != b.device())
    return false;
  NEURON_TRACK_OP("aten::mul.Tensor(complex)");
  c10::DeviceGuard guard(a.device());
  at::Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options());
  if (out.numel() > 0) complex_mul_into(out, a, b);
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, std::move(out));
  return true;
}

bool try_native_complex_add(torch::jit::Stack* stack, bool subtract) {
  // add.Tensor / sub.Tensor: (self, other, alpha)
  if (stack->size() < 3) return false;
  const c10::IValue* args = stack->data() + (stack->size() - 3);
  if (!args[0].isTensor() || !args[1].isTensor() || !args[2].isScalar()) return false;
  const at::Tensor a = args[0].toTensor(), b = args[1].toTensor();
  const c10::Scalar alpha = args[2].toScalar();
  if (!a.defined() || !a.is_complex() || !plain_complex(a, a.scalar_type()) ||
      !plain_complex(b, a.scalar_type()) || a.device() != b.device())
    return false;
  NEURON_TRACK_OP(subtract ? "aten::sub.Tensor(complex)" : "aten::add.Tensor(complex)");
  c10::DeviceGuard guard(a.device());
  // The CPU's a + alpha * b (a - alpha * b) with alpha a complex number,
  // real or not: one kernel (complex_add.cpp).
  check_complex_alpha(alpha, a.scalar_type());
  at::Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options());
  complex_add_into(out, a, b, alpha, subtract);
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(out));
  return true;
}

namespace {

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  at::ScalarType real = abs.scalar_type();
  if (is_neuron(abs) && is_neuron(angle) && is_neuron(out)) {
    // The CPU's dtype checks and messages (complex_check_dtype), raised here
    // rather than by the fallback.
    auto part = [](at::ScalarType t) { return t == at::kHalf || t == at::kFloat || t == at::kDouble; };
    TORCH_CHECK(part(real) && part(angle.scalar_type()),
                "Expected both inputs to be Half, Float or Double tensors but got ", real, " and ",
                angle.scalar_type());
    TORCH_CHECK(angle.scalar_type() == real, "Expected object of scalar type ", real, " but got scalar type ",
                angle.scalar_type(), " for second argument");
    TORCH_CHECK(out.scalar_type() == c10::toComplexType(real), "Expected object of scalar type ",
                c10::toComplexType(real), " but got scalar type ", out.scalar_type(), " for argument 'out'");
  }
  bool native = is_neuron(abs) && is_neuron(angle) && is_neuron(out) &&
                (real == at::kFloat || real == at::kDouble) && angle.scalar_type() == real &&
                out.scalar_type() == c10::toComplexType(real) && !out.is_conj() && !out.is_neg() &&
                abs.device() == angle.device() && abs.device() == out.device();
  if (!native) {
    torch::jit::Stack stack{abs, angle, out};
    run_through_fallback("aten::polar", "out", &stack);
    return out;
  }
  NEURON_TRACK_OP("aten::polar.out");
  c10::DeviceGuard guard(out.device());
  std::vector<int64_t> shape = at::infer_size(abs.sizes(), angle.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, abs);
  at::assert_no_partial_overlap(out, angle);
  at::Tensor re = complex_plane(out, 0), im = complex_plane(out, 1);
  at::Tensor wide_angle = angle.expand(shape), wide_abs = abs.expand(shape);
  at::cos_out(re, wide_angle);
  re.mul_(wide_abs);
  at::sin_out(im, wide_angle);
  im.mul_(wide_abs);
  return out;
}

// torch.complex: the parts copied into out's planes, broadcast.
at::Tensor& complex_out(const at::Tensor& real, const at::Tensor& imag, at::Tensor& out) {
  at::ScalarType part = real.scalar_type();
  if (is_neuron(real) && is_neuron(imag) && is_neuron(out)) {
    // The CPU's dtype checks and messages (complex_check_dtype), raised here.
    TORCH_CHECK(part == at::kHalf || part == at::kFloat || part == at::kDouble,
                "Expected both inputs to be Half, Float or Double tensors but got ", part, " and ",
                imag.scalar_type());
    TORCH_CHECK(imag.scalar_type() == part, "Expected object of scalar type ", part, " but got scalar type ",
                imag.scalar_type(), " for second argument");
    TORCH_CHECK(out.scalar_type() == c10::toComplexType(part), "Expected object of scalar type ",
                c10::toComplexType(part), " but got scalar type ", out.scalar_type(), " for argument 'out'");
  }
  bool native = is_neuron(real) && is_neuron(imag) && is_neuron(out) &&
                (part == at::kHalf || part == at::kFloat || part == at::kDouble) && imag.scalar_type() == part &&
                out.scalar_type() == c10::toComplexType(part) && !out.is_conj() && !out.is_neg() &&
                real.device() == imag.device() && real.device() == out.device();
  if (!native) {
    torch::jit::Stack stack{real, imag, out};
    run_through_fallback("aten::complex", "out", &stack);
    return out;
  }
  NEURON_TRACK_OP("aten::complex.out");
  c10::DeviceGuard guard(out.device());
  std::vector<int64_t> shape = at::infer_size(real.sizes(), imag.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, real);
  at::assert_no_partial_overlap(out, imag);
  complex_plane(out, 0).copy_(real.expand(shape));
  complex_plane(out, 1).copy_(imag.expand(shape));
  return out;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("polar.out", polar_out);
  m.impl("complex.out", complex_out);
}

}  // namespace torchneuron
