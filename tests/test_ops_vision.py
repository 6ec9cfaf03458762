"""Vision ops on neuron against PyTorch CPU: max / average / adaptive pooling,
nearest / nearest-exact / (bi)linear upsampling, 1-d and 2-d convolution
(stride, padding incl. 'same', dilation, groups, depthwise, transposed with
output_padding), forward and backward (input, weight and bias gradients).

Inputs come in NCHW, channels_last and non-contiguous layouts, with empty
batches, in float32, float64, bfloat16 and float16. Every test asserts that
no op fell back to the CPU. Pooling and nearest upsampling select or average
the same elements as the CPU and must match it closely; convolution and
bilinear sums are compared with tolerances that allow for a different order
of accumulation.
"""

import hashlib
import re
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchneuron
from thread_count_support import outputs_by_thread_count
from layouts import contiguous, channels_last, sliced, transposed

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


pytestmark = pytest.mark.usefixtures("native_only")


LAYOUTS = [contiguous, channels_last, sliced, transposed]


def tolerance(dtype, exact):
    if exact:
        return {"rtol": 0, "atol": 0} if dtype != torch.float16 else {"rtol": 1e-3, "atol": 1e-3}
    return {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.float64: {"rtol": 1e-10, "atol": 1e-10},
            torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}, torch.float16: {"rtol": 3e-3, "atol": 1e-2}}[dtype]


