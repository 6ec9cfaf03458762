"""Nested tensors on neuron (nested_ops.cpp): the ops a user meets first,
each against the CPU's nested result, with no CPU fallback. The entries have
different lengths; results are compared entry by entry."""

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from cpu_errors import assert_raises_like_cpu

DEV = "neuron"


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def _nested(shapes, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    return torch.nested.nested_tensor([torch.randn(s, dtype=dtype) for s in shapes])


def _same(got, want, **tol):
    assert got.is_nested == want.is_nested
    if not want.is_nested:
        torch.testing.assert_close(got.cpu(), want, **tol)
        return
    assert got.device.type == DEV and got.dtype == want.dtype
    assert got.dim() == want.dim() and got.size(0) == want.size(0)
    back = got.contiguous().to("cpu")  # ATen's _to_copy takes a contiguous nested tensor only
    assert back.is_nested and back.device.type == "cpu"
    for g, w in zip(back.unbind(), want.unbind()):
        torch.testing.assert_close(g, w, **tol)


def _ran(op):
    ops = torchneuron.get_executed_ops()
    assert ops.get(f"aten::{op}(nested)", 0) > 0, ops


SHAPES = [(3, 8), (5, 8), (1, 8)]


def test_moves_between_devices_and_clones():
    x = _nested(SHAPES)
    d = x.to(DEV)
    assert d.is_nested and d.device.type == DEV
    _same(d, x)
    _ran("_to_copy")
    c = d.clone()
    _same(c, x)
    assert c.unbind()[0].data_ptr() != d.unbind()[0].data_ptr()
    _same(d.to(torch.float64), x.to(torch.float64))
    assert d.size(0) == 3 and d.dim() == 3 and d.size(2) == 8
    assert d.numel() == x.numel() == 72


UNARY = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
    "tanh": torch.tanh, "abs": torch.abs, "neg": torch.neg, "sin": torch.sin, "cos": torch.cos,
    "sqrt": lambda t: torch.sqrt(t.abs()), "sgn": torch.sgn, "isnan": torch.isnan,
    "logical_not": torch.logical_not,
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_match_cpu(name):
    x = _nested(SHAPES)
    _same(UNARY[name](x.to(DEV)), UNARY[name](x))


def test_in_place_unary_ops_match_cpu():
    x = _nested(SHAPES)
    for name in ("relu_", "tanh_", "neg_", "abs_", "gelu_", "silu_"):
        want, got = x.clone(), x.to(DEV)
        fn = (lambda t: F.silu(t, inplace=True)) if name == "silu_" else \
            (lambda t: torch._C._nn.gelu_(t)) if name == "gelu_" else (lambda t: getattr(t, name)())
        fn(want)
        assert fn(got) is got
        _same(got, want)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5), "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5),
}


@pytest.mark.parametrize("name", BINARY)
def test_nested_with_nested_matches_cpu(name):
    a, b = _nested(SHAPES, seed=1), _nested(SHAPES, seed=2)
    _same(BINARY[name](a.to(DEV), b.to(DEV)), BINARY[name](a, b))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_nested_with_a_scalar_matches_cpu(op):
    a = _nested(SHAPES, seed=3)
    fn = {"add": lambda t: t + 1.5, "sub": lambda t: t - 2, "mul": lambda t: t * 3, "div": lambda t: t / 4}[op]
    _same(fn(a.to(DEV)), fn(a))


def test_in_place_arithmetic_and_fills_match_cpu():
    a, b = _nested(SHAPES, seed=4), _nested(SHAPES, seed=5)
    want, got = a.clone(), a.to(DEV)
    want.add_(b).mul_(b).mul_(2.0)
    got.add_(b.to(DEV)).mul_(b.to(DEV)).mul_(2.0)
    _same(got, want)
    _same(got.zero_(), want.zero_())
    _same(got.fill_(1.25), want.fill_(1.25))


