"""torch.angle of real tensors on neuron against PyTorch CPU: every real
dtype (integers and bools give the default float dtype), the special values,
out= and the (zero) gradient. No op may fall back."""

import pytest
import torch

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_angle_matches_cpu(dtype):
    x = torch.tensor([[-3.0, -1.0, 0.0], [1.0, 2.0, -0.0]]).to(dtype)
    for v in (x, x.t(), x[:, :0], x[0, 0]):  # contiguous, transposed, empty, 0-d
        got = torch.angle(v.to(DEV))
        assert got.device.type == DEV
        torch.testing.assert_close(got.cpu(), torch.angle(v), rtol=0, atol=0)


def test_angle_special_values_out_and_gradient():
    x = torch.tensor([-0.0, float("nan"), float("-inf"), float("inf"), -1e-30])
    torch.testing.assert_close(torch.angle(x.to(DEV)).cpu(), torch.angle(x), equal_nan=True, rtol=0, atol=0)
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    torch.angle(x.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.angle(x).double(), equal_nan=True)
    xd = torch.tensor([-2.0, 3.0], device=DEV, requires_grad=True)
    torch.angle(xd).sum().backward()
    assert xd.grad.cpu().tolist() == [0.0, 0.0]
