"""complex32 (torch.chalf) as a neuron dtype: storage, copies and
conversions, views, conj/neg bits, fills, printing, and the arithmetic the
CPU has complex32 kernels for, against the CPU bit for bit, with no CPU
fallback. Ops the CPU does not compute for complex32 raise its error."""
import math

import pytest
import torch
import torchneuron

from complex_samples import layouts

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

DEV = "neuron"


def chalf_randn(dtype, *shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, dtype=torch.complex64, generator=g) * 3).to(dtype)


def special_values():
    """Parts that round, overflow, underflow or are not finite in float16."""
    parts = [0.0, -0.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 65504.0, 65520.0, -1e6, 2**-25, 1.5 * 2**-24,
             6e-5, math.inf, -math.inf, math.nan, 0.1, -3.3]
    re = torch.tensor(parts, dtype=torch.float64)
    return torch.complex(re, re.flip(0))


def bits(t):
    """The float16 (or other) bit patterns of t, NaNs canonical."""
    t = t.cpu().resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t.contiguous())
    if t.is_floating_point():
        nan = t.isnan()
        t = t.masked_fill(nan, math.nan)
        return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def assert_bits(got, want):
    assert got.device.type == DEV
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert torch.equal(bits(got), bits(want))


@pytest.fixture
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}, "ops fell back to the CPU"


def test_round_trip_and_storage(no_fallback):
    x = special_values().to(torch.chalf)
    d = x.to(DEV)
    assert d.dtype == torch.chalf and d.element_size() == 4
    assert_bits(d, x)
    assert torch.equal(bits(d.cpu()), bits(x))
    for name, z in layouts(torch.chalf, chalf_randn):
        assert_bits(z.to(DEV), z)  # conj/neg bits and strides survive the move
    e = torch.empty(3, 5, dtype=torch.chalf, device=DEV)
    assert e.shape == (3, 5) and e.dtype == torch.chalf


@pytest.mark.parametrize("other", [torch.complex64, torch.complex128, torch.float16, torch.bfloat16,
                                   torch.float32, torch.float64, torch.int64, torch.int8, torch.uint8,
                                   torch.bool])
def test_conversions(other, no_fallback):
    src64 = special_values()
    x = src64.to(torch.chalf)
    # complex32 -> other (real targets keep the real part)
    for name, z in [("special", x), *layouts(torch.chalf, chalf_randn)]:
        if other in (torch.int64, torch.int8, torch.uint8) and name == "special":
            continue  # non-finite to integer is undefined on the CPU
        assert_bits(z.to(DEV).to(other), z.to(other))
    # other -> complex32, with the rounding of each part
    src = src64 if other.is_complex else src64.real
    if not other.is_floating_point and not other.is_complex:
        src = torch.arange(-5, 10).to(other)
    else:
        src = src.to(other)
    assert_bits(src.to(DEV).to(torch.chalf), src.to(torch.chalf))
    assert_bits(src.to(DEV)[::2].to(torch.chalf), src[::2].to(torch.chalf))


def test_copy_into_complex32(no_fallback):
    x = special_values()
    d = torch.zeros(15, dtype=torch.chalf, device=DEV)
    d.copy_(x.to(DEV))  # complex128 on the device into complex32
    assert_bits(d, x.to(torch.chalf))
    d[::2].copy_(x.to(torch.complex64)[:8].conj().to(DEV))
    want = x.to(torch.chalf)
    want[::2] = x.to(torch.complex64)[:8].conj().to(torch.chalf)
    assert_bits(d, want)


def test_views(no_fallback):
    x = chalf_randn(torch.chalf, 3, 4)
    d = x.to(DEV)
    r = torch.view_as_real(d)
    assert r.dtype == torch.float16 and r.shape == (3, 4, 2)
    assert_bits(r, torch.view_as_real(x))
    r[0, 0, 1] = 7.0  # a view: writes reach the complex tensor
    torch.view_as_real(x)[0, 0, 1] = 7.0
    assert d[0, 0].item() == complex(x[0, 0].real.item(), 7.0)
    h = torch.randn(5, 2).half()
    assert_bits(torch.view_as_complex(h.to(DEV)), torch.view_as_complex(h))
    assert_bits(d.real, x.real)
    assert_bits(d.imag, x.imag)
    assert_bits(d.t()[1:], x.t()[1:])
    assert_bits(d.view(torch.float32), x.view(torch.float32))


