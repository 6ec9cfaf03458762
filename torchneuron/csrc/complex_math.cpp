// Complex elementwise math composed from the runtime's real kernels on the
// (real, imaginary) planes: division (Smith's scaled form), reciprocal,
// exp/exp2, log/log2/log10, sqrt/rsqrt, sin/cos/tan, sinh/cosh/tanh, sinc,
// sigmoid, silu; rsub as sub with its operands swapped.
// Each formula is the textbook one, with the cases where it would overflow
// or divide zero by zero taken apart (tanh's large real part, sqrt of 0, a
// real argument's zero imaginary part). Every step is a native op on a
// float32 or float64 plane; nothing here touches elements.
//
// The functional, out= and in-place overloads all come here from the
// pointwise table's fallback path (pointwise.cpp) with neuron tensors and
// Python numbers (real or complex) whose promoted dtype is complex; anything
// else (an out= of another dtype) keeps to the counted CPU fallback. add
// and sub (any alpha) run on complex_add.cpp's kernel instead of planes.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

#include "complex_add.h"
#include "complex_math.h"
#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace cmath {

Planes planes_of(const at::Tensor& z) { return {complex_plane(z, 0), complex_plane(z, 1)}; }

// (a + bi) / (c + di) in Smith's form, as the CPU computes it (numpy's
// algorithm): the ratio of the smaller to the larger of |c| and |d| keeps
// the products in range, and the quotient is a product with the inverse
// denominator. Dividing by 0 gives a / 0 and b / 0 (infinities or NaN).
Planes divide(const Planes& x, const Planes& y) {
  const at::Tensor &a = x.re, &b = x.im, &c = y.re, &d = y.im;
  const at::Tensor abs_c = c.abs(), abs_d = d.abs();
  const at::Tensor c_larger = abs_c.ge(abs_d), zero = abs_c.eq(0).logical_and_(abs_d.eq(0));
  // Both branches as one: with (p, q) = (c, d) where |c| >= |d| and (d, c)
  // elsewhere, rat = q / p and scale = 1 / (p + q rat); then
  //   |c| >= |d|: re = (a + b rat) scale, im = (b - a rat) scale
  //   |d| >  |c|: re = (b + a rat) scale, im = (b rat - a) scale
  // which are the branches' own roundings (a sum commutes; the difference
  // is taken in the branch's order, so an exact zero keeps the CPU's sign):
  // half the steps of computing both and selecting.
  const at::Tensor p = at::where(c_larger, c, d), q = at::where(c_larger, d, c);
  const at::Tensor u = at::where(c_larger, a, b), v = at::where(c_larger, b, a);
  const at::Tensor rat = q / p, scale = (p + q * rat).reciprocal();
  at::Tensor re = (u + v * rat) * scale;
  const at::Tensor u_rat = u * rat;
  at::Tensor im = at::where(c_larger, v - u_rat, u_rat - v) * scale;
  return {at::where(zero, a / abs_c, re), at::where(zero, b / abs_d, im)};
}

// exp(x + iy) = e^x cis y, with C99 Annex G's values (the CPU's, from the C
// library) where x is infinite and y is not finite: e^-inf cis y is 0 with
// y's sign on the imaginary part, e^inf cis y is inf + i NaN. Both come out
// of the same products when such a y is taken as a zero of its sign (0 cis
// +-0 = 0 +-0i; inf sin(+-0) = NaN).
Planes exp_of(const Planes& z) {
  const at::Tensor m = z.re.exp();
  const at::Tensor y = at::where(z.re.isinf(), z.im.nan_to_num(0.0, 0.0, 0.0).copysign_(z.im), z.im);
  // exp(x + 0i) = exp(x) + 0i even where exp(x) is infinite
  return {m * y.cos(), at::where(z.im.eq(0), z.im, m * y.sin())};
}

// log z, divided by log_base for log2 and log10: the CPU divides both
// parts by ln 2 or ln 10 (a product with the reciprocal rounds differently
// in a third of the cases).
Planes log_of(const Planes& z, double log_base) {
  at::Tensor re = at::hypot(z.re, z.im).log(), im = at::atan2(z.im, z.re);
  if (log_base != 1.0) re = re / log_base, im = im / log_base;
  return {re, im};
}

