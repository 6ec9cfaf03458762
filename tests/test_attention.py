"""scaled_dot_product_attention on neuron against PyTorch CPU.

Each case runs F.scaled_dot_product_attention forward and backward on CPU
tensors and on their neuron twins (same values, same views) and compares
the output and the gradients of query, key and value (and of a floating
mask when it requires grad). On neuron the call must take the flash-style
kernels (_scaled_dot_product_fused_attention_overrideable and its backward)
and nothing may fall back to the CPU. Dropout cannot match the CPU's random
numbers; its cases check the dropout statistics, that the same seed gives
the same result, and that the backward pass uses exactly the forward's mask.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import torchneuron

TOL = {torch.float32: (2e-5, 2e-5), torch.bfloat16: (3e-2, 3e-2), torch.float16: (3e-3, 3e-3)}
FWD = "aten::_scaled_dot_product_fused_attention_overrideable"
BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def run(q, k, v, grad, mask=None, **kw):
    """Output and gradients of q, k, v (and mask if it requires grad)."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    m = mask
    if mask is not None and mask.is_floating_point() and mask.requires_grad:
        m = mask.detach().requires_grad_()
        leaves.append(m)
    out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=m, **kw)
    out.backward(grad)
    return [out.detach()] + [t.grad for t in leaves]


def check_case(q, k, v, mask=None, dtype=torch.float32, layout=None, **kw):
    """Runs the case on CPU (in float32 for 16-bit dtypes, as the reference)
    and neuron and compares; asserts the fused kernels ran natively."""
    q, k, v = (t.to(dtype) for t in (q, k, v))
    grad = randn(*q.shape[:-1], v.shape[-1], seed=9).to(dtype)
    ref_dtype = torch.float32 if dtype != torch.float32 else torch.float64
    up = lambda t: None if t is None else (t.to(ref_dtype) if t.is_floating_point() else t)
    expected = run(*(up(t) for t in (q, k, v, grad)), mask=up(mask), **kw)
    # the same values on neuron, in a strided view if the case has a layout
    dev = lambda t: None if t is None else (layout or (lambda x: x))(t.to("neuron"))
    torchneuron.clear_op_tracking()
    got = run(*(dev(t) for t in (q, k, v, grad)), mask=dev(mask) if mask is not None else None, **kw)
    torch.neuron.synchronize()
    assert torchneuron.get_fallback_ops() == {}
    ops = torchneuron.get_executed_ops()
    if q.numel():  # PyTorch answers empty queries without a kernel
        assert ops.get(FWD, 0) == 1 and ops.get(BWD, 0) == 1, ops
    rtol, atol = TOL[dtype]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu().to(e.dtype), e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [70, 50])
def test_matches_cpu_with_gradients(dtype, causal, length):
    n = length
    q, k, v = randn(2, 3, n, 32, seed=1), randn(2, 3, n, 32, seed=2), randn(2, 3, n, 32, seed=3)
    check_case(q, k, v, dtype=dtype, is_causal=causal)


# (B, H): 16 heads take the one-pass backward (a task per head, with up to 4
# kernel threads); 1 head the blocked passes (keys, then queries): both give
# the same bits. Lengths: one key, a partial block, whole blocks, blocks plus
# a remainder; and L = 1024.
@pytest.mark.parametrize("heads", [(4, 4), (1, 1)], ids=["per_head_pass", "blocked_passes"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [1, 63, 128, 200])
def test_backward_paths_match_cpu_across_lengths(heads, causal, length):
    B, H = heads
    q, k, v = (randn(B, H, length, 16, seed=s) for s in (1, 2, 3))
    check_case(q, k, v, is_causal=causal)


@pytest.mark.parametrize("causal", [False, True])
def test_long_sequence_1024_matches_cpu(causal):
    q, k, v = (randn(1, 2, 1024, 16, seed=s) for s in (1, 2, 3))
    check_case(q, k, v, is_causal=causal)


def test_single_key_with_many_queries_causal():
    q, k, v = randn(4, 4, 70, 8, seed=1), randn(4, 4, 1, 8, seed=2), randn(4, 4, 1, 8, seed=3)
    check_case(q, k, v, is_causal=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_per_head_pass_in_16_bit_with_gqa_and_unequal_lengths(dtype):
    q, k = randn(4, 8, 130, 32, seed=1), randn(4, 2, 200, 32, seed=2)
    v = randn(4, 2, 200, 24, seed=3)
    check_case(q, k, v, dtype=dtype, enable_gqa=True, is_causal=True)


def test_mask_with_200_keys_and_gqa():
    q, k = randn(2, 4, 200, 16, seed=1), randn(2, 2, 200, 16, seed=2)
    v = randn(2, 2, 200, 16, seed=3)
    check_case(q, k, v, mask=randn(200, 200, seed=4), enable_gqa=True)


def test_unequal_lengths_and_value_head_dim():
    q, k, v = randn(1, 2, 33, 40, seed=1), randn(1, 2, 130, 40, seed=2), randn(1, 2, 130, 24, seed=3)
    check_case(q, k, v)


def test_causal_with_more_queries_than_keys():
    q, k, v = randn(1, 2, 90, 16, seed=1), randn(1, 2, 20, 16, seed=2), randn(1, 2, 20, 16, seed=3)
    check_case(q, k, v, is_causal=True)


def test_float_mask_broadcast_from_two_dims():
    q, k, v = randn(2, 2, 65, 16, seed=1), randn(2, 2, 50, 16, seed=2), randn(2, 2, 50, 16, seed=3)
    check_case(q, k, v, mask=randn(65, 50, seed=4))


def test_bool_mask_with_a_fully_masked_row():
    q, k, v = randn(2, 2, 40, 16, seed=1), randn(2, 2, 40, 16, seed=2), randn(2, 2, 40, 16, seed=3)
    mask = randn(2, 1, 40, 40, seed=4) > -0.5
    mask[:, :, 5] = False  # PyTorch's _safe_softmax: the row attends nothing, out = 0
    check_case(q, k, v, mask=mask)


def test_gradient_of_a_floating_mask():
    q, k, v = randn(1, 2, 20, 8, seed=1), randn(1, 2, 30, 8, seed=2), randn(1, 2, 30, 8, seed=3)
    mask = randn(1, 2, 20, 30, seed=4).requires_grad_()
    check_case(q, k, v, mask=mask)


def test_grouped_query_attention():
    q, k, v = randn(2, 8, 40, 16, seed=1), randn(2, 2, 40, 16, seed=2), randn(2, 2, 40, 16, seed=3)
    check_case(q, k, v, enable_gqa=True, is_causal=True)


def test_scale_argument_and_head_dim_256():
    q, k, v = randn(1, 1, 10, 256, seed=1), randn(1, 1, 70, 256, seed=2), randn(1, 1, 70, 256, seed=3)
    check_case(q, k, v, scale=0.01)


def test_transposed_inputs_as_from_a_projection():
    # (B, L, H, E) memory viewed as (B, H, L, E), as multi-head attention does
    q, k, v = randn(2, 3, 33, 16, seed=1), randn(2, 3, 33, 16, seed=2), randn(2, 3, 33, 16, seed=3)
    layout = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)
    check_case(q, k, v, layout=layout, is_causal=True)


def test_three_dimensional_inputs():
    q, k, v = randn(3, 20, 16, seed=1), randn(3, 25, 16, seed=2), randn(3, 25, 16, seed=3)
    check_case(q, k, v)


def test_zero_length_queries():
    q, k, v = randn(2, 2, 0, 16, seed=1), randn(2, 2, 5, 16, seed=2), randn(2, 2, 5, 16, seed=3)
    check_case(q, k, v)


def test_output_keeps_the_query_layout():
    q = randn(2, 5, 3, 8).to("neuron").transpose(1, 2)  # (B, H, L, E) view of (B, L, H, E)
    out = F.scaled_dot_product_attention(q, q, q)
    assert out.transpose(1, 2).is_contiguous()


def test_float64_takes_the_math_path():
    q = randn(1, 1, 4, 8, dtype=torch.float64)
    torchneuron.clear_op_tracking()
    out = F.scaled_dot_product_attention(q.to("neuron"), q.to("neuron"), q.to("neuron"))
    assert FWD not in torchneuron.get_executed_ops()
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, q, q))


