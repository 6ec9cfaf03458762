/* The regularised incomplete gamma functions P(a, x) (igamma) and
 * Q(a, x) = 1 - P(a, x) (igammac).
 *
 * For x < a + 1, P is summed from its power series,
 *   P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n)),
 * and Q elsewhere from its continued fraction (evaluated by Lentz's
 * method); the other one is the complement, which there loses at most a
 * bit. For a > 1e5 both would need thousands of terms, so the leading terms
 * of Temme's uniform expansion in eta = sign(x/a - 1) sqrt(2 (l - 1 - ln l)),
 * l = x / a, serve: Q = erfc(eta sqrt(a/2)) / 2 + e^(-a eta^2/2) / sqrt(2 pi a)
 * * (1 / (l - 1) - 1 / eta), with an absolute error of order
 * 1 / (a sqrt(a)).
 */
#include <float.h>
#include <math.h>
#include "ops/special/special_math.h"

#define MAX_TERMS 20000
#define TEMME_FROM 1e5

/* x^a e^-x / Gamma(a) */
static double prefactor(double a, double x) {
  return exp(a * log(x) - x - rt_sf_lgamma(a));
}

static double lower_series(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < MAX_TERMS; n++) {
    term *= x / (a + n);
    sum += term;
    if (term <= sum * DBL_EPSILON * 0.5) break;
  }
  return sum * prefactor(a, x);
}

static double upper_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int n = 1; n < MAX_TERMS; n++) {
    const double an = -n * (n - a);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (fabs(delta - 1.0) <= DBL_EPSILON) break;
  }
  return h * prefactor(a, x);
}

static double temme_upper(double a, double x) {
  const double l = x / a, lm1 = l - 1.0;
  /* l - 1 - ln l without cancellation near l = 1 */
  const double d = fabs(lm1) < 0.3 ? lm1 * lm1 * (0.5 - lm1 / 3 + lm1 * lm1 / 4 - lm1 * lm1 * lm1 / 5 + lm1 * lm1 * lm1 * lm1 / 6 -
                                                  lm1 * lm1 * lm1 * lm1 * lm1 / 7)
                                   : lm1 - log(l);
  const double eta = copysign(sqrt(2.0 * d), lm1);
  double c0;
  if (fabs(eta) < 1e-3) /* the limit of 1/(l-1) - 1/eta, in powers of eta */
    c0 = -1.0 / 3 + eta / 12;
  else
    c0 = 1.0 / lm1 - 1.0 / eta;
  return 0.5 * erfc(eta * sqrt(0.5 * a)) + exp(-0.5 * a * eta * eta) / sqrt(2.0 * 3.14159265358979323846 * a) * c0;
}

/* PyTorch's edges: NaN outside the domain, P(0, x > 0) = 1, P(a, 0) = 0,
 * and P(inf, x) = 0 for any finite x, NaN included. Returns 1 with *p set
 * when an edge decided P. */
static int edge(double a, double x, double *p) {
  if (x < 0 || a < 0) return *p = NAN, 1;
  if (a == 0) return *p = x > 0 ? 1.0 : NAN, 1;
  if (x == 0) return *p = 0.0, 1;
  if (isinf(a)) return *p = isinf(x) ? NAN : 0.0, 1;
  if (isinf(x)) return *p = 1.0, 1;
  if (isnan(a) || isnan(x)) return *p = NAN, 1;
  return 0;
}

double rt_sf_igamma(double a, double x) {
  double p;
  if (edge(a, x, &p)) return p;
  if (a > TEMME_FROM) return 1.0 - temme_upper(a, x);
  return x < a + 1.0 ? lower_series(a, x) : 1.0 - upper_fraction(a, x);
}

double rt_sf_igammac(double a, double x) {
  double p;
  if (edge(a, x, &p)) return isnan(p) ? p : 1.0 - p;
  if (a > TEMME_FROM) return temme_upper(a, x);
  return x < a + 1.0 ? 1.0 - lower_series(a, x) : upper_fraction(a, x);
}
