"""Ops composed of other native ops (unfold_backward, masked_scatter_) on
neuron against PyTorch CPU, with no CPU fallback."""

import pytest
import torch

import torchneuron

DEV = "neuron"


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("shape,dim,size,step", [
    ((10,), 0, 3, 1),        # overlapping windows
    ((10,), 0, 3, 3),        # adjacent windows
    ((11,), 0, 2, 4),        # gaps between windows
    ((4, 9, 3), 1, 4, 2),    # a middle dim, overlapping
    ((4, 9, 3), -1, 3, 1),   # the last dim
    ((5, 0), 0, 2, 1),       # empty
    ((), 0, 1, 1),           # 0-d
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_unfold_backward_matches_cpu(shape, dim, size, step, dtype):
    x = _rand(shape, dtype)
    grad_shape = x.unfold(dim, size, step).shape
    grad = _rand(grad_shape, dtype, seed=1)
    # bfloat16: the CPU adds overlapping windows in bfloat16, rounding at each
    # step; neuron adds in float32 and rounds once, so compare with the exact
    # sum rounded once.
    exact = torch.ops.aten.unfold_backward(grad.double(), list(shape), dim, size, step)
    expected = exact.to(dtype)
    got = torch.ops.aten.unfold_backward(grad.to(DEV), list(shape), dim, size, step)
    torch.testing.assert_close(got.cpu(), expected)
    assert "aten::unfold_backward" in torchneuron.get_executed_ops()


def test_unfold_gradient_through_autograd():
    x = _rand((3, 12))
    xn = x.to(DEV).requires_grad_()
    x.requires_grad_()
    weights = _rand((3, 5, 4), seed=2)
    (x.unfold(1, 4, 2) * weights).sum().backward()
    (xn.unfold(1, 4, 2) * weights.to(DEV)).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


@pytest.mark.parametrize("self_shape,mask_shape", [
    ((4, 5), (4, 5)),
    ((4, 5), (5,)),          # a broadcast mask
    ((3, 1, 6), (3, 2, 6)),  # not broadcastable: an error on both devices
    ((0, 3), (0, 3)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_masked_scatter_matches_cpu(self_shape, mask_shape, dtype):
    self_cpu = _rand(self_shape).to(dtype)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(mask_shape, generator=g) > 0.5
    source = _rand((40,), seed=4).to(dtype)
    try:
        expected = self_cpu.clone().masked_scatter_(mask, source)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            self_cpu.to(DEV).masked_scatter_(mask.to(DEV), source.to(DEV))
        return
    got = self_cpu.to(DEV).masked_scatter_(mask.to(DEV), source.to(DEV))
    torch.testing.assert_close(got.cpu(), expected)
    got_functional = torch.masked_scatter(self_cpu.to(DEV), mask.to(DEV), source.to(DEV))
    torch.testing.assert_close(got_functional.cpu(), expected)


def test_masked_scatter_on_a_non_contiguous_self():
    base = _rand((6, 8))
    mask = _rand((8, 3)) > 0
    source = _rand((30,), seed=5)
    expected = base.clone()
    expected.t()[:, ::2].masked_scatter_(mask, source)
    got = base.to(DEV)
    got.t()[:, ::2].masked_scatter_(mask.to(DEV), source.to(DEV))
    torch.testing.assert_close(got.cpu(), expected)


def test_masked_scatter_rejects_a_short_source_and_a_float_mask():
    self_ = torch.zeros(2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="masked_scatter_: Number of elements of source"):
        self_.masked_scatter_(torch.ones(2, 3, dtype=torch.bool, device=DEV),
                              torch.ones(5, device=DEV))
    with pytest.raises(RuntimeError, match="boolean masks"):
        self_.masked_scatter_(torch.ones(2, 3, device=DEV), torch.ones(6, device=DEV))
    with pytest.raises(RuntimeError, match="same dtypes"):
        self_.masked_scatter_(torch.ones(2, 3, dtype=torch.bool, device=DEV),
                              torch.ones(6, dtype=torch.float64, device=DEV))


def test_masked_select_gradient_is_native():
    x = _rand((4, 6))
    mask = _rand((4, 6), seed=6) > 0
    xn = x.to(DEV).requires_grad_()
    x.requires_grad_()
    (x.masked_select(mask) * 3).sum().backward()
    (xn.masked_select(mask.to(DEV)) * 3).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