def test_math_only_context_is_respected():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = randn(1, 1, 4, 8).to("neuron")
    torchneuron.clear_op_tracking()
    with sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(q, q, q)
    assert FWD not in torchneuron.get_executed_ops()


# ---- dropout -------------------------------------------------------------------


def dropout_run(p, seed, grad=None, L=64, S=96, E=16):
    """SDPA with v = identity (S x S), so the output is the dropped-out
    attention matrix itself; returns out and the gradients."""
    q, k = randn(2, 2, L, E, seed=1), randn(2, 2, S, E, seed=2)
    v = torch.eye(S).expand(2, 2, S, S).contiguous()
    leaves = [t.to("neuron").requires_grad_() for t in (q, k, v)]
    torch.neuron.manual_seed(seed)
    out = F.scaled_dot_product_attention(*leaves, dropout_p=p)
    if grad is None:
        return out.detach().cpu(), None
    out.backward(grad.to("neuron"))
    return out.detach().cpu(), [t.grad.cpu() for t in leaves], (q, k, v)


def test_dropout_keeps_the_expected_fraction_scaled():
    p = 0.3
    torchneuron.clear_op_tracking()
    out, _ = dropout_run(p, seed=5)
    assert torchneuron.get_fallback_ops() == {}
    q, k = randn(2, 2, 64, 16, seed=1), randn(2, 2, 96, 16, seed=2)
    probs = torch.softmax(q @ k.transpose(-1, -2) / 4, dim=-1)
    kept = out != 0
    frac = kept.float().mean().item()
    assert abs(frac - (1 - p)) < 0.01  # 24576 draws: 5 sigma is 0.015
    torch.testing.assert_close(out[kept], (probs / (1 - p))[kept], rtol=1e-5, atol=1e-6)


def test_dropout_same_seed_same_result_other_seed_differs():
    a, _ = dropout_run(0.5, seed=7)
    b, _ = dropout_run(0.5, seed=7)
    c, _ = dropout_run(0.5, seed=8)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("keys", [96, 48])  # 48: one key block
def test_dropout_backward_uses_the_forward_mask(keys):
    p = 0.4
    grad = randn(2, 2, 64, keys, seed=11)
    torchneuron.clear_op_tracking()
    out, grads, (q, k, v) = dropout_run(p, seed=3, grad=grad, S=keys)
    assert torchneuron.get_fallback_ops() == {}
    keep = (out != 0).double()  # the forward's mask, read from its output
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    probs = torch.softmax(leaves[0] @ leaves[1].transpose(-1, -2) / 4, dim=-1)
    ref = (probs * keep / (1 - p)) @ leaves[2]
    ref.backward(grad.double())
    for g, r in zip(grads, leaves):
        torch.testing.assert_close(g.double(), r.grad, rtol=1e-4, atol=1e-5)


# ---- errors ----------------------------------------------------------------------


def test_mismatched_head_dims_raise_like_cpu():
    q, k = randn(1, 1, 4, 8), randn(1, 1, 4, 6)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), k.to("neuron"))


def test_direct_call_with_bad_dtype_names_the_op():
    q = torch.ones(1, 1, 4, 8, dtype=torch.float64, device="neuron")
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q)
