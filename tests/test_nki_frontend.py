"""The NKI front end: tracing and caching, views, NumPy and device runs,
streams, launch grids, numerics of the instructions, and estimates."""

import json
import math

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def scale_rows(a, factor):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), factor))
    return out


def test_a_second_call_with_the_same_key_does_not_retrace():
    a = np.ones((4, 8), np.float32)
    before = scale_rows.trace_count
    scale_rows(a, 2.0)
    scale_rows(a + 1, 2.0)
    assert scale_rows.trace_count == before + 1
    scale_rows(a, 3.0)  # a non-tensor argument is part of the key
    scale_rows(np.ones((5, 8), np.float32), 3.0)  # so is the shape
    assert scale_rows.trace_count == before + 3


def test_numpy_in_numpy_out():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = scale_rows(a, 0.5)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, a * 0.5)


def test_neuron_in_neuron_out_on_the_current_stream(gates):
    a = torch.randn(100, 30)
    x = a.to("neuron")
    stream = torch.neuron.Stream()
    with torch.neuron.stream(stream):
        handle = gates.close(stream)
        out = scale_rows(x, 2.0)  # queued behind the gate: returns at once
        assert stream.query() is False
        gates.open(handle)
    stream.synchronize()
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), a * 2)


def test_simulate_and_env_return_numpy(monkeypatch):
    a = torch.randn(3, 5)
    out = nki.simulate(scale_rows)(a.to("neuron"), 2.0)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, a * 2)
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    out = scale_rows(a.numpy(), 2.0)
    np.testing.assert_allclose(out, a.numpy() * 2)


def test_bfloat16_numpy_results_come_back_as_float32_values():
    @nki.jit
    def to_bf16(a):
        out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    a = np.array([[1.0, 1.00390625, 3.14159]], np.float32)
    out = to_bf16(a)
    expect = torch.tensor(a).bfloat16().float().numpy()
    np.testing.assert_array_equal(out, expect)


def test_view_indexing_rules():
    shapes = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4, 8), nl.float32)
        shapes["partition_int"] = t[3].shape
        shapes["free_int"] = t[:, 1].shape
        shapes["both_free_ints"] = t[:, 1, 2].shape
        shapes["ellipsis"] = t[..., 0:4].shape
        shapes["hbm_int"] = a[2].shape
        shapes["hbm_slice"] = a[1:3, ::2].shape
        shapes["reshape"] = t.reshape((128, 32)).shape
        shapes["permute"] = t.permute(0, 2, 1).shape
        shapes["broadcast"] = t[:, 0:1, :].broadcast_to((128, 6, 8)).strides
        shapes["view"] = t.view(nl.bfloat16).shape
        shapes["ap"] = t.ap([[1, 64], [8, 4]], offset=2).shape
        nisa.memset(t, 0)

    k(np.zeros((6, 10), np.float32))
    assert shapes["partition_int"] == (1, 4, 8)
    assert shapes["free_int"] == (128, 8)
    assert shapes["both_free_ints"] == (128, 1)
    assert shapes["ellipsis"] == (128, 4, 4)
    assert shapes["hbm_int"] == (10,)
    assert shapes["hbm_slice"] == (2, 5)
    assert shapes["reshape"] == (128, 32)
    assert shapes["permute"] == (128, 8, 4)
    assert shapes["broadcast"] == (1, 0, 1)
    assert shapes["view"] == (128, 4, 16)
    assert shapes["ap"] == (64, 4)


def test_fresh_on_chip_memory_reads_as_nan():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 8), nl.float32)
        nisa.memset(t[:, 0:4], 1.0)
        nl.store(out, t)
        return out

    out = k(np.zeros(1, np.float32))
    assert (out[:, :4] == 1).all() and np.isnan(out[:, 4:]).all()


def test_grid_of_two_programs_shares_outputs():
    @nki.jit
    def halves(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        rows = a.shape[0] // nl.num_programs(0)
        r0 = pid * rows
        nl.store(out[r0:r0 + rows], nl.add(nl.load(a[r0:r0 + rows]), float(pid)))
        return out

    a = torch.randn(8, 4)
    out = halves[2](a.to("neuron")).cpu()
    assert torch.equal(out[:4], a[:4]) and torch.equal(out[4:], a[4:] + 1)


def test_iota_and_affine_select():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 6), nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((4, 6), nl.int32)
        nisa.iota(idx, [[1, 6]], offset=10, channel_multiplier=100)
        vals = nl.ndarray((4, 6), nl.float32)
        nisa.tensor_copy(vals, idx)
        nisa.affine_select(vals, [[-1, 6]], 1, vals, -1.0, cmp_op=nl.greater_equal)
        nl.store(out, vals)
        return out

    out = k(np.zeros(1, np.float32))
    c, i = np.meshgrid(np.arange(4), np.arange(6), indexing="ij")
    expect = np.where(c - i >= 0, 10 + 100 * c + i, -1.0)
    np.testing.assert_array_equal(out, expect)


ALU_CASES = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
             ("divide", np.divide), ("maximum", np.maximum), ("minimum", np.minimum),
             ("greater", np.greater), ("less_equal", np.less_equal), ("equal", np.equal)]


