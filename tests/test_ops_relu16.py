"""bfloat16/float16 relu on every bit pattern, against PyTorch CPU.

relu on the 16-bit types runs on the bits (pointwise_unary.c: negative,
non-zero, non-NaN values become +0, everything else passes). relu is a
select, no rounding, so PyTorch CPU is the reference bit for bit: -0.0 stays
-0.0 (x < 0 is false for it), infinities pass or become +0. NaN only has to
stay NaN: its payload is what the float32 path's rounding back gives
(bfloat16 0x7fc0, float16 the sign with 0x7e00), while PyTorch CPU's differs
between its vector and scalar conversions.
"""

import pytest
import torch
import torch.nn.functional as F

from conftest import no_fallback
from exact_oracle import all_patterns

DTYPES = [torch.float16, torch.bfloat16]


def same_bits(actual, expected):
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(actual), nan)
    assert torch.equal(actual.view(torch.int16)[~nan], expected.view(torch.int16)[~nan])


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_relu_every_pattern(dtype):
    x = all_patterns(dtype)
    with no_fallback():
        same_bits(torch.relu(x.to("neuron")), torch.relu(x))
        # strided: a non-contiguous view through F.relu
        grid = x.reshape(256, 256)
        same_bits(F.relu(grid.to("neuron")[:, 1::3]), F.relu(grid[:, 1::3]))
        same_bits(F.relu(grid.to("neuron").t()), F.relu(grid.t()))
        y = x.to("neuron")
        y.relu_()
        same_bits(y, torch.relu(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_relu_special_values(dtype):
    x = torch.tensor([-0.0, 0.0, float("inf"), -float("inf"), float("nan"), -1.5, 2.5], dtype=dtype)
    with no_fallback():
        got = torch.relu(x.to("neuron")).cpu()
    assert got.view(torch.int16)[0] == x.view(torch.int16)[0]  # -0.0 kept with its sign
    assert got[2] == float("inf") and got[3] == 0 and torch.isnan(got[4])
    assert got.view(torch.int16)[3] == 0 and got.view(torch.int16)[5] == 0  # +0, not -0
    assert got[6] == 2.5


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_threshold_backward_zero_every_pattern(dtype):
    # threshold 0 (relu's backward) also runs on the bits: every pattern as
    # the gradient against every pattern as x (a permutation)
    g = all_patterns(dtype)
    x = g.view(torch.int16)[torch.randperm(g.numel(), generator=torch.Generator().manual_seed(0))].view(dtype)
    with no_fallback():
        for gg, xx in ((g, x), (x, g), (g[:-1:3], x[1::3])):
            for threshold in (0, 0.0):
                got = torch.ops.aten.threshold_backward(gg.to("neuron"), xx.to("neuron"), threshold)
                same_bits(got, torch.where(xx <= 0, torch.zeros_like(gg), gg))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_relu_autograd(dtype):
    x = all_patterns(dtype)
    x = x[~torch.isnan(x)]
    g = torch.linspace(-2, 2, x.numel()).to(dtype)
    xn = x.to("neuron").requires_grad_()
    with no_fallback():
        torch.relu(xn).backward(g.to("neuron"))
    xc = x.clone().requires_grad_()
    torch.relu(xc).backward(g)
    same_bits(xn.grad, xc.grad)
