/* Scalar special functions in double precision (NRT_SPECIAL_FUNCTION_OPS).
 *
 * Each is written from its defining series, recurrences, asymptotic
 * expansions or integrals; the float32 kernels call them and round once.
 * Special values (poles, domain edges, infinities, NaN) follow PyTorch CPU;
 * elsewhere the results are meant to be accurate to a few ulp of double
 * unless a function's comment states a weaker bound.
 */
#ifndef NEURONRT_OPS_SPECIAL_MATH_H
#define NEURONRT_OPS_SPECIAL_MATH_H

#include <stdint.h>

/* gamma.c */
double rt_sf_lgamma(double x);
float rt_sf_lgammaf(float x);
double rt_sf_digamma(double x);
double rt_sf_trigamma(double x);
double rt_sf_polygamma(int64_t n, double x);
double rt_sf_zeta(double x, double q); /* Hurwitz: sum over k >= 0 of (q + k)^-x */

/* incomplete_gamma.c: regularised lower P(a, x) and upper Q(a, x) */
double rt_sf_igamma(double a, double x);
double rt_sf_igammac(double a, double x);

/* bessel.c */
double rt_sf_bessel_i0(double x, int scaled); /* scaled: e^-|x| I0(x) */
double rt_sf_bessel_i1(double x, int scaled);
double rt_sf_bessel_k(double nu, double x, int scaled); /* scaled: e^x K_nu(x) */
double rt_sf_spherical_j0(double x);
double rt_sf_airy_ai(double x);

/* normal.c */
double rt_sf_erfcx(double x);    /* e^(x^2) erfc(x) */
double rt_sf_ndtri(double p);    /* the inverse of the standard normal CDF */
double rt_sf_log_ndtr(double x); /* log of the standard normal CDF */

/* polynomials.c: the orthogonal polynomials of degree n (n truncated to an
 * integer; a negative degree gives 0), as PyTorch's special_*_polynomial_* */
typedef enum rt_polynomial_kind {
  RT_CHEBYSHEV_T,
  RT_CHEBYSHEV_U,
  RT_CHEBYSHEV_V,
  RT_CHEBYSHEV_W,
  RT_SHIFTED_CHEBYSHEV_T,
  RT_SHIFTED_CHEBYSHEV_U,
  RT_SHIFTED_CHEBYSHEV_V,
  RT_SHIFTED_CHEBYSHEV_W,
  RT_HERMITE_H,
  RT_HERMITE_HE,
  RT_LAGUERRE_L,
  RT_LEGENDRE_P,
} rt_polynomial_kind;
double rt_sf_polynomial(rt_polynomial_kind kind, double x, double n);

#endif
