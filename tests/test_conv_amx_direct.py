"""bfloat16 convolution directly on AMX tiles (runtime/src/ops/conv/conv_amx.c)
against PyTorch CPU through F.conv2d and its backward.

On an AMX host every shape here (at least 16 channels per group and 64
taps) runs all three roles on that path: the forward, the input gradient
as a flipped forward (by phase of the image at a stride), and the weight
gradient; conv.amx_direct counts them. Elsewhere (no AMX, or TORCHNEURON_ISA pinning a vector level)
the same shapes take the blocked or column paths and must agree as well.
The shapes cross the kernel's edges: channels not a multiple of 32 (an odd
tail), output channels not a multiple of 32, 8- and 16-wide rows, dilation,
padding beyond the window, 1x1, groups, strided and channels_last layouts,
conv_transpose (whose forward is the input-gradient op), an empty batch.
Every test asserts that no op fell back to the CPU.
"""

import os

import pytest
import torch
import torch.nn.functional as F

import torchneuron.metrics as metrics
from conftest import run_python
from layouts import channels_last, sliced, transposed
from test_conv_blocked import check_conv

pytestmark = pytest.mark.usefixtures("native_only")


def _amx_host():
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    # TORCHNEURON_ISA pins a vector level, which keeps convolutions off AMX
    return "amx_bf16" in flags and "amx_tile" in flags and not os.environ.get("TORCHNEURON_ISA")


AMX = _amx_host()

GEOMETRIES = [
    ((4, 64, 8, 8), (128, 64, 3, 3), dict(padding=1), 3),  # CNN conv3: rows of 8 (+2 padding columns)
    ((3, 32, 16, 16), (64, 32, 3, 3), dict(padding=1), 3),  # CNN conv2
    ((2, 37, 9, 11), (40, 37, 3, 3), dict(padding=1), 3),  # channel tail, 40 output channels
    ((2, 16, 12, 10), (24, 16, 3, 2), dict(dilation=(2, 3), padding=(2, 1)), 3),
    ((2, 48, 6, 6), (24, 48, 3, 3), dict(padding=3), 2),  # padding beyond the window: col2im input gradient
    ((2, 96, 7, 5), (40, 96, 1, 1), {}, 1),  # 1x1: forward only (40 taps of input gradient; the image is its own column)
    ((2, 64, 9, 9), (48, 32, 3, 3), dict(groups=2, padding=1), 3),
    ((1, 32, 1, 40), (33, 32, 1, 5), dict(padding=(0, 2)), 3),  # 1-d
    ((1, 32, 30, 30), (40, 32, 3, 3), dict(padding=1), 3),  # a weight gradient over 960 flat positions an image
    # strides: phase planes (forward, weight gradient), input gradient by phase
    ((2, 64, 14, 14), (96, 64, 3, 3), dict(stride=2, padding=1), 3),  # ResNet downsampling
    ((2, 32, 13, 11), (72, 32, 3, 3), dict(stride=2, padding=1), 3),  # odd sizes: a last row and column alone
    ((1, 48, 11, 16), (33, 48, 4, 3), dict(stride=(3, 1), padding=(1, 1)), 3),
    # no padding, groups; the input gradient's 1x1 phase has 32 taps (< 64): all its phases on columns
    ((2, 64, 12, 12), (64, 32, 3, 3), dict(stride=2, groups=2), 2),
    ((2, 256, 9, 9), (64, 256, 1, 1), dict(stride=2), 1),  # 1x1: input gradient only (phase 0 and zeros)
    ((2, 64, 10, 10), (64, 64, 3, 3), dict(stride=2, padding=3), 3),  # phases of negative padding
]


@pytest.mark.parametrize("xs,ws,kwargs,direct", GEOMETRIES)
def test_geometries_match_cpu(xs, ws, kwargs, direct):
    """direct: the roles on the tiles (fewer than 64 taps or a padding
    beyond the window send the input gradient elsewhere)."""
    metrics.clear_all()
    check_conv(xs, ws, kwargs, dtype=torch.bfloat16)
    torch.neuron.synchronize()
    assert metrics.get_counter_value("conv.amx_direct") == (direct if AMX else 0)


