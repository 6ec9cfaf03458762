"""Reflection, replication and circular padding (1-d, 2-d, 3-d) on neuron
against PyTorch CPU, forward and backward, batched and unbatched, with
negative (cropping) pads, non-contiguous inputs, every dtype the forward
copies and the floating dtypes of the backward; no op may fall back to the
CPU. The forward selects elements (exact); the backward sums them in a
fixed order (exact in float64 up to rounding of the sums).
"""

import pytest
import torch
import torch.nn.functional as F


DEV = "neuron"

CASES = [  # (input shape, pads)
    ((2, 3, 6), (2, 3)),
    ((3, 6), (1, 0)),
    ((2, 3, 6), (-1, 2)),
    ((2, 2, 5, 4), (1, 2, 3, 0)),
    ((2, 5, 4), (2, 2, 1, 1)),
    ((1, 2, 4, 5, 3), (1, 2, 0, 1, 2, 2)),
    ((2, 4, 5, 3), (2, 0, 1, 3, 1, 1)),
]


pytestmark = pytest.mark.usefixtures("native_only")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pads", CASES, ids=[f"{len(p) // 2}d-{s}-{p}" for s, p in CASES])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_pad_float64_forward_backward(mode, shape, pads, layout):
    if mode == "reflect" and min(pads) < 0:
        pytest.skip("reflection padding does not crop")
    base = torch.randn(shape, dtype=torch.float64)
    if layout == "transposed":
        base = base.transpose(-1, -2).contiguous().transpose(-1, -2)
    x = base.clone().requires_grad_()
    xd = base.to(DEV).requires_grad_()
    expected = F.pad(x, pads, mode=mode)
    got = F.pad(xd, pads, mode=mode)
    assert torch.equal(got.cpu(), expected.detach())
    w = torch.randn(expected.shape, dtype=torch.float64)
    (expected * w).sum().backward()
    (got * w.to(DEV)).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32,
                                   torch.uint8], ids=str)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_dtypes(mode, dtype):
    x = (torch.randn(2, 3, 5, 4) * 10).to(dtype)
    for pads in [(1, 2), (1, 2, 2, 1)]:
        xx = x[0] if len(pads) == 2 else x
        try:
            expected = F.pad(xx, pads, mode=mode)
        except (RuntimeError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                F.pad(xx.to(DEV), pads, mode=mode)
            continue
        assert torch.equal(F.pad(xx.to(DEV), pads, mode=mode).cpu(), expected)
    if dtype.is_floating_point:
        xs = x.clone().requires_grad_()
        xd = x.to(DEV).requires_grad_()
        F.pad(xs, (1, 2, 2, 1), mode=mode).sum().backward()
        F.pad(xd, (1, 2, 2, 1), mode=mode).sum().backward()
        torch.testing.assert_close(xd.grad.cpu(), xs.grad)


def test_pad_module_and_out_forms():
    x = torch.randn(2, 3, 4, 5)
    for mod in (torch.nn.ReflectionPad2d(2), torch.nn.ReplicationPad2d((1, 0, 2, 3)),
                torch.nn.ReflectionPad1d(3), torch.nn.ReplicationPad3d(1)):
        xx = x if not isinstance(mod, (torch.nn.ReflectionPad1d, torch.nn.ReplicationPad3d)) else (
            x[0] if isinstance(mod, torch.nn.ReflectionPad1d) else x.unsqueeze(0))
        assert torch.equal(mod(xx.to(DEV)).cpu(), mod(xx))
    out = torch.empty(0, device=DEV)
    torch._C._nn.reflection_pad2d(x.to(DEV), (1, 1, 2, 2), out=out)
    assert torch.equal(out.cpu(), torch._C._nn.reflection_pad2d(x, (1, 1, 2, 2)))
    strided = torch.empty(2, 3, 8, 7, device=DEV).transpose(-1, -2)
    torch._C._nn.replication_pad2d(x.to(DEV), (1, 1, 2, 2), out=strided)
    assert torch.equal(strided.cpu(), torch._C._nn.replication_pad2d(x, (1, 1, 2, 2)))


def test_pad_errors_match_cpu():
    x = torch.randn(1, 2, 3)
    for call in (lambda t: F.pad(t, (3, 0), mode="reflect"),      # pad not less than the dim
                 lambda t: F.pad(t, (-2, -2), mode="replicate"),  # empty output
                 lambda t: torch._C._nn.reflection_pad1d(t, (1, 1, 1)),
                 lambda t: torch._C._nn.reflection_pad2d(t[0, 0], (1, 1, 1, 1))):
        with pytest.raises(RuntimeError) as cpu_err:
            call(x)
        with pytest.raises(type(cpu_err.value)):
            call(x.to(DEV))
