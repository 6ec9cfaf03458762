"""Fractional max pooling on neuron against PyTorch CPU: 2-d and 3-d, by
output_size and by output_ratio, batched and unbatched, NCHW,
channels_last, sliced and transposed layouts, every floating dtype (the
windows are computed in the samples' dtype, as the CPU does, so even
float16 and bfloat16 pick the same windows), NaN and -inf inputs,
return_indices, out= forms, the backward, and errors. The random samples
are drawn on the CPU and given to both sides. Every test asserts that no op
fell back to the CPU (the native_only fixture)."""

import pytest
import torch
import torch.nn.functional as F

DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

pytestmark = pytest.mark.usefixtures("native_only")


def layouts(ndim):
    cl = torch.channels_last if ndim == 4 else torch.channels_last_3d
    return [lambda t: t.to(DEV),
            lambda t: t.to(DEV).contiguous(memory_format=cl) if t.dim() == ndim else t.to(DEV),
            lambda t: torch.stack([t, t], -1).flatten(-2).to(DEV)[..., ::2],
            lambda t: t.transpose(-1, -2).contiguous().to(DEV).transpose(-1, -2)]


def compare(pool, x, k, samples, layout, **kw):
    c = x.detach().requires_grad_()
    d = layout(x).detach().requires_grad_()
    want, want_i = pool(c, k, _random_samples=samples, return_indices=True, **kw)
    got, got_i = pool(d, k, _random_samples=samples.to(DEV), return_indices=True, **kw)
    assert got.dtype == x.dtype and got.shape == want.shape
    assert torch.equal(got_i.cpu(), want_i)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)
    if x.dtype in (torch.float32, torch.float64):
        g = torch.randn(want.shape, dtype=x.dtype)
        want.backward(g)
        got.backward(g.to(DEV))
        # overlapping windows add several gradients into one input: the
        # order of those sums may differ from the CPU's
        tol = 1e-12 if x.dtype == torch.float64 else 1e-6
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("layout", range(4))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", [dict(k=2, output_size=(5, 4)), dict(k=(3, 2), output_ratio=(0.5, 0.7)),
                                  dict(k=3, output_size=(1, 1)), dict(k=1, output_size=(9, 11))], ids=str)
def test_fractional_max_pool2d_matches_cpu(layout, dtype, args):
    x = torch.randn(2, 3, 9, 11).to(dtype)
    samples = torch.rand(2, 3, 2, dtype=dtype)
    args = dict(args)
    k = args.pop("k")
    compare(F.fractional_max_pool2d, x, k, samples, layouts(4)[layout], **args)


@pytest.mark.parametrize("layout", range(4))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args", [dict(k=2, output_size=(3, 5, 4)), dict(k=(2, 3, 2), output_ratio=(0.5, 0.6, 0.7)),
                                  dict(k=1, output_size=(1, 8, 10))], ids=str)
def test_fractional_max_pool3d_matches_cpu(layout, dtype, args):
    x = torch.randn(2, 3, 6, 9, 11).to(dtype)
    samples = torch.rand(2, 3, 3, dtype=dtype)
    args = dict(args)
    k = args.pop("k")
    compare(F.fractional_max_pool3d, x, k, samples, layouts(5)[layout], **args)


def test_unbatched_and_special_values():
    x = torch.randn(3, 9, 11)
    x[0, 2, 3] = float("nan")
    x[1] = float("-inf")
    x[2, 4:6, 4:6] = float("nan")
    compare(F.fractional_max_pool2d, x, 3, torch.rand(1, 3, 2), layouts(4)[0], output_size=(4, 5))
    v = torch.randn(3, 5, 9, 11, dtype=torch.float64)
    v[0, 1, 2, 3] = float("nan")
    v[1] = float("-inf")
    compare(F.fractional_max_pool3d, v, 2, torch.rand(1, 3, 3, dtype=torch.float64), layouts(5)[0],
            output_size=(3, 4, 5))


def test_module_draws_samples_on_the_device():
    torch.manual_seed(1)
    pool = torch.nn.FractionalMaxPool2d(2, output_ratio=0.5)
    y = pool(torch.randn(2, 4, 10, 12).to(DEV))
    assert y.shape == (2, 4, 5, 6) and y.device.type == DEV


def test_out_forms():
    x = torch.randn(2, 3, 9, 11)
    s = torch.rand(2, 3, 2)
    out, idx = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.ops.aten.fractional_max_pool2d.output(x.to(DEV), [2, 2], [4, 5], s.to(DEV), output=out, indices=idx)
    want, want_i = torch.ops.aten.fractional_max_pool2d(x, [2, 2], [4, 5], s)
    assert torch.equal(out.cpu(), want) and torch.equal(idx.cpu(), want_i)
    g = torch.randn(2, 3, 4, 5)
    gi = torch.empty(0, device=DEV)
    torch.ops.aten.fractional_max_pool2d_backward.grad_input(g.to(DEV), x.to(DEV), [2, 2], [4, 5], idx,
                                                             grad_input=gi)
    assert torch.equal(gi.cpu(), torch.ops.aten.fractional_max_pool2d_backward(g, x, [2, 2], [4, 5], want_i))
    v = torch.randn(2, 3, 5, 9, 11)
    s3 = torch.rand(2, 3, 3)
    out, idx = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.ops.aten.fractional_max_pool3d.output(v.to(DEV), [2, 2, 2], [3, 4, 5], s3.to(DEV), output=out, indices=idx)
    want, want_i = torch.ops.aten.fractional_max_pool3d(v, [2, 2, 2], [3, 4, 5], s3)
    assert torch.equal(out.cpu(), want) and torch.equal(idx.cpu(), want_i)
    g = torch.randn(2, 3, 3, 4, 5)
    gi = torch.empty(0, device=DEV)
    torch.ops.aten.fractional_max_pool3d_backward.grad_input(g.to(DEV), v.to(DEV), [2, 2, 2], [3, 4, 5], idx,
                                                             grad_input=gi)
    assert torch.equal(gi.cpu(), torch.ops.aten.fractional_max_pool3d_backward(g, v, [2, 2, 2], [3, 4, 5], want_i))


def test_errors_match_cpu():
    x = torch.randn(1, 2, 5, 5)
    s = torch.rand(1, 2, 2)
    for fn in (lambda t, u: torch.ops.aten.fractional_max_pool2d(t, [4, 4], [3, 3], u),  # window too large
               lambda t, u: torch.ops.aten.fractional_max_pool2d(t.long(), [2, 2], [3, 3], u.long()),
               lambda t, u: torch.ops.aten.fractional_max_pool2d(t, [2, 2], [3, 3], u.double())):
        with pytest.raises(Exception) as cpu:
            fn(x, s)
        with pytest.raises((type(cpu.value), NotImplementedError)):
            fn(x.to(DEV), s.to(DEV))
