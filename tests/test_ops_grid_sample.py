"""grid_sampler_2d / grid_sampler_3d (F.grid_sample: bilinear, nearest,
bicubic; zeros, border, reflection padding; align_corners) and their
backward on neuron against PyTorch CPU: float32, float64, float16 and
bfloat16, channels_last and transposed operands, grids reaching outside the
image and holding NaN or infinities, zero-size batches, the CPU's errors. No
op may fall back."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from cpu_parity import same_error

DEV = "neuron"
pytestmark = pytest.mark.usefixtures("native_only")
CASES = [(dims, mode, pad, align)
         for dims, mode, pad, align in itertools.product([2, 3], ["bilinear", "nearest", "bicubic"],
                                                          ["zeros", "border", "reflection"], [False, True])
         if not (dims == 3 and mode == "bicubic")]


def tol(dtype):
    return {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-4),
            torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}[dtype]


def check(x, grid, dtype=torch.float32, **kw):
    xa = x.to(dtype).detach().clone().requires_grad_()
    ga = grid.to(dtype).detach().clone().requires_grad_()
    xb = x.to(dtype).detach().to(DEV).requires_grad_()
    gb = grid.to(dtype).detach().to(DEV).requires_grad_()
    want = F.grid_sample(xa, ga, **kw)
    got = F.grid_sample(xb, gb, **kw)
    assert got.device.type == DEV and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, **tol(dtype))
    w = torch.randn_like(want)
    want.backward(w)
    got.backward(w.to(DEV))
    torch.testing.assert_close(xb.grad.cpu(), xa.grad, **tol(dtype))
    torch.testing.assert_close(gb.grad.cpu(), ga.grad, **tol(dtype))


@pytest.mark.parametrize("dims,mode,pad,align", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_matches_cpu(dims, mode, pad, align, dtype):
    x = torch.randn([2, 3] + [4, 5, 6][3 - dims:])
    grid = torch.rand([2] + [3, 4, 2][3 - dims:] + [dims]) * 2.8 - 1.4  # inside and outside
    check(x, grid, dtype, mode=mode, padding_mode=pad, align_corners=align)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_grid_sample_16_bit(dtype):
    # neuron computes 16-bit data in float32 and rounds once: compared with
    # the CPU's float32 result on the same (rounded) values
    x = torch.randn(1, 2, 5, 6).to(dtype)
    grid = (torch.rand(1, 3, 4, 2) * 2 - 1).to(dtype)
    for mode in ("bilinear", "nearest", "bicubic"):
        want = F.grid_sample(x.float(), grid.float(), mode=mode, padding_mode="border", align_corners=False)
        got = F.grid_sample(x.to(DEV), grid.to(DEV), mode=mode, padding_mode="border", align_corners=False)
        assert got.dtype == dtype
        torch.testing.assert_close(got.cpu(), want.to(dtype))


def test_grid_sample_layouts_and_special_values():
    x = torch.randn(2, 3, 7, 5).to(memory_format=torch.channels_last)
    grid = (torch.rand(2, 4, 6, 2) * 2.4 - 1.2).transpose(1, 2)  # non-contiguous
    for mode in ("bilinear", "nearest", "bicubic"):
        check(x, grid, mode=mode, padding_mode="reflection", align_corners=False)
    # Non-finite grid values follow PyTorch's CUDA kernel: under border and
    # reflection padding NaN clips to 0 (the CPU's 2-d kernel agrees), under
    # zeros padding such a point reads nothing (the CPU's vectorised 2-d
    # kernel gives NaN there).
    special = torch.tensor([[[[0.2, float("nan")], [float("inf"), 0.1]], [[-float("inf"), 0.3], [0.7, -0.9]]]])
    x1 = torch.randn(1, 2, 3, 4)
    finite = special.isfinite().all(-1)
    for mode, pad in itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"]):
        want = F.grid_sample(x1, special, mode=mode, padding_mode=pad, align_corners=True)
        got = F.grid_sample(x1.to(DEV), special.to(DEV), mode=mode, padding_mode=pad, align_corners=True).cpu()
        if pad == "zeros":
            if mode != "bicubic":  # bicubic weights of a NaN fraction are NaN, on CUDA too
                assert (got[:, :, ~finite[0]] == 0).all()
            torch.testing.assert_close(got[:, :, finite[0]], want[:, :, finite[0]])
        elif mode != "bicubic":
            torch.testing.assert_close(got, want)
    x3 = torch.randn(1, 2, 3, 4, 5).to(memory_format=torch.channels_last_3d)
    check(x3, torch.rand(1, 2, 3, 4, 3) * 2 - 1, mode="bilinear", padding_mode="zeros", align_corners=True)


def test_grid_sample_empty_and_single_pixel():
    check(torch.randn(0, 2, 3, 4), torch.rand(0, 2, 2, 2), mode="bilinear", padding_mode="zeros", align_corners=False)
    check(torch.randn(1, 2, 1, 1), torch.rand(1, 2, 2, 2) * 2 - 1, mode="bilinear", padding_mode="reflection",
          align_corners=True)


def test_affine_grid_spatial_transformer():
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.25, 1.1, -0.05]]]).repeat(2, 1, 1)
    x = torch.randn(2, 3, 8, 8)
    grid = F.affine_grid(theta, [2, 3, 8, 8], align_corners=False)
    grid_d = F.affine_grid(theta.to(DEV), [2, 3, 8, 8], align_corners=False)
    torch.testing.assert_close(grid_d.cpu(), grid)
    torch.testing.assert_close(F.grid_sample(x.to(DEV), grid_d, align_corners=False).cpu(),
                               F.grid_sample(x, grid, align_corners=False), rtol=1e-5, atol=1e-5)


def test_grid_sample_errors():
    x, g = torch.randn(1, 2, 3, 4), torch.rand(1, 2, 2, 2)
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), x, g[:, :, :, :1])
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), x, torch.rand(2, 2, 2, 2))
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), x, g.double())
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), torch.randn(1, 2, 0, 4), g)
    same_error(lambda a, b: F.grid_sample(a, b, mode="bicubic", align_corners=False), torch.randn(1, 2, 3, 4, 5),
               torch.rand(1, 2, 2, 2, 3))
    # integers: the CPU names its kernel ("grid_sampler_2d_cpu_kernel_impl"), neuron the op
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        torch.grid_sampler_2d(x.int().to(DEV), g.int().to(DEV), 0, 0, False)
