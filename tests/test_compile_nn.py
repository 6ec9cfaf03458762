"""torch.compile(backend="neuron") of the non-pointwise ops (lower_nn.py)
against eager neuron.

Each case compiles a small function around one op (forward and, for
floating inputs, backward through a fixed random gradient), runs it and the
same function eagerly on the same neuron tensors, and asserts that every
node of every compiled graph was lowered (no node ran through the eager
path) and that results and gradients agree. The compiled graph runs the
kernels eager runs with the same operands, so float32 results are compared
bit for bit; layouts cover contiguous, transposed and sliced inputs, and
some cases mark a batch or sequence dim dynamic.
"""

import pytest
import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401
import torchneuron.metrics as tm

DEV = "neuron"


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_DISK_CACHE", "0")


def values(shape, dtype=torch.float32, seed=0, low=-2.0, high=2.0):
    g = torch.Generator().manual_seed(seed)
    x = low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)
    return x.to(dtype).to(DEV)


def layout(x, kind):
    """x (contiguous) re-laid out with the same values: transposed or sliced."""
    if kind == "contiguous":
        return x
    if kind == "transposed":
        # storage in reversed dim order, viewed back in x's order
        perm = list(reversed(range(x.dim())))
        return x.permute(*perm).contiguous().permute(*perm)
    if kind == "sliced":
        big = torch.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype, device=x.device)
        big[..., ::2] = x
        return big[..., ::2]
    raise ValueError(kind)


def eager_nodes():
    rows = tm.get_compilation_metrics()
    return sum(r["eager_nodes"] for r in rows), sorted({o for r in rows for o in r["eager_ops"]})


def leaves(args, frozen=()):
    out = []
    for k, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and k not in frozen:
            a = a.detach().requires_grad_(True)  # a leaf with a's layout (clone() would densify)
        out.append(a)
    return out


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [o for o in out if isinstance(o, torch.Tensor)]


def run(fn, args, grad, frozen=(), dynamic=()):
    args = leaves(args, frozen)
    for i, d in dynamic:
        torch._dynamo.mark_dynamic(args[i], d)
    outs = flat_outputs(fn(*args))
    grads = []
    if grad:
        diff = [o for o in outs if o.requires_grad]
        if diff:
            gs = [values(o.shape, o.dtype, seed=7 + k) for k, o in enumerate(diff)]
            torch.autograd.backward(diff, gs)
        grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return [o.detach() for o in outs], grads


def check(fn, *args, grad=True, dynamic=None, frozen=(), exact=True, rtol=None, atol=None):
    """Compiles fn, runs it on args (leaf copies), and compares outputs and
    gradients with eager; dynamic: [(arg index, dim)] to mark dynamic."""
    torch._dynamo.reset()
    tm.clear_all()
    want_out, want_grad = run(fn, args, grad, frozen)
    compiled = torch.compile(fn, backend="neuron", dynamic=False if dynamic is None else None)
    cargs = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    got_out, got_grad = run(compiled, cargs, grad, frozen, dynamic or ())
    n, ops = eager_nodes()
    assert n == 0, f"nodes ran eagerly: {ops}"
    assert tm.get_compilation_metrics(), "nothing was compiled"
    kw = dict(rtol=0, atol=0, equal_nan=True) if exact else dict(rtol=rtol, atol=atol, equal_nan=True)
    assert len(got_out) == len(want_out)
    for g, w in zip(got_out, want_out):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w.cpu(), **kw)
    assert len(got_grad) == len(want_grad)
    for g, w in zip(got_grad, want_grad):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g.cpu(), w.cpu(), **kw)


FLOAT16 = [torch.float32, torch.bfloat16]
LAYOUTS = ["contiguous", "transposed", "sliced"]


# ---- matrix products -----------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_linear(dtype, kind):
    x = layout(values((6, 8), dtype), kind)
    w = layout(values((5, 8), dtype, seed=1), kind)
    b = values((5,), dtype, seed=2)
    check(lambda x, w, b: F.linear(x, w, b), x, w, b)
    check(lambda x, w: x @ w.t(), x, w)


