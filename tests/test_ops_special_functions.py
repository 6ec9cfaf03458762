"""The special functions (lgamma, digamma, polygamma, i0, igamma, igammac
and torch.special's Bessel, Airy, normal-distribution, zeta and polynomial
functions) run natively on neuron.

Values are checked against mpmath at 40 digits (float64 to a few ulp,
float32 and float16 rounded once from the exact value): PyTorch CPU is not
the oracle here, because several of its kernels are less accurate than
ours (float32 in float arithmetic; J0/J1/Y0/Y1 and Airy Ai to about 1e-7 in
float64). Special values (poles, domain edges, infinities, NaN) and dtype
rules are checked against the CPU. No op may fall back.
"""

import math

import mpmath
import pytest
import torch

from exact_oracle import round_to

mpmath.mp.dps = 40
DEV = "neuron"
NAN, INF = float("nan"), float("inf")
pytestmark = pytest.mark.usefixtures("native_only")
S = torch.special


def _bessel_y(n):
    return lambda x: mpmath.bessely(n, x)


# name -> (torch function, exact function, sample points, float64 relative tolerance)
UNARY = {
    "lgamma": (torch.lgamma, lambda x: mpmath.log(abs(mpmath.gamma(x))), (-20.5, 30), 1e-13),
    "digamma": (torch.digamma, mpmath.digamma, (-20.5, 40), 1e-13),
    "trigamma": (lambda t: torch.polygamma(1, t), lambda x: mpmath.psi(1, x), (-20.5, 40), 1e-12),
    "polygamma4": (lambda t: torch.polygamma(4, t), lambda x: mpmath.psi(4, x), (0.05, 40), 1e-13),
    "i0": (torch.i0, lambda x: mpmath.besseli(0, x), (-60, 60), 1e-14),
    "i0e": (S.i0e, lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)), (-500, 500), 1e-14),
    "i1": (S.i1, lambda x: mpmath.besseli(1, x), (-60, 60), 1e-14),
    "i1e": (S.i1e, lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)), (-500, 500), 1e-14),
    "modified_bessel_i0": (S.modified_bessel_i0, lambda x: mpmath.besseli(0, x), (-60, 60), 1e-14),
    "modified_bessel_i1": (S.modified_bessel_i1, lambda x: mpmath.besseli(1, x), (-60, 60), 1e-14),
    "modified_bessel_k0": (S.modified_bessel_k0, lambda x: mpmath.besselk(0, x), (1e-3, 60), 1e-14),
    "modified_bessel_k1": (S.modified_bessel_k1, lambda x: mpmath.besselk(1, x), (1e-3, 60), 1e-14),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, lambda x: mpmath.besselk(0, x) * mpmath.exp(x),
                                  (1e-3, 600), 1e-14),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, lambda x: mpmath.besselk(1, x) * mpmath.exp(x),
                                  (1e-3, 600), 1e-14),
    "bessel_j0": (S.bessel_j0, lambda x: mpmath.besselj(0, x), (-30, 30), None),
    "bessel_j1": (S.bessel_j1, lambda x: mpmath.besselj(1, x), (-30, 30), None),
    "bessel_y0": (S.bessel_y0, _bessel_y(0), (1e-3, 30), None),
    "bessel_y1": (S.bessel_y1, _bessel_y(1), (1e-3, 30), None),
    "spherical_bessel_j0": (S.spherical_bessel_j0, lambda x: mpmath.sin(x) / x if x else mpmath.mpf(1), (-30, 30), 1e-15),
    "airy_ai": (S.airy_ai, mpmath.airyai, (-20, 12), None),
    "erfcx": (S.erfcx, lambda x: mpmath.exp(x * x) * mpmath.erfc(x), (-20, 60), 1e-14),
    "ndtri": (S.ndtri, lambda p: mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1), (1e-6, 1 - 1e-6), 1e-13),
    "log_ndtr": (S.log_ndtr, lambda x: mpmath.log(mpmath.ncdf(x)), (-35, 9), 1e-14),
}
SIXTEEN_BIT = {"lgamma", "digamma", "trigamma", "polygamma4", "i0", "i0e", "i1", "i1e"}


def points(lo, hi, n=97, dtype=torch.float64):
    return torch.linspace(lo, hi, n, dtype=torch.float64).to(dtype)