// The principal square root: t = sqrt((|z| + |a|) / 2); for a >= 0 it is
// t + i b / (2t), below |b| / (2t) + i copysign(t, b). sqrt(0) is 0 with
// b's sign. An infinite b gives inf + ib whatever a is (C99 Annex G, the
// CPU's value; the formula's inf / inf would be NaN).
Planes sqrt_of(const Planes& z) {
  const at::Tensor t = ((at::hypot(z.re, z.im) + z.re.abs()) * 0.5).sqrt();
  const at::Tensor half = z.im / (t * 2);
  const at::Tensor nonneg = z.re.ge(0);
  const at::Tensor zero = t.eq(0), im_inf = z.im.isinf();
  at::Tensor re = at::where(nonneg, t, half.abs());
  at::Tensor im = at::where(nonneg, half, at::copysign(t, z.im));
  re = at::where(zero, at::zeros_like(t), re);
  im = at::where(zero.logical_or_(im_inf), z.im, im);
  return {at::where(im_inf, std::numeric_limits<double>::infinity(), re), im};
}

Planes reciprocal_of(const Planes& z) {
  return divide({at::ones_like(z.re), at::zeros_like(z.im)}, z);
}

Planes multiply(const Planes& x, const Planes& y) {
  return {x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
}

// Writes the planes into a complex tensor of their broadcast shape: out
// (resized as out= resizes) when given, else a new one.
at::Tensor assemble(const Planes& p, const at::TensorOptions& options, const at::Tensor* out) {
  const std::vector<int64_t> shape = at::infer_size(p.re.sizes(), p.im.sizes());
  at::Tensor result = out ? *out : at::empty(shape, options);
  if (out) at::native::resize_output(result, shape);
  if (result.numel() > 0) {
    complex_plane(result, 0).copy_(p.re.expand(shape));
    complex_plane(result, 1).copy_(p.im.expand(shape));
  }
  return result;
}

}  // namespace cmath

