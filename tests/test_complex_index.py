"""Indexing and data-movement ops of complex tensors (complex_index.cpp and
the complex path of pad.cpp), against PyTorch CPU: each runs the real
kernel on the view_as_real view. Movement copies bits, so those results are
compared exactly (NaNs included); the sums (index_add, scatter_add,
scatter_reduce sum/mean, put/index_put with accumulate) to the CPU's
tolerance. Every call must run natively."""


import pytest
import torch
import torch.nn.functional as F
import torchneuron

from complex_samples import CDTYPES, assert_same, complex_randn
from conftest import no_fallback

DEV = "neuron"


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


def _z(dtype, *shape, seed=0):
    return complex_randn(dtype, *shape, seed=seed, inf_imag=2.5)


def _close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def _d(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def _inputs(dtype):
    """(name, tensor) for a contiguous, a strided, a conj view and a zero-size tensor."""
    return [
        ("plain", _z(dtype, 5, 6)),
        ("strided", _z(dtype, 6, 12)[1:, ::2]),
        ("conj", _z(dtype, 5, 6).conj()),
        ("neg_conj", torch.neg(_z(dtype, 5, 6).conj_physical()).conj()),
    ]


@pytest.mark.parametrize("dtype", CDTYPES)
def test_gathers(dtype):
    """index_select, gather, take, advanced indexing, flip, tril/triu, masked_select."""
    idx = torch.tensor([4, 0, 2, 2])
    gidx = torch.tensor([[0, 4, 1], [3, 3, 0]])
    tidx = torch.tensor([[0, -1, 7], [29, 3, -30]])
    rows, cols = torch.tensor([[0, 4], [2, 2]]), torch.tensor([1, 5])
    mask = torch.rand(5, 6, generator=torch.Generator().manual_seed(3)) > 0.5
    with no_fallback():
        for name, x in _inputs(dtype):
            xd = x.to(DEV)
            assert_same(torch.index_select(xd, 1, idx.to(DEV)), torch.index_select(x, 1, idx))
            assert_same(torch.gather(xd, 0, gidx.to(DEV)), torch.gather(x, 0, gidx))
            assert_same(torch.take(xd, tidx.to(DEV)), torch.take(x, tidx))
            assert_same(xd[rows.to(DEV), cols.to(DEV)], x[rows, cols])
            assert_same(xd[:, cols.to(DEV)], x[:, cols])
            assert_same(xd[mask.to(DEV)], x[mask])
            assert_same(xd[1:, None, [0, 2]], x[1:, None, [0, 2]])
            assert_same(torch.flip(xd, (0, -1)), torch.flip(x, (0, -1)))
            assert_same(torch.tril(xd, -1), torch.tril(x, -1))
            assert_same(torch.triu(xd, 2), torch.triu(x, 2))
            assert_same(torch.masked_select(xd, mask.to(DEV)), torch.masked_select(x, mask))
        # batched, 0-d and zero-size
        b = _z(dtype, 2, 3, 4)
        assert_same(torch.triu(b.to(DEV)), torch.triu(b))
        assert_same(torch.flip(b.to(DEV), (1,)), torch.flip(b, (1,)))
        s = torch.tensor(1 - 2j, dtype=dtype)
        assert_same(torch.index_select(s.to(DEV), 0, torch.tensor([0], device=DEV)), torch.index_select(s, 0, torch.tensor([0])))
        assert_same(torch.gather(s.to(DEV), 0, torch.tensor(0, device=DEV)), torch.gather(s, 0, torch.tensor(0)))
        assert_same(torch.take(s.to(DEV), torch.tensor([0, 0], device=DEV)), torch.take(s, torch.tensor([0, 0])))
        assert_same(torch.flip(s.to(DEV), ()), torch.flip(s, ()))
        e = _z(dtype, 0, 4)
        assert_same(torch.index_select(e.to(DEV), 1, idx[1:3].to(DEV)), torch.index_select(e, 1, idx[1:3]))
        assert_same(torch.tril(e.to(DEV)), torch.tril(e))
        assert_same(torch.take(e.to(DEV), torch.tensor([], dtype=torch.long, device=DEV)), torch.take(e, torch.tensor([], dtype=torch.long)))
        # out= and in place
        x = _z(dtype, 5, 6)
        outs = [torch.empty(0, dtype=dtype, device=DEV) for _ in range(5)]
        torch.index_select(x.to(DEV), 0, idx.to(DEV), out=outs[0])
        torch.gather(x.to(DEV), 1, gidx.to(DEV), out=outs[1])
        torch.take(x.to(DEV), tidx.to(DEV), out=outs[2])
        torch.tril(x.to(DEV), 1, out=outs[3])
        torch.index_select(x.to(DEV), 0, idx.to(DEV), out=outs[4])
        assert_same(outs[0], torch.index_select(x, 0, idx))
        assert_same(outs[1], torch.gather(x, 1, gidx))
        assert_same(outs[2], torch.take(x, tidx))
        assert_same(outs[3], torch.tril(x, 1))
        t = x.to(DEV)
        t.triu_(-1)
        assert_same(t, x.triu(-1))
        t = x.t().to(DEV).t()  # a strided in-place target
        t.tril_()
        assert_same(t, x.tril())


@pytest.mark.parametrize("dtype", CDTYPES)
def test_scatters(dtype):
    """scatter (src, value, reduce add), scatter_add, scatter_reduce sum/mean, index_copy,
    index_add, index_fill, put, index_put, masked_scatter: functional, in place and out=."""
    x = _z(dtype, 5, 6)
    src = _z(dtype, 3, 7, seed=4)
    sidx = torch.tensor([[0, 4, 1, 2], [3, 3, 0, 1]])  # repeats: sums accumulate
    perm = torch.tensor([[4, 0, 2, 1], [0, 1, 3, 4]])  # no repeats per column: assignment is exact
    iidx = torch.tensor([4, 0, 2])
    isrc = _z(dtype, 5, 3, seed=5)
    pidx, psrc = torch.tensor([[0, -1], [7, 12]]), _z(dtype, 2, 2, seed=6)
    value = complex(0.5, -3.0)
    with no_fallback():
        for name, base in _inputs(dtype) + [("strided_t", _z(dtype, 6, 5).t())]:
            b = base.to(DEV)
            assert_same(torch.scatter(b, 0, perm.to(DEV), src.to(DEV)), torch.scatter(base, 0, perm, src))
            assert_same(torch.scatter(b, 1, perm.to(DEV), value), torch.scatter(base, 1, perm, value))
            _close(torch.scatter(b, 0, sidx.to(DEV), src.to(DEV), reduce="add"), torch.scatter(base, 0, sidx, src, reduce="add"))
            _close(torch.scatter_add(b, 0, sidx.to(DEV), src.to(DEV)), torch.scatter_add(base, 0, sidx, src))
            assert_same(torch.gather(b, 1, perm.int().to(DEV)), torch.gather(base, 1, perm.int()))  # int32 indices
            _close(torch.scatter_add(b, 0, sidx.int().to(DEV), src.to(DEV)), torch.scatter_add(base, 0, sidx.int(), src))
            for reduce in ("sum", "mean"):
                # mean: finite values only (the CPU divides by a complex count, which makes an
                # infinite part's partner NaN; neuron divides each part: docs/conformance.md)
                s, v = (base, src) if reduce == "sum" else (base.nan_to_num(0, 1, -1), src.nan_to_num(0, 1, -1))
                for include_self in (True, False):
                    _close(torch.scatter_reduce(s.to(DEV), 1, sidx.to(DEV), v.to(DEV), reduce, include_self=include_self),
                           torch.scatter_reduce(s, 1, sidx, v, reduce, include_self=include_self))
            assert_same(torch.index_copy(b, 1, iidx.to(DEV), isrc.to(DEV)), torch.index_copy(base, 1, iidx, isrc))
            _close(torch.index_add(b, 1, torch.tensor([4, 0, 4], device=DEV), isrc.to(DEV), alpha=2),
                   torch.index_add(base, 1, torch.tensor([4, 0, 4]), isrc, alpha=2))
            assert_same(b.index_fill(1, iidx.to(DEV), value), base.index_fill(1, iidx, value))
            assert_same(b.index_fill(0, iidx[:2].to(DEV), torch.tensor(value, dtype=dtype, device=DEV)),
                  base.index_fill(0, iidx[:2], torch.tensor(value, dtype=dtype)))
            for acc in (False, True):
                t, w = b.clone(), base.clone()
                _close(t.put_(pidx.to(DEV), psrc.to(DEV), accumulate=acc), w.put_(pidx, psrc, accumulate=acc))
            rows, cols = torch.tensor([0, 3, 3]), torch.tensor([1, 5, 5])
            t, w = b.clone(), base.clone()
            t[rows.to(DEV), cols.to(DEV)] = src[0, :3].to(DEV)
            w[rows, cols] = src[0, :3]
            assert_same(t[0], w[0])
            assert_same(t[3, :5], w[3, :5])
            t, w = b.clone(), base.clone()
            _close(t.index_put_((rows.to(DEV), cols.to(DEV)), src[0, :3].to(DEV), accumulate=True),
                   w.index_put_((rows, cols), src[0, :3], accumulate=True))
            mask = torch.rand(5, 6, generator=torch.Generator().manual_seed(7)) > 0.5
            t, w = b.clone(), base.clone()
            t[mask.to(DEV)] = value
            w[mask] = value
            assert_same(t, w)
            assert_same(b.masked_scatter(mask.to(DEV), _z(dtype, 30, seed=8).to(DEV)), base.masked_scatter(mask, _z(dtype, 30, seed=8)))
            # functional masked_fill broadcasts self with a larger mask
            assert_same(b[0].masked_fill(mask.to(DEV), value), base[0].masked_fill(mask, value))
        # in place on a strided target, out=, 0-d and zero-size
        t, w = _z(dtype, 6, 5).t().to(DEV), _z(dtype, 6, 5).t()
        t.scatter_add_(0, sidx.to(DEV), src.to(DEV))
        w.scatter_add_(0, sidx, src)
        _close(t, w)
        t.index_copy_(1, iidx.to(DEV), isrc.to(DEV))
        w.index_copy_(1, iidx, isrc)
        _close(t, w)
        t.put_(pidx.to(DEV), psrc.to(DEV))
        w.put_(pidx, psrc)
        _close(t, w)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.scatter(x.to(DEV), 0, perm.to(DEV), src.to(DEV), out=out)
        assert_same(out, torch.scatter(x, 0, perm, src))
        torch.index_add(x.to(DEV), 0, iidx.to(DEV), _z(dtype, 3, 6).to(DEV), out=out)
        _close(out, torch.index_add(x, 0, iidx, _z(dtype, 3, 6)))
        s = torch.tensor(1 + 1j, dtype=dtype)
        assert_same(torch.scatter(s.to(DEV), 0, torch.tensor(0, device=DEV), torch.tensor(2j, dtype=dtype, device=DEV)),
              torch.scatter(s, 0, torch.tensor(0), torch.tensor(2j, dtype=dtype)))
        assert_same(s.to(DEV).index_fill(0, torch.tensor([0], device=DEV), value), s.index_fill(0, torch.tensor([0]), value))
        e = _z(dtype, 0, 6)
        assert_same(torch.scatter_add(e.to(DEV), 0, torch.empty(0, 6, dtype=torch.long, device=DEV), e.to(DEV)),
              torch.scatter_add(e, 0, torch.empty(0, 6, dtype=torch.long), e))
        assert_same(torch.index_copy(x.to(DEV), 0, torch.tensor([], dtype=torch.long, device=DEV), e.to(DEV)),
              torch.index_copy(x, 0, torch.tensor([], dtype=torch.long), e))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_pad(dtype):
    """reflect / replicate / circular / constant padding (a complex value too) and the backward."""
    with no_fallback():
        for x in (_z(dtype, 2, 3, 5), _z(dtype, 2, 3, 10)[..., ::2], _z(dtype, 2, 3, 5).conj()):
            for mode in ("reflect", "replicate", "circular"):
                assert_same(F.pad(x.to(DEV), (2, 1), mode=mode), F.pad(x, (2, 1), mode=mode))
            assert_same(F.pad(x.to(DEV), (1, 2, 0, 1)), F.pad(x, (1, 2, 0, 1)))
            assert_same(F.pad(x.to(DEV), (1, -2), value=2.5), F.pad(x, (1, -2), value=2.5))
        x4 = _z(dtype, 1, 2, 4, 5)
        for mode in ("reflect", "replicate", "circular"):
            assert_same(F.pad(x4.to(DEV), (1, 2, 2, 1), mode=mode), F.pad(x4, (1, 2, 2, 1), mode=mode))
        x5 = _z(dtype, 1, 1, 3, 3, 4)
        for mode in ("reflect", "replicate"):
            assert_same(F.pad(x5.to(DEV), (1, 1, 1, 2, 2, 0), mode=mode), F.pad(x5, (1, 1, 1, 2, 2, 0), mode=mode))
        assert_same(torch.constant_pad_nd(x4.to(DEV), (1, 1), value=1 - 2j), torch.constant_pad_nd(x4, (1, 1), value=1 - 2j))
        for mode in ("reflect", "replicate"):
            a = _z(dtype, 2, 3, 5).requires_grad_()
            ad = a.detach().to(DEV).requires_grad_()
            g = _z(dtype, 2, 3, 8, seed=9)
            F.pad(a, (2, 1), mode=mode).backward(g)
            F.pad(ad, (2, 1), mode=mode).backward(g.to(DEV))
            _close(ad.grad, a.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_backward(dtype):
    """Complex autograd through the gathers and scatters: the backward formulas run the
    same ops (index_select's is index_add, gather's scatter_add, index's index_put)."""
    x = torch.randn(5, 6, dtype=dtype)
    src = torch.randn(2, 6, dtype=dtype)
    idx = torch.tensor([4, 0, 4])
    gidx = torch.tensor([[0, 4, 1], [3, 3, 0]])

    def run(x, src, dev):
        x = x.detach().to(dev).requires_grad_()
        src = src.detach().to(dev).requires_grad_()
        i, g = idx.to(dev), gidx.to(dev)
        y = (torch.index_select(x, 0, i).sum(0) * 2
             + torch.gather(x, 0, g).sum() + torch.take(x, g).sum()
             + x[g, 1].sum() + torch.flip(x, (1,)).tril()[2]
             + torch.index_add(x, 0, i[:2], src)[4] + torch.scatter(x, 0, g[:, :2], src[:, :2])[3, 0])
        y = (y * y.conj()).real.sum() + y.imag.sum()
        y.backward()
        return x.grad, src.grad

    want = run(x, src, "cpu")
    with no_fallback():
        got = run(x, src, DEV)
    for g, w in zip(got, want):
        _close(g, w)


def test_errors_and_refusals():
    """Calls the real view cannot serve keep the CPU's behaviour (through the fallback)."""
    x = _z(torch.complex64, 4, 4)
    with pytest.raises(RuntimeError):
        torch.scatter_reduce(x.to(DEV), 0, torch.tensor([[0]], device=DEV), x[:1, :1].to(DEV), "amax")
    with pytest.raises(IndexError):
        torch.index_select(x.to(DEV), 0, torch.tensor([[0]], device=DEV))
    with pytest.raises(RuntimeError):
        torch.gather(x.to(DEV), 0, torch.tensor([0, 1], device=DEV))
    # a complex alpha multiplies the source first
    y = torch.randn(4, 4, dtype=torch.complex64)
    want = torch.index_add(y, 0, torch.tensor([1]), y[:1], alpha=2 - 1j)
    with no_fallback():
        got = torch.index_add(y.to(DEV), 0, torch.tensor([1], device=DEV), y[:1].to(DEV), alpha=2 - 1j)
    _close(got, want)


@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_out_of_range_index_is_an_index_error_naming_the_op(dtype):
    """A bad index found by the kernel on the real view or the int64 view is
    the same IndexError as for a real tensor, at the call or the next sync."""
    x = _z(dtype, 4, 5).to(DEV)
    bad = torch.tensor([9], device=DEV)
    cases = {
        "index_select": lambda: x.index_select(1, bad),
        "gather": lambda: x.gather(1, bad.view(1, 1).expand(4, 1)),
        "index_copy": lambda: x.clone().index_copy_(1, bad, x[:, :1]),
    }
    for name, op in cases.items():
        with pytest.raises(IndexError, match=f"^{name}: index 9 is out of bounds"):
            op()
            torch.neuron.synchronize()
        torch.neuron.clear_error()
