"""bucketize, repeat_interleave with a repeats tensor, channel_shuffle,
index_reduce, max_unpool2d/3d, rrelu_with_noise (composed of native kernels
in the shim) and prelu (a native pointwise op and its two-output gradient)
against PyTorch CPU, with the CPU's errors. No op may fall back.
"""

import pytest
import torch
import torch.nn.functional as F

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
@pytest.mark.parametrize("right", [False, True])
def test_bucketize(dtype, right):
    boundaries = torch.tensor([-3, 0, 2, 2, 5, 9]).to(dtype)
    x = torch.tensor([[-4, -3, 0, 1], [2, 3, 9, 11]]).to(dtype)
    for out_int32 in (False, True):
        expected = torch.bucketize(x, boundaries, out_int32=out_int32, right=right)
        got = torch.bucketize(x.to(DEV), boundaries.to(DEV), out_int32=out_int32, right=right)
        assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)
    t = x.t()  # non-contiguous values
    assert torch.equal(torch.bucketize(t.to(DEV), boundaries.to(DEV), right=right).cpu(),
                       torch.bucketize(t, boundaries, right=right))
    out = torch.empty(2, 4, dtype=torch.int64, device=DEV)
    torch.bucketize(x.to(DEV), boundaries.to(DEV), right=right, out=out)
    assert torch.equal(out.cpu(), torch.bucketize(x, boundaries, right=right))
    scalar = torch.bucketize(2, boundaries.to(DEV), right=right)
    assert torch.equal(scalar.cpu(), torch.bucketize(2, boundaries, right=right))
    assert torch.bucketize(x[:0].to(DEV), boundaries.to(DEV)).shape == (0, 4)


def test_bucketize_errors():
    same_error(torch.bucketize, torch.ones(3), torch.ones(2, 2))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_tensor(dtype):
    repeats = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)
    expected = torch.repeat_interleave(repeats)
    got = torch.repeat_interleave(repeats.to(DEV))
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)
    got = torch.repeat_interleave(repeats.to(DEV), output_size=6)
    assert torch.equal(got.cpu(), expected)
    values = torch.randn(5, 3)
    for dim in (0, None):
        r = repeats if dim == 0 else torch.tensor([1] * 15, dtype=dtype)
        assert torch.equal(torch.repeat_interleave(values.to(DEV), r.to(DEV), dim=dim).cpu(),
                           torch.repeat_interleave(values, r, dim=dim))
    empty = torch.repeat_interleave(torch.tensor([], dtype=dtype, device=DEV))
    assert empty.shape == (0,) and empty.dtype == dtype
    zeros = torch.repeat_interleave(torch.zeros(3, dtype=dtype, device=DEV))
    assert zeros.shape == (0,)


def test_repeat_interleave_errors():
    same_error(torch.repeat_interleave, torch.tensor([1, -1, 2]))
    same_error(torch.repeat_interleave, torch.ones(2, 2, dtype=torch.int64))
    same_error(torch.repeat_interleave, torch.tensor([1.0, 2.0]))
    same_error(lambda r: torch.repeat_interleave(r, output_size=5), torch.tensor([1, 2]))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 3), 3), ((3, 8, 5), 4), ((1, 4, 2, 3, 2), 2), ((2, 6, 0, 3), 2)])
def test_channel_shuffle(shape, groups):
    x = torch.randn(shape)
    assert torch.equal(F.channel_shuffle(x.to(DEV), groups).cpu(), F.channel_shuffle(x, groups))
    if len(shape) == 4 and x.numel():
        cl = x.to(memory_format=torch.channels_last)
        got, expected = F.channel_shuffle(cl.to(DEV), groups), F.channel_shuffle(cl, groups)
        assert got.stride() == expected.stride() and torch.equal(got.cpu(), expected)
    bf = x.to(torch.bfloat16)
    assert torch.equal(F.channel_shuffle(bf.to(DEV), groups).cpu(), F.channel_shuffle(bf, groups))


def test_channel_shuffle_errors():
    same_error(F.channel_shuffle, torch.ones(2, 6), 3)
    same_error(F.channel_shuffle, torch.ones(2, 6, 2), 4)
    same_error(F.channel_shuffle, torch.ones(2, 6, 2), 0)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
