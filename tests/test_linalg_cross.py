"""linalg.cross (and torch.cross) on neuron against PyTorch CPU: any dim,
broadcast batch dims, non-contiguous operands, integer and floating dtypes,
out= (aliasing an input too), gradients; the CPU's errors. No fallback."""

import pytest
import torch

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
def test_cross(dtype):
    torch.manual_seed(0)
    make = (lambda *s: torch.randint(-5, 6, s).to(dtype)) if not dtype.is_floating_point else \
        (lambda *s: torch.randn(s).to(dtype))
    cases = [(make(4, 3), make(4, 3), -1), (make(3, 5), make(3, 1), 0), (make(2, 1, 3), make(1, 4, 3), 2),
             (make(5, 3).t(), make(3, 5), 0), (make(0, 3), make(0, 3), 1)]
    for a, b, dim in cases:
        expected = torch.linalg.cross(a, b, dim=dim)
        got = torch.linalg.cross(a.to(DEV), b.to(DEV), dim=dim)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got.cpu(), expected)
    a, b = make(4, 3), make(4, 3)
    torch.testing.assert_close(torch.cross(a.to(DEV), b.to(DEV), dim=1).cpu(), torch.cross(a, b, dim=1))
    alias = a.to(DEV)
    torch.linalg.cross(alias, b.to(DEV), out=alias)
    torch.testing.assert_close(alias.cpu(), torch.linalg.cross(a, b))


def test_cross_gradient():
    a, b = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    an, bn = a.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    g = torch.randn(6, 3, dtype=torch.float64)
    torch.linalg.cross(ac, bc).backward(g)
    torch.linalg.cross(an, bn).backward(g.to(DEV))
    torch.testing.assert_close(an.grad.cpu(), ac.grad)
    torch.testing.assert_close(bn.grad.cpu(), bc.grad)


def test_cross_errors():
    same_error(torch.linalg.cross, torch.randn(2, 2), torch.randn(2, 2))
    same_error(torch.linalg.cross, torch.randn(3), torch.randn(2, 3))
    same_error(torch.linalg.cross, torch.randn(3), torch.randn(3).double())
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(4, 3))
    same_error(torch.linalg.cross, torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool))
