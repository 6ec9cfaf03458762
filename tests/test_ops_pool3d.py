"""3-d pooling on neuron against PyTorch CPU: max_pool3d (stride, padding,
dilation, ceil_mode, return_indices), avg_pool3d (ceil_mode,
count_include_pad, divisor_override), adaptive_max_pool3d and
adaptive_avg_pool3d; forward and backward; NCDHW, channels_last_3d, sliced
and transposed layouts; unbatched inputs and empty batches; out=; float32,
float64, bfloat16 and float16. Every test asserts that no op fell back to
the CPU (the native_only fixture), and that results do not depend on the
kernel thread count."""

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


def tol(dtype):
    return {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12),
            torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float16: dict(rtol=2e-3, atol=2e-3)}[dtype]


def compare(fn, x, dtype=torch.float32, layout=contiguous, selects=False):
    """fn on neuron against fn on CPU, output and input gradient. Max pools
    run on the CPU in the dtype itself (the same ties); sums in float32 for
    16-bit floats."""
    ref = dtype if selects or dtype not in (torch.bfloat16, torch.float16) else torch.float32
    c = x.to(dtype).to(ref).detach().requires_grad_()
    d = layout(x.to(dtype)).detach().requires_grad_()
    expected, actual = fn(c), fn(d)
    if isinstance(expected, tuple):
        assert torch.equal(actual[1].cpu(), expected[1])
        expected, actual = expected[0], actual[0]
    assert actual.device.type == DEV and actual.dtype == dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected.to(dtype), equal_nan=True, **tol(dtype))
    g = torch.randn(expected.shape, dtype=torch.float64).to(dtype)
    expected.backward(g.to(ref))
    actual.backward(g.to(DEV))
    torch.testing.assert_close(d.grad.cpu(), c.grad.to(dtype), **tol(dtype))


MAX_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3, 3), stride=2, ceil_mode=True, return_indices=True),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", MAX_POOLS)
def test_max_pool3d_matches_cpu_with_gradient(layout, args):
    x = torch.randn(2, 3, 7, 8, 9)
    compare(lambda t: F.max_pool3d(t, **args), x, layout=layout, selects=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool3d_dtypes_and_unbatched(dtype):
    compare(lambda t: F.max_pool3d(t, 3, 2, 1, return_indices=True), torch.randn(2, 3, 6, 7, 8), dtype,
            selects=True)
    compare(lambda t: F.max_pool3d(t, 2), torch.randn(3, 6, 7, 8), dtype, selects=True)
    compare(lambda t: F.max_pool3d(t, 2), torch.randn(2, 3, 6, 7, 8), dtype, channels_last, selects=True)


def test_max_pool3d_nan_and_ties():
    x = torch.zeros(1, 2, 4, 4, 4)
    x[0, 0, 1, 1, 1] = float("nan")
    x[0, 1, 0, 0, 1] = x[0, 1, 1, 0, 0] = float("nan")  # two NaNs in one window: the CPU keeps the last
    compare(lambda t: F.max_pool3d(t, 2, return_indices=True), x, selects=True)
    compare(lambda t: F.adaptive_max_pool3d(t, 1, return_indices=True), x, selects=True)


AVG_POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, stride=1, divisor_override=3),
    # a negative override, which the CPU takes (op_db's int64 sample has one)
    dict(kernel_size=(2, 3, 2), stride=(2, 1, 1), padding=(1, 0, 1), ceil_mode=True, divisor_override=-2),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", AVG_POOLS)
def test_avg_pool3d_matches_cpu_with_gradient(layout, args):
    compare(lambda t: F.avg_pool3d(t, **args), torch.randn(2, 3, 7, 8, 9), layout=layout)


@pytest.mark.parametrize("dtype", FLOATS)
def test_avg_pool3d_dtypes_and_unbatched(dtype):
    compare(lambda t: F.avg_pool3d(t, 3, 2, 1), torch.randn(2, 3, 6, 7, 8), dtype)
    compare(lambda t: F.avg_pool3d(t, 2), torch.randn(3, 6, 7, 8), dtype, channels_last)


ADAPTIVE = [(1, 1, 1), (3, 4, 5), (5, 7, 9), (2, None, 3), 4]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", ADAPTIVE)
def test_adaptive_pools3d_match_cpu_with_gradient(layout, size):
    x = torch.randn(2, 3, 5, 7, 9)
    compare(lambda t: F.adaptive_avg_pool3d(t, size), x, layout=layout)
    compare(lambda t: F.adaptive_max_pool3d(t, size, return_indices=True), x, layout=layout, selects=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_pools3d_dtypes_and_unbatched(dtype):
    x = torch.randn(3, 5, 7, 9)
    compare(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), x, dtype)
    compare(lambda t: F.adaptive_max_pool3d(t, (2, 3, 4)), x, dtype, selects=True)
    compare(lambda t: F.adaptive_avg_pool3d(t, (4, 8, 10)), x[None], dtype, channels_last)


