"""Refusals worded as the CPU's (issue 20): the same exception type and the
same first line as PyTorch CPU for bincount of a non-integer dtype, clamp's
in-place promotion (the CPU prints self's dtype as a C++ type name, "long
int") and its out= dtype, conj_physical's and var's out= dtype, and the
dtypes convolution and pooling refuse (the CPU names its kernel:
"slow_conv2d_cpu", "max_pool2d"...; neuron's said "convolution ... on the
neuron device", and max_pool2d of bool failed later, in the kernel)."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from cpu_errors import assert_raises_like_cpu


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.bool])
def test_bincount_of_a_non_integer_dtype(dtype):
    assert_raises_like_cpu(lambda d: torch.bincount(torch.tensor([1, 0], device=d).to(dtype)))


INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.clamp_min_(1.5),
        lambda t: t.clamp_max_(1.5),
        lambda t: t.clamp_(1.5, 3.5),
        lambda t: t.clamp_(min=1.5),
        lambda t: t.clamp_(max=0.5),
        lambda t: torch.clamp_min_(t, 2.5),
    ],
)
def test_in_place_clamp_that_would_promote_names_the_dtype_as_the_cpu(dtype, call):
    assert_raises_like_cpu(lambda d: call(torch.tensor([1, 2], device=d).to(dtype)))


def test_in_place_clamp_of_bool_with_an_integer_bound():
    assert_raises_like_cpu(lambda d: torch.tensor([True], device=d).clamp_max_(2))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, o: torch.clamp(x, 0.5, out=o),
        lambda x, o: torch.clamp(x, max=0.5, out=o),
        lambda x, o: torch.clamp(x, 0.5, 2.5, out=o),
        lambda x, o: torch.clamp_min(x, 0.5, out=o),
        lambda x, o: torch.clamp_max(x, 0.5, out=o),
    ],
)
@pytest.mark.parametrize(
    "dtypes", [(torch.int64, torch.int64), (torch.float32, torch.float64), (torch.int32, torch.int32)]
)
def test_clamp_with_numbers_wants_the_exact_out_dtype(call, dtypes):
    x_dtype, out_dtype = dtypes
    assert_raises_like_cpu(
        lambda d: call(torch.tensor([1, 2], device=d).to(x_dtype), torch.empty(2, device=d, dtype=out_dtype))
    )


@pytest.mark.parametrize("lo, hi", [(0.5, None), (None, 0.5), (0.5, 2.5)])
def test_clamp_of_integers_with_float_numbers_into_a_float_out_matches_cpu(lo, hi):
    x = torch.tensor([0, 1, 2, 3])
    want = torch.clamp(x, lo, hi, out=torch.empty(4))
    got = torch.clamp(x.to("neuron"), lo, hi, out=torch.empty(4, device="neuron"))
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_conj_physical_out_of_another_dtype():
    assert_raises_like_cpu(
        lambda d: torch.conj_physical(torch.ones(2, device=d), out=torch.empty(2, device=d, dtype=torch.long))
    )


@pytest.mark.parametrize("fn", [torch.var, torch.std])
def test_var_into_an_integer_out(fn):
    assert_raises_like_cpu(
        lambda d: fn(torch.ones(3, device=d), dim=0, out=torch.empty((), device=d, dtype=torch.long))
    )


CONV_CASES = {
    "conv1d": lambda d, t: F.conv1d(torch.ones(1, 1, 5, device=d, dtype=t), torch.ones(1, 1, 2, device=d, dtype=t)),
    "conv2d": lambda d, t: F.conv2d(
        torch.ones(1, 1, 5, 5, device=d, dtype=t), torch.ones(1, 1, 2, 2, device=d, dtype=t)
    ),
    "conv2d dilated": lambda d, t: F.conv2d(
        torch.ones(1, 1, 5, 5, device=d, dtype=t), torch.ones(1, 1, 2, 2, device=d, dtype=t), dilation=2
    ),
    "conv2d groups": lambda d, t: F.conv2d(
        torch.ones(1, 2, 5, 5, device=d, dtype=t), torch.ones(2, 1, 2, 2, device=d, dtype=t), groups=2
    ),
    "conv_transpose1d": lambda d, t: F.conv_transpose1d(
        torch.ones(1, 1, 3, device=d, dtype=t), torch.ones(1, 1, 2, device=d, dtype=t)
    ),
    "conv_transpose2d": lambda d, t: F.conv_transpose2d(
        torch.ones(1, 1, 3, 3, device=d, dtype=t), torch.ones(1, 1, 2, 2, device=d, dtype=t)
    ),
    "conv3d": lambda d, t: F.conv3d(
        torch.ones(1, 1, 3, 3, 3, device=d, dtype=t), torch.ones(1, 1, 2, 2, 2, device=d, dtype=t)
    ),
    "conv3d dilated": lambda d, t: F.conv3d(
        torch.ones(1, 1, 5, 5, 5, device=d, dtype=t), torch.ones(1, 1, 2, 2, 2, device=d, dtype=t), dilation=2
    ),
    "conv_transpose3d": lambda d, t: F.conv_transpose3d(
        torch.ones(1, 1, 3, 3, 3, device=d, dtype=t), torch.ones(1, 1, 2, 2, 2, device=d, dtype=t)
    ),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_convolution_of_bool_names_the_cpu_kernel(case):
    assert_raises_like_cpu(lambda d: CONV_CASES[case](d, torch.bool))


POOL_CASES = {
    "max_pool2d bool": lambda d: F.max_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.bool), 2),
    "max_pool2d bool indices": lambda d: F.max_pool2d(
        torch.ones(1, 1, 4, 4, device=d, dtype=torch.bool), 2, return_indices=True
    ),
    "avg_pool2d bool": lambda d: F.avg_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.bool), 2),
    "avg_pool2d int": lambda d: F.avg_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.int), 2),
    "adaptive_avg_pool2d long": lambda d: F.adaptive_avg_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.long), 2),
    "adaptive_max_pool2d long": lambda d: F.adaptive_max_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.long), 2),
    "adaptive_max_pool2d bool": lambda d: F.adaptive_max_pool2d(torch.ones(1, 1, 4, 4, device=d, dtype=torch.bool), 2),
    "adaptive_avg_pool3d long": lambda d: F.adaptive_avg_pool3d(
        torch.ones(1, 1, 4, 4, 4, device=d, dtype=torch.long), 2
    ),
    "max_pool3d bool": lambda d: F.max_pool3d(torch.ones(1, 1, 4, 4, 4, device=d, dtype=torch.bool), 2),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pooling_refuses_a_dtype_at_the_call_as_the_cpu(case):
    assert_raises_like_cpu(POOL_CASES[case])
    # nothing was left queued to fail later
    torch.neuron.synchronize()


def test_max_pool2d_of_integers_still_computes():
    x = torch.arange(32, dtype=torch.int32).reshape(1, 2, 4, 4)
    torch.testing.assert_close(F.max_pool2d(x.to("neuron"), 2).cpu(), F.max_pool2d(x, 2), rtol=0, atol=0)
