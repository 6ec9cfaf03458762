"""Singular value decomposition natively on neuron (runtime LINALG_SVD: QR +
one-sided Jacobi in double): linalg.svd and linalg.svdvals against the CPU's
LAPACK, float32 and float64, square, tall, wide, batched, row- and
column-major and strided inputs, reduced and full, zero-size, out=,
rank-deficient and ill-conditioned matrices, the CPU's errors, backward
through PyTorch's formula, and the composites built on _linalg_svd (pinv,
matrix_rank, matrix_norm and norm with ord 2, -2 and "nuc", cond), all with
no CPU fallback. Singular vectors are unique only up to sign, so they are
compared by invariants: the residual ||A - U diag(S) Vh||, orthonormality,
and the columns of distinct singular values up to sign."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import rand, layouts

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-11, atol=1e-12)}


def check_svd(u, s, vh, cu, cs, cvh, a, full):
    for t, c in ((u, cu), (s, cs), (vh, cvh)):
        assert t.device.type == "neuron" and t.shape == c.shape and t.dtype == c.dtype
        if t.numel() > 1:
            assert t.stride() == c.stride()
    dtype = cs.dtype
    torch.testing.assert_close(s.cpu(), cs, **TOL[dtype])
    m, n = a.shape[-2:]
    k = min(m, n)
    uc, sc, vc, ad = u.cpu().double(), s.cpu().double(), vh.cpu().double(), a.double()
    eps = torch.finfo(dtype).eps
    scale = max(1.0, ad.abs().max().item())
    rec = uc[..., :, :k] * sc.unsqueeze(-2) @ vc[..., :k, :]
    assert (rec - ad).abs().max() <= 50 * eps * max(m, n) * scale
    eye = lambda r: torch.eye(r, dtype=torch.float64)  # noqa: E731
    assert (uc.mT @ uc - eye(uc.shape[-1])).abs().max() <= 50 * eps * max(m, 1)
    assert (vc @ vc.mT - eye(vc.shape[-2])).abs().max() <= 50 * eps * max(n, 1)
    # Columns of distinct singular values agree with the CPU's up to sign.
    tol = 1e-3 if dtype == torch.float32 else 1e-8
    cuk, cvk = cu.double()[..., :, :k], cvh.double()[..., :k, :]
    sign = torch.sign((uc[..., :, :k] * cuk).sum(-2, keepdim=True))
    torch.testing.assert_close(uc[..., :, :k] * sign, cuk, rtol=0, atol=tol)
    torch.testing.assert_close(vc[..., :k, :] * sign.mT, cvk, rtol=0, atol=tol)


SHAPES = [(1, 1), (2, 2), (5, 5), (5, 3), (3, 5), (3, 4, 4), (2, 2, 6, 2), (2, 3, 7), (40, 17), (17, 40), (1, 7)]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_cpu(dtype, shape, full):
    a = rand(*shape, dtype=dtype, seed=1)
    for x, nx in layouts(a):
        u, s, vh = torch.linalg.svd(nx, full_matrices=full)
        cu, cs, cvh = torch.linalg.svd(x, full_matrices=full)
        check_svd(u, s, vh, cu, cs, cvh, a, full)
        torch.testing.assert_close(torch.linalg.svdvals(nx).cpu(), torch.linalg.svdvals(x), **TOL[dtype])


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,rank", [(6, 6, 3), (9, 4, 2), (4, 9, 1), (5, 5, 0)])
def test_rank_deficient(dtype, m, n, rank):
    a = (rand(m, rank, seed=2) @ rand(rank, n, seed=3)).to(dtype)
    for full in (False, True):
        u, s, vh = torch.linalg.svd(a.to("neuron"), full_matrices=full)
        cu, cs, cvh = torch.linalg.svd(a, full_matrices=full)
        torch.testing.assert_close(s.cpu(), cs, **TOL[dtype])
        uc, vc = u.cpu().double(), vh.cpu().double()
        eps = torch.finfo(dtype).eps
        k = min(m, n)
        rec = uc[:, :k] * s.cpu().double() @ vc[:k]
        assert (rec - a.double()).abs().max() <= 50 * eps * max(m, n) * max(1.0, a.abs().max().item())
        assert (uc.mT @ uc - torch.eye(uc.shape[1], dtype=torch.float64)).abs().max() <= 50 * eps * m
        assert (vc @ vc.mT - torch.eye(vc.shape[0], dtype=torch.float64)).abs().max() <= 50 * eps * n


@pytest.mark.usefixtures("native_only")
def test_ill_conditioned_and_scaled():
    n = 10
    i = torch.arange(n, dtype=torch.float64)
    hilbert = 1 / (i[:, None] + i[None, :] + 1)  # condition ~1.6e13
    s = torch.linalg.svdvals(hilbert.to("neuron")).cpu()
    cs = torch.linalg.svdvals(hilbert)
    torch.testing.assert_close(s, cs, rtol=1e-12, atol=1e-15)
    # Graded: each value to its own relative accuracy (Jacobi on the QR's R).
    g = torch.diag(torch.logspace(0, -12, 8, dtype=torch.float64)) @ torch.linalg.qr(rand(8, 8, seed=4))[0]
    torch.testing.assert_close(torch.linalg.svdvals(g.to("neuron")).cpu(), torch.linalg.svdvals(g), rtol=1e-9, atol=0)
    for big in (1e-200, 1e200):
        a = rand(6, 4, seed=5) * big
        torch.testing.assert_close(torch.linalg.svdvals(a.to("neuron")).cpu(), torch.linalg.svdvals(a), rtol=1e-12, atol=0)
    a = rand(6, 4, dtype=torch.float32, seed=6) * 1e30
    torch.testing.assert_close(torch.linalg.svdvals(a.to("neuron")).cpu(), torch.linalg.svdvals(a), rtol=1e-5, atol=0)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (0, 3), (2, 0, 4), (0, 4, 3), (2, 4, 0)])
@pytest.mark.parametrize("full", [False, True])
def test_zero_size(shape, full):
    a = torch.zeros(shape, dtype=torch.float64)
    got = torch.linalg.svd(a.to("neuron"), full_matrices=full)
    want = torch.linalg.svd(a, full_matrices=full)
    for t, c in zip(got, want):
        assert t.shape == c.shape and t.dtype == c.dtype
        torch.testing.assert_close(t.cpu(), c)
    assert torch.linalg.svdvals(a.to("neuron")).shape == torch.linalg.svdvals(a).shape


@pytest.mark.usefixtures("native_only")
def test_out_and_compute_uv_false():
    a = rand(2, 5, 3, seed=7)
    u, s, vh = (torch.empty(0, device="neuron", dtype=torch.float64) for _ in range(3))
    torch.linalg.svd(a.to("neuron"), out=(u, s, vh))
    cu, cs, cvh = torch.linalg.svd(a)
    check_svd(u, s, vh, cu, cs, cvh, a, False)
    e = torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.svdvals(a.to("neuron"), out=e)
    torch.testing.assert_close(e.cpu(), cs, **TOL[torch.float64])
    got = torch.ops.aten._linalg_svd(a.to("neuron"), compute_uv=False)
    want = torch.ops.aten._linalg_svd(a, compute_uv=False)
    for t, c in zip(got, want):
        assert t.shape == c.shape
    torch.testing.assert_close(got[1].cpu(), want[1], **TOL[torch.float64])


def test_errors_like_cpu():
    nan = torch.ones(3, 3, dtype=torch.float64)
    nan[1, 2] = float("nan")
    raises_like_cpu(torch.linalg.svd, nan)
    raises_like_cpu(torch.linalg.svdvals, nan.float())
    raises_like_cpu(torch.linalg.svd, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.linalg.svd, torch.ones(3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.svd, torch.ones(3, 3, dtype=torch.float16))
    raises_like_cpu(torch.linalg.svd, torch.ones(3, 3), driver="gesvd")
    assert torchneuron.get_fallback_ops() == {}


@pytest.mark.parametrize("fn", [
    lambda a: torch.linalg.svdvals(a).sum(),
    lambda a: (torch.linalg.svdvals(a) ** 2).sum(),
    lambda a: (lambda u, s, vh: (u @ vh).sin().sum())(*torch.linalg.svd(a, full_matrices=False)),
    lambda a: (lambda u, s, vh: ((u * s.sqrt().unsqueeze(-2)) @ vh).pow(2).sum())(*torch.linalg.svd(a, full_matrices=False)),
])
@pytest.mark.parametrize("shape", [(2, 5, 5), (6, 4), (3, 7)])
def test_backward_matches_cpu(fn, shape):
    a = rand(*shape, seed=8)
    ca = a.clone().requires_grad_()
    fn(ca).backward()
    torchneuron.clear_op_tracking()
    na = a.to("neuron").requires_grad_()
    fn(na).backward()
    assert torchneuron.get_fallback_ops() == {}
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-8, atol=1e-9)


COMPOSITES = [
    ("pinv", lambda a: torch.linalg.pinv(a)),
    ("pinv_hermitian_false_atol", lambda a: torch.linalg.pinv(a, atol=1e-3, rtol=0.1)),
    ("matrix_rank", lambda a: torch.linalg.matrix_rank(a)),
    ("matrix_norm_2", lambda a: torch.linalg.matrix_norm(a, ord=2)),
    ("matrix_norm_-2", lambda a: torch.linalg.matrix_norm(a, ord=-2)),
    ("matrix_norm_nuc", lambda a: torch.linalg.matrix_norm(a, ord="nuc")),
    ("norm_2", lambda a: torch.linalg.norm(a, ord=2, dim=(-2, -1))),
    ("norm_nuc", lambda a: torch.linalg.norm(a, ord="nuc", dim=(-2, -1))),
    ("cond", lambda a: torch.linalg.cond(a)),
    ("cond_-2", lambda a: torch.linalg.cond(a, p=-2)),
]


@pytest.mark.parametrize("name,fn", COMPOSITES, ids=[c[0] for c in COMPOSITES])
@pytest.mark.parametrize("dtype", DTYPES)
def test_composites_native(name, fn, dtype, op_tracking):
    a = rand(3, 5, 4, dtype=dtype, seed=9)
    if name == "matrix_rank":
        a[1] = (rand(5, 2, seed=10) @ rand(2, 4, seed=11)).to(dtype)
    torchneuron.clear_op_tracking()
    got = fn(a.to("neuron"))
    assert "aten::_linalg_svd" in torchneuron.get_executed_ops()
    assert torchneuron.get_fallback_ops() == {}
    want = fn(a)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(got.cpu(), want, **tol)
    if name == "matrix_rank":
        return
    ca = a.clone().requires_grad_()
    fn(ca).sum().backward()
    na = a.to("neuron").requires_grad_()
    torchneuron.clear_op_tracking()
    fn(na).sum().backward()
    assert torchneuron.get_fallback_ops() == {}
    torch.testing.assert_close(na.grad.cpu(), ca.grad, **tol)


def test_complex_still_falls_back_correctly():
    a = torch.randn(4, 3, dtype=torch.complex128)
    u, s, vh = torch.linalg.svd(a.to("neuron"), full_matrices=False)
    cs = torch.linalg.svdvals(a)
    torch.testing.assert_close(s.cpu(), cs)
    torch.testing.assert_close((u * s.to(u.dtype).unsqueeze(-2) @ vh).cpu(), a)


def test_ops_ran_natively(op_tracking):
    torch.linalg.svd(rand(4, 3, seed=12).to("neuron"))
    assert "aten::_linalg_svd" in torchneuron.get_executed_ops()
    assert torchneuron.get_fallback_ops() == {}
