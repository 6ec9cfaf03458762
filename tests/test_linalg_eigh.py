"""Symmetric eigendecomposition natively on neuron (runtime LINALG_EIGH,
cyclic Jacobi below n = 64, tridiagonal QL from there): linalg.eigh and linalg.eigvalsh against the CPU's LAPACK,
float32 and float64, UPLO "L"/"U" (the other triangle holds garbage),
batched, row- and column-major and strided inputs, zero-size, out=, the
CPU's errors, and backward through PyTorch's formula. Eigenvectors are
unique only up to sign, so they are compared by invariants: eigenvalues,
the residual ||A V - V diag(w)||, orthonormality, and |columns| for
distinct eigenvalues."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import layouts

pytestmark = pytest.mark.usefixtures("native_only")

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-11)}


def sym(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g, dtype=torch.float64)
    return (a + a.mT).to(dtype)


def check_decomposition(w, v, cw, cv, a):
    assert w.device.type == "neuron" and v.device.type == "neuron"
    assert w.shape == cw.shape and v.shape == cv.shape and w.dtype == cw.dtype and v.dtype == cv.dtype
    if v.numel() > 1:
        assert v.stride() == cv.stride()
    tol = TOL[cw.dtype]
    torch.testing.assert_close(w.cpu(), cw, **tol)
    wc, vc, ad = w.cpu().double(), v.cpu().double(), a.double()
    n = a.shape[-1]
    eps = torch.finfo(cw.dtype).eps
    scale = max(1.0, ad.abs().max().item())
    assert (ad @ vc - vc * wc.unsqueeze(-2)).abs().max() <= 50 * eps * n * scale
    assert (vc.mT @ vc - torch.eye(n, dtype=torch.float64)).abs().max() <= 50 * eps * n
    # Columns of distinct eigenvalues agree with the CPU's up to sign.
    torch.testing.assert_close(vc.abs(), cv.double().abs(), rtol=0, atol=1e-3 if cw.dtype == torch.float32 else 1e-8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 6, 6), (2, 2, 4, 4), (40, 40), (64, 64), (2, 100, 100)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_cpu(dtype, shape, uplo):
    a = sym(*shape, dtype=dtype, seed=1)
    garbage = a.clone()
    if uplo == "L":
        garbage.triu_(1).add_(a.tril())  # keep lower; corrupt strictly upper
        garbage = a.tril() + 7 * torch.ones_like(a).triu(1)
    else:
        garbage = a.triu() + 7 * torch.ones_like(a).tril(-1)
    for x, nx in layouts(garbage):
        w, v = torch.linalg.eigh(nx, UPLO=uplo)
        cw, cv = torch.linalg.eigh(x, UPLO=uplo)
        check_decomposition(w, v, cw, cv, a)
        ew = torch.linalg.eigvalsh(nx, UPLO=uplo)
        torch.testing.assert_close(ew.cpu(), torch.linalg.eigvalsh(x, UPLO=uplo), **TOL[dtype])


def test_repeated_eigenvalues():
    q, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    a = q @ torch.diag(torch.tensor([1.0, 2, 2, 2, 5, -1], dtype=torch.float64)) @ q.mT
    a = (a + a.mT) / 2
    w, v = torch.linalg.eigh(a.to("neuron"))
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(a), **TOL[torch.float64])
    vc = v.cpu()
    torch.testing.assert_close(vc @ torch.diag(w.cpu()) @ vc.mT, a, **TOL[torch.float64])


def test_out_and_zero_size():
    a = sym(5, 5, seed=2)
    w, v = torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.eigh(a.to("neuron"), out=(w, v))
    cw, cv = torch.linalg.eigh(a)
    check_decomposition(w, v, cw, cv, a)
    e = torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.eigvalsh(a.to("neuron"), out=e)
    torch.testing.assert_close(e.cpu(), cw, **TOL[torch.float64])
    for shape in ((0, 0), (3, 0, 0), (0, 4, 4)):
        z = torch.zeros(shape, dtype=torch.float64)
        w, v = torch.linalg.eigh(z.to("neuron"))
        cw, cv = torch.linalg.eigh(z)
        assert w.shape == cw.shape and v.shape == cv.shape


def test_errors_like_cpu():
    raises_like_cpu(torch.linalg.eigh, torch.ones(3, 4, dtype=torch.float64))
    raises_like_cpu(torch.linalg.eigh, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.linalg.eigh, torch.ones(3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.eigh, torch.ones(3, 3, dtype=torch.float64), UPLO="X")
    raises_like_cpu(torch.linalg.eigvalsh, torch.ones(2, 3, dtype=torch.float32))


@pytest.mark.parametrize("fn", [
    lambda a: torch.linalg.eigvalsh(a).sum(),
    lambda a: (torch.linalg.eigvalsh(a) ** 2).sum(),
    lambda a: (lambda w, v: (w.sin() + (v * v)[..., 0, :]).sum())(*torch.linalg.eigh(a)),
    lambda a: (lambda w, v: (v @ torch.diag_embed(w.exp()) @ v.mT).sum())(*torch.linalg.eigh(a, UPLO="U")),
])
def test_backward_matches_cpu(fn):
    a = sym(2, 5, 5, seed=3)
    ca = a.clone().requires_grad_()
    fn(ca).backward()
    na = a.to("neuron").requires_grad_()
    fn(na).backward()
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-8, atol=1e-9)


def test_ops_ran_natively(op_tracking):
    torch.linalg.eigh(sym(4, 4, seed=4).to("neuron"))
    assert "aten::_linalg_eigh" in torchneuron.get_executed_ops()
    assert torchneuron.get_fallback_ops() == {}
