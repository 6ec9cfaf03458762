"""torch.segment_reduce (sum, mean, prod, max, min; lengths or offsets; an
axis with leading batch dimensions; initial values; unsafe) and its backward
on neuron against PyTorch CPU, with the CPU's errors. No op may fall back."""

import pytest
import torch

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
REDUCTIONS = ["sum", "mean", "prod", "max", "min", "amax", "amin"]


def check(data, reduce, *, grad=True, **kwargs):
    x = data.clone().requires_grad_(grad)
    xd = data.to(DEV).requires_grad_(grad)
    kw_n = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    want = torch.segment_reduce(x, reduce, **kwargs)
    got = torch.segment_reduce(xd, reduce, **kw_n)
    assert got.device.type == DEV
    tol = dict(rtol=1e-2, atol=1e-2) if data.dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)
    if grad:
        # positive: the CPU splits a tie's gradient only when it is positive
        # (see test_tied_extremes_share_any_gradient)
        g = torch.rand_like(want) + 0.5
        (gw,) = torch.autograd.grad(want, x, g)
        (gg,) = torch.autograd.grad(got, xd, g.to(DEV))
        torch.testing.assert_close(gg.cpu(), gw, equal_nan=True, **tol)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("initial", [None, 2.5])
def test_segment_reduce_1d(reduce, initial):
    data = torch.tensor([1.0, 2.0, 3.0, 0.5, 5.0, 6.0, 2.0, 2.0])
    lengths = torch.tensor([2, 0, 3, 1, 2])
    check(data, reduce, lengths=lengths, initial=initial)
    check(data, reduce, offsets=torch.tensor([0, 2, 2, 5, 6, 8]), initial=initial)
    check(data, reduce, lengths=lengths.int(), initial=initial)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_batched_axis_and_trailing_dims(reduce):
    torch.manual_seed(0)
    data = torch.randn(2, 6, 3, dtype=torch.float64)
    check(data, reduce, lengths=torch.tensor([[2, 0, 3, 1], [1, 1, 1, 3]]), axis=1)
    check(data, reduce, offsets=torch.tensor([[0, 2, 6], [0, 6, 6]]), axis=1)
    check(data.transpose(0, 2).contiguous().transpose(0, 2), reduce, lengths=torch.tensor([[6], [6]]), axis=-2)
    check(data[0], reduce, lengths=torch.tensor([1, 5]), axis=0)


def test_segment_reduce_ties_zeros_nan_unsafe_and_dtypes():
    check(torch.tensor([1.0, 3.0, 3.0]), "max", lengths=torch.tensor([3]))  # ties share the gradient
    check(torch.tensor([0.0, 3.0, 2.0, 0.0, 0.0, 1.0, 4.0]), "prod", lengths=torch.tensor([3, 3, 1]))
    check(torch.tensor([0.0, 3.0, 2.0, 0.0, 0.0, 1.0, 4.0]), "prod", lengths=torch.tensor([3, 3, 1]), initial=3.0)
    check(torch.tensor([1.0, float("nan"), 3.0]), "max", grad=False, lengths=torch.tensor([3]))
    check(torch.arange(6.0), "sum", lengths=torch.tensor([2, 2]), unsafe=True)
    check(torch.empty(0), "sum", grad=False, lengths=torch.tensor([0, 0]))
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        check(torch.arange(8.0, dtype=dtype) / 4, "mean", lengths=torch.tensor([3, 0, 5]))


def test_tied_extremes_share_any_gradient():
    # The CPU divides a tied maximum's gradient among the ties only where it
    # is positive (a bug: it tests the gradient's sign to find the ties);
    # neuron splits every gradient, as the CPU does for positive ones.
    x = torch.tensor([2.0, 5.0, 5.0, 1.0], device=DEV, requires_grad=True)
    out = torch.segment_reduce(x, "max", lengths=torch.tensor([3, 1], device=DEV))
    (g,) = torch.autograd.grad(out, x, torch.tensor([-4.0, 3.0], device=DEV))
    assert g.cpu().tolist() == [0.0, -2.0, -2.0, 3.0]


def test_segment_reduce_errors():
    d = torch.arange(6.0)
    same_error(lambda a, l: torch.segment_reduce(a, "sum", lengths=l), d, torch.tensor([2, 2]))
    same_error(lambda a: torch.segment_reduce(a, "sum"), d)
    same_error(lambda a, l: torch.segment_reduce(a, "avg", lengths=l), d, torch.tensor([6]))
    same_error(lambda a, l: torch.segment_reduce(a, "sum", lengths=l, indices=l), d, torch.tensor([6]))
    same_error(lambda a, l: torch.segment_reduce(a, "sum", lengths=l), d, torch.tensor([2, -1, 5]))
    same_error(lambda a, l: torch.segment_reduce(a, "sum", lengths=l, axis=1), d, torch.tensor([6]))
    same_error(lambda a, l: torch.segment_reduce(a, "sum", lengths=l, axis=1), torch.randn(2, 6, 3),
               torch.tensor([2, 4]))
    # integer data: the CPU names its kernel ("_segment_reduce_cpu"), neuron the op
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.segment_reduce(d.long().to(DEV), "sum", lengths=torch.tensor([6], device=DEV))


@pytest.mark.parametrize("offsets", [[0, 5, 2], [0, 5, 9], [-1, 3, 6]])
def test_offsets_out_of_order_or_range_are_a_device_error(offsets):
    # The CPU reads such offsets unchecked; the device kernel refuses them,
    # asynchronously, as an index error naming the op.
    d = torch.arange(6.0, device=DEV)
    with pytest.raises(RuntimeError, match="segment_reduce: offsets must ascend within \\[0, 6\\]"):
        torch.segment_reduce(d, "sum", offsets=torch.tensor(offsets, device=DEV)).cpu()
    torch.neuron.clear_error()
    assert torch.segment_reduce(d, "sum", offsets=torch.tensor([0, 2, 6], device=DEV)).cpu().tolist() == [1.0, 14.0]
