"""torch.fft on neuron against PyTorch CPU: the 1-D, 2-D and n-D transforms
(complex, real and Hermitian), every norm mode, n=/s= padding and trimming,
dims negative, several and unsorted, non-contiguous, batched, conjugated
and zero-size inputs, float32/float64 and complex64/complex128 (float16 and
bfloat16 raise the CPU's error), gradients (against the CPU's and by
gradcheck), out=, and fftshift/ifftshift/fftfreq. No op may fall back."""

import pytest
import torch
import torchneuron

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
NORMS = [None, "forward", "backward", "ortho"]
REAL = [torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]


def _tol(dtype):
    single = dtype in (torch.float32, torch.complex64)
    return {"rtol": 2e-5, "atol": 2e-5} if single else {"rtol": 1e-11, "atol": 1e-11}


def _check(fn, x, *args, **kwargs):
    try:
        expected = fn(x, *args, **kwargs)
    except Exception as cpu:  # noqa: BLE001 - then neuron must raise the same
        with pytest.raises(type(cpu), match=str(cpu).split("\n")[0][:40].replace("(", r"\(").replace(")", r"\)")):
            fn(x.to(DEV), *args, **kwargs)
        return None
    got = fn(x.to(DEV), *args, **kwargs)
    assert got.device.type == DEV
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())  # the CPU's layout
    # errors scale with the size of the values: compare relative to the largest
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    tol = _tol(x.dtype)
    torch.testing.assert_close(got.cpu(), expected, rtol=tol["rtol"], atol=tol["atol"] * scale)
    return got


def _input(shape, dtype, layout="contiguous"):
    if layout == "transposed":  # the transformed dim last but not contiguous
        x = torch.randn(*reversed(shape), dtype=dtype).transpose(0, -1)
    elif layout == "strided":
        x = torch.randn(*shape[:-1], shape[-1] * 2, dtype=dtype)[..., ::2]
    else:
        x = torch.randn(*shape, dtype=dtype)
    assert x.shape == tuple(shape)
    return x


ONE_D_COMPLEX_IN = [torch.fft.fft, torch.fft.ifft, torch.fft.irfft, torch.fft.hfft]
ONE_D_REAL_IN = [torch.fft.fft, torch.fft.ifft, torch.fft.rfft, torch.fft.irfft, torch.fft.hfft, torch.fft.ihfft]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn", ONE_D_REAL_IN, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", REAL + COMPLEX)
def test_one_d(fn, dtype, norm):
    if dtype.is_complex and fn not in ONE_D_COMPLEX_IN:
        pytest.skip("real-input transform")
    for shape, n, dim, layout in [((3, 16), None, -1, "contiguous"), ((4, 15), None, -1, "transposed"),
                                  ((2, 3, 12), 20, -1, "strided"), ((5, 12), 7, 0, "contiguous"),
                                  ((2, 97), None, 1, "contiguous"), ((1, 1), None, -1, "contiguous"),
                                  ((6, 30), 31, -2, "transposed")]:
        _check(fn, _input(shape, dtype, layout), n=n, dim=dim, norm=norm)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", REAL + COMPLEX)
def test_two_d_and_n_d(dtype, norm):
    x = _input((3, 6, 10), dtype, "transposed")
    fns = [(torch.fft.fft2, {}), (torch.fft.ifft2, {"s": (4, 12)}), (torch.fft.fftn, {"dim": (2, 0)}),
           (torch.fft.ifftn, {"s": (5, 3), "dim": (-1, 0)}), (torch.fft.fftn, {}),
           (torch.fft.irfft2, {}), (torch.fft.irfftn, {"s": (4, 7), "dim": (0, 2)}), (torch.fft.hfftn, {}),
           (torch.fft.hfft2, {"s": (6, 9)})]
    if not dtype.is_complex:
        fns += [(torch.fft.rfft2, {}), (torch.fft.rfftn, {"dim": (-1, 0, 1)}), (torch.fft.rfftn, {"s": (5, 8)}),
                (torch.fft.ihfft2, {}), (torch.fft.ihfftn, {"dim": (0, 2)})]
    for fn, kw in fns:
        _check(fn, x, norm=norm, **kw)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 97, 127, 128, 360, 1000, 1009, 3072, 4096, 4099])
