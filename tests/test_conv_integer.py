"""Integer convolution (F.conv1d/2d/3d and F.conv_transpose1d/2d/3d for
uint8, int8, int16, int32 and int64) on neuron, bitwise against PyTorch CPU.

Values span each dtype's whole range, so products and sums overflow and
wrap: the CPU multiplies and sums in the dtype with wrap-around, which
gives the bits of the exact int64 result truncated to the dtype. Where the
CPU computes the case in the dtype itself, that is the expected result;
where it refuses (transposed and dilated convolutions of the narrow
dtypes: "slow_conv_transpose2d_out_cpu" not implemented for 'Char'), the
expected result is the CPU's int64 one cast to the dtype, which matches
the CPU wherever both run (checked here too). Every test asserts that no
op fell back to the CPU. Integers have no gradient; bool stays a
NotImplementedError, as on the CPU."""

import pytest
import torch
import torch.nn.functional as F
from layouts import channels_last, sliced, transposed

DEV = "neuron"
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]

pytestmark = pytest.mark.usefixtures("native_only")


def full_range(dtype, shape, gen):
    """Values over the dtype's whole range (int64: large enough to wrap)."""
    if dtype == torch.int64:
        return torch.randint(-2**62, 2**62, shape, generator=gen) * 3
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max + 1, shape, generator=gen).to(dtype)


def expected(fn, args, kwargs):
    """The CPU's result in the dtype, or its int64 result cast when the CPU
    does not compute the dtype (the same bits where both exist)."""
    dtype = args[0].dtype
    wide = fn(*[a.long() if a is not None else None for a in args], **kwargs).to(dtype)
    try:
        own = fn(*args, **kwargs)
    except NotImplementedError:
        return wide
    assert torch.equal(own, wide), "CPU in the dtype differs from int64 cast"
    return own


def check(fn, args, kwargs, layout=lambda t: t.to(DEV)):
    want = expected(fn, args, kwargs)
    got = fn(*[layout(a) if a is not None else None for a in args], **kwargs)
    assert got.device.type == DEV
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)


# (function, input shape, weight shape, bias size, keyword arguments)
CASES = {
    "conv1d": (F.conv1d, (2, 4, 11), (6, 2, 3), 6, dict(stride=2, padding=1, groups=2)),
    "conv1d_dilated_same": (F.conv1d, (2, 3, 9), (4, 3, 3), 4, dict(padding="same", dilation=2)),
    "conv2d": (F.conv2d, (2, 4, 7, 8), (6, 4, 3, 2), 6, dict(stride=(2, 1), padding=(1, 2))),
    "conv2d_same": (F.conv2d, (2, 4, 7, 7), (4, 2, 3, 3), 4, dict(padding="same", groups=2)),
    "conv2d_dilated": (F.conv2d, (1, 3, 9, 8), (5, 3, 2, 3), 5, dict(dilation=(2, 3), stride=(1, 2))),
    "conv2d_depthwise": (F.conv2d, (2, 4, 6, 6), (8, 1, 3, 3), 8, dict(padding=1, groups=4)),
    "conv2d_1x1": (F.conv2d, (2, 5, 4, 6), (3, 5, 1, 1), 3, {}),
    "conv2d_padding_past_window": (F.conv2d, (1, 2, 3, 3), (2, 2, 2, 2), 2, dict(padding=3, stride=2)),
    "conv3d": (F.conv3d, (2, 4, 4, 5, 6), (6, 2, 2, 3, 2), 6, dict(stride=(1, 2, 1), padding=1, groups=2)),
    "conv3d_dilated": (F.conv3d, (1, 2, 5, 5, 5), (3, 2, 2, 2, 2), 3, dict(dilation=(2, 1, 2))),
    "conv_transpose1d": (F.conv_transpose1d, (2, 4, 5), (4, 3, 3), 3, dict(stride=3, dilation=2)),
    "conv_transpose2d": (F.conv_transpose2d, (2, 4, 5, 4), (4, 3, 3, 2), 3,
                         dict(stride=2, padding=1, output_padding=1)),
    "conv_transpose2d_groups": (F.conv_transpose2d, (1, 4, 4, 4), (4, 2, 2, 3), 4,
                                dict(stride=(1, 2), groups=2, dilation=(2, 1))),
    "conv_transpose3d": (F.conv_transpose3d, (2, 4, 3, 4, 3), (4, 2, 2, 3, 2), 4,
                         dict(stride=(2, 1, 2), padding=(0, 1, 1), groups=2)),
}


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_wraps_like_cpu(case, dtype, with_bias):
    fn, xs, ws, bs, kwargs = CASES[case]
    gen = torch.Generator().manual_seed(len(case) * 7 + INTS.index(dtype))
    x, w = full_range(dtype, xs, gen), full_range(dtype, ws, gen)
    b = full_range(dtype, (bs,), gen) if with_bias else None
    check(fn, (x, w, b), kwargs)


