// The inverse trigonometric and hyperbolic functions of complex tensors on
// their principal branches, and log1p, expm1, sgn, composed on the float
// planes (complex_math.h); complex_math.cpp's table routes the ATen calls
// here.
//
// asin, acos and acosh follow Kahan's formulas ("Branch cuts for complex
// elementary functions", 1987), written with the principal square roots of
// 1 - z and 1 + z (z - 1 and z + 1): they take the signed zeros on the cuts
// to the right side and never overflow, but they give NaN where an operand
// is infinite. There, and wherever |z| is so large that the terms they drop
// are below the rounding, the functions are their asymptotic logarithms
// (asinh w ~ log 2w, acosh w ~ log 2w), which take infinities to the C99
// Annex G values. atanh is 1/2 log((1 + z) / (1 - z)) written with log1p
// and atan2 of real quantities, 1/z + i pi/2 far out. asinh, atan are the
// rotations asinh w = -i asin(i w), atan w = -i atanh(i w), exact on the
// planes (signed zeros included).
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "complex_math.h"

namespace torchneuron {
namespace cmath {
namespace {

constexpr double kPi2 = 1.5707963267948966;  // pi / 2
constexpr double kLn2 = 0.69314718055994531;

// Beyond this magnitude the asymptotic forms are exact to the rounding:
// asinh's next term is 1 / (4 w^2), below float's and double's epsilon
// relative to log 2w past 1e4 and 1e8.
double large_threshold(const at::Tensor& plane) {
  return plane.scalar_type() == at::kFloat ? 1e4 : 1e8;
}

at::Tensor large(const Planes& z, double threshold) {
  return at::maximum(z.re.abs(), z.im.abs()).gt(threshold).logical_or_(z.re.isnan()).logical_or_(z.im.isnan());
}


// log 2w: log|w| + log 2 + i arg w (hypot keeps |w| in range).
Planes log_twice(const Planes& w) { return {at::hypot(w.re, w.im).log() + kLn2, at::atan2(w.im, w.re)}; }

// asinh w for large |w| (and infinities): log 2w on the right half plane,
// -log(-2w) on the left one (the sign bit decides, so -0 goes left).
Planes asinh_far(const Planes& w) {
  const at::Tensor left = at::signbit(w.re);
  const Planes right = log_twice(w);
  const Planes mirrored = log_twice({at::where(left, -w.re, w.re), at::where(left, -w.im, w.im)});
  return {at::where(left, -mirrored.re, right.re), at::where(left, -mirrored.im, right.im)};
}


}  // namespace

Planes asin_of(const Planes& z) {
  const Planes s1 = sqrt_of({1 - z.re, -z.im}), s2 = sqrt_of({1 + z.re, z.im});
  // re = atan(x / Re(sqrt(1 - z) sqrt(1 + z))), im = asinh(Im(conj(sqrt(1 - z)) sqrt(1 + z)))
  const Planes near{at::atan2(z.re, s1.re * s2.re - s1.im * s2.im), at::asinh(s1.re * s2.im - s1.im * s2.re)};
  // asin z = -i asinh(i z)
  const Planes far = times_minus_i(asinh_far(times_i(z)));
  return select_planes(large(z, large_threshold(z.re)), far, near);
}

Planes acos_of(const Planes& z) {
  const Planes s1 = sqrt_of({1 - z.re, -z.im}), s2 = sqrt_of({1 + z.re, z.im});
  // re = 2 atan(Re sqrt(1 - z) / Re sqrt(1 + z)), im = asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z)))
  const Planes near{at::atan2(s1.re, s2.re) * 2, at::asinh(s2.re * s1.im - s2.im * s1.re)};
  // far out acos z = pi/2 - asin z, without cancellation (|asin z| is large
  // or its real part is near pi/2 with an absolute error of the rounding)
  const Planes a = times_minus_i(asinh_far(times_i(z)));
  const Planes far{kPi2 - a.re, -a.im};
  return select_planes(large(z, large_threshold(z.re)), far, near);
}

Planes asinh_of(const Planes& w) { return times_minus_i(asin_of(times_i(w))); }

Planes acosh_of(const Planes& z) {
  const Planes s1 = sqrt_of({z.re - 1, z.im}), s2 = sqrt_of({z.re + 1, z.im});
  // re = asinh(Re(conj(sqrt(z - 1)) sqrt(z + 1))), im = 2 atan(Im sqrt(z - 1) / Re sqrt(z + 1))
  const Planes near{at::asinh(s1.re * s2.re + s1.im * s2.im), at::atan2(s1.im, s2.re) * 2};
  // far out sqrt(z - 1) sqrt(z + 1) ~ sqrt(z)^2 = z on every side of the cut
  return select_planes(large(z, large_threshold(z.re)), log_twice(z), near);
}

Planes atanh_of(const Planes& z) {
  const at::Tensor &x = z.re, &y = z.im;
  const at::Tensor one_minus = 1 - x, one_plus = 1 + x, y2 = y * y;
  // |(1 + z) / (1 - z)|^2 = 1 + 4x / ((1 - x)^2 + y^2), odd in x: the real
  // part is sign(x) log1p(q) / 4 with q = 4|x| / ((1 - |x|)^2 + y^2) >= 0,
  // which never cancels. Where q > 1 the two moduli differ by more than a
  // factor 2 and their logs' difference loses nothing: that form (with
  // hypot) stays finite where the denominator's squares underflow (x = 1,
  // tiny y).
  // arg((1 + z) / (1 - z)) = atan2(2y, (1 - x)(1 + x) - y^2).
  const at::Tensor ax = x.abs(), ax_minus = 1 - ax;
  const at::Tensor q = ax * 4 / (ax_minus * ax_minus + y2);
  const at::Tensor re_abs = at::where(q.le(1), at::log1p(q) * 0.25,
                                      (at::hypot(ax + 1, y).log() - at::hypot(ax_minus, y).log()) * 0.5);
  const Planes near{re_abs.copysign(x), at::atan2(y * 2, one_minus * one_plus - y2) * 0.5};
  // far out atanh z = 1/z + i pi/2 sign(y), 1/z's terms dropped below the
  // rounding past 1e15 (its real part kept: it is the whole real part). A
  // NaN y, or a NaN x with a finite y, leaves the angle NaN (C99 Annex G:
  // atanh(inf + i NaN) = 0 + i NaN, atanh(NaN + i inf) = 0 + i pi/2).
  const at::Tensor h = at::hypot(x, y);
  const at::Tensor inv_re = at::where(h.isinf(), at::zeros_like(x).copysign(x), x / h / h);
  const at::Tensor no_angle = y.isnan().logical_or_(x.isnan().logical_and_(y.isinf().logical_not_()));
  const Planes far{inv_re, at::where(no_angle, std::numeric_limits<double>::quiet_NaN(),
                                     at::full_like(y, kPi2).copysign(y))};
  const Planes r = select_planes(large(z, 1e15), far, near);
  return {at::where(x.eq(0), x, r.re), r.im};  // atanh(iy) = i atan y: a zero x stays, even beside a NaN y
}

Planes atan_of(const Planes& w) { return times_minus_i(atanh_of(times_i(w))); }

// log(1 + z) = log|1 + z| + i arg(1 + z); near 0, |1 + z| = sqrt(1 + u) with
// u = x (2 + x) + y^2, whose log1p keeps the small real part's digits. A u
// of zero (x = +-0 and y^2 below the range) gives x itself.
Planes log1p_of(const Planes& z) {
  const at::Tensor &x = z.re, &y = z.im;
  const at::Tensor u = x * (x + 2) + y * y;
  const at::Tensor small = at::hypot(x, y).lt(0.5);
  const at::Tensor re_small = at::where(u.eq(0), x, at::log1p(u) * 0.5);
  const at::Tensor re_big = at::hypot(x + 1, y).log();
  return {at::where(small, re_small, re_big), at::atan2(y, x + 1)};
}

// exp(z) - 1 = (e^x cos y - 1) + i e^x sin y with the real part as
// expm1(x) cos y - 2 sin^2(y / 2) (no cancellation near 0); a zero
// imaginary part stays (expm1 of a real x is real even where e^x is inf).
Planes expm1_of(const Planes& z) {
  const at::Tensor &x = z.re, &y = z.im;
  const at::Tensor half_sin = (y * 0.5).sin();
  const at::Tensor re = at::expm1(x) * y.cos() - half_sin * half_sin * 2;
  const at::Tensor im = at::where(y.eq(0), y, x.exp() * y.sin());
  return {re, im};
}

// z / |z|, and 0 for 0.
Planes sgn_of(const Planes& z) {
  const at::Tensor h = at::hypot(z.re, z.im);
  const at::Tensor zero = h.eq(0);
  return {at::where(zero, at::zeros_like(h), z.re / h), at::where(zero, at::zeros_like(h), z.im / h)};
}

}  // namespace cmath
}  // namespace torchneuron
