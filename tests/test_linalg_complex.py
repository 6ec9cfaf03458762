"""Complex linear algebra on the native kernels (runtime/src/ops/linalg/,
torchneuron/csrc/linalg.cpp, linalg_qr.cpp, linalg_matrix_exp.cpp,
linalg_eigh.cpp, linalg_svd.cpp): the LU family, triangular solves, the
Cholesky family, Householder QR (geqrf, householder_product, ormqr, qr),
matrix_exp, Hermitian eigh and the SVD family at complex64 and complex128
against PyTorch CPU (LAPACK), on batched, transposed, sliced and conjugate
(conj bit) inputs, with no CPU fallback; gradients through PyTorch's formulas run natively too."""

import pytest
import torch

from complex_samples import CDTYPES, complex_randn
from conftest import no_fallback

DEV = "neuron"

pytestmark = pytest.mark.usefixtures("op_tracking")


def tol(dtype):
    # Solves and factorisations of well-conditioned matrices: a few
    # roundings times the order, looser than elementwise ops.
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.complex64 else {"rtol": 1e-10, "atol": 1e-10}


def close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    torch.testing.assert_close(got.cpu(), want, **tol(dtype))


def well_conditioned(dtype, *batch, n, seed=0):
    """Random complex matrices with a dominant diagonal (condition number
    a few units): the CPU's and the kernels' pivots agree."""
    return complex_randn(dtype, *batch, n, n, seed=seed) + 2 * n ** 0.5 * torch.eye(n, dtype=dtype)


def square_layouts(dtype, n=5):
    """(name, matrices) in the layouts the kernels read without a copy."""
    yield "contiguous", well_conditioned(dtype, 3, n=n)
    yield "transposed", well_conditioned(dtype, 3, n=n, seed=1).mT
    yield "sliced", well_conditioned(dtype, 6, n=2 * n, seed=2)[::2, ::2, ::2] + 2 * n ** 0.5 * torch.eye(n)
    yield "conj", well_conditioned(dtype, 2, n=n, seed=3).conj()
    yield "zero_batch", well_conditioned(dtype, 0, n=n)
    yield "empty", well_conditioned(dtype, 2, n=0)
    yield "blocked", well_conditioned(dtype, n=70, seed=4)  # past the LU's 48-column panels


def hermitian_pd(dtype, *batch, n, seed=0):
    a = complex_randn(dtype, *batch, n, n, seed=seed)
    return a @ a.mH + n * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_lu_family_matches_cpu(dtype):
    for name, a in square_layouts(dtype):
        with no_fallback():
            d = a.to(DEV)
            lu, piv, info = torch.linalg.lu_factor_ex(d)
            p, l, u = torch.linalg.lu(d)
            det = torch.linalg.det(d)
            sign, logabs = torch.linalg.slogdet(d)
            inv, inv_info = torch.linalg.inv_ex(d)
        want_lu, want_piv, want_info = torch.linalg.lu_factor_ex(a)
        close(lu, want_lu, dtype)
        assert torch.equal(piv.cpu(), want_piv), name
        assert torch.equal(info.cpu(), want_info), name
        for got, want in zip((p, l, u), torch.linalg.lu(a)):
            close(got, want, dtype)
        want_sign, want_logabs = torch.linalg.slogdet(a)
        close(sign, want_sign, dtype)
        assert sign.dtype == dtype and logabs.dtype == want_logabs.dtype
        close(logabs, want_logabs, dtype)
        torch.testing.assert_close(det.cpu(), torch.linalg.det(a), rtol=tol(dtype)["rtol"], atol=0,
                                   equal_nan=True)  # the 70 x 70 overflows complex64 on both
        close(inv, torch.linalg.inv(a), dtype)
        assert torch.equal(inv_info.cpu(), torch.zeros_like(inv_info.cpu())), name


