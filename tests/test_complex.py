"""complex64 and complex128 on neuron against PyTorch CPU: factories, copies
between host and device and between dtypes (PyTorch's conversion rules and
warning), clone/contiguous, the byte-moving view and shape ops,
view_as_real / view_as_complex, the conjugate and negative bits. These run
natively (no fallback). Ops without a native complex kernel run through the
counted CPU fallback and give the CPU's values."""

import math
import warnings

import pytest
import torch
import torchneuron

from conftest import assert_same, check_output, no_fallback, run_python

DEV = "neuron"
CDTYPES = [torch.complex64, torch.complex128]


def _values(dtype, *shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=dtype)
    if x.numel() >= 4:
        flat = x.view(-1)
        flat[0] = complex(0.0, -0.0)
        flat[1] = complex(float("inf"), float("nan"))
        flat[2] = complex(-1.5, 2.25)
    return x


@pytest.mark.parametrize("dtype", CDTYPES)
def test_round_trip_contiguous_and_strided(dtype):
    x = _values(dtype, 4, 6)
    with no_fallback():
        d = x.to(DEV)
        assert d.dtype == dtype and d.device.type == DEV
        assert_same(d.cpu(), x)
        # non-contiguous both ways
        assert_same(d.t().cpu(), x.t())
        assert_same(d[:, ::2].cpu(), x[:, ::2])
        assert_same(x.t().to(DEV).cpu(), x.t())
        assert_same(d.t().contiguous().cpu(), x.t().contiguous())
        assert_same(d.clone().cpu(), x.clone())
        # broadcast source
        y = torch.empty(3, 4, 6, dtype=dtype, device=DEV)
        y.copy_(x[0])
        assert_same(y.cpu(), x[0].expand(3, 4, 6))
        # 0-d and zero-size
        assert_same(x[1, 2].to(DEV).cpu(), x[1, 2])
        assert_same(torch.empty(0, 3, dtype=dtype).to(DEV).cpu(), torch.empty(0, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_factories(dtype):
    with no_fallback():
        assert_same(torch.zeros(2, 3, dtype=dtype, device=DEV).cpu(), torch.zeros(2, 3, dtype=dtype))
        assert_same(torch.ones(2, 3, dtype=dtype, device=DEV).cpu(), torch.ones(2, 3, dtype=dtype))
        assert_same(torch.full((2, 3), 1.5 - 2j, dtype=dtype, device=DEV).cpu(),
                    torch.full((2, 3), 1.5 - 2j, dtype=dtype))
        assert_same(torch.full((2,), 3, dtype=dtype, device=DEV).cpu(),
                    torch.full((2,), 3, dtype=dtype))
        e = torch.empty(5, dtype=dtype, device=DEV)
        assert e.dtype == dtype and e.shape == (5,)
        z = torch.zeros((), dtype=dtype, device=DEV)
        z.fill_(2 + 3j)
        assert z.item() == 2 + 3j
        assert torch.full((0,), 1j, dtype=dtype, device=DEV).shape == (0,)
        # a complex fill of a strided view leaves the gaps alone
        base = torch.zeros(4, 4, dtype=dtype, device=DEV)
        base[:, 1].fill_(-1j)
        expected = torch.zeros(4, 4, dtype=dtype)
        expected[:, 1] = -1j
        assert_same(base.cpu(), expected)
    # a complex value does not fit a real tensor: the CPU's error
    with pytest.raises(RuntimeError) as cpu_err:
        torch.zeros(2).fill_(1 + 1j)
    with pytest.raises(RuntimeError) as dev_err:
        torch.zeros(2, device=DEV).fill_(1 + 1j)
    assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_random_factories_shape_and_statistics(dtype):
    # randn / rand of complex dtypes: the CPU's values for the same seed
    # (through the fallback where there is no native complex generator).
    torch.manual_seed(3)
    r = torch.randn(1000, dtype=dtype, device=DEV)
    assert r.dtype == dtype and r.shape == (1000,)
    re, im = r.real.cpu(), r.imag.cpu()
    assert abs(float(re.var()) - 0.5) < 0.1 and abs(float(im.var()) - 0.5) < 0.1
    u = torch.rand(1000, dtype=dtype, device=DEV)
    assert u.dtype == dtype
    assert float(u.real.cpu().min()) >= 0 and float(u.imag.cpu().max()) < 1


REAL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.float16, torch.bfloat16, torch.float32, torch.float64,
               torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("other", REAL_DTYPES + CDTYPES)
def test_conversions_both_ways(dtype, other):
    torch.manual_seed(1)
    src = (torch.randn(3, 5, dtype=torch.complex128) * 20).to(dtype)
    src = src.real.abs().to(dtype) + 1j * src.imag.to(dtype) if other.is_signed is False else src
    with no_fallback():
        d = src.to(DEV)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            expected = src.to(other)
            got = d.to(other)
        assert_same(got.cpu(), expected)
        # and back into complex, from a strided real/complex source
        back_expected = expected.t().to(dtype)
        back = got.t().to(dtype)
        assert_same(back.cpu(), back_expected)


def test_complex_to_real_warns_like_cpu():
    # Warned once per process, as on the CPU: in a fresh interpreter.
    out = check_output(run_python("""
        import warnings
        import torch, torchneuron
        d = torch.tensor([1 + 2j, -3 - 4j]).to("neuron")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = torch.empty(2, device="neuron")
            out.copy_(d)
        print([str(w.message) for w in caught], out.cpu().tolist())
    """))
    assert "Casting complex values to real discards the imaginary part" in out
    assert "[1.0, -3.0]" in out


@pytest.mark.parametrize("dtype", CDTYPES)
def test_views_and_byte_moving_shape_ops(dtype):
    x = _values(dtype, 3, 4, 5)
    with no_fallback():
        d = x.to(DEV)
        assert_same(d.view(12, 5).cpu(), x.view(12, 5))
        assert_same(d.reshape(5, 12).cpu(), x.reshape(5, 12))
        assert_same(d.permute(2, 0, 1).cpu(), x.permute(2, 0, 1))
        assert_same(d.transpose(0, 2).reshape(-1).cpu(), x.transpose(0, 2).reshape(-1))
        assert_same(d[1:, ::2, -1].cpu(), x[1:, ::2, -1])
        assert_same(d.select(1, 2).cpu(), x.select(1, 2))
        assert_same(d.narrow(2, 1, 3).cpu(), x.narrow(2, 1, 3))
        assert_same(d.unsqueeze(0).expand(2, 3, 4, 5).cpu(), x.unsqueeze(0).expand(2, 3, 4, 5))
        assert_same(torch.cat([d, d[:, :1]], 1).cpu(), torch.cat([x, x[:, :1]], 1))
        assert_same(torch.cat([d.transpose(0, 2), d.transpose(0, 2)], 0).cpu(),
                    torch.cat([x.transpose(0, 2), x.transpose(0, 2)], 0))
        assert_same(torch.stack([d, d], 1).cpu(), torch.stack([x, x], 1))
        assert_same(d.flip(0, 2).cpu(), x.flip(0, 2))
        assert_same(d.roll(2, 1).cpu(), x.roll(2, 1))
        assert_same(torch.cat([d[:0], d[:0]]).cpu(), torch.cat([x[:0], x[:0]]))
        d.unbind(0)
        assert_same(d.chunk(2, 2)[1].cpu(), x.chunk(2, 2)[1])


def test_index_select_complex64():
    x = _values(torch.complex64, 6, 3)
    idx = torch.tensor([5, 0, 2, 2])
    with no_fallback():
        assert_same(x.to(DEV).index_select(0, idx.to(DEV)).cpu(), x.index_select(0, idx))
        assert_same(x.to(DEV).t().index_select(1, idx.to(DEV)).cpu(), x.t().index_select(1, idx))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_view_as_real_and_complex_share_storage(dtype):
    x = _values(dtype, 4, 3)
    with no_fallback():
        d = x.to(DEV)
        r = torch.view_as_real(d)
        assert r.dtype == torch.view_as_real(x).dtype and r.shape == (4, 3, 2)
        assert r.data_ptr() == d.data_ptr()
        assert_same(r.cpu(), torch.view_as_real(x))
        c = torch.view_as_complex(r)
        assert c.data_ptr() == d.data_ptr()
        assert_same(c.cpu(), x)
        r[0, 0, 1] = 7.0  # a write through the real view shows in the complex one
        assert d[0, 0].item().imag == 7.0
        assert_same(d.real.cpu(), x.real.clone().index_put_((torch.tensor([0]), torch.tensor([0])),
                                                            torch.tensor(x[0, 0].real.item(), dtype=x.real.dtype)))
        assert d.imag.shape == x.imag.shape
    # the CPU's errors
    with pytest.raises(RuntimeError) as cpu_err:
        torch.view_as_complex(torch.zeros(3, 3))
    with pytest.raises(RuntimeError) as dev_err:
        torch.view_as_complex(torch.zeros(3, 3, device=DEV))
    assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_conjugate_and_negative_bits(dtype):
    x = _values(dtype, 3, 4)
    with no_fallback():
        d = x.to(DEV)
        c = d.conj()
        assert c.is_conj() and c.data_ptr() == d.data_ptr()
        assert_same(c.cpu(), x.conj().resolve_conj())
        assert not c.resolve_conj().is_conj()
        assert_same(c.resolve_conj().cpu(), x.conj().resolve_conj())
        assert_same(torch.conj_physical(d).cpu(), torch.conj_physical(x))
        assert_same(torch.conj_physical(d.t()).cpu(), torch.conj_physical(x.t()))
        assert_same(torch.conj_physical(c).cpu(), torch.conj_physical(x.conj()))
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.conj_physical(d, out=out)
        assert_same(out.cpu(), torch.conj_physical(x))
        e = d.clone()
        e.conj_physical_()
        assert_same(e.cpu(), x.conj_physical())
        # imag of a conjugate view carries the negative bit
        n = c.imag
        assert n.is_neg()
        assert_same(n.resolve_neg().cpu(), x.conj().imag.resolve_neg())
        assert_same(n.cpu(), x.conj().imag.resolve_neg())
        # copies into conjugate views and between them
        t = torch.zeros(3, 4, dtype=dtype, device=DEV).conj()
        t.copy_(d)
        assert_same(t.resolve_conj().cpu(), x)
        host = torch.zeros(3, 4, dtype=dtype).conj()
        host.copy_(d)
        assert_same(host.resolve_conj(), x)
        host_t = torch.zeros(4, 3, dtype=dtype).t().conj()
        host_t.copy_(d)
        assert_same(host_t.resolve_conj(), x)
        assert_same(x.conj().to(DEV).resolve_conj().cpu(), x.conj().resolve_conj())
        assert_same(x.conj().t().to(DEV).cpu(), x.conj().t().resolve_conj())
        assert not torch.conj_physical(d.real).is_complex()


@pytest.mark.parametrize("dtype", CDTYPES)
def test_op_without_native_kernel_falls_back_with_cpu_values(dtype):
    x = _values(dtype, 3, 4)
    y = _values(dtype, 4).flip(0)
    torchneuron.reset_fallback_ops() if hasattr(torchneuron, "reset_fallback_ops") else torchneuron.clear_op_tracking()
    torchneuron.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.asinh(x.to(DEV))
        got_exp = torch.log1p(x.to(DEV)[:, 1:])
        got_scalar = x.to(DEV) * (1 - 2j)
        real_times_complex = torch.ones(3, 4, device=DEV) * 1j
        got_eig = torch.linalg.eigvals(x[1:, :2].to(DEV))  # finite rows: LAPACK faults on NaN
        got_fallback = torch.nan_to_num(x.to(DEV), nan=1.5, posinf=2.0)
    torch.testing.assert_close(got.cpu(), torch.asinh(x), equal_nan=True)
    torch.testing.assert_close(got_exp.cpu(), torch.log1p(x[:, 1:]), equal_nan=True)
    assert_same(got_scalar.cpu(), x * (1 - 2j))
    assert_same(real_times_complex.cpu(), torch.ones(3, 4) * 1j)
    torch.testing.assert_close(got_eig.cpu(), torch.linalg.eigvals(x[1:, :2]))
    assert_same(got_fallback.cpu(), torch.nan_to_num(x, nan=1.5, posinf=2.0))
    counted = torchneuron.get_fallback_ops()
    # asinh, log1p, products with complex numbers (test_complex_math.py,
    # test_complex_numbers_native) and eigvals (test_linalg_eig.py) are
    # native; complex nan_to_num is not
    assert counted == {"aten::nan_to_num": 1}


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_numbers_native(dtype):
    """Products, sums and quotients with Python complex numbers run natively.
    The number is cast to the result's dtype as the CPU casts it; a product
    is the textbook (ac - bd) + (ad + bc)i with each step rounded, which is
    what the CPU's vectorised loop computes (its scalar tail, the last
    len % vector-width elements, contracts steps into FMAs: within an ulp)."""
    inf, nan = math.inf, math.nan
    special = [complex(inf, 0), complex(0, inf), complex(inf, inf), complex(nan, 0), complex(1e30, 1e30),
               complex(-inf, 1), complex(1e-45, 3), complex(-0.0, 0.0)]
    x = torch.cat([torch.tensor(special, dtype=dtype), _values(dtype, 37)])
    r = torch.randn(x.shape, dtype=torch.float32)
    for c in (1 - 2j, 1j, 0.3 + 0.7j, complex(1e-30, -1e30)):
        with no_fallback():
            got = [x.to(DEV) * c, c * x.to(DEV), x.to(DEV) + c, x.to(DEV) - c, x.to(DEV) / c, r.to(DEV) * c,
                   torch.ops.aten.mul.Scalar(x.to(DEV), c)]
            inplace = x.to(DEV)
            inplace *= c
        want = [x * c, c * x, x + c, x - c, x / c, r * c, torch.ops.aten.mul.Scalar(x, c)]
        for g, w in zip(got + [inplace], want + [x * c]):
            torch.testing.assert_close(g.cpu(), w, equal_nan=True)
        k = torch.tensor(c, dtype=dtype)
        textbook = torch.complex(x.real * k.real - x.imag * k.imag, x.real * k.imag + x.imag * k.real)
        assert_same(got[0].cpu(), textbook)
        assert_same(inplace.cpu(), textbook)
        assert_same(got[2].cpu(), torch.complex(x.real + k.real, x.imag + k.imag))


def _rotary_cpu_or_dev(device, dtype=torch.float32):
    torch.manual_seed(0)
    bsz, seqlen, heads, hd = 2, 5, 3, 8
    freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
    t = torch.arange(seqlen)
    freqs = torch.outer(t, freqs).float().to(device)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq = torch.randn(bsz, seqlen, heads, hd, dtype=dtype).to(device).requires_grad_()
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    out = torch.view_as_real(xq_ * freqs_cis.view(1, seqlen, 1, hd // 2)).flatten(3)
    g = torch.randn(out.shape).to(device)
    out.backward(g)
    return out.detach(), xq.grad


def test_llama_rotary_embedding_matches_cpu_with_no_fallback():
    # polar + view_as_complex + mul + view_as_real, forward and backward.
    with no_fallback():
        out, grad = _rotary_cpu_or_dev(DEV)
    eout, egrad = _rotary_cpu_or_dev("cpu")
    torch.testing.assert_close(out.cpu(), eout)
    torch.testing.assert_close(grad.cpu(), egrad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_mul_native(dtype):
    tol = {} if dtype == torch.complex128 else {"rtol": 2e-6, "atol": 1e-6}
    a = _values(dtype, 3, 4)
    b = _values(dtype, 4).flip(0) * (0.5 - 1j)
    cases = [(a, b), (a.t(), (a * 2).t()), (a[:, :1], b), (a[0, 0], a), (a[:0], b)]
    with no_fallback():
        for x, y in cases:
            got = x.to(DEV) * y.to(DEV)
            torch.testing.assert_close(got.cpu(), x * y, equal_nan=True, **tol)
        # a conjugate operand (resolved by PyTorch's conjugate fallback)
        torch.testing.assert_close((a.to(DEV) * a.to(DEV).conj()).cpu(), a * a.conj(),
                                   equal_nan=True, **tol)
    # backward through the product
    x = torch.randn(2, 3, dtype=dtype).requires_grad_()
    y = torch.randn(3, dtype=dtype).requires_grad_()
    dx, dy = x.detach().to(DEV).requires_grad_(), y.detach().to(DEV).requires_grad_()
    g = torch.randn(2, 3, dtype=dtype)  # finite: inf/NaN products are checked above
    (x * y).backward(g)
    with no_fallback():
        (dx * dy).backward(g.to(DEV))
    torch.testing.assert_close(dx.grad.cpu(), x.grad, **tol)
    torch.testing.assert_close(dy.grad.cpu(), y.grad, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polar_native(dtype):
    torch.manual_seed(0)
    r = torch.rand(3, 4, dtype=dtype) * 3
    theta = (torch.rand(4, dtype=dtype) - 0.5) * 10
    tol = {} if dtype == torch.float64 else {"rtol": 2e-6, "atol": 2e-6}
    with no_fallback():
        torch.testing.assert_close(torch.polar(r.to(DEV), theta.to(DEV)).cpu(), torch.polar(r, theta), **tol)
        torch.testing.assert_close(torch.polar(r.t().to(DEV), r.t().to(DEV)).cpu(), torch.polar(r.t(), r.t()), **tol)
        out = torch.empty(0, dtype=torch.polar(r, theta).dtype, device=DEV)
        torch.polar(r.to(DEV), theta.to(DEV), out=out)
        torch.testing.assert_close(out.cpu(), torch.polar(r, theta), **tol)
        assert torch.polar(r[:0].to(DEV), theta.to(DEV)).shape == (0, 4)
    # mixed dtypes: the CPU's error (through the fallback)
    with pytest.raises(RuntimeError) as cpu_err:
        torch.polar(r, theta.to(torch.float64 if dtype == torch.float32 else torch.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as dev_err:
            torch.polar(r.to(DEV), theta.to(torch.float64 if dtype == torch.float32 else torch.float32).to(DEV))
    assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_sum_native(dtype):
    x = torch.randn(3, 4, 5, dtype=dtype)
    tol = {} if dtype == torch.complex128 else {"rtol": 1e-5, "atol": 1e-5}
    with no_fallback():
        d = x.to(DEV)
        for dims, keep in [((1,), False), ((-1, 0), True), ((), False), (None, False)]:
            torch.testing.assert_close(torch.sum(d, dims, keepdim=keep).cpu(),
                                       torch.sum(x, dims, keepdim=keep), **tol)
        torch.testing.assert_close(d.transpose(0, 2).sum(1).cpu(), x.transpose(0, 2).sum(1), **tol)
        torch.testing.assert_close(d.conj().sum(0).cpu(), x.conj().sum(0), **tol)
        torch.testing.assert_close(d[:0].sum(0).cpu(), x[:0].sum(0))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_add_sub_native(dtype):
    a = _values(dtype, 3, 4)
    b = _values(dtype, 4).flip(0)
    with no_fallback():
        for x, y in [(a, b), (a.t(), (a * 2).t()), (a[:, :1], b), (a[0, 0], a), (a[:0], b)]:
            assert_same((x.to(DEV) + y.to(DEV)).cpu(), x + y)
            assert_same((x.to(DEV) - y.to(DEV)).cpu(), x - y)
            assert_same(torch.add(x.to(DEV), y.to(DEV), alpha=2).cpu(), torch.add(x, y, alpha=2))
            assert_same(torch.sub(x.to(DEV), y.to(DEV), alpha=0.5).cpu(), torch.sub(x, y, alpha=0.5))
    x = torch.randn(2, 3, dtype=dtype).requires_grad_()
    y = torch.randn(3, dtype=dtype).requires_grad_()
    dx, dy = x.detach().to(DEV).requires_grad_(), y.detach().to(DEV).requires_grad_()
    g = torch.randn(2, 3, dtype=dtype)
    (x - y).backward(g)
    with no_fallback():
        (dx - dy).backward(g.to(DEV))
    torch.testing.assert_close(dx.grad.cpu(), x.grad)
    torch.testing.assert_close(dy.grad.cpu(), y.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_neg_native(dtype):
    a = _values(dtype, 3, 4)
    with no_fallback():
        for x in [a, a.t(), a[1, 2], a[:0]]:
            assert_same((-x.to(DEV)).cpu(), -x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_abs_angle_eq_ne_native(dtype):
    a = _values(dtype, 3, 4)
    b = a.clone()
    b[0, 3] = 5 + 5j
    b[2, 1] = complex(a[2, 1].real.item(), 9.0)  # equal real part, different imaginary
    tol = {} if dtype == torch.complex128 else {"rtol": 2e-6, "atol": 1e-6}
    with no_fallback():
        for x in [a, a.t(), a[1, 2], a[:0]]:
            torch.testing.assert_close(torch.abs(x.to(DEV)).cpu(), torch.abs(x), equal_nan=True, **tol)
            torch.testing.assert_close(torch.angle(x.to(DEV)).cpu(), torch.angle(x), equal_nan=True, **tol)
        for x, y in [(a, b), (a.t(), b.t()), (a, b[1]), (a[0, 0], b), (a[:0], b[0])]:
            assert_same((x.to(DEV) == y.to(DEV)).cpu(), x == y)
            assert_same((x.to(DEV) != y.to(DEV)).cpu(), x != y)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_mean_native(dtype):
    x = torch.randn(3, 4, 5, dtype=dtype)
    tol = {} if dtype == torch.complex128 else {"rtol": 1e-5, "atol": 1e-5}
    with no_fallback():
        d = x.to(DEV)
        for dims, keep in [((1,), False), ((-1, 0), True), (None, False)]:
            torch.testing.assert_close(torch.mean(d, dims, keepdim=keep).cpu(),
                                       torch.mean(x, dims, keepdim=keep), **tol)
        torch.testing.assert_close(d.transpose(0, 2).mean(1).cpu(), x.transpose(0, 2).mean(1), **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_mm_bmm_matmul_native(dtype):
    torch.manual_seed(0)
    a = torch.randn(2, 5, 6, dtype=dtype)
    b = torch.randn(2, 6, 3, dtype=dtype)
    tol = {} if dtype == torch.complex128 else {"rtol": 1e-5, "atol": 1e-5}
    with no_fallback():
        torch.testing.assert_close((a[0].to(DEV) @ b[0].to(DEV)).cpu(), a[0] @ b[0], **tol)
        torch.testing.assert_close(torch.mm(a[0].t().to(DEV), a[1].to(DEV)).cpu(), a[0].t() @ a[1], **tol)
        torch.testing.assert_close(torch.bmm(a.to(DEV), b.to(DEV)).cpu(), torch.bmm(a, b), **tol)
        torch.testing.assert_close(torch.matmul(a.to(DEV), b[0].to(DEV)).cpu(), torch.matmul(a, b[0]), **tol)
        assert torch.mm(a[0, :0].to(DEV), b[0].to(DEV)).shape == (0, 3)
    # backward through mm (conjugate-transposed operands on the way)
    x = a[0].clone().requires_grad_()
    y = b[0].clone().requires_grad_()
    dx, dy = x.detach().to(DEV).requires_grad_(), y.detach().to(DEV).requires_grad_()
    g = torch.randn(5, 3, dtype=dtype)
    (x @ y).backward(g)
    with no_fallback():
        (dx @ dy).backward(g.to(DEV))
    torch.testing.assert_close(dx.grad.cpu(), x.grad, **tol)
    torch.testing.assert_close(dy.grad.cpu(), y.grad, **tol)
    # a size mismatch: the CPU's error
    with pytest.raises(RuntimeError) as cpu_err:
        torch.mm(a[0], a[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as dev_err:
            torch.mm(a[0].to(DEV), a[0].to(DEV))
    assert str(dev_err.value) == str(cpu_err.value)


# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


COMPLEX_MATH = ["exp", "log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan",
                "sinh", "cosh", "tanh", "sigmoid"]


def _math_values(dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 6, dtype=dtype) * 2
    flat = x.view(-1)
    # zero with a negative imaginary zero, real arguments of both signs, a
    # large real part (tanh's and exp's range), a pure imaginary one
    flat[0], flat[1], flat[2], flat[3], flat[4] = complex(0.0, -0.0), 3.0, -2.0, complex(30.0, 1.0), 1.5j
    return x


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", COMPLEX_MATH)
def test_complex_math_native(dtype, name):
    fn = getattr(torch, name)
    x = _math_values(dtype)
    d = x.to(DEV)
    with no_fallback():
        torch.testing.assert_close(fn(d).cpu(), fn(x), equal_nan=True)
        torch.testing.assert_close(fn(d.t()).cpu(), fn(x.t()), equal_nan=True)  # non-contiguous
        torch.testing.assert_close(fn(d[1, 2]).cpu(), fn(x[1, 2]), equal_nan=True)  # 0-d
        assert fn(d[:0]).shape == (0, 6)
        out = torch.empty(0, dtype=dtype, device=DEV)  # resized as out= resizes
        fn(d, out=out)
        torch.testing.assert_close(out.cpu(), fn(x), equal_nan=True)
        inplace = d.clone()
        getattr(inplace, name + "_")()
        torch.testing.assert_close(inplace.cpu(), fn(x), equal_nan=True)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_division_native(dtype):
    x = _math_values(dtype)
    y = _math_values(dtype).flip(1)[0] * (0.5 - 1j)
    y[0] = 1e-30 + 1e30j  # Smith's scaling keeps this in range
    y[1] = 0  # division by zero: a / 0 and b / 0, as the CPU gives
    with no_fallback():
        torch.testing.assert_close((x.to(DEV) / y.to(DEV)).cpu(), x / y, equal_nan=True)
        torch.testing.assert_close((x.t().to(DEV) / x.t().to(DEV)[0]).cpu(), x.t() / x.t()[0], equal_nan=True)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.div(x.to(DEV), y.to(DEV), out=out)
        torch.testing.assert_close(out.cpu(), x / y, equal_nan=True)
        d = x.to(DEV)
        d /= y.to(DEV)
        torch.testing.assert_close(d.cpu(), x / y, equal_nan=True)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y.to(DEV).div_(x.to(DEV))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_math_backward(dtype):
    tol = {} if dtype == torch.complex128 else {"rtol": 1e-5, "atol": 1e-5}
    torch.manual_seed(1)
    x = torch.randn(3, 4, dtype=dtype)
    y = torch.randn(4, dtype=dtype) + 1
    g = torch.randn(3, 4, dtype=dtype)

    def f(a, b):
        return torch.tanh(torch.exp(a) / b).sigmoid() + torch.sqrt(a).log()

    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    f(xc, yc).backward(g)
    xd, yd = x.to(DEV).requires_grad_(), y.to(DEV).requires_grad_()
    with no_fallback():
        f(xd, yd).backward(g.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    torch.testing.assert_close(yd.grad.cpu(), yc.grad, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_sum_and_mean_of_everything_native(dtype):
    x = _math_values(dtype)
    d = x.to(DEV)
    tol = {} if dtype == torch.complex128 else {"rtol": 1e-5, "atol": 1e-5}
    with no_fallback():
        torch.testing.assert_close(d.sum().cpu(), x.sum(), **tol)
        torch.testing.assert_close(d.mean().cpu(), x.mean(), **tol)
        torch.testing.assert_close(d.t().conj().sum().cpu(), x.t().conj().sum(), **tol)
        assert_same(d[1, 2].sum().cpu(), x[1, 2].sum())  # a 0-d tensor is its own sum
        assert_same(d[1, 2].mean().cpu(), x[1, 2].mean())
        assert_same(d[:0].sum().cpu(), x[:0].sum())
        # the sum of a complex loss's gradient path
        w = d.clone().requires_grad_()
        (w * w.conj()).real.sum().backward()
    torch.testing.assert_close(w.grad.cpu(), 2 * x, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("real", [torch.float32, torch.float64, torch.int64])
def test_complex_with_real_tensors_promotes_natively(dtype, real):
    x = _math_values(dtype)
    r = torch.arange(1, 25).reshape(4, 6).to(real)
    want_type = torch.result_type(x, r)
    with no_fallback():
        for op in (torch.mul, torch.add, torch.sub, torch.div):
            got = op(x.to(DEV), r.to(DEV))
            assert got.dtype == want_type
            torch.testing.assert_close(got.cpu(), op(x, r), equal_nan=True)
            torch.testing.assert_close(op(r.to(DEV), x.to(DEV)).cpu(), op(r, x), equal_nan=True)
        d = x.to(DEV)
        if want_type == dtype:
            d.mul_(r.to(DEV)[0])
            torch.testing.assert_close(d.cpu(), x * r[0], equal_nan=True)
    # a real tensor cannot hold the complex result: the CPU's error
    with pytest.raises(RuntimeError, match="can't be cast"):
        r.to(DEV).float().mul_(x.to(DEV))
