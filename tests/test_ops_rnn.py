"""Recurrent networks on neuron against PyTorch CPU: nn.RNN (tanh, relu),
nn.LSTM (with projections) and nn.GRU with several layers, bidirectional,
batch_first and packed sequences, and their cells; outputs, final states and
the gradients of the input, the initial states and every parameter. The
modules reach our whole-sequence kernels (lstm/gru/rnn_tanh/rnn_relu, .input
and .data: one input GEMM per layer and direction, then per step the hidden
GEMM and the fused cell _thnn_fused_lstm_cell / _thnn_fused_gru_cell and
their backward); every test asserts that nothing fell back to the CPU, and
the module tests that the whole-sequence kernel was the one used.
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
    # Forward alone: which ops made it.
    dev_states = [t.to(DEV) for t in states]
    torchneuron.clear_op_tracking()
    with torch.no_grad():
        dev_mod(x.to(DEV), tuple(dev_states) if kind == "LSTM" else dev_states[0])
    ran = torchneuron.get_executed_ops()
    op = {"LSTM": "lstm", "GRU": "gru"}.get(kind) or "rnn_" + extra["nonlinearity"]
    assert ran.get(f"aten::{op}.input", 0) == 1, sorted(ran)
    dirs = 2 if bidirectional else 1
    if kind in ("LSTM", "GRU"):
        cell = "aten::_thnn_fused_lstm_cell" if kind == "LSTM" else "aten::_thnn_fused_gru_cell"
        assert ran.get(cell, 0) == steps * layers * dirs, sorted(ran)
    # One input GEMM per layer and direction, one hidden GEMM per step (and
    # one projection GEMM per step with proj_size): not two GEMMs per step.
    gemms = sum(ran.get(f"aten::{g}", 0) for g in ("mm", "addmm"))
    per_step = 2 if extra.get("proj_size") else 1
    assert gemms == layers * dirs * (1 + per_step * steps), sorted(ran.items())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_packed_sequence(kind):
    dtype = torch.float32
    batch, steps, features, hidden = 4, 5, 3, 4
    cpu_mod, dev_mod = twins(getattr(nn, kind)(features, hidden, num_layers=2, bidirectional=True), dtype)
    lengths = torch.tensor([5, 3, 2, 1])  # lengths stay on the host, as PyTorch requires
    x = torch.randn(steps, batch, features, dtype=dtype)

    def pack(t):
        return pack_padded_sequence(t, lengths, enforce_sorted=True)

    torchneuron.clear_op_tracking()
    run_both(cpu_mod, dev_mod, [x], dtype, pack=pack)
    op = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn_tanh"}[kind]
    assert torchneuron.get_executed_ops().get(f"aten::{op}.data", 0) == 1


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_packed_sequence_unsorted_with_state(kind):
    """Unsorted lengths (the module permutes the batch), given initial
    states and one sequence as long as the whole: the states of the
    sequences that end early are the final ones."""
    dtype = torch.float64
    batch, steps, features, hidden = 5, 6, 3, 4
    cpu_mod, dev_mod = twins(getattr(nn, kind)(features, hidden, num_layers=2, bidirectional=True), dtype)
    lengths = torch.tensor([2, 6, 1, 4, 4])
    x = torch.randn(steps, batch, features, dtype=dtype)
    states = initial_states(kind, 2, 2, batch, hidden, None, dtype)

    def pack(t):
        return pack_padded_sequence(t, lengths, enforce_sorted=False)

    run_both(cpu_mod, dev_mod, [x] + states, dtype, pack=pack)


def _functional(kind, layers, bidirectional, proj=None, packed_sizes=None, batch_first=False):
    """The module's op as a function of (input, states..., params...), for gradcheck."""
    def fn(x, *rest):
        nstates = 2 if kind == "lstm" else 1
        states, params = rest[:nstates], list(rest[nstates:])
        hx = tuple(states) if kind == "lstm" else states[0]
        op = getattr(torch._VF, kind)
        if packed_sizes is not None:
            out = op(x, packed_sizes, hx, params, True, layers, 0.0, False, bidirectional)
        else:
            out = op(x, hx, params, True, layers, 0.0, False, bidirectional, batch_first)
        return out
    return fn


