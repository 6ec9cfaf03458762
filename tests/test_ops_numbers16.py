"""float16/bfloat16 arithmetic with a Python number, against PyTorch CPU.

x * 0.1 in bfloat16 reads the number in float32 (PyTorch's opmath), not
rounded to bfloat16, and rounds the float32 result once; add and sub round
their number to the 16-bit type first. The runtime's 16-bit loops take the
number in float32 in registers (rt_run_pointwise16_numbers); the C test
test_numbers16_match_twins compares them with the general path bit for bit.
Here: every bit pattern against numbers the 16-bit types cannot hold, the
number on either side, in place, and the layouts (non-contiguous,
broadcast, zero-size, 0-d), all without the CPU fallback.
"""

import pytest
import torch

from conftest import no_fallback
from exact_oracle import all_patterns, same_bits

DTYPES = [torch.bfloat16, torch.float16]
NUMBERS = [2, 3, -7, 2**40, 0.5, 0.1, 1 / 3, -2.5, 1e-40, 1e38, 70000.0, float("inf"), float("-inf"),
           float("nan"), 0.0, -0.0]

OPS = {
    "mul": lambda x, v: x * v,
    "rmul": lambda x, v: v * x,
    "div": lambda x, v: x / v,
    "rdiv": lambda x, v: v / x,
    "add": lambda x, v: x + v,
    "sub": lambda x, v: x - v,
    "rsub": lambda x, v: v - x,
    "add_alpha": lambda x, v: torch.add(x, v, alpha=-0.3),
    "mul_": lambda x, v: x.mul_(v),
    "div_": lambda x, v: x.div_(v),
    "add_": lambda x, v: x.add_(v),
    "sub_": lambda x, v: x.sub_(v),
}


def run_both(op, x, v):
    """op on a CPU copy and a neuron copy of x (each its own, for in place)."""
    fn = OPS[op]
    expected = fn(x.clone(), v)
    with no_fallback():
        got = fn(x.to("neuron"), v)
    return got, expected


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
def test_every_pattern_with_numbers(op, dtype):
    x = all_patterns(dtype)
    for v in NUMBERS:
        got, expected = run_both(op, x, v)
        same_bits(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["mul", "rdiv", "rsub", "div_", "add"])
def test_layouts(op, dtype):
    g = torch.Generator().manual_seed(1)
    base = (torch.randn(6, 40, generator=g) * 3).to(dtype)
    cases = [
        base,
        base.t(),  # non-contiguous
        base[:, ::3],  # strided
        base[:1].expand(5, 40),  # broadcast (stride 0 rows)
        base[:0],  # zero-size
        base[2, 3],  # 0-d
    ]
    for x in cases:
        for v in (0.1, 3, -1 / 3):
            if op == "div_" and x.stride() and 0 in x.stride():
                continue  # in place on an expanded tensor: an error on the CPU too
            got, expected = run_both(op, x, v)
            same_bits(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
def test_cpu_scalar_tensor_operands(dtype):
    """A CPU 0-d tensor is an immediate too, on either side."""
    x = (torch.randn(1000, generator=torch.Generator().manual_seed(2)) * 5).to(dtype)
    for s in (torch.tensor(0.1), torch.tensor(0.1, dtype=torch.float64), torch.tensor(3),
              torch.tensor(0.1, dtype=dtype)):
        for fn in (lambda a, b: a * b, lambda a, b: b * a, lambda a, b: a / b, lambda a, b: b / a,
                   lambda a, b: a + b, lambda a, b: b - a):
            expected = fn(x, s)
            with no_fallback():
                got = fn(x.to("neuron"), s)
            same_bits(got, expected)
