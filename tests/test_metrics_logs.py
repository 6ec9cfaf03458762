"""torchneuron.metrics' counters of ops, copies, the allocator and
synchronisations; report() and TORCHNEURON_METRICS_FILE; the op log
(TORCHNEURON_LOG_OPS) and the runtime's log level (TORCHNEURON_LOG_LEVEL).

The log and the metrics file are read at start-up or written at exit, so
those tests run a fresh interpreter (one, for all of them: it costs the
import of torch); the counters are checked in this process."""

import csv

import pytest
import torch

import torchneuron
from conftest import check_output, run_python
from torchneuron import _C, metrics

NEW_COUNTERS = [
    "ops.native", "ops.fallback", "ops.fused",
    "runtime.kernels_launched", "runtime.host_tasks_launched",
    "copy.host_to_device.bytes", "copy.host_to_device.copies",
    "copy.device_to_host.bytes", "copy.device_to_host.copies",
    "copy.device_to_device.bytes", "copy.device_to_device.copies",
    "allocator.retries", "allocator.ooms",
    "sync.stream", "sync.device", "sync.event",
]

FALLBACK_OP = "tn_metrics_test::twice"
_lib = torch.library.Library("tn_metrics_test", "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.impl("twice", lambda x: x * 2, "CPU")


def counters():
    return {name: metrics.get_counter_value(name) for name in metrics.get_counter_names()}


@pytest.fixture
def cleared():
    metrics.clear_all()
    yield
    metrics.clear_all()


def test_every_new_counter_is_listed_and_in_the_report(cleared):
    names = metrics.get_counter_names()
    table = metrics.report()
    for name in NEW_COUNTERS:
        assert name in names
        assert name in table
    assert all(value == 0 for name, value in counters().items() if name in NEW_COUNTERS)


def test_copies_count_bytes_by_direction(cleared):
    host = torch.arange(256, dtype=torch.float32)
    device = host.to("neuron")                     # 1 KiB in
    back = device.cpu()                            # 1 KiB out
    other = device.to("neuron:1")                  # 1 KiB between devices
    torch.testing.assert_close(back, host)
    torch.neuron.synchronize(1)
    c = counters()
    assert c["copy.host_to_device.copies"] == 1 and c["copy.host_to_device.bytes"] == 1024, c
    assert c["copy.device_to_host.copies"] == 1 and c["copy.device_to_host.bytes"] == 1024, c
    assert c["copy.device_to_device.bytes"] == 1024, c
    del other


def test_ops_count_native_fallback_and_launches(cleared):
    a = torch.ones(64, device="neuron")
    b = a + a
    torch.ops.tn_metrics_test.twice(b)
    c = counters()
    assert c["ops.native"] >= 2, c                 # ones (fill) and add, at least
    assert c["ops.fallback"] == 1, c
    assert c["runtime.kernels_launched"] >= 2, c
    torchneuron.clear_op_tracking()                # op tracking's clear leaves the totals
    assert metrics.get_counter_value("ops.fallback") == 1


def test_fused_ops_are_counted(cleared, gates):
    x = torch.rand(1 << 15, device="neuron")
    torch.neuron.synchronize()
    metrics.clear_all()
    handle = gates.close()
    y = ((x + 1) * 2).relu()
    gates.open(handle)
    torch.neuron.synchronize()
    c = counters()
    assert c["ops.fused"] == 3 and c["adaptive_eager.fused_ops"] == 3, c
    assert c["runtime.kernels_launched"] >= 3, c  # a fused group counts as its kernels
    del y


def test_synchronisations_are_counted(cleared):
    torch.neuron.synchronize()
    torch.neuron.current_stream().synchronize()
    event = torch.neuron.Event()
    event.record()
    event.synchronize()
    c = counters()
    assert c["sync.device"] == 1 and c["sync.stream"] == 1 and c["sync.event"] == 1, c


def test_out_of_memory_counts_a_retry_and_an_oom(cleared, capfd):
    total = torch.neuron.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total + (1 << 30), dtype=torch.uint8, device="neuron")
    c = counters()
    assert c["allocator.ooms"] == 1 and c["allocator.retries"] == 1, c
    # The runtime also said so at the default level, "warning".
    assert "torchneuron warning: neuron device 0 out of memory" in capfd.readouterr().err


def test_clear_all_zeroes_the_new_counters():
    torch.ones(8).to("neuron").cpu()
    metrics.clear_all()
    assert all(metrics.get_counter_value(name) == 0 for name in NEW_COUNTERS)


def test_write_csv_writes_every_counter(cleared, tmp_path):
    torch.ones(8).to("neuron")
    path = tmp_path / "metrics.csv"
    metrics.write_csv(path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["counter", "value"]
    written = {name: int(value) for name, value in rows[1:]}
    assert set(written) == set(metrics.get_counter_names())
    assert written["copy.host_to_device.bytes"] == 32


# ---- the log level --------------------------------------------------------------


@pytest.fixture
def log_level():
    before = torchneuron.get_log_level()
    yield
    torchneuron.set_log_level(before)


def test_log_level_filters_the_runtimes_messages(log_level, capfd):
    total = torch.neuron.get_device_properties(0).total_memory
    torchneuron.set_log_level("error")
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total + (1 << 30), dtype=torch.uint8, device="neuron")
    assert "out of memory" not in capfd.readouterr().err
    torchneuron.set_log_level("INFO")
    assert torchneuron.get_log_level() == "info"
    torch.empty(1 << 20, device="neuron")          # a segment that empty_cache gives back
    torch.neuron.empty_cache()
    err = capfd.readouterr().err
    assert "torchneuron info: neuron:0 empty_cache gave back" in err, err


