"""Reductions and products of complex tensors composed from native ops
(complex_reduce.cpp): var/std, the vector norm, trace, any, count_nonzero,
dot/vdot and mv, against PyTorch CPU, with no fallback."""

import pytest
import torch
import torchneuron

from complex_samples import CDTYPES, complex_randn, tol
from conftest import no_fallback

DEV = "neuron"


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


def _layouts(dtype):
    yield "contiguous", complex_randn(dtype, 4, 6)
    yield "transposed", complex_randn(dtype, 6, 4).t()
    yield "sliced", complex_randn(dtype, 8, 12)[::2, 1::2]
    yield "conj", complex_randn(dtype, 4, 6).conj()
    yield "zero_size", complex_randn(dtype, 0, 6)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", ["var", "std", "var_mean", "std_mean"])
def test_var_and_std(dtype, fn):
    for name, x in _layouts(dtype):
        for kwargs in ({}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "correction": 0}):
            if name == "zero_size" and kwargs.get("dim") == 1:
                continue
            want = getattr(torch, fn)(x, **kwargs)
            with no_fallback():
                got = getattr(torch, fn)(x.to(DEV), **kwargs)
            if fn in ("var", "std"):
                got, want = (got,), (want,)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (name, kwargs)
                torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("ord", [2, 1, float("inf"), 0, 3.5])
def test_vector_norm(dtype, ord):
    for name, x in _layouts(dtype):
        for kwargs in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
            try:
                want = torch.linalg.vector_norm(x, ord, **kwargs)
            except RuntimeError as cpu_error:  # inf/-inf over an empty dim: no identity
                with pytest.raises(RuntimeError, match="does not have an identity"):
                    torch.linalg.vector_norm(x.to(DEV), ord, **kwargs)
                assert "identity" in str(cpu_error)
                continue
            with no_fallback():
                got = torch.linalg.vector_norm(x.to(DEV), ord, **kwargs)
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got.cpu(), want, **tol(dtype))
    x = complex_randn(torch.complex64, 5)
    with no_fallback():
        got = torch.linalg.vector_norm(x.to(DEV), dtype=torch.complex128)
    torch.testing.assert_close(got.cpu(), torch.linalg.vector_norm(x, dtype=torch.complex128))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_trace_any_count_nonzero(dtype):
    for name, x in _layouts(dtype):
        x = x.clone()
        if x.numel():
            x[0, 0] = 0
            x[-1, :] = 0
        xd = x.to(DEV)
        with no_fallback():
            got = [torch.trace(xd), xd.any(), torch.count_nonzero(xd), torch.count_nonzero(xd, dim=1),
                   torch.zeros_like(xd).any()]
        want = [torch.trace(x), x.any(), torch.count_nonzero(x), torch.count_nonzero(x, dim=1),
                torch.zeros_like(x).any()]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g.cpu(), w, **({} if not w.is_complex() else tol(dtype)))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_dot_vdot_mv(dtype):
    a, b = complex_randn(dtype, 50), complex_randn(dtype, 100, seed=1)[::2]
    m = complex_randn(dtype, 7, 50, seed=2)
    with no_fallback():
        got = [torch.dot(a.to(DEV), b.to(DEV)), torch.vdot(a.to(DEV), b.to(DEV)),
               torch.dot(a.conj().to(DEV), b.to(DEV)), torch.mv(m.to(DEV), a.to(DEV)),
               torch.mv(m.t().contiguous().t().to(DEV), b.to(DEV)), torch.dot(a[:0].to(DEV), b[:0].to(DEV))]
    want = [torch.dot(a, b), torch.vdot(a, b), torch.dot(a.conj(), b), torch.mv(m, a), torch.mv(m, b),
            torch.dot(a[:0], b[:0])]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, **tol(dtype))


def test_errors_match_the_cpu():
    a = complex_randn(torch.complex64, 4)
    for fn in (lambda t: torch.dot(t, t[:3]), lambda t: torch.dot(t, t.to(torch.complex128)),
               lambda t: torch.trace(t), lambda t: torch.mv(t, t)):
        with pytest.raises(RuntimeError) as cpu:
            fn(a)
        with pytest.raises(type(cpu.value)):
            fn(a.to(DEV))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_norm(dtype):
    for name, x in _layouts(dtype):
        for args, kwargs in (((), {}), ((1,), {"dim": 1}), ((float("inf"),), {"dim": 0, "keepdim": True}),
                             ((3.0,), {"dim": (0, 1)}), ((2,), {"dim": 1, "dtype": torch.complex128})):
            try:
                want = torch.norm(x, *args, **kwargs)
            except RuntimeError:  # an empty dim with no identity
                continue
            with no_fallback():
                got = torch.norm(x.to(DEV), *args, **kwargs)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, args, kwargs)
            torch.testing.assert_close(got.cpu(), want, **tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_logsumexp(dtype):
    big = complex_randn(dtype, 4, 6) * 300  # exp overflows without the shift
    big.view(-1)[0] = complex(-float("inf"), 1.0)
    layouts = list(_layouts(dtype)) + [("large", big), ("zero_dim", complex_randn(dtype, 3)[1].clone())]
    for name, x in layouts:
        for dim, keepdim in ((1, False), ((0, 1), True), (0, False), (-1, True)):
            if x.dim() == 0:
                dim = 0
            if name == "zero_size" and dim == 1:
                continue
            want = torch.logsumexp(x, dim, keepdim)
            with no_fallback():
                got = torch.logsumexp(x.to(DEV), dim, keepdim)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, dim)
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_all_and_any_over_dims(dtype):
    for name, x in _layouts(dtype):
        x = x.clone()
        if x.numel():
            x[0, :] = 0
            x[1, 2] = 0
        xd = x.to(DEV)
        for fn, args in (("all", ()), ("all", (1,)), ("all", (0, True)), ("any", (1,)), ("any", (0, True))):
            if name == "zero_size" and args[:1] == (1,):
                continue
            want = getattr(x, fn)(*args)
            with no_fallback():
                got = getattr(xd, fn)(*args)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, fn, args)
            assert torch.equal(got.cpu(), want), (name, fn, args)
        with no_fallback():
            dims = [torch.all(xd, dim=(0, 1)), torch.any(xd, dim=(0, 1), keepdim=True)]
        for g, w in zip(dims, [torch.all(x, dim=(0, 1)), torch.any(x, dim=(0, 1), keepdim=True)]):
            assert torch.equal(g.cpu(), w)
        if x.numel():  # a 0-d tensor
            with no_fallback():
                got = x[1, 1].to(DEV).all(0)
            assert torch.equal(got.cpu(), x[1, 1].all(0))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_sum_and_mean_of_a_0d_tensor(dtype):
    for z in (complex_randn(dtype, 3)[1].clone(), torch.tensor(complex(-0.0, -0.0), dtype=dtype), complex_randn(dtype, 3)[2].conj()):
        for fn in ("sum", "mean"):
            for kwargs in ({"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": []}, {}):
                want = getattr(torch, fn)(z, **kwargs)
                with no_fallback():
                    got = getattr(torch, fn)(z.to(DEV), **kwargs)
                assert got.dtype == want.dtype and got.shape == want.shape, (fn, kwargs)
                torch.testing.assert_close(got.cpu(), want, **tol(dtype))
    with pytest.raises(IndexError):
        torch.sum(complex_randn(dtype, 3)[0].to(DEV), dim=1)
