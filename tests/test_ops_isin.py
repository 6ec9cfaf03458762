"""torch.isin on neuron against the CPU.

isin is composed of native ops (csrc/isin.cpp): a broadcast comparison for
few test elements, sort + searchsorted for many; both are exact, so results
must equal the CPU's. Cases: every dtype isin accepts, both strategies,
NaN (never a member) and -0.0 (a member of {0.0}), invert, mixed dtypes,
the scalar overloads, out=, non-contiguous and zero-size inputs, and the
CPU's error for bool inputs. No op may fall back to the CPU.
"""

import pytest
import torch

import torchneuron
from conftest import assert_same, dtype_id, no_fallback

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]


def values(shape, dtype, high, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g).to(dtype)


def check(elements, tests, **kw):
    expected = torch.isin(elements, tests, **kw)
    with no_fallback():
        actual = torch.isin(elements.to("neuron"), tests.to("neuron"), **kw)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("tests", [3, 200], ids=["few_tests_compare", "many_tests_sort"])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_cpu(dtype, tests, invert):
    check(values((7, 9), dtype, 100, 0), values((tests,), dtype, 100, 1), invert=invert)


@pytest.mark.parametrize("tests", [2, 300], ids=["few_tests_compare", "many_tests_sort"])
def test_nan_is_never_a_member_and_negative_zero_finds_zero(tests):
    elements = torch.tensor([float("nan"), -0.0, 0.0, 1.5, float("inf"), -float("inf"), 2.0])
    test_elements = torch.cat([torch.tensor([float("nan"), 0.0, float("inf")]),
                               torch.arange(10.0, 10.0 + tests)])
    check(elements, test_elements)
    check(elements, test_elements, invert=True)


def test_mixed_dtypes_compare_in_the_promoted_dtype():
    check(torch.tensor([1, 2, 3, 4], dtype=torch.int64), torch.tensor([2.0, 3.5, 4.0]))
    check(torch.tensor([0.5, 2.0, 3.0], dtype=torch.float16), torch.arange(2, 300, dtype=torch.int32))


def test_non_contiguous_and_multidimensional_test_elements():
    elements = values((6, 10), torch.int64, 50, 2).t()
    tests = values((40, 8), torch.int64, 50, 3)[::2, 1::2]
    check(elements, tests)
    check(elements[::2], tests[:3, :1])
    check(values((200,), torch.int64, 50, 7)[::3], values((300,), torch.int64, 50, 8)[::2])


def test_zero_size_inputs():
    check(torch.empty(0, 3), torch.arange(5.0))
    check(torch.arange(6.0).reshape(2, 3), torch.empty(0))
    check(torch.arange(6.0).reshape(2, 3), torch.empty(0), invert=True)
    check(torch.tensor(2.0), torch.arange(5.0))  # 0-d elements


def test_scalar_overloads():
    elements = values((5, 4), torch.int32, 6, 4)
    with no_fallback():
        dev = elements.to("neuron")
        assert_same(torch.isin(dev, 3), torch.isin(elements, 3))
        assert_same(torch.isin(dev, 3, invert=True), torch.isin(elements, 3, invert=True))
        tests = torch.tensor([1, 5, 7])
        assert_same(torch.isin(5, tests.to("neuron")), torch.isin(5, tests))
        assert_same(torch.isin(6, tests.to("neuron"), invert=True), torch.isin(6, tests, invert=True))


def test_out_variant_resizes_and_fills_out():
    elements, tests = values((3, 5), torch.int64, 10, 5), values((30,), torch.int64, 10, 6)
    with no_fallback():
        out = torch.empty(0, dtype=torch.bool, device="neuron")
        result = torch.isin(elements.to("neuron"), tests.to("neuron"), out=out)
    assert result is out
    assert_same(out, torch.isin(elements, tests))


def test_bool_inputs_are_rejected_as_on_cpu():
    b = torch.tensor([True, False])
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        torch.isin(b, b)
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        torch.isin(b.to("neuron"), b.to("neuron"))


def test_strided_views_on_the_device():
    # .to("neuron") of a CPU view gives a contiguous tensor: slice on the device.
    base, tests = values((200,), torch.int64, 50, 7), values((300,), torch.int64, 50, 8)
    with no_fallback():
        actual = torch.isin(base.to("neuron")[::3], tests.to("neuron")[::2])
    assert_same(actual, torch.isin(base[::3], tests[::2]))
