"""histc and renorm on neuron against PyTorch CPU: every floating dtype,
contiguous, non-contiguous, zero-size inputs, NaN and out-of-range elements,
the data-derived range of histc, renorm's p (1, 2, 3, inf) along every dim,
in-place and out= forms; errors for bad input. histc's counts are compared
exactly (the bins are PyTorch's own arithmetic). No op may fall back.
"""

import math

import pytest
import torch

import torchneuron

DEV = "neuron"
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def randn(shape, dtype, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---- histc -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_histc_counts_match_cpu_exactly(dtype):
    # float16/bfloat16 counts stay below 256: the CPU adds its counts in the
    # 16-bit dtype, which stops counting past 256 (bfloat16) or 2048 (float16);
    # neuron counts exactly and rounds the total once
    x = randn((4000 if dtype in (torch.float32, torch.float64) else 240,), dtype) * 3
    x[::97] = float("nan")
    for bins, lo, hi in ((100, 0, 0), (7, -1.5, 2.25), (1, -3, 3), (33, -0.1, 0.1), (10, 0.3, 0.3)):
        x_nan_free = x.nan_to_num(0.5) if lo == hi else x  # a data-derived range needs finite data
        expected = torch.histc(x_nan_free, bins=bins, min=lo, max=hi)
        got = torch.histc(x_nan_free.to(DEV), bins=bins, min=lo, max=hi)
        assert got.dtype == dtype
        assert torch.equal(got.cpu(), expected), (bins, lo, hi)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_histc_edges_and_integer_valued_data(dtype):
    # elements on the bin edges, at min and at max: the arithmetic decides
    x = torch.arange(-20, 21).to(dtype) / 4
    for bins, lo, hi in ((8, -5, 5), (41, -5, 5), (3, -1, 1), (6, 0, 5)):
        assert torch.equal(torch.histc(x.to(DEV), bins, lo, hi).cpu(), torch.histc(x, bins, lo, hi))


def test_histc_layouts_sizes_and_out():
    x = randn((30, 40), torch.float32)
    xd = x.to(DEV)
    for make in (lambda t: t.t(), lambda t: t[:, ::3], lambda t: t[::2], lambda t: t.view(6, 5, 40)[:, 1:4]):
        assert torch.equal(torch.histc(make(xd), 20, -2, 2).cpu(), torch.histc(make(x), 20, -2, 2))
    # zero-size input, a range from nothing: [-1, 1]
    empty = torch.empty(0, 3)
    assert torch.equal(torch.histc(empty.to(DEV), 4).cpu(), torch.histc(empty, 4))
    # a constant input: the range widens by one each side
    ones = torch.ones(5)
    assert torch.equal(torch.histc(ones.to(DEV), 4).cpu(), torch.histc(ones, 4))
    # 0-d input
    s = torch.tensor(0.25)
    assert torch.equal(torch.histc(s.to(DEV), 4, 0, 1).cpu(), torch.histc(s, 4, 0, 1))
    # out=, resized
    out = torch.empty(3, device=DEV)
    torch.histc(x.to(DEV), 10, -1, 1, out=out)
    assert torch.equal(out.cpu(), torch.histc(x, 10, -1, 1))
    # a large input: the counts of every chunk add up
    big = randn((300_000,), torch.float32)
    assert torch.equal(torch.histc(big.to(DEV), 50, -3, 3).cpu(), torch.histc(big, 50, -3, 3))


def test_histc_errors_match_cpu():
    cases = [
        (lambda d: torch.histc(torch.ones(3, device=d), bins=-1), RuntimeError, "bins must be > 0, but got -1"),
        (lambda d: torch.histc(torch.ones(3, device=d), bins=3, min=3, max=1), RuntimeError,
         "max must be larger than min"),
        (lambda d: torch.histc(torch.tensor([1.0, math.inf], device=d), bins=3), RuntimeError,
         r"range of \[1, inf\] is not finite"),
        (lambda d: torch.histc(torch.tensor([1.0, math.nan], device=d), bins=3), RuntimeError, "is not finite"),
        (lambda d: torch.histc(torch.ones(3, dtype=torch.int32, device=d), bins=3), (RuntimeError,
                                                                                     NotImplementedError),
         "\"histogram_cpu\" not implemented for 'Int'"),
    ]
    for fn, exc, match in cases:
        with pytest.raises(exc, match=match):
            fn("cpu")
        with pytest.raises(exc, match=match):
            fn(DEV)


# ---- renorm ------------------------------------------------------------------------

TOL = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2), torch.float32: (1e-5, 1e-6),
       torch.float64: (1e-12, 1e-12)}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("p", [1, 2, 3, math.inf])
