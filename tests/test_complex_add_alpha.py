"""add/sub of complex tensors with a complex alpha against PyTorch CPU,
natively: the CPU computes a + alpha * b (sub: a - alpha * b) with alpha * b
a complex product, so an infinite part of b meeting a zero part of alpha
gives NaN there; the parts match the CPU's NaN for NaN."""

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