def exact_of(fn, x: torch.Tensor, dtype) -> torch.Tensor:
    values = []
    for v in x.double().tolist():
        try:
            e = float(fn(mpmath.mpf(v)))
        except (ZeroDivisionError, ValueError):
            e = NAN
        values.append(e if dtype == torch.float64 else round_to(e, dtype))
    return torch.tensor(values, dtype=torch.float64)


def check_exact(actual, exact, rtol, atol=0.0):
    actual = actual.cpu().double()
    finite = exact.isfinite()
    assert torch.equal(actual[~finite].nan_to_num(), exact[~finite].nan_to_num())
    err = (actual[finite] - exact[finite]).abs()
    bound = atol + rtol * exact[finite].abs()
    worst = int((err - bound).argmax()) if err.numel() else 0
    assert bool((err <= bound).all()), (float(actual[finite][worst]), float(exact[finite][worst]))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64_matches_exact(name):
    fn, exact, (lo, hi), rtol = UNARY[name]
    x = points(lo, hi)
    x = x[(x != x.round()) | (x > 0)] if name in ("lgamma", "digamma", "trigamma", "polygamma4") else x
    # J, Y and Ai oscillate: near their zeros the bound is absolute (Ai's
    # series and asymptotic form meet at x = -8 with about 1e-13).
    atol = 0.0 if rtol is not None else 1e-13 if name == "airy_ai" else 1e-15
    check_exact(fn(x.to(DEV)), exact_of(exact, x, torch.float64), rtol or 2e-14, atol)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_is_the_exact_value_rounded(name):
    fn, exact, (lo, hi), _ = UNARY[name]
    x = points(lo, hi, dtype=torch.float32)
    if name in ("lgamma", "digamma", "trigamma", "polygamma4"):
        x = x[(x != x.round()) | (x > 0)]
    got = fn(x.to(DEV))
    assert got.dtype == torch.float32
    # lgamma is the C library's lgammaf, as on the CPU: its bound is a few ulp.
    check_exact(got, exact_of(exact, x, torch.float32), 4e-7 if name == "lgamma" else 1.2e-7, 1e-38)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(SIXTEEN_BIT))
def test_sixteen_bit_inputs(name, dtype):
    fn, exact, (lo, hi), _ = UNARY[name]
    x = points(max(lo, -8.5), min(hi, 8.0), 41, dtype)
    x = x[(x != x.round()) | (x > 0)]
    got = fn(x.to(DEV))
    assert got.dtype == dtype
    # computed in float32 and rounded: within one unit of the exact value
    ulp = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}[dtype]
    check_exact(got, exact_of(exact, x, dtype), ulp, 1e-6)


@pytest.mark.parametrize("fn", [S.erfcx, S.airy_ai, S.bessel_j0, S.modified_bessel_k0, S.ndtri],
                         ids=lambda f: f.__name__)
def test_sixteen_bit_refused_as_on_cpu(fn):
    x = torch.rand(4, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        fn(x)
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        fn(x.to(DEV))


EDGES = torch.tensor([0.0, -0.0, -1.0, -2.5, 1.0, INF, -INF, NAN, 1e-300, -1e-300, 1e17, 1e300, 0.5],
                     dtype=torch.float64)
# (function, edge indices where PyTorch CPU's own value is an artifact of its
# formula, not the function's: trigamma at -1 (its pole) and 1e300, J and Y
# at 1e17 and 1e300, where the CPU's argument reduction has lost every digit)
EDGE_FUNCTIONS = [
    (torch.lgamma, ()), (torch.digamma, ()), (lambda t: torch.polygamma(1, t), (2, 11)),
    (lambda t: torch.polygamma(2, t), ()), (lambda t: torch.polygamma(3, t), ()), (torch.i0, ()),
    (S.i0e, ()), (S.i1, ()), (S.i1e, ()), (S.erfcx, ()), (S.log_ndtr, ()), (S.bessel_j0, ()),
    (S.bessel_j1, (10, 11)), (S.bessel_y0, (10, 11)), (S.bessel_y1, (10, 11)), (S.modified_bessel_i0, ()),
    (S.modified_bessel_i1, ()), (S.modified_bessel_k0, ()), (S.modified_bessel_k1, ()),
    (S.scaled_modified_bessel_k0, ()), (S.scaled_modified_bessel_k1, ()), (S.spherical_bessel_j0, ()),
    (S.airy_ai, ()), (S.ndtri, ()),
]


@pytest.mark.parametrize("fn,artifacts", EDGE_FUNCTIONS, ids=range(len(EDGE_FUNCTIONS)))
def test_special_values_match_cpu(fn, artifacts):
    keep = [i for i in range(len(EDGES)) if i not in artifacts]
    x = EDGES[keep]
    expected, got = fn(x), fn(x.to(DEV)).cpu()
    # The same NaNs, infinities, zeros and signs; finite values to the CPU's
    # own accuracy (its J, Y and trigamma are good to about 1e-7 and 5e-10).
    for pattern in (torch.isnan, torch.isposinf, torch.isneginf, lambda t: t == 0,
                    lambda t: t.signbit() & ~t.isnan()):
        assert torch.equal(pattern(got), pattern(expected)), (x, got, expected)
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-6, atol=1e-6)


