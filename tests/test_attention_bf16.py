"""bfloat16 SDPA forward on the GEMM's bfloat16 micro-kernel.

On CPUs with AVX512-BF16 or AMX (and no lower TORCHNEURON_ISA), bfloat16
attention computes its scores and its weighted sum with the GEMM's
bfloat16 kernel, rounding the softmax weights to bfloat16 for the second
product as PyTorch CPU's flash attention does
(runtime/src/ops/attention/attention_forward_bf16.c). The counter
``attention.bf16_tiles`` says when it ran. Its error against a float64
reference is held to the CPU's own bfloat16 error on the same inputs;
tests/test_attention.py covers the gradients and the other dtypes.
"""

import pytest
import torch
import torch.nn.functional as F

import torchneuron
import torchneuron.metrics as metrics

FWD = "aten::_scaled_dot_product_fused_attention_overrideable"


def _bf16_kernel_expected():
    # The runtime's bfloat16 GEMM kernels need the avx512 level and the
    # AVX512_BF16 instructions (AMX hosts have both).
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    return torch.neuron.isa_levels()["active"] == "avx512" and "avx512_bf16" in flags


def randn(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def errors(q, k, v, layout=lambda t: t, **kw):
    """Max errors of neuron's and the CPU's bfloat16 outputs against the
    float64 result of the same bfloat16 inputs."""
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    mask = kw.pop("attn_mask", None)
    exact = F.scaled_dot_product_attention(qb.double(), kb.double(), vb.double(),
                                           attn_mask=None if mask is None else (mask if mask.dtype == torch.bool else mask.double()), **kw)
    cpu = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=None if mask is None else (mask if mask.dtype == torch.bool else mask.to(torch.bfloat16)), **kw)
    dev = [layout(t.to("neuron")) for t in (qb, kb, vb)]
    dmask = None if mask is None else (mask if mask.dtype == torch.bool else mask.to(torch.bfloat16)).to("neuron")
    torchneuron.clear_op_tracking()
    got = F.scaled_dot_product_attention(*dev, attn_mask=dmask, **kw).cpu()
    assert torchneuron.get_fallback_ops() == {}
    assert torchneuron.get_executed_ops().get(FWD, 0) == 1
    assert got.dtype == torch.bfloat16 and got.shape == exact.shape
    return (got.double() - exact).abs().max().item(), (cpu.double() - exact).abs().max().item()


CASES = {
    # (q shape, k shape, v shape, kwargs)
    "causal_partial_blocks": ((2, 3, 70, 64), (2, 3, 70, 64), (2, 3, 70, 64), dict(is_causal=True)),
    "long_causal": ((1, 2, 300, 64), (1, 2, 300, 64), (1, 2, 300, 64), dict(is_causal=True)),
    "odd_keys_odd_head_dim": ((2, 2, 33, 41), (2, 2, 131, 41), (2, 2, 131, 24), {}),
    "gqa_unequal_lengths": ((2, 8, 130, 32), (2, 2, 200, 32), (2, 2, 200, 40),
                            dict(enable_gqa=True, is_causal=True)),
    "one_key": ((1, 2, 70, 16), (1, 2, 1, 16), (1, 2, 1, 16), {}),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_error_is_the_cpus_bfloat16_error(case):
    qs, ks, vs, kw = CASES[case]
    ours, cpu = errors(randn(*qs, seed=1), randn(*ks, seed=2), randn(*vs, seed=3), **kw)
    # Both round the weights to bfloat16 and the output once; blocks and
    # exponentials differ, so allow a little over the CPU's own error.
    assert ours <= 1.5 * cpu + 2e-3, (ours, cpu)


def test_masks_and_a_fully_masked_row():
    q, k, v = randn(2, 2, 40, 32, seed=1), randn(2, 2, 90, 32, seed=2), randn(2, 2, 90, 32, seed=3)
    mask = randn(2, 1, 40, 90, seed=4) > -0.5
    mask[:, :, 5] = False  # the row attends nothing: out = 0, as _safe_softmax gives
    ours, cpu = errors(q, k, v, attn_mask=mask)
    assert ours <= 1.5 * cpu + 2e-3, (ours, cpu)
    ours, cpu = errors(q, k, v, attn_mask=randn(40, 90, seed=5))
    assert ours <= 1.5 * cpu + 2e-3, (ours, cpu)


def test_strided_views_are_read_in_place():
    # q, k, v as transposed views of (B, L, H, E) tensors, as attention
    # layers produce them
    layout = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)
    q, k, v = (randn(2, 4, 100, 32, seed=s) for s in (1, 2, 3))
    ours, cpu = errors(q, k, v, layout=layout, is_causal=True)
    assert ours <= 1.5 * cpu + 2e-3, (ours, cpu)


def test_counter_names_the_path():
    q = torch.randn(2, 2, 70, 32, dtype=torch.bfloat16, device="neuron")
    metrics.clear_all()
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.neuron.synchronize()
    assert metrics.get_counter_value("attention.bf16_tiles") == (1 if _bf16_kernel_expected() else 0)
    metrics.clear_all()
    F.scaled_dot_product_attention(q.float(), q.float(), q.float())
    F.scaled_dot_product_attention(q.half(), q.half(), q.half())
    torch.neuron.synchronize()
    assert metrics.get_counter_value("attention.bf16_tiles") == 0


def test_zero_size_batch():
    q = torch.randn(0, 2, 70, 32, dtype=torch.bfloat16, device="neuron")
    out = F.scaled_dot_product_attention(q, q, q)
    assert out.shape == (0, 2, 70, 32) and out.dtype == torch.bfloat16