def reference_dtype(dtype):
    """CPU references of 16-bit floats run in float32 (the CPU's own 16-bit
    kernels round in other places), then round to the dtype."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def compare(fn, inputs, dtype=torch.float32, layout=contiguous, exact=False, grad=True, selects=False):
    """fn on neuron (inputs in `layout`) against fn on CPU: outputs and the
    gradients of every floating input. An fn that selects (max pools) runs
    on CPU in the dtype itself, so that rounding makes the same ties."""
    ref_dtype = dtype if selects else reference_dtype(dtype)
    cpu = [t.to(ref_dtype).detach().clone().requires_grad_(grad) if t.is_floating_point() else t for t in inputs]
    dev = [layout(t.to(dtype)).detach().requires_grad_(grad) if t.is_floating_point() else t.to(DEV)
           for t in inputs]
    expected = fn(*cpu)
    actual = fn(*dev)
    tol = tolerance(dtype, exact and dtype in (torch.float32, torch.float64))
    assert actual.device.type == DEV and actual.dtype == dtype
    torch.testing.assert_close(actual.cpu(), expected.to(dtype), **tol)
    if not grad:
        return actual
    g = torch.randn(expected.shape, dtype=torch.float64).to(dtype)
    expected.backward(g.to(ref_dtype))
    actual.backward(g.to(DEV))
    for c, d in zip(cpu, dev):
        if c.is_floating_point():
            torch.testing.assert_close(d.grad.cpu(), c.grad.to(dtype), **tolerance(dtype, False))
    return actual


# ---- pooling ------------------------------------------------------------------

MAX_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", MAX_POOLS)
def test_max_pool2d_matches_cpu_with_gradient(layout, args):
    x = torch.randn(2, 5, 9, 11)
    compare(lambda t: F.max_pool2d(t, **args), [x], layout=layout, exact=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool2d_indices_and_dtypes(dtype):
    x = torch.randn(2, 3, 8, 10)
    out, idx = F.max_pool2d(x.to(dtype).to(DEV), 3, 2, 1, return_indices=True)
    ref, ref_idx = F.max_pool2d(x.to(dtype), 3, 2, 1, return_indices=True)
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    torch.testing.assert_close(idx.cpu(), ref_idx)
    compare(lambda t: F.max_pool2d(t, 3, 2, 1), [x], dtype=dtype, selects=True)


def test_max_pool2d_propagates_nan_and_ties_take_the_first():
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 1, 2] = float("nan")
    out, idx = F.max_pool2d(x.to(DEV), 2, return_indices=True)
    ref, ref_idx = F.max_pool2d(x, 2, return_indices=True)
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True)
    torch.testing.assert_close(idx.cpu(), ref_idx)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_max_pool2d_integer_inputs(dtype):
    x = torch.randint(0, 100, (2, 3, 7, 7)).to(dtype)
    out, idx = F.max_pool2d(x.to(DEV), 3, 2, return_indices=True)
    ref, ref_idx = F.max_pool2d(x, 3, 2, return_indices=True)
    assert torch.equal(out.cpu(), ref) and torch.equal(idx.cpu(), ref_idx)


def test_max_pool1d_and_unbatched_inputs():
    x = torch.randn(3, 4, 20)
    compare(lambda t: F.max_pool1d(t, 3, 2, 1), [x], exact=True)
    compare(lambda t: F.max_pool2d(t, 2), [torch.randn(3, 6, 6)], exact=True)


AVG_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=1, divisor_override=4),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", AVG_POOLS)
def test_avg_pool2d_matches_cpu_with_gradient(layout, args):
    x = torch.randn(2, 5, 9, 11)
    compare(lambda t: F.avg_pool2d(t, **args), [x], layout=layout, exact=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_avg_pool_dtypes_and_1d(dtype):
    compare(lambda t: F.avg_pool2d(t, 3, 2, 1), [torch.randn(2, 3, 8, 10)], dtype=dtype)
    compare(lambda t: F.avg_pool1d(t, 4, 3, 2, ceil_mode=True), [torch.randn(2, 3, 17)], dtype=dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5), (9, 11), (2, 1)])
def test_adaptive_avg_pool2d_matches_cpu(layout, size):
    compare(lambda t: F.adaptive_avg_pool2d(t, size), [torch.randn(2, 5, 9, 11)], layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5), (2, 11)])
def test_adaptive_max_pool2d_matches_cpu(layout, size):
    x = torch.randn(2, 5, 9, 11)
    compare(lambda t: F.adaptive_max_pool2d(t, size), [x], layout=layout, exact=True)
    out, idx = F.adaptive_max_pool2d(layout(x), size, return_indices=True)
    assert torch.equal(idx.cpu(), F.adaptive_max_pool2d(x, size, return_indices=True)[1])


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_pools_dtypes_and_1d(dtype):
    compare(lambda t: F.adaptive_avg_pool2d(t, (3, 5)), [torch.randn(2, 3, 8, 10)], dtype=dtype)
    compare(lambda t: F.adaptive_max_pool2d(t, (3, 5)), [torch.randn(2, 3, 8, 10)], dtype=dtype, selects=True)
    compare(lambda t: F.adaptive_avg_pool1d(t, 6), [torch.randn(2, 3, 17)], dtype=dtype)
    compare(lambda t: F.adaptive_max_pool1d(t, 6), [torch.randn(2, 3, 17)], dtype=dtype, selects=True)


def test_pooling_empty_batch():
    x = torch.randn(0, 3, 8, 8)
    compare(lambda t: F.max_pool2d(t, 2), [x])
    compare(lambda t: F.avg_pool2d(t, 2), [x])
    compare(lambda t: F.adaptive_avg_pool2d(t, 3), [x])
    compare(lambda t: F.adaptive_max_pool2d(t, 3), [x])


def test_pooling_bad_arguments_raise_pytorch_errors():
    x = torch.randn(1, 2, 4, 4, device=DEV)
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(torch.randn(1, 2, 1, 1, device=DEV), 3)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(NotImplementedError, match="avg_pool2d"):
        F.avg_pool2d(torch.ones(1, 1, 4, 4, dtype=torch.uint8, device=DEV), 2)


def test_avg_pool2d_int64_divides_as_integers():
    x = torch.randint(-50, 50, (2, 3, 9, 9))
    for args in [(3, 1, 1, True, False, 2), ((4, 4), (2, 3), 1, True, False, None), (2,)]:
        assert torch.equal(F.avg_pool2d(x.to(DEV), *args).cpu(), F.avg_pool2d(x, *args))


# ---- upsampling -----------------------------------------------------------------

UPSAMPLES = [
    dict(scale_factor=2, mode="nearest"),
    dict(size=(7, 15), mode="nearest"),
    dict(scale_factor=1.7, mode="nearest"),
    dict(scale_factor=(0.6, 1.3), mode="nearest-exact"),
    dict(size=(13, 5), mode="nearest-exact"),
    dict(scale_factor=2, mode="bilinear"),
    dict(size=(7, 15), mode="bilinear"),
    dict(size=(7, 15), mode="bilinear", align_corners=True),
    dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=False),
    dict(size=(1, 1), mode="bilinear", align_corners=True),
    dict(size=(5, 6), mode="bilinear"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", UPSAMPLES)
def test_upsample2d_matches_cpu_with_gradient(layout, args):
    x = torch.randn(2, 3, 5, 6)
    compare(lambda t: F.interpolate(t, **args), [x], layout=layout, exact=args["mode"] != "bilinear")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
def test_upsample2d_dtypes(dtype, mode):
    compare(lambda t: F.interpolate(t, scale_factor=2.5, mode=mode), [torch.randn(2, 3, 4, 5)], dtype=dtype)


@pytest.mark.parametrize("args", [dict(scale_factor=2, mode="nearest"), dict(size=11, mode="nearest-exact"),
                                  dict(size=11, mode="linear"), dict(size=11, mode="linear", align_corners=True)])
def test_upsample1d_matches_cpu(args):
    compare(lambda t: F.interpolate(t, **args), [torch.randn(2, 3, 7)])


def test_upsample_nearest_copies_uint8():
    x = torch.randint(0, 2, (2, 3, 4, 5))
    out = F.interpolate(x.to(torch.uint8).to(DEV), size=(7, 9))
    assert out.dtype == torch.uint8
    assert torch.equal(out.cpu(), F.interpolate(x.double(), size=(7, 9)).to(torch.uint8))


@pytest.mark.parametrize("dtype", [torch.int16, torch.int64, torch.bool])
def test_upsample_nearest_refuses_other_integer_dtypes_as_cpu(dtype):
    # The CPU (and CUDA) have nearest kernels for the floating dtypes and
    # uint8 only; upstream's test_nn.py checks that the others raise.
    x = torch.randint(0, 2, (2, 3, 4, 5)).to(dtype)
    with pytest.raises(NotImplementedError) as cpu:
        F.interpolate(x, size=(7, 9))
    with pytest.raises(NotImplementedError, match=re.escape(str(cpu.value))):
        F.interpolate(x.to(DEV), size=(7, 9))


def test_upsample_empty_batch_and_errors():
    compare(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), [torch.randn(0, 3, 4, 5)])
    with pytest.raises(RuntimeError, match="should be greater than 0"):
        F.interpolate(torch.randn(1, 1, 4, 4, device=DEV), size=(0, 3))


# ---- convolution ----------------------------------------------------------------

CONVS = [
    # input shape, weight shape, kwargs
    ((2, 3, 9, 11), (4, 3, 3, 3), dict(padding=1)),
    ((2, 3, 9, 11), (4, 3, 3, 3), dict(stride=2, padding=(2, 1), dilation=(2, 1))),
    ((2, 3, 9, 11), (4, 3, 3, 2), dict(padding="same", dilation=2)),
    ((2, 3, 9, 11), (4, 3, 2, 2), dict(padding="same")),
    ((2, 3, 9, 11), (5, 3, 1, 1), {}),
    ((2, 6, 9, 11), (6, 2, 3, 3), dict(groups=3, stride=(1, 2))),
    ((2, 6, 9, 11), (12, 1, 3, 3), dict(groups=6, padding=1)),
    ((2, 6, 9, 11), (6, 1, 3, 3), dict(groups=6, padding=1)),
    ((2, 6, 9, 11), (6, 1, 3, 2), dict(groups=6, stride=2, dilation=(1, 2))),
    ((1, 20, 6, 7), (40, 20, 3, 3), dict(padding=1)),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("xs,ws,kwargs", CONVS)
def test_conv2d_matches_cpu_with_all_gradients(layout, xs, ws, kwargs):
    x, w, b = torch.randn(*xs), torch.randn(*ws), torch.randn(ws[0])
    compare(lambda x, w, b: F.conv2d(x, w, b, **kwargs), [x, w, b], layout=layout)


def test_conv2d_without_bias_and_with_channels_last_weight():
    x, w = torch.randn(2, 4, 7, 7), torch.randn(6, 4, 3, 3)
    compare(lambda x, w: F.conv2d(x, w, padding=1), [x, w], layout=channels_last)
    compare(lambda x, w: F.conv2d(x, w, stride=2), [x, w], layout=transposed)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_dtypes(dtype):
    x, w, b = torch.randn(2, 4, 8, 9), torch.randn(6, 4, 3, 3), torch.randn(6)
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=(1, 2)), [x, w, b], dtype=dtype)


CONV_TRANSPOSES = [
    ((2, 3, 5, 6), (3, 4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 6), (4, 3, 3, 2), dict(stride=(2, 3), groups=2, dilation=2)),
    ((2, 3, 5, 6), (3, 2, 1, 1), {}),
    ((2, 3, 5, 6), (3, 5, 4, 4), dict(stride=2, padding=(0, 2), output_padding=(1, 0))),
]


@pytest.mark.parametrize("layout", [contiguous, channels_last, sliced])
@pytest.mark.parametrize("xs,ws,kwargs", CONV_TRANSPOSES)
def test_conv_transpose2d_matches_cpu_with_all_gradients(layout, xs, ws, kwargs):
    groups = kwargs.get("groups", 1)
    x, w, b = torch.randn(*xs), torch.randn(*ws), torch.randn(ws[1] * groups)
    compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs), [x, w, b], layout=layout)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv1d_and_conv_transpose1d(dtype):
    x = torch.randn(2, 3, 20)
    compare(lambda x, w, b: F.conv1d(x, w, b, padding=2, stride=2), [x, torch.randn(4, 3, 5), torch.randn(4)],
            dtype=dtype)
    compare(lambda x, w, b: F.conv1d(x, w, b, padding="same", dilation=3, groups=3),
            [x, torch.randn(6, 1, 3), torch.randn(6)], dtype=dtype)
    compare(lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, output_padding=1),
            [x, torch.randn(3, 4, 4), torch.randn(4)], dtype=dtype)


def test_conv_empty_batch_and_unbatched_input():
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [torch.randn(0, 3, 5, 5), torch.randn(4, 3, 3, 3),
                                                             torch.randn(4)])
    compare(lambda x, w, b: F.conv2d(x, w, b), [torch.randn(3, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(4)])


def test_conv_larger_than_one_tile_and_one_chunk():
    """Enough positions and channels to split into several tiles and tasks."""
    x, w, b = torch.randn(3, 16, 40, 45), torch.randn(24, 16, 3, 3), torch.randn(24)
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b], dtype=torch.float64)


@pytest.mark.parametrize("layout", [contiguous, channels_last])
def test_conv_batches_small_images_into_tiles(layout):
    """Small images are grouped several to a tile, the last group ragged."""
    x, w, b = torch.randn(35, 6, 5, 7), torch.randn(8, 6, 3, 3), torch.randn(8)
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b], dtype=torch.float64, layout=layout)
    compare(lambda x, w, b: F.conv2d(x, w, b, stride=2), [x, w, b], layout=layout)


def test_conv_bad_arguments_raise_pytorch_errors():
    x = torch.randn(1, 3, 5, 5, device=DEV)
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, torch.randn(4, 2, 3, 3, device=DEV))
    with pytest.raises(RuntimeError, match="too small|Kernel size can't be greater"):
        F.conv2d(x, torch.randn(4, 3, 7, 7, device=DEV))


# ---- a small CNN end to end -----------------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(self.up(x)))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


@pytest.mark.parametrize("layout", [contiguous, channels_last])
def test_small_cnn_forward_and_backward_run_natively(layout):
    torch.manual_seed(0)
    model = SmallCNN()
    x = torch.randn(4, 3, 16, 16)
    ref = model(x).square().sum()
    ref.backward()
    dev_model = SmallCNN().to(DEV)
    dev_model.load_state_dict(model.state_dict())
    if layout is channels_last:
        dev_model = dev_model.to(memory_format=torch.channels_last)
    out = dev_model(layout(x)).square().sum()
    out.backward()
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-4, msg=name)


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, torch, torch.nn.functional as F
    import torchneuron
    torch.manual_seed(0)
    x = torch.randn(3, 16, 33, 35).to("neuron").requires_grad_()
    w = torch.randn(24, 16, 3, 3).to("neuron").requires_grad_()
    y = F.conv2d(x, w, padding=1)
    z = F.interpolate(F.avg_pool2d(F.max_pool2d(y, 3, 2, 1), 3, 1, 1), scale_factor=1.5, mode="bilinear")
    z.backward(torch.randn(z.shape).to("neuron"))
    h = hashlib.sha256()
    for t in (y, z, x.grad, w.grad):
        h.update(t.detach().cpu().numpy().tobytes())
    print(h.hexdigest())
""")


def test_results_do_not_depend_on_thread_count():
    assert len(outputs_by_thread_count(DETERMINISM_SCRIPT)) == 1