def test_addmm_alpha_beta():
    a, b, c = values((4, 6)), values((6, 3), seed=1), values((4, 3), seed=2)
    check(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), c, a, b)
    check(lambda c, a, b: torch.addmm(c, a, b, beta=0), c, a, b)


@pytest.mark.parametrize("dtype", FLOAT16)
def test_bmm_baddbmm(dtype):
    a = values((3, 4, 5), dtype)
    b = values((3, 5, 2), dtype, seed=1).transpose(1, 2).contiguous().transpose(1, 2)
    c = values((3, 4, 2), dtype, seed=2)
    check(torch.bmm, a, b)
    check(lambda c, a, b: torch.baddbmm(c, a, b, beta=0.25, alpha=3), c, a, b)


def test_matmul_dynamic_batch():
    x, w = values((4, 7, 8)), values((8, 3), seed=1)
    check(lambda x, w: x @ w, x, w, dynamic=[(0, 0)])


def test_mm_int():
    a = torch.randint(-5, 5, (4, 6), device=DEV)
    b = torch.randint(-5, 5, (6, 3), device=DEV)
    check(torch.mm, a, b, grad=False)


# ---- softmax -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dtype, kind, dim):
    x = layout(values((3, 5, 7), dtype), kind)
    check(lambda x: torch.softmax(x, dim), x)
    check(lambda x: torch.log_softmax(x, dim), x)


def test_softmax_half_to_float_and_dynamic():
    x = values((4, 9), torch.bfloat16)
    check(lambda x: torch.softmax(x, -1, dtype=torch.float32), x)
    check(lambda x: torch.log_softmax(x, 1), values((6, 10)), dynamic=[(0, 0)])


# ---- norms ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_layer_norm(dtype, kind):
    x = layout(values((4, 3, 8), dtype), kind)
    w, b = values((8,), dtype, seed=1), values((8,), dtype, seed=2)
    check(lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5), x, w, b)
    check(lambda x: F.layer_norm(x, (3, 8)), x)


def test_layer_norm_mixed_and_dynamic():
    x = values((5, 6, 16), torch.bfloat16)
    w, b = values((16,), seed=1), values((16,), seed=2)
    check(lambda x, w, b: F.layer_norm(x, (16,), w, b), x, w, b)
    check(lambda x, w, b: F.layer_norm(x, (16,), w, b), values((5, 6, 16)), w, b, dynamic=[(0, 1)])


@pytest.mark.parametrize("dtype", FLOAT16)
def test_rms_norm(dtype):
    x = layout(values((4, 6, 8), dtype), "transposed")
    w = values((8,), dtype, seed=1)
    check(lambda x, w: F.rms_norm(x, (8,), w, 1e-6), x, w)
    check(lambda x: F.rms_norm(x, (8,)), x)


# ---- reductions -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_sum_mean(dtype, kind):
    x = layout(values((4, 5, 6), dtype), kind)
    check(lambda x: x.sum(), x)
    check(lambda x: x.sum(dim=(0, 2)), x)
    check(lambda x: x.sum(1, keepdim=True), x)
    check(lambda x: x.mean(-1), x)
    check(lambda x: x.mean(), x)
    check(lambda x: x.sum(0, dtype=torch.float32), x)