namespace {

using namespace cmath;

Planes sinh_cosh(const Planes& z, bool cosh) {
  const at::Tensor sh = z.re.sinh(), ch = z.re.cosh(), s = z.im.sin(), c = z.im.cos();
  // sinh(a + bi) = sinh a cos b + i cosh a sin b; cosh = cosh a cos b + i sinh a sin b
  at::Tensor re = (cosh ? ch : sh) * c;
  at::Tensor im = at::where(z.im.eq(0), z.im * (cosh ? sh : ch).sign(), (cosh ? sh : ch) * s);
  return {re, im};
}

// tanh(a + bi) = (sinh a cosh a + i sin b cos b) / (sinh^2 a + cos^2 b):
// the denominator is a sum of squares, so it does not cancel near the
// poles (a near 0, b near pi/2; tan's too, tan z = -i tanh iz) as
// cosh 2a + cos 2b does. A zero part of z stays in the result (tanh of a
// real or an imaginary number). Beyond |a| = 20 tanh a is +-1 in float64
// as in float32 and sinh^2 a would overflow: there the imaginary part is
// 4 sin b cos b e^-2|a| (a signed zero at infinite a); an infinite or NaN
// b gives NaN unless a is infinite (C99 Annex G, the CPU's values).
Planes tanh_of(const Planes& z) {
  const at::Tensor &a = z.re, &b = z.im;
  const at::Tensor sh = a.sinh(), s = b.sin(), c = b.cos();
  const at::Tensor den = sh * sh + c * c, sc = s * c;
  const at::Tensor re_near = at::where(a.eq(0), a, sh * a.cosh() / den);
  const at::Tensor im_near = at::where(b.eq(0), b, sc / den);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const at::Tensor b_finite = b.isfinite(), a_inf = a.isinf();
  const at::Tensor re_far = at::where(b_finite.logical_or(a_inf), at::ones_like(a).copysign_(a), nan);
  const at::Tensor im_far = at::where(b_finite, sc * 4 * (a.abs() * -2).exp(),
                                      at::where(a_inf, at::zeros_like(b).copysign_(b), nan));
  const at::Tensor large = a.abs().gt(20);
  return {at::where(large, re_far, re_near), at::where(large, im_far, im_near)};
}


Planes sin_of(const Planes& z) { return times_minus_i(sinh_cosh(times_i(z), false)); }

// sinc z = sin(pi z) / (pi z), and 1 at z = 0, as the CPU defines it (pi z
// scales both parts by pi).
Planes sinc_of(const Planes& z) {
  const double pi = 3.14159265358979323846;
  const Planes product{z.re * pi, z.im * pi};
  const Planes q = divide(sin_of(product), product);
  const at::Tensor zero = z.re.eq(0).logical_and_(z.im.eq(0));
  return {at::where(zero, at::ones_like(q.re), q.re), at::where(zero, at::zeros_like(q.im), q.im)};
}

using Unary = std::function<Planes(const Planes&)>;

const std::unordered_map<std::string, Unary>& unary_table() {
  static const std::unordered_map<std::string, Unary> table = {
      {"exp", exp_of},
      // 2^z = exp(ln 2 z), the CPU's identity (there is no complex exp2)
      {"exp2", [](const Planes& z) { return exp_of({z.re * 0.69314718055994531, z.im * 0.69314718055994531}); }},
      {"sinc", sinc_of},
      {"log", [](const Planes& z) { return log_of(z, 1.0); }},
      {"log2", [](const Planes& z) { return log_of(z, 0.69314718055994531); }},
      {"log10", [](const Planes& z) { return log_of(z, 2.3025850929940457); }},
      {"sqrt", sqrt_of},
      {"rsqrt", [](const Planes& z) { return reciprocal_of(sqrt_of(z)); }},
      {"reciprocal", reciprocal_of},
      {"sinh", [](const Planes& z) { return sinh_cosh(z, false); }},
      {"cosh", [](const Planes& z) { return sinh_cosh(z, true); }},
      {"tanh", tanh_of},
      // sin z = -i sinh(i z), cos z = cosh(i z), tan z = -i tanh(i z)
      {"sin", sin_of},
      {"cos", [](const Planes& z) { return sinh_cosh(times_i(z), true); }},
      {"tan", [](const Planes& z) { return times_minus_i(tanh_of(times_i(z))); }},
      {"asin", asin_of},
      {"acos", acos_of},
      {"atan", atan_of},
      {"asinh", asinh_of},
      {"acosh", acosh_of},
      {"atanh", atanh_of},
      {"log1p", log1p_of},
      {"expm1", expm1_of},
      {"sgn", sgn_of},
      // silu z = z / (1 + exp(-z)), the CPU's complex form
      {"silu",
       [](const Planes& z) {
         const Planes e = exp_of({-z.re, -z.im});
         return divide(z, {e.re + 1, e.im});
       }},
      {"sigmoid",
       [](const Planes& z) {
         const Planes e = exp_of({-z.re, -z.im});
         return divide({at::ones_like(e.re), at::zeros_like(e.im)}, {e.re + 1, e.im});
       }},
  };
  return table;
}

Planes conj_of(const Planes& z) { return {z.re, -z.im}; }

// Binary ops on planes (add and sub are complex_add.cpp's kernel).
using Binary = std::function<Planes(const Planes&, const Planes&)>;

const std::unordered_map<std::string, Binary>& binary_table() {
  static const std::unordered_map<std::string, Binary> table = {
      {"div", [](const Planes& x, const Planes& y) { return divide(x, y); }},
      {"mul", [](const Planes& x, const Planes& y) { return multiply(x, y); }},
      {"logaddexp", [](const Planes& x, const Planes& y) { return logaddexp_of(x, y); }},
      // autograd's complex gradients: grad * conj(f'(z)), f' from the output y
      {"sigmoid_backward", [](const Planes& g, const Planes& y) {
         return multiply(g, conj_of(multiply({1 - y.re, -y.im}, y)));
       }},
      // silu's, from its input x as the CPU's kernel: s = 1 / (1 + e^-x),
      // grad * s * (1 + x (1 - s)), no conjugate
      {"silu_backward", [](const Planes& g, const Planes& x) {
         const Planes e = exp_of({-x.re, -x.im});
         const Planes s = divide({at::ones_like(e.re), at::zeros_like(e.im)}, {e.re + 1, e.im});
         const Planes t = multiply(x, {1 - s.re, -s.im});
         return multiply(multiply(g, s), {t.re + 1, t.im});
       }},
      {"tanh_backward", [](const Planes& g, const Planes& y) {
         const Planes y2 = multiply(y, y);
         return multiply(g, conj_of({1 - y2.re, -y2.im}));
       }},
  };
  return table;
}



}  // namespace

