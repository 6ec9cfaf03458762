// ldexp(x, e) of a float16, bfloat16 or float32 x and an integer e, as the
// CPU computes it: std::ldexp per element (e converted to a C int), one
// rounding of the exact x * 2^e into x's dtype. ATen's composite for other
// devices multiplies by pow(2, e) computed in x's dtype, where 2^e itself
// overflows or underflows (float16: 2^-25 is 0, 2^20 is inf), so
// ldexp(-2, -25) gave -0 instead of -2^-24.
//
// Here x * 2^e is exact in float64 for every such x once e is clamped to
// [-400, 400] (beyond it the result is 0 or inf in these dtypes, as the
// clamped one is), and 2^e is built from its bits. float64 x and the other
// dtype pairs keep ATen's composite.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/ldexp_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "inplace_broadcast.h"
#include "op_tracking.h"
#include "runtime_limits.h"
#include "shape_common.h"

namespace torchneuron {
namespace {

bool exact_path(const at::Tensor& self, const at::Tensor& other) {
  const at::ScalarType t = self.scalar_type();
  return is_neuron(self) && is_neuron(other) && self.device() == other.device() &&
         (t == at::kHalf || t == at::kBFloat16 || t == at::kFloat) &&
         at::isIntegralType(other.scalar_type(), /*includeBool=*/false);
}

void check_exponent(const at::Tensor& self, const at::Tensor& other) {
  // the CPU's integer-exponent kernel has no bool exponent
  TORCH_CHECK_NOT_IMPLEMENTED(!(at::isFloatingType(self.scalar_type()) && other.scalar_type() == at::kBool),
                              "\"ldexp_cpu_exp\" not implemented for 'Bool'");
}

// x * 2^e in x's dtype, broadcast.
at::Tensor ldexp_exact(const at::Tensor& self, const at::Tensor& other) {
  c10::DeviceGuard guard(self.device());
  // e as a C int (wrapping, as the CPU's conversion), then clamped
  at::Tensor e = other.to(at::kInt).to(at::kLong).clamp(-400, 400);
  at::Tensor power = e.add(1023).bitwise_left_shift(52).view(at::kDouble);  // 2^e, a normal double
  return at::mul(self.to(at::kDouble), power).to(self.scalar_type());
}

// (each counts itself on either path: the composite's ops are native too)
at::Tensor ldexp(const at::Tensor& self, const at::Tensor& other) {
  NEURON_TRACK_OP("aten::ldexp.Tensor");
  check_exponent(self, other);
  if (!exact_path(self, other)) return at::native::ldexp(self, other);
  return ldexp_exact(self, other);
}

at::Tensor& ldexp_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  NEURON_TRACK_OP("aten::ldexp.out");
  check_exponent(self, other);
  // the CPU takes its std::ldexp path only into an out of self's dtype
  if (!exact_path(self, other) || !is_neuron(out) || out.device() != self.device() ||
      out.scalar_type() != self.scalar_type())
    return at::native::ldexp_out(self, other, out);
  at::Tensor result = ldexp_exact(self, other);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor& ldexp_(at::Tensor& self, const at::Tensor& other) {
  NEURON_TRACK_OP("aten::ldexp_");
  check_exponent(self, other);
  // (ATen's composite, whose mul_out would resize self, does not check it)
  check_inplace_broadcast(self.sizes(), {other.sizes()});
  if (!exact_path(self, other)) return at::native::ldexp_(self, other);
  self.copy_(ldexp_exact(self, other));
  return self;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("ldexp.Tensor", ldexp);
  m.impl("ldexp.out", ldexp_out);
  m.impl("ldexp_", ldexp_);
}

}  // namespace torchneuron
