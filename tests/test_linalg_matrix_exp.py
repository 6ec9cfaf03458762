"""linalg.matrix_exp natively on neuron (runtime LINALG_MATRIX_EXP: scaling
and squaring with a Pade approximant, its products on the runtime's GEMM)
against the CPU (whose kernel is a different, Taylor-based, algorithm):
float32 and float64 (float16 and bfloat16 through float32), norms that
select each approximant degree and squarings, batched, strided,
zero-size, out=, the CPU's errors and backward, with no CPU fallback."""

import pytest
import torch

import torchneuron
from cpu_parity import raises_like_cpu
from linalg_cases import rand

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [1e-6, 1e-2, 0.3, 1.0, 3.0, 20.0])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (3, 5, 5), (2, 2, 16, 16), (64, 64)])
def test_matrix_exp_matches_cpu(dtype, scale, shape):
    a = rand(*shape, dtype=dtype, seed=1) * scale / shape[-1] ** 0.5
    want = torch.linalg.matrix_exp(a)
    got = torch.linalg.matrix_exp(a.to("neuron"))
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu() / want.abs().max(), want / want.abs().max(), **TOL[dtype])
    t = torch.linalg.matrix_exp(a.mT.contiguous().to("neuron").mT)
    torch.testing.assert_close(t.cpu() / want.abs().max(), want / want.abs().max(), **TOL[dtype])


@pytest.mark.usefixtures("native_only")
def test_zero_size_and_method():
    # (linalg.matrix_exp has no out= in Python; the ATen out overload is
    # generated from the functional one.)
    for shape in ((0, 0), (3, 0, 0)):
        z = torch.zeros(shape)
        assert torch.linalg.matrix_exp(z.to("neuron")).shape == torch.linalg.matrix_exp(z).shape
    a = rand(2, 3, 3, seed=2)
    torch.testing.assert_close(a.to("neuron").matrix_exp().cpu(), torch.matrix_exp(a), **TOL[torch.float64])


@pytest.mark.usefixtures("native_only")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_through_float32(dtype):
    a = (rand(3, 6, 6, seed=4) / 3).to(dtype)
    want = torch.linalg.matrix_exp(a.float()).to(dtype)
    got = torch.linalg.matrix_exp(a.to("neuron"))
    assert got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want)
    # The CPU's own 16-bit kernel gives NaN here (it computes in the 16-bit
    # dtype); against the float64 result rounded once:
    torch.testing.assert_close(got.cpu(), torch.linalg.matrix_exp(a.double()).to(dtype))


@pytest.mark.usefixtures("native_only")
def test_nonfinite_gives_nan_like_cpu():
    for bad in (float("inf"), float("nan")):
        a = torch.tensor([[1.0, bad], [0.0, 1.0]], dtype=torch.float64)
        got = torch.linalg.matrix_exp(a.to("neuron")).cpu()
        assert torch.equal(got.isnan(), torch.linalg.matrix_exp(a).isnan())


@pytest.mark.usefixtures("native_only")
def test_errors_like_cpu():
    raises_like_cpu(torch.linalg.matrix_exp, torch.ones(3, 4))
    raises_like_cpu(torch.linalg.matrix_exp, torch.ones(3))
    raises_like_cpu(torch.linalg.matrix_exp, torch.ones(3, 3, dtype=torch.long))
    raises_like_cpu(torch.linalg.matrix_exp, torch.tensor(2.0))
    assert torchneuron.get_fallback_ops() == {}


@pytest.mark.parametrize("scale", [0.1, 2.0])
def test_backward_matches_cpu(scale):
    a = rand(2, 4, 4, seed=3) * scale
    ca = a.clone().requires_grad_()
    torch.linalg.matrix_exp(ca).sin().sum().backward()
    na = a.to("neuron").requires_grad_()
    torchneuron.clear_op_tracking()
    torch.linalg.matrix_exp(na).sin().sum().backward()
    assert torchneuron.get_fallback_ops() == {}
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-9, atol=1e-10)


def test_complex_runs_natively(op_tracking):
    # computed in complex128 (more in tests/test_linalg_complex.py)
    a = torch.randn(3, 3, dtype=torch.complex128)
    torch.testing.assert_close(torch.linalg.matrix_exp(a.to("neuron")).cpu(), torch.linalg.matrix_exp(a))
    assert torchneuron.get_fallback_ops() == {}


def test_ops_ran_natively(op_tracking):
    torch.linalg.matrix_exp(rand(4, 4).to("neuron"))
    assert "aten::linalg_matrix_exp" in torchneuron.get_executed_ops()
    assert torchneuron.get_fallback_ops() == {}
