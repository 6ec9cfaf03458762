"""aminmax, nansum and trace (each one native reduction pass), nanmean
(PyTorch's composite of nansum) and logcumsumexp (a native scan) on neuron
against PyTorch CPU: whole tensor and per dim, keepdim, out=, non-contiguous,
broadcast, zero-size and 0-d inputs, NaN and infinities, every dtype the CPU
kernels take; min/max are compared exactly. No op may fall back to the CPU.
"""

import pytest
import torch

import torchneuron


DEV = "neuron"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


pytestmark = pytest.mark.usefixtures("native_only")


def values(shape, dtype, nan=True):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return torch.randint(max(info.min, -100), min(info.max, 100), shape).to(dtype)
    x = torch.randn(shape, dtype=torch.float64) * 10
    if nan and x.numel() > 3:
        x.view(-1)[[0, 2]] = float("nan")
        x.view(-1)[1] = float("inf")
    return x.to(dtype)


def inputs(dtype, nan=True):
    yield values((4, 7), dtype, nan)
    yield values((7, 4), dtype, nan).t()
    yield values((3, 5, 2), dtype, nan)
    yield values((), dtype, nan)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool], ids=str)
def test_aminmax_exact(dtype):
    for x in inputs(dtype, nan=False):
        for kwargs in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"keepdim": True}):
            if x.dim() == 0 and "dim" in kwargs:
                kwargs = {"dim": 0}
            got, want = torch.aminmax(x.to(DEV), **kwargs), torch.aminmax(x, **kwargs)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and torch.equal(g.cpu(), w)
    if dtype.is_floating_point:  # NaN wins
        x = values((5, 6), dtype)
        for g, w in zip(torch.aminmax(x.to(DEV), dim=1), torch.aminmax(x, dim=1)):
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def test_aminmax_out_and_errors():
    x = values((4, 6), torch.float32, nan=False)
    mn, mx = torch.empty(0, device=DEV), torch.empty(0, device=DEV)
    torch.aminmax(x.to(DEV), dim=1, out=(mn, mx))
    want = torch.aminmax(x, dim=1)
    assert torch.equal(mn.cpu(), want.min) and torch.equal(mx.cpu(), want.max)
    for call in (lambda d: torch.aminmax(torch.ones(0, 3, device=d)),
                 lambda d: torch.aminmax(torch.ones(0, 3, device=d), dim=0)):
        with pytest.raises((RuntimeError, IndexError)) as cpu:
            call("cpu")
        with pytest.raises(type(cpu.value)) as got:
            call(DEV)
        assert str(got.value).split("\n")[0] == str(cpu.value).split("\n")[0]


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool], ids=str)
def test_nansum_nanmean(dtype):
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
    for x in inputs(dtype):
        for kwargs in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}):
            if x.dim() == 0 and "dim" in kwargs:
                kwargs = {"dim": 0}
            got, want = torch.nansum(x.to(DEV), **kwargs), torch.nansum(x, **kwargs)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
            if dtype.is_floating_point:
                torch.testing.assert_close(torch.nanmean(x.to(DEV), **kwargs).cpu(), torch.nanmean(x, **kwargs),
                                           rtol=tol, atol=tol, equal_nan=True)
    x = values((3, 4), dtype)
    if dtype.is_floating_point or dtype == torch.int64:
        out = torch.empty(0, dtype=torch.float64 if dtype.is_floating_point else dtype, device=DEV)
        torch.nansum(x.to(DEV), 1, dtype=out.dtype, out=out)
        torch.testing.assert_close(out.cpu(), torch.nansum(x, 1, dtype=out.dtype), rtol=tol, atol=tol)
    if dtype.is_floating_point:  # NaN-ignoring sums give the gradient where x is not NaN
        xs = x.clone().requires_grad_()
        xd = x.to(DEV).requires_grad_()
        torch.nansum(xs).backward()
        torch.nansum(xd).backward()
        torch.testing.assert_close(xd.grad.cpu(), xs.grad)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_trace(dtype):
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
    for shape in ((5, 5), (3, 7), (8, 2), (0, 4)):
        x = values(shape, dtype, nan=False)
        for t in (x, x.t()):
            got, want = torch.trace(t.to(DEV)), torch.trace(t)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
    with pytest.raises(RuntimeError, match="expected a matrix"):
        torch.trace(torch.ones(3, device=DEV))
    with pytest.raises(NotImplementedError):
        torch.trace(torch.ones(2, 2, dtype=torch.bool, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int16, torch.float64], ids=str)
