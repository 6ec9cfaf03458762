"""Complex linspace/logspace, unfold/fold (im2col/col2im) and renorm, against
PyTorch CPU. Each is built from the real kernels part by part (shape.cpp,
im2col.cpp, renorm.cpp): unfold and fold move and sum each part, so they
are exact (fold's sums in the CPU's order); linspace computes each part's
step as the real linspace does, which can differ from the CPU's complex
division by an ulp; logspace and renorm to the CPU's tolerance. Every call
must run natively."""

import math

import pytest
import torch
import torch.nn.functional as F

from complex_samples import CDTYPES, complex_randn
from conftest import no_fallback

DEV = "neuron"

pytestmark = pytest.mark.usefixtures("op_tracking")


def _check(got, want, exact=False):
    assert got.device.type == DEV
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    tol = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("steps", [0, 1, 2, 7, 100])
def test_linspace_logspace(dtype, steps):
    ends = [(complex(-2.5, 3.0), complex(4.0, -1.25)), (3, complex(0, 2)), (complex(1, 1), complex(1, 1))]
    with no_fallback():
        for start, end in ends:
            _check(torch.linspace(start, end, steps, dtype=dtype, device=DEV),
                   torch.linspace(start, end, steps, dtype=dtype))
            for base in (10.0, 2.0, -3.0):
                _check(torch.logspace(start, end, steps, base=base, dtype=dtype, device=DEV),
                       torch.logspace(start, end, steps, base=base, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_linspace_into_strided_out(dtype):
    with no_fallback():
        out = torch.zeros(12, dtype=dtype, device=DEV)[::2]
        torch.linspace(complex(1, -1), complex(-5, 7), 6, out=out)
        _check(out, torch.linspace(complex(1, -1), complex(-5, 7), 6, dtype=dtype))
        resized = torch.empty(0, dtype=dtype, device=DEV)
        torch.logspace(0, complex(2, math.pi), 5, out=resized)
        _check(resized, torch.logspace(0, complex(2, math.pi), 5, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("batched", [True, False])
def test_unfold_fold(dtype, batched):
    shape = (2, 3, 7, 6) if batched else (3, 7, 6)
    x = complex_randn(dtype, *shape, seed=1, inf_imag=-1.5)
    args = {"kernel_size": (2, 3), "dilation": (1, 2), "padding": (1, 0), "stride": (2, 1)}
    with no_fallback():
        cols = F.unfold(x.to(DEV), **args)
        _check(cols, F.unfold(x, **args), exact=True)
        # conjugate and negated views are resolved before the parts are read
        _check(F.unfold(x.to(DEV).conj(), **args), F.unfold(x.conj(), **args), exact=True)
        _check(F.unfold(torch.neg(x.to(DEV).conj()), **args), F.unfold(torch.neg(x.conj()), **args), exact=True)
        c = complex_randn(dtype, *cols.shape, seed=2)
        _check(F.fold(c.to(DEV), (7, 6), **args), F.fold(c, (7, 6), **args), exact=True)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_unfold_out_and_zero_size(dtype):
    x = complex_randn(dtype, 1, 2, 4, 4, seed=3)
    with no_fallback():
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch._C._nn.im2col(x.to(DEV), (2, 2), (1, 1), (0, 0), (1, 1), out=out)
        _check(out, torch._C._nn.im2col(x, (2, 2), (1, 1), (0, 0), (1, 1)), exact=True)
        empty = torch.empty(0, 2, 4, 4, dtype=dtype)
        _check(F.unfold(empty.to(DEV), 2), F.unfold(empty, 2), exact=True)
    with pytest.raises(RuntimeError, match="im2col: expected out to have dtype"):
        torch._C._nn.im2col(x.to(DEV), (2, 2), (1, 1), (0, 0), (1, 1),
                            out=torch.empty(0, dtype=torch.float32, device=DEV))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("p", [1, 2, 3.5, math.inf])
def test_renorm(dtype, p):
    x = complex_randn(dtype, 4, 5, 3, seed=4) * 3
    with no_fallback():
        for dim in (0, 1, -1):
            for maxnorm in (0.5, 4.0, 100.0):
                _check(torch.renorm(x.to(DEV), p, dim, maxnorm), torch.renorm(x, p, dim, maxnorm))
        inplace = x.to(DEV)
        inplace.renorm_(p, 1, 2.0)
        _check(inplace, x.renorm(p, 1, 2.0))
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.renorm(x.to(DEV)[:, ::2], p, 0, 1.0, out=out)
        _check(out, torch.renorm(x[:, ::2], p, 0, 1.0))
        _check(torch.renorm(x.to(DEV).conj(), p, 2, 1.0), torch.renorm(x.conj(), p, 2, 1.0))
