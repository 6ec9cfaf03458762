"""The out= and in-place forms of complex ops, natively (no CPU fallback),
against PyTorch CPU: the shared in-place broadcast check
(inplace_broadcast.h) with the CPU's error and message; neg, abs, eq/ne
(complex_neg_abs_compare.cpp); addcmul/addcdiv (complex_addc.cpp);
logaddexp (complex_math_logaddexp.cpp); addbmm_ widening self and the other
products' in-place error (complex_gemm.cpp); the reductions' out= forms
(complex_out.h). Both complex dtypes; contiguous, strided, conjugate and
negative bits, broadcast, zero-size and 0-d inputs."""

import math

import pytest
import torch
import torchneuron  # noqa: F401

from complex_samples import CDTYPES, assert_close_to_cpu, complex_randn, layouts
from conftest import no_fallback

DEV = "neuron"

pytestmark = pytest.mark.usefixtures("op_tracking")


def _d(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def _like(x, seed):
    """Other samples of x's shape and dtype (0-d and zero-size too)."""
    return complex_randn(x.dtype, x.numel() + 1, seed=seed)[: x.numel()].reshape(x.shape)


def _raises_like_cpu(fn, *args, **kwargs):
    """fn raises on the device what it raises on the CPU, with no fallback."""
    with pytest.raises(Exception) as cpu:
        fn(*args, **kwargs)
    with no_fallback(), pytest.raises(type(cpu.value)) as dev:
        fn(*[_d(a) for a in args], **{k: _d(v) for k, v in kwargs.items()})
    assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


@pytest.mark.parametrize("dtype", CDTYPES)
def test_in_place_broadcast_error_is_the_cpus(dtype):
    small, big = complex_randn(dtype, 5, 1), complex_randn(dtype, 5, 5, seed=1)
    mask = torch.ones(5, 5, dtype=torch.bool)
    empty, empty_big = complex_randn(dtype, 0, 1, 3), complex_randn(dtype, 0, 10, 3)
    for name in ("add_", "sub_", "mul_", "div_", "pow_", "logical_and_", "logical_xor_", "eq_", "ne_"):
        _raises_like_cpu(lambda a, b: getattr(a.clone(), name)(b), small, big)
        _raises_like_cpu(lambda a, b: getattr(a.clone(), name)(b), empty, empty_big)
    _raises_like_cpu(lambda a, b: a.clone().lerp_(b, 0.4), small, big)
    _raises_like_cpu(lambda a, b, w: a.clone().lerp_(b, w), small, small, big)
    _raises_like_cpu(lambda a, m: a.clone().masked_fill_(m, 2 - 1j), small[:, 0], mask)
    _raises_like_cpu(lambda a, b, c: a.clone().addcmul_(b, c), small, small, big)
    _raises_like_cpu(lambda a, b, c: a.clone().addcdiv_(b, c), small, big, small)
    # operands that do not broadcast at all: infer_size's own error
    _raises_like_cpu(lambda a, b: a.clone().add_(b), big, complex_randn(dtype, 4))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_neg_abs_angle_all_forms(dtype):
    for name, x in layouts(dtype):
        xd = x.to(DEV)
        for fn, out_dtype in (("neg", dtype), ("abs", x.real.dtype), ("angle", x.real.dtype)):
            want = getattr(torch, fn)(x)
            out = torch.empty(0, dtype=out_dtype, device=DEV)
            with no_fallback():
                got = getattr(torch, fn)(xd)
                returned = getattr(torch, fn)(xd, out=out)
            assert_close_to_cpu(got, want, dtype)
            assert returned is out
            assert_close_to_cpu(out, want, dtype)
        if not (x.is_conj() or x.is_neg()):
            y = x.clone().to(DEV)
            with no_fallback():
                y.neg_()
            assert_close_to_cpu(y, x.clone().neg_(), dtype)
    # abs into a complex or wider out casts as the CPU does
    x = complex_randn(dtype, 3, 4)
    for out_dtype in (dtype, torch.float64):
        out = torch.empty(0, dtype=out_dtype, device=DEV)
        with no_fallback():
            torch.abs(x.to(DEV), out=out)
        assert_close_to_cpu(out, torch.abs(x, out=torch.empty(0, dtype=out_dtype)), dtype)
    _raises_like_cpu(lambda a: a.clone().abs_(), x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_eq_ne_all_forms(dtype):
    for name, x in layouts(dtype):
        y = x.resolve_conj().resolve_neg().contiguous()
        if x.numel() > 2:
            y.view(-1)[:2] = complex(7.0, -1.0)  # some unequal, NaN never equal
        for fn in ("eq", "ne"):
            want = getattr(torch, fn)(x, y)
            for out_dtype in (torch.bool, torch.int64, dtype):
                out = torch.empty(0, dtype=out_dtype, device=DEV)
                with no_fallback():
                    getattr(torch, fn)(x.to(DEV), y.to(DEV), out=out)
                assert_close_to_cpu(out, getattr(torch, fn)(x, y, out=torch.empty(0, dtype=out_dtype)), dtype)
            with no_fallback():
                got = getattr(torch, fn)(x.to(DEV), y.to(DEV))
            assert_close_to_cpu(got, want)
            if not (x.is_conj() or x.is_neg()):
                inplace = x.clone().to(DEV)
                with no_fallback():
                    getattr(inplace, fn + "_")(y.to(DEV))
                assert_close_to_cpu(inplace, getattr(x.clone(), fn + "_")(y), dtype)
    # broadcast: the functional and out= forms widen, in place a (5, 5) self takes a row
    a, b = complex_randn(dtype, 5, 5), complex_randn(dtype, 5)
    b[1] = a[2, 1]
    with no_fallback():
        got = torch.eq(a.to(DEV), b.to(DEV))
        inplace = a.to(DEV).ne_(b.to(DEV))
    assert_close_to_cpu(got, torch.eq(a, b))
    assert_close_to_cpu(inplace, a.clone().ne_(b), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_all_forms(dtype, fn):
    op = getattr(torch, fn)
    for name, x in layouts(dtype):
        t1, t2 = _like(x, 1), _like(x, 2).conj()
        for value in (1, -0.5, 2 - 1.5j):
            want = op(x, t1, t2, value=value)
            out = torch.empty(0, dtype=dtype, device=DEV)
            with no_fallback():
                got = op(x.to(DEV), t1.to(DEV), t2.to(DEV), value=value)
                op(x.to(DEV), t1.to(DEV), t2.to(DEV), value=value, out=out)
            assert_close_to_cpu(got, want, dtype)
            assert_close_to_cpu(out, want, dtype)
            if not (x.is_conj() or x.is_neg()):
                inplace = x.clone().to(DEV)
                with no_fallback():
                    getattr(inplace, fn + "_")(t1.to(DEV), t2.to(DEV), value=value)
                assert_close_to_cpu(inplace, want, dtype)
    # broadcast operands widen self in the functional form
    s, t1, t2 = complex_randn(dtype, 4, 1), complex_randn(dtype, 1, 5, seed=1), complex_randn(dtype, 5, seed=2)
    with no_fallback():
        got = op(s.to(DEV), t1.to(DEV), t2.to(DEV), value=0.25j)
    assert_close_to_cpu(got, op(s, t1, t2, value=0.25j), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_logaddexp(dtype):
    inf, nan = math.inf, math.nan
    special = torch.tensor([complex(1, 2), complex(-inf, 0.5), complex(inf, 1.0), complex(inf, -2.0),
                            complex(nan, 0.0), complex(0.0, nan), complex(-inf, 3.0), complex(30.0, -1.0)],
                           dtype=dtype)
    partner = torch.tensor([complex(0.5, -1), complex(-inf, -2.0), complex(inf, 0.25), complex(2.0, 0.0),
                            complex(1.0, 1.0), complex(1.0, 1.0), complex(2.0, 2.0), complex(-30.0, 1.0)],
                           dtype=dtype)
    pairs = [(special, partner), (partner, special)]
    pairs += [(x, _like(x, 3)) for _, x in layouts(dtype)]
    pairs += [(complex_randn(dtype, 4, 1), complex_randn(dtype, 5, seed=1))]  # broadcast
    for x, y in pairs:
        want = torch.logaddexp(x, y)
        out = torch.empty(0, dtype=dtype, device=DEV)
        with no_fallback():
            got = torch.logaddexp(x.to(DEV), y.to(DEV))
            torch.logaddexp(x.to(DEV), y.to(DEV), out=out)
        assert_close_to_cpu(got, want, dtype)
        assert_close_to_cpu(out, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_product_in_place_forms(dtype):
    b1, b2 = complex_randn(dtype, 3, 2, 4, seed=1), complex_randn(dtype, 3, 4, 5, seed=2)
    for self_shape in ((), (1,), (1, 5), (2, 5)):
        s = complex_randn(dtype, *self_shape) if self_shape else complex_randn(dtype, 1)[0].clone()
        want = s.clone().addbmm_(b1, b2, beta=0.5 - 1j, alpha=2j)
        got = s.to(DEV)
        with no_fallback():
            got.addbmm_(b1.to(DEV), b2.to(DEV), beta=0.5 - 1j, alpha=2j)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    m1, m2, v = complex_randn(dtype, 2, 4, seed=1), complex_randn(dtype, 4, 5, seed=2), complex_randn(dtype, 4)
    small = complex_randn(dtype, 1)
    _raises_like_cpu(lambda a, b, c: a.clone().addmm_(b, c), small, m1, m2)
    _raises_like_cpu(lambda a, b, c: a.clone().addmv_(b, c), small, m1, v)
    _raises_like_cpu(lambda a, b, c: a.clone().baddbmm_(b, c), small, b1, b2)


REDUCTIONS = [
    ("sum", lambda x, **k: torch.sum(x, dim=0, **k)),
    ("mean", lambda x, **k: torch.mean(x, dim=(0,), keepdim=True, **k)),
    ("var", lambda x, **k: torch.var(x, dim=0, **k)),
    ("std", lambda x, **k: torch.std(x, dim=None, correction=0, **k)),
    ("logsumexp", lambda x, **k: torch.logsumexp(x, dim=0, **k)),
    ("vector_norm", lambda x, **k: torch.linalg.vector_norm(x, ord=3, dim=0, **k)),
    ("norm", lambda x, **k: torch.norm(x, p=2, dim=0, **k)),
    ("norm_dtype", lambda x, **k: torch.norm(x, p=1, dim=0, dtype=x.dtype, **k)),
    ("all", lambda x, **k: torch.all(x, **k)),
    ("all_dim", lambda x, **k: torch.all(x, dim=0, **k)),
    ("any_dims", lambda x, **k: torch.any(x, dim=(0,), keepdim=True, **k)),
    ("vecdot", lambda x, **k: torch.linalg.vecdot(x, x.flip(0), dim=0, **k)),
]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name,fn", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction_out_forms(dtype, name, fn):
    for layout, x in layouts(dtype):
        if x.dim() == 0:
            continue  # the REDUCTIONS reduce dim 0
        want = fn(x)
        out = torch.empty(0, dtype=want.dtype, device=DEV)
        with no_fallback():
            returned = fn(x.to(DEV), out=out)
        assert returned is out
        assert_close_to_cpu(out, want, dtype)
