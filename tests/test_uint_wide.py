"""uint16, uint32 and uint64 on neuron against PyTorch CPU: factories,
copies between host and device and between dtypes, the byte-moving view and
shape ops (native, no fallback), and the other ops through the counted CPU
fallback with the CPU's values (or the CPU's error where the CPU has no
kernel for the dtype)."""

import warnings

import pytest
import torch
import torchneuron

from conftest import assert_same, no_fallback

DEV = "neuron"
UDTYPES = [torch.uint16, torch.uint32, torch.uint64]
TOP = {torch.uint16: 2**16 - 1, torch.uint32: 2**32 - 1, torch.uint64: 2**63 - 1}


def _values(dtype, *shape):
    g = torch.Generator().manual_seed(0)
    n = 1
    for s in shape:
        n *= s
    x = torch.randint(0, 2**15, (n,), generator=g).to(dtype).view(*shape)
    flat = x.view(-1)
    flat[0] = 0
    if n > 1:
        flat[1] = TOP[dtype]
    return x


@pytest.mark.parametrize("dtype", UDTYPES)
def test_round_trip_and_layouts(dtype):
    x = _values(dtype, 5, 6)
    with no_fallback():
        d = x.to(DEV)
        assert d.dtype == dtype
        assert_same(d.cpu(), x)
        assert_same(d.t().cpu(), x.t())
        assert_same(x.t().to(DEV).cpu(), x.t())
        assert_same(d[::2, 1:].contiguous().cpu(), x[::2, 1:].contiguous())
        assert_same(d.clone().cpu(), x)
        y = torch.empty(2, 5, 6, dtype=dtype, device=DEV)
        y.copy_(x)  # broadcast
        assert_same(y.cpu(), x.expand(2, 5, 6))
        assert_same(x[2, 3].to(DEV).cpu(), x[2, 3])
        assert_same(x[:0].to(DEV).cpu(), x[:0])


def test_uint64_above_int64_max():
    x = torch.tensor([2**63 + 5, 2**64 - 1, 0], dtype=torch.uint64)
    with no_fallback():
        d = x.to(DEV)
        assert_same(d.cpu(), x)
        assert_same(torch.full((3,), 2**63 + 7, dtype=torch.uint64, device=DEV).cpu(),
                    torch.full((3,), 2**63 + 7, dtype=torch.uint64))
        assert_same(d.to(torch.float64).cpu(), x.to(torch.float64))
        assert_same(d.to(torch.int64).cpu(), x.to(torch.int64))


@pytest.mark.parametrize("dtype", UDTYPES)
def test_factories(dtype):
    with no_fallback():
        for shape in [(3, 4), (), (0, 2)]:
            assert_same(torch.zeros(shape, dtype=dtype, device=DEV).cpu(), torch.zeros(shape, dtype=dtype))
            assert_same(torch.ones(shape, dtype=dtype, device=DEV).cpu(), torch.ones(shape, dtype=dtype))
            assert_same(torch.full(shape, 7, dtype=dtype, device=DEV).cpu(),
                        torch.full(shape, 7, dtype=dtype))
        t = torch.zeros(4, 4, dtype=dtype, device=DEV)
        t[:, 2].fill_(TOP[dtype])
        e = torch.zeros(4, 4, dtype=dtype)
        e[:, 2].fill_(TOP[dtype])
        assert_same(t.cpu(), e)
        # -1 wraps, as on the CPU
        assert_same(torch.zeros(2, dtype=dtype, device=DEV).fill_(-1).cpu(),
                    torch.zeros(2, dtype=dtype).fill_(-1))


OTHER = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
         torch.float16, torch.bfloat16, torch.float32, torch.float64,
         torch.uint16, torch.uint32, torch.uint64, torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", UDTYPES)