@pytest.mark.parametrize("layout", [sliced, transposed, channels_last])
def test_strided_and_channels_last_layouts(layout):
    check_conv((3, 32, 10, 12), (24, 32, 3, 3), dict(padding=1), dtype=torch.bfloat16, layout=layout)


def test_conv_transpose():
    check_conv((2, 32, 7, 9), (32, 24, 3, 3), dict(padding=1), dtype=torch.bfloat16, transpose=True)


def test_empty_batch_gives_a_zero_weight_gradient():
    x = torch.zeros(0, 32, 8, 8, dtype=torch.bfloat16, device="neuron").requires_grad_()
    w = torch.randn(16, 32, 3, 3).to(torch.bfloat16).to("neuron").requires_grad_()
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 16, 8, 8)
    y.sum().backward()
    assert x.grad.shape == x.shape
    assert torch.equal(w.grad.cpu(), torch.zeros(16, 32, 3, 3, dtype=torch.bfloat16))


def test_sums_are_float32_rounded_once():
    """One tap of 1 and 255 of 2^-8 over a 3x3 window of 32 channels sum to
    1.99609375 in float32, 2 once rounded; a bfloat16 accumulator stays 1."""
    x = torch.zeros(1, 32, 3, 3, dtype=torch.bfloat16)
    w = torch.zeros(1, 32, 3, 3, dtype=torch.bfloat16)
    x.view(-1)[:256] = 2.0 ** -8
    x.view(-1)[0] = 1
    w.view(-1)[:256] = 1
    got = F.conv2d(x.to("neuron"), w.to("neuron"), padding=1).cpu()
    assert got[0, 0, 1, 1].item() == 2.0


def test_strided_convolutions_with_dead_phases_stay_off_the_direct_path():
    """A stride beyond the window or dilated leaves phases without taps:
    those take the column or blocked paths."""
    for kwargs in (dict(stride=2, dilation=2, padding=2), dict(stride=4, padding=1)):
        x = torch.randn(2, 32, 9, 9, dtype=torch.bfloat16, device="neuron", requires_grad=True)
        w = torch.randn(16, 32, 3, 3, dtype=torch.bfloat16, device="neuron", requires_grad=True)
        metrics.clear_all()
        F.conv2d(x, w, **kwargs).sum().backward()
        torch.neuron.synchronize()
        assert metrics.get_counter_value("conv.amx_direct") == 0
        assert sum(metrics.get_counter_value("conv." + k) for k in ("blocked", "columns", "amx_columns")) == 3


_PINNED = """
import torch, torch.nn.functional as F, torchneuron, torchneuron.metrics as metrics
torch.manual_seed(0)
x = torch.randn(2, 32, 8, 8).to(torch.bfloat16)
w = (torch.randn(48, 32, 3, 3) / 17).to(torch.bfloat16)
xd, wd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
y = F.conv2d(xd, wd, padding=1)
y.float().square().sum().backward()
xc, wc = x.float().requires_grad_(), w.float().requires_grad_()
want = F.conv2d(xc, wc, padding=1)
want.square().sum().backward()
torch.testing.assert_close(y.cpu().float(), want.to(torch.bfloat16).float(), rtol=2e-2, atol=2e-2)
torch.testing.assert_close(wd.grad.cpu().float(), wc.grad.to(torch.bfloat16).float(), rtol=2e-2, atol=1e-1)
torch.testing.assert_close(xd.grad.cpu().float(), xc.grad.to(torch.bfloat16).float(), rtol=2e-2, atol=5e-2)
print(metrics.get_counter_value("conv.amx_direct"))
"""


@pytest.mark.parametrize("level", ["avx512", "avx2"])
def test_a_pinned_vector_level_keeps_the_vector_paths(level):
    if level not in torch.neuron.isa_levels()["supported"]:
        pytest.skip(f"this CPU cannot run {level}")
    result = run_python(_PINNED, env={"TORCHNEURON_ISA": level, "TORCHNEURON_FALLBACK": "error"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "0"