def test_conj_and_neg_bits(no_fallback):
    x = chalf_randn(torch.chalf, 4, 3)
    d = x.to(DEV)
    assert d.conj().is_conj()
    assert_bits(d.conj().resolve_conj(), x.conj().resolve_conj())
    assert_bits(torch._neg_view(d).resolve_neg(), torch._neg_view(x).resolve_neg())
    assert_bits(d.conj_physical(), x.conj_physical())
    assert_bits(d.conj().clone(), x.conj().clone())
    assert_bits(d.conj().to(torch.complex64), x.conj().to(torch.complex64))


@pytest.mark.parametrize("value", [0, 1.5, -2, 0.1 + 1e9j, complex(math.nan, -0.0), 1e-8j])
def test_fills(value, no_fallback):
    want = torch.full((2, 3), value, dtype=torch.chalf)
    assert_bits(torch.full((2, 3), value, dtype=torch.chalf, device=DEV), want)
    d = torch.empty(4, 6, dtype=torch.chalf, device=DEV)[::2, ::2]
    d.fill_(value)
    assert_bits(d, want)
    assert_bits(torch.zeros(2, 3, dtype=torch.chalf, device=DEV), torch.zeros(2, 3, dtype=torch.chalf))
    assert_bits(torch.ones(0, 3, dtype=torch.chalf, device=DEV), torch.ones(0, 3, dtype=torch.chalf))
    assert_bits(torch.ones_like(d), torch.ones(2, 3, dtype=torch.chalf))


def test_printing():
    x = torch.tensor([1 + 2j, -0.5j, math.inf, 3.25 - 1j], dtype=torch.chalf)
    text = repr(x.to(DEV))
    assert text == repr(x).replace("dtype=", "device='neuron:0', dtype="), text


def arith_cases():
    """(name, fn) of the ops the CPU computes in complex32."""
    return [
        ("add", lambda a, b: a + b),
        ("sub", lambda a, b: a - b),
        ("mul", lambda a, b: a * b),
        ("add_alpha", lambda a, b: torch.add(a, b, alpha=3)),
        ("sub_alpha", lambda a, b: torch.sub(a, b, alpha=0.7 - 0.2j)),
        ("add_scalar", lambda a, b: a + (1.3 + 0.7j)),
        ("mul_scalar", lambda a, b: a * 1.3),
        ("rsub_scalar", lambda a, b: 2.1 - a),
        ("addcmul", lambda a, b: torch.addcmul(a, b, a, value=0.7)),
        ("neg", lambda a, b: -a),
        ("abs", lambda a, b: a.abs()),
        ("sgn", lambda a, b: a.sgn()),
        ("eq", lambda a, b: a == b),
        ("ne", lambda a, b: a != b),
        ("eq_scalar", lambda a, b: a == (1.0000001 + 0j)),
        ("isnan", lambda a, b: a.isnan()),
        ("isinf", lambda a, b: a.isinf()),
        ("isfinite", lambda a, b: a.isfinite()),
        ("isclose", lambda a, b: torch.isclose(a, b, rtol=0.5, atol=1.0)),
        ("where", lambda a, b: torch.where(a.real > 0, a, b)),
        ("masked_fill", lambda a, b: a.masked_fill(b.real > 0, 2 - 1j)),
        ("var", lambda a, b: a.var(-1) if a.dim() else a.abs()),
        ("std_all", lambda a, b: a.std(correction=0) if a.dim() else a.abs()),
        ("var_keepdim", lambda a, b: torch.var(a, 0, unbiased=False, keepdim=True) if a.dim() else a.abs()),
        ("any", lambda a, b: (a * 0).any()),
        ("all", lambda a, b: a.all(-1) if a.dim() else a.all()),
        ("count_nonzero", lambda a, b: a.masked_fill(b.real > 0, 0).count_nonzero()),
    ]


