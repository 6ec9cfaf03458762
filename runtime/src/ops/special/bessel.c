/* Modified Bessel functions I0, I1 and K_nu, the spherical Bessel j0 and
 * Airy's Ai. (J0, J1, Y0, Y1 come from the C library.)
 *
 * I_nu (nu = 0, 1): the power series (all terms positive, so it keeps its
 * digits) up to |x| = 20, then the asymptotic expansion, whose smallest term
 * there is e^-40 of the sum.
 * K_nu: for x >= 20 the asymptotic expansion; below it the trapezoidal rule
 * on K_nu(x) = integral over t >= 0 of e^(-x cosh t) cosh(nu t). The
 * integrand is even and analytic in the strip |Im t| < pi/2, so the rule
 * with step 0.1 converges like e^(-2 pi 1.5 / 0.1): to rounding.
 * Ai: its Maclaurin series in long double for -8 <= x <= 1 (the series
 * cancels like e^(2/3 |x|^1.5), which the 64-bit mantissa absorbs), the
 * K_{1/3} form above 1, and the asymptotic oscillating form below -8:
 * about 1e-13 absolute at the seams.
 */
#include <float.h>
#include <math.h>
#include "ops/special/special_math.h"

#define PI 3.14159265358979323846
#define ASYMPTOTIC_FROM 20.0

/* sum_k (x/2)^(2k+nu) / (k! (k+nu)!), x >= 0 */
static double i_series(int nu, double x) {
  const double h = 0.5 * x, h2 = h * h;
  double term = nu ? h : 1.0, sum = term;
  for (int k = 1; k < 200; k++) {
    term *= h2 / ((double)k * (double)(k + nu));
    sum += term;
    if (term <= sum * DBL_EPSILON * 0.5) break;
  }
  return sum;
}

/* sum_k a_k(nu) (sign / x)^k, a_k = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k):
 * the asymptotic series of e^-x I_nu sqrt(2 pi x) (sign -1) and of
 * e^x K_nu sqrt(2 x / pi) (sign +1). */
static double bessel_asymptotic(double nu, double x, double sign) {
  const double mu = 4.0 * nu * nu;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 60; k++) {
    const double odd = 2.0 * k - 1.0;
    const double next = term * sign * (mu - odd * odd) / (8.0 * k * x);
    if (fabs(next) >= fabs(term)) break; /* past the smallest term */
    term = next;
    sum += term;
    if (fabs(term) <= fabs(sum) * DBL_EPSILON * 0.5) break;
  }
  return sum;
}

static double bessel_i(int nu, double x, int scaled) {
  const double ax = fabs(x);
  if (isnan(x)) return x;
  if (isinf(x)) return scaled ? (nu && x < 0 ? -0.0 : 0.0) : NAN; /* as PyTorch */
  double v;
  if (ax <= ASYMPTOTIC_FROM) {
    v = i_series(nu, ax);
    if (scaled) v *= exp(-ax);
  } else {
    v = bessel_asymptotic(nu, ax, -1.0) / sqrt(2.0 * PI * ax);
    if (!scaled) v = ax < 700.0 ? v * exp(ax) : v * exp(0.5 * ax) * exp(0.5 * ax);
  }
  return nu && x < 0 ? -v : v;
}

double rt_sf_bessel_i0(double x, int scaled) { return bessel_i(0, x, scaled); }
double rt_sf_bessel_i1(double x, int scaled) { return bessel_i(1, x, scaled); }

/* e^x K_nu(x) for 0 < x < ASYMPTOTIC_FROM by the trapezoidal rule. */
static double k_scaled_trapezoid(double nu, double x) {
  const double h = 0.1;
  double sum = 0.5, t = 0.0;
  for (int k = 1; k < 100000; k++) {
    t = k * h;
    const double c = cosh(t);
    const double f = exp(-x * (c - 1.0)) * cosh(nu * t);
    sum += f;
    if (x * (c - 1.0) > 1.0 && f <= sum * DBL_EPSILON * 0.25) break;
  }
  return h * sum;
}

double rt_sf_bessel_k(double nu, double x, int scaled) {
  if (isnan(x)) return x;
  if (x < 0) return NAN;
  if (x == 0) return INFINITY;
  if (x == INFINITY) return 0.0;
  const double v = x >= ASYMPTOTIC_FROM ? bessel_asymptotic(nu, x, 1.0) * sqrt(PI / (2.0 * x))
                                        : k_scaled_trapezoid(nu, x);
  return scaled ? v : v * exp(-x);
}

double rt_sf_spherical_j0(double x) {
  if (isinf(x)) return 0.0;
  if (fabs(x) < 0.5) {
    const double z = x * x;
    return 1.0 - z / 6.0 * (1.0 - z / 20.0 * (1.0 - z / 42.0 * (1.0 - z / 72.0 * (1.0 - z / 110.0 * (1.0 - z / 156.0)))));
  }
  return sin(x) / x;
}

/* Ai(0) and -Ai'(0) */
#define AIRY_C1 0.355028053887817239260063186004183176L
#define AIRY_C2 0.258819403792806798405183560189203963L

static double airy_maclaurin(double xd) {
  const long double x = xd, x3 = x * x * x;
  long double f = 1.0L, g = x, tf = 1.0L, tg = x;
  for (int k = 1; k < 200; k++) {
    tf *= x3 / ((3.0L * k - 1.0L) * (3.0L * k));
    tg *= x3 / ((3.0L * k) * (3.0L * k + 1.0L));
    f += tf;
    g += tg;
    if (fabsl(tf) <= fabsl(f) * LDBL_EPSILON && fabsl(tg) <= fabsl(g) * LDBL_EPSILON + LDBL_MIN) break;
  }
  return (double)(AIRY_C1 * f - AIRY_C2 * g);
}

/* Ai(-z) for large z: pi^-1/2 z^-1/4 (cos(zeta - pi/4) P + sin(zeta - pi/4) Q),
 * zeta = 2/3 z^1.5, P and Q the even and odd parts of sum (-1)^.. u_k zeta^-k,
 * u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_(k-1). */
static double airy_negative(double z) {
  const double zeta = 2.0 / 3.0 * z * sqrt(z);
  double p = 0.0, q = 0.0, u = 1.0, term = 1.0, previous = INFINITY;
  for (int k = 0; k < 60; k++) {
    if (k > 0) {
      u *= (6.0 * k - 5.0) * (6.0 * k - 3.0) * (6.0 * k - 1.0) / ((2.0 * k - 1.0) * 216.0 * k);
      term = u / pow(zeta, k);
    }
    if (fabs(term) >= previous) break;
    previous = fabs(term);
    const double signed_term = (k / 2) % 2 ? -term : term;
    if (k % 2) q += signed_term; else p += signed_term;
    if (fabs(term) <= DBL_EPSILON * 0.25) break;
  }
  const double phase = zeta - PI / 4.0;
  return (cos(phase) * p + sin(phase) * q) / (sqrt(PI) * sqrt(sqrt(z)));
}

double rt_sf_airy_ai(double x) {
  if (isnan(x) || isinf(x)) return NAN; /* as PyTorch, at both infinities */
  if (x >= -8.0 && x <= 1.0) return airy_maclaurin(x);
  if (x < -8.0) return airy_negative(-x);
  const double zeta = 2.0 / 3.0 * x * sqrt(x);
  return sqrt(x / 3.0) / PI * rt_sf_bessel_k(1.0 / 3.0, zeta, 0);
}
