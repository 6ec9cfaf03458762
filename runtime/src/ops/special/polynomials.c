/* The orthogonal polynomials of torch.special, evaluated as PyTorch CPU
 * evaluates them: the degree is n truncated to an integer (a NaN, infinite
 * or out-of-range degree converts as x86's cvttsd2si does, to INT64_MIN,
 * hence 0), a negative degree gives 0, the values at x = +-1 are exact, the
 * Chebyshev polynomials of high degree inside (-1, 1) come from their
 * trigonometric forms (T_n = cos(n t), x = cos t, ...), and everything else
 * from the three-term recurrences. The shifted Chebyshev polynomials are
 * the plain ones at 2x - 1.
 */
#include <math.h>
#include <stdint.h>
#include "ops/special/special_math.h"

static int64_t degree(double n) {
  return n >= -9223372036854775808.0 && n < 9223372036854775808.0 ? (int64_t)n : INT64_MIN;
}

static double odd_sign(int64_t n, double v) { return n % 2 == 0 ? v : -v; }

/* The Chebyshev recurrence p_(k+1) = 2 x p_k - p_(k-1) from p_0 = 1 and
 * p_1 = first (T: x, U: 2x, V: 2x - 1, W: 2x + 1). */
static double chebyshev_recurrence(double x, double first, int64_t n) {
  if (n == 0) return 1.0;
  double p = 1.0, q = first;
  for (int64_t k = 1; k < n; k++) {
    const double r = 2.0 * x * q - p;
    p = q, q = r;
  }
  return q;
}

static double chebyshev_t(double x, int64_t n) {
  if (fabs(x) == 1.0) return x > 0 ? 1.0 : odd_sign(n, 1.0);
  if (n > 6 && fabs(x) < 1.0) return cos((double)n * acos(x));
  return chebyshev_recurrence(x, x, n);
}

static double chebyshev_u(double x, int64_t n) {
  const double n1 = (double)n + 1.0;
  if (fabs(x) == 1.0) return x > 0 ? n1 : odd_sign(n, n1);
  if (n > 8 && fabs(x) < 1.0) {
    const double t = acos(x);
    return sin(t) != 0.0 ? sin(n1 * t) / sin(t) : n1 * cos(n1 * t) / x;
  }
  return chebyshev_recurrence(x, 2.0 * x, n);
}

static double chebyshev_v(double x, int64_t n) {
  const double m = 2.0 * (double)n + 1.0;
  if (fabs(x) == 1.0) return x > 0 ? 1.0 : odd_sign(n, m);
  if (n > 8 && fabs(x) < 1.0) {
    const double t = acos(x);
    if (sin(t / 2.0) != 1.0) return cos(((double)n + 0.5) * t) / cos(t / 2.0);
    return odd_sign(n, m);
  }
  return chebyshev_recurrence(x, 2.0 * x - 1.0, n);
}

static double chebyshev_w(double x, int64_t n) {
  const double m = 2.0 * (double)n + 1.0;
  if (fabs(x) == 1.0) return x > 0 ? m : odd_sign(n, 1.0);
  if (n > 8 && fabs(x) < 1.0) {
    const double t = acos(x);
    if (cos(t / 2.0) != 1.0) return sin(((double)n + 0.5) * t) / sin(t / 2.0);
    return x > 0 ? m : odd_sign(n, 1.0);
  }
  return chebyshev_recurrence(x, 2.0 * x + 1.0, n);
}

static double hermite_h(double x, int64_t n) {
  if (n == 0) return 1.0;
  double p = 1.0, q = x + x;
  for (int64_t k = 1; k < n; k++) {
    const double r = (x + x) * q - 2.0 * (double)k * p;
    p = q, q = r;
  }
  return q;
}

static double hermite_he(double x, int64_t n) {
  if (n == 0) return 1.0;
  double p = 1.0, q = x;
  for (int64_t k = 1; k < n; k++) {
    const double r = x * q - (double)k * p;
    p = q, q = r;
  }
  return q;
}

static double laguerre_l(double x, int64_t n) {
  if (x == 0.0 || n == 0) return 1.0;
  double p = 1.0, q = 1.0 - x;
  for (int64_t k = 1; k < n; k++) {
    const double r = ((2.0 * (double)k + 1.0 - x) * q - (double)k * p) / ((double)k + 1.0);
    p = q, q = r;
  }
  return q;
}

static double legendre_p(double x, int64_t n) {
  if (fabs(x) == 1.0) return x > 0 ? 1.0 : odd_sign(n, 1.0);
  if (n == 0) return 1.0;
  double p = 1.0, q = x;
  for (int64_t k = 1; k < n; k++) {
    const double r = ((2.0 * (double)k + 1.0) * x * q - (double)k * p) / ((double)k + 1.0);
    p = q, q = r;
  }
  return q;
}

double rt_sf_polynomial(rt_polynomial_kind kind, double x, double n_value) {
  const int64_t n = degree(n_value);
  if (n < 0) return 0.0;
  switch (kind) {
    case RT_CHEBYSHEV_T: return chebyshev_t(x, n);
    case RT_CHEBYSHEV_U: return chebyshev_u(x, n);
    case RT_CHEBYSHEV_V: return chebyshev_v(x, n);
    case RT_CHEBYSHEV_W: return chebyshev_w(x, n);
    case RT_SHIFTED_CHEBYSHEV_T: return chebyshev_t(x + x - 1.0, n);
    case RT_SHIFTED_CHEBYSHEV_U: return chebyshev_u(x + x - 1.0, n);
    case RT_SHIFTED_CHEBYSHEV_V: return chebyshev_v(x + x - 1.0, n);
    case RT_SHIFTED_CHEBYSHEV_W: return chebyshev_w(x + x - 1.0, n);
    case RT_HERMITE_H: return hermite_h(x, n);
    case RT_HERMITE_HE: return hermite_he(x, n);
    case RT_LAGUERRE_L: return laguerre_l(x, n);
    case RT_LEGENDRE_P: return legendre_p(x, n);
  }
  return NAN;
}
