"""General eigendecomposition natively on neuron (runtime LINALG_EIG:
Hessenberg reduction, shifted QR, back substitution): linalg.eig and
linalg.eigvals against the CPU's LAPACK geev, float32, float64, complex64 and
complex128, batched, row- and column-major and strided, conjugate views,
zero-size, out=, the CPU's errors, and backward through PyTorch's formula.
geev's eigenvalue order follows its balancing and QR sweeps, and a real
eigenvector's sign is arbitrary, so results are compared by invariants:
eigenvalues as sets, the residual ||A V - V diag(w)||, unit columns, and
columns of distinct eigenvalues equal to the CPU's up to a phase; the order
is compared where it is sure to be geev's (triangular and diagonal input;
elsewhere it is the same on most small matrices, as the balancing, shifts and
deflation are geev's, but rounding may converge another eigenvalue first)."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import layouts

pytestmark = pytest.mark.usefixtures("native_only")

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
EPS = {torch.complex64: 1.2e-7, torch.complex128: 2.3e-16}


def rand(*shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.complex128 if dtype.is_complex else torch.float64).to(dtype)


def matching(w, cw):
    """Index i -> j pairing each of w's eigenvalues (one matrix) with the
    nearest unused one of cw's, and the largest distance."""
    w, cw = w.to(torch.complex128), cw.to(torch.complex128)
    used, order, worst = set(), [], 0.0
    for x in w:
        d = (cw - x).abs()
        for j in used:
            d[j] = float("inf")
        j = int(d.argmin())
        used.add(j)
        order.append(j)
        worst = max(worst, d[j].item())
    return order, worst


def check_eig(w, v, cw, cv, a, vectors_like_cpu=True):
    assert w.device.type == "neuron" and v.device.type == "neuron"
    assert w.shape == cw.shape and v.shape == cv.shape and w.dtype == cw.dtype and v.dtype == cv.dtype
    assert v.stride() == cv.stride()
    eps, n = EPS[cw.dtype], a.shape[-1]
    ad, wc, vc = a.to(torch.complex128), w.cpu().to(torch.complex128), v.cpu().to(torch.complex128)
    scale = max(1.0, ad.abs().max().item())
    assert (ad @ vc - vc * wc.unsqueeze(-2)).abs().max() <= 50 * eps * n * scale
    torch.testing.assert_close(vc.norm(dim=-2), torch.ones(wc.shape, dtype=torch.float64), rtol=0, atol=50 * eps * n)
    flat_w, flat_cw = wc.reshape(-1, n), cw.to(torch.complex128).reshape(-1, n)
    flat_v, flat_cv = vc.reshape(-1, n, n), cv.to(torch.complex128).reshape(-1, n, n)
    for b in range(flat_w.shape[0]):
        order, worst = matching(flat_w[b], flat_cw[b])
        assert worst <= 1e3 * eps * n * scale, (flat_w[b], flat_cw[b])
        if vectors_like_cpu:  # distinct eigenvalues: the same vector up to a phase
            overlap = (flat_v[b].conj() * flat_cv[b][:, order]).sum(-2).abs()
            torch.testing.assert_close(overlap, torch.ones(n, dtype=torch.float64), rtol=0, atol=1e3 * eps * n)
    if not a.dtype.is_complex:  # complex pairs exactly conjugate, positive imaginary part first
        for b in range(flat_w.shape[0]):
            k = 0
            while k < n:
                if flat_w[b, k].imag != 0:
                    assert flat_w[b, k].imag > 0 and flat_w[b, k + 1] == flat_w[b, k].conj()
                    assert torch.equal(flat_v[b, :, k + 1], flat_v[b, :, k].conj())
                    k += 1
                k += 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 6, 6), (2, 2, 4, 4), (40, 40)])
