/* The special functions (runtime/src/ops/special/) against values computed
 * with mpmath at 30 digits, their identities (recurrences, reflections,
 * complements, a Wronskian, the seams between methods) and PyTorch CPU's
 * special values (poles, domain edges, infinities). */
#include <math.h>
#include <stdio.h>
#include "check.h"
#include "ops/special/special_math.h"

static int close_rel(double got, double want, double rel) {
  return fabs(got - want) <= rel * fabs(want);
}

#define CHECK_CLOSE(got, want, rel)                                                       \
  do {                                                                                    \
    double g_ = (got), w_ = (want);                                                       \
    if (!close_rel(g_, w_, rel)) fprintf(stderr, "  %s = %.17g, want %.17g\n", #got, g_, w_); \
    CHECK(close_rel(g_, w_, rel));                                                        \
  } while (0)

static void test_values(void) {
  const struct { double got, want; } cases[] = {
    {rt_sf_digamma(0.25), -4.2274535333762654081},
    {rt_sf_digamma(-2.5), 1.1031566406452431872},
    {rt_sf_digamma(1e-8), -100000000.57721564845},
    {rt_sf_digamma(123.456), 4.8118293238289853873},
    {rt_sf_trigamma(0.25), 17.197329154507110739},
    {rt_sf_trigamma(-2.5), 9.5392466449891237539},
    {rt_sf_trigamma(50.5), 0.019999333426637159775},
    {rt_sf_polygamma(3, 1.5), 1.4090910340024372364},
    {rt_sf_zeta(2.0, 1.0), 1.6449340668482264365},
    {rt_sf_zeta(1.5, 3.25), 1.2012173113703717397},
    {rt_sf_zeta(4.0, -2.5), 32.457979369864603737},
    {rt_sf_zeta(30.0, 0.5), 1073741824.0000052151},
    {rt_sf_igamma(2.5, 1.5), 0.3000141641213724909},
    {rt_sf_igammac(2.5, 7.0), 0.015609416100266914735},
    {rt_sf_igammac(0.1, 30.0), 4.4767665800126917256e-16},
    {rt_sf_bessel_i0(3.5, 0), 7.3782034322254796603},
    {rt_sf_bessel_i0(45.0, 1), 0.059638115011731949075},
    {rt_sf_bessel_i1(-7.25, 0), -197.30156586563830611},
    {rt_sf_bessel_i1(300.0, 1), 0.023004122040268950902},
    {rt_sf_bessel_k(0.0, 1e-6, 0), 13.931442073626419413},
    {rt_sf_bessel_k(1.0, 2.5, 0), 0.073890816347747063649},
    {rt_sf_bessel_k(0.0, 19.5, 1), 0.28205028321567020271},
    {rt_sf_bessel_k(1.0, 60.0, 1), 0.16280823094404427103},
    {rt_sf_airy_ai(0.5), 0.23169360648083348977},
    {rt_sf_airy_ai(4.0), 0.00095156385120480187362},
    {rt_sf_spherical_j0(0.01), 0.99998333341666646825},
    {rt_sf_erfcx(-3.0), 16205.988853999586625},
    {rt_sf_erfcx(5.5), 0.10096221839949908823},
    {rt_sf_erfcx(40.0), 0.014100335983377813625},
    {rt_sf_ndtri(0.975), 1.9599639845400538556},
    {rt_sf_ndtri(1e-300), -37.047096299361199237},
    {rt_sf_log_ndtr(-20.0), -203.91715537109726394},
    {rt_sf_log_ndtr(3.0), -0.0013508099647481937988},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (!close_rel(cases[i].got, cases[i].want, 2e-15))
      fprintf(stderr, "  case %zu: %.17g, want %.17g\n", i, cases[i].got, cases[i].want);
    CHECK(close_rel(cases[i].got, cases[i].want, 2e-15));
  }
  /* Stated weaker bounds: Airy's oscillating side (absolute 1e-13 at the
   * seam), Temme's expansion for a > 1e5 (order 1 / a^1.5), and Ai far
   * out, whose relative condition number there is x^1.5 = 125. */
  CHECK(close_rel(rt_sf_airy_ai(25.0), 8.1160268246913866838e-38, 125 * 2.2e-16));
  CHECK(fabs(rt_sf_airy_ai(-7.5) - 0.32177571638064787527) < 1e-13);
  CHECK(fabs(rt_sf_airy_ai(-12.0) - -0.066555175054373129474) < 1e-13);
  CHECK(fabs(rt_sf_igamma(200000.0, 199000.0) - 0.012576006291331173558) < 1e-9);
}

static void test_identities(void) {
  for (double x = -9.75; x < 40; x += 0.625) {
    if (x <= 0 && x == trunc(x)) continue; /* the poles */
    CHECK_CLOSE(rt_sf_digamma(x + 1) - rt_sf_digamma(x), 1.0 / x, 1e-12);
    CHECK_CLOSE(rt_sf_trigamma(x) - rt_sf_trigamma(x + 1), 1.0 / (x * x), 1e-11);
    CHECK_CLOSE(rt_sf_lgamma(x + 1) - rt_sf_lgamma(x), log(fabs(x)), 1e-11 + 1e-13 / fabs(log(fabs(x)) + 1e-300));
  }
  for (double a = 0.25; a < 60; a *= 1.7)
    for (double x = 0.1; x < 120; x *= 2.3) {
      CHECK_CLOSE(rt_sf_igamma(a, x) + rt_sf_igammac(a, x), 1.0, 4e-15);
      /* P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1) */
      const double front = exp(a * log(x) - x - rt_sf_lgamma(a + 1));
      CHECK(fabs(rt_sf_igamma(a + 1, x) - (rt_sf_igamma(a, x) - front)) < 1e-14);
    }
  for (double x = 0.01; x < 80; x *= 1.37) { /* I0 K1 + I1 K0 = 1 / x, scaled forms */
    const double w = rt_sf_bessel_i0(x, 1) * rt_sf_bessel_k(1.0, x, 1) + rt_sf_bessel_i1(x, 1) * rt_sf_bessel_k(0.0, x, 1);
    CHECK_CLOSE(w, 1.0 / x, 2e-14);
  }
  /* Seams between methods: both sides agree to rounding. */
  CHECK_CLOSE(rt_sf_bessel_i0(nextafter(20.0, 0), 1), rt_sf_bessel_i0(nextafter(20.0, 40), 1), 1e-14);
  CHECK_CLOSE(rt_sf_bessel_k(0.0, nextafter(20.0, 0), 1), rt_sf_bessel_k(0.0, nextafter(20.0, 40), 1), 1e-14);
  CHECK_CLOSE(rt_sf_airy_ai(1.0), rt_sf_airy_ai(nextafter(1.0, 2)), 1e-14);
  CHECK(fabs(rt_sf_airy_ai(-8.0) - rt_sf_airy_ai(nextafter(-8.0, -9))) < 1e-13);
  CHECK_CLOSE(rt_sf_erfcx(nextafter(10.0, 0)), rt_sf_erfcx(10.0), 1e-14);
  /* p's relative condition number in x = ndtri(p) is about x^2 (1400 at
   * p = 1e-300). */
  for (double p = 1e-300; p < 0.99; p *= 7.3) {
    const double x = rt_sf_ndtri(p);
    CHECK_CLOSE(exp(rt_sf_log_ndtr(x)), p, (8 + 2 * x * x) * 2.2e-16);
  }
  CHECK_CLOSE(rt_sf_polygamma(4, 2.5), -24.0 * rt_sf_zeta(5.0, 2.5), 1e-15);
  CHECK(rt_sf_polynomial(RT_CHEBYSHEV_T, 0.3, 7.0) == cos(7.0 * acos(0.3)));
  CHECK_CLOSE(rt_sf_polynomial(RT_LEGENDRE_P, 0.5, 3.9), 0.5 * (5 * 0.125 - 3 * 0.5), 1e-15);
  CHECK_CLOSE(rt_sf_polynomial(RT_HERMITE_H, 1.5, 4.0), 16 * pow(1.5, 4) - 48 * 1.5 * 1.5 + 12, 1e-15);
  CHECK_CLOSE(rt_sf_polynomial(RT_SHIFTED_CHEBYSHEV_U, 0.8, 5.0), rt_sf_polynomial(RT_CHEBYSHEV_U, 0.6, 5.0), 1e-15);
}

static void test_special_values(void) {
  CHECK(rt_sf_digamma(0.0) == -INFINITY && rt_sf_digamma(-0.0) == INFINITY);
  CHECK(isnan(rt_sf_digamma(-3.0)) && isnan(rt_sf_digamma(-INFINITY)) && rt_sf_digamma(INFINITY) == INFINITY);
  CHECK(rt_sf_trigamma(-2.0) == INFINITY && rt_sf_trigamma(INFINITY) == 0.0);
  CHECK(rt_sf_polygamma(2, 0.0) == -INFINITY && rt_sf_polygamma(3, -1.0) == INFINITY);
  CHECK(rt_sf_zeta(1.0, NAN) == INFINITY && isnan(rt_sf_zeta(0.5, 2.0)) && rt_sf_zeta(2.0, -3.0) == INFINITY);
  CHECK(isnan(rt_sf_zeta(2.5, -1.5)) && isnan(rt_sf_zeta(2.0, INFINITY)) && rt_sf_zeta(INFINITY, 1.0) == 1.0);
  CHECK(rt_sf_igamma(0.0, 1.0) == 1.0 && isnan(rt_sf_igamma(0.0, 0.0)) && isnan(rt_sf_igamma(-1.0, 1.0)));
  CHECK(rt_sf_igamma(INFINITY, NAN) == 0.0 && rt_sf_igammac(2.0, INFINITY) == 0.0 && rt_sf_igammac(2.0, 0.0) == 1.0);
  CHECK(isnan(rt_sf_bessel_i0(INFINITY, 0)) && rt_sf_bessel_i0(-INFINITY, 1) == 0.0);
  CHECK(signbit(rt_sf_bessel_i1(-INFINITY, 1)) && rt_sf_bessel_i0(800.0, 0) == INFINITY);
  CHECK(rt_sf_bessel_k(0.0, 0.0, 0) == INFINITY && isnan(rt_sf_bessel_k(1.0, -1.0, 1)) && rt_sf_bessel_k(0.0, INFINITY, 0) == 0.0);
  CHECK(rt_sf_spherical_j0(INFINITY) == 0.0 && rt_sf_spherical_j0(0.0) == 1.0);
  CHECK(isnan(rt_sf_airy_ai(INFINITY)) && isnan(rt_sf_airy_ai(-INFINITY)) && rt_sf_airy_ai(1e300) == 0.0);
  CHECK(rt_sf_erfcx(-30.0) == INFINITY && rt_sf_erfcx(INFINITY) == 0.0 && rt_sf_erfcx(0.0) == 1.0);
  CHECK(rt_sf_ndtri(0.0) == -INFINITY && rt_sf_ndtri(1.0) == INFINITY && rt_sf_ndtri(0.5) == 0.0 && isnan(rt_sf_ndtri(1.5)));
  CHECK(rt_sf_log_ndtr(INFINITY) == 0.0 && rt_sf_log_ndtr(-INFINITY) == -INFINITY);
  /* Degrees: truncated; negative, NaN, infinite and huge ones give 0. */
  CHECK(rt_sf_polynomial(RT_LEGENDRE_P, 0.3, 2.7) == rt_sf_polynomial(RT_LEGENDRE_P, 0.3, 2.0));
  CHECK(rt_sf_polynomial(RT_CHEBYSHEV_T, 0.3, -1.0) == 0.0 && rt_sf_polynomial(RT_HERMITE_H, 0.3, NAN) == 0.0);
  CHECK(rt_sf_polynomial(RT_LAGUERRE_L, 0.3, INFINITY) == 0.0 && rt_sf_polynomial(RT_CHEBYSHEV_U, 0.3, 1e30) == 0.0);
  CHECK(rt_sf_polynomial(RT_CHEBYSHEV_W, 1.0, 7.0) == 15.0 && rt_sf_polynomial(RT_CHEBYSHEV_V, -1.0, 2.0) == 5.0);
}

int main(void) {
  RUN(test_values);
  RUN(test_identities);
  RUN(test_special_values);
  return CHECK_MAIN_RESULT();
}
