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
def test_other_ops_fall_back_with_cpu_results(dtype):
    x = _values(dtype, 4, 3)
    d = x.to(DEV)
    torchneuron.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # ops the CPU has for these dtypes: the CPU's values
        assert_same((d * d).cpu(), x * x)
        assert_same((d & d[:, :1]).cpu(), x & x[:, :1])
        assert_same((d == d.flip(0)).cpu(), x == x.flip(0))
        assert_same(d.sum().cpu(), x.sum())
        # ops the CPU lacks for them: the CPU's error, not a neuron one
        with pytest.raises(NotImplementedError) as cpu_err:
            x + x
        with pytest.raises(NotImplementedError) as dev_err:
            d + d
        assert str(dev_err.value) == str(cpu_err.value)
    counted = torchneuron.get_fallback_ops()
    assert "aten::sum" in counted and "aten::mul.Tensor" not in counted and "aten::eq.Tensor" not in counted


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