@pytest.mark.parametrize("name,ref", ALU_CASES)
def test_tensor_tensor_and_tensor_scalar_ops(name, ref):
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        t = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_tensor(t, x, y, getattr(nl, name))
        nl.store(out, t)
        s = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_scalar(s, x, getattr(nl, name), 0.5, reverse0=True)
        nl.store(out2, s)
        return out, out2

    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 24)).astype(np.float32)
    b = rng.standard_normal((16, 24)).astype(np.float32)
    out, out2 = k(a, b)
    np.testing.assert_allclose(out, ref(a, b).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(out2, ref(np.float32(0.5), a).astype(np.float32), rtol=1e-6)


ACT_CASES = [("exp", torch.exp), ("log", torch.log), ("tanh", torch.tanh),
             ("sigmoid", torch.sigmoid), ("relu", torch.relu),
             ("gelu", torch.nn.functional.gelu), ("silu", torch.nn.functional.silu),
             ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt), ("square", torch.square),
             ("abs", torch.abs), ("sin", torch.sin), ("erf", torch.erf),
             ("softplus", torch.nn.functional.softplus), ("reciprocal", torch.reciprocal)]


@pytest.mark.parametrize("name,ref", ACT_CASES)
def test_activation_functions(name, ref):
    x = torch.rand(8, 33) * 4 + 0.1
    out = getattr(nl, name)
    k = nki.jit(lambda a: _store(out(nl.load(a)), a))
    torch.testing.assert_close(torch.from_numpy(k(x.numpy())), ref(x), rtol=1e-5, atol=1e-6)


def _store(tile, like):
    out = nl.ndarray(like.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, tile)
    return out


def test_bitwise_ops_act_on_bits():
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.int32)
        nisa.tensor_tensor(t, nl.load(a), nl.load(b), nl.bitwise_xor)
        nisa.tensor_scalar(t, t, nl.left_shift, 2, op1=nl.bitwise_and, operand1=0xFFFF)
        nl.store(out, t)
        return out

    a = np.arange(12, dtype=np.int32).reshape(3, 4) * 12345
    b = np.full((3, 4), 0x5A5A, np.int32)
    np.testing.assert_array_equal(k(a, b), ((a ^ b) << 2) & 0xFFFF)


def test_low_precision_storage_rounds():
    @nki.jit
    def k(a, dt):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a, dtype=dt)
        nl.store(out, t)
        return out

    a = np.array([[1.0, 1.0625, 300.0, 0.001, -2.75, 1000.0]], np.float32)
    np.testing.assert_array_equal(k(a, nl.float8_e4m3), [[1.0, 1.0, np.inf, 0.001953125, -2.75,
                                                          np.inf]])
    np.testing.assert_array_equal(k(a, nl.float8_e5m2), [[1.0, 1.0, 320.0, 0.0009765625, -3.0,
                                                          1024.0]])
    np.testing.assert_array_equal(k(a, nl.int8), [[1, 1, 127, 0, -3, 127]])


def test_reductions_and_nl_conveniences():
    @nki.jit
    def k(a):
        x = nl.load(a)
        outs = []
        for tile in (nl.sum(x, axis=1), nl.max(x, axis=1), nl.mean(x, axis=1),
                     nl.where(nl.greater(x, 0.0), x, 0.0), nl.matmul(x, x, transpose_x=True)):
            o = nl.ndarray(tile.shape, nl.float32, buffer=nl.shared_hbm)
            nl.store(o, tile)
            outs.append(o)
        return tuple(outs)

    a = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    s, m, mean, relu, gram = k(a)
    np.testing.assert_allclose(s[:, 0], a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m[:, 0], a.max(1))
    np.testing.assert_allclose(mean[:, 0], a.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    np.testing.assert_allclose(gram, a.T @ a, rtol=1e-5, atol=1e-4)


def test_benchmark_estimates_and_writes_a_trace(tmp_path):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))
    from matmul import matmul_tiled

    a = np.zeros((512, 256), np.float32).astype(np.float16)
    b = np.zeros((512, 512), np.float16)
    path = tmp_path / "trace.json"
    est = nki.benchmark(matmul_tiled, save_trace=str(path))(a, b)
    assert est.latency_us > 0
    assert est.busy_us["Tensor"] > 0 and est.busy_us["DMA"] > 0
    assert est.instructions["Tensor"] == 2 * 4
    assert 0 < est.utilization["Tensor"] <= 1.0
    # 8 matmuls of 512 moving columns at 2.4 GHz (trn2)
    assert math.isclose(est.busy_us["Tensor"], 8 * 512 / 2.4e3, rel_tol=1e-6)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(matmul_tiled.specialise((a, b), {}).tracer.instructions)
    lanes = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"Tensor", "Vector", "DMA queue 0"} <= lanes


def test_the_configured_generation_sets_geometry_and_clocks(tmp_path):
    from conftest import run_python_many

    code = """
        import numpy as np, torchneuron.nki as nki, torchneuron.nki.isa as nisa
        import torchneuron.nki.language as nl

        @nki.jit
        def big(a):  # 200 KiB per partition: fits trn2 (224 KiB), not trn1 (192 KiB)
            t = nl.ndarray((128, 50 * 1024), nl.float32)
            nisa.memset(t, 0)
            out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
            nl.store(out, t[:, 0:512])
            return out
        try:
            est = nki.benchmark(big)(np.zeros(1, np.float32))
            print("ok", est.target, est.busy_us["DMA"])
        except nki.NkiError as e:
            print("error", e.rule)
    """
    runs = run_python_many({t: (code, {"NEURON_PLATFORM_TARGET_OVERRIDE": t})
                            for t in ("trn1", "trn2")})
    trn1, trn2 = runs["trn1"], runs["trn2"]
    assert trn1.stdout.split() == ["error", "sbuf_capacity"], trn1.stderr
    words = trn2.stdout.split()
    assert words[:2] == ["ok", "trn2"], trn2.stderr
    # 256 KiB at 368 GB/s
    assert math.isclose(float(words[2]), 128 * 512 * 4 / 368e3, rel_tol=1e-6)
