/* Kernels of NRT_SPECIAL_FUNCTION_OPS: loops over the scalar functions of
 * special_math.h. float64 calls them directly; float32 calls them in double
 * and rounds once (lgamma excepted: the C library's lgammaf, which is what
 * PyTorch CPU's float32 lgamma calls). float16 and bfloat16 run the float32
 * loop, converted on the way in and out. */
#include <math.h>
#include "ops/pointwise/pointwise.h"
#include "ops/special/special_math.h"

#define UNARY_KERNEL(NAME, EXPR)                                  \
  RT_UNARY_LOOP(NAME##_f32, float, float, (float)(EXPR))          \
  RT_UNARY_LOOP(NAME##_f64, double, double, EXPR)                 \
  RT_DEFINE_TABLE_KERNEL(NAME, RT_FLOAT_TABLE)

#define BINARY_KERNEL(NAME, EXPR)                                 \
  RT_BINARY_LOOP(NAME##_f32, float, float, (float)(EXPR))         \
  RT_BINARY_LOOP(NAME##_f64, double, double, EXPR)                \
  RT_DEFINE_TABLE_KERNEL(NAME, RT_FLOAT_TABLE)

/* J and Y of an infinite argument are NaN on PyTorch CPU (the C library
 * gives 0). */
#define BESSEL_LIBM(FN) (isinf((double)x) ? NAN : FN((double)x))

RT_UNARY_LOOP(lgamma_f32, float, float, rt_sf_lgammaf(x))
RT_UNARY_LOOP(lgamma_f64, double, double, rt_sf_lgamma(x))
RT_DEFINE_TABLE_KERNEL(lgamma, RT_FLOAT_TABLE)

UNARY_KERNEL(digamma, rt_sf_digamma(x))
UNARY_KERNEL(polygamma, rt_sf_polygamma(sc->i[0], x))
UNARY_KERNEL(i0, rt_sf_bessel_i0(x, 0))
UNARY_KERNEL(i0e, rt_sf_bessel_i0(x, 1))
UNARY_KERNEL(i1, rt_sf_bessel_i1(x, 0))
UNARY_KERNEL(i1e, rt_sf_bessel_i1(x, 1))
UNARY_KERNEL(k0, rt_sf_bessel_k(0.0, x, 0))
UNARY_KERNEL(k0e, rt_sf_bessel_k(0.0, x, 1))
UNARY_KERNEL(k1, rt_sf_bessel_k(1.0, x, 0))
UNARY_KERNEL(k1e, rt_sf_bessel_k(1.0, x, 1))
UNARY_KERNEL(bessel_j0, BESSEL_LIBM(j0))
UNARY_KERNEL(bessel_j1, BESSEL_LIBM(j1))
UNARY_KERNEL(bessel_y0, BESSEL_LIBM(y0))
UNARY_KERNEL(bessel_y1, BESSEL_LIBM(y1))
UNARY_KERNEL(spherical_bessel_j0, rt_sf_spherical_j0(x))
UNARY_KERNEL(airy_ai, rt_sf_airy_ai(x))
UNARY_KERNEL(erfcx, rt_sf_erfcx(x))
UNARY_KERNEL(ndtri, rt_sf_ndtri(x))
UNARY_KERNEL(log_ndtr, rt_sf_log_ndtr(x))

BINARY_KERNEL(zeta, rt_sf_zeta(a, b))
BINARY_KERNEL(igamma, rt_sf_igamma(a, b))
BINARY_KERNEL(igammac, rt_sf_igammac(a, b))

#define POLYNOMIAL_KERNEL(CODE, name) BINARY_KERNEL(name, rt_sf_polynomial(RT_##CODE, a, b))
NRT_POLYNOMIAL_OPS(POLYNOMIAL_KERNEL)
