"""The examples/nki kernels on neuron tensors against PyTorch CPU, in fp32 and
bf16, with shapes that are not multiples of 128."""

import math
import os
import sys

import pytest
import torch

import torchneuron.nki as nki

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))

from attention import causal_attention  # noqa: E402
from layernorm import layernorm  # noqa: E402
from matmul import matmul_tiled  # noqa: E402
from rmsnorm import rmsnorm  # noqa: E402
from scale_shift import COLS, ROWS, scale_shift  # noqa: E402
from softmax import softmax  # noqa: E402
from standardize import standardize_softmax  # noqa: E402
from tensor_add import tensor_add  # noqa: E402
from transpose import transpose2d  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16]
TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2}


def on_neuron(*tensors):
    return [t.to("neuron") for t in tensors]


def assert_close(out, ref, dtype, scale=1.0):
    assert out.device.type == "neuron" and out.dtype == dtype
    out = out.cpu().float()
    tol = TOL[dtype] * scale
    torch.testing.assert_close(out, ref.to(dtype).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(128, 512), (300, 1000), (1, 7)])
def test_tensor_add_matches_torch(dtype, shape):
    a, b = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    out = tensor_add(*on_neuron(a, b))
    # fp32 compute then rounding equals torch's bf16 add exactly.
    assert torch.equal(out.cpu(), a + b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_is_exact(dtype):
    a = torch.randn(200, 333, dtype=dtype)
    assert torch.equal(transpose2d(*on_neuron(a)).cpu(), a.T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k,m,n", [(256, 128, 512), (300, 200, 700), (77, 45, 70)])
def test_matmul_accumulates_over_k(dtype, k, m, n):
    lhsT, rhs = torch.randn(k, m, dtype=dtype), torch.randn(k, n, dtype=dtype)
    out = matmul_tiled(*on_neuron(lhsT, rhs))
    ref = lhsT.float().T @ rhs.float()
    assert_close(out, ref, dtype, scale=math.sqrt(k))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_matches_torch(dtype):
    x = torch.randn(300, 257, dtype=dtype) * 3
    assert_close(softmax(*on_neuron(x)), torch.softmax(x.float(), dim=1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_matches_torch(dtype):
    x, w = torch.randn(200, 96, dtype=dtype), torch.randn(96, dtype=dtype)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    assert_close(rmsnorm(*on_neuron(x, w)), ref, dtype, scale=4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_matches_torch(dtype):
    x = torch.randn(130, 200, dtype=dtype)
    g, b = torch.randn(200, dtype=dtype), torch.randn(200, dtype=dtype)
    ref = torch.nn.functional.layer_norm(x.float(), (200,), g.float(), b.float(), eps=1e-5)
    assert_close(layernorm(*on_neuron(x, g, b)), ref, dtype, scale=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seq,d", [(256, 64), (200, 32)])
def test_causal_attention_matches_torch(dtype, seq, d):
    q, k, v = (torch.randn(seq, d, dtype=dtype) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float()[None], k.float()[None], v.float()[None], is_causal=True)[0]
    # P is rounded to bf16 before P @ V, as on hardware.
    tol = {torch.float32: 1e-2, torch.bfloat16: 3e-2}[dtype]
    out = causal_attention(*on_neuron(q, k, v)).cpu().float()
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scale_shift_matches_torch(dtype):
    x = torch.randn(ROWS, COLS, dtype=dtype)
    scale, shift = torch.randn(ROWS, dtype=dtype), torch.randn(COLS, dtype=dtype)
    ref = x.float() * scale.float()[:, None] + shift.float()[None, :]
    assert_close(scale_shift(*on_neuron(x, scale, shift)), ref, dtype)


def test_scale_shift_annotations_refuse_other_shapes():
    x = torch.randn(ROWS, COLS + 1)
    with pytest.raises(nki.NkiError, match=r"\[annotation\].*'x'"):
        scale_shift(*on_neuron(x, torch.randn(ROWS), torch.randn(COLS + 1)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_standardize_softmax_matches_torch(dtype):
    x = torch.randn(300, 200, dtype=dtype) * 3 + 1
    z, p = standardize_softmax(*on_neuron(x))
    ref_z = torch.nn.functional.layer_norm(x.float(), (200,), eps=1e-5)
    assert_close(z, ref_z, dtype, scale=4)
    assert_close(p, torch.softmax(ref_z, dim=1), dtype)
