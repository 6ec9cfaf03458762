"""where and masked_fill of complex tensors (complex_select.cpp) and the
complex gradients that reach them (sgn, pow with a tensor exponent, the
c2r FFT's), against PyTorch CPU. Selection copies bits, so results are
compared exactly (NaNs included)."""

import math

import pytest
import torch
import torchneuron

from complex_samples import CDTYPES, assert_same, complex_randn
from conftest import no_fallback

DEV = "neuron"


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


def _z(dtype, *shape, seed=0):
    return complex_randn(dtype, *shape, seed=seed, inf_imag=0.0)


def _mask(*shape, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) > 0.5


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("case", ["plain", "broadcast", "strided", "zero_size", "scalar_0d", "conj"])
def test_where(dtype, case):
    a, b, c = _z(dtype, 4, 6), _z(dtype, 4, 6, seed=2), _mask(4, 6)
    if case == "broadcast":
        a, c = _z(dtype, 6), _mask(4, 1)
    elif case == "strided":
        a, b, c = _z(dtype, 6, 8)[::2, 1::2], _z(dtype, 4, 3, seed=2).t(), _mask(6, 4)[1::2]
    elif case == "zero_size":
        a, b, c = _z(dtype, 0, 6), _z(dtype, 0, 6), _mask(0, 6)
    elif case == "scalar_0d":
        a = torch.tensor(complex(1.5, -2.0), dtype=dtype)
    elif case == "conj":
        a = a.conj()
        b = torch.neg(b.conj_physical()).conj()
    want = torch.where(c, a, b)
    with no_fallback():
        got = torch.where(c.to(DEV), a.to(DEV), b.to(DEV))
    assert_same(got, want)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_where_promotes_and_takes_cpu_scalars(dtype):
    a, c = _z(dtype, 5, 3), _mask(5, 3)
    r = torch.randn(5, 3, dtype=torch.float64)
    with no_fallback():
        got_real = torch.where(c.to(DEV), r.to(DEV), a.to(DEV))  # float64 x complex64 -> complex128
        got_number = torch.where(c.to(DEV), a.to(DEV), 0.0)
        got_complex_number = torch.where(c.to(DEV), a.to(DEV), torch.tensor(2 - 1j, dtype=dtype))
    assert_same(got_real, torch.where(c, r, a))
    assert_same(got_number, torch.where(c, a, 0.0))
    assert_same(got_complex_number, torch.where(c, a, torch.tensor(2 - 1j, dtype=dtype)))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_where_out(dtype):
    a, b, c = _z(dtype, 3, 4), _z(dtype, 4, seed=2), _mask(3, 4)
    want = torch.where(c, a, b)
    out = torch.empty(0, dtype=dtype, device=DEV)
    with no_fallback():
        got = torch.where(c.to(DEV), a.to(DEV), b.to(DEV), out=out)
    assert got is out
    assert_same(out, want)
    # a non-contiguous out of the right shape is written in place
    base = torch.zeros(3, 8, dtype=dtype, device=DEV)
    view = base[:, ::2]
    with no_fallback():
        torch.where(c.to(DEV), a.to(DEV), b.to(DEV), out=view)
    assert_same(view, want)
    assert torch.equal(base[:, 1::2].cpu(), torch.zeros(3, 4, dtype=dtype))


def test_where_errors_match_cpu():
    a = _z(torch.complex64, 3)
    # an out= of another dtype: the CPU's error (through the fallback)
    with pytest.raises(RuntimeError, match="Expected out type"):
        torch.where(_mask(3).to(DEV), a.to(DEV), a.to(DEV), out=torch.empty(3, device=DEV))
    with pytest.raises(RuntimeError):
        torch.where(_mask(3), a, a, out=torch.empty(3))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("value", [2.5, -0.0, complex(1.0, -3.0), complex(math.nan, math.inf)], ids=str)
@pytest.mark.parametrize("inplace", [False, True])
def test_masked_fill_scalar(dtype, value, inplace):
    x, m = _z(dtype, 4, 5), _mask(4, 5)
    xd = x.to(DEV)
    with no_fallback():
        got = xd.masked_fill_(m.to(DEV), value) if inplace else xd.masked_fill(m.to(DEV), value)
    want = x.clone().masked_fill_(m, value)
    assert_same(got, want)
    if inplace:
        assert got is xd
    else:
        assert_same(xd, x)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("kind", ["complex_0d", "real_0d", "cpu_0d"])
def test_masked_fill_tensor_value(dtype, kind):
    x, m = _z(dtype, 3, 4), _mask(3, 4)
    if kind == "complex_0d":
        v = torch.tensor(complex(-1.25, 0.5), dtype=dtype)
    elif kind == "real_0d":
        v = torch.tensor(7.0, dtype=torch.float32)
    else:
        v = torch.tensor(complex(0.5, 4.0), dtype=dtype)
    vd = v if kind == "cpu_0d" else v.to(DEV)
    with no_fallback():
        got = x.to(DEV).masked_fill(m.to(DEV), vd)
    assert_same(got, x.masked_fill(m, v))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_masked_fill_broadcast_strided_zero_size(dtype):
    base = _z(dtype, 6, 10)
    x = base[::2, 1::3]
    m = _mask(1, x.shape[1])
    xd = base.to(DEV)[::2, 1::3]
    with no_fallback():
        xd.masked_fill_(m.to(DEV), complex(3, 3))
        empty = torch.empty(0, 4, dtype=dtype, device=DEV).masked_fill(torch.ones(0, 4, dtype=torch.bool,
                                                                                  device=DEV), 1.0)
    assert_same(xd, x.clone().masked_fill_(m, complex(3, 3)))
    assert empty.shape == (0, 4)