def test_lengths_round_trip(n):
    x = torch.randn(2, n, dtype=torch.float64)
    _check(torch.fft.fft, x)
    _check(torch.fft.rfft, x)
    _check(torch.fft.irfft, torch.randn(2, n // 2 + 1, dtype=torch.complex128), n=n)
    back = torch.fft.irfft(torch.fft.rfft(x.to(DEV)), n=n).cpu()
    torch.testing.assert_close(back, x, rtol=1e-12, atol=1e-12)


def test_conjugate_and_negative_inputs():
    z = torch.randn(4, 10, dtype=torch.complex64)
    expected = torch.fft.fft(z.conj())
    got = torch.fft.fft(z.to(DEV).conj())
    torch.testing.assert_close(got.cpu(), expected, **_tol(torch.complex64))
    torch.testing.assert_close(torch.fft.irfft(z.to(DEV).conj()).cpu(), torch.fft.irfft(z.conj()),
                               **_tol(torch.complex64))


def test_zero_size():
    for shape in [(0, 8), (3, 0, 8), (0, 4, 8)]:
        for fn in (torch.fft.fft, torch.fft.rfft, torch.fft.irfft, torch.fft.ihfft):
            x = torch.randn(shape)  # (the CPU's MKL refuses some of these: shapes from meta)
            got = fn(x.to(DEV))
            assert got.shape == fn(x.to("meta")).shape and got.numel() == 0
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        torch.fft.fft(torch.randn(3, 0, device=DEV))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        torch.fft.irfft(torch.randn(3, 4, device=DEV, dtype=torch.complex64), n=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_matches_cpu(dtype):
    x = torch.randn(4, 8).to(dtype)
    for fn in (torch.fft.fft, torch.fft.rfft, torch.fft.fft2):
        try:
            expected = fn(x)
        except Exception as cpu:  # noqa: BLE001 - the CPU's error is the expectation
            with pytest.raises(type(cpu), match=str(cpu).split("\n")[0][:40]):
                fn(x.to(DEV))
        else:
            torch.testing.assert_close(fn(x.to(DEV)).cpu(), expected)


def test_out():
    x = torch.randn(3, 10, dtype=torch.complex128)
    out = torch.empty(0, dtype=torch.complex128, device=DEV)
    r = torch.fft.fft(x.to(DEV), out=out)
    assert r is out
    torch.testing.assert_close(out.cpu(), torch.fft.fft(x), **_tol(torch.complex128))
    real = torch.randn(3, 10, dtype=torch.float64)
    out = torch.empty(3, 6, dtype=torch.complex128, device=DEV)
    torch.fft.rfft(real.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.fft.rfft(real), **_tol(torch.float64))
    out = torch.empty(5, dtype=torch.float64, device=DEV)
    torch.fft.irfftn(x.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.fft.irfftn(x), **_tol(torch.float64))
    # the aten ops' own out= overloads
    out = torch.empty(3, 10, dtype=torch.complex128, device=DEV)
    torch.ops.aten._fft_c2c.out(x.to(DEV), [1], 2, False, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten._fft_c2c(x, [1], 2, False), **_tol(torch.complex128))


GRAD_CASES = [
    (torch.fft.fft, torch.complex128, (3, 8), {}), (torch.fft.fft, torch.float64, (3, 7), {"norm": "ortho"}),
    (torch.fft.ifft, torch.complex128, (2, 9), {"n": 12}), (torch.fft.rfft, torch.float64, (3, 10), {}),
    (torch.fft.rfft, torch.float64, (3, 9), {"n": 6, "norm": "forward"}),
    (torch.fft.irfft, torch.complex128, (3, 6), {}), (torch.fft.irfft, torch.complex128, (3, 6), {"n": 11}),
    (torch.fft.hfft, torch.complex128, (2, 5), {}), (torch.fft.ihfft, torch.float64, (2, 8), {}),
    (torch.fft.fftn, torch.complex128, (3, 4, 5), {"dim": (2, 0)}), (torch.fft.rfft2, torch.float64, (4, 6), {}),
    (torch.fft.irfftn, torch.complex128, (3, 4, 5), {"s": (3, 6)}),
]


C2R_GRADS = (torch.fft.irfft, torch.fft.hfft, torch.fft.irfftn)


@pytest.mark.parametrize("fn,dtype,shape,kw", GRAD_CASES, ids=lambda v: getattr(v, "__name__", None))
def test_backward_matches_cpu_and_gradcheck(fn, dtype, shape, kw):
    x = torch.randn(shape, dtype=dtype)
    c, n = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    expected, got = fn(c, **kw), fn(n, **kw)
    g = torch.randn(expected.shape, dtype=expected.dtype)
    expected.backward(g)
    got.backward(g.to(DEV))
    torch.testing.assert_close(n.grad.cpu(), c.grad, rtol=1e-10, atol=1e-10)
    if fn in C2R_GRADS:
        # autograd's fft_c2r_backward doubles the interior of the one-sided
        # gradient with a complex mul_ by 2, which is not native yet (complex
        # times a real number: the complex-ops work); nothing else may fall back
        assert set(torchneuron.get_fallback_ops()) <= {"aten::mul.out"}
        torchneuron.clear_op_tracking()

    # gradcheck on real planes, so that its own perturbation arithmetic is real
    def planes_fn(t):
        out = fn(torch.view_as_complex(t) if dtype.is_complex else t, **kw)
        return torch.view_as_real(out.resolve_conj()) if out.is_complex() else out

    planes = torch.view_as_real(x).clone() if dtype.is_complex else x
    assert torch.autograd.gradcheck(planes_fn, (planes.to(DEV).requires_grad_(),))
    if fn in C2R_GRADS:
        assert set(torchneuron.get_fallback_ops()) <= {"aten::mul.out"}
        torchneuron.clear_op_tracking()


def test_shift_and_freq():
    x = torch.randn(5, 6)
    for fn in (torch.fft.fftshift, torch.fft.ifftshift):
        torch.testing.assert_close(fn(x.to(DEV)).cpu(), fn(x))
        torch.testing.assert_close(fn(x.to(DEV), dim=0).cpu(), fn(x, dim=0))
    for n, d in [(8, 1.0), (7, 0.5)]:
        torch.testing.assert_close(torch.fft.fftfreq(n, d, device=DEV).cpu(), torch.fft.fftfreq(n, d))
        torch.testing.assert_close(torch.fft.rfftfreq(n, d, device=DEV).cpu(), torch.fft.rfftfreq(n, d))


def test_aten_errors_match_cpu():
    cases = [(torch.ops.aten._fft_c2c, (torch.randn(4, 4), [1], 0, True)),
             (torch.ops.aten._fft_r2c, (torch.randn(4, 4, dtype=torch.complex64), [1], 0, True)),
             (torch.ops.aten._fft_c2r, (torch.randn(4, 4), [1], 0, 6))]
    for op, args in cases:
        with pytest.raises(Exception) as cpu:
            op(*args)
        with pytest.raises(type(cpu.value), match=str(cpu.value).split("\n")[0][:40]):
            op(args[0].to(DEV), *args[1:])
    for bad in ("fw", "sideways"):
        with pytest.raises(RuntimeError, match="Invalid normalization mode"):
            torch.fft.fft(torch.randn(4, device=DEV), norm=bad)
