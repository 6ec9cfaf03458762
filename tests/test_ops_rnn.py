"""Recurrent networks on neuron against PyTorch CPU: nn.RNN (tanh, relu),
nn.LSTM (with projections) and nn.GRU with several layers, bidirectional,
batch_first and packed sequences, and their cells; outputs, final states and
the gradients of the input, the initial states and every parameter. ATen
hands the gate arithmetic of LSTM and GRU steps on a non-CPU device to
_thnn_fused_lstm_cell / _thnn_fused_gru_cell (and their backward); every test
asserts that they ran natively and that nothing fell back to the CPU.
"""

import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torchneuron

DEV = "neuron"
TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-10, 1e-10)}


pytestmark = pytest.mark.usefixtures("native_only")


def twins(module, dtype):
    cpu = module.to(dtype)
    return cpu, copy.deepcopy(cpu).to(DEV)


def compare(cpu_out, dev_out, tol):
    if isinstance(cpu_out, (tuple, list)):
        for a, b in zip(cpu_out, dev_out):
            compare(a, b, tol)
        return
    assert dev_out.device.type == DEV
    torch.testing.assert_close(dev_out.cpu(), cpu_out, rtol=tol[0], atol=tol[1])


def flat(out):
    """The tensors of a module's result (output, h or (h, c))."""
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for part in out for t in flat(part)]


def run_both(cpu_mod, dev_mod, inputs, dtype, pack=None):
    """Forward and backward of sum(out * w) on both devices; compares
    results, input/state gradients and parameter gradients."""
    tol = TOL[dtype]
    cpu_in = [t.detach().requires_grad_() for t in inputs]
    dev_in = [t.detach().to(DEV).requires_grad_() for t in inputs]
    cpu_args, dev_args = list(cpu_in), list(dev_in)
    if pack is not None:
        cpu_args[0] = pack(cpu_args[0])
        dev_args[0] = pack(dev_args[0])
    if len(cpu_args) > 2:  # LSTM state pair
        cpu_args, dev_args = [cpu_args[0], tuple(cpu_args[1:])], [dev_args[0], tuple(dev_args[1:])]
    expected, got = cpu_mod(*cpu_args), dev_mod(*dev_args)
    if pack is not None:
        expected = (pad_packed_sequence(expected[0], batch_first=cpu_mod.batch_first)[0], expected[1])
        got = (pad_packed_sequence(got[0], batch_first=dev_mod.batch_first)[0], got[1])
    expected, got = flat(expected), flat(got)
    compare(expected, got, tol)
    weights = [torch.randn(t.shape, dtype=dtype) for t in expected]
    sum(((e * w).sum() for e, w in zip(expected, weights)), torch.zeros((), dtype=dtype)).backward()
    sum(((g * w.to(DEV)).sum() for g, w in zip(got, weights)), torch.zeros((), dtype=dtype, device=DEV)).backward()
    grad_tol = (tol[0] * 10, tol[1] * 10)
    compare([t.grad for t in cpu_in], [t.grad for t in dev_in], grad_tol)
    for (name, p), q in zip(cpu_mod.named_parameters(), dev_mod.parameters()):
        assert q.grad is not None, name
        compare(p.grad, q.grad, grad_tol)


def initial_states(kind, layers, dirs, batch, hidden, proj, dtype):
    h = torch.randn(layers * dirs, batch, proj or hidden, dtype=dtype)
    if kind == "LSTM":
        return [h, torch.randn(layers * dirs, batch, hidden, dtype=dtype)]
    return [h]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("LSTM", {"proj_size": 3}), ("GRU", {}),
                                        ("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"})],
                         ids=["lstm", "lstm_proj", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True)],
                         ids=["1layer", "2layers_bidir_batch_first"])
def test_recurrent_module(kind, extra, layers, bidirectional, batch_first, dtype):
    batch, steps, features, hidden = 3, 4, 5, 6
    mod = getattr(nn, kind)(features, hidden, num_layers=layers, bidirectional=bidirectional,
                            batch_first=batch_first, **extra)
    cpu_mod, dev_mod = twins(mod, dtype)
    x = torch.randn((batch, steps, features) if batch_first else (steps, batch, features), dtype=dtype)
    states = initial_states(kind, layers, 2 if bidirectional else 1, batch, hidden, extra.get("proj_size"), dtype)
    run_both(cpu_mod, dev_mod, [x] + states, dtype)
    if kind in ("LSTM", "GRU"):
        ran = torchneuron.get_executed_ops()
        cell = "aten::_thnn_fused_lstm_cell" if kind == "LSTM" else "aten::_thnn_fused_gru_cell"
        assert ran.get(cell, 0) > 0, sorted(ran)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_packed_sequence(kind):
    dtype = torch.float32
    batch, steps, features, hidden = 4, 5, 3, 4
    cpu_mod, dev_mod = twins(getattr(nn, kind)(features, hidden, num_layers=2, bidirectional=True), dtype)
    lengths = torch.tensor([5, 3, 2, 1])  # lengths stay on the host, as PyTorch requires
    x = torch.randn(steps, batch, features, dtype=dtype)

    def pack(t):
        return pack_padded_sequence(t, lengths, enforce_sorted=True)

    run_both(cpu_mod, dev_mod, [x], dtype, pack=pack)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_no_initial_state_and_zero_batch(kind):
    dtype = torch.float32
    cpu_mod, dev_mod = twins(getattr(nn, kind)(3, 4, num_layers=2), dtype)
    run_both(cpu_mod, dev_mod, [torch.randn(2, 3, 3, dtype=dtype)], dtype)
    out, _ = dev_mod(torch.randn(2, 0, 3, device=DEV))
    assert out.shape == (2, 0, 4) and out.device.type == DEV