@pytest.mark.parametrize("dtype", CDTYPES)
def test_wide_and_tall_lu_and_unpack(dtype):
    for shape in ((2, 4, 7), (2, 7, 4)):
        a = complex_randn(dtype, *shape)
        with no_fallback():
            lu, piv = torch.linalg.lu_factor(a.to(DEV))
            p, l, u = torch.lu_unpack(lu, piv)
        want_lu, want_piv = torch.linalg.lu_factor(a)
        close(lu, want_lu, dtype)
        assert torch.equal(piv.cpu(), want_piv)
        for got, want in zip((p, l, u), torch.lu_unpack(want_lu, want_piv)):
            close(got, want, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_singular_lu_reports_info(dtype):
    a = complex_randn(dtype, 2, 4, 4)
    a[1, :, 2] = 0  # column 2 of the second matrix: U[2, 2] == 0
    with no_fallback():
        _, _, info = torch.linalg.lu_factor_ex(a.to(DEV))
        det = torch.linalg.det(a.to(DEV))
    assert torch.equal(info.cpu(), torch.linalg.lu_factor_ex(a)[2])
    assert det[1].item() == 0


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_matches_cpu(dtype, left, adjoint):
    a = well_conditioned(dtype, 3, n=6)
    b = complex_randn(dtype, 3, 6, 4, seed=5)
    if not left:
        b = b.mT
    lu, piv = torch.linalg.lu_factor(a)
    for name, rhs in (("plain", b), ("conj", b.conj()), ("broadcast", b[:1])):
        with no_fallback():
            got = torch.linalg.lu_solve(lu.to(DEV), piv.to(DEV), rhs.to(DEV), left=left, adjoint=adjoint)
        close(got, torch.linalg.lu_solve(lu, piv, rhs, left=left, adjoint=adjoint), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_solve_matches_cpu(dtype):
    a = well_conditioned(dtype, 2, n=5)
    for name, b in (("matrix", complex_randn(dtype, 2, 5, 3)), ("vector", complex_randn(dtype, 5)),
                    ("many_columns", complex_randn(dtype, 2, 5, 300))):
        for left in (True, False):
            if not left and b.dim() == 1:
                continue
            rhs = b if left else b.mT
            with no_fallback():
                got = torch.linalg.solve(a.to(DEV), rhs.to(DEV), left=left)
            close(got, torch.linalg.solve(a, rhs, left=left), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("upper", [True, False])
def test_triangular_solves_match_cpu(dtype, upper):
    full = well_conditioned(dtype, 2, n=6)
    b = complex_randn(dtype, 2, 6, 3, seed=7)
    for name, a in (("plain", full), ("conj", full.conj()), ("transposed", full.mT), ("adjoint", full.mH)):
        for left in (True, False):
            for unit in (False, True):
                rhs = b if left else b.mT
                with no_fallback():
                    got = torch.linalg.solve_triangular(a.to(DEV), rhs.to(DEV), upper=upper, left=left,
                                                        unitriangular=unit)
                want = torch.linalg.solve_triangular(a, rhs, upper=upper, left=left, unitriangular=unit)
                close(got, want, dtype)
        for transpose in (False, True):
            with no_fallback():
                x, m = torch.triangular_solve(b.to(DEV), a.to(DEV), upper=upper, transpose=transpose)
            want_x, want_m = torch.triangular_solve(b, a, upper=upper, transpose=transpose)
            close(x, want_x, dtype)
            close(m, want_m, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family_matches_cpu(dtype, upper):
    for name, a in (("batched", hermitian_pd(dtype, 3, n=5)), ("conj", hermitian_pd(dtype, 2, n=4).conj()),
                    ("transposed", hermitian_pd(dtype, 2, n=4).mT), ("empty", hermitian_pd(dtype, 2, n=0))):
        b = complex_randn(dtype, *a.shape[:-1], 2, seed=9)
        f = torch.linalg.cholesky(a, upper=upper)
        with no_fallback():
            got_f, info = torch.linalg.cholesky_ex(a.to(DEV), upper=upper)
            got_inv = torch.cholesky_inverse(f.to(DEV), upper=upper)
            got_x = torch.cholesky_solve(b.to(DEV), f.to(DEV), upper=upper)
        close(got_f, f, dtype)
        assert not info.cpu().any(), name
        close(got_inv, torch.cholesky_inverse(f, upper=upper), dtype)
        close(got_x, torch.cholesky_solve(b, f, upper=upper), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_cholesky_info_on_indefinite_input(dtype):
    a = hermitian_pd(dtype, 3, n=4)
    a[1, 2, 2] = -100  # the third leading minor of the second matrix is not positive
    with no_fallback():
        _, info = torch.linalg.cholesky_ex(a.to(DEV))
    assert torch.equal(info.cpu(), torch.linalg.cholesky_ex(a)[1])
    assert info[1].item() == 3


def test_gradients_run_natively():
    dtype = torch.complex128
    a = well_conditioned(dtype, 2, n=4)
    b = complex_randn(dtype, 2, 4, 2, seed=3)
    h = hermitian_pd(dtype, n=4)

    def losses(a, b, h):
        x = torch.linalg.solve(a, b)
        t = torch.linalg.solve_triangular(a.triu(), b, upper=True)
        return (x.abs().sum() + torch.linalg.det(a).abs().sum() + torch.linalg.slogdet(a)[1].sum()
                + t.abs().sum() + torch.linalg.cholesky(h).abs().sum() + torch.linalg.inv(a).abs().sum())

    cpu_inputs = [t.clone().requires_grad_() for t in (a, b, h)]
    losses(*cpu_inputs).backward()
    dev_inputs = [t.to(DEV).requires_grad_() for t in (a, b, h)]
    with no_fallback():
        losses(*dev_inputs).backward()
    for got, want in zip(dev_inputs, cpu_inputs):
        close(got.grad, want.grad, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_householder_qr_family_matches_cpu(dtype):
    # R's diagonal is real and Q's reflectors are LAPACK's (complex tau), so
    # the factors themselves match the CPU's, not only their product.
    for shape in ((3, 6, 4), (2, 4, 6), (5, 5), (40, 30)):
        for name, a in (("plain", complex_randn(dtype, *shape)), ("conj", complex_randn(dtype, *shape).conj()),
                        ("transposed", complex_randn(dtype, *shape[:-2], shape[-1], shape[-2]).mT)):
            with no_fallback():
                v, tau = torch.geqrf(a.to(DEV))
                qr = [torch.linalg.qr(a.to(DEV), mode=mode) for mode in ("reduced", "complete", "r")]
            want_v, want_tau = torch.geqrf(a)
            close(v, want_v, dtype)
            close(tau, want_tau, dtype)
            for (q, r), mode in zip(qr, ("reduced", "complete", "r")):
                want_q, want_r = torch.linalg.qr(a, mode=mode)
                close(q, want_q, dtype)
                close(r, want_r, dtype)
            m, n = shape[-2:]
            if m >= n:
                with no_fallback():
                    q = torch.linalg.householder_product(v, tau)
                close(q, torch.linalg.householder_product(want_v, want_tau), dtype)
            for left in (True, False):
                for transpose in (False, True):
                    c = complex_randn(dtype, *shape[:-2], m, 3, seed=4)
                    c = c if left else c.mT
                    with no_fallback():
                        got = torch.ormqr(v, tau, c.to(DEV), left=left, transpose=transpose)
                    close(got, torch.ormqr(want_v, want_tau, c, left=left, transpose=transpose), dtype)


def test_qr_gradients_run_natively():
    dtype = torch.complex128
    a = complex_randn(dtype, 2, 5, 3)
    cpu = a.clone().requires_grad_()
    dev = a.to(DEV).requires_grad_()
    q, r = torch.linalg.qr(cpu)
    (q.abs().sum() + r.abs().sum()).backward()
    with no_fallback():
        q, r = torch.linalg.qr(dev)
        (q.abs().sum() + r.abs().sum()).backward()
    close(dev.grad, cpu.grad, dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matrix_exp_matches_cpu(dtype):
    # Every degree of the Pade approximant (by the 1-norm) and scaling and
    # squaring; batched, transposed and conjugate inputs.
    for scale in (0.005, 0.2, 1.0, 2.0, 8.0, 60.0):
        for name, a in (("batched", complex_randn(dtype, 3, 6, 6)), ("transposed", complex_randn(dtype, 2, 5, 5).mT),
                        ("conj", complex_randn(dtype, 5, 5).conj())):
            a = a * scale / 6
            with no_fallback():
                got = torch.linalg.matrix_exp(a.to(DEV)).cpu()
            exact = torch.linalg.matrix_exp(a.to(torch.complex128))
            if dtype == torch.complex128:
                close(got, torch.linalg.matrix_exp(a), dtype)
            else:
                # computed in complex128 and rounded once: within a few
                # complex64 roundings of the exact result, and no further
                # from it than the CPU's complex64 kernel
                err = (got.to(torch.complex128) - exact).abs().max() / exact.abs().max()
                cpu_err = (torch.linalg.matrix_exp(a).to(torch.complex128) - exact).abs().max() / exact.abs().max()
                assert err <= 2.5e-7 and err <= cpu_err + 1e-7, (name, scale, err.item(), cpu_err.item())
    with no_fallback():
        assert torch.linalg.matrix_exp(complex_randn(dtype, 0, 3, 3).to(DEV)).shape == (0, 3, 3)


def test_matrix_exp_gradient_runs_natively():
    a = complex_randn(torch.complex128, 4, 4)
    cpu, dev = a.clone().requires_grad_(), a.to(DEV).requires_grad_()
    torch.linalg.matrix_exp(cpu).abs().sum().backward()
    with no_fallback():
        torch.linalg.matrix_exp(dev).abs().sum().backward()
    close(dev.grad, cpu.grad, torch.complex128)


@pytest.mark.parametrize("dtype", CDTYPES + [torch.float64])
def test_negative_and_conjugate_views_reach_the_solves(dtype):
    # linalg_solve_triangular receives negative (neg bit) and conjugate views
    # as they are: the shim folds or resolves them (a neg-bit A was read as
    # its storage before). Real float64 too.
    if dtype.is_complex:
        a, b = well_conditioned(dtype, 2, n=5).triu(), complex_randn(dtype, 2, 5, 3, seed=2)
    else:
        a = torch.randn(2, 5, 5, dtype=dtype).triu() + 5 * torch.eye(5, dtype=dtype)
        b = torch.randn(2, 5, 3, dtype=dtype)
    views = [("neg", torch._neg_view)] + ([("conj", torch.conj), ("neg_conj", lambda t: torch._neg_view(t.conj()))]
                                          if dtype.is_complex else [])
    for name, view in views:
        for b_view in (lambda t: t, torch._neg_view):
            for left in (True, False):
                rhs = b if left else b.mT
                with no_fallback():
                    got = torch.linalg.solve_triangular(view(a.to(DEV)), b_view(rhs.to(DEV)), upper=True, left=left)
                want = torch.linalg.solve_triangular(view(a), b_view(rhs.clone()), upper=True, left=left)
                close(got, want, torch.complex128 if dtype == torch.float64 else dtype)


def hermitian_layouts(dtype, n=6):
    """(name, Hermitian matrices) in the layouts the eigh kernel reads."""
    a = complex_randn(dtype, 3, n, n, seed=5)
    yield "contiguous", a + a.mH
    yield "transposed", (a + a.mH).mT
    b = complex_randn(dtype, 2, 2 * n, 2 * n, seed=6)[:, ::2, ::2]
    yield "sliced", b + b.mH
    yield "conj", (a + a.mH).conj()
    yield "zero_batch", complex_randn(dtype, 0, n, n)
    yield "empty", complex_randn(dtype, 2, 0, 0)
    c = complex_randn(dtype, 40, 40, seed=7)
    yield "larger", c + c.mH
    d = complex_randn(dtype, 2, 80, 80, seed=43)
    yield "tridiagonal_ql", d + d.mH  # from n = 64: Householder tridiagonal form and QL


def check_eigh(a, w, v, dtype):
    """Eigenvalues as the CPU's; A V = V diag(w) and V^H V = I; |V| as the
    CPU's (the eigenvalues are distinct: only each column's phase is free)."""
    want_w, want_v = torch.linalg.eigh(a)
    w, v = w.cpu(), v.cpu()
    assert w.dtype == want_w.dtype and v.dtype == dtype
    close(w, want_w, dtype)
    if a.numel() == 0:
        assert v.shape == want_v.shape
        return
    a = a.resolve_conj()
    close(a @ v, v * w.to(dtype).unsqueeze(-2), dtype)
    close(v.mH @ v, torch.eye(a.shape[-1], dtype=dtype).expand_as(v), dtype)
    close(v.abs(), want_v.abs(), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_eigh_matches_cpu(dtype):
    for name, a in hermitian_layouts(dtype):
        for uplo in ("L", "U"):
            with no_fallback():
                w, v = torch.linalg.eigh(a.to(DEV), UPLO=uplo)
                wo = torch.linalg.eigvalsh(a.to(DEV), UPLO=uplo)
            check_eigh(a, w, v, dtype)
            close(wo, torch.linalg.eigvalsh(a, UPLO=uplo), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(dtype, uplo):
    # A general matrix: only the UPLO triangle is read, and the imaginary
    # parts of the diagonal are ignored, as LAPACK's heevd does.
    a = complex_randn(dtype, 2, 5, 5, seed=8)
    with no_fallback():
        w, v = torch.linalg.eigh(a.to(DEV), UPLO=uplo)
        wo = torch.empty(0, dtype=w.dtype, device=DEV)
        vo = torch.empty(0, dtype=dtype, device=DEV)
        torch.linalg.eigh(a.to(DEV), UPLO=uplo, out=(wo, vo))
    h = a.tril() if uplo == "L" else a.triu()
    h = h + h.mH
    h.diagonal(0, -2, -1).copy_(a.diagonal(0, -2, -1).real)
    close(w, torch.linalg.eigvalsh(a, UPLO=uplo), dtype)
    check_eigh(h, w, v, dtype)
    close(wo, w.cpu(), dtype)
    close(vo, v.cpu(), dtype)


def svd_inputs(dtype):
    yield "tall", complex_randn(dtype, 3, 7, 4, seed=9)
    yield "wide", complex_randn(dtype, 2, 3, 6, seed=10)
    yield "square", complex_randn(dtype, 5, 5, seed=11)
    yield "transposed", complex_randn(dtype, 2, 6, 4, seed=12).mT
    yield "conj", complex_randn(dtype, 2, 5, 3, seed=13).conj()
    yield "sliced", complex_randn(dtype, 2, 10, 8, seed=14)[:, ::2, ::2]
    yield "larger", complex_randn(dtype, 40, 30, seed=15)
    yield "zero_batch", complex_randn(dtype, 0, 3, 2)
    yield "empty", complex_randn(dtype, 2, 0, 3)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_svd_matches_cpu(dtype):
    # Singular values as the CPU's; U diag(S) Vh = A; U, Vh unitary; |U|
    # and |Vh| (reduced: distinct singular values) as the CPU's, the phase
    # of each singular pair being free.
    for name, a in svd_inputs(dtype):
        for full in (False, True):
            with no_fallback():
                u, s, vh = torch.linalg.svd(a.to(DEV), full_matrices=full)
                sv = torch.linalg.svdvals(a.to(DEV))
            want_u, want_s, want_vh = torch.linalg.svd(a, full_matrices=full)
            u, s, vh = u.cpu(), s.cpu(), vh.cpu()
            assert (u.shape, s.shape, vh.shape) == (want_u.shape, want_s.shape, want_vh.shape), name
            close(s, want_s, dtype)
            close(sv, want_s, dtype)
            k = s.shape[-1]
            m, n = a.shape[-2:]
            if a.numel() == 0:
                close(u, want_u, dtype)  # the identity, as the CPU's
                close(vh, want_vh, dtype)
                continue
            close((u[..., :k] * s.to(dtype).unsqueeze(-2)) @ vh[..., :k, :], a.resolve_conj(), dtype)
            close(u.mH @ u, torch.eye(u.shape[-1], dtype=dtype).expand(*u.shape[:-2], -1, -1), dtype)
            close(vh @ vh.mH, torch.eye(vh.shape[-2], dtype=dtype).expand(*vh.shape[:-2], -1, -1), dtype)
            close(u[..., :k].abs(), want_u[..., :k].abs(), dtype)
            close(vh[..., :k, :].abs(), want_vh[..., :k, :].abs(), dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_svd_composites_match_cpu(dtype):
    # PyTorch's composites over _linalg_svd: nuclear and spectral norms,
    # cond, pinv, matrix_rank, and a rank-deficient matrix's null space.
    a = complex_randn(dtype, 2, 6, 4, seed=16)
    low = complex_randn(dtype, 6, 2, seed=17) @ complex_randn(dtype, 2, 5, seed=18)
    with no_fallback():
        d, dl = a.to(DEV), low.to(DEV)
        got = {"nuc": torch.linalg.matrix_norm(d, "nuc"), "norm_nuc": torch.norm(d, p="nuc", dim=(-2, -1)),
               "two": torch.linalg.matrix_norm(d, 2), "cond": torch.linalg.cond(d), "pinv": torch.linalg.pinv(d),
               "rank": torch.linalg.matrix_rank(dl), "svd": torch.svd(d)[1]}
        u, s, vh = torch.linalg.svd(dl)
    want = {"nuc": torch.linalg.matrix_norm(a, "nuc"), "norm_nuc": torch.norm(a, p="nuc", dim=(-2, -1)),
            "two": torch.linalg.matrix_norm(a, 2), "cond": torch.linalg.cond(a.to(torch.complex128)).to(a.real.dtype),
            "pinv": torch.linalg.pinv(a), "rank": torch.linalg.matrix_rank(low), "svd": torch.svd(a)[1]}
    for key in got:
        if key == "rank":
            assert torch.equal(got[key].cpu(), want[key]) and int(want[key]) == 2
        else:
            close(got[key], want[key], dtype)
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    close((u[:, :5] * s.to(dtype)) @ vh, low, dtype)
    close(u.mH @ u, torch.eye(6, dtype=dtype), dtype)  # completed past rank 2
    close(vh @ vh.mH, torch.eye(5, dtype=dtype), dtype)


def test_eigh_and_svd_gradients_run_natively():
    # Gauge-invariant losses (eigenvalues, |V|, singular values, |U|, |Vh|):
    # PyTorch's linalg_eigh_backward and svd_backward on native ops.
    dtype = torch.complex128
    h = complex_randn(dtype, 2, 4, 4, seed=19)
    h = h + h.mH
    a = complex_randn(dtype, 2, 5, 3, seed=20)

    def loss(h, a):
        w, v = torch.linalg.eigh(h)
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        return ((w ** 2).sum() + v.abs().sum() + torch.linalg.eigvalsh(h).sum() + s.sum() + u.abs().sum()
                + vh.abs().sum() + torch.linalg.svdvals(a).pow(2).sum())

    cpu = [t.clone().requires_grad_() for t in (h, a)]
    loss(*cpu).backward()
    dev = [t.to(DEV).requires_grad_() for t in (h, a)]
    with no_fallback():
        loss(*dev).backward()
    for got, want in zip(dev, cpu):
        close(got.grad, want.grad, dtype)


DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq_inputs(dtype, driver):
    yield "tall", complex_randn(dtype, 2, 7, 4, seed=21), complex_randn(dtype, 2, 7, 3, seed=22)
    yield "wide", complex_randn(dtype, 2, 3, 6, seed=23), complex_randn(dtype, 2, 3, 2, seed=24)
    yield "square_vector", complex_randn(dtype, 5, 5, seed=25), complex_randn(dtype, 5, seed=26)
    yield "broadcast", complex_randn(dtype, 1, 6, 3, seed=27), complex_randn(dtype, 3, 6, 2, seed=28)
    yield "transposed_conj", complex_randn(dtype, 2, 4, 8, seed=29).mT, complex_randn(dtype, 2, 8, 2, seed=30).conj()
    yield "conj_a", complex_randn(dtype, 6, 4, seed=31).conj(), complex_randn(dtype, 6, 1, seed=32)
    yield "zero_batch", complex_randn(dtype, 0, 4, 3), complex_randn(dtype, 0, 4, 2)
    if driver in ("gels", "gelsy"):  # the CPU's MKL gelsd/gelss fail on no right-hand side
        yield "zero_rhs", complex_randn(dtype, 4, 3, seed=33), complex_randn(dtype, 4, 0)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("driver", DRIVERS)
def test_lstsq_matches_cpu(dtype, driver):
    # Solution, residuals (real), rank and singular values (real) as the
    # CPU's zgels/zgelsy/zgelsd/zgelss return them.
    for name, a, b in lstsq_inputs(dtype, driver):
        with no_fallback():
            got = torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver)
        want = torch.linalg.lstsq(a, b, driver=driver)
        for field, g, w in zip(("solution", "residuals", "rank", "singular_values"), got, want):
            g = g.cpu()
            assert g.dtype == w.dtype and g.shape == w.shape, (name, field, g.dtype, w.dtype, g.shape, w.shape)
            if field == "rank":
                assert torch.equal(g, w), (name, g, w)
            else:
                torch.testing.assert_close(g, w, **tol(dtype), msg=lambda m: f"{name} {field}: {m}")


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_lstsq_rank_deficient_matches_cpu(dtype, driver):
    # Rank 2 of 4 columns: the effective rank and the minimum-norm solution.
    a = complex_randn(dtype, 2, 7, 2, seed=34) @ complex_randn(dtype, 2, 2, 4, seed=35)
    b = complex_randn(dtype, 2, 7, 3, seed=36)
    with no_fallback():
        x, _, rank, s = torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver)
        out = [torch.empty(0, dtype=t, device=DEV) for t in (dtype, a.real.dtype, torch.int64, a.real.dtype)]
        torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver, out=out)
    want_x, _, want_rank, want_s = torch.linalg.lstsq(a, b, driver=driver)
    assert torch.equal(rank.cpu(), want_rank) and want_rank.tolist() == [2, 2]
    close(x, want_x, dtype)
    close(out[0], want_x, dtype)
    assert torch.equal(out[2].cpu(), want_rank)
    if s.numel():
        close(s, want_s, dtype)


def test_lstsq_gradient_runs_natively():
    dtype = torch.complex128
    a, b = complex_randn(dtype, 2, 6, 3, seed=37), complex_randn(dtype, 2, 6, 2, seed=38)
    cpu = [t.clone().requires_grad_() for t in (a, b)]
    torch.linalg.lstsq(*cpu).solution.abs().sum().backward()
    dev = [t.to(DEV).requires_grad_() for t in (a, b)]
    with no_fallback():
        torch.linalg.lstsq(*dev).solution.abs().sum().backward()
    for got, want in zip(dev, cpu):
        close(got.grad, want.grad, dtype)


def ldl_inputs(dtype, hermitian):
    """Symmetric (hermitian=False) or Hermitian indefinite matrices; a zero
    leading diagonal entry forces the 2x2 and interchanged pivots."""
    a = complex_randn(dtype, 3, 6, 6, seed=39)
    a = a + (a.mH if hermitian else a.mT)
    a[:, 0, 0] = 0
    yield "batched", a
    yield "transposed", a.mT
    yield "conj", a.conj()
    b = complex_randn(dtype, 12, 12, seed=40)[::2, ::2]
    yield "sliced", b + (b.mH if hermitian else b.mT)
    c = complex_randn(dtype, 30, 30, seed=41)
    yield "larger", c + (c.mH if hermitian else c.mT)
    yield "zero_batch", complex_randn(dtype, 0, 3, 3)
    yield "empty", complex_randn(dtype, 2, 0, 0)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_matches_cpu(dtype, hermitian):
    # LD, pivots and info as LAPACK's sytrf/hetrf (uplo 'L'), and the solve
    # as sytrs/hetrs, from the CPU's factors and from the device's.
    for name, a in ldl_inputs(dtype, hermitian):
        rhs = complex_randn(dtype, *a.shape[:-1], 2, seed=42)
        with no_fallback():
            ld, piv, info = torch.linalg.ldl_factor_ex(a.to(DEV), hermitian=hermitian)
            x = torch.linalg.ldl_solve(ld, piv, rhs.to(DEV), hermitian=hermitian)
        want_ld, want_piv, want_info = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
        close(ld, want_ld, dtype)
        assert torch.equal(piv.cpu(), want_piv), name
        assert torch.equal(info.cpu(), want_info), name
        close(x, torch.linalg.ldl_solve(want_ld, want_piv, rhs, hermitian=hermitian), dtype)


def test_ldl_singular_reports_info():
    a = torch.zeros(2, 3, 3, dtype=torch.complex128)
    a[1] = torch.eye(3)
    with no_fallback():
        _, piv, info = torch.linalg.ldl_factor_ex(a.to(DEV), hermitian=True)
    want = torch.linalg.ldl_factor_ex(a, hermitian=True)
    assert torch.equal(info.cpu(), want[2]) and info.tolist() == [1, 0]
    assert torch.equal(piv.cpu(), want[1])
