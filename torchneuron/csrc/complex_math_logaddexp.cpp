// logaddexp of complex numbers, log(exp x + exp y), on the planes as the
// CPU defines it: with (lo, hi) the operands ordered by real part, it is
// log1p(exp(lo - hi)) + hi, which keeps exp in range; a NaN in either part
// of either operand gives NaN + NaN i; equal infinite real parts give lo
// (both -inf: exp is 0 whatever the angle) or log(exp lo + exp hi) (both
// +inf, where lo - hi would be NaN). Every step is a native op on a plane.
#include <ATen/ATen.h>

#include <limits>

#include "complex_math.h"

namespace torchneuron {
namespace cmath {
namespace {


at::Tensor any_nan(const Planes& z) { return z.re.isnan().logical_or_(z.im.isnan()); }

}  // namespace

Planes logaddexp_of(const Planes& x, const Planes& y) {
  const at::Tensor x_lower = x.re.lt(y.re);
  const Planes lo = select_planes(x_lower, x, y), hi = select_planes(x_lower, y, x);
  const Planes general = [&] {
    const Planes e = exp_of({lo.re - hi.re, lo.im - hi.im});
    const Planes l = log1p_of(e);
    return Planes{l.re + hi.re, l.im + hi.im};
  }();
  const Planes both_plus_inf = [&] {
    const Planes a = exp_of(lo), b = exp_of(hi);
    return log_of({a.re + b.re, a.im + b.im}, 1.0);
  }();
  const at::Tensor same_infinite = lo.re.isinf().logical_and_(lo.re.eq(hi.re));
  Planes r = select_planes(same_infinite, select_planes(lo.re.lt(0), lo, both_plus_inf), general);
  const at::Tensor nan = at::logical_or(any_nan(x), any_nan(y));  // (x, y may broadcast)
  const double quiet_nan = std::numeric_limits<double>::quiet_NaN();
  return {r.re.masked_fill(nan, quiet_nan), r.im.masked_fill(nan, quiet_nan)};
}

}  // namespace cmath
}  // namespace torchneuron