def test_eig_matches_cpu(dtype, shape):
    a = rand(*shape, dtype=dtype, seed=1)
    for x, nx in layouts(a):
        w, v = torch.linalg.eig(nx)
        cw, cv = torch.linalg.eig(x)
        check_eig(w, v, cw, cv, a)
        ew = torch.linalg.eigvals(nx)
        assert ew.dtype == cw.dtype and ew.shape == cw.shape
        torch.testing.assert_close(ew.cpu(), w.cpu(), rtol=0, atol=100 * EPS[cw.dtype] * a.shape[-1])


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_conjugate_view(dtype):
    a = rand(3, 5, 5, dtype=dtype, seed=2)
    w, v = torch.linalg.eig(a.to("neuron").conj())
    cw, cv = torch.linalg.eig(a.conj())
    check_eig(w, v, cw, cv, a.conj().resolve_conj())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_real_matrices_with_complex_pairs(dtype):
    # rotations scaled and shifted: eigenvalues c +- i s, exactly conjugate
    t = torch.tensor([0.3, 1.1, 2.0], dtype=torch.float64)
    blocks = torch.stack([torch.stack([t.cos(), -t.sin()], -1), torch.stack([t.sin(), t.cos()], -1)], -2)
    a = torch.block_diag(*blocks, torch.tensor([[4.0]], dtype=torch.float64))
    q, _ = torch.linalg.qr(rand(7, 7, dtype=torch.float64, seed=3))
    a = (q @ a @ q.mT).to(dtype)
    w, v = torch.linalg.eig(a.to("neuron"))
    cw, cv = torch.linalg.eig(a)
    check_eig(w, v, cw, cv, a)
    assert (w.cpu().imag != 0).sum() == 6


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_and_diagonal_give_the_cpus_order(dtype):
    # geev's balancing permutes a lower triangular matrix's order into reverse
    for a in (rand(6, 6, dtype=dtype, seed=4).triu(), rand(6, 6, dtype=dtype, seed=4).tril(),
              torch.diag_embed(rand(2, 5, dtype=dtype, seed=5))):
        w, v = torch.linalg.eig(a.to("neuron"))
        cw, cv = torch.linalg.eig(a)
        torch.testing.assert_close(w.cpu(), cw, rtol=0, atol=10 * EPS[cw.dtype])
        torch.testing.assert_close(torch.linalg.eigvals(a.to("neuron")).cpu(), cw, rtol=0, atol=10 * EPS[cw.dtype])
        check_eig(w, v, cw, cv, a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeated_and_defective_eigenvalues(dtype):
    # a Jordan block and a matrix similar to diag(1, 2, 2, 2, 5, -1):
    # eigenvalues only (a defective matrix has no basis of eigenvectors)
    jordan = (2 * torch.eye(4, dtype=torch.float64) + torch.diag(torch.ones(3, dtype=torch.float64), 1)).to(dtype)
    s = rand(6, 6, dtype=torch.float64, seed=6) + 3 * torch.eye(6, dtype=torch.float64)
    rep = (s @ torch.diag(torch.tensor([1.0, 2, 2, 2, 5, -1], dtype=torch.float64)) @ torch.linalg.inv(s)).to(dtype)
    for a, tol in ((jordan, 1e-3 if dtype in (torch.float64, torch.complex128) else 3e-2), (rep, 1e-4)):
        w = torch.linalg.eigvals(a.to("neuron")).cpu()
        _, worst = matching(w, torch.linalg.eigvals(a))
        assert worst <= tol
        nw, nv = torch.linalg.eig(a.to("neuron"))
        assert torch.isfinite(torch.view_as_real(nv.cpu())).all()
        torch.testing.assert_close(nv.cpu().norm(dim=-2), torch.ones(a.shape[-1], dtype=nv.real.dtype))


def test_out_and_zero_size():
    a = rand(5, 5, dtype=torch.float64, seed=7)
    w = torch.empty(0, device="neuron", dtype=torch.complex128)
    v = torch.empty(0, device="neuron", dtype=torch.complex128)
    torch.linalg.eig(a.to("neuron"), out=(w, v))
    cw, cv = torch.linalg.eig(a)
    check_eig(w, v, cw, cv, a)
    e = torch.empty(0, device="neuron", dtype=torch.complex128)
    torch.linalg.eigvals(a.to("neuron"), out=e)
    torch.testing.assert_close(e.cpu(), w.cpu())
    # a wider result dtype is allowed, as on the CPU
    e = torch.empty(0, device="neuron", dtype=torch.complex128)
    torch.linalg.eigvals(a.float().to("neuron"), out=e)
    torch.testing.assert_close(e.cpu(), w.cpu(), rtol=1e-5, atol=1e-5)
    for shape in ((0, 0), (3, 0, 0), (0, 4, 4)):
        for dtype in (torch.float32, torch.complex128):
            z = torch.zeros(shape, dtype=dtype)
            w, v = torch.linalg.eig(z.to("neuron"))
            cw, cv = torch.linalg.eig(z)
            assert w.shape == cw.shape and v.shape == cv.shape and w.dtype == cw.dtype
            assert torch.linalg.eigvals(z.to("neuron")).shape == cw.shape


def test_errors_like_cpu():
    raises_like_cpu(torch.linalg.eig, torch.ones(3, 4, dtype=torch.float64))
    raises_like_cpu(torch.linalg.eig, torch.ones(3, 3, dtype=torch.int32))
    raises_like_cpu(torch.linalg.eig, torch.ones(3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.eig, torch.ones(3, 3, dtype=torch.float16))
    raises_like_cpu(torch.linalg.eig, torch.tensor([[1.0, float("nan")], [2.0, 3.0]]))
    raises_like_cpu(torch.linalg.eig, torch.tensor([[1.0, 2.0], [float("inf"), 3.0]]))
    raises_like_cpu(torch.linalg.eigvals, torch.ones(2, 3, dtype=torch.float32))
    raises_like_cpu(torch.linalg.eigvals, torch.ones(3, dtype=torch.complex64))
    raises_like_cpu(lambda a: torch.linalg.eig(a, out=(torch.empty(0, device=a.device),
                                                      torch.empty(0, device=a.device, dtype=torch.cfloat))),
                    torch.ones(2, 2))
    raises_like_cpu(lambda a: torch.linalg.eigvals(a, out=torch.empty(0, device=a.device, dtype=torch.float64)),
                    torch.ones(2, 2, dtype=torch.complex128))
    # the CPU's LAPACK may fault on a non-finite input to eigvals: refused here
    with pytest.raises(RuntimeError, match="eigvals: input tensor should not contain infs or NaNs"):
        torch.linalg.eigvals(torch.full((3, 3), float("nan"), device="neuron"))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("fn", [
    lambda a: torch.linalg.eigvals(a).abs().sum(),
    lambda a: (lambda w, v: (w.real + w.imag.abs() + v.abs()[..., 0, :]).sum())(*torch.linalg.eig(a)),
    lambda a: (lambda w, v: (v @ torch.diag_embed(w.exp()) @ torch.linalg.inv(v)).real.sum())(*torch.linalg.eig(a)),
])
def test_backward_matches_cpu(dtype, fn):
    a = rand(2, 4, 4, dtype=dtype, seed=8)
    ca = a.clone().requires_grad_()
    fn(ca).backward()
    na = a.to("neuron").requires_grad_()
    fn(na).backward()
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-7, atol=1e-8)


def test_ops_ran_natively(op_tracking):
    a = rand(4, 4, dtype=torch.float32, seed=9).to("neuron")
    torch.linalg.eig(a)
    torch.linalg.eigvals(a.to(torch.complex64))
    executed = torchneuron.get_executed_ops()
    assert "aten::linalg_eig" in executed and "aten::_linalg_eigvals" in executed
    assert torchneuron.get_fallback_ops() == {}
