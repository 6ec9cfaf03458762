"""uint8 2-d resampling on neuron: upsample_bilinear2d, upsample_bicubic2d and
_upsample_{bilinear,bicubic,lanczos}2d_aa (F.interpolate's bilinear and
bicubic modes, with and without antialias), forward only (the CPU has no
uint8 backward and raises; so do we, with its error).

What the CPU computes for uint8 (ATen's UpSampleKernel.cpp and its AVX2
twin UpSampleKernelAVXAntialias.h, read for the rule only): per axis, the
weights of each output position in double (the PIL filters for
antialias, widened by the downscale and normalised; without antialias the
2 or 4 taps around PyTorch's source index, Keys a = -0.75, the taps that
fall outside the image added onto the border one), scaled to int16 by 2^p
with p < 22 the largest precision keeping round(max weight * 2^(p+1)) <
2^15; the width is resampled first into a uint8 image, then the height
(an axis of unchanged size is skipped), each output
clamp((2^(p-1) + sum w16 * x) >> p, 0, 255) in integers. The AVX2 kernel
(1..4 channels, AVX2 hosts) and the generic one (other channel counts or
hosts) use the same int16 weights and the same integer sums, so the CPU's
result does not depend on the host's ISA: both are compared here, bit for
bit, with ours, and so is `reference`, this file's own NumPy statement of
the rule. Every test asserts that no op fell back to the CPU."""

import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from thread_count_support import outputs_by_thread_count
from layouts import contiguous, channels_last, sliced, transposed

DEV = "neuron"


# ---- the rule, in NumPy (this file's own reference) ---------------------------------------------------

def _filter(kind, x):
    x = np.abs(x)
    if kind in ("linear", "aa_linear"):
        return np.where(x < 1.0, 1.0 - x, 0.0)
    if kind == "aa_lanczos":
        def sinc(v):
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(v == 0.0, 1.0, np.sin(v * np.pi) / (v * np.pi))
        return np.where(x < 3.0, sinc(x) * sinc(x / 3.0), 0.0)
    a = -0.5 if kind == "aa_cubic" else -0.75
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _table(kind, n_in, n_out, align, scale):
    """(first input index, int16 weights [n_out, k], precision) of one axis."""
    taps = {"linear": 2, "aa_linear": 2, "cubic": 4, "aa_cubic": 4, "aa_lanczos": 6}[kind]
    aa = kind.startswith("aa")
    if align:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    support = taps * 0.5 * s if aa and s >= 1.0 else taps * 0.5
    k = int(np.ceil(support)) * 2 + 1 if aa else taps
    w = np.zeros((n_out, k))
    lo = np.zeros(n_out, dtype=np.int64)
    wmax = 0.0
    for o in range(n_out):
        if aa:
            center = s * (o + 0.5)
            inv = 1.0 / s if s >= 1.0 else 1.0
            first = max(int(center - support + 0.5), 0)
            count = min(max(min(int(center + support + 0.5), n_in) - first, 0), k)
            row = _filter(kind, (np.arange(count) + first - center + 0.5) * inv)
            if row.sum() != 0.0:
                row = row / row.sum()
                wmax = max(wmax, row.max(initial=0.0))
            w[o, :count] = row
        else:
            real = s * o if align else s * (o + 0.5) - 0.5
            if kind == "linear" and real < 0:
                real = 0.0
            i = min(int(np.floor(np.float32(real))), n_in - 1)  # PyTorch floors in float32
            lam = min(max(real - i, 0.0), 1.0)
            half = taps // 2
            # Taps outside the image move onto the border pixel.
            first = max(i - half + 1, 0)
            for j in range(taps):
                src = min(max(i - half + 1 + j, 0), n_in - 1)
                w[o, src - first] += _filter(kind, (j + 1 - half) - lam)
                wmax = max(wmax, w[o, src - first])
        lo[o] = first
    p = 0
    while p < 22 and int(0.5 + wmax * (1 << (p + 1))) < (1 << 15):
        p += 1
    v = w * (1 << p)
    w16 = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64)
    return lo, w16, p


def _pass(x, axis, table, n_in):
    lo, w16, p = table
    idx = np.minimum(lo[:, None] + np.arange(w16.shape[1])[None, :], n_in - 1)
    xs = np.moveaxis(x.astype(np.int64), axis, -1)[..., idx]  # [..., out, k]
    acc = (xs * w16).sum(-1) + (1 << (p - 1))
    out = np.clip(acc >> p, 0, 255).astype(np.uint8)
    return np.moveaxis(out, -1, axis)