def test_trigamma_is_infinite_at_its_poles():
    """PyTorch CPU returns sin(pi x)'s rounding error there (6.6e32)."""
    x = torch.tensor([0.0, -1.0, -7.0], dtype=torch.float64)
    assert torch.equal(torch.polygamma(1, x.to(DEV)).cpu(), torch.full((3,), INF, dtype=torch.float64))


def test_layouts_and_variants():
    base = torch.linspace(0.1, 9.0, 60, dtype=torch.float64).reshape(6, 10)
    n = base.to(DEV)
    t = n.t()  # non-contiguous
    torch.testing.assert_close(torch.digamma(t).cpu(), torch.digamma(base.t()), rtol=1e-13, atol=0)
    e = n[:1].expand(4, 10)  # broadcast input
    torch.testing.assert_close(S.i1e(e).cpu(), S.i1e(base[:1].expand(4, 10)), rtol=1e-14, atol=0)
    assert S.erfcx(n[:0]).shape == (0, 10)
    z = torch.tensor(2.5, dtype=torch.float64)
    torch.testing.assert_close(torch.lgamma(z.to(DEV)).cpu(), torch.lgamma(z))
    out = torch.empty(6, 10, dtype=torch.float64, device=DEV)
    torch.i0(n, out=out)
    torch.testing.assert_close(out.cpu(), torch.i0(base), rtol=1e-14, atol=0)
    inplace = n.clone()
    inplace.lgamma_()
    torch.testing.assert_close(inplace.cpu(), torch.lgamma(base), rtol=1e-14, atol=0)
    poly = n.clone()
    poly.polygamma_(2)
    torch.testing.assert_close(poly.cpu(), torch.polygamma(2, base), rtol=1e-13, atol=0)
    ints = torch.arange(1, 7, device=DEV)
    assert torch.digamma(ints).dtype == torch.float32 and S.zeta(ints, ints).dtype == torch.float32


def test_zeta():
    x = torch.tensor([1.5, 2.0, 3.0, 4.0, 7.5, 30.0], dtype=torch.float64)[:, None]
    q = torch.tensor([0.25, 1.0, 3.5, -2.5, 100.0], dtype=torch.float64)[None, :]
    x, q = torch.broadcast_tensors(x, q)
    ok = (q > 0) | (x == x.round())
    with mpmath.workdps(80):  # at 40 digits mpmath's zeta(30, 100) is wrong in the 11th
        exact = torch.tensor([float(mpmath.zeta(a, b)) if o else NAN
                              for a, b, o in zip(x.flatten().tolist(), q.flatten().tolist(), ok.flatten().tolist())],
                             dtype=torch.float64).reshape(x.shape)
    got = S.zeta(x[:, :1].to(DEV), q[:1].to(DEV)).cpu()  # broadcast operands
    torch.testing.assert_close(got, exact, rtol=1e-14, atol=0, equal_nan=True)
    edges_x = torch.tensor([1.0, 0.5, NAN, INF, INF, 2.0, 2.0, 2.0], dtype=torch.float64)
    edges_q = torch.tensor([NAN, 2.0, 0.0, 1.0, 0.5, -3.0, INF, -INF], dtype=torch.float64)
    torch.testing.assert_close(S.zeta(edges_x.to(DEV), edges_q.to(DEV)).cpu(), S.zeta(edges_x, edges_q),
                               equal_nan=True)
    torch.testing.assert_close(S.zeta(2.0, q[0].to(DEV)).cpu(), S.zeta(2.0, q[0]), rtol=1e-14, atol=0,
                               equal_nan=True)