def test_aminmax_paths(dtype):
    # row runs longer than the lanes (NaN in the lanes, in the tail, or
    # none), column blocks, a broadcast input and a sliced one
    x = values((6, 203), dtype, nan=False)
    if dtype.is_floating_point:
        x[1, 5] = float("nan")
        x[2, 202] = float("nan")
        x[3, 7] = float("-inf")
    for t in (x, x.t(), x[:, ::4], values((1, 50), dtype, nan=False).expand(9, 50)):
        for kwargs in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}):
            got, want = torch.aminmax(t.to(DEV), **kwargs), torch.aminmax(t, **kwargs)
            for g, w in zip(got, want):
                torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def test_single_pass(op_tracking):
    x = torch.randn(5, 6, device=DEV)
    torch.aminmax(x, dim=1)
    torch.nansum(x)
    torch.trace(x[:, :5])
    ran = torchneuron.get_executed_ops()
    assert not {"aten::amin", "aten::amax", "aten::isnan", "aten::where.self", "aten::sum"} & set(ran), ran


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_nansum_edges(dtype):
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
    nan = float("nan")
    x = torch.tensor([[nan, nan, nan], [1.5, nan, -2.0], [0.25, 0.5, 1.0]], dtype=dtype)
    for t in (x, x.t(), x[:, ::2], torch.tensor([[nan, 3.0]], dtype=dtype).expand(4, 2)):
        for kwargs in ({}, {"dim": 0}, {"dim": 1}, {"dim": 1, "dtype": torch.float64}):
            torch.testing.assert_close(torch.nansum(t.to(DEV), **kwargs).cpu(), torch.nansum(t, **kwargs),
                                       rtol=tol, atol=tol)
    for shape, dim in (((0, 3), 0), ((0, 3), 1), ((4, 0), 1)):
        e = torch.ones(shape, dtype=dtype)
        got, want = torch.nansum(e.to(DEV), dim), torch.nansum(e, dim)
        assert got.shape == want.shape and torch.equal(got.cpu(), want)
    long = torch.randn(5000, dtype=torch.float64)
    long[::7] = nan
    got = torch.nansum(long.to(dtype).to(DEV))
    torch.testing.assert_close(got.cpu(), torch.nansum(long.to(dtype)), rtol=tol, atol=tol * 50)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_logcumsumexp(dtype):
    tol = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 1e-2)
    for x in inputs(dtype):
        for dim in range(max(x.dim(), 1)):
            torch.testing.assert_close(torch.logcumsumexp(x.to(DEV), dim).cpu(), torch.logcumsumexp(x, dim),
                                       rtol=tol, atol=tol, equal_nan=True)
    inf = float("inf")
    x = torch.tensor([[-inf, -inf, 1.0, inf, inf, 2.0], [inf, -inf, float("nan"), 0.0, -inf, 3.0]], dtype=dtype)
    torch.testing.assert_close(torch.logcumsumexp(x.to(DEV), 1).cpu(), torch.logcumsumexp(x, 1), rtol=tol, atol=tol,
                               equal_nan=True)
    big = torch.randn(64, 300, dtype=dtype)  # the tiled path: scan along dim 0 of a wide matrix
    torch.testing.assert_close(torch.logcumsumexp(big.to(DEV), 0).cpu(), torch.logcumsumexp(big, 0), rtol=tol,
                               atol=tol)
    xs = big.clone().requires_grad_()
    xd = big.to(DEV).requires_grad_()
    torch.logcumsumexp(xs, 1).sum().backward()
    torch.logcumsumexp(xd, 1).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xs.grad, rtol=tol * 10, atol=tol * 10)
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.logcumsumexp(big.to(DEV), 1, out=out)
    torch.testing.assert_close(out.cpu(), torch.logcumsumexp(big, 1), rtol=tol, atol=tol)
    with pytest.raises(NotImplementedError):
        torch.logcumsumexp(torch.ones(3, dtype=torch.int64, device=DEV), 0)
