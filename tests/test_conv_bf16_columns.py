"""bfloat16 convolution through bfloat16 columns and the GEMM's bfloat16
kernels (runtime/src/ops/conv/conv_impl.h with COL = bfloat16; AMX where the
host has it), against PyTorch CPU through F.conv2d and its backward.

On an AMX host the shapes here with 64 taps or more (not depthwise) that
the direct path does not take run there in all three roles: forward, the
input gradient (by col2im) and the weight gradient (by tiles, or staged for
a large weight and few tiles); shapes of 16 channels or more per group
whose window covers the stride (undilated) convolve directly on the tiles
instead (test_conv_amx_direct.py). Elsewhere the same shapes run the
blocked or float32-column paths, which must agree as well. The geometries
cover the padded-copy im2col (padding beyond the kernel, dilation, stride,
tiles starting mid-row), the 1x1 paths (the image read in place as columns;
a strided 1x1 through the plain im2col), groups, strided and channels_last
layouts, conv_transpose and an empty batch; float32 runs the same shapes
through its own paths. Every test asserts that no op fell back to the CPU.
"""

import pytest
import torch
import torch.nn.functional as F

from test_conv_blocked import channels_last, check_conv, sliced, transposed

pytestmark = pytest.mark.usefixtures("native_only")

GEOMETRIES = [
    ((4, 32, 16, 16), (48, 32, 3, 3), dict(padding=1)),
    ((2, 16, 11, 9), (24, 16, 3, 3), dict(stride=2, padding=1)),  # input gradient by col2im
    ((2, 16, 12, 10), (8, 16, 3, 2), dict(dilation=(2, 3), padding=(2, 1))),
    ((2, 32, 9, 9), (16, 8, 3, 3), dict(groups=4, padding=1)),
    ((2, 16, 6, 6), (6, 16, 3, 3), dict(padding=3)),  # padding beyond the window
    ((1, 64, 30, 30), (16, 64, 3, 3), dict(padding=1)),  # 900 positions: tiles start mid-row
    ((2, 96, 7, 7), (40, 96, 1, 1), {}),  # 1x1: the image is its own column matrix
    ((2, 80, 5, 5), (6, 80, 1, 1), dict(stride=2, padding=1)),  # strided 1x1: plain im2col
    ((1, 96, 7, 7), (160, 96, 3, 3), dict(padding=1)),  # one tile, large weight: staged weight gradient
    # whole output rows of width 8, 16 and 32: fixed-size row copies (row stride 2, dilation)
    ((2, 16, 15, 16), (8, 16, 3, 3), dict(stride=(2, 1), padding=1)),
    ((2, 16, 12, 12), (8, 16, 3, 3), dict(dilation=2)),
    ((2, 8, 32, 32), (8, 8, 3, 3), dict(padding=1)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("xs,ws,kwargs", GEOMETRIES)
def test_geometries_match_cpu(dtype, xs, ws, kwargs):
    check_conv(xs, ws, kwargs, dtype=dtype)


@pytest.mark.parametrize("layout", [sliced, transposed, channels_last])
def test_strided_and_channels_last_inputs(layout):
    check_conv((3, 16, 10, 12), (16, 16, 3, 3), dict(padding=1), dtype=torch.bfloat16, layout=layout)
    check_conv((3, 72, 6, 5), (16, 72, 1, 1), {}, dtype=torch.bfloat16, layout=layout)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_empty_batch(dtype):
    x = torch.zeros(0, 32, 8, 8, dtype=dtype, device="neuron").requires_grad_()
    w = torch.randn(16, 32, 3, 3).to(dtype).to("neuron").requires_grad_()
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 16, 8, 8) and y.dtype == dtype
    y.sum().backward()
    assert x.grad.shape == x.shape
    assert torch.equal(w.grad.cpu(), torch.zeros(16, 32, 3, 3, dtype=dtype))


def test_conv_transpose():
    check_conv((2, 16, 7, 9), (16, 12, 3, 3), dict(padding=1), dtype=torch.bfloat16, transpose=True)
    check_conv((2, 16, 7, 9), (16, 12, 3, 3), dict(stride=2, padding=1, output_padding=1), dtype=torch.bfloat16,
               transpose=True)


def test_products_accumulate_in_float32_through_a_window():
    """A 3x3 window over 32 channels (288 taps): one tap of 1 and 255 of
    2^-8 sum to 1.99609375 in float32 (2 once rounded to bfloat16); a
    bfloat16 accumulator would stay at 1."""
    x = torch.zeros(1, 32, 3, 3, dtype=torch.bfloat16)
    w = torch.zeros(1, 32, 3, 3, dtype=torch.bfloat16)
    x.view(-1)[:256] = 2.0 ** -8
    x.view(-1)[0] = 1
    w.view(-1)[:256] = 1
    got = F.conv2d(x.to("neuron"), w.to("neuron")).cpu()
    assert got.shape == (1, 1, 1, 1) and got.item() == 2.0



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", [sliced, transposed])
def test_strided_output_gradient(dtype, layout):
    """A sliced or transposed grad_output: the weight gradient's tiles of
    several small images copy it run by run of an output row."""
    x = torch.randn(16, 32, 6, 6).to(dtype)
    w = (torch.randn(24, 32, 3, 3) / 17).to(dtype)
    g = torch.randn(16, 24, 6, 6).to(dtype)
    xc, wc = x.float().clone().requires_grad_(), w.float().clone().requires_grad_()
    F.conv2d(xc, wc, padding=1).backward(g.float())
    xd, wd, gd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_(), layout(g)
    assert not gd.is_contiguous()
    F.conv2d(xd, wd, padding=1).backward(gd)
    tol = dict(rtol=2e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu().float(), wc.grad.to(dtype).float(), **tol)
    torch.testing.assert_close(xd.grad.cpu().float(), xc.grad.to(dtype).float(), **tol)


@pytest.mark.parametrize("stride", [1, 2])
def test_strided_weight(stride):
    """A weight that is a view with gaps: converted into the column dtype's
    weight matrix (and flipped for the stride-1 input gradient)."""
    x = torch.randn(3, 16, 9, 9).to(torch.bfloat16)
    w = (torch.randn(24, 16, 3, 3) / 12).to(torch.bfloat16)
    g = torch.randn(F.conv2d(x.float(), w.float(), stride=stride, padding=1).shape).to(torch.bfloat16)
    xc, wc = x.float().requires_grad_(), w.float().requires_grad_()
    want = F.conv2d(xc, wc, stride=stride, padding=1)
    want.backward(g.float())
    wd = sliced(w).requires_grad_()
    assert not wd.is_contiguous()
    xd = x.to("neuron").requires_grad_()
    got = F.conv2d(xd, wd, stride=stride, padding=1)
    got.backward(g.to("neuron"))
    tol = dict(rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(got.cpu().float(), want.to(torch.bfloat16).float(), **tol)
    torch.testing.assert_close(xd.grad.cpu().float(), xc.grad.to(torch.bfloat16).float(), **tol)
    torch.testing.assert_close(wd.grad.cpu().float(), wc.grad.to(torch.bfloat16).float(), **tol)


def test_counters_name_the_path_each_convolution_took():
    # conv.amx_columns proves the AMX GEMM path ran (and only on AMX hosts);
    # each role of a training step counts once.
    import os

    import torchneuron.metrics as metrics

    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    # TORCHNEURON_ISA pins a vector level, which keeps convolutions off AMX
    amx = "amx_bf16" in flags and "amx_tile" in flags and not os.environ.get("TORCHNEURON_ISA")
    x = torch.randn(2, 32, 12, 12, dtype=torch.bfloat16, device="neuron", requires_grad=True)
    w = torch.randn(16, 32, 3, 3, dtype=torch.bfloat16, device="neuron", requires_grad=True)
    metrics.clear_all()
    F.conv2d(x, w, padding=1).sum().backward()
    torch.neuron.synchronize()
    counts = {k: metrics.get_counter_value("conv." + k) for k in ("blocked", "columns", "amx_columns", "amx_direct")}
    assert sum(counts.values()) == 3, counts  # forward, input gradient, weight gradient
    # stride 1 convolves directly on the tiles (test_conv_amx_direct.py)
    assert counts["amx_direct"] == (3 if amx else 0), counts
    metrics.clear_all()
    # dilated and strided: phases without taps keep the direct path off
    F.conv2d(x, w, stride=2, dilation=2, padding=2).sum().backward()
    torch.neuron.synchronize()
    counts = {k: metrics.get_counter_value("conv." + k) for k in ("blocked", "columns", "amx_columns", "amx_direct")}
    assert sum(counts.values()) == 3, counts
    assert counts["amx_columns"] == (3 if amx else 0), counts
    metrics.clear_all()
    F.conv2d(x.detach().float(), w.detach().float(), padding=1)
    torch.neuron.synchronize()
    assert metrics.get_counter_value("conv.amx_columns") == 0
    assert metrics.get_counter_value("conv.blocked") + metrics.get_counter_value("conv.columns") == 1