def test_incomplete_gamma():
    a = torch.tensor([0.1, 0.5, 1.0, 2.5, 10.0, 150.0, 3000.0], dtype=torch.float64)[:, None]
    f = torch.tensor([0.05, 0.5, 0.9, 1.0, 1.2, 3.0], dtype=torch.float64)[None, :]
    x = a * f
    a, x = torch.broadcast_tensors(a, x)
    p = torch.igamma(a.to(DEV), x.to(DEV)).cpu()
    q = torch.igammac(a.to(DEV), x.to(DEV)).cpu()
    pairs = list(zip(a.flatten().tolist(), x.flatten().tolist()))
    exact_p = torch.tensor([float(mpmath.gammainc(s, 0, v, regularized=True)) for s, v in pairs],
                           dtype=torch.float64).reshape(a.shape)
    exact_q = torch.tensor([float(mpmath.gammainc(s, v, mpmath.inf, regularized=True)) for s, v in pairs],
                           dtype=torch.float64).reshape(a.shape)
    # x^a e^-x / Gamma(a) is computed as exp(a log x - x - lgamma(a)): its
    # relative error is about a |log x| eps (2.5e-12 at a = 3000).
    torch.testing.assert_close(p, exact_p, rtol=1e-11, atol=1e-300)
    torch.testing.assert_close(q, exact_q, rtol=1e-11, atol=1e-300)
    edge_a = torch.tensor([0.0, 0.0, -1.0, INF, INF, NAN, NAN, 2.0, 2.0], dtype=torch.float64)
    edge_x = torch.tensor([1.0, 0.0, 1.0, 1.0, NAN, 0.0, INF, INF, 0.0], dtype=torch.float64)
    for fn in (torch.igamma, torch.igammac):
        torch.testing.assert_close(fn(edge_a.to(DEV), edge_x.to(DEV)).cpu(), fn(edge_a, edge_x), equal_nan=True)
    with pytest.raises(NotImplementedError, match="igamma"):
        torch.igamma(torch.ones(3, dtype=torch.int32, device=DEV), torch.ones(3, dtype=torch.int32, device=DEV))
    half = torch.tensor([0.5, 2.0], dtype=torch.float16)
    torch.testing.assert_close(torch.igamma(half.to(DEV), half.to(DEV)).cpu(), torch.igamma(half, half))


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_match_cpu(name):
    fn = getattr(S, name)
    x = torch.tensor([0.3, -0.7, 1.0, -1.0, 2.0, -3.0, 0.0, 0.5, INF, 0.9], dtype=torch.float64)[:, None]
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 2.7, 7.0, 9.0, 30.0, NAN, INF, -INF, 1e30], dtype=torch.float64)
    expected = fn(x, n)
    got = fn(x.to(DEV), n.to(DEV)).cpu()
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    torch.testing.assert_close(fn(x.to(DEV), 5).cpu(), fn(x, 5), rtol=1e-12, atol=1e-12, equal_nan=True)
    torch.testing.assert_close(fn(0.25, n.to(DEV)).cpu(), fn(0.25, n), rtol=1e-12, atol=1e-12, equal_nan=True)
    f32 = fn(x.float().to(DEV), n.float().to(DEV))
    assert f32.dtype == torch.float32


def test_polynomial_of_nan_is_nan():
    """PyTorch CPU returns an uninitialised value for some NaN inputs."""
    x = torch.full((3,), NAN, dtype=torch.float64, device=DEV)
    n = torch.tensor([2.0, 7.0, 9.0], dtype=torch.float64, device=DEV)
    assert S.chebyshev_polynomial_u(x, n).isnan().all()
    assert S.legendre_polynomial_p(x, n).isnan().all()


def test_polygamma_negative_order():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, torch.ones(2, device=DEV))


@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma, torch.i0, S.i0e, S.i1, S.i1e, S.erfcx,
                                S.log_ndtr, S.ndtri], ids=lambda f: f.__name__)
def test_gradients_match_cpu(fn):
    base = torch.linspace(0.05, 0.95, 19, dtype=torch.float64) * (1 if fn is S.ndtri else 7)
    ours = base.to(DEV).requires_grad_()
    ref = base.clone().requires_grad_()
    fn(ours).sum().backward()
    fn(ref).sum().backward()
    torch.testing.assert_close(ours.grad.cpu(), ref.grad, rtol=1e-9, atol=1e-12)


def test_igamma_gradient_matches_cpu():
    a = torch.linspace(0.5, 6.0, 12, dtype=torch.float64)
    x = (torch.linspace(0.2, 8.0, 12, dtype=torch.float64)).requires_grad_()
    xn = x.detach().to(DEV).requires_grad_()
    torch.igamma(a, x).sum().backward()
    torch.igamma(a.to(DEV), xn).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, rtol=1e-10, atol=1e-14)
