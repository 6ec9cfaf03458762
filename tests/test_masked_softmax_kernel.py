"""The fast path's masked softmax as one runtime pass (SOFTMAX with a mask
operand, nn_softmax.c): against the CPU's _masked_softmax and its backward,
and bit for bit against its reference twin on neuron, masked_fill with -inf
then _softmax. Mask types 0 (L, L), 1 (B, L) and 2 (the input's shape), the
softmax dim last (rows) or not (columns), layouts the mask view cannot
merge, non-contiguous inputs, zero-size and 0-d inputs, fully masked rows
(NaN forward, zero gradient), float32/float64/float16/bfloat16."""

import pytest
import torch

import torchneuron

DEV = "neuron"
A = torch.ops.aten
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def _full_mask(x, mask, mask_type):
    """The mask broadcast to x's shape, as the CPU reads each type."""
    if mask_type == 1 and mask.dim() == 2 and x.dim() == 4:
        return mask.view(x.shape[0], 1, 1, x.shape[2]).expand(x.shape)
    if mask_type == 0 and mask.dim() == 2 and x.dim() == 4:
        return mask.view(1, 1, *mask.shape).expand(x.shape)
    return mask


CASES = [  # (input shape, mask shape, mask type, dim)
    ((2, 3, 5, 5), (5, 5), 0, 3), ((2, 3, 5, 5), (2, 5), 1, 3), ((2, 3, 5, 5), (2, 3, 5, 5), 2, 3),
    ((2, 3, 5, 5), (5, 5), 0, 2), ((2, 3, 5, 5), (2, 5), 1, 1), ((2, 3, 5, 5), (2, 3, 5, 5), 2, 0),
    ((4, 70), (4, 70), 2, 1), ((70, 4), (70, 4), None, 0), ((3, 2, 67), (3, 2, 67), 2, 2), ((7,), (7,), 2, 0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,mask_shape,mask_type,dim", CASES)
def test_masked_softmax_matches_cpu_and_its_twin(shape, mask_shape, mask_type, dim, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype) * 4
    mask = torch.rand(mask_shape) < 0.4
    mask.view(-1)[: mask_shape[-1]] = True  # a fully masked row or column: NaN, as on the CPU
    want = torch._masked_softmax(x, mask, dim, mask_type)
    xd, md = x.to(DEV), mask.to(DEV)
    torchneuron.clear_op_tracking()
    got = torch._masked_softmax(xd, md, dim, mask_type)
    ops = torchneuron.get_executed_ops()
    assert ops.get("aten::_masked_softmax") == 1 and "aten::masked_fill.Scalar" not in ops, ops
    assert got.dtype == dtype and got.shape == x.shape
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)
    twin = torch._softmax(xd.masked_fill(_full_mask(xd, md, mask_type), float("-inf")), dim, False)
    assert torch.equal(got.cpu().view(torch.int8), twin.cpu().view(torch.int8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_softmax_of_strided_input_and_unmergeable_mask(dtype):
    torch.manual_seed(1)
    base = torch.randn(6, 4, 9, dtype=dtype)
    x = base.transpose(0, 2)[:, ::2]  # [9, 2, 6], non-contiguous
    mask = (torch.rand(6, 9) < 0.5).t().unsqueeze(1).expand(9, 2, 6)  # strides the mask view cannot merge
    # The CPU's kernel reads a non-contiguous input as if it were contiguous
    # (torch 2.13: wrong values), so its reference gets a contiguous copy.
    want = torch._masked_softmax(x.contiguous(), mask.contiguous(), 2, 2)
    got = torch._masked_softmax(x.to(DEV), mask.to(DEV), 2, 2)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_masked_softmax_of_zero_size_and_scalar_inputs():
    x = torch.randn(2, 0, 3)
    assert torch._masked_softmax(x.to(DEV), torch.zeros(2, 0, 3, dtype=torch.bool, device=DEV), 2, 2).shape == x.shape
    for masked in (False, True):
        s = torch.tensor(1.5)
        want = torch._masked_softmax(s, torch.tensor(masked), 0, 2)
        got = torch._masked_softmax(s.to(DEV), torch.tensor(masked, device=DEV), 0, 2)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [3, 1])
def test_masked_softmax_backward_matches_cpu(dtype, dim):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 4, 6, dtype=dtype)
    mask = torch.rand(2, 3, 4, 6) < 0.4
    mask[0, 0, 0, :] = True  # a fully masked row (NaN output): its gradient is 0
    mask[1, :, 2, 3] = True  # a fully masked column
    y = torch._masked_softmax(x, mask, dim, 2)
    g = torch.randn_like(x)
    want = A._masked_softmax_backward(g, y, mask, dim)
    torchneuron.clear_op_tracking()
    got = A._masked_softmax_backward(g.to(DEV), y.to(DEV), mask.to(DEV), dim)
    ops = torchneuron.get_executed_ops()
    assert ops.get("aten::_masked_softmax_backward") == 1 and "aten::masked_fill_.Scalar" not in ops, ops
    tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)
    assert not got.cpu()[0, 0, 0].isnan().any()


def test_masked_softmax_autograd_and_errors():
    torch.manual_seed(3)
    x = torch.randn(3, 2, 5, 5, dtype=torch.float64)
    mask = torch.rand(3, 2, 5, 5) < 0.3  # autograd passes the mask as given: the CPU's needs grad's shape
    grads = []
    for d in ("cpu", DEV):
        xd = x.to(d).detach().requires_grad_()
        A._masked_softmax(xd, mask.to(d), 3, 2).backward(torch.linspace(-1, 1, x.numel()).view(x.shape).to(d, x.dtype))
        grads.append(xd.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
    with pytest.raises(RuntimeError, match="Mask shape should match grad shape"):
        A._masked_softmax_backward(x.to(DEV), x.to(DEV), mask[0].to(DEV), 3)
    with pytest.raises(NotImplementedError, match="\"masked_softmax\" not implemented for 'Int'"):
        torch._masked_softmax(torch.ones(2, 2, dtype=torch.int32, device=DEV),
                              torch.zeros(2, 2, dtype=torch.bool, device=DEV), 1, 2)
    with pytest.raises(RuntimeError, match="expected the mask on neuron"):
        torch._masked_softmax(torch.ones(2, 2, device=DEV), torch.zeros(2, 2, dtype=torch.bool), 1, 2)
