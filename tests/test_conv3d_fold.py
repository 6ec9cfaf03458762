"""The depth-folded 3-d convolution (runtime/src/ops/conv/conv3d_fold.c):
float32 and bfloat16 conv3d / conv_transpose3d run as 2-d convolutions with
depth folded into the channels, and conv3d.fold counts each role that did
(forward, input gradient, weight gradient). Other dtypes and depthwise
problems keep the reference path (vol2col) and count nothing. Results
against PyTorch CPU, also with TORCHNEURON_ISA=avx2 (the 2-d kernels'
vector paths without AVX-512 or AMX). The pieces the working buffers are cut
into (bounded memory) are checked against the reference path in C
(runtime/tests/test_conv3d.c). Every test asserts that no op fell back."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron.metrics as metrics
from conftest import run_python

pytestmark = pytest.mark.usefixtures("native_only")

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=3e-2, atol=5e-2)}


def folded_roles(fn, x, w, dtype, tol=None):
    """Runs fn(x, w) forward and backward on neuron, checks the output and
    both gradients against the CPU (float32 reference for bfloat16; tol
    replaces TOL[dtype]) and returns how many roles conv3d.fold counted."""
    tol = tol or TOL[dtype]
    ref = torch.float32 if dtype == torch.bfloat16 else dtype
    x, w = x.detach().to(dtype), w.detach().to(dtype)
    xc, wc = x.to(ref).clone().requires_grad_(), w.to(ref).clone().requires_grad_()
    xd, wd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    assert xd.stride() == x.stride()  # the memory format reaches the device
    want = fn(xc, wc)
    g = torch.randn(want.shape).to(dtype)
    metrics.clear_all()
    got = fn(xd, wd)
    got.backward(g.to("neuron"))
    torch.neuron.synchronize()
    counted = metrics.get_counter_value("conv3d.fold")
    want.backward(g.to(ref))
    torch.testing.assert_close(got.cpu(), want.to(dtype), **tol)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad.to(dtype), **tol)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad.to(dtype), **tol)
    return counted


CL = torch.channels_last_3d
CASES = [
    # input, weight, kwargs, memory format of the input (and so of the output and its gradient)
    ((2, 8, 6, 9, 10), (12, 8, 3, 3, 3), dict(padding=1), torch.contiguous_format),
    ((2, 8, 6, 9, 10), (12, 8, 3, 3, 3), dict(padding=1), CL),
    ((2, 8, 7, 9, 10), (12, 8, 3, 3, 3), dict(stride=2, padding=1), torch.contiguous_format),
    ((2, 8, 7, 9, 10), (12, 8, 3, 3, 3), dict(stride=2, padding=1), CL),
    ((2, 8, 4, 5, 6), (6, 8, 1, 1, 1), {}, torch.contiguous_format),  # pointwise: depth merged into height
    ((2, 8, 6, 7, 8), (8, 4, 3, 1, 3), dict(groups=2, dilation=(2, 1, 1), padding=(2, 0, 1)), CL),
    # 16 channels: bfloat16 input gradients on AMX hosts take 2 slices per 2-d row (5 slices: one row half empty)
    ((2, 16, 5, 6, 7), (8, 16, 3, 3, 3), dict(padding=1), torch.contiguous_format),
    ((2, 16, 5, 6, 7), (8, 16, 3, 3, 3), dict(padding=(2, 1, 1), dilation=(2, 1, 1)), CL),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("xs,ws,kwargs,memory_format", CASES)
def test_conv3d_runs_folded_and_counts_each_role(dtype, xs, ws, kwargs, memory_format):
    x, w = torch.randn(*xs).contiguous(memory_format=memory_format), torch.randn(*ws) / 8
    assert folded_roles(lambda x, w: F.conv3d(x, w, **kwargs), x, w, dtype) == 3


def test_conv_transpose3d_runs_folded():
    x, w = torch.randn(2, 8, 3, 4, 5), torch.randn(8, 6, 2, 2, 2) / 8
    assert folded_roles(lambda x, w: F.conv_transpose3d(x, w, stride=2), x, w, torch.float32) == 3


def test_other_dtypes_and_depthwise_keep_the_reference_path():
    x, w = torch.randn(2, 4, 5, 6, 7, dtype=torch.float64), torch.randn(6, 4, 3, 3, 3, dtype=torch.float64)
    metrics.clear_all()
    F.conv3d(x.to("neuron"), w.to("neuron"), padding=1).cpu()
    assert metrics.get_counter_value("conv3d.fold") == 0
    x, w = torch.randn(2, 4, 5, 6, 7), torch.randn(4, 1, 3, 3, 3)
    assert folded_roles(lambda x, w: F.conv3d(x, w, padding=1, groups=4), x, w, torch.float32) == 0


_PINNED = """
import torch, torch.nn.functional as F, torchneuron, torchneuron.metrics as metrics
torch.manual_seed(0)
for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 5e-2)):
    for cl, stride in ((False, 1), (True, 1), (False, 2), (True, 2)):
        x, w = torch.randn(2, 8, 7, 9, 10).to(dtype), (torch.randn(12, 8, 3, 3, 3) / 8).to(dtype)
        if cl:
            x = x.contiguous(memory_format=torch.channels_last_3d)
        xc, wc = x.float().clone().requires_grad_(), w.float().clone().requires_grad_()
        xd, wd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
        want, got = F.conv3d(xc, wc, stride=stride, padding=1), F.conv3d(xd, wd, stride=stride, padding=1)
        g = torch.randn(want.shape).to(dtype)
        want.backward(g.float())
        got.backward(g.to("neuron"))
        for a, b in ((got, want), (xd.grad, xc.grad), (wd.grad, wc.grad)):
            torch.testing.assert_close(a.cpu(), b.to(dtype), rtol=tol, atol=tol)
torch.neuron.synchronize()
print(metrics.get_counter_value("conv3d.fold"))
"""


def test_avx2_folds_too():
    if "avx2" not in torch.neuron.isa_levels()["supported"]:
        pytest.skip("this CPU cannot run avx2")
    result = run_python(_PINNED, env={"TORCHNEURON_ISA": "avx2", "TORCHNEURON_FALLBACK": "error"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "24"  # 8 convolutions, 3 roles each


def test_problems_past_the_buffer_budget_run_in_pieces():
    """An image whose folded copy passes 4M elements runs in ranges of output
    depths, and a float32 weight gradient whose copies pass 16M in pieces
    summed in order (runtime/tests/test_conv3d.c checks every piece branch on
    small shapes); results as the CPU's. The weight gradient sums 2^18
    products per element (about 512 in magnitude), so its float32 rounding
    differs from the CPU's by up to about 1e-4 of that."""
    x, w = torch.randn(1, 16, 64, 64, 64), torch.randn(32, 16, 3, 3, 3) / 8
    tol = dict(rtol=1e-4, atol=5e-2)
    assert folded_roles(lambda x, w: F.conv3d(x, w, padding=1), x, w, torch.float32, tol) == 3