def test_pool3d_empty_batch():
    x = torch.randn(0, 3, 4, 4, 4)
    for fn in (lambda t: F.max_pool3d(t, 2), lambda t: F.avg_pool3d(t, 2),
               lambda t: F.adaptive_max_pool3d(t, 2), lambda t: F.adaptive_avg_pool3d(t, 3)):
        compare(fn, x)


def test_pool3d_out_overloads():
    x = torch.randn(2, 3, 6, 6, 6)
    out, ind = torch.empty(0, device=DEV), torch.empty(0, device=DEV, dtype=torch.long)
    torch.ops.aten.max_pool3d_with_indices.out(x.to(DEV), [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False,
                                               out=out, indices=ind)
    e_out, e_ind = torch.ops.aten.max_pool3d_with_indices(x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False)
    assert torch.equal(out.cpu(), e_out) and torch.equal(ind.cpu(), e_ind)
    out = torch.empty(0, device=DEV)
    torch.ops.aten.avg_pool3d.out(x.to(DEV), [3, 3, 3], [2, 2, 2], [1, 1, 1], True, False, None, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten.avg_pool3d(x, [3, 3, 3], [2, 2, 2], [1, 1, 1], True, False))
    out = torch.empty(0, device=DEV)
    torch.ops.aten.adaptive_avg_pool3d.out(x.to(DEV), [2, 3, 4], out=out)
    torch.testing.assert_close(out.cpu(), F.adaptive_avg_pool3d(x, (2, 3, 4)))
    out, ind = torch.empty(0, device=DEV), torch.empty(0, device=DEV, dtype=torch.long)
    torch.ops.aten.adaptive_max_pool3d.out(x.to(DEV), [2, 3, 4], out=out, indices=ind)
    e_out, e_ind = F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)
    assert torch.equal(out.cpu(), e_out) and torch.equal(ind.cpu(), e_ind)


def test_pool3d_errors_match_cpu():
    cases = [lambda t: F.max_pool3d(t, 2, padding=2), lambda t: F.avg_pool3d(t, 5),
             lambda t: F.max_pool3d(t[:, :, :0], 2), lambda t: F.adaptive_avg_pool3d(t[:, :, :0], 2),
             lambda t: F.avg_pool3d(t, 2, padding=3)]
    x = torch.randn(1, 2, 4, 4, 4)
    for fn in cases:
        with pytest.raises(Exception) as cpu:
            fn(x)
        with pytest.raises(type(cpu.value)):
            fn(x.to(DEV))


