"""16-bit float arithmetic on every bit pattern, against exact results.

float16/bfloat16 add, mul, div and threshold_backward (other than threshold
0, which works on the bits: test_ops_relu16.py) run loops that convert
each element in registers (bfloat16) or in L1 blocks by the CPU's
instructions (float16) (RT_BINARY_LOOPS16) instead of through the
engine's float32 buffers. Both compute in float32 and round once, which for
a single +, -, * or / is the exactly rounded result (float32 has more than
twice the 16-bit types' precision plus two bits, so the second rounding
cannot go wrong): the reference is the operation in float64 rounded once to
the type (exact_oracle.round_to), not PyTorch CPU, whose 16-bit paths
differ between host CPUs (AVX512-FP16 computes natively). Every one of the
65536 patterns (subnormals, infinities, NaN payloads) is tried as the left
operand against a spread of right operands, contiguous and through the
broadcast and strided paths of the loops.
"""

import math

import pytest
import torch

from conftest import no_fallback
from exact_oracle import all_patterns, round_to

DTYPES = [torch.float16, torch.bfloat16]


def same_bits(actual, expected):
    """Equal, with every NaN matching any NaN (payloads may differ)."""
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def rounded(values, dtype, shape):
    return torch.tensor([round_to(v, dtype) for v in values], dtype=torch.float64).to(dtype).reshape(shape)


def float32_of(v: float) -> float:
    return round_to(v, torch.float32)


def div(x: float, y: float) -> float:
    """IEEE division in float64 (Python raises on division by zero)."""
    if y != 0.0 or math.isnan(x) or math.isnan(y):
        return x / y if y != 0.0 else math.nan
    return math.nan if x == 0.0 else math.copysign(math.inf, x) * math.copysign(1.0, y)


# name -> (neuron op, exact result from float64 operands, dtype)
ALPHA = -0.3


def add_alpha(a: float, b: float, dtype) -> float:
    # PyTorch rounds alpha to the 16-bit type (Scalar::to<scalar_t>); the
    # product is exact in float32, the sum rounds once in float32
    return float32_of(a + round_to(ALPHA, dtype) * b)


OPS = {
    "add": (lambda a, b: torch.add(a, b), lambda a, b, t: a + b),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=ALPHA), add_alpha),
    "sub": (lambda a, b: torch.sub(a, b), lambda a, b, t: a - b),
    "mul": (lambda a, b: torch.mul(a, b), lambda a, b, t: a * b),
    "div": (lambda a, b: torch.div(a, b), lambda a, b, t: div(a, b)),
}


def expected(op, a, b):
    a, b = torch.broadcast_tensors(a, b)
    exact = OPS[op][1]
    values = [exact(x, y, a.dtype) for x, y in zip(a.double().flatten().tolist(), b.double().flatten().tolist())]
    return rounded(values, a.dtype, a.shape)


def operands(dtype):
    a = all_patterns(dtype)
    g = torch.Generator().manual_seed(0)
    b = (torch.randn(a.numel(), generator=g) * 4).to(dtype)
    b[::97] = all_patterns(dtype)[torch.randperm(a.numel(), generator=g)[: b[::97].numel()]]
    return a, b


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
def test_every_pattern_is_exactly_rounded(op, dtype):
    fn = OPS[op][0]
    a, b = operands(dtype)
    with no_fallback():
        same_bits(fn(a.to("neuron"), b.to("neuron")), expected(op, a, b))
        # a broadcast right operand, then a strided (non-contiguous) pair
        same_bits(fn(a.to("neuron"), b[7:8].to("neuron")), expected(op, a, b[7:8]))
        same_bits(fn(a.to("neuron")[:-1:3], b.to("neuron")[1::3]), expected(op, a[:-1:3], b[1::3]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_threshold_backward_selects_on_every_pattern(dtype):
    # a select, no rounding: PyTorch's semantics (x <= threshold gives 0,
    # NaN x passes the gradient) are the reference
    grad, x = operands(dtype)
    with no_fallback():
        for g, v in ((grad, x), (x, grad), (grad[:-1:3], x[1::3])):
            got = torch.ops.aten.threshold_backward(g.to("neuron"), v.to("neuron"), 0.25)
            same_bits(got, torch.where(v <= 0.25, torch.zeros_like(g), g))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_mixed_dtypes_and_scalars_are_not_rounded(dtype):
    """A float32 operand or a Python scalar is not rounded to the 16-bit type."""
    a = all_patterns(dtype)
    b32 = torch.linspace(-3, 3, a.numel())
    with no_fallback():
        sums = [float32_of(x + y) for x, y in zip(a.double().tolist(), b32.double().tolist())]
        same_bits(torch.add(a.to("neuron"), b32.to("neuron")),
                  torch.tensor(sums, dtype=torch.float64).float())
        # the scalar in float32 (PyTorch's opmath), the product rounded to
        # float32, then to the 16-bit type
        tenth = float32_of(0.1)
        products = [float32_of(x * tenth) for x in a.double().tolist()]
        same_bits(torch.mul(a.to("neuron"), 0.1), rounded(products, dtype, a.shape))