def test_renorm_matches_cpu(dtype, p):
    x = randn((5, 6, 7), dtype) * 2
    for dim in (0, 1, 2, -1):
        for maxnorm in (0.0, 1.5, 4.0, 100.0):
            expected = torch.renorm(x, p, dim, maxnorm)
            got = torch.renorm(x.to(DEV), p, dim, maxnorm)
            assert got.dtype == dtype and got.shape == expected.shape
            torch.testing.assert_close(got.cpu(), expected, rtol=TOL[dtype][0], atol=TOL[dtype][1])


def test_renorm_layouts_in_place_out_and_zero_size():
    x = randn((8, 9), torch.float32)
    xd = x.to(DEV)
    for make in (lambda t: t.t(), lambda t: t[:, ::2], lambda t: t[::3], lambda t: t.unsqueeze(1).expand(8, 4, 9)):
        for dim in (0, 1):
            torch.testing.assert_close(torch.renorm(make(xd), 2, dim, 1.0).cpu(), torch.renorm(make(x), 2, dim, 1.0))
    y, yd = x.clone().t(), x.clone().to(DEV).t()
    y.renorm_(1, 0, 2.0)
    yd.renorm_(1, 0, 2.0)
    torch.testing.assert_close(yd.cpu(), y)
    out = torch.empty(2, device=DEV)
    torch.renorm(xd, 2, 1, 0.5, out=out)
    torch.testing.assert_close(out.cpu(), torch.renorm(x, 2, 1, 0.5))
    for shape in ((0, 3), (3, 0)):
        e = torch.empty(shape)
        assert torch.renorm(e.to(DEV), 2, 0, 1.0).shape == e.shape
    nan = x.clone()
    nan[2, 3] = math.nan
    torch.testing.assert_close(torch.renorm(nan.to(DEV), 2, 0, 1.0).cpu(), torch.renorm(nan, 2, 0, 1.0),
                               equal_nan=True)


def test_renorm_gradient_matches_cpu():
    x = randn((4, 5), torch.float64)
    xc, xn = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    (torch.renorm(xc, 2, 0, 1.0) * torch.arange(20.).view(4, 5).double()).sum().backward()
    (torch.renorm(xn, 2, 0, 1.0) * torch.arange(20.).view(4, 5).double().to(DEV)).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_renorm_errors_match_cpu():
    cases = [
        (lambda d: torch.renorm(torch.ones(3, device=d), 2, 0, 1), RuntimeError,
         "input needs at least 2 dimensions, got 1 dimensions"),
        (lambda d: torch.renorm(torch.ones(3, 3, device=d), 0, 0, 1), RuntimeError, "non-positive-norm"),
        (lambda d: torch.renorm(torch.ones(3, 3, device=d), -1, 0, 1), RuntimeError, "non-positive-norm"),
        (lambda d: torch.renorm(torch.ones(3, 3, device=d), 2, 0, -1), RuntimeError,
         "expected maxnorm to be >= 0 but got -1"),
        (lambda d: torch.renorm(torch.ones(3, 3, device=d), 2, 3, 1), IndexError, "Dimension out of range"),
        (lambda d: torch.renorm(torch.ones(3, 3, dtype=torch.int32, device=d), 2, 0, 1), RuntimeError,
         "Expected a floating point or complex tensor as input. Got Int"),
    ]
    for fn, exc, match in cases:
        with pytest.raises(exc, match=match):
            fn("cpu")
        with pytest.raises(exc, match=match):
            fn(DEV)
