// pow of complex tensors on the float planes (complex_math.h): the
// Tensor_Tensor, Tensor_Scalar and Scalar overloads with their out= and
// in-place forms, reached through try_native_complex_math's "pow" names.
//
// The CPU's cases, kept here: an exponent of 0 gives 1 everywhere (NaN
// base included) and 1 a copy; 1/2, -1/2 and -1 are sqrt, rsqrt and
// reciprocal, 2 and 3 are products z z and z z z, -2 the reciprocal of z z;
// every other exponent, and every tensor exponent, is exp(w log z). A zero
// base there is 0 for Re w > 0, inf + NaN i for Re w < 0 and NaN otherwise
// (0 ** 0 with tensor operands is NaN on the CPU too).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>

#include "complex_math.h"
#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace cmath {
namespace {

using namespace cmath;

// exp(w log z) with the zero base's values.
Planes pow_general(const Planes& z, const Planes& w) {
  const Planes t = multiply(w, log_of(z, 1.0));
  const Planes p = exp_of(t);
  const at::Tensor zero = z.re.eq(0).logical_and_(z.im.eq(0));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const at::Tensor pos = w.re.gt(0), neg = w.re.lt(0);
  const at::Tensor zero_re =
      at::where(pos, at::zeros_like(w.re), at::where(neg, at::full_like(w.re, inf), at::full_like(w.re, nan)));
  const at::Tensor zero_im = at::where(pos, at::zeros_like(w.re), at::full_like(w.re, nan));
  return {at::where(zero, zero_re, p.re), at::where(zero, zero_im, p.im)};
}

// z ** e for a number e, with the CPU's special exponents.
Planes pow_scalar(const Planes& z, c10::complex<double> e) {
  if (e.imag() == 0) {
    const double r = e.real();
    if (r == 0) return {at::ones_like(z.re), at::zeros_like(z.im)};
    if (r == 1) return {z.re.clone(), z.im.clone()};
    if (r == 0.5) return sqrt_of(z);
    if (r == -0.5) return reciprocal_of(sqrt_of(z));
    if (r == -1) return reciprocal_of(z);
    if (r == 2) return multiply(z, z);
    if (r == 3) return multiply(multiply(z, z), z);
    if (r == -2) return reciprocal_of(multiply(z, z));
  }
  const Planes w{at::full({}, e.real(), z.re.options()), at::full({}, e.imag(), z.re.options())};
  return pow_general(z, w);
}

c10::complex<double> complex_of(const c10::IValue& v) {
  const c10::Scalar s = v.isTensor() ? v.toTensor().item() : v.toScalar();
  return s.isComplex() ? s.toComplexDouble() : c10::complex<double>(s.toDouble(), 0.0);
}

bool is_number(const c10::IValue& v) {
  return v.isScalar() || (v.isTensor() && v.toTensor().defined() &&
                          v.toTensor().unsafeGetTensorImpl()->is_wrapped_number());
}

bool is_neuron_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() &&
         v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

}  // namespace

bool try_native_complex_pow(const std::string& name, torch::jit::Stack* stack) {
  // pow.Tensor_Tensor, pow_.Tensor, pow.Tensor_Tensor_out,
  // pow.Tensor_Scalar, pow_.Scalar, pow.Tensor_Scalar_out,
  // pow.Scalar, pow.Scalar_out
  const bool inplace = name.rfind("pow_.", 0) == 0;
  const bool has_out = name.size() > 4 && name.compare(name.size() - 4, 4, "_out") == 0;
  const bool scalar_base = name == "pow.Scalar" || name == "pow.Scalar_out";
  const bool scalar_exp = name == "pow.Tensor_Scalar" || name == "pow_.Scalar" || name == "pow.Tensor_Scalar_out";
  const size_t nargs = 2 + (has_out ? 1 : 0);
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  if (has_out && !is_neuron_tensor(args[2])) return false;
  // the operands: a neuron tensor and a number, or two neuron tensors (one
  // of them possibly a wrapped number)
  const c10::IValue& tensor_arg = scalar_base ? args[1] : args[0];
  if (!is_neuron_tensor(tensor_arg)) return false;
  const at::Tensor t = tensor_arg.toTensor();
  bool other_number = scalar_base || scalar_exp;
  if (!other_number) {
    if (is_number(args[1])) {
      other_number = true;
    } else if (!is_neuron_tensor(args[1]) || args[1].toTensor().device() != t.device()) {
      return false;  // the fallback raises the CPU's error
    }
  }
  if ((scalar_base || scalar_exp) && !is_number(scalar_base ? args[0] : args[1])) return false;
  at::ScalarType dtype;
  if (other_number) {
    const c10::IValue& num = scalar_base ? args[0] : args[1];
    const c10::Scalar s = num.isTensor() ? num.toTensor().item() : num.toScalar();
    dtype = at::result_type(t, s);
  } else {
    dtype = at::result_type(t, args[1].toTensor());
  }
  if (dtype != at::kComplexFloat && dtype != at::kComplexDouble) return false;
  at::Tensor target;
  if (has_out) target = args[2].toTensor();
  if (inplace) target = t;
  if (target.defined() &&
      (target.device() != t.device() || target.scalar_type() != dtype || target.is_conj() || target.is_neg()))
    return false;  // a cast the CPU refuses, or one it does: the fallback
  if (inplace && !other_number) check_inplace_broadcast(t.sizes(), {args[1].toTensor().sizes()});
  NEURON_TRACK_OP("aten::pow(complex)");
  c10::DeviceGuard guard(t.device());
  const at::TensorOptions options = t.options().dtype(dtype);
  const at::Tensor base = t.to(dtype).resolve_conj().resolve_neg();
  Planes result;
  if (scalar_exp || (other_number && !scalar_base)) {
    result = pow_scalar(planes_of(base), complex_of(args[1]));
  } else if (scalar_base) {
    const c10::complex<double> s = complex_of(args[0]);
    const at::Tensor sz = at::scalar_tensor(s, options);
    if (s == c10::complex<double>(1.0, 0.0)) {  // 1 ** w is 1 on the CPU
      result = {at::ones_like(complex_plane(base, 0)), at::zeros_like(complex_plane(base, 1))};
    } else {
      result = pow_general(planes_of(sz), planes_of(base));
    }
  } else {
    const at::Tensor e = args[1].toTensor().to(dtype).resolve_conj().resolve_neg();
    result = pow_general(planes_of(base), planes_of(e));
  }
  at::Tensor out = assemble(result, options, target.defined() ? &target : nullptr);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(out));
  return true;
}

}  // namespace cmath
}  // namespace torchneuron
