"""The complex GEMM family (complex_gemm.cpp): mm, bmm, mv and addmm,
baddbmm, addbmm, addmv as four real GEMMs on the planes, against PyTorch
CPU, functional, out= and in place, with no fallback."""

import math

import pytest
import torch
import torchneuron  # noqa: F401

from complex_samples import CDTYPES, complex_randn
from conftest import no_fallback

DEV = "neuron"

pytestmark = pytest.mark.usefixtures("op_tracking")


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.complex64 else {"rtol": 1e-11, "atol": 1e-11}


def _strided(x):
    """x's values in a transposed, non-contiguous layout."""
    return x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x.repeat(2)[::2]


# (op, self shape, a shape, b shape)
CASES = {
    "addmm": (torch.addmm, (5, 3), (5, 4), (4, 3)),
    "baddbmm": (torch.baddbmm, (2, 5, 3), (2, 5, 4), (2, 4, 3)),
    "addbmm": (torch.addbmm, (5, 3), (2, 5, 4), (2, 4, 3)),
    "addmv": (torch.addmv, (5,), (5, 4), (4,)),
}

SCALARS = [{}, {"beta": 0.5, "alpha": -2.0}, {"beta": 1 - 2j, "alpha": 0.5 + 1j}, {"beta": 0, "alpha": 1j}]


def _check(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **_tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_add_product_functional(dtype, op):
    fn, s_shape, a_shape, b_shape = CASES[op]
    s, a, b = complex_randn(dtype, *s_shape), complex_randn(dtype, *a_shape, seed=1), complex_randn(dtype, *b_shape, seed=2)
    layouts = {
        "contiguous": (s, a, b),
        "strided": (_strided(s), _strided(a), _strided(b)),
        "conj": (s.conj(), a.conj(), b),
        "neg": (s, torch._neg_view(a), b.conj()),
        "broadcast_self": (s[..., :1], a, b),
        "scalar_self": (s.reshape(-1)[0].clone(), a, b),
    }
    for name, (si, ai, bi) in layouts.items():
        for kw in SCALARS:
            want = fn(si, ai, bi, **kw)
            with no_fallback():
                got = fn(si.to(DEV), ai.to(DEV), bi.to(DEV), **kw)
            _check(got, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_add_product_out_and_in_place(dtype, op):
    fn, s_shape, a_shape, b_shape = CASES[op]
    s, a, b = complex_randn(dtype, *s_shape), complex_randn(dtype, *a_shape, seed=1), complex_randn(dtype, *b_shape, seed=2)
    for kw in SCALARS:
        want = fn(s, a, b, **kw)
        out = torch.empty(0, dtype=dtype, device=DEV)
        inplace = s.to(DEV)
        with no_fallback():
            fn(s.to(DEV), a.to(DEV), b.to(DEV), out=out, **kw)
            getattr(inplace, op + "_")(a.to(DEV), b.to(DEV), **kw)
        _check(out, want, dtype)
        _check(inplace, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_beta_zero_ignores_nan_self(dtype):
    s = torch.full((5, 3), complex(math.nan, math.nan), dtype=dtype)
    a, b = complex_randn(dtype, 5, 4, seed=1), complex_randn(dtype, 4, 3, seed=2)
    with no_fallback():
        got = torch.addmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=0)
    _check(got, torch.addmm(s, a, b, beta=0), dtype)
    assert not got.cpu().isnan().any()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_zero_size(dtype, op):
    fn, s_shape, a_shape, b_shape = CASES[op]
    # an empty result, and an empty inner dimension (the result is beta * self)
    empty_rows = (s_shape[:-2] + (0,) + s_shape[-1:]) if len(s_shape) > 1 else (0,)
    a_rows = a_shape[:-2] + (0,) + a_shape[-1:]
    cases = [(empty_rows, a_rows, b_shape), (s_shape, a_shape[:-1] + (0,), b_shape[:-2] + (0,) + b_shape[-1:]
                                            if len(b_shape) > 1 else (0,))]
    for si, ai, bi in cases:
        s, a, b = complex_randn(dtype, *si), complex_randn(dtype, *ai, seed=1), complex_randn(dtype, *bi, seed=2)
        want = fn(s, a, b, beta=2, alpha=3)
        with no_fallback():
            got = fn(s.to(DEV), a.to(DEV), b.to(DEV), beta=2, alpha=3)
        _check(got, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_products_out_and_aliasing(dtype):
    a, b, v = complex_randn(dtype, 6, 5), complex_randn(dtype, 5, 7, seed=1), complex_randn(dtype, 5, seed=2)
    ba, bb = complex_randn(dtype, 3, 6, 5, seed=3), complex_randn(dtype, 3, 5, 7, seed=4)
    outs = [torch.empty(0, dtype=dtype, device=DEV) for _ in range(3)]
    with no_fallback():
        torch.mm(a.to(DEV), b.to(DEV), out=outs[0])
        torch.bmm(ba.to(DEV), bb.to(DEV), out=outs[1])
        torch.mv(a.to(DEV), v.to(DEV), out=outs[2])
    for got, want in zip(outs, [a @ b, torch.bmm(ba, bb), a @ v]):
        _check(got, want, dtype)
    # self as an operand as well as the result: x.addmm_(x, x)
    x = complex_randn(dtype, 4, 4, seed=5)
    want = x.clone().addmm_(x, x, beta=0.5, alpha=2j)
    xd = x.to(DEV)
    with no_fallback():
        xd.addmm_(xd, xd, beta=0.5, alpha=2j)
    _check(xd, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_addmm_backward(dtype):
    s, a, b = complex_randn(dtype, 5, 3), complex_randn(dtype, 5, 4, seed=1), complex_randn(dtype, 4, 3, seed=2)
    g = complex_randn(dtype, 5, 3, seed=3)
    leaves = [t.clone().requires_grad_() for t in (s, a, b)]
    torch.addmm(*leaves, beta=0.5 - 1j, alpha=2j).backward(g)
    dev = [t.to(DEV).requires_grad_() for t in (s, a, b)]
    with no_fallback():
        torch.addmm(*dev, beta=0.5 - 1j, alpha=2j).backward(g.to(DEV))
    for d, c in zip(dev, leaves):
        _check(d.grad, c.grad, dtype)


def test_errors_match_the_cpu():
    s, a, b = complex_randn(torch.complex64, 5, 3), complex_randn(torch.complex64, 5, 4), complex_randn(torch.complex64, 3, 3)
    for fn in (lambda s, a, b: torch.addmm(s, a, b), lambda s, a, b: torch.addmm(s, a, a.t()),
               lambda s, a, b: torch.addmm(s, a, b.to(torch.complex128)),
               lambda s, a, b: s.addmm_(a, a.t())):
        with pytest.raises(RuntimeError) as cpu:
            fn(s, a, b)
        with pytest.raises(type(cpu.value)):
            fn(s.to(DEV), a.to(DEV), b.to(DEV))