def test_dropout_between_layers():
    """Train-mode dropout between layers draws from the device's generator
    (other numbers than the CPU's): checked to run natively, to keep the
    shapes and to zero about p of the first layer's outputs; in eval mode
    it is the identity and the results match the CPU."""
    dtype = torch.float32
    cpu_mod, dev_mod = twins(nn.LSTM(4, 8, num_layers=3, dropout=0.5), dtype)
    x = torch.randn(6, 2, 4, dtype=dtype)
    out, (h, c) = dev_mod(x.to(DEV))
    assert out.shape == (6, 2, 8) and h.shape == (3, 2, 8) and torch.isfinite(out.cpu()).all()
    out.sum().backward()
    assert all(p.grad is not None for p in dev_mod.parameters())
    dev_mod.zero_grad(set_to_none=True)
    cpu_mod.eval()
    dev_mod.eval()
    run_both(cpu_mod, dev_mod, [x], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_cell(kind, bias, dtype):
    batch, features, hidden = 3, 5, 7
    cpu_mod, dev_mod = twins(getattr(nn, kind)(features, hidden, bias=bias), dtype)
    x = torch.randn(batch, features, dtype=dtype)
    states = [torch.randn(batch, hidden, dtype=dtype) for _ in range(2 if kind == "LSTMCell" else 1)]
    run_both(cpu_mod, dev_mod, [x] + states, dtype)


def test_lstm_cell_only_one_output_used():
    """Only hy (or only cy) feeds the loss: the backward gets one undefined
    gradient, which counts as zeros."""
    cpu_mod, dev_mod = twins(nn.LSTMCell(3, 4), torch.float64)
    x, h, c = (torch.randn(2, k, dtype=torch.float64) for k in (3, 4, 4))
    for pick in (0, 1):
        xs = [t.clone().requires_grad_() for t in (x, h, c)]
        xd = [t.to(DEV).requires_grad_() for t in (x, h, c)]
        cpu_mod(xs[0], (xs[1], xs[2]))[pick].sum().backward()
        dev_mod(xd[0], (xd[1], xd[2]))[pick].sum().backward()
        for a, b in zip(xs, xd):
            torch.testing.assert_close(b.grad.cpu(), a.grad)


def test_fused_cell_ops_directly():
    """The fused ops on strided gates, against the formulas in float64."""
    g = torch.Generator().manual_seed(1)
    B, H = 4, 5
    ig = torch.randn(B, 8 * H, dtype=torch.float64, generator=g)[:, ::2]
    hg = torch.randn(4 * H, B, dtype=torch.float64, generator=g).t()
    cx = torch.randn(B, H, dtype=torch.float64, generator=g)
    bi, bh = torch.randn(2, 4 * H, dtype=torch.float64, generator=g)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(ig.to(DEV), hg.to(DEV), cx.to(DEV), bi.to(DEV), bh.to(DEV))
    i, f, gg, o = (ig + hg + bi + bh).chunk(4, 1)
    c = f.sigmoid() * cx + i.sigmoid() * gg.tanh()
    torch.testing.assert_close(cy.cpu(), c)
    torch.testing.assert_close(hy.cpu(), o.sigmoid() * c.tanh())
    torch.testing.assert_close(ws.cpu(), torch.cat([i.sigmoid(), f.sigmoid(), gg.tanh(), o.sigmoid()], 1))
    with pytest.raises(RuntimeError, match="_thnn_fused_lstm_cell"):
        torch.ops.aten._thnn_fused_lstm_cell(ig.to(DEV), hg.to(DEV)[:, :-1], cx.to(DEV))
    with pytest.raises(RuntimeError, match="_thnn_fused_gru_cell"):
        torch.ops.aten._thnn_fused_gru_cell(ig.to(DEV)[:, :3 * H], hg.to(DEV)[:, :3 * H], cx.to(DEV)[:, :-1])