@pytest.mark.parametrize("other", OTHER)
def test_conversions_both_ways(dtype, other):
    g = torch.Generator().manual_seed(2)
    src = torch.randint(0, 100, (4, 5), generator=g).to(dtype)  # exact in every dtype
    with no_fallback():
        assert_same(src.to(DEV).to(other).cpu(), src.to(other))
        back = src.to(other)
        assert_same(back.t().to(DEV).to(dtype).cpu(), back.t().to(dtype))


@pytest.mark.parametrize("dtype", UDTYPES)
def test_shape_ops(dtype):
    x = _values(dtype, 3, 4, 5)
    idx = torch.tensor([2, 0, 2])
    with no_fallback():
        d = x.to(DEV)
        assert_same(d.permute(2, 0, 1).reshape(-1).cpu(), x.permute(2, 0, 1).reshape(-1))
        assert_same(torch.cat([d, d[:1]]).cpu(), torch.cat([x, x[:1]]))
        assert_same(torch.stack([d, d], 2).cpu(), torch.stack([x, x], 2))
        assert_same(d.flip(1).cpu(), x.flip(1))
        assert_same(d.roll(1, 2).cpu(), x.roll(1, 2))
        assert_same(d.index_select(0, idx.to(DEV)).cpu(), x.index_select(0, idx))
        assert_same(d.select(2, 4).cpu(), x.select(2, 4))