def test_index_reduce(reduce, include_self, dtype):
    torch.manual_seed(0)
    make = (lambda *s: torch.randint(-4, 5, s).to(dtype)) if not dtype.is_floating_point else \
        (lambda *s: torch.randn(s).to(dtype))
    base, source = make(4, 3, 2), make(4, 5, 2)
    index = torch.tensor([0, 2, 0, 1, 0])
    for dim, src, idx in ((1, source, index), (0, make(3, 3, 2), torch.tensor([3, 3, 0], dtype=torch.int32))):
        expected = base.index_reduce(dim, idx, src, reduce, include_self=include_self)
        got = base.to(DEV).index_reduce(dim, idx.to(DEV), src.to(DEV), reduce, include_self=include_self)
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=1e-6)
    inplace = base.transpose(0, 2).contiguous().transpose(0, 2).to(DEV)  # non-contiguous destination
    inplace.index_reduce_(1, index.to(DEV), source.to(DEV), reduce, include_self=include_self)
    torch.testing.assert_close(inplace.cpu(), base.index_reduce(1, index, source, reduce, include_self=include_self),
                               rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=1e-6)


def test_index_reduce_errors():
    base, src = torch.zeros(3, 2), torch.ones(2, 2)
    same_error(lambda b, i, s: b.index_reduce(0, i, s, "sum"), base, torch.tensor([0, 1]), src)
    same_error(lambda b, i, s: b.index_reduce(0, i, s, "amax"), base, torch.tensor([0.0, 1.0]), src)
    same_error(lambda b, i, s: b.index_reduce(0, i, s, "amax"), base, torch.tensor([0, 1, 2]), src)
    same_error(lambda b, i, s: b.index_reduce(0, i, s, "amax"), base, torch.tensor([0, 1]), src.double())
    same_error(lambda b, i, s: b.index_reduce(0, i, s, "amax"), base, torch.tensor([0, 1]), torch.ones(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_prelu_forward_and_backward(dtype):
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype in (torch.bfloat16, torch.float16) else {}
    for shape, weight in (((4, 3, 5), torch.tensor([0.25, -0.5, 0.1])), ((6, 7), torch.tensor([0.3])),
                          ((2, 3, 4, 4), torch.tensor([0.2, 0.0, 1.5])), ((5,), torch.tensor([0.4]))):
        x = torch.randn(shape).to(dtype)
        x.view(-1)[0] = float("nan")
        w = weight.to(dtype)
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        xn, wn = x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()
        yc, yn = F.prelu(xc, wc), F.prelu(xn, wn)
        torch.testing.assert_close(yn.cpu(), yc.detach(), equal_nan=True, **tol)
        g = torch.randn(shape).to(dtype)
        yc.backward(g)
        yn.backward(g.to(DEV))
        torch.testing.assert_close(xn.grad.cpu(), xc.grad, equal_nan=True, **tol)
        torch.testing.assert_close(wn.grad.cpu(), wc.grad, equal_nan=True, **tol)


@pytest.mark.parametrize("batch", [(2,), ()])
def test_max_unpool2d_and_gradient(batch):
    x = torch.randn(*batch, 3, 6, 8)
    pooled, indices = F.max_pool2d(x, 2, return_indices=True)
    expected = F.max_unpool2d(pooled, indices, 2, output_size=(7, 9))
    got = F.max_unpool2d(pooled.to(DEV), indices.to(DEV), 2, output_size=(7, 9))
    assert torch.equal(got.cpu(), expected)
    p = pooled.clone().requires_grad_()
    pn = pooled.to(DEV).requires_grad_()
    g = torch.randn(expected.shape)
    F.max_unpool2d(p, indices, 2).backward(g[..., :6, :8])
    F.max_unpool2d(pn, indices.to(DEV), 2).backward(g[..., :6, :8].to(DEV))
    assert torch.equal(pn.grad.cpu(), p.grad)
    if batch:
        cl = pooled.to(memory_format=torch.channels_last)
        got = F.max_unpool2d(cl.to(DEV), indices.to(DEV), 2)
        ref = F.max_unpool2d(cl, indices, 2)
        assert got.stride() == ref.stride() and torch.equal(got.cpu(), ref)


def test_max_unpool3d():
    x = torch.randn(2, 3, 4, 6, 4, dtype=torch.float64)
    pooled, indices = F.max_pool3d(x, 2, return_indices=True)
    expected = F.max_unpool3d(pooled, indices, 2)
    assert torch.equal(F.max_unpool3d(pooled.to(DEV), indices.to(DEV), 2).cpu(), expected)
    assert torch.equal(F.max_unpool3d(pooled[0].to(DEV), indices[0].to(DEV), 2).cpu(), expected[0])


def test_max_unpool_errors():
    pooled, indices = F.max_pool2d(torch.randn(1, 2, 4, 4), 2, return_indices=True)
    unpool2d = torch.ops.aten.max_unpool2d
    same_error(lambda y, i: unpool2d(y, i, [4, 4]), pooled, indices.int())
    same_error(lambda y, i: unpool2d(y, i, [4, 4]), pooled, indices[:, :1])
    same_error(lambda y, i: unpool2d(y, i, [4]), pooled, indices)
    same_error(lambda y, i: unpool2d(y, i, [4, 4]), pooled[0, 0], indices[0, 0])
    p3, i3 = F.max_pool3d(torch.randn(1, 2, 4, 4, 4), 2, return_indices=True)
    unpool3d = torch.ops.aten.max_unpool3d
    same_error(lambda y, i: unpool3d(y, i, [4, 4], [2, 2, 2], [0, 0, 0]), p3, i3)
    same_error(lambda y, i: unpool3d(y, i, [4, 4, 4], [2, 2], [0, 0, 0]), p3, i3)
    same_error(lambda y, i: unpool3d(y, i, [4, 4, 4], [0, 2, 2], [0, 0, 0]), p3, i3)
    same_error(lambda y, i: unpool3d(y, i, [4, 4, 4], [2, 2, 2], [0, 0, 0]), p3[0, 0], i3[0, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rrelu_with_noise(dtype):
    x = torch.randn(64, 33).to(dtype).to(DEV)
    x[0, 0] = 0.0
    noise = torch.empty_like(x)
    out = torch.ops.aten.rrelu_with_noise(x, noise, 0.1, 0.3, True)
    xc, nc, oc = x.cpu().double(), noise.cpu().double(), out.cpu().double()
    assert torch.equal(nc == 1, xc > 0)
    negative = xc <= 0
    assert bool(((nc[negative] >= 0.1) & (nc[negative] <= 0.3)).all())
    assert nc[negative].std() > 0.03  # really drawn, not one value
    torch.testing.assert_close(oc, (xc * nc).to(dtype).double())
    g1, g2 = torch.Generator(DEV).manual_seed(5), torch.Generator(DEV).manual_seed(5)
    a = torch.ops.aten.rrelu_with_noise(x, torch.empty_like(x), 0.1, 0.3, True, g1)
    b = torch.ops.aten.rrelu_with_noise(x, torch.empty_like(x), 0.1, 0.3, True, g2)
    assert torch.equal(a.cpu(), b.cpu())
    kept = torch.full_like(x, 7.0)
    evaluated = torch.ops.aten.rrelu_with_noise(x, kept, 0.1, 0.3, False)
    torch.testing.assert_close(evaluated.cpu(), F.leaky_relu(x.cpu(), 0.2))
    assert bool((kept.cpu() == 7).all())
    inplace = x.clone()
    n2 = torch.empty_like(x)
    torch.ops.aten.rrelu_with_noise_(inplace, n2, 0.1, 0.3, True)
    torch.testing.assert_close(inplace.cpu(), (x.cpu() * n2.cpu()))
    leaf = x.clone().requires_grad_()
    F.rrelu(leaf, training=True).sum().backward()
    assert bool(((leaf.grad.cpu() == 1) == (x.cpu() > 0)).all())


def test_rrelu_errors():
    op = torch.ops.aten.rrelu_with_noise
    same_error(lambda a, n: op(a, n, 0.1, 0.3, True), torch.randn(3, 4), torch.empty(3, 3))
    same_error(lambda a, n: op(a, n, 0.5, 0.3, True), torch.randn(3, 4), torch.empty(3, 4))
    same_error(lambda a, n: op(a, n, 0.1, 0.3, True), torch.ones(3, 4, dtype=torch.int32),
               torch.ones(3, 4, dtype=torch.int32))
