"""F.unfold / F.fold (im2col / col2im, nn.Unfold / nn.Fold) on neuron against
PyTorch CPU, forward and backward (each is the other's gradient), batched
and unbatched, with kernel, dilation, padding and stride variants,
non-contiguous inputs and out= tensors, every dtype the CPU kernels take;
no op may fall back to the CPU. unfold selects elements (exact); fold sums
them in a fixed order (exact here: values are multiples of 1/64).
"""

import pytest
import torch
import torch.nn.functional as F


DEV = "neuron"

CASES = [  # (image shape, kernel_size, dilation, padding, stride)
    ((2, 3, 6, 5), (2, 3), 1, 0, 1),
    ((1, 2, 7, 7), 3, 2, 1, 2),
    ((3, 5, 4), (2, 2), 1, (1, 0), (1, 2)),
    ((2, 1, 5, 9), (1, 4), (1, 2), (0, 3), (3, 1)),
    ((1, 4, 3, 3), 3, 1, 2, 1),  # padding as large as the kernel
    ((0, 2, 4, 4), 2, 1, 0, 1),  # empty batch
]


def grid(shape, dtype=torch.float64):
    return (torch.randint(-64, 65, shape) / 64).to(dtype)


pytestmark = pytest.mark.usefixtures("native_only")


@pytest.mark.parametrize("shape,k,d,p,s", CASES, ids=[str(c[0]) for c in CASES])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_unfold_fold_forward_backward(shape, k, d, p, s, layout):
    base = grid(shape)
    if layout == "channels_last" and base.dim() == 4:
        base = base.contiguous(memory_format=torch.channels_last)
    x = base.clone().requires_grad_()
    xd = base.to(DEV).requires_grad_()
    cols = F.unfold(x, k, d, p, s)
    cols_d = F.unfold(xd, k, d, p, s)
    assert torch.equal(cols_d.cpu(), cols.detach())
    w = grid(cols.shape)
    (cols * w).sum().backward()
    (cols_d * w.to(DEV)).sum().backward()
    assert torch.equal(xd.grad.cpu(), x.grad)  # col2im: sums of multiples of 1/64

    size = shape[-2:]
    c = grid(cols.shape).requires_grad_()
    cd = c.detach().to(DEV).requires_grad_()
    img = F.fold(c, size, k, d, p, s)
    img_d = F.fold(cd, size, k, d, p, s)
    assert torch.equal(img_d.cpu(), img.detach())
    w = grid(img.shape)
    (img * w).sum().backward()
    (img_d * w.to(DEV)).sum().backward()
    assert torch.equal(cd.grad.cpu(), c.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.bool], ids=str)
def test_unfold_fold_dtypes(dtype):
    x = grid((2, 3, 5, 6)).to(dtype)
    cols = F.unfold(x, (2, 3), padding=1, stride=(2, 1))
    assert torch.equal(F.unfold(x.to(DEV), (2, 3), padding=1, stride=(2, 1)).cpu(), cols)
    got = F.fold(cols.to(DEV), (5, 6), (2, 3), padding=1, stride=(2, 1)).cpu()
    want = F.fold(cols, (5, 6), (2, 3), padding=1, stride=(2, 1))
    if dtype in (torch.bfloat16, torch.float16):  # the CPU sums in the 16-bit type, we in float32
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    else:
        assert torch.equal(got, want)


def test_non_contiguous_inputs_and_outputs():
    x = grid((3, 2, 8, 7)).transpose(2, 3)
    want = F.unfold(x, 3, stride=2)
    assert torch.equal(F.unfold(x.to(DEV), 3, stride=2).cpu(), want)
    out = torch.empty(want.shape[0], want.shape[2], want.shape[1], dtype=want.dtype, device=DEV).transpose(1, 2)
    torch.ops.aten.im2col.out(x.to(DEV), [3, 3], [1, 1], [0, 0], [2, 2], out=out)
    assert torch.equal(out.cpu(), want)
    cols = grid((2, 12, 20)).transpose(0, 1).contiguous().transpose(0, 1)
    want = F.fold(cols, (6, 7), 2, stride=(1, 2), padding=(0, 1))
    assert torch.equal(F.fold(cols.to(DEV), (6, 7), 2, stride=(1, 2), padding=(0, 1)).cpu(), want)
    out = torch.empty(2, 3, 7, 6, dtype=cols.dtype, device=DEV).transpose(2, 3)
    torch.ops.aten.col2im.out(cols.to(DEV), [6, 7], [2, 2], [1, 1], [0, 1], [1, 2], out=out)
    assert torch.equal(out.cpu(), want)


def test_modules():
    x = grid((2, 3, 9, 8), torch.float32)
    unfold, fold = torch.nn.Unfold(3, padding=1), torch.nn.Fold((9, 8), 3, padding=1)
    assert torch.equal(unfold(x.to(DEV)).cpu(), unfold(x))
    assert torch.equal(fold(unfold(x.to(DEV))).cpu(), fold(unfold(x)))


@pytest.mark.parametrize("call", [
    lambda x: F.unfold(x, 0),
    lambda x: F.unfold(x, 2, stride=0),
    lambda x: F.unfold(x, 2, padding=-1),
    lambda x: F.unfold(x, 9),
    lambda x: F.unfold(x.long(), 2),
    lambda x: F.unfold(x[0, 0], 2),
    lambda x: F.fold(F.unfold(x, 2), (4, 4), 3),
    lambda x: F.fold(F.unfold(x, 2), (5, 4), 2),
    lambda x: F.fold(F.unfold(x, 2).long(), (4, 4), 2),
], ids=["kernel0", "stride0", "negative-padding", "too-small", "int64", "2-d", "channels-not-divisible",
        "blocks-mismatch", "fold-int64"])
def test_bad_arguments_raise_like_cpu(call):
    x = grid((1, 2, 4, 4), torch.float32)
    with pytest.raises((RuntimeError, NotImplementedError, IndexError)) as cpu:  # 2-d: IndexError on CPU too
        call(x)
    with pytest.raises(type(cpu.value)) as got:
        call(x.to(DEV))
    assert str(got.value).split("\n")[0] == str(cpu.value).split("\n")[0]
