// Special functions (runtime ops NRT_SPECIAL_FUNCTION_OPS): rows of the
// pointwise table (pointwise.h) for torch.special and the gamma family.
// Only overloads with a CPU kernel are listed; the Scalar overloads
// (special_zeta.self_scalar, ..._polynomial_t.x_scalar) and polygamma_ are
// composites of these. The dtype sets are the CPU kernels': the gamma
// family and I0/I1 take float16 and bfloat16 too, the rest float32 and
// float64 only; igamma and igammac refuse integer inputs instead of
// promoting them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "pointwise.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using D = PointwiseDtypes;

constexpr DtypeSet kWide{dtype_bit(at::kFloat) | dtype_bit(at::kDouble)};

void check_polygamma_order(const PointwiseCall& call, at::ScalarType) {
  TORCH_CHECK(call.scalars[0].toInt() >= 0, "polygamma(n, x) does not support negative n.");
}

#define SPECIAL_UNARY(NAME, CODE, DTYPES) {NAME " " NAME ".out", NRT_OP_##CODE, D::FloatResult, DTYPES}
#define POLYNOMIAL(NAME, CODE) \
  {"special_" NAME " special_" NAME ".out", NRT_OP_##CODE, D::FloatResult, kWide}

const PointwiseOp kSpecialOps[] = {
    {"lgamma lgamma_ lgamma.out", NRT_OP_LGAMMA, D::FloatResult, kFloatingDtypes},
    {"digamma digamma_ digamma.out", NRT_OP_DIGAMMA, D::FloatResult, kFloatingDtypes},
    {"polygamma polygamma.out", NRT_OP_POLYGAMMA, D::FloatResult, kFloatingDtypes, nullptr, 0,
     check_polygamma_order},
    {"i0 i0_ i0.out", NRT_OP_I0, D::FloatResult, kFloatingDtypes},
    SPECIAL_UNARY("special_i0e", I0E, kFloatingDtypes),
    SPECIAL_UNARY("special_i1", I1, kFloatingDtypes),
    SPECIAL_UNARY("special_i1e", I1E, kFloatingDtypes),
    SPECIAL_UNARY("special_modified_bessel_i0", I0, kWide),
    SPECIAL_UNARY("special_modified_bessel_i1", I1, kWide),
    SPECIAL_UNARY("special_modified_bessel_k0", K0, kWide),
    SPECIAL_UNARY("special_modified_bessel_k1", K1, kWide),
    SPECIAL_UNARY("special_scaled_modified_bessel_k0", K0E, kWide),
    SPECIAL_UNARY("special_scaled_modified_bessel_k1", K1E, kWide),
    SPECIAL_UNARY("special_bessel_j0", BESSEL_J0, kWide),
    SPECIAL_UNARY("special_bessel_j1", BESSEL_J1, kWide),
    SPECIAL_UNARY("special_bessel_y0", BESSEL_Y0, kWide),
    SPECIAL_UNARY("special_bessel_y1", BESSEL_Y1, kWide),
    SPECIAL_UNARY("special_spherical_bessel_j0", SPHERICAL_BESSEL_J0, kWide),
    SPECIAL_UNARY("special_airy_ai", AIRY_AI, kWide),
    SPECIAL_UNARY("special_erfcx", ERFCX, kWide),
    SPECIAL_UNARY("special_ndtri", NDTRI, kWide),
    SPECIAL_UNARY("special_log_ndtr", LOG_NDTR, kWide),
    SPECIAL_UNARY("special_zeta", ZETA, kWide),
    {"igamma igamma_ igamma.out", NRT_OP_IGAMMA, D::Arithmetic, kFloatingDtypes},
    {"igammac igammac_ igammac.out", NRT_OP_IGAMMAC, D::Arithmetic, kFloatingDtypes},
    POLYNOMIAL("chebyshev_polynomial_t", CHEBYSHEV_T),
    POLYNOMIAL("chebyshev_polynomial_u", CHEBYSHEV_U),
    POLYNOMIAL("chebyshev_polynomial_v", CHEBYSHEV_V),
    POLYNOMIAL("chebyshev_polynomial_w", CHEBYSHEV_W),
    POLYNOMIAL("shifted_chebyshev_polynomial_t", SHIFTED_CHEBYSHEV_T),
    POLYNOMIAL("shifted_chebyshev_polynomial_u", SHIFTED_CHEBYSHEV_U),
    POLYNOMIAL("shifted_chebyshev_polynomial_v", SHIFTED_CHEBYSHEV_V),
    POLYNOMIAL("shifted_chebyshev_polynomial_w", SHIFTED_CHEBYSHEV_W),
    POLYNOMIAL("hermite_polynomial_h", HERMITE_H),
    POLYNOMIAL("hermite_polynomial_he", HERMITE_HE),
    POLYNOMIAL("laguerre_polynomial_l", LAGUERRE_L),
    POLYNOMIAL("legendre_polynomial_p", LEGENDRE_P),
};

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  register_pointwise_ops(m, kSpecialOps, sizeof kSpecialOps / sizeof kSpecialOps[0]);
}

// This file's macros end here (the unity build puts files one after another).
#undef POLYNOMIAL
#undef SPECIAL_UNARY
}  // namespace torchneuron