@pytest.mark.parametrize("layout", [channels_last, sliced, transposed], ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", ["conv2d", "conv2d_depthwise", "conv3d", "conv_transpose2d", "conv_transpose3d",
                                  "conv1d"], ids=str)
@pytest.mark.parametrize("dtype", [torch.int8, torch.int64], ids=str)
def test_layouts(case, layout, dtype):
    fn, xs, ws, bs, kwargs = CASES[case]
    gen = torch.Generator().manual_seed(3)
    check(fn, (full_range(dtype, xs, gen), full_range(dtype, ws, gen), full_range(dtype, (bs,), gen)), kwargs,
          layout=layout)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32], ids=str)
def test_empty_batch_and_channels(dtype):
    gen = torch.Generator().manual_seed(5)
    w = full_range(dtype, (3, 2, 2, 2), gen)
    check(F.conv2d, (full_range(dtype, (0, 2, 4, 4), gen), w, None), {})
    check(F.conv_transpose2d, (full_range(dtype, (0, 3, 4, 4), gen), w, None), dict(stride=2))
    # no input channels: every output is the bias
    check(F.conv2d, (full_range(dtype, (2, 0, 4, 4), gen), full_range(dtype, (3, 0, 1, 1), gen),
                     full_range(dtype, (3,), gen)), {})
    check(F.conv3d, (full_range(dtype, (0, 2, 3, 3, 3), gen), full_range(dtype, (2, 2, 1, 1, 1), gen), None), {})


@pytest.mark.parametrize("dtype", [torch.int16, torch.int64], ids=str)
def test_unbatched_inputs(dtype):
    gen = torch.Generator().manual_seed(6)
    check(F.conv1d, (full_range(dtype, (3, 7), gen), full_range(dtype, (2, 3, 3), gen), None), {})
    check(F.conv2d, (full_range(dtype, (3, 5, 5), gen), full_range(dtype, (2, 3, 3, 3), gen),
                     full_range(dtype, (2,), gen)), dict(padding=1))
    check(F.conv3d, (full_range(dtype, (2, 3, 3, 4), gen), full_range(dtype, (2, 2, 2, 2, 2), gen), None), {})


@pytest.mark.parametrize("fn,rank", [(F.conv2d, 4), (F.conv3d, 5), (F.conv_transpose2d, 4)],
                         ids=["conv2d", "conv3d", "conv_transpose2d"])
def test_bool_is_not_implemented(fn, rank):
    x = torch.ones((1, 2) + (3,) * (rank - 2), dtype=torch.bool, device=DEV)
    w = torch.ones((2, 2) + (1,) * (rank - 2), dtype=torch.bool, device=DEV)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        fn(x, w)


def test_mixed_dtypes_are_rejected():
    x = torch.ones(1, 2, 3, 3, dtype=torch.int32, device=DEV)
    with pytest.raises(RuntimeError, match="weight type"):
        F.conv2d(x, torch.ones(2, 2, 1, 1, dtype=torch.int64, device=DEV))
    with pytest.raises(RuntimeError, match="bias type"):
        F.conv2d(x, torch.ones(2, 2, 1, 1, dtype=torch.int32, device=DEV), torch.ones(2, device=DEV))