def test_bad_log_level_is_a_clear_error(log_level):
    with pytest.raises(ValueError, match="'loud' is not a log level: expected error, warning, info or debug"):
        torchneuron.set_log_level("loud")
    with pytest.raises(TypeError):
        torchneuron.set_log_level(3)


# ---- a fresh interpreter: the op log, debug messages, the metrics file ----------

CHILD = """
import torch, torchneuron
from torchneuron import _C

lib = torch.library.Library("tn_log_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CPU")
lib.impl("twice", lambda x: x * 2, "Meta")

a = torch.ones(4, 8, device="neuron")
b = (a + a).to(torch.float16)
torch.ops.tn_log_test.twice(a)
torch.nn.functional.linear(a, torch.ones(3, 8, device="neuron"))
x = torch.rand(1 << 15, device="neuron")
torch.neuron.synchronize()
gate = _C._close_stream_gate(0, 0)
y = ((x + 1) * 2).relu()
_C._open_stream_gate(gate)
torch.neuron.synchronize()
f = torch.compile(lambda t: (t * 3).sin() + 1, backend="neuron")
f(a)
# A node with no lowering runs eagerly inside the compiled graph.
g = torch.compile(lambda t: torch.ops.tn_log_test.twice(t * 3) + 1, backend="neuron")
g(a)
print("done")
"""


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    path = tmp_path_factory.mktemp("metrics") / "metrics.csv"
    result = run_python(CHILD, env={"TORCHNEURON_LOG_OPS": "1", "TORCHNEURON_LOG_LEVEL": "debug",
                                    "TORCHNEURON_METRICS_FILE": str(path),
                                    "TORCHNEURON_FALLBACK": "silent"})
    assert check_output(result).strip().endswith("done")
    return result.stderr, path


def op_lines(stderr):
    return [line.removeprefix("torchneuron op: ") for line in stderr.splitlines()
            if line.startswith("torchneuron op: ")]


def test_op_log_names_each_op_with_its_tensors_and_path(child):
    lines = op_lines(child[0])
    assert "aten::add.Tensor native (float32[4, 8], float32[4, 8], 1)" in lines, lines
    assert "aten::empty.memory_format native ([4, 8], 6, None, neuron, False, None)" in lines, lines
    assert "aten::copy_ native (float16[4, 8], float32[4, 8], False)" in lines, lines
    assert "tn_log_test::twice fallback (float32[4, 8])" in lines, lines
    assert any(line.startswith("aten::linear composite (float32[4, 8], float32[3, 8], None)")
               for line in lines), lines
    # CPU-only work (the fallback's own CPU kernel) is not logged.
    assert not any(line.startswith("aten::mul.Tensor native (float32[4, 8]@cpu") for line in lines), lines


def test_op_log_shows_fused_groups_and_compiled_programs(child):
    lines = op_lines(child[0])
    assert "fused group of 3 ops on neuron:0 stream 0: add mul relu" in lines, lines
    assert any(line.startswith("compiled program of ") and " on neuron:0 stream 0" in line
               for line in lines), lines
    # The eager node of the second graph, and the copies its fallback makes,
    # say where they ran; the first graph's program and eager ops do not.
    tagged = [line for line in lines if " in compiled graph " in line]
    assert tagged and all(line.endswith("(node twice)") for line in tagged), lines
    assert any(line.startswith("tn_log_test::twice fallback (float32[4, 8]) in compiled graph ")
               for line in tagged), lines
    assert not any(line.startswith(("compiled program", "aten::add.Tensor")) for line in tagged), lines


def test_debug_level_shows_the_runtimes_messages(child):
    err = child[0]
    assert "torchneuron info: 4 simulated trn2 devices" in err, err
    assert "torchneuron debug: neuron:0 new small segment of" in err, err


def test_metrics_file_is_written_at_exit(child):
    with open(child[1], newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["counter", "value"]
    written = {name: int(value) for name, value in rows[1:]}
    assert written["ops.fallback"] == 2, written
    assert written["ops.fused"] >= 3, written
    assert written["compile.graphs"] == 2, written
    assert written["ops.native"] > 0 and written["runtime.kernels_launched"] > 0


def test_malformed_log_level_names_the_variable():
    result = run_python("import torch; torch.ones(1, device='neuron')",
                        env={"TORCHNEURON_LOG_LEVEL": "chatty"})
    assert result.returncode != 0
    assert "TORCHNEURON_LOG_LEVEL='chatty' is not a log level" in result.stderr


def test_unwritable_metrics_file_is_reported_not_raised(tmp_path):
    result = run_python("import torch, torchneuron; print('ok')",
                        env={"TORCHNEURON_METRICS_FILE": str(tmp_path / "missing" / "m.csv")})
    assert check_output(result).strip() == "ok"
    assert "could not write TORCHNEURON_METRICS_FILE" in result.stderr