@pytest.mark.parametrize("name,fn", arith_cases(), ids=[c[0] for c in arith_cases()])
def test_arithmetic(name, fn, no_fallback):
    for layout, a in layouts(torch.chalf, chalf_randn):
        b = chalf_randn(torch.chalf, *a.shape, seed=1) * 200 if a.dim() else a * 2
        assert_bits(fn(a.to(DEV), b.to(DEV)), fn(a, b))
    a = chalf_randn(torch.chalf, 4, 1, 3)
    b = chalf_randn(torch.chalf, 5, 1, seed=2)
    assert_bits(fn(a.to(DEV), b.to(DEV)), fn(a, b))  # broadcast
    s = special_values().to(torch.chalf)
    r = s[torch.arange(14, -1, -1)]  # (flip has no complex32 kernel on the CPU)
    assert_bits(fn(s.to(DEV), r.to(DEV)), fn(s, r))


def test_rounding_points_over_many_samples(no_fallback):
    # alpha * other and addcmul's products round on their own on the CPU
    a, b, c = (chalf_randn(torch.chalf, 4096, seed=k) * 50 for k in range(3))
    da, db, dc = a.to(DEV), b.to(DEV), c.to(DEV)
    assert_bits(torch.add(da, db, alpha=3), torch.add(a, b, alpha=3))
    assert_bits(torch.addcmul(da, db, dc, value=0.7), torch.addcmul(a, b, c, value=0.7))
    assert_bits(da * db, a * b)
    assert_bits(da * (1.3 + 0.7j), a * (1.3 + 0.7j))
    # var: each float16 plane's variance rounds, then their sum; std is its root
    assert_bits(da.view(64, 64).var(1), a.view(64, 64).var(1))
    assert_bits(da.view(64, 64).std(0), a.view(64, 64).std(0))
    out = torch.empty(0, dtype=torch.float16, device=DEV)
    torch.var(da.view(64, 64), 1, out=out)
    assert_bits(out, a.view(64, 64).var(1))


def test_mixed_dtypes(no_fallback):
    a = chalf_randn(torch.chalf, 6)
    f = torch.randn(6)
    h = torch.randn(6).half()
    assert_bits(a.to(DEV) + f.to(DEV), a + f)  # complex64 result, one rounding of nothing
    assert_bits(a.to(DEV) * h.to(DEV), a * h)
    assert_bits(h.to(DEV) + (1 + 1j), h + (1 + 1j))  # float16 and a complex number: complex32
    c = chalf_randn(torch.complex64, 6, seed=3)
    assert_bits(a.to(DEV) + c.to(DEV), a + c)
    # 0-d tensors of wider dtypes count less: the op still computes in complex32
    for zero_d in (torch.tensor(1 + 1j), torch.tensor(0.1, dtype=torch.float64), torch.tensor(1e6 - 3.3j)):
        assert_bits(h.to(DEV) * zero_d.to(DEV), h * zero_d)
        assert_bits(a.to(DEV) * zero_d.to(DEV), a * zero_d)
        assert_bits(a.to(DEV) - zero_d, a - zero_d)  # a CPU 0-d tensor


def test_in_place_and_out(no_fallback):
    a, b = chalf_randn(torch.chalf, 3, 4), chalf_randn(torch.chalf, 4, seed=1)
    da, db = a.to(DEV), b.to(DEV)
    da.add_(db, alpha=2)
    a.add_(b, alpha=2)
    assert_bits(da, a)
    da.mul_(db)[1:].neg_()
    a.mul_(b)[1:].neg_()
    assert_bits(da, a)
    t = da.t()
    t.sub_(1.7j)
    a.t().sub_(1.7j)
    assert_bits(da, a)
    out = torch.empty(0, dtype=torch.chalf, device=DEV)
    torch.mul(da, db, out=out)
    assert_bits(out, a * b)
    c = torch.randn(3, 4, dtype=torch.complex64)
    da.add_(c.to(DEV))  # a complex64 operand: computed in complex64, rounded once
    a.add_(c)
    assert_bits(da, a)


