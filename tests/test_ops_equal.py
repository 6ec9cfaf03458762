"""torch.equal on neuron against the CPU.

equal is composed of native ops (csrc/equal.cpp: eq, then all): same sizes
and every element equal after type promotion. Cases: equal and unequal
values in every dtype, NaN (never equal, not even to itself), -0.0 and 0.0,
other sizes, other dtypes holding the same numbers, non-contiguous and
broadcast (expanded) views, zero-size and 0-d tensors, and the CPU's error
for tensors on two devices. No op may fall back to the CPU.
"""

import pytest
import torch

import torchneuron
from conftest import DTYPES, dtype_id, no_fallback


def check(a, b):
    expected = torch.equal(a, b)
    with no_fallback():
        actual = torch.equal(a.to("neuron"), b.to("neuron"))
    assert actual == expected
    return actual


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_equal_matches_cpu(dtype):
    a = (torch.arange(12) % 2 if dtype == torch.bool else torch.arange(12)).to(dtype).reshape(3, 4)
    b = a.clone()
    assert check(a, b)
    b[2, 3] = 0 if dtype != torch.bool else not bool(b[2, 3])
    assert not check(a, b)


def test_nan_is_never_equal_and_signed_zeros_are():
    nan = torch.tensor([1.0, float("nan")])
    assert not check(nan, nan.clone())
    assert check(torch.tensor([0.0, -0.0]), torch.tensor([-0.0, 0.0]))


def test_sizes_dtypes_and_layouts():
    x = torch.arange(24.0).reshape(4, 6)
    assert not check(x, x.reshape(6, 4))
    assert not check(x, x[:3])
    assert check(x, x.to(torch.int64))  # the same numbers in another dtype
    assert check(x.t(), x.t().contiguous())
    with no_fallback():
        dev = x.to("neuron")
        assert torch.equal(dev[:, ::2], x[:, ::2].contiguous().to("neuron"))
        row = torch.ones(6, device="neuron")
        assert torch.equal(row.expand(4, 6), torch.ones(4, 6, device="neuron"))
    assert check(torch.empty(0, 3), torch.empty(0, 3))
    assert not check(torch.empty(0, 3), torch.empty(3, 0))
    assert check(torch.tensor(2.5), torch.tensor(2.5))


def test_tensors_on_two_devices_are_rejected():
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(torch.ones(2, device="neuron"), torch.ones(2))
