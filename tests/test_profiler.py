"""torch.profiler device activity on neuron (the Kineto plugin in
csrc/profiler.cpp): one small training step is profiled once, with a
matmul, a softmax, an adaptive-eager fused group and an NKI kernel; the
tests read the events, key_averages, the chrome trace and the summary of
torchneuron.profiler."""

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron import profiler as tn_profiler


@nki.jit
def doubled(x: torch.Tensor) -> torch.Tensor:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    res = nl.ndarray(t.shape, x.dtype)
    nisa.tensor_scalar(res, t, nl.multiply, 2.0)
    nl.store(out, res)
    return out


doubled_op = torchneuron.nki_op("profiler_test::doubled")(doubled)


def _step(gates):
    torch.manual_seed(0)
    w = torch.randn(128, 128, device="neuron", requires_grad=True)
    x = torch.randn(64, 128, device="neuron")
    y = torch.softmax(x @ w, dim=-1)
    loss = doubled_op(y.detach().contiguous()).sum() + y.sum()
    loss.backward()
    # Queued behind a closed gate, these pointwise ops fuse into one group.
    a = torch.randn(256, 512, device="neuron")
    gate = gates.close()
    b = ((a * 2.0) + 1.0).relu() - a
    gates.open(gate)
    torch.neuron.synchronize()
    return b


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    from conftest import Gates

    was = torchneuron.adaptive_eager_enabled()
    torchneuron.set_adaptive_eager(True)
    gates = Gates()
    try:
        _step(gates)  # warm-up: compile the NKI kernel, start the workers
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                     record_shapes=True) as prof:
            _step(gates)
    finally:
        gates.open_all()
        torchneuron.set_adaptive_eager(was)
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text())


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def test_device_events_of_a_training_step(profiled):
    prof, _ = profiled
    recs = tn_profiler.records()
    by_kind = {}
    for r in recs:
        by_kind.setdefault(r["kind"], []).append(r)
    kernel_names = {r["name"] for r in by_kind.get("kernel", [])}
    assert {"gemm", "softmax"} <= kernel_names, kernel_names
    assert by_kind.get("fused group") and by_kind.get("fused member"), by_kind.keys()
    assert by_kind.get("NKI kernel"), by_kind.keys()
    for wanted in ("gemm", "softmax"):
        assert any(r["name"] == wanted and r["device_us"] > 0 for r in by_kind["kernel"])
    assert all(r["device_us"] > 0 for r in by_kind["fused group"] + by_kind["NKI kernel"])
    group = by_kind["fused group"][0]["name"]
    assert group.startswith("fused group:") and "relu" in group
    # The same work as torch.profiler events with device time.
    events = _device_events(prof)
    timed = {e.name for e in events if not e.is_user_annotation and e.time_range.elapsed_us() > 0}
    assert {"gemm", "softmax", "relu", by_kind["NKI kernel"][0]["name"]} <= timed, timed
    assert any(e.is_user_annotation and e.name == group for e in events)


def test_device_work_is_linked_to_the_cpu_op_that_launched_it(profiled):
    prof, _ = profiled
    # CPU ops (the launches on the CPU are CPU events too, linked to their op).
    cpu = {e.id: e for e in prof.events()
           if e.device_type == DeviceType.CPU and not e.linked_correlation_id}
    owners = {}
    for e in _device_events(prof):
        if not e.is_user_annotation and e.linked_correlation_id in cpu:
            owners.setdefault(e.name, set()).add(cpu[e.linked_correlation_id].name)
    assert owners["gemm"] & {"aten::mm", "aten::addmm"}, owners
    assert "aten::_softmax" in owners["softmax"], owners
    averages = {a.key: a for a in prof.key_averages()}
    mm = averages.get("aten::mm")
    assert mm is not None and mm.device_time_total > 0 and mm.self_device_time_total > 0
    assert averages["aten::_softmax"].self_device_time_total > 0


def test_every_kernel_carries_an_estimate(profiled):
    for r in tn_profiler.records():
        if r["kind"] in ("kernel", "fused member", "fused group", "NKI kernel"):
            assert r["estimated_us"] > 0, r
            assert r["bound"] in ("compute", "memory"), r


def test_chrome_trace_has_stream_lanes_arrows_and_the_estimate_lane(profiled):
    _, trace = profiled
    events = trace["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    target = tn_profiler.target()
    assert "neuron:0 stream 0" in lanes, lanes
    assert f"estimated {target} (neuron:0 stream 0)" in lanes, lanes
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert {"gemm", "softmax"} <= {e["name"] for e in kernels}
    starts = {e["id"] for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"] for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert starts & ends, "no launch arrow from a launch to its kernel"
    estimated = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(f"estimated {target}: ")]
    assert estimated and all(e["args"]["note"] == "a roofline model, not a measurement" for e in estimated)
    kinds = {e["args"].get("kind") for e in kernels}
    assert {"kernel", "fused member", "NKI kernel"} <= kinds, kinds


def test_summary_table(profiled):
    prof, _ = profiled
    rows = {r.op: r for r in tn_profiler.estimates(prof)}
    mm = rows.get("aten::mm")
    assert mm is not None and mm.calls >= 1 and mm.estimated_us > 0 and mm.bound in ("compute", "memory")
    table = tn_profiler.summary(prof)
    assert f"estimated {tn_profiler.target()}" in table and "aten::mm" in table
    assert "not a measurement" in table


def test_cpu_only_profile_records_no_device_activity():
    x = torch.randn(32, 32, device="neuron")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).sum().item()
    assert any(e.name == "aten::mm" for e in prof.events())
    assert not _device_events(prof)
    assert not torchneuron._C._profile_active()


def test_compiled_program_and_its_steps():
    @torch.compile(backend="neuron")
    def f(x, w):
        return torch.softmax(x @ w, -1).relu() * 2 + 1

    x = torch.randn(64, 128, device="neuron")
    w = torch.randn(128, 128, device="neuron")
    f(x, w)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        f(x, w)
        torch.neuron.synchronize()
    recs = tn_profiler.records()
    programs = [r for r in recs if r["kind"] == "compiled program"]
    steps = [r for r in recs if r["kind"] == "program step"]
    assert len(programs) == 1 and programs[0]["device_us"] > 0
    assert any(r["name"] == "gemm" for r in steps), steps
    assert all(r["correlation"] == programs[0]["correlation"] for r in steps)
    # The program's estimate is its steps' sum; device time counts the steps.
    assert programs[0]["estimated_us"] == pytest.approx(sum(r["estimated_us"] for r in steps))
    rows = [r for r in tn_profiler.estimates(prof) if r.estimated_us > 0]
    assert rows and rows[0].calls >= 1 and rows[0].device_us > 0


def test_schedule_windows_each_get_their_own_device_events():
    x = torch.randn(64, 128, device="neuron")
    w = torch.randn(128, 128, device="neuron")
    per_window = []

    def ready(p):
        per_window.append(sum(1 for e in p.events() if e.name == "gemm"))

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=ready, record_shapes=True, profile_memory=True,
                 with_stack=True) as prof:
        for _ in range(8):
            (x @ w).sum().item()
            prof.step()
    # Two steps of one matmul each per active window; none from wait or warmup.
    assert per_window == [2, 2]