def test_comparisons_and_masked_fill_match_cpu():
    a = _nested(SHAPES, seed=6)
    d = a.to(DEV)
    _same(d > 0, a > 0)
    _same(d >= 0.5, a >= 0.5)
    _same(d == 0, a == 0)
    _same(d.masked_fill(d.to(DEV) > 0, -1.0), a.masked_fill(a > 0, -1.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_softmax_linear_layer_norm_match_cpu(dtype):
    x = _nested(SHAPES, dtype=dtype, seed=7)
    d = x.to(DEV)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    _same(torch.softmax(d, -1), torch.softmax(x, -1), **tol)
    _ran("_softmax")
    torch.manual_seed(8)
    w, bias = torch.randn(6, 8, dtype=dtype), torch.randn(6, dtype=dtype)
    _same(F.linear(d, w.to(DEV), bias.to(DEV)), F.linear(x, w, bias), **tol)
    _same(F.linear(d, w.to(DEV)), F.linear(x, w), **tol)
    _ran("linear")
    g, b = torch.randn(8, dtype=dtype), torch.randn(8, dtype=dtype)
    _same(F.layer_norm(d, (8,), g.to(DEV), b.to(DEV)), F.layer_norm(x, (8,), g, b), **tol)
    _ran("native_layer_norm")


def test_layer_norm_over_two_dims_and_its_errors():
    x = _nested([(2, 3, 4), (5, 3, 4)], seed=9)
    g, b = torch.randn(3, 4), torch.randn(3, 4)
    _same(F.layer_norm(x.to(DEV), (3, 4), g.to(DEV), b.to(DEV)), F.layer_norm(x, (3, 4), g, b))
    A = torch.ops.aten
    for shape in ((4, 4), (5, 3, 4)):  # a regular dim that differs; an irregular one
        w = torch.ones(shape)
        assert_raises_like_cpu(lambda d: A.native_layer_norm(x.to(d), shape, w.to(d), w.to(d), 1e-5))
    assert_raises_like_cpu(lambda d: A.native_layer_norm(x.to(d), (4,), None, None, 1e-5))
    assert_raises_like_cpu(lambda d: A.native_layer_norm(x.to(d), (4,), torch.ones(3, device=d),
                                                         torch.ones(4, device=d), 1e-5))


def test_matmul_bmm_and_transpose_match_cpu():
    a = _nested([(3, 4), (5, 4), (2, 4)], seed=10)
    b = _nested([(4, 6), (4, 2), (4, 3)], seed=11)
    _same(torch.bmm(a.to(DEV), b.to(DEV)), torch.bmm(a, b))
    _ran("bmm")
    _same(torch.matmul(a.to(DEV), b.to(DEV)), torch.matmul(a, b))
    _ran("matmul")
    t = a.to(DEV).transpose(1, 2)
    _same(t, a.transpose(1, 2))
    _same(torch.bmm(a.to(DEV), t), torch.bmm(a, a.transpose(1, 2)))  # a non-contiguous nested operand
    assert_raises_like_cpu(lambda d: a.to(d).transpose(1, 2).to_padded_tensor(0.0))  # as on the CPU
    _same(t.contiguous().to_padded_tensor(0.0), a.transpose(1, 2).contiguous().to_padded_tensor(0.0))


def test_views_unbind_and_padding_match_cpu():
    x = _nested([(2, 6), (3, 6)], seed=12)
    d = x.to(DEV)
    _same(d.view(2, -1, 2, 3), x.view(2, -1, 2, 3))
    _same(d.reshape(2, -1, 3, 2), x.reshape(2, -1, 3, 2))
    _same(d.unsqueeze(1), x.unsqueeze(1))
    _same(d.unsqueeze(1).squeeze(1), x)
    _same(d.transpose(1, 2).contiguous(), x.transpose(1, 2).contiguous())
    for g, w in zip(d.unbind(), x.unbind()):
        torch.testing.assert_close(g.cpu(), w)
    _same(d.to_padded_tensor(-1.0), x.to_padded_tensor(-1.0))
    _same(d.to_padded_tensor(0.0, (2, 4, 7)), x.to_padded_tensor(0.0, (2, 4, 7)))
    _same(d.select(0, 1), x.select(0, 1))
    for g, w in zip(d.chunk(2, -1), x.chunk(2, -1)):
        _same(g, w)
    _same(d.detach(), x)


def test_cat_all_and_the_softmax_gradient_match_cpu():
    a, b = _nested(SHAPES, seed=13), _nested(SHAPES, seed=14)
    _same(torch.cat([a.to(DEV), b.to(DEV)], -1), torch.cat([a, b], -1))
    _ran("cat")
    _same((a.to(DEV) > -0.5).all(-1), (a > -0.5).all(-1))
    grads = []
    for d in ("cpu", DEV):
        x = a.to(d).detach().requires_grad_()
        torch.softmax(x, -1).backward(b.to(d))
        grads.append(x.grad)
    _same(grads[1], grads[0])
    _ran("_softmax_backward_data")


@pytest.mark.parametrize("act", [F.relu, F.gelu, F.silu])
def test_gradients_through_linear_activation_matmul_match_cpu(act):
    x0 = _nested([(3, 8), (5, 8)], seed=15)
    torch.manual_seed(16)
    w1, b1, w2 = torch.randn(6, 8), torch.randn(6), torch.randn(4, 6)
    other = _nested([(4, 2), (4, 3)], seed=17)
    grad_out = _nested([(3, 2), (5, 3)], seed=18)
    results = []
    for d in ("cpu", DEV):
        leaves = [t.to(d).detach().requires_grad_() for t in (x0, w1, b1, w2)]
        x, a, b, c = leaves
        y = torch.matmul(F.linear(act(F.linear(x, a, b)), c), other.to(d))
        y.backward(grad_out.to(d))
        results.append([t.grad for t in leaves])
    for g, w in zip(*reversed(results)):
        _same(g, w, rtol=1e-4, atol=1e-4)
    _ran("linear_backward")
    _ran("matmul_backward")


def test_dropout_and_embedding_match_cpu():
    x = _nested(SHAPES, seed=19)
    _same(F.dropout(x.to(DEV), 0.0, training=True), F.dropout(x, 0.0, training=True))
    kept = F.dropout(x.to(DEV), 0.5, training=True).to_padded_tensor(0.0).cpu()
    padded = x.to_padded_tensor(0.0)
    assert torch.all((kept == 0) | torch.isclose(kept, padded * 2))
    _ran("native_dropout")
    idx = torch.nested.nested_tensor([torch.tensor([1, 4, 2]), torch.tensor([0, 3])])
    weight = torch.randn(5, 3)
    _same(F.embedding(idx.to(DEV), weight.to(DEV)), F.embedding(idx, weight))


def test_what_still_raises_names_the_nested_backend():
    d = _nested(SHAPES).to(DEV)
    with pytest.raises(NotImplementedError, match="NestedTensorPrivateUse1|NestedTensorneuron"):
        torch.exp(d)
