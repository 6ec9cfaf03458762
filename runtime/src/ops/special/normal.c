/* The scaled complementary error function and the normal distribution's
 * log-CDF and quantile.
 *
 * erfcx(x) = e^(x^2) erfc(x): below 10 from the C library's erfc with x^2
 * split exactly (hi + lo, so that e^(x^2) keeps its digits), from 10 on by
 * erfc's continued fraction, 1 / (sqrt(pi) (x + (1/2) / (x + 1 / (x + ...)))),
 * which there converges to rounding in 40 terms.
 * ndtri: a starting value from Abramowitz and Stegun 26.2.23 (error below
 * 4.5e-4), then Newton's method on log Phi(x) - log p, whose derivative
 * phi / Phi = 2 / (sqrt(2 pi) erfcx(-x / sqrt 2)) stays finite in the far
 * tail, so p = 1e-300 converges like p = 0.1.
 */
#include <float.h>
#include <math.h>
#include "ops/special/special_math.h"

#define SQRT_PI 1.77245385090551602729
#define SQRT_2PI 2.50662827463100050242
#define SQRT1_2 0.70710678118654752440

double rt_sf_erfcx(double x) {
  if (isnan(x)) return x;
  if (x < -26.7) return INFINITY; /* e^(x^2) overflows, erfc(x) is 2 */
  if (x < 10.0) {
    const double hi = x * x, lo = fma(x, x, -hi);
    return exp(hi) * (1.0 + lo) * erfc(x);
  }
  if (x == INFINITY) return 0.0;
  double k = x;
  for (int n = 40; n >= 1; n--) k = x + 0.5 * n / k;
  return 1.0 / (SQRT_PI * k);
}

/* log Phi(x) */
double rt_sf_log_ndtr(double x) {
  if (isnan(x)) return x;
  const double u = x * SQRT1_2;
  if (x > 1.0) return log1p(-0.5 * erfc(u));
  if (x > -1.0) return log(0.5 * erfc(-u));
  const double hi = x * x, lo = fma(x, x, -hi); /* x^2 exactly */
  if (hi == INFINITY) return -INFINITY;
  return (log(0.5 * rt_sf_erfcx(-u)) - 0.5 * hi) - 0.5 * lo;
}

/* The lower half: Phi(x) = p <= 1/2, x <= 0. */
static double ndtri_lower(double p) {
  const double t = sqrt(-2.0 * log(p));
  double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
  const double log_p = log(p);
  for (int i = 0; i < 6; i++) {
    const double e = rt_sf_erfcx(-x * SQRT1_2);
    const double hi = x * x, lo = fma(x, x, -hi);
    const double g = ((log(0.5 * e) - 0.5 * hi) - log_p) - 0.5 * lo;
    const double step = g * SQRT_2PI * e * 0.5;
    x -= step;
    if (fabs(step) <= fabs(x) * DBL_EPSILON) break;
  }
  return x;
}

double rt_sf_ndtri(double p) {
  if (isnan(p) || p < 0.0 || p > 1.0) return NAN;
  if (p == 0.0) return -INFINITY;
  if (p == 1.0) return INFINITY;
  if (p == 0.5) return 0.0;
  return p < 0.5 ? ndtri_lower(p) : -ndtri_lower(1.0 - p); /* 1 - p is exact here */
}
