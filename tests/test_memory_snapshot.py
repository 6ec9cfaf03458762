"""torch.neuron.memory's history and snapshots in torch.cuda.memory's
structure: PyTorch's own viewers (torch.cuda._memory_viz) read them, the
blocks carry the stacks that allocated them, the trace follows the
allocator's events, and the totals agree with memory_stats."""

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

MiB = 1 << 20


@pytest.fixture
def history():
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.memory._record_memory_history(stacks="python", max_entries=10000, clear_history=True)
    yield torch.neuron.memory
    torch.neuron.memory._record_memory_history(enabled=None)


def allocate_for_the_test():
    return torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")


def frame_names(frames):
    return [f["name"] for f in frames]


def test_snapshot_has_cuda_structure_and_viewers_accept_it(history, tmp_path):
    keep = allocate_for_the_test()
    gone = torch.ones(1000, device="neuron")
    del gone
    history._dump_snapshot(str(tmp_path / "snapshot.pickle"))
    with open(tmp_path / "snapshot.pickle", "rb") as f:
        snapshot = pickle.load(f)

    assert set(snapshot) >= {"segments", "device_traces"}
    assert len(snapshot["device_traces"]) == torch.neuron.device_count()
    for seg in snapshot["segments"]:
        assert {"device", "address", "total_size", "allocated_size", "active_size", "stream",
                "segment_type", "blocks"} <= set(seg)
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        for b in seg["blocks"]:
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    trace = snapshot["device_traces"][0]
    actions = [e["action"] for e in trace]
    for action in ("segment_alloc", "alloc", "free_requested", "free_completed", "snapshot"):
        assert action in actions, actions
    assert all({"action", "addr", "size", "stream", "time_us", "frames"} <= set(e) for e in trace)

    # PyTorch's viewers: the HTML pages embed it, and the text tools parse
    # every segment, block and event (segsum checks that the sizes add up).
    assert "<html>" in _memory_viz.segment_plot(snapshot)
    assert "<html>" in _memory_viz.trace_plot(snapshot)
    assert "segments:" in _memory_viz.segsum(snapshot)
    assert "Device 0" in _memory_viz.trace(snapshot)
    del keep


def test_live_blocks_carry_the_stack_that_allocated_them(history):
    keep = allocate_for_the_test()
    snapshot = history._snapshot()
    block = next(b for s in snapshot["segments"] for b in s["blocks"]
                 if b["address"] == keep.data_ptr())
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 3 * MiB and block["size"] >= 3 * MiB
    assert "allocate_for_the_test" in frame_names(block["frames"])
    assert any(f["filename"].endswith("test_memory_snapshot.py") for f in block["frames"])
    alloc = [e for e in snapshot["device_traces"][0]
             if e["action"] == "alloc" and e["addr"] == keep.data_ptr()]
    assert alloc and "allocate_for_the_test" in frame_names(alloc[-1]["frames"])


def test_stacks_all_adds_cpp_frames(history):
    history._record_memory_history(stacks="all", clear_history=True)
    keep = allocate_for_the_test()
    block = next(b for s in history._snapshot()["segments"] for b in s["blocks"]
                 if b["address"] == keep.data_ptr())
    names = frame_names(block["frames"])
    assert "allocate_for_the_test" in names
    assert any("MemoryEventContext" in name for name in names), names


def test_trace_follows_frees_and_empty_cache(history):
    x = torch.empty(12 * MiB, dtype=torch.uint8, device="neuron")  # a segment of its own
    address = x.data_ptr()
    del x
    torch.neuron.empty_cache()
    trace = history._snapshot()["device_traces"][0]
    mine = [e["action"] for e in trace if e["addr"] == address]
    assert mine[:2] == ["segment_alloc", "alloc"], mine
    assert "free_requested" in mine and "free_completed" in mine and mine[-1] == "segment_free", mine
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)


def test_record_stream_frees_complete_after_the_other_stream(history):
    side = torch.neuron.Stream()
    x = torch.ones(1 << 16, device="neuron")
    with torch.neuron.stream(side):
        y = x * 2
    x.record_stream(side)
    address = x.data_ptr()
    del x
    snapshot = history._snapshot()
    states = [b["state"] for s in snapshot["segments"] for b in s["blocks"] if b["address"] == address]
    assert states and states[0] in ("active_pending_free", "inactive")
    side.synchronize()
    torch.ones(1, device="neuron")  # an allocation returns completed pending blocks
    actions = [e["action"] for e in history._snapshot()["device_traces"][0] if e["addr"] == address]
    assert actions.index("free_requested") < actions.index("free_completed"), actions
    del y


def test_oom_is_recorded(history):
    total = torch.neuron.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total + MiB, dtype=torch.uint8, device="neuron")
    oom = [e for e in history._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert oom and oom[-1]["size"] == total + MiB and "device_free" in oom[-1]


def test_snapshot_totals_match_memory_stats(history):
    a = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    b = torch.ones(100, device="neuron")
    c = torch.ones(7, device="neuron:1")
    snapshot = history._snapshot()
    for d in (0, 1):
        segs = [s for s in snapshot["segments"] if s["device"] == d]
        stats = torch.neuron.memory_stats(d)
        assert sum(s["total_size"] for s in segs) == stats["reserved_bytes.all.current"]
        assert sum(s["allocated_size"] for s in segs) == stats["allocated_bytes.all.current"]
        assert sum(s["requested_size"] for s in segs) == stats["requested_bytes.all.current"]
    summary = torch.neuron.memory_summary()
    assert "Allocated memory" in summary
    del a, b, c


def test_state_only_keeps_stacks_without_a_trace(history):
    history._record_memory_history(enabled="state", clear_history=True)
    keep = allocate_for_the_test()
    snapshot = history._snapshot()
    assert snapshot["device_traces"][0] == []
    block = next(b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == keep.data_ptr())
    assert "allocate_for_the_test" in frame_names(block["frames"])


def test_max_entries_keeps_the_latest_events(history):
    history._record_memory_history(max_entries=4, clear_history=True)
    for _ in range(10):
        torch.ones(10, device="neuron")
    trace = history._snapshot()["device_traces"][0]
    assert len(trace) == 4 and trace[-1]["action"] == "snapshot"


def test_skip_actions_and_stopping(history):
    history._record_memory_history(skip_actions=["free_requested", "snapshot"], clear_history=True)
    torch.ones(10, device="neuron")
    actions = {e["action"] for e in history._snapshot()["device_traces"][0]}
    assert "alloc" in actions and "free_requested" not in actions and "snapshot" not in actions
    history._record_memory_history(enabled=None)
    torch.ones(10, device="neuron")
    snapshot = history._snapshot()
    assert snapshot["device_traces"][0] == []
    assert all(b["frames"] == [] for s in snapshot["segments"] for b in s["blocks"])


@pytest.mark.parametrize("kwargs, error", [
    (dict(enabled="some"), ValueError),
    (dict(context="everything"), ValueError),
    (dict(stacks="cpp"), ValueError),
    (dict(max_entries=0), ValueError),
    (dict(skip_actions=["allocate"]), ValueError),
    (dict(compile_context=True), NotImplementedError),
])
def test_bad_arguments_are_clear_errors(kwargs, error):
    with pytest.raises(error, match="_record_memory_history"):
        torch.neuron.memory._record_memory_history(**kwargs)
