"""The NKI front end: tracing and caching, views, NumPy and device runs,
streams and errors of asynchronous launches, launch grids, and estimates.
The instructions' numerics are in test_nki_isa.py."""

import json
import math

import numpy as np
import pytest
import torch

from torchneuron import _C
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


@pytest.fixture
def failing_runs():
    """Makes the next simulated program run fail (as if out of host memory)."""
    yield lambda n=1: _C._nki_inject_run_failures(n)
    _C._nki_inject_run_failures(0)


def test_a_failure_while_a_launch_runs_raises_at_the_next_synchronize(failing_runs):
    a = torch.randn(8, 4)
    x = a.to("neuron")
    failing_runs()
    first = scale_rows(x, 2.0)  # queued: the failure happens on the stream
    try:  # behind the failure: skipped like any kernel if queued first, else refused
        scale_rows(x, 3.0)
    except torch.OutOfMemoryError:
        pass
    with pytest.raises(torch.OutOfMemoryError,
                       match=r"NKI kernel scale_rows \(.*test_nki_frontend.py:\d+\): out of host "
                             r"memory running an NKI program \(injected failure\).*asynchronous"):
        torch.neuron.synchronize()
    assert first.device.type == "neuron"
    with pytest.raises(torch.OutOfMemoryError, match="NKI kernel scale_rows"):
        first.cpu()  # sticky: the failed result never reads back as a result
    torch.neuron.clear_error()
    assert torch.equal(scale_rows(x, 2.0).cpu(), a * 2)  # the stream works again


def test_a_failure_while_a_launch_runs_raises_at_the_next_blocking_copy(failing_runs):
    a = torch.randn(8, 4)
    failing_runs()
    out = scale_rows(a.to("neuron"), 2.0)
    with pytest.raises(torch.OutOfMemoryError, match="NKI kernel scale_rows"):
        out.cpu()


def test_a_failure_raises_at_the_call_with_blocking_launches():
    from conftest import check_output, run_python

    code = """
        import torch, torchneuron, torchneuron.nki as nki, torchneuron.nki.language as nl

        @nki.jit
        def copy(a):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a))
            return out

        x = torch.ones(4, 4, device="neuron")
        torchneuron._C._nki_inject_run_failures(1)
        try:
            copy(x)
            print("no error")
        except torch.OutOfMemoryError as e:
            print("raised:", "NKI kernel copy" in str(e))
        torch.neuron.clear_error()
        print("then:", torch.equal(copy(x).cpu(), torch.ones(4, 4)))
    """
    out = check_output(run_python(code, {"NEURON_LAUNCH_BLOCKING": "1"}))
    assert out.split("\n")[:2] == ["raised: True", "then: True"], out


def test_a_failure_on_the_host_simulator_raises_at_the_call(failing_runs):
    failing_runs()
    with pytest.raises(torch.OutOfMemoryError, match="injected failure"):
        scale_rows(np.ones((2, 2), np.float32), 2.0)
    np.testing.assert_array_equal(scale_rows(np.ones((2, 2), np.float32), 2.0), 2)


def test_neuron_tensors_do_not_mix_with_host_arrays():
    x = torch.ones(2, 2, device="neuron")
    with pytest.raises(ValueError, match="NumPy arrays"):
        scale_rows(x, np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="one neuron device"):
        scale_rows(x, torch.ones(2, 2))


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
        shapes["ap"] = t.ap([[32, 64], [8, 4]], offset=2).shape
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


F = 1000  # elements per partition of the cost-model cases
COST_CASES = [  # name, engine, cycles (NKI.md "Estimated timing"), one instruction on x, y, p
    ("activation", "Scalar", F, lambda x, y, p: nisa.activation(y, nl.exp, x)),
    ("tensor_scalar", "Vector", F, lambda x, y, p: nisa.tensor_scalar(y, x, nl.add, 1.0)),
    ("tensor_copy", "Vector", F, lambda x, y, p: nisa.tensor_copy(y, x)),
    ("memset_min_ii", "Vector", 64, lambda x, y, p: nisa.memset(y[:, 0:10], 0)),
    ("tensor_tensor", "Vector", 2 * F, lambda x, y, p: nisa.tensor_tensor(y, x, x, nl.add)),
    ("tensor_tensor_psum", "Vector", 512,
     lambda x, y, p: nisa.tensor_tensor(y[:, 0:512], x[:, 0:512], p, nl.add)),
    ("tensor_reduce", "Vector", F,
     lambda x, y, p: nisa.tensor_reduce(y[:, 0:1], nl.add, x, axis=1)),
    ("iota", "GpSimd", 150 + F,
     lambda x, y, p: nisa.iota(nl.ndarray((128, F), nl.int32), [[1, F]])),
    ("affine_select", "GpSimd", 150 + F,
     lambda x, y, p: nisa.affine_select(y, [[1, F]], 0, x, 0.0)),
    ("transpose_fp32", "Tensor", 4 * 128,
     lambda x, y, p: nisa.nc_transpose(nl.ndarray((128, 128), nl.float32, buffer=nl.psum),
                                       x[:, 0:128])),
]
CLOCK_GHZ = {"Tensor": 2.4, "Vector": 0.96, "Scalar": 1.2, "GpSimd": 1.2}  # trn2