@pytest.mark.parametrize("kind,proj", [("lstm", None), ("lstm", 2), ("gru", None), ("rnn_tanh", None),
                                       ("rnn_relu", None)], ids=["lstm", "lstm_proj", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_gradcheck_float64(kind, proj, packed):
    """torch.autograd.gradcheck of the whole-sequence kernels (2 layers,
    bidirectional) with respect to the input, the initial states and every
    weight, in float64 on small sizes."""
    torchneuron.clear_op_tracking()
    steps, batch, features, hidden, layers = 3, 2, 3, 3, 2
    module = {"lstm": nn.LSTM, "gru": nn.GRU}.get(kind, nn.RNN)
    extra = {"proj_size": proj} if proj else {}
    if kind.startswith("rnn_"):
        extra["nonlinearity"] = kind[4:]
    mod = module(features, hidden, num_layers=layers, bidirectional=True, **extra).double()
    params = [p.detach().to(DEV).requires_grad_() for p in mod._flat_weights]
    states = [t.to(DEV).requires_grad_() for t in
              initial_states("LSTM" if kind == "lstm" else kind, layers, 2, batch, hidden, proj, torch.float64)]
    sizes = torch.tensor([2, 2, 1]) if packed else None
    x = torch.randn((int(sizes.sum()), features) if packed else (steps, batch, features), dtype=torch.float64)
    x = x.to(DEV).requires_grad_()
    fn = _functional(kind, layers, True, proj, sizes)
    assert torch.autograd.gradcheck(fn, [x] + states + params, eps=1e-6, atol=1e-5, rtol=1e-4)
    overload = "data" if packed else "input"
    assert torchneuron.get_executed_ops().get(f"aten::{kind}.{overload}", 0) > 0


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


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_inference_mode_and_no_grad(kind):
    """Below autograd (inference mode) the same kernel runs, with the same results."""
    cpu_mod, dev_mod = twins(getattr(nn, kind)(3, 5, num_layers=2, bidirectional=True), torch.float32)
    x = torch.randn(4, 2, 3)
    expected = flat(cpu_mod(x))
    for ctx in (torch.no_grad, torch.inference_mode):
        torchneuron.clear_op_tracking()
        with ctx():
            got = flat(dev_mod(x.to(DEV)))
        compare(expected, got, TOL[torch.float32])
        op = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn_tanh"}[kind]
        assert torchneuron.get_executed_ops().get(f"aten::{op}.input", 0) == 1


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_bfloat16(kind):
    """bfloat16 weights and inputs: against the float64 CPU result of the
    same (bfloat16-rounded) values, within bfloat16's precision."""
    extra = {"proj_size": 3} if kind == "LSTM" else {}
    mod = getattr(nn, kind)(6, 8, num_layers=2, bidirectional=True, batch_first=True, **extra).bfloat16()
    dev_mod = copy.deepcopy(mod).to(DEV)
    ref_mod = copy.deepcopy(mod).double()
    x = torch.randn(3, 5, 6).bfloat16()
    expected = flat(ref_mod(x.double()))
    got = flat(dev_mod(x.to(DEV)))
    for e, g in zip(expected, got):
        assert g.dtype == torch.bfloat16 and g.device.type == DEV
        torch.testing.assert_close(g.cpu().double(), e, rtol=5e-2, atol=5e-2)
    sum(g.float().sum() for g in got).backward()
    assert all(p.grad is not None and p.grad.dtype == torch.bfloat16 for p in dev_mod.parameters())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_autocast_bfloat16(kind):
    """Under torch.autocast("neuron", bfloat16) the GEMMs and the fused cells
    run in bfloat16 (CUDA's policy: the outputs are bfloat16; the CPU's
    policy differs for GRU, whose CPU result stays float32), close to the
    float32 result."""
    cpu_mod, dev_mod = twins(getattr(nn, kind)(6, 8, num_layers=2), torch.float32)
    x = torch.randn(5, 3, 6)
    expected = flat(cpu_mod(x))
    with torch.autocast(DEV, torch.bfloat16):
        got = flat(dev_mod(x.to(DEV)))
    for e, g in zip(expected, got):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g.cpu().float(), e, rtol=5e-2, atol=5e-2)


def test_dropout_between_layers_reproducible():
    """Train-mode dropout draws from the device generator: seeded the same,
    two runs agree; and the first layer's dropped outputs equal exactly what
    a manual layer-by-layer run with the same draws gives."""
    dev_mod = nn.GRU(4, 6, num_layers=2, dropout=0.4).to(DEV)
    x = torch.randn(5, 3, 4, device=DEV)
    torch.manual_seed(7)
    a = dev_mod(x)[0]
    torch.manual_seed(7)
    b = dev_mod(x)[0]
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
    one = nn.GRU(4, 6).to(DEV)
    two = nn.GRU(6, 6).to(DEV)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(one, name + "_l0").copy_(getattr(dev_mod, name + "_l0"))
            getattr(two, name + "_l0").copy_(getattr(dev_mod, name + "_l1"))
    torch.manual_seed(7)
    mid = one(x)[0]
    mid = torch.nn.functional.dropout(mid.reshape(-1, 6), 0.4, True).view(5, 3, 6)
    torch.testing.assert_close(two(mid)[0].cpu(), a.cpu(), rtol=1e-5, atol=1e-6)


def test_bad_arguments_name_the_op():
    x = torch.randn(3, 2, 4, device=DEV)
    h = torch.zeros(1, 2, 5, device=DEV)
    w = [torch.randn(20, 4, device=DEV), torch.randn(20, 5, device=DEV)]
    with pytest.raises(RuntimeError, match="lstm: expected 2 weight tensors"):
        torch._VF.lstm(x, (h, h), w[:1], False, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="gru: expected the initial hidden state"):
        torch._VF.gru(x, h[0], [torch.randn(15, 4, device=DEV), torch.randn(15, 5, device=DEV)],
                      False, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="rnn_tanh: batch_sizes add up to"):
        torch._VF.rnn_tanh(x[0], torch.tensor([2, 2]), h, [torch.randn(5, 4, device=DEV),
                           torch.randn(5, 5, device=DEV)], False, 1, 0.0, False, False)


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


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_fused_cells_float32_vectorised_rows(bias):
    """The float32 cells (vectorised loops, a hidden size that leaves a
    tail) against the formulas in float64."""
    g = torch.Generator().manual_seed(2)
    B, H = 5, 37
    ig, hg = (torch.randn(B, 4 * H, generator=g) * 3 for _ in range(2))
    cx = torch.randn(B, H, generator=g)
    bi, bh = (torch.randn(4 * H, generator=g) if bias else None for _ in range(2))
    dev = [t.to(DEV) if t is not None else None for t in (ig, hg, cx, bi, bh)]
    hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(*dev)
    gates = ig.double() + hg.double() + ((bi + bh).double() if bias else 0)
    i, f, gg, o = gates.chunk(4, 1)
    c = f.sigmoid() * cx.double() + i.sigmoid() * gg.tanh()
    torch.testing.assert_close(cy.cpu().double(), c, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(hy.cpu().double(), o.sigmoid() * c.tanh(), rtol=1e-5, atol=1e-6)
    ig3, hg3 = ig[:, :3 * H].contiguous(), hg[:, :3 * H].contiguous()
    b3 = [b[:3 * H].contiguous().to(DEV) if bias else None for b in (bi, bh)]
    hy, _ = torch.ops.aten._thnn_fused_gru_cell(ig3.to(DEV), hg3.to(DEV), cx.to(DEV), *b3)
    xi = ig3.double() + (bi[:3 * H].double() if bias else 0)
    xh = hg3.double() + (bh[:3 * H].double() if bias else 0)
    r = (xi[:, :H] + xh[:, :H]).sigmoid()
    z = (xi[:, H:2 * H] + xh[:, H:2 * H]).sigmoid()
    n = (xi[:, 2 * H:] + r * xh[:, 2 * H:]).tanh()
    torch.testing.assert_close(hy.cpu().double(), n + z * (cx.double() - n), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["f32", "bf16", "f16"])
def test_fused_cells_column_major_gates_same_bits(dtype):
    """Column-major gates (the transpose of a GEMM result) are moved into
    row-major blocks of 8 rows (nn_transpose.c, 32-bit or 16-bit): the cells
    give the same bits as with the same gates contiguous, LSTM and GRU,
    with a batch that leaves a partial block and a width that leaves a
    partial 8 x 8 block, and no CPU fallback."""
    g = torch.Generator().manual_seed(5)
    B, H = 21, 37
    cx = torch.randn(B, H, generator=g).to(dtype).to(DEV)
    bi, bh = (torch.randn(4 * H, generator=g).to(dtype).to(DEV) for _ in range(2))
    ig, hg = ((torch.randn(4 * H, B, generator=g) * 3).to(dtype).to(DEV) for _ in range(2))
    torchneuron.clear_op_tracking()
    for name, w, extra in (("lstm", 4, (cx, bi, bh)), ("gru", 3, (cx, bi[:3 * H], bh[:3 * H]))):
        op = getattr(torch.ops.aten, f"_thnn_fused_{name}_cell")
        igc, hgc = ig[:w * H].t(), hg[:w * H].t()  # column-major [B, w * H]
        assert hgc.stride() == (1, B)
        strided = op(igc, hgc, *extra)
        packed = op(igc.contiguous(), hgc.contiguous(), *extra)
        for a, b in zip(strided, packed):
            assert torch.equal(a.cpu(), b.cpu()), name
    assert not torchneuron.get_fallback_ops(), torchneuron.get_fallback_ops()


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_batch_of_32_runs_the_hidden_product_transposed(kind):
    """float32 LSTM/GRU with a batch of 32: each step's hidden product
    h W_hh^T runs as (W_hh h^T)^T inside the GEMM (gemm.c,
    small_m_transposed; once nn_rnn_sequence.cpp's own special case). Every
    element is the same sum as on the straight path, so the first 31
    sequences of a batch of 32 give the same bits as a batch of those 31
    alone; against the CPU within tolerance, forward and backward,
    bidirectional, two layers."""
    dtype = torch.float32
    cpu_mod, dev_mod = twins(getattr(nn, kind)(7, 16, num_layers=2, bidirectional=True), dtype)
    x = torch.randn(5, 32, 7, dtype=dtype)
    states = initial_states(kind, 2, 2, 32, 16, None, dtype)
    run_both(cpu_mod, dev_mod, [x] + states, dtype)
    with torch.no_grad():
        def run(n):
            hx = [s[:, :n].to(DEV) for s in states]
            return flat(dev_mod(x[:, :n].to(DEV), tuple(hx) if kind == "LSTM" else hx[0]))
        whole, part = run(32), run(31)
    assert torch.equal(whole[0][:, :31].cpu(), part[0].cpu())
    for w, p in zip(whole[1:], part[1:]):
        assert torch.equal(w[:, :31].cpu(), p.cpu())