def test_masked_fill_errors_match_cpu():
    x = _z(torch.complex64, 3, 4)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.to(DEV).masked_fill_(torch.ones(3, 4, dtype=torch.uint8, device=DEV), 1.0)
    with pytest.raises(RuntimeError):
        x.to(DEV).masked_fill_(_mask(2, 3, 4).to(DEV), 1.0)  # the mask cannot broadcast into self
    with pytest.raises(RuntimeError, match="0-dimensional"):
        x.to(DEV).masked_fill_(_mask(3, 4).to(DEV), torch.ones(2, dtype=torch.complex64, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
@pytest.mark.parametrize("value", [1j, 2 + 0j, "tensor 1j", "tensor 3+0j", "cpu tensor 1j", "tensor [1j]"])
@pytest.mark.parametrize("inplace", [False, True])
def test_masked_fill_of_a_real_tensor_with_a_complex_value(dtype, value, inplace):
    # A complex value converts to self's dtype as on the CPU: an imaginary
    # part is the overflow error, a zero one fills with the real part; natively.
    def call(device):
        x = torch.arange(6).reshape(2, 3).to(dtype).to(device)
        m = torch.tensor([True, False, True], device=device)
        v = value
        if isinstance(value, str):
            number = complex(value.split()[-1].strip("[]"))
            v = torch.tensor([number] if "[" in value else number)
            v = v if value.startswith("cpu") else v.to(device)
        try:
            return x.masked_fill_(m, v) if inplace else x.masked_fill(m, v)
        except RuntimeError as e:
            return str(e)

    expected = call("cpu")
    with no_fallback():
        got = call(DEV)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_mul_by_python_number_first(dtype):
    # mul_.Scalar runs as mul.out(2, self, out=self): the number comes first
    x = _z(dtype, 4, 6)
    xd = x.to(DEV)
    with no_fallback():
        torch.ops.aten.mul_.Scalar(xd[:, 1:4], 2)
        torch.ops.aten.add_.Scalar(xd[:, 4:], 0.5)
    want = x.clone()
    want[:, 1:4] *= 2
    want[:, 4:] += 0.5
    assert_same(xd, want)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("fn", ["sgn", "pow_tensor", "irfft", "hfft"])
def test_complex_gradients_native(dtype, fn):
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {}
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 6, dtype=dtype, generator=g) + 0.5
    w = torch.randn(3, 6, dtype=dtype, generator=g)
    x[0, 0] = 0  # sgn's gradient masks zeros; pow's masks a zero base

    def f(a, b):
        if fn == "sgn":
            return torch.sgn(a) * b.detach()
        if fn == "pow_tensor":
            return torch.pow(a, b)
        if fn == "irfft":
            return torch.fft.irfft(a * b, n=10)
        return torch.fft.hfft(a * b)

    def grads(a, b):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        out = f(a, b)
        cot = torch.ones_like(out) if not out.is_complex() else torch.full_like(out, 0.5 - 0.25j)
        out.backward(cot)
        return a.grad, b.grad

    want = grads(x, w)
    with no_fallback():
        got = grads(x.to(DEV), w.to(DEV))
    for gd, gc in zip(got, want):
        if gc is None:
            assert gd is None
        else:
            torch.testing.assert_close(gd.cpu(), gc, equal_nan=True, **tol)


WIDE_UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


def _sparse_values(dtype, *shape):
    g = torch.Generator().manual_seed(4)
    v = torch.randint(0, 3, shape, generator=g) * torch.randint(0, 2, shape, generator=g)
    x = v.to(dtype)
    if dtype.is_complex and x.numel() > 3:
        x.view(-1)[1] = complex(0.0, 2.0)   # a zero real part is still nonzero
        x.view(-1)[2] = complex(math.nan, 0.0)  # NaN is nonzero
        x.view(-1)[3] = complex(-0.0, -0.0)  # negative zeros are zero
    return x


@pytest.mark.parametrize("dtype", CDTYPES)
def test_nonzero_and_masked_select_of_complex(dtype):
    x = _sparse_values(dtype, 5, 7)
    m = _mask(5, 7)
    strided = _sparse_values(dtype, 6, 9)[::2, 1::2]
    with no_fallback():
        xd = x.to(DEV)
        got = [torch.nonzero(xd), torch.argwhere(xd), torch.nonzero_static(xd, size=40, fill_value=-7),
               torch.nonzero(strided.to(DEV)), torch.nonzero(xd[:0]), *torch.where(xd)]
        picked = [xd.masked_select(m.to(DEV)), strided.to(DEV).masked_select(_mask(3, 4).to(DEV)),
                  xd[0].masked_select(m.to(DEV))]  # the mask broadcasts self up
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.masked_select(xd, m.to(DEV), out=out)
    want = [torch.nonzero(x), torch.argwhere(x), torch.nonzero_static(x, size=40, fill_value=-7),
            torch.nonzero(strided), torch.nonzero(x[:0]), *torch.where(x)]
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)
    for g, w in zip(picked + [out], [x.masked_select(m), strided.masked_select(_mask(3, 4)),
                                     x[0].masked_select(m), x.masked_select(m)]):
        assert_same(g, w)


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED)
def test_nonzero_and_masked_select_refuse_wide_unsigned_as_the_cpu_does(dtype):
    x = torch.tensor([[0, 1], [2, 0]]).to(dtype)
    m = torch.ones(2, 2, dtype=torch.bool)
    for fn in (torch.nonzero, torch.argwhere, lambda t: torch.nonzero_static(t, size=3),
               lambda t: t.masked_select(m.to(t.device))):
        with pytest.raises(NotImplementedError, match="not implemented for 'UInt"):
            fn(x)
        with pytest.raises(NotImplementedError, match="not implemented for 'UInt"):
            fn(x.to(DEV))
