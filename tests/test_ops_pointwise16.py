"""16-bit float arithmetic on every bit pattern, against PyTorch CPU.

float16/bfloat16 add, mul, div and threshold_backward run loops that convert
each element in registers (RT_BINARY_LOOPS16) instead of through the
engine's float32 buffers. Both compute in float32 and round once, as
PyTorch's CPU kernels do, so the results must match CPU bit for bit: every
one of the 65536 patterns (subnormals, infinities, NaN payloads) is tried
as the left operand against a spread of right operands, contiguous and
through the broadcast and strided paths of the loops.
"""

import pytest
import torch

from conftest import no_fallback

DTYPES = [torch.float16, torch.bfloat16]


def all_patterns(dtype):
    return torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def same_bits(actual, expected):
    """Equal, with every NaN matching any NaN (payloads may differ)."""
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


OPS = {
    "add": lambda a, b: torch.add(a, b),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=-0.3),
    "sub": lambda a, b: torch.sub(a, b),
    "mul": lambda a, b: torch.mul(a, b),
    "div": lambda a, b: torch.div(a, b),
    "threshold_backward": lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.25),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
def test_every_pattern_matches_cpu_bitwise(op, dtype):
    fn = OPS[op]
    a = all_patterns(dtype)
    g = torch.Generator().manual_seed(0)
    b = (torch.randn(a.numel(), generator=g) * 4).to(dtype)
    b[::97] = all_patterns(dtype)[torch.randperm(a.numel(), generator=g)[: b[::97].numel()]]
    with no_fallback():
        same_bits(fn(a.to("neuron"), b.to("neuron")), fn(a, b))
        # broadcast right operand, then a strided (non-contiguous) pair; the
        # latter against CPU's contiguous (vectorised) path: its strided path
        # rounds alpha * b to the 16-bit type before the add.
        same_bits(fn(a.to("neuron"), b[7:8].to("neuron")), fn(a, b[7:8]))
        same_bits(fn(a.to("neuron")[:-1:3], b.to("neuron")[1::3]),
                  fn(a[:-1:3].contiguous(), b[1::3].contiguous()))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
def test_mixed_dtypes_and_scalars_keep_the_general_path(dtype):
    """A float32 operand or a Python scalar is not rounded to the 16-bit type."""
    a = all_patterns(dtype)
    b32 = torch.linspace(-3, 3, a.numel())
    with no_fallback():
        same_bits(torch.add(a.to("neuron"), b32.to("neuron")), torch.add(a, b32))
        same_bits(torch.mul(a.to("neuron"), 0.1), torch.mul(a, 0.1))