@pytest.mark.parametrize("name,engine,cycles,issue", COST_CASES, ids=[c[0] for c in COST_CASES])
def test_cost_model_uses_the_published_instruction_costs(name, engine, cycles, issue):
    @nki.jit
    def k(a, issue_it):
        x, y = nl.ndarray((128, F), nl.float32), nl.ndarray((128, F), nl.float32)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        for t in (x, y, p):
            nisa.memset(t, 1.0)
        if issue_it:
            issue(x, y, p)
        nisa.tensor_copy(y, y)  # keeps y live past the instruction

    a = np.zeros(1, np.float32)
    without = nki.benchmark(k)(a, False).busy_us[engine]
    extra = nki.benchmark(k)(a, True).busy_us[engine] - without
    assert math.isclose(extra, cycles / CLOCK_GHZ[engine] / 1e3, rel_tol=1e-9), extra


def test_the_configured_generation_sets_geometry_and_bandwidth():
    from conftest import run_python_many

    code = """
        import numpy as np, torch, torchneuron.nki as nki, torchneuron.nki.isa as nisa
        import torchneuron.nki.language as nl

        @nki.jit
        def tile_of(a, kib):
            t = nl.ndarray((128, kib * 256), nl.float32)
            nisa.memset(t, 0)
            out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
            nl.store(out, t[:, 0:512])
            return out

        a = np.zeros(1, np.float32)
        target = torch.neuron.get_device_properties(0).target
        for kib in (200, 240):
            try:
                print(target, kib, "ok", nki.benchmark(tile_of)(a, kib).busy_us["DMA"])
            except nki.NkiError as e:
                print(target, kib, "error", e.rule)
    """
    runs = run_python_many({t: (code, {"NEURON_PLATFORM_TARGET_OVERRIDE": t})
                            for t in ("trn1", "trn2", "trn3")})
    out = {t: [line.split() for line in r.stdout.splitlines()] for t, r in runs.items()}
    # SBUF partitions: 192 / 224 / 256 KiB
    assert [row[2:] for row in out["trn1"]] == [["error", "sbuf_capacity"]] * 2, runs["trn1"].stderr
    assert [row[2] for row in out["trn2"]] == ["ok", "error"], runs["trn2"].stderr
    assert [row[2] for row in out["trn3"]] == ["ok", "ok"], runs["trn3"].stderr
    assert [out[t][0][0] for t in out] == list(out)
    # 256 KiB per store at the per-core DMA bandwidth: 368 / 528 GB/s
    for target, gbps in (("trn2", 368), ("trn3", 528)):
        assert math.isclose(float(out[target][0][3]), 128 * 512 * 4 / (gbps * 1e3), rel_tol=1e-6)


def test_dma_under_2_kib_per_partition_is_overhead_bound():
    # The DMA bandwidth guide: a transfer needs >= 2 KiB per partition; a
    # smaller one occupies the bandwidth as long as a 2 KiB one would.
    @nki.jit
    def store(a, cols, rows):
        t = nl.ndarray((rows, cols), nl.float32)
        nisa.memset(t, 0)
        out = nl.ndarray((rows, cols), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    a = np.zeros(1, np.float32)
    dma = {(cols, rows): nki.benchmark(store)(a, cols, rows).busy_us["DMA"]
           for cols, rows in ((128, 128), (512, 128), (1024, 128), (128, 32))}
    assert dma[128, 128] == pytest.approx(dma[512, 128], rel=1e-9)  # 512 B rows cost as 2 KiB
    assert dma[1024, 128] == pytest.approx(2 * dma[512, 128], rel=1e-9)  # bytes / bandwidth above
    assert dma[128, 32] == pytest.approx(dma[512, 128] / 4, rel=1e-9)  # per partition moved


def test_engines_overlap_unless_data_orders_them():
    @nki.jit
    def k(a, dependent):
        x, x2, y, y2 = (nl.ndarray((128, 2048), nl.float32) for _ in range(4))
        nisa.activation(x2, nl.exp, x)  # Scalar engine
        nisa.tensor_scalar(y2, x2 if dependent else y, nl.add, 1.0)  # Vector engine

    a = np.zeros(1, np.float32)
    apart, ordered = nki.benchmark(k)(a, False), nki.benchmark(k)(a, True)
    scalar, vector = apart.busy_us["Scalar"], apart.busy_us["Vector"]
    assert scalar > 0 and vector > 0
    assert apart.latency_us == pytest.approx(max(scalar, vector), rel=1e-9)
    assert ordered.latency_us == pytest.approx(scalar + vector, rel=1e-9)