bool try_native_complex_math(const std::string& name, torch::jit::Stack* stack) {
  // name as the pointwise table spells it: "exp", "exp.out", "exp_",
  // "div.Tensor", "div.out", "div_.Tensor", "add.Tensor", ...
  if (name.rfind("pow", 0) == 0) return cmath::try_native_complex_pow(name, stack);
  if (name == "rsub.Tensor") {
    // rsub(self, other, alpha) = other - alpha * self: sub with the
    // operands swapped (rsub.Scalar arrives here with other a Python number)
    if (stack->size() < 3) return false;
    std::swap((*stack)[stack->size() - 3], (*stack)[stack->size() - 2]);
    if (try_native_complex_math("sub.Tensor", stack)) return true;
    std::swap((*stack)[stack->size() - 3], (*stack)[stack->size() - 2]);
    return false;
  }
  if (name == "eq.Scalar" || name == "ne.Scalar") {
    // a complex tensor against a number (prod's and cumprod's backward test
    // for zeros): equal when both parts are
    if (stack->size() < 2) return false;
    const c10::IValue* args = stack->data() + (stack->size() - 2);
    if (!args[0].isTensor() || !args[1].isScalar()) return false;
    at::Tensor self = args[0].toTensor();
    if (!self.defined() || self.device().type() != c10::DeviceType::PrivateUse1) return false;
    const c10::Scalar s = args[1].toScalar();
    if (!self.is_complex()) {
      // a real tensor against a complex number: compared in their common
      // dtype, the tensor converted to it first, as the CPU's iterator does
      if (!s.isComplex() || self.scalar_type() == at::kHalf || self.scalar_type() == at::kBool) return false;
      const at::ScalarType common = at::result_type(self, s);
      if (common != at::kComplexFloat && common != at::kComplexDouble) return false;
      self = self.to(common);
    }
    const c10::complex<double> v = s.isComplex() ? s.toComplexDouble() : c10::complex<double>(s.toDouble(), 0.0);
    native_op_counter(name == "eq.Scalar" ? "aten::eq.Scalar(complex)" : "aten::ne.Scalar(complex)")
        ->fetch_add(1, std::memory_order_relaxed);
    native_op_total.fetch_add(1, std::memory_order_relaxed);
    c10::DeviceGuard guard(self.device());
    const Planes z = planes_of(self.resolve_conj().resolve_neg());
    at::Tensor out = name == "eq.Scalar" ? z.re.eq(v.real()).logical_and_(z.im.eq(v.imag()))
                                         : z.re.ne(v.real()).logical_or_(z.im.ne(v.imag()));
    torch::jit::drop(*stack, 2);
    torch::jit::push(*stack, std::move(out));
    return true;
  }
  const size_t dot = name.find('.');
  std::string base = name.substr(0, dot);
  const std::string variant = dot == std::string::npos ? "" : name.substr(dot + 1);
  const bool inplace = !base.empty() && base.back() == '_';
  if (inplace) base.pop_back();
  const bool has_out = variant == "out" || variant == "grad_input";
  const Unary* unary = nullptr;
  const Binary* binary = nullptr;
  // add and sub: a + alpha * b with any alpha, on complex_add.cpp's kernel
  const bool alpha = base == "add" || base == "sub";
  const bool binary_variant = variant.empty() || variant == "Tensor" || variant == "Scalar" || has_out;
  if (auto u = unary_table().find(base); u != unary_table().end()) {
    if (!(variant.empty() || has_out)) return false;
    unary = &u->second;
  } else if (alpha) {
    if (!binary_variant) return false;
  } else if (auto b = binary_table().find(base); b != binary_table().end()) {
    if (!binary_variant) return false;
    binary = &b->second;
  } else {
    return false;
  }
  // .Scalar: the other operand is a number (a real one taken as
  // number + 0i), cast to the result's dtype as the CPU casts it.
  const bool scalar_other = variant == "Scalar";
  const size_t tensors = unary ? 1 : 2;
  const size_t nargs = tensors + (alpha ? 1 : 0) + (has_out ? 1 : 0);
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  for (size_t k = 0; k < tensors; k++) {
    if (scalar_other && k == 1) {
      if (!args[k].isScalar()) return false;
    } else if (!args[k].isTensor()) {
      return false;
    }
  }
  if (has_out && !args[nargs - 1].isTensor()) return false;
  if (alpha && !args[tensors].isScalar()) return false;
  // The operands: neuron tensors (one of them complex), a real Python
  // number, or a real .Scalar. The result's dtype is PyTorch's promotion of
  // them; every tensor is converted to it (natively), a number becomes
  // number + 0i, as the CPU takes them.
  const at::Tensor first = args[0].toTensor();
  if (!first.defined()) return false;
  // A Python number may come first: mul_.Scalar(self, 2) runs as
  // mul.out(2, self, out=self).
  const bool first_is_number = first.unsafeGetTensorImpl()->is_wrapped_number();
  const at::Tensor& on_device = first_is_number && !unary && !scalar_other ? args[1].toTensor() : first;
  if (!on_device.defined() || on_device.device().type() != c10::DeviceType::PrivateUse1) return false;
  if (first_is_number && inplace) return false;
  const c10::Device device = on_device.device();
  at::ScalarType dtype;
  if (unary) {
    dtype = first.scalar_type();
  } else if (scalar_other) {
    dtype = at::result_type(first, args[1].toScalar());
  } else {
    const at::Tensor second = args[1].toTensor();
    if (!second.defined()) return false;
    dtype = at::result_type(first, second);
  }
  if (dtype != at::kComplexFloat && dtype != at::kComplexDouble) return false;
  const at::TensorOptions options = on_device.options().dtype(dtype);  // not a leading number's CPU
  std::vector<at::Tensor> inputs;
  for (size_t k = 0; k < tensors; k++) {
    if (scalar_other && k == 1) {
      inputs.push_back(at::scalar_tensor(args[k].toScalar().toComplexDouble(), options));
      continue;
    }
    const at::Tensor t = args[k].toTensor();
    if (t.unsafeGetTensorImpl()->is_wrapped_number() && !(k == 0 && unary)) {
      // a Python number (mul.Scalar comes here as mul.Tensor), cast to the
      // result's dtype part by part as the CPU casts it
      inputs.push_back(at::scalar_tensor(t.item<c10::complex<double>>(), options));
      continue;
    }
    if (t.device() != device) return false;  // the fallback raises the CPU's error
    inputs.push_back(t);
  }
  const at::Tensor& self = first;
  at::Tensor target;  // where the result goes: out=, or self in place
  if (has_out) target = args[nargs - 1].toTensor();
  if (inplace) target = self;
  if (target.defined() &&
      (target.device() != device || target.scalar_type() != dtype || target.is_conj() || target.is_neg()))
    return false;  // a cast the CPU refuses, or one it does: the fallback
  if (inplace && !unary) check_inplace_broadcast(self.sizes(), {inputs[1].sizes()});
  static const std::unordered_map<std::string, std::string> tracked = [] {
    std::unordered_map<std::string, std::string> m;
    for (const auto& kv : unary_table()) m[kv.first] = "aten::" + kv.first + "(complex)";
    for (const auto& kv : binary_table()) m[kv.first] = "aten::" + kv.first + "(complex)";
    m["add"] = "aten::add(complex)";
    m["sub"] = "aten::sub(complex)";
    return m;
  }();
  // (NEURON_TRACK_OP's counter is per call site; the name varies here.)
  native_op_counter(tracked.at(base).c_str())->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  c10::DeviceGuard guard(device);
  // Conjugate and negative bits (autograd's gradients carry them) are
  // materialised natively first.
  for (at::Tensor& t : inputs) t = t.to(dtype).resolve_conj().resolve_neg();
  if (alpha) {
    const c10::Scalar scale = args[tensors].toScalar();
    check_complex_alpha(scale, dtype);
    const std::vector<int64_t> shape = at::infer_size(inputs[0].sizes(), inputs[1].sizes());
    at::Tensor out = target.defined() ? target : at::empty(shape, options);
    if (target.defined()) at::native::resize_output(out, shape);
    complex_add_into(out, inputs[0], inputs[1], scale, base == "sub");
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(out));
    return true;
  }
  const Planes result =
      unary ? (*unary)(planes_of(inputs[0]))
            : (*binary)(planes_of(inputs[0]), planes_of(inputs[1]));
  at::Tensor out = assemble(result, options, target.defined() ? &target : nullptr);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(out));
  return true;
}

}  // namespace torchneuron
