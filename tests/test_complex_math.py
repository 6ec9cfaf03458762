"""Complex math composed natively on the float planes, continued
(complex_math_inverse.cpp, complex_math_pow.cpp): asin, acos, atan, asinh,
acosh, atanh, log1p, expm1, sgn and pow against PyTorch CPU and against an
mpmath oracle (complex128 CPU where mpmath has no signed zeros), with the
principal branches' cuts, signed zeros and infinities, every variant
(functional, out=, in-place), strided / conjugate / negative-bit inputs,
zero-size and 0-d tensors, and complex gradients."""

import math

import pytest
import torch
import torchneuron

from conftest import no_fallback

DEV = "neuron"
CDTYPES = [torch.complex64, torch.complex128]
INVERSE = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p", "expm1", "sgn"]
INF = math.inf


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


def _tol(dtype):
    return {"rtol": 1.3e-6, "atol": 1e-5} if dtype == torch.complex64 else {"rtol": 1e-7, "atol": 1e-7}


def _values(dtype, *shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, dtype=torch.complex128, generator=g) * 2
    flat = x.view(-1)
    # near the branch points, on the cuts' both sides, tiny and large
    special = [complex(0.0, -0.0), 1.0, -1.0, complex(2.0, 0.0), complex(2.0, -0.0), complex(-3.0, 0.0),
               complex(-3.0, -0.0), complex(0.0, 2.0), complex(-0.0, -2.0), 1e-4 + 1e-5j, 0.999 + 0.001j,
               3e5 - 2e5j, -1e9 + 1e9j, 0.5j, -0.25]
    flat[: len(special)] = torch.tensor(special, dtype=torch.complex128)
    return x.to(dtype)


