"""add/sub of complex tensors against PyTorch CPU, natively (the runtime's
complex ADD kernel, complex_add.cpp): the CPU computes a + alpha * b (sub:
a - alpha * b) with alpha * b a complex product, real alphas included
(alpha + 0i), so an infinite part of b meeting a zero part of alpha gives
NaN there ((1 + 1j) + (inf + 0j) is inf + nanj); the parts match the CPU's
NaN for NaN and infinity for infinity. Every form: functional, out=, in
place, Python numbers, rsub, promotion from real and from complex64, 0-d
host tensors, conjugate inputs, and the CPU's errors."""

import math

import pytest
import torch

from conftest import no_fallback

DEV = "neuron"
INF, NAN = math.inf, math.nan
PARTS = [0.0, -1.5, 2.0, INF, -INF, NAN]


def _same_parts(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(torch.view_as_real(got.cpu()), torch.view_as_real(want), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("op", [torch.add, torch.sub])
def test_complex_alpha_matches_cpu(dtype, op):
    values = torch.tensor([complex(r, i) for r in PARTS for i in PARTS], dtype=dtype)
    a = values.repeat_interleave(len(values))  # every pair of extremal values
    b = values.repeat(len(values))
    with no_fallback():
        for alpha in (1j, 2 - 0.5j, complex(0, -3)):
            _same_parts(op(a.to(DEV), b.to(DEV), alpha=alpha), op(a, b, alpha=alpha))
            # broadcast, strided, zero-size, a Python complex operand
            x, y = a.view(36, 36), b.view(36, 36)[:1]
            _same_parts(op(x.to(DEV), y.to(DEV), alpha=alpha), op(x, y, alpha=alpha))
            _same_parts(op(x.t().to(DEV), y.to(DEV), alpha=alpha), op(x.t(), y, alpha=alpha))
            _same_parts(op(x[:0].to(DEV), y.to(DEV), alpha=alpha), op(x[:0], y, alpha=alpha))
            _same_parts(op(x.to(DEV), 1.5 + 2j, alpha=alpha), op(x, 1.5 + 2j, alpha=alpha))
            _same_parts(op(x[3, 4].to(DEV), y[0, 5].to(DEV), alpha=alpha), op(x[3, 4], y[0, 5], alpha=alpha))


def _pairs(dtype):
    """Every pair (a, b) of complex values with extremal parts."""
    values = torch.tensor([complex(r, i) for r in PARTS for i in PARTS], dtype=dtype)
    return values.repeat_interleave(len(values)), values.repeat(len(values))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("op", [torch.add, torch.sub])
def test_real_alpha_infinite_parts_match_cpu(dtype, op):
    a, b = _pairs(dtype)
    ad, bd = a.to(DEV), b.to(DEV)
    with no_fallback():
        for kwargs in ({}, {"alpha": 1}, {"alpha": -1}, {"alpha": 2.5}, {"alpha": 0}, {"alpha": -0.0}):
            _same_parts(op(ad, bd, **kwargs), op(a, b, **kwargs))
    # the named cases of test_binary_ufuncs' extremal values and of the CPU
    inf = INF
    x = torch.tensor([complex(inf, inf), 1 + 1j], dtype=dtype)
    y = torch.tensor([complex(-inf, -inf), complex(inf, 0)], dtype=dtype)
    with no_fallback():
        got = op(x.to(DEV), y.to(DEV)).cpu()
    want = op(x, y)
    assert torch.isnan(want[0].real) and torch.isnan(want[0].imag)  # nan+nanj on the CPU
    _same_parts(got, want)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_out_and_in_place_forms_match_cpu(dtype, name):
    a, b = _pairs(dtype)
    x, y = a.view(36, 36), b.view(36, 36)
    fn = getattr(torch, name)
    for alpha in (1, 3, -0.5, 2 - 1j):
        want = fn(x, y, alpha=alpha)
        out = torch.empty(0, dtype=dtype, device=DEV)  # resized as out= resizes
        sized = torch.empty(36, 36, dtype=dtype, device=DEV)
        inplace = x.to(DEV)
        with no_fallback():
            returned = fn(x.to(DEV), y.to(DEV), alpha=alpha, out=out)
            fn(x.to(DEV), y.to(DEV), alpha=alpha, out=sized)
            getattr(inplace, name + "_")(y.to(DEV), alpha=alpha)
        assert returned is out
        for got in (out, sized, inplace):
            _same_parts(got, want)
        # in place on a strided view, broadcast other
        base = x.clone()
        view_dev = base.to(DEV)
        with no_fallback():
            getattr(view_dev[:, ::3], name + "_")(y[:1, ::3].to(DEV), alpha=alpha)
        getattr(base[:, ::3], name + "_")(y[:1, ::3], alpha=alpha)
        _same_parts(view_dev, base)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_numbers_promotion_and_views_match_cpu(dtype):
    a, b = _pairs(dtype)
    x = a.view(36, 36)
    real = b.view(36, 36).real.contiguous()
    xd = x.to(DEV)
    cases = [
        lambda t, r: t + INF,                       # a Python real number: inf + 0j
        lambda t, r: t - complex(-INF, 1.0),
        lambda t, r: t.add(2.0, alpha=-3),          # add.Scalar
        lambda t, r: torch.rsub(t, r),              # real tensor - t, promoted
        lambda t, r: torch.rsub(t, 1.5, alpha=2),
        lambda t, r: t - r,                         # a real tensor promoted to complex
        lambda t, r: r + t,
        lambda t, r: torch.sub(t.conj(), t, alpha=0.5),     # a conjugate input
        lambda t, r: torch.add(t, t.to(torch.complex128)),  # complex64 + complex128
        lambda t, r: torch.add(t, torch.tensor(complex(INF, 0.0))),  # a 0-d host tensor
        lambda t, r: torch.add(t[:0], t[:1]),       # zero-size
        lambda t, r: torch.sub(t[3, 4], t[5, 6], alpha=2),  # 0-d
        lambda t, r: torch.add(t.t(), t[:, :1], alpha=-1),   # transposed, broadcast
    ]
    for k, case in enumerate(cases):
        with no_fallback():
            got = case(xd, real.to(DEV))
        _same_parts(got, case(x, real))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_errors_are_the_cpus(dtype):
    x = torch.ones(3, dtype=dtype)

    def same_error(fn):
        with pytest.raises(Exception) as cpu:
            fn(x.clone())
        with no_fallback(), pytest.raises(type(cpu.value)) as dev:
            fn(x.to(DEV))
        assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]

    same_error(lambda t: torch.add(t, t, alpha=True))
    same_error(lambda t: t.sub_(t, alpha=True))
    if dtype == torch.complex64:  # alpha does not fit complex64
        same_error(lambda t: torch.add(t, t, alpha=1e40))
        same_error(lambda t: torch.sub(t, t, alpha=complex(1e40, 0)))
    # an out= that partly overlaps an input
    same_error(lambda t: torch.add(t[:2], t[1:], out=t[1:]))
