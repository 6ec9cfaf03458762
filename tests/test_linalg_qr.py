"""Householder QR natively on neuron (runtime/src/ops/linalg/qr.c): geqrf,
linalg_householder_product, ormqr and linalg_qr against the CPU's LAPACK,
float32 and float64, batched, row- and column-major and strided inputs,
tall, square and wide, zero-size, out=, the CPU's errors, and backward
through PyTorch's formulas. Both follow LAPACK's sign rule (R's diagonal
entry is -sign(a) times the column norm), so values are compared directly,
with tolerances (the blocking differs); Q is also checked by its residuals
||Q R - A|| and ||Q^T Q - I||."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import rand, layouts

pytestmark = pytest.mark.usefixtures("native_only")

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=5e-4, atol=5e-5), torch.float64: dict(rtol=1e-9, atol=1e-11)}
SHAPES = [(1, 1), (5, 5), (7, 3), (3, 7), (2, 6, 4), (2, 3, 4, 6), (70, 70), (90, 40)]


def close(actual, expected, strides=True):
    assert actual.device.type == "neuron"
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    if strides and expected.numel() > 1:
        assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    torch.testing.assert_close(actual.cpu(), expected, **TOL[expected.dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_geqrf_matches_cpu(dtype, shape):
    a = rand(*shape, dtype=dtype, seed=1)
    for x, nx in layouts(a):
        qr, tau = torch.geqrf(nx)
        cqr, ctau = torch.geqrf(x)
        close(qr, cqr)
        close(tau, ctau)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_cpu_and_residuals(dtype, shape, mode):
    a = rand(*shape, dtype=dtype, seed=2)
    for x, nx in layouts(a):
        q, r = torch.linalg.qr(nx, mode=mode)
        cq, cr = torch.linalg.qr(x, mode=mode)
        close(r, cr)
        if mode == "r":
            assert q.shape == cq.shape == (0,)
            continue
        close(q, cq)
        m = shape[-2]
        eps = torch.finfo(dtype).eps
        qc, rc = q.cpu().double(), r.cpu().double()
        k = min(shape[-2], shape[-1]) if mode == "reduced" else m
        assert (qc @ rc - x.double()).abs().max() <= 30 * eps * max(shape[-2:]) * max(1, x.abs().max())
        assert (qc.mT @ qc - torch.eye(k, dtype=torch.float64)).abs().max() <= 30 * eps * m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,k", [((5, 5), 5), ((7, 3), 3), ((7, 4), 2), ((2, 6, 4), 4), ((80, 60), 60),
                                     ((3, 0), 0)])
def test_householder_product_matches_cpu(dtype, shape, k):
    a = rand(*shape, dtype=dtype, seed=3)
    v, tau = torch.geqrf(a)
    tau = tau[..., :k]
    for x, nx in layouts(v):
        close(torch.linalg.householder_product(nx, tau.to("neuron")), torch.linalg.householder_product(x, tau))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("m,n,c", [(5, 5, 3), (7, 3, 4), (4, 6, 2), (90, 70, 50)])
def test_ormqr_matches_cpu(dtype, left, transpose, m, n, c):
    a = rand(2, m, n, dtype=dtype, seed=4)
    v, tau = torch.geqrf(a)
    k = min(m, n)
    # tau.shape[-1] == min(other's reflected dim, n): other's dim is m.
    other = rand(2, m, c, dtype=dtype, seed=5) if left else rand(2, c, m, dtype=dtype, seed=5)
    for x, nx in layouts(other):
        ours = torch.ormqr(v.to("neuron"), tau[..., :k].to("neuron"), nx, left=left, transpose=transpose)
        close(ours, torch.ormqr(v, tau[..., :k], x, left=left, transpose=transpose))


def test_out_variants():
    a = rand(6, 4, seed=6)
    na = a.to("neuron")
    q, r = torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.qr(na, mode="complete", out=(q, r))
    cq, cr = torch.linalg.qr(a, mode="complete")
    close(q, cq), close(r, cr)
    qa, ta = torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.float64)
    torch.geqrf(na, out=(qa, ta))
    cqa, cta = torch.geqrf(a)
    close(qa, cqa), close(ta, cta)
    h = torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.householder_product(qa, ta, out=h)
    close(h, torch.linalg.householder_product(cqa, cta))
    o = torch.empty(0, device="neuron", dtype=torch.float64)
    other = rand(6, 3, seed=7)
    torch.ormqr(qa, ta, other.to("neuron"), transpose=True, out=o)
    close(o, torch.ormqr(cqa, cta, other, transpose=True))


def test_zero_size():
    for shape in ((0, 0), (3, 0), (0, 3), (2, 0, 4), (0, 4, 4)):
        a = torch.zeros(shape, dtype=torch.float64)
        n = a.to("neuron")
        for mode in ("reduced", "complete", "r"):
            q, r = torch.linalg.qr(n, mode=mode)
            cq, cr = torch.linalg.qr(a, mode=mode)
            assert q.shape == cq.shape and r.shape == cr.shape
            close(q, cq, strides=False), close(r, cr, strides=False)
        qr, tau = torch.geqrf(n)
        cqr, ctau = torch.geqrf(a)
        assert qr.shape == cqr.shape and tau.shape == ctau.shape


def test_errors_like_cpu():
    f = torch.ones(4, 3, dtype=torch.float64)
    raises_like_cpu(torch.geqrf, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.geqrf, torch.ones(3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.qr, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.linalg.qr, torch.ones(3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.qr, f, mode="x")
    raises_like_cpu(torch.linalg.householder_product, torch.ones(3, 4, dtype=torch.float64),
                    torch.ones(2, dtype=torch.float64))
    raises_like_cpu(torch.linalg.householder_product, f, torch.ones(4, dtype=torch.float64))
    raises_like_cpu(torch.linalg.householder_product, torch.ones(5, 4, 3, dtype=torch.float64),
                    torch.ones(4, 3, dtype=torch.float64))
    raises_like_cpu(torch.linalg.householder_product, f, torch.ones(3, dtype=torch.float32))
    raises_like_cpu(torch.linalg.householder_product, f.long(), torch.ones(3, dtype=torch.long))
    raises_like_cpu(torch.ormqr, f, torch.ones(2, dtype=torch.float64), torch.ones(5, 2, dtype=torch.float64))
    raises_like_cpu(torch.ormqr, f, torch.ones(2, dtype=torch.float64), torch.ones(4, 2, dtype=torch.float64))
    raises_like_cpu(torch.ormqr, f, torch.ones(3, dtype=torch.float64), torch.ones(4, 2, dtype=torch.float32))
    raises_like_cpu(torch.ormqr, f.long(), torch.ones(3, dtype=torch.long), torch.ones(4, 2, dtype=torch.long))
    raises_like_cpu(torch.ormqr, torch.ones(5, 4, 3, dtype=torch.float64), torch.ones(3, dtype=torch.float64),
                    torch.ones(5, 4, 2, dtype=torch.float64))


@pytest.mark.parametrize("fn", [
    lambda a, c: sum(t.sum() for t in torch.linalg.qr(a)),
    lambda a, c: sum((t * t).sum() for t in torch.linalg.qr(a[..., :4, :])),  # wide
    lambda a, c: torch.linalg.qr(a.mT[..., :, :5], mode="complete")[0].sum(),  # square
    lambda a, c: torch.linalg.householder_product(a, a[..., 0, :3] * 0.5).sum(),
    lambda a, c: torch.ormqr(a, a[..., 0, :] * 0.5, c, left=True, transpose=True).sum(),
    lambda a, c: torch.ormqr(a, a[..., 0, :] * 0.5, c.mT, left=False).sum(),
])
def test_backward_matches_cpu(fn):
    a = rand(2, 6, 5, seed=8)
    c = rand(2, 6, 3, seed=9)
    ca, cc = a.clone().requires_grad_(), c.clone().requires_grad_()
    fn(ca, cc).backward()
    na, nc = a.to("neuron").requires_grad_(), c.to("neuron").requires_grad_()
    fn(na, nc).backward()
    torch.testing.assert_close(na.grad.cpu(), ca.grad, **TOL[torch.float64])
    if cc.grad is not None:
        torch.testing.assert_close(nc.grad.cpu(), cc.grad, **TOL[torch.float64])


def test_large_single_matrix():
    # Blocked, with the trailing updates on the GEMM.
    a = rand(300, 260, seed=10)
    q, r = torch.linalg.qr(a.to("neuron"))
    cq, cr = torch.linalg.qr(a)
    close(q, cq), close(r, cr)


def test_ops_ran_natively(op_tracking):
    a = rand(5, 4, seed=11).to("neuron")
    torch.linalg.qr(a)
    ops = torchneuron.get_executed_ops()
    assert "aten::linalg_qr" in ops, ops
    assert torchneuron.get_fallback_ops() == {}
