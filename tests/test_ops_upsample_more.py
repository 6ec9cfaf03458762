"""3-d upsampling on neuron against PyTorch CPU: nearest, nearest-exact and
trilinear (align_corners on and off), by size and by scale factor (with
recompute_scale_factor both ways), forward and backward; NCDHW,
channels_last_3d, sliced and transposed layouts; empty batches; out=;
float32, float64, bfloat16, float16, and uint8 for nearest. Every test
asserts that no op fell back to the CPU (the native_only fixture)."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from thread_count_support import outputs_by_thread_count
from layouts import contiguous, channels_last, sliced, transposed_3d as transposed

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

pytestmark = pytest.mark.usefixtures("native_only")


LAYOUTS = [contiguous, channels_last, sliced, transposed]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float16: dict(rtol=2e-3, atol=2e-3)}


def compare(fn, x, dtype=torch.float32, layout=contiguous):
    ref = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    c = x.to(dtype).to(ref).detach().requires_grad_()
    d = layout(x.to(dtype)).detach().requires_grad_()
    expected, actual = fn(c), fn(d)
    assert actual.device.type == DEV and actual.dtype == dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected.to(dtype), **TOL[dtype])
    g = torch.randn(expected.shape, dtype=torch.float64).to(dtype)
    expected.backward(g.to(ref))
    actual.backward(g.to(DEV))
    torch.testing.assert_close(d.grad.cpu(), c.grad.to(dtype), **TOL[dtype])


ARGS = [
    dict(size=(6, 9, 11)),
    dict(size=(3, 4, 2)),
    dict(scale_factor=2),
    dict(scale_factor=(1.5, 0.7, 2.3)),
    dict(scale_factor=(1.5, 0.7, 2.3), recompute_scale_factor=True),
]
MODES = [dict(mode="nearest"), dict(mode="nearest-exact"), dict(mode="trilinear", align_corners=False),
         dict(mode="trilinear", align_corners=True)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("args", ARGS)
def test_upsample3d_matches_cpu_with_gradient(layout, mode, args):
    x = torch.randn(2, 3, 4, 5, 6)
    compare(lambda t: F.interpolate(t, **args, **mode), x, layout=layout)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", MODES)
def test_upsample3d_dtypes(dtype, mode):
    x = torch.randn(2, 3, 4, 5, 6)
    compare(lambda t: F.interpolate(t, size=(7, 8, 5), **mode), x, dtype)
    compare(lambda t: F.interpolate(t, scale_factor=2, **mode), x, dtype, channels_last)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_upsample_nearest3d_uint8(mode):
    x = torch.randint(0, 256, (2, 3, 4, 5, 6), dtype=torch.uint8)
    for layout in LAYOUTS:
        out = F.interpolate(layout(x), size=(7, 3, 9), mode=mode)
        assert out.dtype == torch.uint8
        assert torch.equal(out.cpu(), F.interpolate(x, size=(7, 3, 9), mode=mode))


def test_upsample3d_empty_batch_and_out():
    compare(lambda t: F.interpolate(t, scale_factor=2, mode="trilinear"), torch.randn(0, 3, 2, 3, 4))
    x = torch.randn(1, 2, 3, 4, 5)
    out = torch.empty(0, device=DEV)
    torch.ops.aten.upsample_trilinear3d.out(x.to(DEV), [5, 6, 7], False, None, None, None, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten.upsample_trilinear3d(x, [5, 6, 7], False, None, None, None))
    out = torch.empty(0, device=DEV)
    torch.ops.aten.upsample_nearest3d.out(x.to(DEV), [5, 6, 7], None, None, None, out=out)
    assert torch.equal(out.cpu(), torch.ops.aten.upsample_nearest3d(x, [5, 6, 7], None, None, None))
    g = torch.randn(1, 2, 5, 6, 7)
    gi = torch.empty(0, device=DEV)
    torch.ops.aten.upsample_trilinear3d_backward.grad_input(g.to(DEV), [5, 6, 7], [1, 2, 3, 4, 5], True, None, None,
                                                            None, grad_input=gi)
    torch.testing.assert_close(gi.cpu(), torch.ops.aten.upsample_trilinear3d_backward(
        g, [5, 6, 7], [1, 2, 3, 4, 5], True, None, None, None))


def test_upsample3d_errors_match_cpu():
    x = torch.randn(1, 1, 2, 2, 2)
    for fn in (lambda t: F.interpolate(t, size=(0, 3, 3)), lambda t: F.interpolate(t, size=(2, 2), mode="nearest"),
               lambda t: F.interpolate(t.long(), size=(3, 3, 3), mode="trilinear")):
        with pytest.raises(Exception) as cpu:
            fn(x)
        with pytest.raises((type(cpu.value), NotImplementedError)):
            fn(x.to(DEV))


def test_upsample3d_does_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import hashlib, torch, torch.nn.functional as F, torchneuron
        torch.manual_seed(0)
        x = torch.randn(2, 8, 5, 9, 11).to("neuron").requires_grad_()
        y = F.interpolate(x, scale_factor=(1.7, 2.2, 0.8), mode="trilinear").square().sum() \\
            + F.interpolate(x, size=(7, 5, 20)).square().sum()
        y.backward()
        print(hashlib.sha256(x.grad.cpu().numpy().tobytes()).hexdigest())
    """)
    assert len(outputs_by_thread_count(script)) == 1


@pytest.mark.parametrize("align_corners", [False, True])
def test_trilinear_channels_last_gives_the_bits_of_ncdhw(align_corners):
    # float32 channels_last_3d runs its own loop (channel runs summed in
    # registers); it computes the NCDHW kernel's products and sums in double,
    # rounded once, so the bits match. 70 channels: a full 64-channel run and
    # a partial one.
    x = torch.randn(2, 70, 3, 5, 4).to(DEV)
    fn = lambda t: F.interpolate(t, scale_factor=(1.5, 2.0, 2.7), mode="trilinear", align_corners=align_corners)
    a = fn(x)
    b = fn(x.contiguous(memory_format=torch.channels_last_3d))
    assert b.is_contiguous(memory_format=torch.channels_last_3d)
    assert torch.equal(a.cpu(), b.cpu())
