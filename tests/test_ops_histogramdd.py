"""torch.histogramdd (bin counts, explicit edges, ranges, weights, density)
on neuron against PyTorch CPU, with the CPU's errors. No op may fall back."""

import pytest
import torch

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
NAN, INF = float("nan"), float("inf")


def compare(expected, got):
    torch.testing.assert_close(got.hist.cpu(), expected.hist, rtol=1e-6, atol=1e-7)
    assert len(got.bin_edges) == len(expected.bin_edges)
    for e, g in zip(expected.bin_edges, got.bin_edges):
        assert g.device.type == DEV
        torch.testing.assert_close(g.cpu(), e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogramdd(dtype):
    torch.manual_seed(0)
    x = torch.randn(40, 3, dtype=dtype)
    w = torch.rand(40, dtype=dtype)
    cases = [
        ([2, 3, 4], {}),
        ([5, 1, 2], {"range": [-1.0, 1.0, -2.0, 0.5, 0.0, 3.0]}),
        ([3, 3, 3], {"weight": w}),
        ([4, 2, 3], {"density": True}),
        ([4, 2, 3], {"range": [-2.0, 2.0, -2.0, 2.0, -2.0, 2.0], "weight": w, "density": True}),
        (4, {}),
    ]
    for bins, kwargs in cases:
        kw_n = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        compare(torch.histogramdd(x, bins, **kwargs), torch.histogramdd(x.to(DEV), bins, **kw_n))
    # a batch of points [5, 8, 2], non-contiguous, and explicit (uneven) edges
    y = torch.randn(2, 8, 5, dtype=dtype).permute(2, 1, 0)
    compare(torch.histogramdd(y, [3, 4]), torch.histogramdd(y.to(DEV), [3, 4]))
    edges = [torch.tensor([-3.0, -0.5, 0.0, 2.0], dtype=dtype), torch.tensor([-1.0, 1.0], dtype=dtype)]
    compare(torch.histogramdd(y, edges), torch.histogramdd(y.to(DEV), [e.to(DEV) for e in edges]))
    # points on the last edge, outside the edges and NaN
    z = torch.tensor([[2.0, 1.0], [-0.5, 0.0], [5.0, 0.0], [NAN, 0.0], [0.0, -1.0]], dtype=dtype)
    compare(torch.histogramdd(z, edges), torch.histogramdd(z.to(DEV), [e.to(DEV) for e in edges]))
    # a single repeated point, and no points
    compare(torch.histogramdd(torch.ones(4, 2, dtype=dtype), [2, 2]),
            torch.histogramdd(torch.ones(4, 2, dtype=dtype, device=DEV), [2, 2]))
    compare(torch.histogramdd(torch.empty(0, 2, dtype=dtype), [2, 3]),
            torch.histogramdd(torch.empty(0, 2, dtype=dtype, device=DEV), [2, 3]))


def test_histogramdd_bin_edges_op():
    x = torch.randn(9, 2)
    for e, g in zip(torch._histogramdd_bin_edges(x, [3, 4]), torch._histogramdd_bin_edges(x.to(DEV), [3, 4])):
        torch.testing.assert_close(g.cpu(), e)


def test_histogramdd_errors():
    x = torch.randn(7, 3)
    e = torch.tensor([0.0, 1.0])
    same_error(lambda a: torch.histogramdd(a, bins=[2, 3]), x)
    same_error(lambda a: torch.histogramdd(a, bins=[2, 0, 4]), x)
    same_error(lambda a: torch.histogramdd(a, bins=[2, 3, 4], range=[0.0, 1.0]), x)
    same_error(lambda a: torch.histogramdd(a, bins=[2, 3, 4], range=[0.0, 1.0, 2, 1, 0, 1]), x)
    same_error(lambda a: torch.histogramdd(a, bins=[2, 3, 4], range=[0.0, 1.0, 0, 1, 0, INF]), x)
    same_error(lambda a, w: torch.histogramdd(a, bins=[2, 3, 4], weight=w), x, torch.ones(6))
    same_error(lambda a, w: torch.histogramdd(a, bins=[2, 3, 4], weight=w), x, torch.ones(7, dtype=torch.float64))
    same_error(lambda a: torch.histogramdd(a, bins=[2]), x[:, 0])
    same_error(lambda a: torch.histogramdd(a, bins=[2, 3, 4]), x.long())
    same_error(lambda a, b0, b1: torch.histogramdd(a, bins=[b0, b1]), x, e, e)
    same_error(lambda a, b0, b1, b2: torch.histogramdd(a, bins=[b0, b1, b2]), x, e, e, e[None])
    same_error(lambda a, b0, b1, b2: torch.histogramdd(a, bins=[b0, b1, b2]), x, e, e, e[:1])
    same_error(lambda a, b0, b1, b2: torch.histogramdd(a, bins=[b0, b1, b2]), x, e, e, e.double())
