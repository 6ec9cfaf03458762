"""Neuron-only failures of PyTorch's own test_nn.py (TestNNDeviceType;
docs/conformance.md, "test_nn.py's TestNNDeviceType"), each checked here
against the CPU: the same exception type and the CPU's wording for bad input
(neuron's messages may add the op's name in front), the same values for good
input, and no CPU fallback.
"""

import pytest
import torch

import torchneuron
from cpu_errors import assert_raises_like_cpu

DEV = "neuron"
A = torch.ops.aten


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


# ---- reflection and replication padding: the CPU's words --------------------------
# test_ReplicationPad_empty, test_ReflectionPad_empty and test_pad match
# "Expected 2D or 3D" and "Padding size should be less than the corresponding
# input dimension" with a regex, capitals included.

BAD_RANK_OR_EMPTY = [
    (A.replication_pad1d, (3, 0, 10), (2, 2)),
    (A.replication_pad2d, (43, 0, 10, 10), (2, 2, 2, 2)),
    (A.replication_pad3d, (3, 0, 10, 10, 10), (2,) * 6),
    (A.replication_pad1d, (4,), (1, 1)),
    (A.reflection_pad1d, (3, 0, 10), (2, 2)),
    (A.reflection_pad2d, (3, 0, 10, 10), (2, 2, 2, 2)),
    (A.reflection_pad3d, (3, 0, 10, 10, 10), (3,) * 6),
    (A.reflection_pad1d, (3, 3, 10, 10), (2, 2)),
    (A.reflection_pad2d, (3, 3, 10, 10, 10), (2, 2, 2, 2)),
    (A.reflection_pad3d, (3, 3, 10, 10, 10, 10), (2,) * 6),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
@pytest.mark.parametrize("op,shape,pad", BAD_RANK_OR_EMPTY,
                         ids=[f"{op.__name__}-{len(s)}d" for op, s, _ in BAD_RANK_OR_EMPTY])
def test_pad_of_a_bad_rank_or_an_empty_dim_raises_like_cpu(op, shape, pad, dtype):
    assert_raises_like_cpu(lambda d: op(torch.zeros(shape, dtype=dtype, device=d), pad), exact=False)


# Each padded dim names its argument as the CPU does (#4 the last dim, #6, #8).
PAD_TOO_WIDE = [
    (A.reflection_pad1d, (1, 2, 3), (3, 0)),
    (A.reflection_pad1d, (2, 3), (0, 3)),
    (A.reflection_pad2d, (1, 2, 3), (3, 0, 0, 0)),
    (A.reflection_pad2d, (1, 1, 2, 3), (1, 1, 3, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 0, 0, 0, 5, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 0, 5, 0, 0, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 4, 0, 0, 0, 0)),
]


@pytest.mark.parametrize("op,shape,pad", PAD_TOO_WIDE)
def test_reflection_pad_wider_than_the_input_raises_like_cpu(op, shape, pad):
    assert_raises_like_cpu(lambda d: op(torch.zeros(shape, device=d), pad), exact=False)


def test_pad_of_a_wrong_padding_length_raises_like_cpu():
    for op in (A.replication_pad1d, A.replication_pad2d, A.replication_pad3d,
               A.reflection_pad1d, A.reflection_pad2d, A.reflection_pad3d):
        assert_raises_like_cpu(lambda d, op=op: op(torch.zeros(1, 2, 3, 3, device=d), (3,)), exact=False)


def test_functional_reflect_pad_too_wide_matches_the_upstream_regex():
    x = torch.randn(1, 1, 2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        torch.nn.functional.pad(x, (1, 1, 3, 0), mode="reflect")


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_pad_good_input_still_matches_cpu(mode, dtype):
    for shape, pad in (((2, 3, 5), (1, 2)), ((2, 3, 4, 5), (1, 1, 2, 0)), ((2, 3, 4, 5), (0, 0, 0, 0)),
                       ((1, 2, 3, 4, 5), (1, 0, 0, 1, 2, 1))):
        x = torch.randn(shape, dtype=dtype)
        xn = x.to(DEV)[..., ::2]  # non-contiguous
        got = torch.nn.functional.pad(xn, pad, mode=mode)
        assert torch.equal(got.cpu(), torch.nn.functional.pad(x[..., ::2], pad, mode=mode))


# ---- upsampling: integer inputs the CPU has no kernel for --------------------------
# test_upsamplingBiMode2d_nonsupported_dtypes: nearest takes the floating
# dtypes and uint8 only, as do bilinear and bicubic (2-d); neuron computed
# nearest for every integer dtype and sent the others to the CPU fallback.

INTEGER_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]
MODES_BY_RANK = {3: ["nearest", "nearest-exact", "linear"],
                 4: ["nearest", "nearest-exact", "bilinear", "bicubic"],
                 5: ["nearest", "nearest-exact", "trilinear"]}


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_upsampling_an_integer_input_raises_like_cpu(rank, dtype):
    x = torch.ones((1, 3) + (6,) * (rank - 2), dtype=dtype)
    for mode in MODES_BY_RANK[rank]:
        for antialias in ([False, True] if mode in ("bilinear", "bicubic") else [False]):
            assert_raises_like_cpu(lambda d: torch.nn.functional.interpolate(
                x.to(d), size=(4,) * (rank - 2), mode=mode, antialias=antialias), exact=False)


def test_upsampling_linear1d_of_uint8_raises_like_cpu():
    x = torch.ones(1, 3, 6, dtype=torch.uint8)
    assert_raises_like_cpu(lambda d: torch.nn.functional.interpolate(x.to(d), size=4, mode="linear"), exact=False)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_upsampling_uint8_and_float_still_match_cpu(mode, dtype):
    x = torch.randint(0, 256, (2, 3, 9, 7)).to(dtype)
    for size in ((4, 5), (12, 13)):
        got = torch.nn.functional.interpolate(x.to(DEV), size=size, mode=mode)
        want = torch.nn.functional.interpolate(x, size=size, mode=mode)
        if dtype == torch.uint8:
            assert torch.equal(got.cpu(), want)
        else:
            # float32 rounding of a different evaluation order (values up to 255)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-3)


# ---- the runner's record of the rest ------------------------------------------------

def test_test_nn_documented_exceptions_need_the_test_and_its_message():
    from torchneuron.tools.conformance_causes import cause_of, documented_exception
    cls = "test_nn.py::TestNNDeviceTypePRIVATEUSE1::"
    u8 = cls + "test_upsamplingBiMode2d_nonsupported_dtypes_antialias_True_num_channels_3_mode_bicubic_uint8_neuron_uint8"
    assert documented_exception(u8, "AssertionError: RuntimeError not raised") is not None
    # an integer dtype the CPU refuses, or another failure, still counts as ours
    assert documented_exception(u8.replace("uint8", "int8"), "AssertionError: RuntimeError not raised") is None
    assert documented_exception(u8, "AssertionError: Tensor-likes are not close!") is None
    enc = cls + "test_transformerencoderlayer_neuron_float32"
    assert documented_exception(enc, "AssertionError: False is not true\n\nTo execute this test") is not None
    assert documented_exception(enc, "AssertionError: Tensor-likes are not close!") is None
    assert cause_of("failed", "NotImplementedError: Could not run 'aten::_transformer_encoder_layer_fwd' with "
                              "arguments from the 'NestedTensorneuron' backend.") == \
        "nested tensors are not supported on neuron"
