"""torch.histogram (bin counts, explicit edges, weights, density, out=) and
the deprecated torch.cholesky on neuron against PyTorch CPU, with the CPU's
errors and warning. No op may fall back."""

import warnings

import pytest
import torch

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
NAN, INF = float("nan"), float("inf")


def compare(expected, got):
    for e, g in zip(expected, got):
        assert g.device.type == DEV
        torch.testing.assert_close(g.cpu(), e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram(dtype):
    torch.manual_seed(0)
    x = torch.randn(7, 9, dtype=dtype)
    x[0, :3] = torch.tensor([NAN, 50.0, -50.0], dtype=dtype)
    w = torch.rand(7, 9, dtype=dtype)
    for kwargs in ({}, {"range": (-1.0, 2.0)}, {"weight": w}, {"density": True}, {"range": (-2.0, 2.0), "weight": w,
                                                                                   "density": True}):
        kw_n = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        if "range" not in kwargs and x.isnan().any():
            continue  # the CPU's min/max of a NaN input is NaN: an error on both
        compare(torch.histogram(x, 6, **kwargs), torch.histogram(x.to(DEV), 6, **kw_n))
    finite = x.nan_to_num(0.0).clamp(-3, 3)
    compare(torch.histogram(finite, 5), torch.histogram(finite.to(DEV), 5))
    compare(torch.histogram(finite.t(), 5), torch.histogram(finite.t().to(DEV), 5))  # non-contiguous
    edges = torch.tensor([-3.0, -1.0, 0.0, 0.5, 3.0], dtype=dtype)
    compare(torch.histogram(finite, edges, weight=w), torch.histogram(finite.to(DEV), edges.to(DEV), weight=w.to(DEV)))
    compare(torch.histogram(torch.full((4,), 2.0, dtype=dtype), 3),
            torch.histogram(torch.full((4,), 2.0, dtype=dtype, device=DEV), 3))
    compare(torch.histogram(torch.tensor([], dtype=dtype), 3), torch.histogram(torch.tensor([], dtype=dtype, device=DEV), 3))
    hist, bin_edges = torch.empty(0, dtype=dtype, device=DEV), torch.empty(0, dtype=dtype, device=DEV)
    torch.histogram(finite.to(DEV), 4, out=(hist, bin_edges))
    compare(torch.histogram(finite, 4), (hist, bin_edges))


def test_histogram_errors():
    x = torch.tensor([1.0, 2.0])
    same_error(lambda a: torch.histogram(a, 0), x)
    same_error(lambda a: torch.histogram(a, 3, range=(2.0, 1.0)), x)
    same_error(lambda a: torch.histogram(a, 3), torch.tensor([1, 2]))
    same_error(lambda a: torch.histogram(a, 3), torch.tensor([1.0, INF]))
    same_error(lambda a, w: torch.histogram(a, 3, weight=w), x, torch.ones(3))
    same_error(lambda a, b: torch.histogram(a, b), x, torch.ones(2, 2))
    same_error(lambda a, b: torch.histogram(a, b), x, torch.tensor([1.0]))
    same_error(lambda a, b: torch.histogram(a, b), x, torch.tensor([0.0, 1, 2], dtype=torch.float64))
    same_error(lambda a, b: torch.histogram(a, b), x, torch.tensor([]))


@pytest.mark.parametrize("upper", [False, True])
def test_deprecated_cholesky(upper):
    a = torch.randn(3, 4, 4, dtype=torch.float64)
    spd = a @ a.mT + 4 * torch.eye(4, dtype=torch.float64)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        expected = torch.cholesky(spd, upper=upper)
        got = torch.cholesky(spd.to(DEV), upper=upper)
    torch.testing.assert_close(got.cpu(), expected)
    indefinite = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(torch.cholesky, indefinite)
        same_error(torch.cholesky, torch.ones(2, 3))
