/* Special functions of torch.special (and lgamma, digamma, polygamma, i0,
 * igamma, igammac of torch), computed in double for float64 and rounded
 * once from double for float32 (float16/bfloat16 through float32, as the
 * CPU computes them). Operands (out, x) unless stated:
 *   LGAMMA DIGAMMA              log |Gamma(x)|, psi(x)
 *   POLYGAMMA                   scalars [n]: the n-th derivative of psi
 *   I0 I0E I1 I1E               modified Bessel I_0, I_1, E: times e^-|x|
 *   K0 K0E K1 K1E               modified Bessel K_0, K_1, E: times e^x
 *   BESSEL_J0 .. BESSEL_Y1      Bessel J_0, J_1, Y_0, Y_1
 *   SPHERICAL_BESSEL_J0 AIRY_AI sin(x) / x; Airy's Ai
 *   ERFCX NDTRI LOG_NDTR        e^(x^2) erfc(x); the standard normal's
 *                               quantile; its log-CDF
 *   ZETA (out, x, q)            Hurwitz zeta
 *   IGAMMA IGAMMAC (out, a, x)  regularised incomplete gamma P and Q
 *   CHEBYSHEV_T .. LEGENDRE_P (out, x, n): the polynomial of degree n
 *                               (truncated to an integer) at x
 * Special values follow PyTorch CPU (see runtime/src/ops/special/). */
#ifndef NEURONRT_OPS_SPECIAL_H
#define NEURONRT_OPS_SPECIAL_H

#define NRT_SPECIAL_UNARY_OPS(X)                                                             \
  X(LGAMMA, lgamma) X(DIGAMMA, digamma) X(POLYGAMMA, polygamma) X(I0, i0) X(I0E, i0e)       \
  X(I1, i1) X(I1E, i1e) X(K0, k0) X(K0E, k0e) X(K1, k1) X(K1E, k1e) X(BESSEL_J0, bessel_j0) \
  X(BESSEL_J1, bessel_j1) X(BESSEL_Y0, bessel_y0) X(BESSEL_Y1, bessel_y1)                   \
  X(SPHERICAL_BESSEL_J0, spherical_bessel_j0) X(AIRY_AI, airy_ai) X(ERFCX, erfcx)           \
  X(NDTRI, ndtri) X(LOG_NDTR, log_ndtr)

#define NRT_POLYNOMIAL_OPS(X)                                                                \
  X(CHEBYSHEV_T, chebyshev_t) X(CHEBYSHEV_U, chebyshev_u) X(CHEBYSHEV_V, chebyshev_v)       \
  X(CHEBYSHEV_W, chebyshev_w) X(SHIFTED_CHEBYSHEV_T, shifted_chebyshev_t)                   \
  X(SHIFTED_CHEBYSHEV_U, shifted_chebyshev_u) X(SHIFTED_CHEBYSHEV_V, shifted_chebyshev_v)   \
  X(SHIFTED_CHEBYSHEV_W, shifted_chebyshev_w) X(HERMITE_H, hermite_h)                       \
  X(HERMITE_HE, hermite_he) X(LAGUERRE_L, laguerre_l) X(LEGENDRE_P, legendre_p)

#define NRT_SPECIAL_FUNCTION_OPS(X) \
  NRT_SPECIAL_UNARY_OPS(X)          \
  X(ZETA, zeta) X(IGAMMA, igamma) X(IGAMMAC, igammac) NRT_POLYNOMIAL_OPS(X)

#endif