def reference(x, size, kind, align=False, scales=(None, None)):
    """The rule on a uint8 [N, C, H, W] tensor; size = (OH, OW)."""
    a = x.numpy()
    h, w = a.shape[2:]
    if size[1] != w:
        a = _pass(a, 3, _table(kind, w, size[1], align, scales[1]), w)
    if size[0] != h:
        a = _pass(a, 2, _table(kind, h, size[0], align, scales[0]), h)
    return torch.from_numpy(np.ascontiguousarray(a))


# ---- layouts and helpers -------------------------------------------------------------------------------


LAYOUTS = [contiguous, channels_last, sliced, transposed]
KINDS = {"bilinear": "linear", "bicubic": "cubic", "bilinear-aa": "aa_linear", "bicubic-aa": "aa_cubic"}


def interp(mode, **kw):
    aa = mode.endswith("-aa")
    return lambda t: F.interpolate(t, mode=mode.split("-")[0], antialias=aa, **kw)


def image(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    # Hard edges (0 next to 255) make the cubic filters overshoot: the clamp is exercised.
    x[..., ::5, :] = 255
    x[..., :, 1::7] = 0
    return x


def cpu_result(fn, x):
    try:
        return fn(x)
    except RuntimeError as e:
        # The CPU's AVX2 kernel fails an internal assert on a 3-channel NCHW image resized to 1 x 1 (its
        # output is then also "channels_last", and it packs 4 unpacked channels into 3). Its generic kernel,
        # same rule, takes 5 channels: ask it, and keep the first 3.
        assert "INTERNAL ASSERT" in str(e) and x.shape[1] == 3, e
        return fn(torch.cat([x, x[:, :2]], 1))[:, :3]


def check(fn, x, layout=contiguous, ref=None):
    expected = cpu_result(fn, x)
    actual = fn(layout(x))
    assert actual.device.type == DEV and actual.dtype == torch.uint8 and actual.shape == expected.shape
    assert torch.equal(actual.cpu(), expected), (actual.cpu().int() - expected.int()).abs().max()
    if ref is not None:
        assert torch.equal(ref, expected)
    return actual


SIZES = [
    dict(size=(23, 17)),  # up
    dict(size=(4, 3)),    # down: the AA filters widen
    dict(size=(1, 1)),
    dict(size=(9, 29)),   # one axis unchanged: one pass
    dict(size=(31, 10)),
    dict(size=(9, 10)),   # unchanged: a copy
    dict(scale_factor=(0.37, 2.6)),
    dict(scale_factor=3),
]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", list(KINDS))
@pytest.mark.parametrize("args", SIZES, ids=str)
def test_uint8_matches_cpu_and_the_rule(layout, align, mode, args):
    x = image(2, 3, 9, 10)
    out = check(interp(mode, align_corners=align, **args), x, layout)
    if "size" in args:
        ref = reference(x, args["size"], KINDS[mode], align)
        assert torch.equal(out.cpu(), ref)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("mode", list(KINDS))
@pytest.mark.parametrize("scale", [(0.37, 2.6), (1.9, 0.51)])
def test_uint8_given_scales_follow_the_rule(mode, scale):
    # The scale factor (not in / out) sets the source step when given.
    x = image(1, 2, 13, 11)
    size = (int(13 * scale[0]), int(11 * scale[1]))
    fn = interp(mode, scale_factor=scale)
    out = check(fn, x, channels_last)
    align = False
    assert torch.equal(out.cpu(), reference(x, size, KINDS[mode], align, scale))


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 8, 67])
@pytest.mark.parametrize("layout", [contiguous, channels_last])
@pytest.mark.parametrize("mode", list(KINDS))
def test_uint8_channel_counts(channels, layout, mode):
    # 1..4 channels take the CPU's AVX2 kernel on AVX2 hosts, the rest its generic one.
    x = image(3, channels, 12, 15, seed=channels)
    check(interp(mode, size=(7, 22)), x, layout, reference(x, (7, 22), KINDS[mode]))


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("channels", [1, 3, 4, 5])
@pytest.mark.parametrize("mode", list(KINDS))
def test_uint8_channels_last_on_both_devices(channels, mode):
    # The CPU takes its AVX2 uint8 kernel for a channels_last image of 1..4 channels on AVX2 hosts:
    # the same values as ours, and a channels_last result (1 channel: contiguous) on both devices.
    x = image(2, channels, 9, 10, seed=channels).contiguous(memory_format=torch.channels_last)
    for size in [(23, 17), (4, 3)]:
        fn = interp(mode, size=size)
        expected, actual = fn(x), fn(x.to(DEV))
        assert torch.equal(actual.cpu(), expected)
        assert actual.stride() == expected.stride()
        assert torch.equal(expected, reference(x.contiguous(), size, KINDS[mode]))


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("mode", list(KINDS))
def test_uint8_strong_scales(mode):
    # A 12x reduction (tens of taps, high weight precision) and a 9x enlargement.
    x = image(1, 3, 96, 120)
    check(interp(mode, size=(8, 10)), x, channels_last, reference(x, (8, 10), KINDS[mode]))
    y = image(2, 4, 5, 6)
    check(interp(mode, size=(45, 54)), y, contiguous, reference(y, (45, 54), KINDS[mode]))


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(4, 5), (23, 17), (9, 31)])
def test_uint8_lanczos_aa(align, size):
    x = image(2, 3, 9, 10)
    fn = lambda t: torch.ops.aten._upsample_lanczos2d_aa(t, list(size), align)  # noqa: E731
    check(fn, x, contiguous, reference(x, size, "aa_lanczos", align))
    check(fn, x, channels_last)


