"""The blocked float32 / bfloat16 convolution
(runtime/src/ops/conv/conv_blocked.c) against PyTorch CPU, through F.conv2d
and its backward.

Covers the shapes the path takes (the CIFAR CNN's 3x3 layers, 1x1, stride,
dilation, groups, padding, 1-d, odd channel counts that leave partial row
panels, position counts that leave partial column panels, several batch
parts and tap blocks in the weight gradient, strided input gradients split
by phase, including phases without taps), the layouts it reads (NCHW,
sliced rows, a transposed view; channels_last takes the older path and must
still agree), bfloat16 products with float32 accumulation, conv_transpose
(whose forward is the input-gradient op) and thread-count independence.
Every test asserts that no op fell back to the CPU.
"""

import hashlib
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from thread_count_support import outputs_by_thread_count
from layouts import channels_last, sliced, transposed

DEV = "neuron"


pytestmark = pytest.mark.usefixtures("native_only")


def nchw(t):
    return t.to(DEV)


def tol(dtype, terms):
    """float32: accumulation-order error over `terms` products; bfloat16:
    its rounding of the result (products and sums are float32)."""
    if dtype == torch.bfloat16:
        return dict(rtol=2e-2, atol=2e-2 * max(1.0, terms ** 0.5 / 8))
    return dict(rtol=1e-4, atol=2e-7 * terms + 1e-5)  # sums of `terms` unit products: ~sqrt(terms) large


def check_conv(xs, ws, kwargs, dtype=torch.float32, layout=nchw, bias=True, transpose=False):
    """Forward and every gradient of conv2d (or conv_transpose2d) on neuron
    against CPU float32 from the same (dtype-rounded) values."""
    fn = F.conv_transpose2d if transpose else F.conv2d
    x = torch.randn(*xs).to(dtype)
    w = (torch.randn(*ws) / (ws[1] * ws[2] * ws[3]) ** 0.5).to(dtype)
    groups = kwargs.get("groups", 1)
    nb = ws[1] * groups if transpose else ws[0]
    b = torch.randn(nb).to(dtype) if bias else None
    cpu = [t.float().clone().requires_grad_() if t is not None else None for t in (x, w, b)]
    dev = [layout(x).detach().requires_grad_(), w.to(DEV).requires_grad_(), b.to(DEV).requires_grad_() if bias else None]
    want = fn(cpu[0], cpu[1], cpu[2], **kwargs)
    got = fn(dev[0], dev[1], dev[2], **kwargs)
    assert got.dtype == dtype and got.device.type == DEV
    taps = ws[1] * ws[2] * ws[3]
    torch.testing.assert_close(got.cpu().float(), want.to(dtype).float(), **tol(dtype, taps))
    g = torch.randn(want.shape).to(dtype)
    want.backward(g.float())
    got.backward(g.to(DEV))
    positions = want.shape[0] * want[0, 0].numel()
    grad_terms = {0: ws[0] * ws[2] * ws[3], 1: positions, 2: positions}
    for i, (c, d) in enumerate(zip(cpu, dev)):
        if c is None:
            continue
        torch.testing.assert_close(d.grad.cpu().float(), c.grad.to(dtype).float(), **tol(dtype, grad_terms[i]),
                                   msg=lambda m: f"grad of input {i}: {m}")