def test_byte_moves(no_fallback):
    x = chalf_randn(torch.chalf, 5, 4)
    d = x.to(DEV)
    i = torch.tensor([3, 0, 3])
    assert_bits(torch.cat([d, d[:2]]), torch.cat([x, x[:2]]))
    assert_bits(d.index_select(0, i.to(DEV)), x.index_select(0, i))
    assert_bits(d.roll(2, 0), x.roll(2, 0))
    assert_bits(d.t().contiguous(), x.t().contiguous())
    assert_bits(d.roll(1), x.roll(1))
    assert_bits(d[i.to(DEV)], x[i])
    mask = x.real > 0
    assert_bits(d[mask.to(DEV)], x[mask])  # a boolean mask
    assert_bits(d[:, mask[0].to(DEV)], x[:, mask[0]])
    d[mask.to(DEV)] = 1 - 2j
    x[mask] = 1 - 2j
    assert_bits(d, x)
    d.index_put_((i.to(DEV),), torch.tensor(0.1 + 3j, dtype=torch.chalf, device=DEV))
    x.index_put_((i,), torch.tensor(0.1 + 3j, dtype=torch.chalf))
    assert_bits(d, x)


def test_unsupported_ops_raise_the_cpu_error():
    d = chalf_randn(torch.chalf, 3).to(DEV)
    for fn in (torch.exp, lambda t: t / 2, torch.reciprocal, torch.sum, torch.mean, torch.prod,
               lambda t: t.sum(0), lambda t: t.mean(0), lambda t: t.cumsum(0), lambda t: t.cumprod(0),
               torch.angle, lambda t: t.flip(0), lambda t: torch.equal(t, t),
               lambda t: t.gather(0, torch.zeros(3, dtype=torch.long, device=DEV)),
               lambda t: torch.eye(2, dtype=torch.chalf, device=DEV),
               lambda t: torch.linspace(0, 1, 3, dtype=torch.chalf, device=DEV)):
        with pytest.raises(NotImplementedError, match="ComplexHalf"):
            fn(d)


# ---- every OpInfo the CPU runs at complex32 -----------------------------------

# Left to the counted CPU fallback: the CPU accumulates duplicates one
# complex32 rounding at a time, which one complex64 sum would not match.
SEQUENTIAL_ACCUMULATION = {"index_add", "index_put"}
RANDOM_OR_UNINITIALISED = {"randn", "randn_like", "rand_like", "empty_like", "new_empty", "new_empty_strided",
                           "empty", "empty_permuted"}


def _chalf_opinfos():
    from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if torch.complex32 in op.supported_dtypes("cpu")
            and (op.name, op.variant_test_name) != ("as_strided", "partial_views")]  # a view's base stays behind


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _flat(y)]
    return [x]


@pytest.mark.parametrize("op", _chalf_opinfos(), ids=lambda op: op.name + ("." + op.variant_test_name
                                                                          if op.variant_test_name else ""))
def test_opinfo_samples_match_cpu(op):
    torchneuron.clear_op_tracking()
    for sample in list(op.sample_inputs("cpu", torch.complex32))[:3]:
        want = op(sample.input, *sample.args, **sample.kwargs)
        dev = sample.transform(lambda t: t.to(DEV) if isinstance(t, torch.Tensor) else t)
        kwargs = dict(dev.kwargs)
        if "device" in kwargs:
            kwargs["device"] = DEV
        got = op(dev.input, *dev.args, **kwargs)
        for g, w in zip(_flat(got), _flat(want)):
            if not isinstance(w, torch.Tensor):
                assert g == w or (g != g and w != w)
            elif op.name in RANDOM_OR_UNINITIALISED:
                assert g.device.type == DEV and (g.dtype, g.shape) == (w.dtype, w.shape)
            elif w.dtype == torch.float64:  # log_softmax(dtype=float64): a float64 kernel, not complex32
                torch.testing.assert_close(g.cpu(), w)
            else:
                assert_bits(g, w)
    fallbacks = set(torchneuron.get_fallback_ops())
    allowed = {"aten::index_add.out", "aten::_index_put_impl_"} if op.name in SEQUENTIAL_ACCUMULATION else set()
    assert fallbacks <= allowed, fallbacks


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_a_number_first_keeps_the_result_on_the_device(dtype):
    # 2 - z is sub(2, z): the number, a CPU 0-d tensor, comes first; the
    # result belongs on z's device (native path and fallback alike)
    z = torch.randn(4, dtype=dtype)
    got = 2.1 - z.to(DEV)
    assert got.device.type == DEV
    assert torch.equal(got.cpu(), 2.1 - z)
    got = torch.ops.aten.sub.Tensor(torch.tensor(2.5, dtype=dtype), z.to(DEV))
    assert got.device.type == DEV
    assert torch.equal(got.cpu(), 2.5 - z)
