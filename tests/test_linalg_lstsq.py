"""Least squares natively on neuron (runtime LINALG_LSTSQ through the
linalg_lstsq shim): every driver the CPU accepts (gels, gelsy, gelsd, gelss;
the default is gelsy), tall, wide and square, batched and broadcast (the
CPU's rule: the first input.dim() - 2 dims of both), vector right-hand
sides, strided inputs, rank-deficient matrices, zero sizes, out=, the CPU's
errors and backward, each output (solution, residuals, rank,
singular_values: shape, dtype and values) against the CPU's, with no CPU
fallback."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import rand

DTYPES = [torch.float32, torch.float64]
DRIVERS = [None, "gels", "gelsy", "gelsd", "gelss"]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-10)}


def check_same(got, want, dtype):
    for name in ("solution", "residuals", "rank", "singular_values"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.device.type == "neuron", name
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
        if name == "rank":
            assert torch.equal(g.cpu(), w), name
        else:
            torch.testing.assert_close(g.cpu(), w, **TOL[dtype], msg=name)


CASES = [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4, 1)), ((2, 6, 4), (2, 6, 3)), ((6, 4), (6,)),
         ((2, 6, 4), (2, 6)), ((1, 1), (1, 1)), ((7, 1), (7, 2)), ((1, 7), (1, 3)), ((2, 3, 5, 4), (2, 3, 5, 2)),
         # broadcast batches: input's and other's size-1 dims, and a 2-d other
         # whose first dim the CPU takes as a batch dim
         ((2, 1, 5, 3), (1, 3, 5, 2)), ((3, 6, 4), (1, 6, 2)), ((1, 6, 4), (6, 6)), ((1, 4, 6), (3, 4, 2))]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("ashape,bshape", CASES)
def test_lstsq_matches_cpu(dtype, driver, ashape, bshape):
    a, b = rand(*ashape, dtype=dtype, seed=1), rand(*bshape, dtype=dtype, seed=2)
    want = torch.linalg.lstsq(a, b, driver=driver)
    got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver)
    check_same(got, want, dtype)
    # Transposed (column-major) and strided storage.
    na = a.mT.contiguous().to("neuron").mT
    nb = torch.stack([b, b], -1).to("neuron")[..., 0]
    check_same(torch.linalg.lstsq(na, nb, driver=driver), want, dtype)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_broadcast_rank_per_input_matrix(driver):
    # rank and singular_values keep input's batch shape; residuals only when
    # every matrix has full rank.
    a = rand(2, 1, 5, 3, seed=10)
    a[1, 0, :, 2] = 0
    b = rand(1, 3, 5, 2, seed=11)
    check_same(torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver),
               torch.linalg.lstsq(a, b, driver=driver), torch.float64)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("m,n", [(8, 6), (6, 8), (6, 6)])
def test_rank_deficient(driver, m, n):
    a = rand(2, m, 3, seed=3) @ rand(2, 3, n, seed=4)
    b = rand(2, m, 2, seed=5)
    for rcond in (None, 1e-8):
        want = torch.linalg.lstsq(a, b, rcond=rcond, driver=driver)
        got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), rcond=rcond, driver=driver)
        assert torch.equal(got.rank.cpu(), want.rank)
        torch.testing.assert_close(got.solution.cpu(), want.solution, rtol=1e-7, atol=1e-8)
        assert got.residuals.shape == want.residuals.shape
        if driver != "gelsy":
            torch.testing.assert_close(got.singular_values.cpu(), want.singular_values, rtol=1e-9, atol=1e-12)
    # A large rcond cuts the rank further, as LAPACK does.
    want = torch.linalg.lstsq(a, b, rcond=0.5, driver=driver)
    got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), rcond=0.5, driver=driver)
    # gelsy's rank is an incremental condition estimate of the column-pivoted
    # R: at an rcond this close to the estimates it depends on the pivots,
    # and this torch's CPU gelsy does not pivot reliably (its ranks for the
    # same input vary from call to call; the later matrices of a batch act
    # as if unpivoted), so no rank comparison here. The C test checks the
    # rcond cuts against a plain twin of LAPACK's documented method.
    if driver != "gelsy":
        assert torch.equal(got.rank.cpu(), want.rank)
        torch.testing.assert_close(got.solution.cpu(), want.solution, rtol=1e-7, atol=1e-8)


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("ashape,bshape", [((0, 3), (0, 2)), ((3, 0), (3, 2)), ((4, 3), (4, 0)), ((0, 4, 3), (0, 4, 2)),
                                           ((2, 0, 0), (2, 0, 1)), ((0, 3), (0,))])
def test_zero_size(driver, ashape, bshape):
    if bshape[-1] == 0 and driver in ("gelsd", "gelss"):
        pytest.skip("the CPU's gelsd and gelss fail on zero right-hand sides (MKL rejects them)")
    a, b = rand(*ashape), rand(*bshape)
    check_same(torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver),
               torch.linalg.lstsq(a, b, driver=driver), torch.float64)


@pytest.mark.usefixtures("native_only")
def test_out():
    a, b = rand(6, 4, seed=6), rand(6, 2, seed=7)
    outs = [torch.empty(0, device="neuron", dtype=torch.float64) for _ in range(2)]
    outs += [torch.empty(0, device="neuron", dtype=torch.long), torch.empty(0, device="neuron", dtype=torch.float64)]
    got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver="gelsd", out=tuple(outs))
    want = torch.linalg.lstsq(a, b, driver="gelsd")
    check_same(got, want, torch.float64)
    assert got.solution is outs[0]
    for driver in ("gels", "gelsy"):
        outs = [torch.full((4, 2), 7.0, device="neuron", dtype=torch.float64)]
        outs += [torch.empty(0, device="neuron", dtype=torch.float64), torch.empty(0, device="neuron", dtype=torch.long),
                 torch.empty(0, device="neuron", dtype=torch.float64)]
        got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver, out=tuple(outs))
        check_same(got, torch.linalg.lstsq(a, b, driver=driver), torch.float64)


@pytest.mark.usefixtures("native_only")
def test_out_dtypes_like_cpu():
    a, b = rand(6, 4, seed=6), rand(6, 2, seed=7)
    for dtypes in ([torch.float32, torch.float64, torch.long, torch.float64],
                   [torch.float64, torch.float32, torch.long, torch.float64],
                   [torch.float64, torch.float64, torch.int32, torch.float64],
                   [torch.long, torch.float64, torch.long, torch.float64]):
        results = []
        for device in ("cpu", "neuron"):
            outs = tuple(torch.empty(0, dtype=d, device=device) for d in dtypes)
            try:
                got = torch.linalg.lstsq(a.to(device), b.to(device), driver="gelsd", out=outs)
                results.append([t.cpu() for t in got])
            except RuntimeError as e:
                results.append(str(e))
        if isinstance(results[0], str):
            assert results[1] == results[0]
        else:
            for g, w in zip(results[1], results[0]):
                assert g.dtype == w.dtype and g.shape == w.shape
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("native_only")
def test_errors_like_cpu():
    a = rand(5, 3)
    a[:, 1] = 0
    b = rand(5, 2)
    raises_like_cpu(torch.linalg.lstsq, a, b, driver="gels")  # rank-deficient
    raises_like_cpu(torch.linalg.lstsq, torch.stack([rand(5, 3), a]), torch.stack([b, b]), driver="gels")
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(5, 2), driver="bogus")
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(4, 2))
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(5, 2, dtype=torch.float32))
    raises_like_cpu(torch.linalg.lstsq, torch.ones(5, 3, dtype=torch.long), torch.ones(5, 2, dtype=torch.long))
    raises_like_cpu(torch.linalg.lstsq, rand(5), rand(5))
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), torch.tensor(1.0, dtype=torch.float64))
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(2, 5, 2))  # other has more dims
    raises_like_cpu(torch.linalg.lstsq, rand(2, 5, 3), rand(3, 5, 2))  # batches do not broadcast
    raises_like_cpu(torch.linalg.lstsq, rand(2, 5, 3), rand(5, 2))  # 2-d other: its first dim is a batch dim
    raises_like_cpu(torch.linalg.lstsq, rand(2, 6, 4), rand(1, 6))  # not a batch of vectors
    raises_like_cpu(torch.linalg.lstsq, torch.ones(5, 3, dtype=torch.long), torch.ones(5, 2, dtype=torch.long),
                    driver="bogus")  # the driver is checked before the dtype
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(4, 2), driver="bogus")
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3), rand(2, 5, 2, dtype=torch.float32))
    raises_like_cpu(torch.linalg.lstsq, rand(5, 3, dtype=torch.float16), rand(5, 2, dtype=torch.float16))
    assert torchneuron.get_fallback_ops() == {}


@pytest.mark.parametrize("driver", DRIVERS)
def test_backward_matches_cpu(driver):
    a, b = rand(2, 6, 4, seed=8), rand(2, 6, 3, seed=9)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch.linalg.lstsq(ca, cb, driver=driver).solution.sin().sum().backward()
    na, nb = a.to("neuron").requires_grad_(), b.to("neuron").requires_grad_()
    torchneuron.clear_op_tracking()
    torch.linalg.lstsq(na, nb, driver=driver).solution.sin().sum().backward()
    assert torchneuron.get_fallback_ops() == {}
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(nb.grad.cpu(), cb.grad, rtol=1e-8, atol=1e-9)


def test_complex_still_falls_back_correctly():
    a, b = torch.randn(5, 3, dtype=torch.complex128), torch.randn(5, 2, dtype=torch.complex128)
    got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"))
    torch.testing.assert_close(got.solution.cpu(), torch.linalg.lstsq(a, b).solution)


def test_ops_ran_natively(op_tracking):
    torch.linalg.lstsq(rand(5, 3).to("neuron"), rand(5, 2).to("neuron"))
    assert "aten::linalg_lstsq" in torchneuron.get_executed_ops()
    assert torchneuron.get_fallback_ops() == {}


GELSY_CASES = [((100, 80), 80), ((80, 100), 80), ((100, 80), 37), ((80, 100), 45), ((3, 64, 64), 64),
               ((2, 70, 50), 20), ((130, 130), 100)]


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ashape,rank", GELSY_CASES)
def test_gelsy_pivoted_qr_matches_cpu(dtype, ashape, rank):
    # gelsy is QR with column pivoting (several panels at these sizes) with
    # the rank from the condition estimate: rank equal to the CPU's, the
    # minimum-norm solution to the CPU's within tolerance.
    *batch, m, n = ashape
    if rank == min(m, n):  # full rank, well conditioned
        a = rand(*batch, m, n, seed=31) + (3 * m ** 0.5 * torch.eye(m, n, dtype=torch.float64) if m == n else 0)
    else:  # thin factors: a clear gap below the rank
        a = rand(*batch, m, rank, seed=31) @ rand(*batch, rank, n, seed=32)
    b = rand(*batch, m, 4, seed=33)
    a, b = a.to(dtype), b.to(dtype)
    rcond = 1e-4 if dtype == torch.float32 else None
    want = torch.linalg.lstsq(a, b, rcond=rcond)
    for na in (a.to("neuron"), a.mT.contiguous().to("neuron").mT):
        got = torch.linalg.lstsq(na, b.to("neuron"), rcond=rcond)
        assert torch.equal(got.rank.cpu(), want.rank)
        assert got.residuals.shape == want.residuals.shape == (0,)
        scale = want.solution.abs().max()
        tol = 2e-3 if dtype == torch.float32 else 1e-8
        torch.testing.assert_close(got.solution.cpu() / scale, want.solution / scale, rtol=tol, atol=tol)
