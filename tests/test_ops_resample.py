"""Bicubic and antialiased 2-d resampling on neuron against PyTorch CPU:
upsample_bicubic2d and _upsample_{bilinear,bicubic,lanczos}2d_aa, forward
and backward, by size and by scale factor, up and down, align_corners on
and off; NCHW, channels_last, sliced and transposed layouts; empty
batches; out= and grad_input=; float32, float64, bfloat16 and float16 where
the CPU has them. uint8 images (the CPU's fixed point) are tested in
test_ops_resample_u8.py. Every test asserts that no op fell back to the
CPU."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from thread_count_support import outputs_by_thread_count
from layouts import contiguous, channels_last, sliced, transposed

DEV = "neuron"


LAYOUTS = [contiguous, channels_last, sliced, transposed]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float16: dict(rtol=2e-3, atol=2e-3)}


def compare(fn, x, dtype=torch.float32, layout=contiguous, cpu_dtype=None):
    """fn on neuron (dtype) against fn on the CPU (cpu_dtype, default dtype),
    forward and backward."""
    ref = cpu_dtype or dtype
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
    dict(size=(11, 13)),   # up
    dict(size=(3, 4)),     # down (the AA filters widen)
    dict(size=(1, 1)),
    dict(size=(7, 2)),
    dict(scale_factor=2),
    dict(scale_factor=(0.3, 2.7)),
    dict(scale_factor=(0.3, 2.7), recompute_scale_factor=True),
]
MODES = [dict(mode="bicubic", align_corners=False), dict(mode="bicubic", align_corners=True),
         dict(mode="bilinear", antialias=True, align_corners=False),
         dict(mode="bilinear", antialias=True, align_corners=True),
         dict(mode="bicubic", antialias=True, align_corners=False),
         dict(mode="bicubic", antialias=True, align_corners=True)]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(str(v) for v in m.values()))
@pytest.mark.parametrize("args", ARGS, ids=str)
def test_resample_matches_cpu_with_gradient(layout, mode, args):
    x = torch.randn(2, 3, 9, 10)
    compare(lambda t: F.interpolate(t, **args, **mode), x, layout=layout)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(4, 5), (23, 17), (9, 10)])
def test_lanczos_aa_matches_cpu(align, size):
    x = torch.randn(2, 3, 9, 10, dtype=torch.float64)
    fn = lambda t: torch.ops.aten._upsample_lanczos2d_aa(t, list(size), align)  # noqa: E731
    compare(fn, x, torch.float64)
    compare(fn, x.float(), torch.float32, channels_last)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_bicubic_dtypes(dtype):
    x = torch.randn(2, 3, 6, 7)
    compare(lambda t: F.interpolate(t, size=(9, 4), mode="bicubic"), x, dtype,
            cpu_dtype=torch.float32 if dtype != torch.float64 else None)
    compare(lambda t: F.interpolate(t, scale_factor=2, mode="bicubic", align_corners=True), x, dtype,
            channels_last, cpu_dtype=torch.float32 if dtype != torch.float64 else None)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("filt", ["bilinear", "bicubic"])
def test_aa_float64_strong_downscale(filt):
    # A 10x reduction: 21+ taps per output along each axis.
    x = torch.randn(1, 2, 64, 80, dtype=torch.float64)
    compare(lambda t: F.interpolate(t, size=(6, 7), mode=filt, antialias=True), x, torch.float64)


@pytest.mark.usefixtures("native_only")
def test_resample_3d_input_empty_batch_and_out():
    compare(lambda t: F.interpolate(t, scale_factor=2, mode="bicubic"), torch.randn(0, 3, 4, 5))
    compare(lambda t: F.interpolate(t, size=(2, 3), mode="bilinear", antialias=True), torch.randn(0, 3, 4, 5))
    x = torch.randn(1, 2, 5, 6)
    for op in (torch.ops.aten.upsample_bicubic2d, torch.ops.aten._upsample_bilinear2d_aa,
               torch.ops.aten._upsample_bicubic2d_aa, torch.ops.aten._upsample_lanczos2d_aa):
        out = torch.empty(0, device=DEV)
        op.out(x.to(DEV), [7, 3], False, None, None, out=out)
        torch.testing.assert_close(out.cpu(), op(x, [7, 3], False, None, None))
    g = torch.randn(1, 2, 7, 3)
    for op in (torch.ops.aten.upsample_bicubic2d_backward, torch.ops.aten._upsample_bilinear2d_aa_backward,
               torch.ops.aten._upsample_bicubic2d_aa_backward, torch.ops.aten._upsample_lanczos2d_aa_backward):
        gi = torch.empty(0, device=DEV)
        op.grad_input(g.to(DEV), [7, 3], [1, 2, 5, 6], True, None, None, grad_input=gi)
        torch.testing.assert_close(gi.cpu(), op(g, [7, 3], [1, 2, 5, 6], True, None, None))


def test_resample_errors_match_cpu():
    x = torch.randn(1, 1, 4, 4)
    for fn in (lambda t: F.interpolate(t, size=(0, 3), mode="bicubic"),
               lambda t: F.interpolate(t, size=(0, 3), mode="bilinear", antialias=True),
               lambda t: F.interpolate(t.long(), size=(3, 3), mode="bicubic", antialias=True)):
        with pytest.raises(Exception) as cpu:
            fn(x)
        with pytest.raises((type(cpu.value), NotImplementedError)):
            fn(x.to(DEV))


def test_resample_does_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import hashlib, torch, torch.nn.functional as F, torchneuron
        torch.manual_seed(0)
        x = torch.randn(2, 8, 19, 23).to("neuron").requires_grad_()
        y = F.interpolate(x, scale_factor=(1.7, 2.2), mode="bicubic").square().sum() \\
            + F.interpolate(x, size=(5, 31), mode="bicubic", antialias=True).square().sum()
        y.backward()
        print(hashlib.sha256(x.grad.cpu().numpy().tobytes()).hexdigest())
    """)
    assert len(outputs_by_thread_count(script)) == 1
