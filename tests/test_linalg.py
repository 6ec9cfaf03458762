"""Dense linear algebra natively on neuron (runtime/src/ops/linalg/): LU,
solve, inv, det/slogdet, lu_unpack, triangular solves and Cholesky against the
CPU's LAPACK, float32 and float64, batched and broadcast, column- and
row-major and transposed inputs, zero-size, out=, the CPU's errors for
singular and indefinite inputs, and backward through PyTorch's formulas. The
results are defined only up to rounding (LAPACK's blocking and ours differ),
so values are compared with tolerances on well-conditioned matrices; pivots
exactly."""

import pytest
import torch

import torchneuron
from linalg_cases import layouts

pytestmark = pytest.mark.usefixtures("native_only")

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=2e-4, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def rand(*shape, dtype=torch.float64, seed=0, well=True):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g, dtype=torch.float64)
    if well and len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)  # well conditioned
    return a.to(dtype)


def spd(*shape, dtype=torch.float64, seed=0):
    m = rand(*shape, dtype=torch.float64, seed=seed, well=False)
    return (m @ m.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)).to(dtype)


def close(actual, expected, dtype=None):
    dtype = dtype or expected.dtype
    assert actual.device.type == "neuron"
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **TOL.get(dtype, {}))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (64, 64), (3, 7, 7), (2, 3, 6, 4), (4, 6)])
def test_lu_factor_and_unpack_match_cpu(dtype, shape):
    a = rand(*shape, dtype=dtype, seed=1)
    for x, nx in layouts(a):
        assert nx.stride() == x.stride()
        lu, piv, info = torch.linalg.lu_factor_ex(nx)
        clu, cpiv, cinfo = torch.linalg.lu_factor_ex(x)
        close(lu, clu)
        assert torch.equal(piv.cpu(), cpiv) and torch.equal(info.cpu(), cinfo)
        assert lu.stride() == clu.stride()
        p, l, u = torch.linalg.lu(nx)
        cp, cl, cu = torch.linalg.lu(x)
        close(p, cp), close(l, cl), close(u, cu)


