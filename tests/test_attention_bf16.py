"""bfloat16 SDPA forward and backward on the GEMM's bfloat16 micro-kernel.

On CPUs with AVX512-BF16 or AMX (and no lower TORCHNEURON_ISA), bfloat16
attention computes its scores and its weighted sum with the GEMM's
bfloat16 kernel, rounding the softmax weights to bfloat16 for the second
product as PyTorch CPU's flash attention does
(runtime/src/ops/attention/attention_forward_bf16.c); its backward rounds
the weights and the score gradients to bfloat16 for the gradient products
(attention_backward_bf16.c). The counters ``attention.bf16_tiles`` and
``attention.bf16_backward_tiles`` say when they ran. Errors against a
float64 reference are held to the CPU's own bfloat16 errors on the same
inputs; tests/test_attention.py covers the other dtypes against the CPU.
"""

import os

import pytest
import torch
import torch.nn.functional as F

import torchneuron
import torchneuron.metrics as metrics
from conftest import check_output, run_python

FWD = "aten::_scaled_dot_product_fused_attention_overrideable"
BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


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


# ---- backward -----------------------------------------------------------------


def grads(q, k, v, g, mask=None, **kw):
    """Output and gradients of q, k, v."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, **kw)
    out.backward(g)
    return [out.detach()] + [t.grad for t in leaves]


def backward_errors(q, k, v, mask=None, layout=lambda t: t, **kw):
    """Per gradient of q, k, v: (neuron's, the CPU's) max error of the
    bfloat16 result against the float64 result of the same bfloat16
    inputs."""
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    gb = randn(*q.shape[:-1], v.shape[-1], seed=7).to(torch.bfloat16)
    as_mask = lambda dtype: None if mask is None else (mask if mask.dtype == torch.bool else mask.to(dtype))
    exact = grads(qb.double(), kb.double(), vb.double(), gb.double(), as_mask(torch.float64), **kw)
    # The CPU's bfloat16 flash kernel takes no enable_gqa (its math path
    # computes in float32 there): give it the key/value heads repeated, and
    # sum their gradients over each group exactly.
    group = q.shape[1] // k.shape[1]
    rep = lambda t: t.repeat_interleave(group, 1)
    cpu_kw = {key: val for key, val in kw.items() if key != "enable_gqa"}
    cpu = grads(qb, rep(kb), rep(vb), gb, as_mask(torch.bfloat16), **cpu_kw)
    cpu[2:] = [t.double().unflatten(1, (k.shape[1], group)).sum(2) for t in cpu[2:]]
    dev = [layout(t.to("neuron")) for t in (qb, kb, vb, gb)]
    dmask = None if mask is None else as_mask(torch.bfloat16).to("neuron")
    torchneuron.clear_op_tracking()
    metrics.clear_all()
    got = grads(*dev, mask=dmask, **kw)
    torch.neuron.synchronize()
    assert torchneuron.get_fallback_ops() == {}
    assert torchneuron.get_executed_ops().get(BWD, 0) == 1
    ran = metrics.get_counter_value("attention.bf16_backward_tiles")
    assert (ran > 0) == (_bf16_kernel_expected() and q.numel() > 0 and k.numel() > 0), ran
    out = []
    for n, c, e in zip(got[1:], cpu[1:], exact[1:]):
        assert n.dtype == torch.bfloat16 and n.shape == e.shape
        out.append(((n.cpu().double() - e).abs().max().item(), (c.double() - e).abs().max().item()))
    return out


BACKWARD_CASES = {
    # (q shape, k shape, v shape, kwargs); L, S not multiples of the 64
    # blocks. One head dim for q, k and v: otherwise the CPU takes its
    # float32 math path, not its bfloat16 flash kernel.
    "causal_partial_blocks": ((2, 3, 70, 64), (2, 3, 70, 64), (2, 3, 70, 64), dict(is_causal=True)),
    "long_causal_many_heads": ((2, 8, 300, 64), (2, 8, 300, 64), (2, 8, 300, 64), dict(is_causal=True)),
    "head_dim_80": ((1, 2, 100, 80), (1, 2, 100, 80), (1, 2, 100, 80), {}),
    "odd_keys_odd_head_dim": ((2, 2, 33, 41), (2, 2, 131, 41), (2, 2, 131, 41), {}),
    "gqa_unequal_lengths": ((2, 8, 130, 32), (2, 2, 200, 32), (2, 2, 200, 32),
                            dict(enable_gqa=True, is_causal=True)),
    "dropout_zero": ((2, 2, 64, 32), (2, 2, 96, 32), (2, 2, 96, 32), dict(dropout_p=0.0)),
}


@pytest.mark.parametrize("case", BACKWARD_CASES, ids=list(BACKWARD_CASES))
def test_backward_error_is_the_cpus_bfloat16_error(case):
    qs, ks, vs, kw = BACKWARD_CASES[case]
    for name, (ours, cpu) in zip("qkv", backward_errors(randn(*qs, seed=1), randn(*ks, seed=2),
                                                         randn(*vs, seed=3), **kw)):
        # both round P and dS to bfloat16 for the products; the CPU also
        # rounds its accumulators after every block, these once
        assert ours <= 1.5 * cpu + 2e-3, (name, ours, cpu)


def test_backward_with_masks_and_strided_views():
    q, k, v = randn(2, 2, 40, 32, seed=1), randn(2, 2, 90, 32, seed=2), randn(2, 2, 90, 32, seed=3)
    mask = randn(2, 1, 40, 90, seed=4) > -0.5
    for name, (ours, cpu) in zip("qkv", backward_errors(q, k, v, mask=mask)):
        assert ours <= 1.5 * cpu + 2e-3, ("bool", name, ours, cpu)
    for name, (ours, cpu) in zip("qkv", backward_errors(q, k, v, mask=randn(40, 90, seed=5))):
        assert ours <= 1.5 * cpu + 2e-3, ("float", name, ours, cpu)
    layout = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)
    for name, (ours, cpu) in zip("qkv", backward_errors(q, k, v, layout=layout, is_causal=True)):
        assert ours <= 1.5 * cpu + 2e-3, ("strided", name, ours, cpu)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_passes_agree_bit_for_bit(causal):
    # Without a mask and with many heads, one launch computes all three
    # gradients per head; an all-true mask (adding exact zeros) sends the
    # same problem through the key-block and query-block passes instead.
    q, k, v = (randn(4, 8, 130, 40, seed=s).to(torch.bfloat16).to("neuron") for s in (1, 2, 3))
    g = randn(4, 8, 130, 40, seed=4).to(torch.bfloat16).to("neuron")
    ones = torch.ones(130, 130, dtype=torch.bool, device="neuron")
    if causal:
        ones = ones.tril()
    passes = []
    for kw in (dict(is_causal=causal), dict(mask=ones)):
        metrics.clear_all()
        passes.append(grads(q, k, v, g, **kw))
        torch.neuron.synchronize()
        passes.append(metrics.get_counter_value("attention.bf16_backward_tiles"))
    one_pass, ran_one, blocks, ran_blocks = passes
    if _bf16_kernel_expected():
        assert ran_blocks == 2  # the key-block pass, then the query-block pass
        if len(os.sched_getaffinity(0)) <= 8:  # 32 heads: at least 4 per thread
            assert ran_one == 1
    for a, b in zip(one_pass, blocks):
        assert torch.equal(a.cpu(), b.cpu())


def test_backward_zero_sizes():
    for qs, ks in (((0, 2, 70, 32), (0, 2, 70, 32)), ((1, 2, 0, 32), (1, 2, 50, 32)),
                   ((1, 2, 50, 32), (1, 2, 0, 32))):
        q = torch.randn(qs, dtype=torch.bfloat16, device="neuron", requires_grad=True)
        k = torch.randn(ks, dtype=torch.bfloat16, device="neuron", requires_grad=True)
        v = torch.randn(ks, dtype=torch.bfloat16, device="neuron", requires_grad=True)
        F.scaled_dot_product_attention(q, k, v).sum().backward()
        for t in (q, k, v):
            assert t.grad.shape == t.shape and t.grad.dtype == torch.bfloat16
            assert not t.grad.cpu().any()  # no keys or no queries: zero gradients


@pytest.mark.skipif(os.environ.get("TORCHNEURON_ISA") is not None, reason="the child pins its own level")
def test_avx2_level_takes_the_float32_tiles():
    # Without a bfloat16 kernel (TORCHNEURON_ISA=avx2) both counters stay 0
    # and the float32-tile path still gives the CPU's result.
    if "avx2" not in torch.neuron.isa_levels()["supported"]:
        pytest.skip("no avx2 level on this CPU")
    code = """
        import torch, torch.nn.functional as F, torchneuron, torchneuron.metrics as metrics
        g = torch.Generator().manual_seed(0)
        q, k, v, d = (torch.randn(1, 2, 70, 32, generator=g).bfloat16() for _ in range(4))
        leaves = [t.to("neuron").requires_grad_() for t in (q, k, v)]
        metrics.clear_all()
        F.scaled_dot_product_attention(*leaves, is_causal=True).backward(d.to("neuron"))
        torch.neuron.synchronize()
        ref = [t.requires_grad_() for t in (q.float(), k.float(), v.float())]
        F.scaled_dot_product_attention(*ref, is_causal=True).backward(d.float())
        err = max((a.grad.cpu().float() - b.grad).abs().max().item() for a, b in zip(leaves, ref))
        print(metrics.get_counter_value("attention.bf16_tiles"),
              metrics.get_counter_value("attention.bf16_backward_tiles"), err)
    """
    fwd, bwd, err = check_output(run_python(code, env={"TORCHNEURON_ISA": "avx2"})).split()
    assert (fwd, bwd) == ("0", "0") and float(err) < 3e-2, (fwd, bwd, err)


def test_gradient_of_a_floating_mask():
    # The query pass also writes the float32 score gradients (the mask's
    # gradient) from its transposed tiles; a triangle of -inf in the mask
    # gives weight 0 and gradient 0 there.
    q, k, v = (randn(1, 2, n, 32, seed=s).to(torch.bfloat16) for s, n in ((1, 70), (2, 90), (3, 90)))
    mask = randn(1, 2, 70, 90, seed=4).to(torch.bfloat16)
    g = randn(1, 2, 70, 32, seed=5).to(torch.bfloat16)
    for causal in (False, True):
        exact = [t.grad for t in _mask_grads(q, k, v, g, mask, torch.float64, causal)]
        metrics.clear_all()
        got = [t.grad for t in _mask_grads(q, k, v, g, mask, "neuron", causal)]
        torch.neuron.synchronize()
        ran = metrics.get_counter_value("attention.bf16_backward_tiles")
        assert ran == (2 if _bf16_kernel_expected() else 0), ran
        for a, e in zip(got, exact):
            assert a.dtype == torch.bfloat16
            torch.testing.assert_close(a.cpu().double(), e, rtol=3e-2, atol=3e-2)


def _mask_grads(q, k, v, g, mask, where, causal):
    """q, k, v and mask as leaves (in float64, or bfloat16 on neuron) after
    a backward pass; causal: -inf above the diagonal of the mask."""
    to = (lambda t: t.double()) if where == torch.float64 else (lambda t: t.to(where))
    leaves = [to(t).requires_grad_() for t in (q, k, v, mask)]
    bias = leaves[3]
    if causal:
        keep = torch.ones(70, 90, dtype=torch.bool, device=bias.device).tril()
        bias = bias.masked_fill(~keep, float("-inf"))
    F.scaled_dot_product_attention(*leaves[:3], attn_mask=bias).backward(to(g))
    return leaves