# Special values: on the axes, at the branch points and at +-inf. The
# reference is the CPU's complex128 result (C99 Annex G for std::complex);
# complex64 compares with it rounded.
SPECIAL = [complex(a, b) for a, b in [
    (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (2, 0.0), (2, -0.0), (-2, 0.0), (-2, -0.0),
    (0.0, 2), (-0.0, 2), (0.0, -2), (-0.0, -2), (1, 0.0), (-1, 0.0), (0.5, 0.0), (0.5, -0.0),
    (INF, 0.0), (-INF, 0.0), (0.0, INF), (0.0, -INF), (INF, INF), (-INF, INF), (INF, -INF), (-INF, -INF),
    (1e30, 1e30), (3, INF), (-3, -INF), (INF, 2), (-INF, -2)]]
# where the CPU's own dtypes disagree or are not C99 (expm1's inf e^x times
# a zero sine, sgn's inf/inf): those values are checked below by their
# definitions instead
SKIP_SPECIAL = {"expm1": {(INF, 0.0), (1e30, 1e30)}, "sgn": {(3, INF), (-3, -INF)}}


def _special(name):
    skip = SKIP_SPECIAL.get(name, set())
    return [z for z in SPECIAL if (z.real, z.imag) not in skip]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_native(dtype, name):
    fn = getattr(torch, name)
    x = _values(dtype, 4, 6)
    d = x.to(DEV)
    tol = _tol(dtype)
    with no_fallback():
        torch.testing.assert_close(fn(d).cpu(), fn(x), equal_nan=True, **tol)
        torch.testing.assert_close(fn(d.t()).cpu(), fn(x.t()), equal_nan=True, **tol)  # strided
        torch.testing.assert_close(fn(d[:, ::2]).cpu(), fn(x[:, ::2]), equal_nan=True, **tol)
        torch.testing.assert_close(fn(d[1, 2]).cpu(), fn(x[1, 2]), equal_nan=True, **tol)  # 0-d
        assert fn(d[:0]).shape == (0, 6) and fn(d[:0]).dtype == dtype
        # conjugate and negative bits
        torch.testing.assert_close(fn(d.conj()).cpu(), fn(x.conj()), equal_nan=True, **tol)
        # (against the CPU on the materialised values: how a negative bit's
        # zeros materialise picks the side of a cut)
        negated = torch._neg_view(d)
        torch.testing.assert_close(fn(negated).cpu(), fn(negated.resolve_neg().cpu()), equal_nan=True, **tol)
        out = torch.empty(0, dtype=dtype, device=DEV)  # resized as out= resizes
        fn(d, out=out)
        torch.testing.assert_close(out.cpu(), fn(x), equal_nan=True, **tol)
        inplace = d.clone()
        getattr(inplace, name + "_")()
        torch.testing.assert_close(inplace.cpu(), fn(x), equal_nan=True, **tol)
        strided_inplace = d.clone().t()
        getattr(strided_inplace, name + "_")()
        torch.testing.assert_close(strided_inplace.cpu(), fn(x.t()), equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_special_values(dtype, name):
    fn = getattr(torch, name)
    z = torch.tensor(_special(name), dtype=torch.complex128)
    with no_fallback():
        got = fn(z.to(dtype).to(DEV)).cpu()
    torch.testing.assert_close(got, fn(z).to(dtype), equal_nan=True, **_tol(dtype))
    # the sign of a zero that picks the side of a cut picks the value
    for v in (2.0, -2.0):
        pair = torch.tensor([complex(v, 0.0), complex(v, -0.0), complex(0.0, v), complex(-0.0, v)], dtype=dtype)
        with no_fallback():
            got = fn(pair.to(DEV)).cpu()
        torch.testing.assert_close(got, fn(pair.to(torch.complex128)).to(dtype), **_tol(dtype))


def test_expm1_and_sgn_at_infinity():
    # expm1(inf + 0i) is inf + 0i (C99's cexp(inf + 0i) - 1; the CPU's
    # vectorised path gives inf + NaN i); sgn(3 + inf i) is 0 + NaN i as
    # z / |z| gives (the CPU's complex64 path: NaN + NaN i)
    z = torch.tensor([complex(INF, 0.0), complex(3, INF)], dtype=torch.complex64, device=DEV)
    with no_fallback():
        e = torch.expm1(z[:1]).cpu()
        s = torch.sgn(z[1:]).cpu()
    assert e[0].real == INF and e[0].imag == 0
    assert s[0].real == 0 and math.isnan(s[0].imag)


MPMATH = {"asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh",
          "atanh": "atanh", "log1p": "log1p", "expm1": "expm1"}


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", sorted(MPMATH))
def test_inverse_functions_against_mpmath(dtype, name):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 113
    g = torch.Generator().manual_seed(7)
    # off the axes (mpmath has no signed zeros): magnitudes from 1e-6 to 1e12
    # (expm1: to 80, where e^x still fits complex64)
    mag = torch.logspace(-6, 1.9 if name == "expm1" else 12, 400, dtype=torch.float64)
    ang = torch.rand(400, generator=g, dtype=torch.float64) * 2 * math.pi
    z = torch.polar(mag, ang).to(dtype)
    with no_fallback():
        got = getattr(torch, name)(z.to(DEV)).cpu().to(torch.complex128)
    f = getattr(mpmath, MPMATH[name])
    exact = torch.tensor([complex(f(mpmath.mpc(v.real, v.imag))) for v in z.to(torch.complex128).tolist()],
                         dtype=torch.complex128)
    # within the OpInfo tolerances of the correctly rounded value (complex64),
    # a few ulps for complex128
    tol = _tol(dtype) if dtype == torch.complex64 else {"rtol": 1e-13, "atol": 1e-15}
    torch.testing.assert_close(got, exact, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_backward(dtype, name):
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {}
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, dtype=dtype, generator=g) * 0.8 + 0.1j
    cot = torch.randn(3, 5, dtype=dtype, generator=g)
    xc = x.clone().requires_grad_()
    getattr(torch, name)(xc).backward(cot)
    xd = x.to(DEV).requires_grad_()
    with no_fallback():
        getattr(torch, name)(xd).backward(cot.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)


# ------------------------------------------------------------------- pow

def _pow_base(dtype):
    x = _values(dtype, 4, 6)
    x.view(-1)[20] = 0  # a zero base
    x.view(-1)[21] = complex(-0.0, 0.0)
    return x


EXPONENTS = [0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5, 4, -3, 1j, 1 + 1j, 0j, -0.75 + 0.25j]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("e", EXPONENTS, ids=str)
def test_pow_tensor_scalar_native(dtype, e):
    x = _pow_base(dtype)
    d = x.to(DEV)
    # exp(w log z) carries log z's rounding times |w| (3e5 ** 2.5: 2e-6 in
    # float32, on the CPU as here)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.complex64 else _tol(dtype)
    with no_fallback():
        torch.testing.assert_close((d ** e).cpu(), x ** e, equal_nan=True, **tol)
        torch.testing.assert_close(torch.pow(d.t(), e).cpu(), torch.pow(x.t(), e), equal_nan=True, **tol)
        torch.testing.assert_close(torch.pow(d.conj(), e).cpu(), torch.pow(x.conj(), e), equal_nan=True,
                                   **tol)
        assert torch.pow(d[:0], e).shape == (0, 6)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.pow(d, e, out=out)
        torch.testing.assert_close(out.cpu(), x ** e, equal_nan=True, **tol)
        inplace = d.clone()
        inplace.pow_(e)
        torch.testing.assert_close(inplace.cpu(), x ** e, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_pow_tensor_tensor_native(dtype):
    x = _pow_base(dtype)
    g = torch.Generator().manual_seed(5)
    w = torch.randn(4, 6, dtype=dtype, generator=g)
    w.view(-1)[:6] = torch.tensor([0, 2, -1, 0.5, 1j, 0], dtype=dtype)
    w.view(-1)[20:24] = torch.tensor([2.5, 0, -1, 1j], dtype=dtype)  # zero bases: 0, NaN, inf + NaN i, NaN
    d, wd = x.to(DEV), w.to(DEV)
    tol = _tol(dtype)
    with no_fallback():
        torch.testing.assert_close(torch.pow(d, wd).cpu(), torch.pow(x, w), equal_nan=True, **tol)
        torch.testing.assert_close(torch.pow(d.t(), wd.t()).cpu(), torch.pow(x.t(), w.t()), equal_nan=True,
                                   **tol)
        # broadcast both ways
        torch.testing.assert_close(torch.pow(d, wd[1]).cpu(), torch.pow(x, w[1]), equal_nan=True, **tol)
        torch.testing.assert_close(torch.pow(d[:, :1], wd).cpu(), torch.pow(x[:, :1], w), equal_nan=True,
                                   **tol)
        torch.testing.assert_close(torch.pow(d, torch._neg_view(wd.conj())).cpu(),
                                   torch.pow(x, torch._neg_view(w.conj())), equal_nan=True, **tol)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.pow(d, wd, out=out)
        torch.testing.assert_close(out.cpu(), torch.pow(x, w), equal_nan=True, **tol)
        inplace = d.clone()
        inplace.pow_(wd[0])
        torch.testing.assert_close(inplace.cpu(), torch.pow(x, w[0]), equal_nan=True, **tol)
        assert torch.pow(d[:0], wd[:0]).shape == (0, 6)
        # a real tensor exponent promotes
        r = torch.arange(-2, 4, dtype=torch.float32)
        torch.testing.assert_close(torch.pow(d, r.to(DEV)).cpu(), torch.pow(x, r), equal_nan=True, **tol)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        d[0].clone().pow_(wd)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("base", [2, 0, 1, -2.5, 1 + 1j, 0.5j])
def test_pow_scalar_base_native(dtype, base):
    g = torch.Generator().manual_seed(6)
    w = torch.randn(4, 6, dtype=dtype, generator=g)
    w.view(-1)[:5] = torch.tensor([0, 2, -1, 1j, 0.5], dtype=dtype)
    wd = w.to(DEV)
    tol = _tol(dtype)
    with no_fallback():
        torch.testing.assert_close(torch.pow(base, wd).cpu(), torch.pow(base, w), equal_nan=True, **tol)
        torch.testing.assert_close((base ** wd.t()).cpu(), base ** w.t(), equal_nan=True, **tol)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.pow(base, wd, out=out)
        torch.testing.assert_close(out.cpu(), torch.pow(base, w), equal_nan=True, **tol)


def test_pow_real_tensor_complex_exponent_promotes():
    x = torch.arange(-3, 3, dtype=torch.float32) * 0.5
    with no_fallback():
        got = torch.pow(x.to(DEV), 0.5 + 1j).cpu()
    assert got.dtype == torch.complex64
    torch.testing.assert_close(got, torch.pow(x, 0.5 + 1j), equal_nan=True)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_pow_against_mpmath(dtype):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 113
    g = torch.Generator().manual_seed(8)
    z = torch.randn(200, dtype=torch.complex128, generator=g) * 3
    w = torch.randn(200, dtype=torch.complex128, generator=g) * 2
    with no_fallback():
        got = torch.pow(z.to(dtype).to(DEV), w.to(dtype).to(DEV)).cpu().to(torch.complex128)
    zz, ww = z.to(dtype).to(torch.complex128).tolist(), w.to(dtype).to(torch.complex128).tolist()
    exact = torch.tensor([complex(mpmath.power(mpmath.mpc(a.real, a.imag), mpmath.mpc(b.real, b.imag)))
                          for a, b in zip(zz, ww)], dtype=torch.complex128)
    # exp(w log z) carries log z's rounding times |w|: a few ulps of the
    # result's magnitude
    tol = {"rtol": 2e-6, "atol": 1e-5} if dtype == torch.complex64 else {"rtol": 1e-13, "atol": 1e-14}
    torch.testing.assert_close(got, exact, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_pow_backward(dtype):
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {}
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 4, dtype=dtype, generator=g) + 0.5
    w = torch.randn(3, 4, dtype=dtype, generator=g)
    cot = torch.randn(3, 4, dtype=dtype, generator=g)

    def f(a, b):
        # (a complex exponent's gradient multiplies by a complex number, which
        # keeps to the CPU for its bits)
        return a ** 2 + a ** 2.5 + a ** 3 + b ** -1 + torch.pow(a, b)

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    f(xc, wc).backward(cot)
    xd, wd = x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()
    with no_fallback():
        f(xd, wd).backward(cot.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, **tol)


# ------------------------------------------------------- prod and scans

def _scan_values(dtype, *shape):
    g = torch.Generator().manual_seed(11)
    # near the unit circle, so that long products stay in range
    return (torch.polar(1 + 0.1 * torch.randn(*shape, generator=g, dtype=torch.float64),
                        torch.rand(*shape, generator=g, dtype=torch.float64) * 6.3)).to(dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_prod_native(dtype):
    x = _scan_values(dtype, 5, 7, 3)
    x[1, 2, 0] = 0  # a zero factor
    d = x.to(DEV)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.complex64 else {}
    with no_fallback():
        torch.testing.assert_close(d.prod().cpu(), x.prod(), **tol)
        for dim in (0, 1, 2, -1):
            torch.testing.assert_close(d.prod(dim).cpu(), x.prod(dim), **tol)
            torch.testing.assert_close(d.prod(dim, keepdim=True).cpu(), x.prod(dim, keepdim=True), **tol)
        torch.testing.assert_close(d.transpose(0, 2).prod(1).cpu(), x.transpose(0, 2).prod(1), **tol)
        torch.testing.assert_close(d.conj().prod(1).cpu(), x.conj().prod(1), **tol)
        torch.testing.assert_close(torch._neg_view(d).prod(0).cpu(), torch._neg_view(x).prod(0), **tol)
        torch.testing.assert_close(d[:, :0].prod(1).cpu(), x[:, :0].prod(1))  # empty product: 1
        assert d[:, :0].prod(0).shape == (0, 3)
        torch.testing.assert_close(d[:0].prod().cpu(), x[:0].prod())
        torch.testing.assert_close(d[1, 1, 1].prod().cpu(), x[1, 1, 1].prod())  # 0-d
        torch.testing.assert_close(d[1, 1, 1].prod(0).cpu(), x[1, 1, 1].prod(0))
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.prod(d, 1, out=out)
        torch.testing.assert_close(out.cpu(), x.prod(1), **tol)
        # a length-1000 product (the tree's ten rounds)
        long = _scan_values(dtype, 1000)
        torch.testing.assert_close(long.to(DEV).prod().cpu(), long.to(torch.complex128).prod().to(dtype),
                                   rtol=1e-4 if dtype == torch.complex64 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_native(dtype, op):
    x = _scan_values(dtype, 5, 37)
    x[2, 3] = 0
    d = x.to(DEV)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.complex64 else {}
    fn = getattr(torch, op)
    with no_fallback():
        for dim in (0, 1, -1):
            torch.testing.assert_close(fn(d, dim).cpu(), fn(x, dim), **tol)
        torch.testing.assert_close(fn(d.t(), 0).cpu(), fn(x.t(), 0), **tol)  # strided
        torch.testing.assert_close(fn(d.conj(), 1).cpu(), fn(x.conj(), 1), **tol)
        torch.testing.assert_close(fn(torch._neg_view(d), 1).cpu(), fn(torch._neg_view(x), 1), **tol)
        torch.testing.assert_close(fn(d[0, 0], 0).cpu(), fn(x[0, 0], 0))  # 0-d
        assert fn(d[:0], 1).shape == (0, 37)
        out = torch.empty(0, dtype=dtype, device=DEV)
        fn(d, 1, out=out)
        torch.testing.assert_close(out.cpu(), fn(x, 1), **tol)
        inplace = d.clone()
        getattr(inplace, op + "_")(1)
        torch.testing.assert_close(inplace.cpu(), fn(x, 1), **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_logcumsumexp_native_follows_the_cpus_branch(dtype):
    # The scan runs in order as the CPU's does: the imaginary part (which
    # branch of log) depends on the order terms join, so a long line with
    # imaginary parts far outside (-pi, pi] must still match to rounding.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 400, dtype=dtype, generator=g) * 12
    d = x.to(DEV)
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.complex64 else {"rtol": 1e-12, "atol": 1e-11}
    with no_fallback():
        for dim in (0, 1, -1):
            torch.testing.assert_close(torch.logcumsumexp(d, dim).cpu(), torch.logcumsumexp(x, dim), **tol)
        torch.testing.assert_close(torch.logcumsumexp(d.t(), 1).cpu(), torch.logcumsumexp(x.t(), 1), **tol)
        torch.testing.assert_close(torch.logcumsumexp(d.conj(), 1).cpu(), torch.logcumsumexp(x.conj(), 1), **tol)
        torch.testing.assert_close(torch.logcumsumexp(d[1, 2], 0).cpu(), torch.logcumsumexp(x[1, 2], 0))
        assert torch.logcumsumexp(d[:0], 1).shape == (0, 400)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.logcumsumexp(d, 1, out=out)
        torch.testing.assert_close(out.cpu(), torch.logcumsumexp(x, 1), **tol)
    # the CPU's special values: -inf and +inf runs, a NaN that poisons the rest
    inf, nan = float("inf"), float("nan")
    special = torch.tensor([complex(-inf, 1), complex(-inf, 2), 1 + 1j, complex(inf, 1), complex(inf, 2),
                            complex(nan, 0), 3 + 1j], dtype=dtype)
    with no_fallback():
        got = torch.logcumsumexp(special.to(DEV), 0).cpu()
    torch.testing.assert_close(got, torch.logcumsumexp(special, 0), equal_nan=True)
    assert torchneuron.get_executed_ops().get("aten::_logcumsumexp.out", 0) >= 1


@pytest.mark.parametrize("dtype", CDTYPES)
def test_prod_and_scans_backward(dtype):
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {}
    x = _scan_values(dtype, 4, 6)
    g = torch.Generator().manual_seed(12)
    cot = torch.randn(4, 6, dtype=dtype, generator=g)
    cot1 = torch.randn(4, dtype=dtype, generator=g)

    def f(a):
        return (a.cumsum(1) * cot).sum() + (a.cumprod(1) * cot).sum() + (a.prod(1) * cot1).sum() + a.prod()

    xc = x.clone().requires_grad_()
    f(xc).real.backward()
    xd = x.to(DEV).requires_grad_()
    # cumprod's backward still reaches the counted fallback (a complex
    # op on its zero test); the gradient's values are the CPU's
    f(xd).real.backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    def g(a):
        return (a.cumsum(1) * cot.to(a.device)).sum() + (a.prod(1) * cot1.to(a.device)).sum() + a.prod()

    xd = x.to(DEV).requires_grad_()
    with no_fallback():
        g(xd).real.backward()
    xc = x.clone().requires_grad_()
    g(xc).real.backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    # eq / ne with a number (what prod's backward asks)
    with no_fallback():
        for v in (0, 1.5, 1 - 2j):
            assert torch.equal((x.to(DEV) == v).cpu(), x == v)
            assert torch.equal((x.to(DEV).conj() != v).cpu(), x.conj() != v)


# ------------------------------------------------------------ sinc, exp2

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["sinc", "exp2"])
def test_sinc_and_exp2_native(dtype, name):
    fn = getattr(torch, name)
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(5, 7, dtype=torch.complex128, generator=g) * 3).to(dtype)
    # zero (sinc's removable point, both zero signs), the axes, integers
    x.view(-1)[:8] = torch.tensor([0, complex(-0.0, 0.0), 1, -2, 1j, -0.5j, 3 + 0j, 0.25 - 0.75j], dtype=dtype)
    d = x.to(DEV)
    tol = _tol(dtype)
    with no_fallback():
        got = fn(d).cpu()
        torch.testing.assert_close(fn(d.t()).cpu(), fn(x.t()), **tol)
        torch.testing.assert_close(fn(d.conj()).cpu(), fn(x.conj()), **tol)
        out = torch.empty(0, dtype=dtype, device=DEV)
        fn(d, out=out)
        inplace = d.clone()
        getattr(inplace, name + "_")()
    torch.testing.assert_close(got, fn(x), **tol)
    torch.testing.assert_close(out.cpu(), fn(x), **tol)
    torch.testing.assert_close(inplace.cpu(), fn(x), **tol)
    if name == "sinc":
        assert got.view(-1)[0] == 1 and got.view(-1)[1] == 1
    # the signs of exact zeros are the CPU's (the quotient's branch order)
    expected = torch.view_as_real(fn(x))
    exact_zero = expected == 0
    assert torch.equal(torch.view_as_real(got)[exact_zero].signbit(), expected[exact_zero].signbit())


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["sinc", "exp2"])
def test_sinc_and_exp2_backward(dtype, name):
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {}
    g = torch.Generator().manual_seed(6)
    x = torch.randn(3, 4, dtype=dtype, generator=g) + 0.2j
    cot = torch.randn(3, 4, dtype=dtype, generator=g)
    xc = x.clone().requires_grad_()
    getattr(torch, name)(xc).backward(cot)
    xd = x.to(DEV).requires_grad_()
    with no_fallback():
        getattr(torch, name)(xd).backward(cot.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
