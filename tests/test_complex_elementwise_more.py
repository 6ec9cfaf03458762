"""Complex elementwise ops made native on the real view or the planes:
isnan / isinf and the logical ops (complex_predicates.cpp), rsub and silu
(complex_math.cpp), lerp (complex_lerp.cpp) and torch.complex
(complex_ops.cpp), against PyTorch CPU with no fallback: contiguous,
strided, conjugate / negative bits, broadcast, zero-size, 0-d, out= and in
place, and gradients where PyTorch defines them."""

import math

import pytest
import torch
import torchneuron  # noqa: F401

from complex_samples import CDTYPES, assert_close_to_cpu, complex_randn, layouts
from conftest import no_fallback

DEV = "neuron"

pytestmark = pytest.mark.usefixtures("op_tracking")


def _with_zeros_and_specials(dtype, *shape, seed=0):
    """Samples with exact zeros, a zero part, NaN and infinities in either part."""
    z = complex_randn(dtype, *shape, seed=seed)
    flat = z.view(-1)
    special = [0, complex(0.0, 1.5), complex(-2.0, 0.0), complex(math.nan, 0.0), complex(0.0, math.nan),
               complex(math.inf, 1.0), complex(1.0, -math.inf)]
    n = min(len(special), flat.numel())
    flat[:n] = torch.tensor(special[:n], dtype=dtype)
    return z


def _layouts(dtype):
    return layouts(dtype, _with_zeros_and_specials)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", ["isnan", "isinf", "isfinite", "logical_not"])