def test_pool3d_does_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import hashlib, torch, torch.nn.functional as F, torchneuron
        torch.manual_seed(0)
        x = torch.randn(2, 16, 9, 10, 11).to("neuron").requires_grad_()
        y = F.max_pool3d(x, 3, 2, 1).sum() + F.avg_pool3d(x, 3, 1, 1).square().sum() \\
            + F.adaptive_avg_pool3d(x, (4, 5, 6)).square().sum() + F.adaptive_max_pool3d(x, 3).sum()
        y.backward()
        h = hashlib.sha256()
        h.update(x.grad.cpu().numpy().tobytes())
        print(h.hexdigest())
    """)
    assert len(outputs_by_thread_count(script)) == 1


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_max_pool3d_integers_match_cpu(dtype):
    lo, hi = (0, 256) if dtype == torch.uint8 else (-100, 100)
    x = torch.randint(lo, hi, (2, 3, 5, 6, 7), dtype=dtype)
    if dtype == torch.int64:
        x[0, 0, 0, 0, :2] = torch.tensor([2**62 + 1, 2**62])  # differ below double precision
    for args in MAX_POOLS:
        for layout in (contiguous, channels_last, transposed):
            got = F.max_pool3d(layout(x), **{**args, "return_indices": True})
            want = F.max_pool3d(x, **{**args, "return_indices": True})
            assert got[0].dtype == dtype
            assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])


def test_avg_pool3d_int64_matches_cpu():
    x = torch.randint(-1000, 1000, (2, 3, 5, 6, 7), dtype=torch.int64)  # negative sums truncate toward zero
    for args in AVG_POOLS:
        for layout in (contiguous, channels_last, sliced):
            got = F.avg_pool3d(layout(x), **args)
            assert got.dtype == torch.int64 and torch.equal(got.cpu(), F.avg_pool3d(x, **args))
    out = torch.empty(0, device=DEV, dtype=torch.int64)
    torch.ops.aten.avg_pool3d.out(x.to(DEV), [2, 2, 2], [1, 1, 1], [1, 1, 1], False, False, 3, out=out)
    assert torch.equal(out.cpu(), torch.ops.aten.avg_pool3d(x, [2, 2, 2], [1, 1, 1], [1, 1, 1], False, False, 3))


def test_pool3d_unsupported_dtypes_raise_like_cpu():
    for fn, dtype in ((lambda t: F.max_pool3d(t, 2), torch.bool), (lambda t: F.avg_pool3d(t, 2), torch.int32),
                      (lambda t: F.adaptive_max_pool3d(t, 2), torch.int64)):
        x = torch.zeros(1, 1, 4, 4, 4, dtype=dtype)
        with pytest.raises(NotImplementedError) as cpu:
            fn(x)
        with pytest.raises(NotImplementedError, match=str(cpu.value).split(" not implemented")[0]):
            fn(x.to(DEV))


aten = torch.ops.aten


def layout_of(t):
    return torch.channels_last_3d if t.is_contiguous(memory_format=torch.channels_last_3d) else torch.contiguous_format

# (forward, backward into grad_input=) pairs; the forwards' outputs feed the backwards
BACKWARD_LAYOUT_CASES = [
    (lambda x: F.avg_pool3d(x, 3, 2, 1),
     lambda g, x, y, gi: aten.avg_pool3d_backward.grad_input(g, x, [3] * 3, [2] * 3, [1] * 3, False, True, None,
                                                              grad_input=gi)),
    (lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 1, 0), ceil_mode=True, count_include_pad=False),
     lambda g, x, y, gi: aten.avg_pool3d_backward.grad_input(g, x, [3, 2, 3], [2, 1, 2], [1, 1, 0], True, False, None,
                                                              grad_input=gi)),
    (lambda x: F.avg_pool3d(x, 2, 1, divisor_override=3),
     lambda g, x, y, gi: aten.avg_pool3d_backward.grad_input(g, x, [2] * 3, [1] * 3, [0] * 3, False, True, 3,
                                                              grad_input=gi)),
    (lambda x: F.adaptive_avg_pool3d(x, (3, 4, 2)),  # overlapping adaptive windows
     lambda g, x, y, gi: gi.copy_(aten._adaptive_avg_pool3d_backward(g, x.contiguous(memory_format=layout_of(gi))))),
    (lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True),
     lambda g, x, y, gi: aten.max_pool3d_with_indices_backward.grad_input(g, x, [3] * 3, [2] * 3, [1] * 3, [1] * 3,
                                                                           False, y[1], grad_input=gi)),
    (lambda x: F.adaptive_max_pool3d(x, (3, 4, 2), return_indices=True),
     lambda g, x, y, gi: aten.adaptive_max_pool3d_backward.grad_input(g, x, y[1], grad_input=gi)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(BACKWARD_LAYOUT_CASES)))
def test_pool3d_backward_gives_the_same_bits_in_both_layouts(case, dtype):
    # An NCDHW grad_input runs per plane (average pools gather each input's
    # covering outputs; max pools scatter into one plane), a channels_last_3d
    # one by channel runs; both sum every element in output order, in double.
    forward, backward = BACKWARD_LAYOUT_CASES[case]
    x = torch.randn(2, 5, 6, 7, 5).round(decimals=1).to(dtype).to(DEV)  # ties for the max pools
    y = forward(x)
    out = y[0] if isinstance(y, tuple) else y
    g = torch.linspace(-3, 5, out.numel()).reshape(out.shape).to(dtype).to(DEV)
    grads = []
    for fmt in (torch.contiguous_format, torch.channels_last_3d):
        gi = torch.empty_like(x, memory_format=fmt)
        backward(g, x, y, gi)
        grads.append(gi.cpu())
    assert torch.equal(grads[0], grads[1])
    assert torch.count_nonzero(grads[0]) > 0


AVG_FORWARDS = [
    lambda x, out: aten.avg_pool3d.out(x, [3] * 3, [2] * 3, [1] * 3, out=out),
    lambda x, out: aten.avg_pool3d.out(x, [3, 2, 3], [2, 1, 2], [1, 1, 0], True, False, out=out),
    lambda x, out: aten.avg_pool3d.out(x, [2] * 3, [1] * 3, [0] * 3, False, True, 3, out=out),
    lambda x, out: out.copy_(F.adaptive_avg_pool3d(x, (3, 4, 2))),  # its output takes x's layout
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", range(len(AVG_FORWARDS)))
def test_avg_pool3d_forward_gives_the_same_bits_in_both_layouts(case, dtype):
    # NCDHW runs the row kernel (a row's outputs summed together, each in
    # window order), channels_last_3d the channel-run kernel: same sums.
    x = torch.randn(2, 5, 6, 7, 9, dtype=torch.float64).to(dtype).to(DEV)
    shape = BACKWARD_LAYOUT_CASES[case][0](x).shape
    got = []
    for fmt in (torch.contiguous_format, torch.channels_last_3d):
        out = torch.empty(shape, dtype=dtype, device=DEV).contiguous(memory_format=fmt)
        AVG_FORWARDS[case](x.contiguous(memory_format=fmt), out)
        got.append(out.cpu())
    assert torch.equal(got[0], got[1])
