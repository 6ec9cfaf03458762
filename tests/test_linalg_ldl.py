"""LDL^T natively on neuron (runtime LINALG_LDL_FACTOR / LINALG_LDL_SOLVE:
Bunch-Kaufman in LAPACK sytrf's convention): linalg.ldl_factor_ex,
linalg.ldl_factor and linalg.ldl_solve against the CPU, float32 and
float64, hermitian=False and True (the same for real dtypes), square sizes
that take 1x1 and 2x2 pivots, batched, row- and column-major and strided
inputs (only the lower triangle is read), zero-size, out=, singular D
(info), broadcast right-hand sides, the CPU's errors, with no CPU fallback.
LD and pivots are compared with the CPU's exactly (pivots) and to rounding
(LD) on matrices whose pivot choices are clear; where ties make the choice
ambiguous the factorisation is checked by solving with it."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import rand, layouts

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-11)}


def check_factor(got, want, dtype):
    for g, w in zip(got, want):
        assert g.device.type == "neuron" and g.shape == w.shape and g.dtype == w.dtype
        if g.numel() > 1:
            assert g.stride() == w.stride()
    assert torch.equal(got[1].cpu(), want[1]), (got[1], want[1])
    torch.testing.assert_close(got[0].cpu(), want[0], **TOL[dtype])
    assert torch.equal(got[2].cpu(), want[2])


SHAPES = [(1, 1), (2, 2), (3, 3), (5, 5), (4, 6, 6), (2, 3, 8, 8), (33, 33)]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_factor_matches_cpu(dtype, hermitian, shape):
    a = rand(*shape, dtype=dtype, seed=1)  # not symmetric: only the lower triangle counts
    for ca, na in layouts(a):
        want = torch.linalg.ldl_factor_ex(ca, hermitian=hermitian)
        check_factor(torch.linalg.ldl_factor_ex(na, hermitian=hermitian), want, dtype)
    LD, piv = torch.linalg.ldl_factor(a.to("neuron"), hermitian=hermitian)
    cLD, cpiv = torch.linalg.ldl_factor(a, hermitian=hermitian)
    assert torch.equal(piv.cpu(), cpiv)
    torch.testing.assert_close(LD.cpu(), cLD, **TOL[dtype])


@pytest.mark.usefixtures("native_only")
def test_two_by_two_pivots_and_interchanges():
    a = torch.tensor([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]], dtype=torch.float64)
    got, want = torch.linalg.ldl_factor_ex(a.to("neuron")), torch.linalg.ldl_factor_ex(a)
    check_factor(got, want, torch.float64)
    assert want.pivots.tolist() == [-3, -3, 3]
    # Random indefinite matrices of moderate size take several 2x2 blocks.
    a = rand(3, 24, 24, seed=5)
    want = torch.linalg.ldl_factor_ex(a)
    assert (want.pivots < 0).any()
    check_factor(torch.linalg.ldl_factor_ex(a.to("neuron")), want, torch.float64)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_by_solving(dtype):
    # Equal entries make the pivot choice a tie; the factorisation is
    # checked by what it solves.
    for a in (torch.ones(4, 4, dtype=dtype) + torch.eye(4, dtype=dtype),
              torch.tensor([[0.0, 1, 1], [1, 0, 1], [1, 1, 0]], dtype=dtype),
              torch.tensor([[1.0, 2, 0], [2, 1, 2], [0, 2, 1]], dtype=dtype)):
        b = rand(a.shape[-1], 2, dtype=dtype, seed=3)
        LD, piv = torch.linalg.ldl_factor(a.to("neuron"))
        x = torch.linalg.ldl_solve(LD, piv, b.to("neuron")).cpu()
        torch.testing.assert_close(a @ x, b, **TOL[dtype])


@pytest.mark.usefixtures("native_only")
def test_zero_size_and_out():
    for shape in ((0, 0), (2, 0, 0)):
        a = torch.zeros(shape, dtype=torch.float64)
        check_factor(torch.linalg.ldl_factor_ex(a.to("neuron")), torch.linalg.ldl_factor_ex(a), torch.float64)
    a = rand(2, 5, 5, seed=2)
    outs = (torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.int32),
            torch.empty(0, device="neuron", dtype=torch.int32))
    got = torch.linalg.ldl_factor_ex(a.to("neuron"), out=outs)
    assert got[0] is outs[0]
    check_factor(got, torch.linalg.ldl_factor_ex(a), torch.float64)
    LD, piv = torch.linalg.ldl_factor(a)
    b = rand(2, 5, 3, seed=4)
    out = torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.ldl_solve(LD.to("neuron"), piv.to("neuron"), b.to("neuron"), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.ldl_solve(LD, piv, b), **TOL[torch.float64])


@pytest.mark.usefixtures("native_only")
def test_singular_info_like_cpu():
    a = torch.stack([rand(3, 3, seed=6), torch.zeros(3, 3, dtype=torch.float64)])
    check_factor(torch.linalg.ldl_factor_ex(a.to("neuron")), torch.linalg.ldl_factor_ex(a), torch.float64)
    raises_like_cpu(lambda t: torch.linalg.ldl_factor_ex(t, check_errors=True), a)
    raises_like_cpu(torch.linalg.ldl_factor, torch.zeros(3, 3, dtype=torch.float64))


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ashape,bshape", [((5, 5), (5, 2)), ((3, 6, 6), (3, 6, 1)), ((3, 6, 6), (6, 4)),
                                           ((2, 7, 7), (1, 7, 3)), ((4, 4), (2, 3, 4, 2)), ((4, 4), (4, 0)),
                                           ((0, 3, 3), (0, 3, 2))])
def test_solve_matches_cpu(dtype, ashape, bshape):
    a, b = rand(*ashape, dtype=dtype, seed=7), rand(*bshape, dtype=dtype, seed=8)
    LD, piv = torch.linalg.ldl_factor(a)
    want = torch.linalg.ldl_solve(LD, piv, b)
    for (cLD, nLD), (cb, nb) in zip(layouts(LD), layouts(b)):
        got = torch.linalg.ldl_solve(nLD, piv.to("neuron"), nb)
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.numel() > 1:
            assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, **TOL[dtype])
    got = torch.linalg.ldl_solve(LD.to("neuron"), piv.long().to("neuron"), b.to("neuron"))  # int64 pivots
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])


@pytest.mark.usefixtures("native_only")
def test_solve_broadcasts_a_single_factorisation():
    # LD with batch 1 against B with batch 2 (the CPU's kernel crashes on
    # this case in torch 2.13): each right-hand side against the CPU's solve
    # with the one factorisation.
    a, b = rand(1, 7, 7, seed=9), rand(2, 7, 3, seed=10)
    LD, piv = torch.linalg.ldl_factor(a)
    got = torch.linalg.ldl_solve(LD.to("neuron"), piv.to("neuron"), b.to("neuron")).cpu()
    assert got.shape == (2, 7, 3)
    for i in range(2):
        torch.testing.assert_close(got[i], torch.linalg.ldl_solve(LD[0], piv[0], b[i]), **TOL[torch.float64])


@pytest.mark.usefixtures("native_only")
def test_errors_like_cpu():
    raises_like_cpu(torch.linalg.ldl_factor_ex, torch.ones(3, 4))
    raises_like_cpu(torch.linalg.ldl_factor_ex, torch.ones(3))
    raises_like_cpu(torch.linalg.ldl_factor_ex, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.linalg.ldl_factor_ex, torch.ones(3, 3, dtype=torch.float16))
    LD, piv = torch.linalg.ldl_factor(rand(3, 3))
    raises_like_cpu(torch.linalg.ldl_solve, LD, piv, rand(4, 2))
    raises_like_cpu(torch.linalg.ldl_solve, LD, piv, rand(3, 2, dtype=torch.float32))
    raises_like_cpu(torch.linalg.ldl_solve, LD, piv, rand(3))


def test_complex_still_falls_back_correctly():
    a = torch.randn(4, 4, dtype=torch.complex128)
    a = a + a.mT
    got = torch.linalg.ldl_factor_ex(a.to("neuron"))
    want = torch.linalg.ldl_factor_ex(a)
    torch.testing.assert_close(got[0].cpu(), want[0])
    assert torch.equal(got[1].cpu(), want[1])


def test_ops_ran_natively(op_tracking):
    a = rand(4, 4).to("neuron")
    LD, piv = torch.linalg.ldl_factor(a)
    torch.linalg.ldl_solve(LD, piv, rand(4, 1).to("neuron"))
    ops = torchneuron.get_executed_ops()
    assert "aten::linalg_ldl_factor_ex" in ops and "aten::linalg_ldl_solve" in ops
    assert torchneuron.get_fallback_ops() == {}


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(96, 96), (2, 130, 130), (300, 300)])
def test_blocked_factor_matches_cpu(dtype, shape):
    # n >= 96 takes the blocked Bunch-Kaufman (panels, GEMM trailing updates):
    # pivots equal to the CPU's sytrf, LD to rounding, then a solve with it.
    a = rand(*shape, dtype=torch.float64, seed=21)
    a = (a + a.mT).to(dtype)
    for ca, na in list(layouts(a))[:2]:
        want = torch.linalg.ldl_factor_ex(ca)
        got = torch.linalg.ldl_factor_ex(na)
        assert torch.equal(got.pivots.cpu(), want.pivots)
        assert (want.pivots < 0).any()
        assert torch.equal(got.info.cpu(), want.info)
        tol = dict(rtol=2e-3, atol=2e-3) if dtype == torch.float32 else dict(rtol=1e-8, atol=1e-9)
        torch.testing.assert_close(got.LD.cpu(), want.LD, **tol)
    b = rand(*shape[:-1], 3, dtype=torch.float64, seed=22).to(dtype)
    x = torch.linalg.ldl_solve(got.LD, got.pivots, b.to("neuron")).cpu()
    res = (a.double() @ x.double() - b.double()).abs().max() / (a.double().abs().max() * x.double().abs().max())
    assert res < (1e-4 if dtype == torch.float32 else 1e-12)


@pytest.mark.usefixtures("native_only")
def test_blocked_singular_info_like_cpu():
    a = rand(120, 120, seed=23)
    a = a + a.mT
    a[50, :] = 0
    a[:, 50] = 0
    want = torch.linalg.ldl_factor_ex(a)
    got = torch.linalg.ldl_factor_ex(a.to("neuron"))
    assert torch.equal(got.info.cpu(), want.info) and want.info.item() > 0
    assert torch.equal(got.pivots.cpu(), want.pivots)
