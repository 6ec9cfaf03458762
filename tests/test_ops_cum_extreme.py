"""cummax and cummin (the native CUMMAX/CUMMIN scans behind ATen's
_cummax_helper/_cummin_helper) on neuron against PyTorch CPU, compared
exactly: values bit for bit and indices, with the CPU's rules (the last of
equal values wins, a NaN takes over and only a later NaN replaces it), in
every dtype the CPU kernel takes, along each dim of contiguous, transposed,
sliced and broadcast (stride 0) inputs, 0-d and zero-size ones, out= into
non-contiguous tensors, and the gradient. No op may fall back to the CPU.
"""

import pytest
import torch

import torchneuron

DEV = "neuron"
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
OPS = [torch.cummax, torch.cummin]

pytestmark = pytest.mark.usefixtures("native_only")


def sample(shape, dtype):
    """Few distinct values (many ties); floats also get NaN, infinities and signed zeros."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    x = torch.randint(-3, 4, shape)
    if not dtype.is_floating_point:
        return (x + 3 if dtype == torch.uint8 else x).to(dtype)
    x = x.to(torch.float64)
    flat = x.view(-1)
    if flat.numel() >= 8:
        pick = torch.randperm(flat.numel())[: max(4, flat.numel() // 6)]
        specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, float("nan")],
                                dtype=torch.float64)
        flat[pick] = specials[torch.arange(pick.numel()) % specials.numel()]
    return x.to(dtype)


def same(got, want):
    """Exact equality including NaN positions and the sign of zeros."""
    assert got.dtype == want.dtype and got.shape == want.shape
    got = got.cpu()
    if want.dtype.is_floating_point:
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        assert torch.equal(torch.signbit(got), torch.signbit(want))
        keep = ~torch.isnan(want)
        assert torch.equal(got[keep], want[keep])
    else:
        assert torch.equal(got, want)


def check(op, x):
    for dim in range(-max(x.dim(), 1), max(x.dim(), 1)):
        got, want = op(x.to(DEV) if x.device.type == "cpu" else x, dim), op(x.cpu(), dim)
        same(got.values, want.values)
        same(got.indices, want.indices)


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layouts(op, dtype):
    check(op, sample((5, 9), dtype))
    check(op, sample((9, 5), dtype).t())                   # transposed
    check(op, sample((4, 6, 3), dtype))
    check(op, sample((4, 12), dtype)[:, ::3])              # sliced
    check(op, sample((7, 1), dtype).expand(7, 6))          # broadcast along dim 1
    check(op, sample((1, 6), dtype).expand(7, 6))          # broadcast along dim 0
    check(op, sample((), dtype))                           # 0-d
    check(op, sample((0, 4), dtype))                       # zero-size
    check(op, sample((3, 0), dtype))
    check(op, sample((40,), dtype))


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=str)
def test_long_lines_and_wide_tiles(op, dtype):
    # long lines along the innermost dim, and more columns than one tile holds
    check(op, sample((3, 700), dtype))
    x = sample((5, 2100), dtype)
    got, want = op(x.to(DEV), 0), op(x, 0)
    same(got.values, want.values)
    same(got.indices, want.indices)


def test_nan_and_tie_rules():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, 3.0, 3.0, nan, 5.0, nan, 2.0],
                      [-0.0, 0.0, -0.0, -inf, -inf, inf, inf]])
    for op in OPS:
        got, want = op(x.to(DEV), 1), op(x, 1)
        same(got.values, want.values)
        same(got.indices, want.indices)
    # spelled out: ties take the later index, the last NaN is the one reported
    assert torch.cummax(x.to(DEV), 1).indices[0].tolist() == [0, 1, 2, 3, 3, 5, 5]
    assert torch.cummin(x.to(DEV), 1).indices[1].tolist() == [0, 1, 2, 3, 4, 4, 4]


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_out_non_contiguous_and_errors(op):
    x = sample((6, 5), torch.float32)
    values = torch.empty(5, 6, device=DEV).t()
    indices = torch.empty(5, 6, dtype=torch.int64, device=DEV).t()
    op(x.to(DEV), 0, out=(values, indices))
    want = op(x, 0)
    same(values, want.values)
    same(indices, want.indices)
    v0, i0 = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.int64, device=DEV)
    op(x.to(DEV), 1, out=(v0, i0))                                   # resized
    same(v0, op(x, 1).values)
    for call in (lambda d: op(torch.ones(3, device=d), 1),
                 lambda d: op(torch.ones(3, device=d), 0, out=(torch.empty(3, device=d),
                                                                torch.empty(3, device=d)))):
        with pytest.raises((RuntimeError, IndexError)) as cpu:
            call("cpu")
        with pytest.raises(type(cpu.value)) as got:
            call(DEV)
        assert str(got.value).split("\n")[0] == str(cpu.value).split("\n")[0]


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_backward(op, dtype):
    x = sample((4, 7), dtype)
    x = torch.where(torch.isfinite(x), x, torch.zeros((), dtype=dtype))  # ties, no NaN
    xs, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    g = torch.randn(4, 7, dtype=dtype)
    op(xs, 1).values.backward(g)
    op(xd, 1).values.backward(g.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xs.grad)  # scatter_add of the grads


def test_runs_its_kernel(op_tracking):
    torch.cummax(torch.ones(3, 4, device=DEV), 1)
    torch.cummin(torch.ones(3, 4, device=DEV), 0)
    ran = torchneuron.get_executed_ops()
    assert "aten::_cummax_helper" in ran and "aten::_cummin_helper" in ran