@pytest.mark.usefixtures("native_only")
def test_uint8_image_sizes_of_the_benchmark():
    x = image(2, 3, 512, 512)
    for mode in KINDS:
        for layout in (contiguous, channels_last):
            check(interp(mode, size=(224, 224)), x, layout)


@pytest.mark.usefixtures("native_only")
def test_uint8_empty_batch_and_out():
    for mode in KINDS:
        check(interp(mode, size=(5, 3)), image(0, 3, 4, 5))
    x = image(1, 2, 5, 6)
    ops = [(torch.ops.aten.upsample_bilinear2d, "linear"), (torch.ops.aten.upsample_bicubic2d, "cubic"),
           (torch.ops.aten._upsample_bilinear2d_aa, "aa_linear"),
           (torch.ops.aten._upsample_bicubic2d_aa, "aa_cubic"),
           (torch.ops.aten._upsample_lanczos2d_aa, "aa_lanczos")]
    for op, kind in ops:
        for align in (False, True):
            out = torch.empty(0, dtype=torch.uint8, device=DEV)
            op.out(x.to(DEV), [7, 3], align, None, None, out=out)
            expected = op(x, [7, 3], align, None, None)
            assert torch.equal(out.cpu(), expected)
            assert torch.equal(expected, reference(x, (7, 3), kind, align))


def _raises_like_cpu(fn, x):
    with pytest.raises(Exception) as cpu:
        fn(x)
    with pytest.raises(type(cpu.value)) as ours:
        fn(x.to(DEV))
    return str(cpu.value), str(ours.value)


@pytest.mark.usefixtures("native_only")
def test_uint8_backward_and_bad_sizes_raise_like_cpu():
    g = image(1, 3, 7, 5)
    a = torch.ops.aten
    for op in (a.upsample_bicubic2d_backward, a._upsample_bilinear2d_aa_backward,
               a._upsample_bicubic2d_aa_backward, a._upsample_lanczos2d_aa_backward):
        cpu, ours = _raises_like_cpu(lambda t: op(t, [7, 5], [1, 3, 10, 12], False, None, None), g)
        assert cpu.splitlines()[0] == ours.splitlines()[0]
    cpu, ours = _raises_like_cpu(lambda t: a.upsample_bilinear2d_backward(t, [7, 5], [1, 3, 10, 12], False), g)
    assert ours.startswith(cpu.splitlines()[0])
    for mode in KINDS:
        for x, size in ((image(1, 1, 4, 4), (0, 3)), (image(2, 0, 4, 5), (5, 3))):
            cpu, ours = _raises_like_cpu(interp(mode, size=size), x)
            assert cpu.splitlines()[0] == ours.splitlines()[0]


def test_uint8_does_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import hashlib, torch, torch.nn.functional as F, torchneuron
        torch.manual_seed(0)
        x = torch.randint(0, 256, (2, 5, 67, 93), dtype=torch.uint8).to("neuron")
        h = hashlib.sha256()
        for t in (x, x.contiguous(memory_format=torch.channels_last)):
            for mode, aa in (("bilinear", False), ("bicubic", False), ("bilinear", True), ("bicubic", True)):
                h.update(F.interpolate(t, size=(31, 140), mode=mode, antialias=aa).cpu().numpy().tobytes())
        print(h.hexdigest())
    """)
    assert len(outputs_by_thread_count(script)) == 1
