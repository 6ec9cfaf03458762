"""3-d convolution (F.conv3d, F.conv_transpose3d, nn.Conv3d) on neuron
against PyTorch CPU: stride, padding (incl. 'same'), dilation, groups,
output_padding, with and without bias; forward and all three gradients
(input, weight, bias); NCDHW, channels_last_3d, sliced and transposed
layouts; empty batches and unbatched inputs; float32, float64, bfloat16 and
float16. Every test asserts that no op fell back to the CPU, and that the
results do not depend on the kernel thread count."""

import hashlib
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from thread_count_support import outputs_by_thread_count
from layouts import contiguous, channels_last, sliced, transposed_3d as transposed

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

pytestmark = pytest.mark.usefixtures("native_only")


LAYOUTS = [contiguous, channels_last, sliced, transposed]

TOL = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.float64: {"rtol": 1e-10, "atol": 1e-10},
       torch.bfloat16: {"rtol": 3e-2, "atol": 5e-2}, torch.float16: {"rtol": 3e-3, "atol": 1e-2}}


def compare(fn, inputs, dtype=torch.float32, layout=contiguous):
    """fn on neuron (inputs in layout) against fn on CPU: the output and the
    gradients of every input. CPU references of 16-bit floats run in float32
    and are rounded to the dtype."""
    ref = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    cpu = [t.to(dtype).to(ref).detach().requires_grad_() for t in inputs]
    dev = [layout(t.to(dtype)).detach().requires_grad_() for t in inputs]
    expected = fn(*cpu)
    actual = fn(*dev)
    assert actual.device.type == DEV and actual.dtype == dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected.to(dtype), **TOL[dtype])
    g = torch.randn(expected.shape, dtype=torch.float64).to(dtype)
    expected.backward(g.to(ref))
    actual.backward(g.to(DEV))
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.grad.cpu(), c.grad.to(dtype), **TOL[dtype])
    return actual


CONVS = [
    # input shape, weight shape, kwargs
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), dict(padding=1)),
    ((2, 3, 7, 6, 8), (4, 3, 3, 2, 3), dict(stride=(2, 1, 3), padding=(1, 0, 2), dilation=(1, 2, 1))),
    ((1, 3, 5, 6, 7), (4, 3, 2, 3, 2), dict(padding="same", dilation=(2, 1, 2))),
    ((2, 3, 4, 5, 6), (5, 3, 1, 1, 1), {}),
    ((2, 6, 4, 5, 6), (6, 2, 3, 3, 3), dict(groups=3, stride=(1, 2, 1), padding=1)),
    ((2, 4, 4, 5, 6), (8, 1, 3, 3, 3), dict(groups=4, padding=(0, 1, 1))),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("xs,ws,kwargs", CONVS)
def test_conv3d_matches_cpu_with_all_gradients(layout, xs, ws, kwargs):
    x, w, b = torch.randn(*xs), torch.randn(*ws), torch.randn(ws[0])
    compare(lambda x, w, b: F.conv3d(x, w, b, **kwargs), [x, w, b], layout=layout)


def test_conv3d_without_bias():
    x, w = torch.randn(2, 4, 5, 5, 5), torch.randn(6, 4, 3, 3, 3)
    compare(lambda x, w: F.conv3d(x, w, padding=1), [x, w], layout=channels_last)
    compare(lambda x, w: F.conv3d(x, w, stride=2), [x, w], layout=transposed)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv3d_dtypes(dtype):
    x, w, b = torch.randn(2, 4, 5, 6, 7), torch.randn(6, 4, 3, 3, 3), torch.randn(6)
    compare(lambda x, w, b: F.conv3d(x, w, b, padding=1, stride=(1, 2, 1)), [x, w, b], dtype=dtype)
    compare(lambda x, w, b: F.conv3d(x, w, b, padding=1), [x, w, b], dtype=dtype, layout=channels_last)


