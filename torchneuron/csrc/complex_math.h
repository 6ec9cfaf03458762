// Internal to the complex_math*.cpp files: a complex tensor as its two real
// planes, and the plane formulas the files share. Every step is a native op
// on a float32 or float64 plane; nothing touches elements.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <ATen/ops/where.h>
#include <c10/util/complex.h>

#include <string>

namespace torchneuron {
namespace cmath {

struct Planes {
  at::Tensor re, im;
};

Planes planes_of(const at::Tensor& z);
Planes multiply(const Planes& x, const Planes& y);
Planes divide(const Planes& x, const Planes& y);
Planes exp_of(const Planes& z);
Planes log_of(const Planes& z, double log_base);  // log z / log_base
Planes sqrt_of(const Planes& z);
Planes reciprocal_of(const Planes& z);

// The planes of z with its conjugate and negative bits applied.
inline Planes resolved_planes(const at::Tensor& z) { return planes_of(z.resolve_conj().resolve_neg()); }
// w z for a number w
inline Planes times_number(const Planes& z, c10::complex<double> w) {
  return {z.re * w.real() - z.im * w.imag(), z.re * w.imag() + z.im * w.real()};
}
inline Planes times_i(const Planes& z) { return {-z.im, z.re}; }       // i z
inline Planes times_minus_i(const Planes& z) { return {z.im, -z.re}; }  // -i z
// yes where mask, else no
inline Planes select_planes(const at::Tensor& mask, const Planes& yes, const Planes& no) {
  return {at::where(mask, yes.re, no.re), at::where(mask, yes.im, no.im)};
}

// Writes the planes into a complex tensor of their broadcast shape: out
// (resized as out= resizes) when given, else a new one. The planes are
// complete before out (which may be an input, in place) is written.
at::Tensor assemble(const Planes& p, const at::TensorOptions& options, const at::Tensor* out);

// complex_math_inverse.cpp: the inverse trigonometric and hyperbolic
// functions on their principal branches, log1p, expm1 and sgn.
Planes asin_of(const Planes& z);
Planes acos_of(const Planes& z);
Planes atan_of(const Planes& z);
Planes asinh_of(const Planes& z);
Planes acosh_of(const Planes& z);
Planes atanh_of(const Planes& z);
Planes log1p_of(const Planes& z);
Planes expm1_of(const Planes& z);
Planes sgn_of(const Planes& z);

// complex_math_logaddexp.cpp: log(exp x + exp y), as the CPU computes it.
Planes logaddexp_of(const Planes& x, const Planes& y);

// complex_math_pow.cpp: the pow overloads ("pow.Tensor_Tensor",
// "pow_.Scalar", "pow.Scalar_out", ... as the pointwise table spells them)
// when the result is complex; false, stack untouched, otherwise.
bool try_native_complex_pow(const std::string& name, torch::jit::Stack* stack);

}  // namespace cmath
}  // namespace torchneuron