CNN_LAYERS = [
    # the CIFAR CNN of benchmarks/train.py (batch reduced), then ResNet-like shapes
    ((8, 3, 32, 32), (32, 3, 3, 3), dict(padding=1)),
    ((8, 32, 16, 16), (64, 32, 3, 3), dict(padding=1)),
    ((8, 64, 8, 8), (128, 64, 3, 3), dict(padding=1)),
    ((2, 64, 14, 14), (64, 64, 3, 3), dict(padding=1)),
    ((2, 48, 14, 14), (40, 48, 1, 1), {}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("xs,ws,kwargs", CNN_LAYERS)
def test_cnn_layers_match_cpu(dtype, xs, ws, kwargs):
    check_conv(xs, ws, kwargs, dtype=dtype, bias=False)


GEOMETRIES = [
    # odd channels: row panels of 12 + 4 / 8; 5x7 images: column tails and rows split across panels
    ((3, 5, 5, 7), (13, 5, 3, 3), dict(padding=1)),
    ((2, 7, 9, 11), (27, 7, 3, 3), dict(stride=2, padding=1)),
    ((2, 6, 12, 10), (8, 6, 3, 2), dict(dilation=(2, 3), padding=(2, 1))),
    ((2, 8, 9, 11), (12, 2, 3, 3), dict(groups=4, padding=1)),
    ((2, 4, 6, 6), (6, 4, 3, 3), dict(padding=3)),
    ((1, 3, 40, 50), (20, 3, 5, 5), dict(padding=2)),  # several position blocks per image
    ((11, 4, 6, 6), (16, 4, 3, 3), dict(padding=1)),  # batch parts of unequal size
    ((27, 16, 8, 8), (32, 16, 3, 3), dict(padding=1)),  # weight gradient: several images per k block
    ((2, 96, 7, 7), (160, 96, 3, 3), dict(padding=1)),  # several k blocks, tap blocks in the weight gradient
    # strided input gradients run by phase; a 2x2 kernel at stride 3 leaves phases without taps
    ((2, 5, 10, 11), (7, 5, 2, 2), dict(stride=3, padding=1)),
    ((2, 6, 13, 12), (10, 6, 5, 3), dict(stride=(2, 3), padding=(2, 0))),
    ((2, 4, 5, 5), (6, 4, 1, 1), dict(stride=2, padding=1)),  # padding beyond a 1x1 kernel
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("xs,ws,kwargs", GEOMETRIES)
def test_geometries_match_cpu(dtype, xs, ws, kwargs):
    check_conv(xs, ws, kwargs, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", [sliced, transposed, channels_last])
def test_strided_and_channels_last_inputs(dtype, layout):
    check_conv((3, 8, 10, 12), (16, 8, 3, 3), dict(padding=1), dtype=dtype, layout=layout)
    check_conv((3, 8, 10, 12), (16, 8, 1, 1), {}, dtype=dtype, layout=layout)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv1d_and_transposed(dtype):
    x, w = torch.randn(3, 6, 40).to(dtype), torch.randn(10, 6, 5).to(dtype)
    got = F.conv1d(x.to(DEV), w.to(DEV), padding=2)
    torch.testing.assert_close(got.cpu().float(), F.conv1d(x.float(), w.float(), padding=2).to(dtype).float(),
                               **tol(dtype, 30))
    check_conv((2, 16, 7, 9), (16, 12, 3, 3), dict(padding=1), dtype=dtype, transpose=True)
    check_conv((2, 16, 7, 9), (16, 12, 3, 3), dict(stride=2, padding=1, output_padding=1), dtype=dtype,
               transpose=True)
    check_conv((2, 8, 4, 5), (8, 6, 2, 2), dict(stride=3, output_padding=2), dtype=dtype, transpose=True)


def test_bfloat16_accumulates_in_float32():
    """1 + 255 * 2^-8: a bfloat16 accumulator rounds each 1 + 2^-8 back to 1
    (a tie to even); float32 holds the exact sum 1.99609375, whose one
    rounding to bfloat16 is 2 (forward and both gradients)."""
    x = torch.full((1, 256, 4, 4), 2.0 ** -8, dtype=torch.bfloat16)
    x[:, 0] = 1
    w = torch.ones(1, 256, 1, 1, dtype=torch.bfloat16)
    got = F.conv2d(x.to(DEV), w.to(DEV)).cpu()
    assert torch.all(got == 2.0)


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, torch, torch.nn.functional as F
    import torchneuron
    torch.manual_seed(0)
    h = hashlib.sha256()
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(20, 32, 12, 12).to(dtype).to("neuron").requires_grad_()
        w = torch.randn(48, 32, 3, 3).to(dtype).to("neuron").requires_grad_()
        y = F.conv2d(x, w, padding=1)
        y.backward(torch.randn(y.shape).to(dtype).to("neuron"))
        for t in (y, x.grad, w.grad):
            h.update(t.detach().float().cpu().numpy().tobytes())
    # stride 2 (on AMX hosts: phase planes, the input gradient by phase)
    x = torch.randn(12, 32, 13, 13).bfloat16().to("neuron").requires_grad_()
    w = torch.randn(64, 32, 3, 3).bfloat16().to("neuron").requires_grad_()
    y = F.conv2d(x, w, stride=2, padding=1)
    y.backward(torch.randn(y.shape).bfloat16().to("neuron"))
    for t in (y, x.grad, w.grad):
        h.update(t.detach().float().cpu().numpy().tobytes())
    print(h.hexdigest())
""")


def test_results_do_not_depend_on_thread_count():
    assert len(outputs_by_thread_count(DETERMINISM_SCRIPT)) == 1