@pytest.mark.parametrize("dtype", UDTYPES)
def test_ops_the_cpu_lacks_raise_its_error(dtype):
    x = _values(dtype, 4, 3)
    d = x.to(DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # ops the CPU lacks for them: the CPU's error (through the
        # fallback), not a neuron one
        for fn in (lambda t: t + t, lambda t: t.sum(dtype=dtype), lambda t: t.cumsum(0, dtype=dtype),
                   lambda t: t.clone().cumsum_(0), lambda t: t.prod(dtype=dtype), torch.count_nonzero):
            with pytest.raises(NotImplementedError) as cpu_err:
                fn(x)
            with pytest.raises(NotImplementedError) as dev_err:
                fn(d)
            assert str(dev_err.value) == str(cpu_err.value)
    assert "aten::add.Tensor" in torchneuron.get_fallback_ops()


def _wrapping_values(dtype, *shape):
    """_values with the top of the dtype, a value above the signed range and,
    for uint64, one above int64's (the bits of a negative int64)."""
    x = _values(dtype, *shape)
    flat = x.view(-1)
    flat[2] = TOP[dtype] - 1
    flat[3] = TOP[dtype] // 2 + 7
    if dtype == torch.uint64:
        flat.view(torch.int64)[4] = -(2**63) + 9
    return x


@pytest.mark.parametrize("dtype", UDTYPES)
def test_reductions_and_scans_run_natively(dtype):
    """sum, nansum, prod, cumsum, cumprod (in int64 by default, wrapping as
    the CPU's, or in the dtype= or out='s dtype), mean with a dtype, any,
    all, count_nonzero: the CPU's values, contiguous, strided, broadcast,
    zero-size and 0-d; nothing falls back."""
    x = _wrapping_values(dtype, 4, 6)
    cases = [x, x.t(), x[:, ::2], x[:1].expand(3, 6), x[:0], x[1, 2]]
    with no_fallback():
        for a in cases:
            d = a.to(DEV)
            dims = [0, -1] if a.dim() else [0]
            assert_same(d.sum().cpu(), a.sum())
            assert_same(d.nansum().cpu(), a.nansum())
            assert_same(d.prod().cpu(), a.prod())
            assert_same(d.any().cpu(), a.any())
            assert_same(d.all().cpu(), a.all())
            if a.dim():  # (no dims: the CPU's error, below)
                assert_same(torch.count_nonzero(d, tuple(range(a.dim()))).cpu(),
                            torch.count_nonzero(a, tuple(range(a.dim()))))
            assert_same(d.sum(dtype=torch.int32).cpu(), a.sum(dtype=torch.int32))
            torch.testing.assert_close(d.sum(dtype=torch.float64).cpu(), a.sum(dtype=torch.float64))
            torch.testing.assert_close(d.sum(dtype=torch.complex128).cpu(), a.sum(dtype=torch.complex128))
            if a.numel():
                torch.testing.assert_close(d.mean(dtype=torch.float64).cpu(), a.mean(dtype=torch.float64))
            for dim in dims:
                assert_same(d.sum(dim, keepdim=True).cpu(), a.sum(dim, keepdim=True))
                assert_same(d.nansum(dim).cpu(), a.nansum(dim))
                assert_same(d.prod(dim).cpu(), a.prod(dim))
                assert_same(d.cumsum(dim).cpu(), a.cumsum(dim))
                assert_same(d.cumprod(dim).cpu(), a.cumprod(dim))
                torch.testing.assert_close(d.cumsum(dim, dtype=torch.float32).cpu(),
                                           a.cumsum(dim, dtype=torch.float32))
                assert_same(d.any(dim).cpu(), a.any(dim))
                assert_same(d.all(dim, keepdim=True).cpu(), a.all(dim, keepdim=True))
                assert_same(torch.count_nonzero(d, dim).cpu(), torch.count_nonzero(a, dim))
                if a.numel():
                    torch.testing.assert_close(d.mean(dim, dtype=torch.float32).cpu(),
                                               a.mean(dim, dtype=torch.float32))
        d = x.to(DEV)
        for fn in (lambda t, o: torch.sum(t, 0, out=o), lambda t, o: torch.cumsum(t, 1, out=o),
                   lambda t, o: torch.prod(t, 1, out=o), lambda t, o: torch.nansum(t, 0, out=o),
                   lambda t, o: torch.cumprod(t, 0, out=o)):
            out = torch.empty(0, dtype=torch.int64, device=DEV)
            got = fn(d, out)
            assert got is out
            assert_same(out.cpu(), fn(x, torch.empty(0, dtype=torch.int64)))
        for fn in (lambda t, o: torch.any(t, 0, out=o), lambda t, o: torch.all(t, out=o)):
            out = torch.empty(0, dtype=torch.bool, device=DEV)
            assert fn(d, out) is out
            assert_same(out.cpu(), fn(x, torch.empty(0, dtype=torch.bool)))
    assert torch.tensor([2**64 - 1, 2**63], dtype=torch.uint64).to(DEV).sum().item() == 2**63 - 1  # wraps


@pytest.mark.parametrize("dtype", UDTYPES)
def test_integer_copies_where_and_written_outputs_run_natively(dtype):
    """floor, ceil, trunc, round and nan_to_num copy an integer; isnan and
    signbit are false; where with a bool condition, Python numbers and 0-d
    host tensors; in-place and out= forms of the bit ops. The CPU's values,
    nothing falls back."""
    x = _wrapping_values(dtype, 4, 3)
    y = x.flip(0)
    cond = torch.tensor([True, False, True]).expand(4, 3)
    big = TOP[dtype] // 2 + 3  # negative as the signed dtype
    with no_fallback():
        for a in (x, x.t(), x[:, ::2], x[:0], x[1, 2]):
            d = a.to(DEV)
            for fn in (torch.floor, torch.ceil, torch.trunc, torch.round, torch.nan_to_num, torch.isnan,
                       torch.signbit):
                assert_same(fn(d).cpu(), fn(a))
            for fn in (torch.Tensor.floor_, torch.Tensor.round_, lambda t: t.mul_(big), lambda t: t.bitwise_xor_(t)):
                dc = d.clone()
                assert fn(dc) is dc
                assert_same(dc.cpu(), fn(a.clone()))
        d, e = x.to(DEV), y.to(DEV)
        c = cond.to(DEV)
        assert_same(torch.where(c, d, e).cpu(), torch.where(cond, x, y))
        assert_same(torch.where(c[:1], d, big).cpu(), torch.where(cond[:1], x, big))
        assert_same(torch.where(c, 5, d).cpu(), torch.where(cond, 5, x))
        host = torch.tensor(big, dtype=dtype)
        assert_same(torch.where(c, d, host).cpu(), torch.where(cond, x, host))
        assert_same((d * host).cpu(), x * host)
        out = torch.empty(4, 3, dtype=dtype, device=DEV)
        assert torch.where(c, d, e, out=out) is out
        assert_same(out.cpu(), torch.where(cond, x, y))
        assert torch.mul(d, e, out=out) is out
        assert_same(out.cpu(), x * y)
        mask = torch.empty(0, dtype=torch.bool, device=DEV)
        assert torch.eq(d, e, out=mask) is mask
        assert_same(mask.cpu(), x == y)
        dc = d.clone()
        assert_same(dc.eq_(e).cpu(), x.clone().eq_(y))


DIGITS = {torch.float16: 2**11, torch.bfloat16: 2**8, torch.float32: 2**24, torch.float64: 2**53}
ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
              torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_random_from_to_runs_natively_in_range(dtype):
    """random_(from, to), random_(to) and randint at every dtype: values in
    [from, to), every value of a small range drawn about equally often, the
    CPU's errors for an empty range and bounds outside the dtype; nothing
    falls back."""
    lo, hi = (0, 2) if dtype == torch.bool else (0, 7) if not dtype.is_signed else (-3, 4)
    torch.manual_seed(0)
    with no_fallback():
        d = torch.empty(7000, dtype=dtype, device=DEV).random_(lo, hi)
        r = torch.randint(lo, hi, (50, 40), dtype=dtype, device=DEV)[:, ::2]
        t = torch.empty(0, dtype=dtype, device=DEV).random_(hi)
        s = torch.empty((), dtype=dtype, device=DEV).random_(hi)
    assert d.dtype == dtype and t.shape == (0,) and s.shape == ()
    counts = torch.bincount(d.cpu().to(torch.int64) - lo, minlength=hi - lo)
    assert counts.numel() == hi - lo and d.cpu().to(torch.int64).min() >= lo
    expected = 7000 / (hi - lo)
    assert (counts - expected).abs().max() < 6 * expected**0.5  # every value, uniformly (6 sigma)
    rr = r.cpu().to(torch.int64)
    assert rr.min() >= lo and rr.max() < hi and 0 <= s.cpu().to(torch.int64) < hi
    # to=None: the whole range of an integer dtype ([0, 2^digits] for floats)
    if dtype not in (torch.uint64, torch.bool):
        w = torch.empty(4000, dtype=dtype, device=DEV).random_(0, None).cpu()
        top = torch.iinfo(dtype).max if not dtype.is_floating_point else DIGITS[dtype]
        assert w.double().min() >= 0 and w.double().max() <= top and w.double().max() > top * 0.9
    for args in ((5, 5), (-1, 5), (0, 2**40), (0, None)):
        try:
            torch.empty(3, dtype=dtype).random_(*args)
        except RuntimeError as cpu_err:
            with pytest.raises(RuntimeError) as dev_err:
                torch.empty(3, dtype=dtype, device=DEV).random_(*args)
            assert str(dev_err.value) == str(cpu_err)
        else:
            with no_fallback():
                v = torch.empty(3, dtype=dtype, device=DEV).random_(*args).cpu()
            assert v.double().min() >= args[0]


@pytest.mark.parametrize("dtype", UDTYPES)
def test_bit_ops_run_natively_on_the_same_width_signed_view(dtype):
    """Wrapping mul, eq/ne and bitwise and/or/xor: the CPU's bits, with
    products past the top, scalar operands past the signed range, broadcast
    and strided operands; nothing falls back."""
    x = _values(dtype, 4, 3)
    flat = x.view(-1)
    flat[2] = TOP[dtype] - 1
    flat[3] = TOP[dtype] // 2 + 7
    y = x.flip(0).t().contiguous().t()  # another layout
    d, e = x.to(DEV), y.to(DEV)
    big = TOP[dtype] // 2 + 3  # negative as the signed dtype
    with no_fallback():
        for f in (torch.mul, torch.eq, torch.ne, torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
            assert_same(f(d, e).cpu(), f(x, y))
            assert_same(f(d, e[:1]).cpu(), f(x, y[:1]))
            assert_same(f(d[:, ::2], e[:, ::2]).cpu(), f(x[:, ::2], y[:, ::2]))
            assert_same(f(d, 3).cpu(), f(x, 3))
            assert_same(f(d, big).cpu(), f(x, big))
            assert_same(f(d[:0], e[:0]).cpu(), f(x[:0], y[:0]))


@pytest.mark.parametrize("dtype", UDTYPES)
def test_ops_promoting_to_float_run_natively(dtype):
    """An op whose inputs promote to a float dtype (the special functions and
    unary math of integers: the default float; a float operand) converts the
    wide unsigned input on the device, as the CPU's TensorIterator does, and
    runs natively with the CPU's values."""
    x = _values(dtype, 4, 3)
    d = x.to(DEV)
    small = (x.long() % 50).to(dtype)  # values the Bessel functions keep finite
    calls = [
        lambda t: torch.special.i1(t),
        lambda t: torch.special.bessel_j0(t),
        lambda t: torch.special.ndtr(t),
        lambda t: torch.special.xlog1py(t, t),
        lambda t: torch.special.erfcx(t),
        lambda t: torch.sin(t),
        lambda t: t * 0.5,
        lambda t: t < 2.5,
        lambda t: torch.atan2(t, torch.ones(3, dtype=torch.float64, device=t.device)),
    ]
    with no_fallback():
        for fn in calls:
            for a, b in ((d, x), (small.to(DEV), small)):
                got, want = fn(a), fn(b)
                if not torch.isfinite(want).all():
                    continue  # i1 of 2**16 - 1 overflows: compared on the small values
                assert got.dtype == want.dtype and got.device.type == DEV
                torch.testing.assert_close(got.cpu(), want, equal_nan=True)
        out = torch.empty(4, 3, dtype=torch.float64, device=DEV)
        torch.special.ndtr(d, out=out)
        torch.testing.assert_close(out.cpu(), torch.special.ndtr(x).double())
    # written in place, or promoted with a signed integer: the CPU's error
    for fn in (lambda t: t.sin_(), lambda t: t + torch.ones(3, dtype=torch.int64, device=t.device)):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(x.clone())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError) as dev_err:
                fn(d.clone())
        assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype", UDTYPES)
def test_sort_and_unique_run_natively(dtype):
    """sort/argsort and unique (sorted, with inverse and counts; of elements
    and of rows) in unsigned order, above the signed range too;
    unique_consecutive."""
    x = _values(dtype, 40)
    x[5:9] = TOP[dtype]
    x[10:12] = 7
    if dtype == torch.uint64:
        x.view(torch.int64)[3] = -(2**63) + 5  # 2**63 + 5: the bits of a negative int64
    x[35:40] = x[0:5]  # a repeated row of the 8 x 5 view
    d = x.to(DEV)
    with no_fallback():
        for descending in (False, True):
            got, want = torch.sort(d, descending=descending, stable=True), torch.sort(x, descending=descending,
                                                                                      stable=True)
            assert_same(got.values.cpu(), want.values)
            assert_same(got.indices.cpu(), want.indices)
        got, want = torch.unique(d, return_inverse=True, return_counts=True), torch.unique(
            x, return_inverse=True, return_counts=True)
        for g, w in zip(got, want):
            assert_same(g.cpu(), w)
        assert_same(torch.unique_consecutive(d.view(5, 8)).cpu(), torch.unique_consecutive(x.view(5, 8)))
        for dim in (0, 1):  # rows (columns) as items
            got = torch.unique(d.view(8, 5), dim=dim, return_inverse=True, return_counts=True)
            want = torch.unique(x.view(8, 5), dim=dim, return_inverse=True, return_counts=True)
            for g, w in zip(got, want):
                assert_same(g.cpu(), w)


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")
