"""CTC loss (_ctc_loss and its backward; F.ctc_loss's reductions, padded and
concatenated targets, int and tensor lengths, zero_infinity, unbatched input)
on neuron against PyTorch CPU, with the CPU's errors. No op may fall back."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")


def problem(T=12, N=4, C=6, S=5, dtype=torch.float32, blank=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    log_probs = torch.randn(T, N, C, generator=g, dtype=dtype).log_softmax(2)
    labels = [c for c in range(C) if c != blank]
    targets = torch.tensor(labels)[torch.randint(0, len(labels), (N, S), generator=g)]
    input_lengths = [T, T - 2, 7, 0][:N]
    target_lengths = [S, 3, 0, 2][:N]  # the last item is impossible (no input)
    return log_probs, targets, input_lengths, target_lengths


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("blank", [0, 5])
def test_ctc_loss_forward_and_backward(dtype, padded, blank):
    lp, targets, il, tl = problem(dtype=dtype, blank=blank)
    if not padded:
        targets = torch.cat([targets[n, :tl[n]] for n in range(len(tl))])
    for reduction in ("none", "mean", "sum"):
        for zero_infinity in (False, True):
            x = lp.clone().requires_grad_()
            xd = lp.to(DEV).requires_grad_()
            want = F.ctc_loss(x, targets, il, tl, blank, reduction, zero_infinity)
            got = F.ctc_loss(xd, targets.to(DEV), il, tl, blank, reduction, zero_infinity)
            torch.testing.assert_close(got.cpu(), want, **tol(dtype))
            grad = torch.rand_like(want)
            want.backward(grad)
            got.backward(grad.to(DEV))
            torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol(dtype), equal_nan=True)


def test_ctc_loss_raw_outputs_match_the_cpu_where_defined():
    lp, targets, il, tl = problem(T=9, N=3, S=4)
    nll, alpha = torch._ctc_loss(lp, targets, il, tl)
    nll_d, alpha_d = torch._ctc_loss(lp.to(DEV), targets.to(DEV), il, tl)
    torch.testing.assert_close(nll_d.cpu(), nll, **tol(torch.float32))
    assert alpha_d.shape == alpha.shape and alpha_d.device.type == DEV
    # log_alpha is defined for t < input length and the item's 2 L + 1 states
    for n in range(3):
        states = 2 * tl[n] + 1
        torch.testing.assert_close(alpha_d[n, : il[n], :states].cpu(), alpha[n, : il[n], :states], **tol(torch.float32))


def test_ctc_loss_tensor_lengths_int32_targets_and_strided_log_probs():
    lp, targets, il, tl = problem(T=10, N=3, S=4, dtype=torch.float64)
    base = lp.permute(1, 2, 0).contiguous()  # [N, C, T] storage seen as [T, N, C]
    lp_d = base.to(DEV).permute(2, 0, 1).requires_grad_()
    x = lp.clone().requires_grad_()
    il_t, tl_t = torch.tensor(il), torch.tensor(tl, dtype=torch.int32)
    want = F.ctc_loss(x, targets.int(), il_t, tl_t, reduction="sum")
    got = F.ctc_loss(lp_d, targets.int().to(DEV), il_t.to(DEV), tl_t.to(DEV), reduction="sum")
    torch.testing.assert_close(got.cpu(), want)
    want.backward()
    got.backward()
    torch.testing.assert_close(lp_d.grad.cpu(), x.grad)


def test_ctc_loss_unbatched_and_ctc_module():
    lp, targets, il, tl = problem(T=8, N=1, S=3)
    x = lp[:, 0].clone().requires_grad_()
    xd = lp[:, 0].to(DEV).requires_grad_()
    loss = torch.nn.CTCLoss(blank=0, zero_infinity=True)
    want = loss(x, targets[0], torch.tensor(il[0]), torch.tensor(tl[0]))
    got = loss(xd, targets[0].to(DEV), torch.tensor(il[0]), torch.tensor(tl[0]))
    torch.testing.assert_close(got.cpu(), want)
    want.backward()
    got.backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_ctc_loss_label_out_of_range_raises_at_synchronisation():
    lp, targets, il, tl = problem(N=2, S=3)
    targets[1, 0] = 6  # C == 6
    with pytest.raises(IndexError, match="ctc_loss: batch item 1 has a target label outside"):
        torch._ctc_loss(lp.to(DEV), targets.to(DEV), il[:2], tl[:2])
        torch.neuron.synchronize()
    assert isinstance(torchneuron.IndexOutOfRangeError("x"), IndexError)


def test_ctc_loss_errors():
    lp, targets, il, tl = problem(N=3, S=4)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2]), lp[:0], targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [13, 0, 3], [4, 0, 2]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [-1, 0, 3], [4, 0, 2]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [5, 0, 2]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [-1, 0, 2]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0], [4, 0, 2]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0]), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2], blank=6), lp, targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2]), lp[:, 0], targets)
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2]), lp, targets.reshape(-1))
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2]), lp, targets[:2])
    same_error(lambda a, t: torch._ctc_loss(a, t, [12, 0, 3], [4, 0, 2]), lp, targets[:, None])
    same_error(lambda a, t: torch.ctc_loss(a, t, torch.tensor([12.0, 0, 3]), torch.tensor([4, 0, 2])), lp, targets)
    # float16: the CPU names its kernel ("ctc_loss_cpu"), neuron the op
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        torch._ctc_loss(lp.half().to(DEV), targets.to(DEV), [12, 0, 3], [4, 0, 2])
    # the tensor type's name differs (torch.FloatTensor on the CPU)
    with pytest.raises(RuntimeError, match="Expected tensor for argument #2 'targets' to have scalar type Int"):
        torch._ctc_loss(lp.to(DEV), targets.float().to(DEV), [12, 0, 3], [4, 0, 2])
