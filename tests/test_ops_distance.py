"""cdist and pdist (forward and gradients) on neuron against PyTorch CPU:
p = 0, fractional, 1, 2, other and infinity; batch broadcasting,
non-contiguous operands, zero sizes, float32 and float64; the CPU's errors.
No op may fall back."""

import pytest
import torch

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")]


def _pair(dtype):
    torch.manual_seed(0)
    x1 = torch.randn(2, 1, 5, 4, dtype=dtype)
    x2 = torch.randn(3, 6, 4, dtype=dtype)
    x2[0, 0] = x1[0, 0, 0]  # a zero distance (its gradient is 0)
    x2[1, 1, 2] = x1[1, 0, 3, 2]  # an equal coordinate
    return x1, x2


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_forward_and_backward(p, dtype):
    x1, x2 = _pair(dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for mode in ("use_mm_for_euclid_dist_if_necessary", "donot_use_mm_for_euclid_dist"):
        c1, c2 = x1.clone().requires_grad_(), x2.clone().requires_grad_()
        n1, n2 = x1.to(DEV).requires_grad_(), x2.to(DEV).requires_grad_()
        expected = torch.cdist(c1, c2, p=p, compute_mode=mode)
        got = torch.cdist(n1, n2, p=p, compute_mode=mode)
        assert got.shape == expected.shape
        torch.testing.assert_close(got.cpu(), expected.detach(), **tol)
        g = torch.randn(expected.shape, dtype=dtype)
        expected.backward(g)
        got.backward(g.to(DEV))
        torch.testing.assert_close(n1.grad.cpu(), c1.grad, **tol)
        torch.testing.assert_close(n2.grad.cpu(), c2.grad, **tol)


def test_cdist_layouts():
    a, b = torch.randn(3, 7).t(), torch.randn(5, 7)  # a non-contiguous
    torch.testing.assert_close(torch.cdist(a.to(DEV), b[:, :3].to(DEV), p=1).cpu(), torch.cdist(a, b[:, :3], p=1))
    assert torch.cdist(torch.randn(0, 3, device=DEV), torch.randn(4, 3, device=DEV)).shape == (0, 4)
    empty_cols = torch.cdist(torch.randn(2, 0, device=DEV), torch.randn(3, 0, device=DEV)).cpu()
    assert torch.equal(empty_cols, torch.zeros(2, 3))


def test_cdist_errors():
    op = torch.ops.aten._cdist_forward
    cases = [(torch.randn(3, 4), torch.randn(2, 5), 2.0), (torch.randn(4), torch.randn(4), 2.0),
             (torch.ones(3, 4, dtype=torch.int64), torch.ones(2, 4, dtype=torch.int64), 2.0),
             (torch.randn(3, 4), torch.randn(2, 4), -1.0), (torch.randn(3, 4), torch.randn(2, 4).double(), 2.0),
             (torch.randn(3, 4).half(), torch.randn(2, 4).half(), 2.0)]
    for a, b, p in cases:
        with pytest.raises(Exception) as cpu:
            op(a, b, p, None)
        with pytest.raises(type(cpu.value), match=str(cpu.value).split("\n")[0][:40].replace("(", r"\(")):
            op(a.to(DEV), b.to(DEV), p, None)


@pytest.mark.parametrize("p", PS)
def test_pdist_forward_and_backward(p):
    x = torch.randn(6, 3, dtype=torch.float64)
    x[4] = x[1]  # a zero distance
    c, n = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    expected, got = torch.pdist(c, p=p), torch.pdist(n, p=p)
    torch.testing.assert_close(got.cpu(), expected.detach(), rtol=1e-12, atol=1e-12)
    g = torch.randn(expected.shape, dtype=torch.float64)
    expected.backward(g)
    got.backward(g.to(DEV))
    torch.testing.assert_close(n.grad.cpu(), c.grad, rtol=1e-12, atol=1e-12)


def test_pdist_small_and_errors():
    assert torch.pdist(torch.randn(1, 3, device=DEV)).shape == (0,)
    with pytest.raises(RuntimeError, match="pdist only supports 2D tensors"):
        torch.pdist(torch.randn(3, device=DEV))
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        torch.ops.aten._pdist_forward(torch.randn(3, 4, device=DEV).half(), 2.0)
