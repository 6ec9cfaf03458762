"""bfloat16/float16 ops that only clear, flip, copy, compare or select, on
every bit pattern, against PyTorch CPU.

abs, neg, sign/sgn, clamp/hardtanh with number bounds, clamp_min/clamp_max
(a number or a tensor), threshold, copysign, maximum and minimum run on the
16-bit patterns (runtime/src/ops/pointwise/bits16.c) with the bits of the
float32 path they replace; no value needs rounding, so PyTorch CPU is the
reference bit for bit, -0.0 and +0.0 included and float16 subnormals. NaN
only has to stay NaN: its payload is what the float32 path's rounding back
gives (bfloat16 0x7fc0, float16 the sign with 0x7e00), while PyTorch CPU's
differs between its vector and scalar conversions.

clamp_min/clamp_max with a number (and clamp with one number bound) keep x
when it equals the bound (-0.0 against 0.0), as CPU does: the shim makes
them hardtanh with the other bound infinite. maximum/minimum of two
tensors give the second operand on such ties, as CPU's vector loop does
(its scalar tail gives the first), so those ties are not compared here.
"""

import pytest
import torch
import torch.nn.functional as F

from conftest import no_fallback
from exact_oracle import all_patterns

DTYPES = [torch.float16, torch.bfloat16]
IDS = ["float16", "bfloat16"]
NAN = float("nan")
INF = float("inf")
# around zero, rounding boundaries, float16 subnormals, range ends
NUMBERS = [0.0, -0.0, 0.1, -0.1, 1.0, -2.5, 6.0, 1e-6, -3e-8, 65504.0, 65520.0, -1e30, 3.4e38, INF, -INF]


def same_bits(actual, expected):
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(actual), nan)
    bits = torch.int32 if expected.dtype == torch.float32 else torch.int16
    bad = (actual.view(bits) != expected.view(bits)) & ~nan
    assert not bad.any(), (expected[bad][:4], actual[bad][:4])


def check(op, x, *args):
    """op on x (and args) on neuron against CPU; where CPU refuses a bound
    that overflows the dtype, neuron must refuse it too."""
    try:
        want = op(x, *args)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match="without overflow"):
            op(x.to("neuron"), *args)
        assert "without overflow" in str(e)
        return
    same_bits(op(x.to("neuron"), *args), want)


def permuted(x, seed=0):
    return x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(seed))]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("op", [torch.abs, torch.neg, torch.sign, torch.sgn], ids=lambda f: f.__name__)
def test_unary_every_pattern(dtype, op):
    x = all_patterns(dtype)
    grid = x.reshape(256, 256)
    with no_fallback():
        same_bits(op(x.to("neuron")), op(x))
        same_bits(op(grid.to("neuron")[:, 1::3]), op(grid[:, 1::3]))
        same_bits(op(grid.to("neuron").t()), op(grid.t()))
        y = x.to("neuron")
        getattr(y, op.__name__ + "_")()
        same_bits(y, op(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_clamp_number_bounds_every_pattern(dtype):
    x = all_patterns(dtype)
    xn = x.to("neuron")
    pairs = [(lo, hi) for lo in NUMBERS for hi in NUMBERS[::2]] + [(NAN, 1.0), (-1.0, NAN), (1, 3)]
    with no_fallback():
        for lo, hi in pairs:
            check(torch.clamp, x, lo, hi)
            if not lo > hi:
                check(F.hardtanh, x, lo, hi)
        for b in NUMBERS + [NAN, 2]:
            check(torch.clamp_min, x, b)
            check(torch.clamp_max, x, b)
            check(lambda t, b: torch.clamp(t, min=b), x, b)
            check(lambda t, b: torch.clamp(t, max=b), x, b)
        y = xn.clone()
        y.clamp_(-0.5, 0.25)
        same_bits(y, torch.clamp(x, -0.5, 0.25))
        same_bits(F.relu6(xn[1::2]), F.relu6(x[1::2]))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threshold_every_pattern(dtype):
    x = all_patterns(dtype)
    cases = [(t, v) for t in NUMBERS for v in (0.0, -0.0, 20.0, 1e-7)] + [(NAN, 1.0), (1.0, NAN), (2, -3)]
    with no_fallback():
        for t, v in cases:
            check(F.threshold, x, t, v)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_binary_every_pattern(dtype):
    a = all_patterns(dtype)
    with no_fallback():
        for b in (permuted(a), permuted(a, 1), torch.flip(a, [0])):
            an, bn = a.to("neuron"), b.to("neuron")
            same_bits(torch.copysign(an, bn), torch.copysign(a, b))
            # ties (only -0.0 against +0.0 differ in bits): the second operand
            ties = (a == b) & (a.view(torch.int16) != b.view(torch.int16))
            for op in (torch.maximum, torch.minimum, torch.clamp_min, torch.clamp_max):
                want = torch.where(ties, b, op(a, b))
                same_bits(op(an, bn), want)
        # broadcast: a row against every pattern
        row = torch.tensor([-0.0, 0.0, 1.5, -INF, NAN], dtype=dtype)
        grid = a.reshape(-1, 1)
        same_bits(torch.copysign(grid.to("neuron"), row.to("neuron")), torch.copysign(grid, row))


@pytest.mark.parametrize("dtype", DTYPES + [torch.float32], ids=IDS + ["float32"])
def test_number_bound_ties_keep_x(dtype):
    x = torch.tensor([-0.0, 0.0] * 40, dtype=dtype)
    xn = x.to("neuron")
    with no_fallback():
        for b in (0.0, -0.0, 0, 1.5):
            for op in (torch.clamp_min, torch.clamp_max, lambda t, b: torch.clamp(t, min=b),
                       lambda t, b: torch.clamp(t, max=b)):
                same_bits(op(xn, b), op(x, b))
        y = xn.clone()
        y.clamp_min_(0.0)
        assert torch.equal(y.cpu().view(torch.uint8), x.view(torch.uint8))
        out = torch.empty_like(xn)
        torch.clamp_max(xn, -0.0, out=out)
        assert torch.equal(out.cpu().view(torch.uint8), x.view(torch.uint8))
    # an integer tensor with a float bound promotes, as on CPU
    i = torch.arange(-3, 4)
    assert torch.equal(torch.clamp_min(i.to("neuron"), 0.5).cpu(), torch.clamp_min(i, 0.5))
    assert torch.equal(torch.clamp(i.to("neuron"), max=1).cpu(), torch.clamp(i, max=1))