def test_reductions_misc():
    x = values((4, 5, 6))
    check(lambda x: x.amax(dim=1), x)
    check(lambda x: x.amin(dim=(0, 2), keepdim=True), x)
    check(lambda x: x.max(), x)
    check(lambda x: x.max(dim=1), x)
    check(lambda x: x.min(dim=-1, keepdim=True), x)
    check(lambda x: x.argmax(dim=2), x, grad=False)
    check(lambda x: x.argmax(), x, grad=False)
    check(lambda x: x.var(dim=1), x)
    check(lambda x: torch.var_mean(x, dim=-1, correction=0), x)
    check(lambda x: x.std(), x)
    check(lambda x: torch.logsumexp(x, dim=1), x)
    check(lambda x: torch.linalg.vector_norm(x, dim=-1), x)
    check(lambda x: x.cumsum(1), x)
    check(lambda x: (x > 0).any(dim=1), x, grad=False)
    check(lambda x: (x > 0).all(), x, grad=False)
    i = torch.randint(-3, 3, (4, 5), device=DEV)
    check(lambda i: i.sum(1), i, grad=False)
    check(lambda i: (i > 0).sum(), i, grad=False)


def test_sum_dynamic():
    check(lambda x: x.sum(0) + x.mean(1).sum(), values((6, 5)), dynamic=[(0, 0)])


# ---- indexing and cat ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
def test_embedding(dtype):
    w = values((10, 4), dtype)
    idx = torch.tensor([[1, 3, 3], [0, 9, 1]], device=DEV)
    check(lambda w, i: F.embedding(i, w), w, idx)
    check(lambda w, i: F.embedding(i, w, padding_idx=3), w, idx)
    check(lambda w, i: F.embedding(i, w), w, idx.t())  # non-contiguous indices


def test_embedding_dynamic():
    w = values((10, 4))
    idx = torch.randint(0, 10, (3, 5), device=DEV)
    check(lambda w, i: F.embedding(i, w), w, idx, dynamic=[(1, 1)])


def test_index_select_gather():
    x = layout(values((5, 6)), "transposed")
    i = torch.tensor([4, 0, 2, 2], device=DEV)
    check(lambda x, i: x.index_select(0, i), x, i)
    check(lambda x, i: x.index_select(1, i), x, i)
    g = torch.randint(0, 6, (5, 3), device=DEV)
    check(lambda x, g: x.gather(1, g), x, g)


@pytest.mark.parametrize("dtype", FLOAT16)
def test_cat(dtype):
    a, b = values((2, 3), dtype), layout(values((2, 5), dtype, seed=1), "transposed")
    check(lambda a, b: torch.cat([a, b], 1), a, b)
    check(lambda a, b: torch.cat([a.t(), b.t()], 0), a, b)
    many = [values((1, 3), dtype, seed=k) for k in range(9)]
    check(lambda *t: torch.cat(t, 0), *many)


def test_cat_dynamic():
    a, b = values((4, 3)), values((4, 2), seed=1)
    check(lambda a, b: torch.cat([a, b], 1), a, b, dynamic=[(0, 0), (1, 0)])


def test_pad_and_arange():
    x = values((3, 4))
    check(lambda x: F.pad(x, (1, 2)), x)
    check(lambda x: F.pad(x, (0, -1, 1, 0), value=-3.0), x)
    check(lambda x: x + torch.arange(4, device=DEV), x)
    check(lambda x: x * torch.arange(0.5, 2.5, 0.5, device=DEV), x)


def test_slice_scatter():
    x = values((4, 6))

    def f(x):
        y = x * 2
        return y[:, 1:4].sum() + y[2].sum()

    check(f, x)


# ---- losses -------------------------------------------------------------------------------------


def test_cross_entropy():
    x = values((6, 5))
    t = torch.tensor([0, 4, 2, 2, 1, 3], device=DEV)
    check(lambda x, t: F.cross_entropy(x, t), x, t)
    check(lambda x, t: F.cross_entropy(x, t, reduction="sum"), x, t)
    check(lambda x, t: F.cross_entropy(x, t, reduction="none"), x, t)
    t2 = t.clone()
    t2[1] = -100
    check(lambda x, t: F.cross_entropy(x, t), x, t2)
    w = values((5,), low=0.1, high=1.0, seed=3)
    check(lambda x, t, w: F.nll_loss(F.log_softmax(x, 1), t, weight=w), x, t, w, frozen=(2,))


