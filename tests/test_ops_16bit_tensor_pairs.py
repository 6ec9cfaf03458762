"""float16/bfloat16 add, sub, mul and div of two tensors, against PyTorch CPU.

float16 and bfloat16 run them in one pass with the conversion instructions
where the CPU has them (runtime one_pass16.c; the C test
test_one_pass16_matches_twins compares it with the general path bit for
bit), through the C loops elsewhere. Here: every bit pattern against another,
the layouts that take the one pass (contiguous, in place, one value
broadcast, odd lengths for the tails) and those that do not (strided,
transposed, broadcast rows), zero-size, all without the CPU fallback.
"""

import pytest
import torch

from conftest import no_fallback
from exact_oracle import all_patterns, same_bits

DTYPES = [torch.float16, torch.bfloat16]

OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "add_": lambda a, b: a.add_(b),
    "mul_": lambda a, b: a.mul_(b),
    "div_": lambda a, b: a.div_(b),
}


def run_both(op, a, b):
    """op on CPU copies and on neuron copies (each its own, for in place)."""
    fn = OPS[op]
    expected = fn(a.clone(), b)
    with no_fallback():
        got = fn(a.to("neuron"), b.to("neuron"))
    return got, expected


def shuffled_patterns(dtype, seed):
    x = all_patterns(dtype)
    return x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(seed))]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
def test_every_pattern_against_another(op, dtype):
    x = all_patterns(dtype)
    for seed in (1, 2):
        got, expected = run_both(op, x, shuffled_patterns(dtype, seed))
        same_bits(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "mul_"])
def test_layouts(op, dtype):
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(6, 40, generator=g) * 3).to(dtype)
    b = (torch.randn(6, 40, generator=g) * 3).to(dtype)
    cases = [
        (a, b),
        (a.t(), b.t()),  # non-contiguous
        (a[:, ::3], b[:, ::3]),  # strided
        (a, b[:1]),  # b's row broadcast
        (a, b[2, 3]),  # one value broadcast, on either side
        (a[1, 1].expand(6, 40).contiguous(), b),
        (a[:0], b[:0]),  # zero-size
    ]
    for x, y in cases:
        got, expected = run_both(op, x, y)
        same_bits(got, expected)
    for n in list(range(1, 41)) + [255, 257, 1000]:  # the tails of the vector loops
        x, y = a.flatten().repeat(5)[:n], b.flatten().flip(0).repeat(5)[:n]
        got, expected = run_both(op, x, y)
        same_bits(got, expected)
