/* The gamma family: lgamma, digamma, trigamma, polygamma and Hurwitz's zeta.
 *
 * digamma and trigamma shift x up by their recurrences (psi(x + 1) =
 * psi(x) + 1 / x, psi1(x + 1) = psi1(x) - 1 / x^2) until x >= 10, then sum
 * their asymptotic series in Bernoulli numbers, whose truncation error there
 * is below 1e-17; below zero (below 1/2 for trigamma) the reflection
 * formulas take over. zeta sums its first terms directly and the rest by
 * Euler-Maclaurin, and polygamma(n >= 2) is (-1)^(n+1) n! zeta(n + 1, x).
 */
/* lgamma_r (glibc, _GNU_SOURCE): lgamma itself writes the global signgam. */
#include <float.h>
#include <math.h>
#include "ops/special/special_math.h"

#define PI 3.14159265358979323846

double rt_sf_lgamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

float rt_sf_lgammaf(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

/* sin(pi x) with the argument reduced first, so that it is 0 exactly at
 * the integers and keeps its digits far from zero. */
static double sin_pi(double x) {
  double r = x - 2.0 * nearbyint(0.5 * x); /* in [-1, 1], same sine */
  return r == 1.0 || r == -1.0 ? 0.0 : sin(PI * r);
}

static double cot_pi(double x) {
  double r = x - nearbyint(x); /* period 1 */
  return cos(PI * r) / sin(PI * r);
}

double rt_sf_digamma(double x) {
  if (x == 0) return copysign(INFINITY, -x); /* as PyTorch: the pole's side */
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0) {
    if (x == trunc(x)) return NAN; /* the poles, -inf with them */
    return rt_sf_digamma(1.0 - x) - PI * cot_pi(x);
  }
  double acc = 0.0;
  while (x < 10.0) {
    acc -= 1.0 / x;
    x += 1.0;
  }
  /* psi(x) = ln x - 1/(2x) - sum_k B_2k / (2k x^2k) */
  const double z = 1.0 / (x * x);
  const double s =
      z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
  return acc + (log(x) - 0.5 / x - s);
}

double rt_sf_trigamma(double x) {
  if (isnan(x)) return x;
  if (x == INFINITY) return 0.0;
  if (x <= 0 && x == trunc(x)) return x == -INFINITY ? NAN : INFINITY;
  if (x < 0.5) { /* psi1(x) + psi1(1 - x) = pi^2 / sin^2(pi x) */
    const double s = sin_pi(x);
    return PI * PI / (s * s) - rt_sf_trigamma(1.0 - x);
  }
  double acc = 0.0;
  while (x < 10.0) {
    acc += 1.0 / (x * x);
    x += 1.0;
  }
  /* psi1(x) = 1/x + 1/(2x^2) + sum_k B_2k / x^(2k+1) */
  const double z = 1.0 / (x * x);
  const double t = z * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * (5.0 / 66 - z * (691.0 / 2730 - z * 7.0 / 6))))));
  return acc + (1.0 + 0.5 / x + t) / x;
}

double rt_sf_polygamma(int64_t n, double x) {
  if (n == 0) return rt_sf_digamma(x);
  if (n == 1) return rt_sf_trigamma(x);
  double factorial = 1.0;
  for (int64_t k = 2; k <= n && factorial < INFINITY; k++) factorial *= (double)k;
  return (n % 2 ? 1.0 : -1.0) * factorial * rt_sf_zeta((double)(n + 1), x);
}

/* B_2j / (2j)! for j = 1..12: the Euler-Maclaurin corrections. */
static const double kBernoulliOverFactorial[12] = {
    1.0 / 6 / 2,
    -1.0 / 30 / 24,
    1.0 / 42 / 720,
    -1.0 / 30 / 40320,
    5.0 / 66 / 3628800,
    -691.0 / 2730 / 479001600,
    7.0 / 6 / 87178291200.0,
    -3617.0 / 510 / 20922789888000.0,
    43867.0 / 798 / 6402373705728000.0,
    -174611.0 / 330 / 2432902008176640000.0,
    854513.0 / 138 / 1124000727777607680000.0,
    -236364091.0 / 2730 / 620448401733239439360000.0,
};

double rt_sf_zeta(double x, double q) {
  /* PyTorch's domain: a pole at x = 1, NaN below it, poles at the
   * non-positive integers q, and a negative q only with an integer x. */
  if (x == 1.0) return INFINITY;
  if (x < 1.0) return NAN;
  if (q <= 0.0) {
    if (q == floor(q)) return INFINITY;
    if (x != floor(x)) return NAN;
  }
  if (q == INFINITY) return NAN;
  if (x == INFINITY) return fabs(q) < 1.0 ? INFINITY : q == 1.0 ? 1.0 : q < -1.0 ? INFINITY : NAN;
  /* The first terms directly, until the Euler-Maclaurin tail converges. */
  double s = 0.0, a = q, b = 0.0;
  for (int k = 0; k < 10 || a < 10.0; k++) {
    b = pow(a, -x);
    s += b;
    a += 1.0;
  }
  b = pow(a, -x);
  const double integral = b * a / (x - 1.0); /* the tail from a onward, to first order */
  if (fabs(integral) <= 0.5 * DBL_EPSILON * fabs(s)) return s;
  s += integral + 0.5 * b;
  double rising = x;    /* x (x + 1) ... (x + 2j - 2) */
  double power = b / a; /* a^(-x - 2j + 1) */
  for (int j = 0; j < 12; j++) {
    const double t = kBernoulliOverFactorial[j] * rising * power;
    s += t;
    if (fabs(t) <= 0.5 * DBL_EPSILON * fabs(s)) break;
    rising *= (x + 2 * j + 1) * (x + 2 * j + 2);
    power /= a * a;
  }
  return s;
}
