"""multi_margin_loss and multilabel_margin_loss, forward and backward, on
neuron against PyTorch CPU: p = 1 and 2, margins, class weights, every
reduction, [N, C], [C] and 0-d inputs, repeated and early-ended target
lists; the CPU's errors. No op may fall back."""

import pytest
import torch
import torch.nn.functional as F

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
REDUCTIONS = ["none", "mean", "sum"]


def run_both(fn, x, *rest):
    xc, xn = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    rest_n = [r.to(DEV) if isinstance(r, torch.Tensor) else r for r in rest]
    yc, yn = fn(xc, *rest), fn(xn, *rest_n)
    torch.testing.assert_close(yn.cpu(), yc.detach(), rtol=1e-6, atol=1e-6)
    g = torch.randn(yc.shape, dtype=x.dtype)
    yc.backward(g)
    yn.backward(g.to(DEV))
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multi_margin_loss(reduction, p, dtype):
    torch.manual_seed(0)
    x = torch.randn(6, 5, dtype=dtype)
    t = torch.tensor([1, 0, 4, 4, 2, 3])
    w = torch.rand(5, dtype=dtype)
    for margin, weight in ((1.0, None), (0.3, w)):
        run_both(lambda a, b, c: F.multi_margin_loss(a, b, p=p, margin=margin, weight=c, reduction=reduction),
                 x, t, weight)
        run_both(lambda a, b, c: F.multi_margin_loss(a, b, p=p, margin=margin, weight=c, reduction=reduction),
                 x[2], t[2], weight)
    run_both(lambda a, b: F.multi_margin_loss(a, b, reduction=reduction), x[0, 0], torch.tensor(0))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multilabel_margin_loss(reduction, dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=dtype)
    t = torch.tensor([[1, 3, -1, 0, 2], [4, -1, 0, 0, 0], [0, 1, 2, 3, 4], [2, 2, -1, 3, 3]])
    run_both(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x, t)
    run_both(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x[0], t[0])
    run_both(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x[0, 0], torch.tensor(0))
    loss, is_target = torch.ops.aten.multilabel_margin_loss_forward(x.to(DEV), t.to(DEV), 1)
    assert torch.equal(is_target.cpu(), torch.ops.aten.multilabel_margin_loss_forward(x, t, 1)[1])


def test_errors():
    x, t = torch.randn(3, 5), torch.tensor([1, 0, 4])
    mm = torch.ops.aten.multi_margin_loss
    same_error(lambda a, b: mm(a, b, 3, 1.0, None, 1), x, t)
    same_error(lambda a, b, w: mm(a, b, 1, 1.0, w, 1), x, t, torch.ones(4))
    same_error(lambda a, b: mm(a, b, 1, 1.0, None, 1), x, t[:2])
    same_error(lambda a, b: mm(a, b, 1, 1.0, None, 1), torch.randn(2, 3, 4), t)
    same_error(lambda a, b: mm(a, b, 1, 1.0, None, 1), x, t.int())
    same_error(lambda a, b: mm(a, b, 1, 1.0, None, 1), x.half(), t)
    ml = torch.ops.aten.multilabel_margin_loss_forward
    tt = torch.tensor([[1, 3, -1, 0, 2], [4, -1, 0, 0, 0], [0, 1, 2, 3, 4]])
    same_error(lambda a, b: ml(a, b, 1), x, tt[:, :4])
    same_error(lambda a, b: ml(a, b, 1), x, tt.int())
    same_error(lambda a, b: ml(a, b, 1), x, torch.full((3, 5), 5))
    same_error(lambda a, b: ml(a, b, 1), torch.randn(3, 0), torch.zeros(3, 0, dtype=torch.long))