CONV_TRANSPOSES = [
    ((2, 3, 3, 4, 5), (3, 4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 3, 4, 5), (4, 3, 3, 2, 2), dict(stride=(2, 3, 1), groups=2, dilation=2)),
    ((2, 3, 3, 4, 5), (3, 2, 1, 1, 1), {}),
    ((1, 3, 3, 4, 4), (3, 5, 2, 4, 3), dict(stride=2, padding=(0, 2, 1), output_padding=(1, 0, 1))),
    ((1, 2, 3, 3, 3), (2, 2, 3, 3, 3), dict(stride=1, dilation=2, output_padding=1)),
]


@pytest.mark.parametrize("layout", [contiguous, channels_last, sliced])
@pytest.mark.parametrize("xs,ws,kwargs", CONV_TRANSPOSES)
def test_conv_transpose3d_matches_cpu_with_all_gradients(layout, xs, ws, kwargs):
    groups = kwargs.get("groups", 1)
    x, w, b = torch.randn(*xs), torch.randn(*ws), torch.randn(ws[1] * groups)
    compare(lambda x, w, b: F.conv_transpose3d(x, w, b, **kwargs), [x, w, b], layout=layout)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv_transpose3d_dtypes(dtype):
    x, w, b = torch.randn(2, 3, 3, 4, 5), torch.randn(3, 4, 3, 3, 3), torch.randn(4)
    compare(lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=1, output_padding=1), [x, w, b],
            dtype=dtype)


def test_conv3d_empty_batch_and_unbatched_input():
    compare(lambda x, w, b: F.conv3d(x, w, b, padding=1),
            [torch.randn(0, 3, 4, 4, 4), torch.randn(4, 3, 3, 3, 3), torch.randn(4)])
    compare(lambda x, w, b: F.conv3d(x, w, b), [torch.randn(3, 4, 5, 5), torch.randn(4, 3, 3, 3, 3), torch.randn(4)])
    compare(lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2),
            [torch.randn(0, 3, 2, 2, 2), torch.randn(3, 4, 3, 3, 3), torch.randn(4)])


def test_conv3d_several_tiles_and_tasks():
    """Enough positions and channels for several tiles per image."""
    x, w, b = torch.randn(2, 8, 6, 20, 24), torch.randn(12, 8, 3, 3, 3), torch.randn(12)
    compare(lambda x, w, b: F.conv3d(x, w, b, padding=1), [x, w, b], dtype=torch.float64)


def test_conv3d_module_trains_like_cpu():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose3d(4, 2, 2, stride=2)).double()
    dev = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose3d(4, 2, 2, stride=2)).double()
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = torch.randn(2, 2, 4, 5, 6, dtype=torch.float64)
    cpu(x).square().sum().backward()
    dev(x.to(DEV)).square().sum().backward()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-10, atol=1e-10, msg=name)


def test_conv3d_bad_arguments_raise_pytorch_errors():
    x = torch.randn(1, 3, 5, 5, 5, device=DEV)
    with pytest.raises(RuntimeError, match="channels"):
        F.conv3d(x, torch.randn(4, 2, 3, 3, 3, device=DEV))
    with pytest.raises(RuntimeError, match="too small|Kernel size can't be greater"):
        F.conv3d(x, torch.randn(4, 3, 7, 7, 7, device=DEV))
    with pytest.raises(RuntimeError):
        F.conv3d(x, torch.randn(4, 3, 3, 3, 3, device=DEV, dtype=torch.float64))


def test_conv3d_does_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import hashlib, torch, torch.nn.functional as F, torchneuron
        torch.manual_seed(0)
        x = torch.randn(3, 8, 6, 20, 24).to("neuron").requires_grad_()
        w = torch.randn(12, 4, 3, 3, 3).to("neuron").requires_grad_()
        y = F.conv3d(x, w, padding=1, groups=2)
        y.backward(torch.randn(y.shape).to("neuron"))
        h = hashlib.sha256()
        for t in (y, x.grad, w.grad):
            h.update(t.detach().cpu().numpy().tobytes())
        print(h.hexdigest())
    """)
    assert len(outputs_by_thread_count(script)) == 1