def test_lu_factor_singular_reports_info_like_cpu():
    # Singular in any rounding: after the pivot row (4, 8, 1) the multipliers
    # are 1/4 and 1/2, so the second column becomes exactly zero (with
    # [3, 6, 1] as the pivot row, 2 - (1/3) 6 leaves 2e-16 on some hosts' LAPACK).
    a = torch.tensor([[1.0, 2, 3], [2, 4, 7], [4, 8, 1]], dtype=torch.float64)
    lu, piv, info = torch.linalg.lu_factor_ex(a.to("neuron"))
    clu, cpiv, cinfo = torch.linalg.lu_factor_ex(a)
    assert info.item() == cinfo.item() == 2
    close(lu, clu)
    assert torch.equal(piv.cpu(), cpiv)
    with pytest.raises(RuntimeError) as ours:
        torch.linalg.lu_factor(a.to("neuron"))
    with pytest.raises(RuntimeError) as cpus:
        torch.linalg.lu_factor(a)
    assert type(ours.value) is type(cpus.value) and str(ours.value) == str(cpus.value)
    with pytest.raises(RuntimeError, match="without pivoting"):
        torch.linalg.lu_factor(a.to("neuron"), pivot=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_solve_every_side_and_adjoint(dtype):
    a = rand(2, 6, 6, dtype=dtype, seed=2)
    b = rand(2, 6, 3, dtype=dtype, seed=3)
    br = rand(2, 3, 6, dtype=dtype, seed=4)
    lu, piv = torch.linalg.lu_factor(a)
    nlu, npiv = torch.linalg.lu_factor(a.to("neuron"))
    for left, rhs in ((True, b), (False, br)):
        for adjoint in (False, True):
            expected = torch.linalg.lu_solve(lu, piv, rhs, left=left, adjoint=adjoint)
            close(torch.linalg.lu_solve(nlu, npiv, rhs.to("neuron"), left=left, adjoint=adjoint), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_matrix_vector_broadcast_and_left_false(dtype):
    a = rand(3, 5, 5, dtype=dtype, seed=5)
    cases = [
        (a, rand(3, 5, 2, dtype=dtype, seed=6), True),
        (a, rand(3, 5, dtype=dtype, seed=7), True),      # a batch of vectors
        (a[0], rand(5, dtype=dtype, seed=8), True),      # one vector
        (a[:1], rand(4, 3, 5, 2, dtype=dtype, seed=9), True),  # A broadcast over B's batch
        (a, rand(3, 2, 5, dtype=dtype, seed=10), False),
    ]
    for A, B, left in cases:
        for x, nx in layouts(A):
            close(torch.linalg.solve(nx, B.to("neuron"), left=left),
                  torch.linalg.solve(x, B, left=left))


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_det_slogdet_logdet(dtype):
    a = rand(4, 7, 7, dtype=dtype, seed=11)
    a[1] = -a[1]  # odd n: a negative determinant
    for x, n in layouts(a):
        close(torch.linalg.inv(n), torch.linalg.inv(x))
        close(torch.linalg.det(n), torch.linalg.det(x), dtype)
        s, l = torch.linalg.slogdet(n)
        cs, cl = torch.linalg.slogdet(x)
        close(s, cs), close(l, cl)
        close(torch.logdet(n), torch.logdet(x))
    sing = torch.ones(3, 3, dtype=dtype)
    assert torch.linalg.det(sing.to("neuron")).item() == 0.0
    with pytest.raises(torch.linalg.LinAlgError) as ours:
        torch.linalg.inv(sing.to("neuron"))
    with pytest.raises(torch.linalg.LinAlgError) as cpus:
        torch.linalg.inv(sing)
    assert str(ours.value) == str(cpus.value)
    inv, info = torch.linalg.inv_ex(sing.to("neuron"))
    assert info.item() == torch.linalg.inv_ex(sing)[1].item() != 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(dtype, upper):
    a = spd(3, 9, 9, dtype=dtype, seed=12)
    for x, nx in layouts(a):
        close(torch.linalg.cholesky(nx, upper=upper), torch.linalg.cholesky(x, upper=upper))
    f = torch.linalg.cholesky(a, upper=upper)
    b = rand(3, 9, 4, dtype=dtype, seed=13)
    close(torch.cholesky_solve(b.to("neuron"), f.to("neuron"), upper=upper),
          torch.cholesky_solve(b, f, upper=upper))
    close(torch.cholesky_inverse(f[0].to("neuron"), upper=upper), torch.cholesky_inverse(f[0], upper=upper))
    bad = a.clone()
    bad[1, 4, 4] = -100.0
    l, info = torch.linalg.cholesky_ex(bad.to("neuron"))
    assert torch.equal(info.cpu(), torch.linalg.cholesky_ex(bad)[1])
    with pytest.raises(torch.linalg.LinAlgError) as ours:
        torch.linalg.cholesky(bad.to("neuron"))
    with pytest.raises(torch.linalg.LinAlgError) as cpus:
        torch.linalg.cholesky(bad)
    assert str(ours.value) == str(cpus.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_and_triangular_solve(dtype):
    a = rand(2, 6, 6, dtype=dtype, seed=14)
    b = rand(2, 6, 3, dtype=dtype, seed=15)
    br = rand(2, 3, 6, dtype=dtype, seed=16)
    for upper in (False, True):
        for unit in (False, True):
            for x, n in layouts(a):
                close(torch.linalg.solve_triangular(n, b.to("neuron"), upper=upper, unitriangular=unit),
                      torch.linalg.solve_triangular(x, b, upper=upper, unitriangular=unit))
                close(torch.linalg.solve_triangular(n, br.to("neuron"), upper=upper, left=False,
                                                    unitriangular=unit),
                      torch.linalg.solve_triangular(x, br, upper=upper, left=False, unitriangular=unit))
                for transpose in (False, True):
                    X, M = torch.triangular_solve(b.to("neuron"), n, upper=upper, transpose=transpose,
                                                  unitriangular=unit)
                    cX, cM = torch.triangular_solve(b, x, upper=upper, transpose=transpose, unitriangular=unit)
                    close(X, cX), close(M, cM)


def test_out_variants_and_aliasing():
    a = rand(5, 5, seed=17)
    b = rand(5, 2, seed=18)
    out = torch.empty(0, device="neuron", dtype=torch.float64)
    torch.linalg.solve_triangular(a.to("neuron"), b.to("neuron"), upper=True, out=out)
    close(out, torch.linalg.solve_triangular(a, b, upper=True))
    nb = b.to("neuron")
    torch.linalg.solve_triangular(a.to("neuron"), nb, upper=False, out=nb)  # out is B
    close(nb, torch.linalg.solve_triangular(a, b, upper=False))
    lu, piv = torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.int32)
    torch.linalg.lu_factor(a.to("neuron"), out=(lu, piv))
    close(lu, torch.linalg.lu_factor(a)[0])
    inv = torch.empty(5, 5, device="neuron", dtype=torch.float64)
    torch.linalg.inv(a.to("neuron"), out=inv)
    close(inv, torch.linalg.inv(a))
    ci = torch.empty(0, device="neuron", dtype=torch.float64)
    f = torch.linalg.cholesky(spd(5, 5, seed=19))
    torch.cholesky_inverse(f.to("neuron"), out=ci)
    close(ci, torch.cholesky_inverse(f))


def test_zero_size():
    for shape in ((0, 0), (3, 0, 0), (0, 4, 4)):
        a = torch.zeros(shape, dtype=torch.float64)
        n = a.to("neuron")
        lu, piv, info = torch.linalg.lu_factor_ex(n)
        assert lu.shape == a.shape and info.cpu().eq(0).all()
        assert torch.linalg.inv(n).shape == a.shape
        close(torch.linalg.det(n), torch.linalg.det(a))
        assert torch.linalg.cholesky(n).shape == a.shape
        assert torch.linalg.solve(n, n).shape == a.shape


def test_integer_input_errors_like_cpu():
    a = torch.eye(3, dtype=torch.int64)
    with pytest.raises(RuntimeError) as ours:
        torch.linalg.inv(a.to("neuron"))
    with pytest.raises(RuntimeError) as cpus:
        torch.linalg.inv(a)
    assert str(ours.value) == str(cpus.value)


@pytest.mark.parametrize("fn", [
    lambda a, b: torch.linalg.solve(a, b).sum(),
    lambda a, b: torch.linalg.inv(a).sum(),
    lambda a, b: torch.linalg.det(a).sum(),
    lambda a, b: torch.linalg.slogdet(a)[1].sum(),
    lambda a, b: torch.linalg.cholesky(a @ a.mT + 6 * torch.eye(6, dtype=a.dtype, device=a.device)).sum(),
    lambda a, b: torch.linalg.solve_triangular(a, b, upper=True).sum(),
    lambda a, b: torch.linalg.lu_factor(a)[0].sum(),
])
def test_backward_matches_cpu(fn):
    a = rand(2, 6, 6, seed=20)
    b = rand(2, 6, 3, seed=21)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    fn(ca, cb).backward()
    na, nb = a.to("neuron").requires_grad_(), b.to("neuron").requires_grad_()
    fn(na, nb).backward()
    close(na.grad, ca.grad)
    if cb.grad is not None:
        close(nb.grad, cb.grad)


def test_large_single_matrix_and_batches():
    # One matrix large enough for the blocked LU's trailing updates to split
    # across threads, and many small ones split by batch.
    a = rand(300, 300, seed=22)
    b = rand(300, 4, seed=23)
    close(torch.linalg.solve(a.to("neuron"), b.to("neuron")), torch.linalg.solve(a, b))
    s = rand(500, 4, 4, dtype=torch.float32, seed=24)
    close(torch.linalg.inv(s.to("neuron")), torch.linalg.inv(s))


def test_ops_ran_natively(op_tracking):
    a = rand(4, 4, seed=25).to("neuron")
    torch.linalg.solve(a, a)
    ops = torchneuron.get_executed_ops()
    assert "aten::_linalg_solve_ex" in ops or "aten::_linalg_solve_ex.result" in ops, ops
    assert torchneuron.get_fallback_ops() == {}