def test_cross_entropy_dynamic():
    x = values((6, 5))
    t = torch.tensor([0, 4, 2, 2, 1, 3], device=DEV)
    check(lambda x, t: F.cross_entropy(x, t), x, t, dynamic=[(0, 0), (1, 0)])


# ---- attention ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(dtype, causal):
    # q, k, v as the GPT's (B, T, H, E) views transposed to (B, H, T, E)
    q, k, v = (values((2, 8, 2, 16), dtype, seed=s).transpose(1, 2) for s in range(3))
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)


def test_sdpa_mask_and_scale():
    q, k, v = (values((1, 2, 6, 8), seed=s) for s in range(3))
    m = torch.rand(6, 6, device=DEV) > 0.3
    m[:, 0] = True
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3), q, k, v, m)


# (No dynamic-shape SDPA case: the shim's _fused_sdp_choice reads int sizes
# of q, k and v, which specializes every dim Dynamo marks dynamic.)


# ---- vision -------------------------------------------------------------------------------------------


def test_conv_bn_pool():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4),
                            torch.nn.ReLU(), torch.nn.MaxPool2d(2)).to(DEV)
    x = values((2, 3, 8, 8))
    ref = [p.detach().clone() for p in m.parameters()]
    bufs = [b.detach().clone() for b in m.buffers()]

    def reset():
        with torch.no_grad():
            for p, r in zip(m.parameters(), ref):
                p.copy_(r)
                p.grad = None
            for b, r in zip(m.buffers(), bufs):
                b.copy_(r)

    torch._dynamo.reset()
    tm.clear_all()
    reset()
    xe = x.clone().requires_grad_(True)
    ye = m(xe)
    g = values(ye.shape, seed=9)
    ye.backward(g)
    want = [ye.detach(), xe.grad] + [p.grad.clone() for p in m.parameters()] + [b.clone() for b in m.buffers()]
    reset()
    cm = torch.compile(m, backend="neuron")
    xc = x.clone().requires_grad_(True)
    yc = cm(xc)
    yc.backward(g)
    got = [yc.detach(), xc.grad] + [p.grad.clone() for p in m.parameters()] + [b.clone() for b in m.buffers()]
    n, ops = eager_nodes()
    assert n == 0, f"nodes ran eagerly: {ops}"
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def test_avg_pools():
    x = values((2, 3, 8, 8))
    check(lambda x: F.avg_pool2d(x, 2), x)
    check(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), x)
    check(lambda x: F.adaptive_avg_pool2d(x, (3, 3)), x)
    check(lambda x: F.adaptive_avg_pool2d(x, 1), x)
    check(lambda x: F.adaptive_max_pool2d(x, (3, 2)), x)
    check(lambda x: F.max_pool2d(x, 3, stride=2, padding=1), layout(x, "transposed"))


# ---- a whole model -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT16)
def test_gpt_train_step(dtype):
    """examples/gpt.py forward and backward: every node lowered, loss and
    gradients bit for bit eager's."""
    import copy
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from gpt import GPT, GPTConfig

    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layer=1)).to(dtype)
    me, mc = copy.deepcopy(m).to(DEV), copy.deepcopy(m).to(DEV)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 72, (2, 32), generator=g).to(DEV)
    y = torch.randint(0, 72, (2, 32), generator=g).to(DEV)
    torch._dynamo.reset()
    tm.clear_all()
    le = me(x, y)[1]
    le.backward()
    lc = torch.compile(mc, backend="neuron")(x, y)[1]
    lc.backward()
    n, ops = eager_nodes()
    assert n == 0, f"nodes ran eagerly: {ops}"
    torch.testing.assert_close(lc.cpu(), le.cpu(), rtol=0, atol=0)
    for (name, pe), (_, pc) in zip(me.named_parameters(), mc.named_parameters()):
        torch.testing.assert_close(pc.grad.cpu(), pe.grad.cpu(), rtol=0, atol=0, msg=name)