def test_predicates(dtype, fn):
    for name, x in _layouts(dtype):
        want = getattr(torch, fn)(x)
        with no_fallback():
            got = getattr(torch, fn)(x.to(DEV))
        assert_close_to_cpu(got, want)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary(dtype, fn):
    op = getattr(torch, fn)
    other_c = _with_zeros_and_specials(dtype, 4, 6, seed=1).flip(0)
    other_c.view(-1)[3:6] = 0
    for name, x in _layouts(dtype):
        others = {"complex": other_c, "bool": other_c.real > 0, "float": other_c.real.clone(),
                  "broadcast": other_c[:1]}
        for oname, y in others.items():
            try:
                want = op(x, y)
            except RuntimeError:  # shapes that do not broadcast (the 0-d / zero-size cases)
                continue
            with no_fallback():
                got = op(x.to(DEV), y.to(DEV))
                flipped = op(y.to(DEV), x.to(DEV))
            assert_close_to_cpu(got, want)
            assert_close_to_cpu(flipped, op(y, x))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_logical_out_and_in_place(dtype):
    x = _with_zeros_and_specials(dtype, 4, 6)
    y = _with_zeros_and_specials(dtype, 4, 6, seed=1).flip(1)
    for fn in ["logical_and", "logical_or", "logical_xor"]:
        for out_dtype in (torch.bool, dtype, torch.float32):
            out = torch.empty(0, dtype=out_dtype, device=DEV)
            want = getattr(torch, fn)(x, y, out=torch.empty(0, dtype=out_dtype))
            with no_fallback():
                getattr(torch, fn)(x.to(DEV), y.to(DEV), out=out)
            assert_close_to_cpu(out, want, dtype)
        inplace = x.to(DEV)
        with no_fallback():
            getattr(inplace, fn + "_")(y.to(DEV))
        assert_close_to_cpu(inplace, getattr(x.clone(), fn + "_")(y), dtype)
    out = torch.empty(0, dtype=torch.bool, device=DEV)
    with no_fallback():
        torch.logical_not(x.to(DEV), out=out)
        not_in_place = x.to(DEV).logical_not_()
    assert_close_to_cpu(out, torch.logical_not(x))
    assert_close_to_cpu(not_in_place, x.clone().logical_not_(), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_rsub(dtype):
    y = complex_randn(dtype, 4, 6, seed=1)
    for name, x in _layouts(dtype):
        # finite values: the CPU multiplies self by a complex alpha (NaN in
        # one part spreads to both), the planes by a real one
        x = torch.where(x.isfinite(), x, torch.zeros_like(x))
        cases = [(lambda a, b: torch.rsub(a, b), y), (lambda a, b: torch.rsub(a, b, alpha=2.5), y[:1]),
                 (lambda a, b: torch.rsub(a, 1.5 - 2j), None), (lambda a, b: 3 - a, None),
                 (lambda a, b: torch.rsub(a, 2.0, alpha=-1), None)]
        for fn, other in cases:
            try:
                want = fn(x, other)
            except RuntimeError:
                continue
            with no_fallback():
                got = fn(x.to(DEV), None if other is None else other.to(DEV))
            assert_close_to_cpu(got, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_silu(dtype):
    for name, x in _layouts(dtype):
        x = x.resolve_conj().resolve_neg()
        finite = torch.where(x.isfinite(), x, torch.zeros_like(x))
        want = torch.nn.functional.silu(finite)
        with no_fallback():
            got = torch.nn.functional.silu(finite.to(DEV))
            in_place = finite.to(DEV)
            torch.nn.functional.silu(in_place, inplace=True)
            out = torch.empty(0, dtype=dtype, device=DEV)
            torch.ops.aten.silu.out(finite.to(DEV), out=out)
        assert_close_to_cpu(got, want, dtype)
        assert_close_to_cpu(in_place, want, dtype)
        assert_close_to_cpu(out, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_lerp(dtype):
    end = complex_randn(dtype, 4, 6, seed=1)
    weight = complex_randn(dtype, 4, 6, seed=2) * 0.7
    for name, x in _layouts(dtype):
        x = torch.where(x.isfinite(), x, torch.zeros_like(x))
        if x.dim() == 0:
            x = x.conj()
        for w in (0.25, 0.75, 0.3 + 0.6j, -1.0, weight, weight[:1]):
            try:
                want = torch.lerp(x, end, w)
            except RuntimeError:
                continue
            wd = w.to(DEV) if isinstance(w, torch.Tensor) else w
            with no_fallback():
                got = torch.lerp(x.to(DEV), end.to(DEV), wd)
            assert_close_to_cpu(got, want, dtype)
    x = complex_randn(dtype, 4, 6, seed=3)
    for w in (0.75 - 0.1j, weight):
        want = torch.lerp(x, end, w)
        wd = w.to(DEV) if isinstance(w, torch.Tensor) else w
        out = torch.empty(0, dtype=dtype, device=DEV)
        in_place = x.to(DEV)
        with no_fallback():
            torch.lerp(x.to(DEV), end.to(DEV), wd, out=out)
            in_place.lerp_(end.to(DEV), wd)
        assert_close_to_cpu(out, want, dtype)
        assert_close_to_cpu(in_place, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_constructor(dtype):
    real_dtype = torch.float32 if dtype == torch.complex64 else torch.float64
    g = torch.Generator().manual_seed(0)
    re = torch.randn(4, 6, dtype=real_dtype, generator=g)
    im = torch.randn(6, 4, dtype=real_dtype, generator=g).t()
    for r, i in ((re, im), (re, im[:1]), (re[:0], im[:0]), (re[0, 0], im[1, 1])):
        want = torch.complex(r, i)
        out = torch.empty(0, dtype=dtype, device=DEV)
        with no_fallback():
            got = torch.complex(r.to(DEV), i.to(DEV))
            torch.complex(r.to(DEV), i.to(DEV), out=out)
        assert_close_to_cpu(got, want, dtype)
        assert_close_to_cpu(out, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_gradients(dtype):
    x = complex_randn(dtype, 3, 4)
    end = complex_randn(dtype, 3, 4, seed=1)
    g = complex_randn(dtype, 3, 4, seed=2)
    for fn in (lambda a, b: torch.rsub(a, b, alpha=2), lambda a, b: torch.lerp(a, b, 0.3 - 0.2j),
               lambda a, b: torch.complex(a.real, b.imag)):
        cpu = [x.clone().requires_grad_(), end.clone().requires_grad_()]
        fn(*cpu).backward(g)
        dev = [x.to(DEV).requires_grad_(), end.to(DEV).requires_grad_()]
        with no_fallback():
            fn(*dev).backward(g.to(DEV))
        for d, c in zip(dev, cpu):
            assert_close_to_cpu(d.grad, c.grad, dtype)


def test_errors_match_the_cpu():
    x = complex_randn(torch.complex64, 4)
    for fn in (lambda t: torch.lerp(t, t.to(torch.complex128), 0.5), lambda t: t.logical_and_(t[:2].repeat(1, 2)),
               lambda t: torch.lerp(t, t[:3], 0.5)):
        with pytest.raises(RuntimeError) as cpu:
            fn(x.clone())
        with pytest.raises(type(cpu.value)):
            fn(x.to(DEV))
