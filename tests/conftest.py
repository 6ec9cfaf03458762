"""Shared helpers for the neuron test suite.

- ``run_python`` / ``run_python_many``: fresh interpreters (for environment
  variables read once at start-up, forks and crashes), in parallel when
  there are several, since ``import torch`` costs about 1.5 s each.
- ``no_fallback``: asserts that the ops run inside it had native kernels;
  the ``native_only`` fixture wraps a whole test in it (seeded), for files
  that mark every test with ``pytestmark = pytest.mark.usefixtures("native_only")``.
- ``gates``: closes and reliably reopens stream gates, the test hook that
  holds a stream's queue so that tests can observe queued, unfinished work.
- An autouse fixture puts the current device, streams and fallback mode back
  after every test, so that a failing test does not leak state.
- Dynamo's guard-latency profiling (a metric only) is turned off.
"""

import atexit
import concurrent.futures
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading

import pytest
import torch

import torchneuron
from torchneuron import _C

# Dynamo times every new guard set once for its compile metrics
# (guard_latency_us), after evicting the caches with a large buffer write:
# 25-30 ms of CPU per compile on this suite's hosts (40% of a small graph's
# compile), and several thousand compiles run here. Nothing here reads that
# metric; the guards are still built and checked (Dynamo's own check that
# they pass on the frame they came from runs before it).
import torch._dynamo.guards as _dynamo_guards  # noqa: E402

if hasattr(_dynamo_guards, "profile_guard_manager"):
    _dynamo_guards.profile_guard_manager = lambda root, scope, n_iters: 0.0

# Every dtype the neuron device supports, in the runtime's order.
DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]

_OWN_ENV_PREFIXES = ("NEURON_", "TORCHNEURON_", "TORCH_DEVICE_BACKEND_AUTOLOAD")

# The suite's compile plans and generated kernels go to a private directory
# of this process (removed at exit), not to the user's ~/.cache/torchneuron;
# child interpreters share it. A test of the cache sets its own.
if "TORCHNEURON_CACHE_DIR" not in os.environ:
    os.environ["TORCHNEURON_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchneuron-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TORCHNEURON_CACHE_DIR"], ignore_errors=True)
_SHARED_ENV = ("TORCHNEURON_CACHE_DIR",)


def dtype_id(dtype):
    return str(dtype).removeprefix("torch.")


def _child_env(env):
    """The parent's environment without our own settings, plus env."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_ENV_PREFIXES) or k in _SHARED_ENV}
    clean.update(env or {})
    return clean


def run_python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter (this venv's) with env added to a
    clean environment; returns the CompletedProcess (text output)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_python_many(jobs, timeout=120):
    """Runs {key: (code, env)} concurrently; returns {key: CompletedProcess}."""
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(run_python, code, env, timeout) for key, (code, env) in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


def check_output(result):
    """stdout of a child that must have exited 0 (its stderr in the failure)."""
    assert result.returncode == 0, f"child exited {result.returncode}:\n{result.stderr}"
    return result.stdout


def assert_same(actual, expected):
    """Same dtype, shape and values (NaN equals NaN, -0.0 differs from 0.0)."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    if expected.dtype.is_floating_point:
        # The sign of a NaN is not specified (CPU's scalar and vector paths differ).
        numbers = ~torch.isnan(expected)
        assert torch.equal(torch.signbit(actual[numbers]), torch.signbit(expected[numbers])), \
            "signs of zero differ"


@contextlib.contextmanager
def no_fallback():
    """Asserts that every op run inside the block had a native neuron kernel."""
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}, "ops fell back to the CPU"


@pytest.fixture
def native_only():
    """A seeded test whose every op must have run natively."""
    torch.manual_seed(0)
    with no_fallback():
        yield


@pytest.fixture
def op_tracking():
    """Starts the test with empty op tracking."""
    torchneuron.clear_op_tracking()
    yield
    torchneuron.clear_op_tracking()


class Gates:
    """Closes stream gates and opens each exactly once (a gate frees itself
    when the stream passes it, so it must never be opened twice); whatever
    the test left closed is opened at teardown so that nothing deadlocks."""

    def __init__(self):
        self._closed = []

    def close(self, stream=None):
        """Holds the stream (default: the current one) at this point of its queue."""
        stream = stream if stream is not None else torch.accelerator.current_stream()
        handle = _C._close_stream_gate(stream.device_index, stream.stream_id)
        self._closed.append(handle)
        return handle

    def open(self, handle):
        self._closed.remove(handle)
        _C._open_stream_gate(handle)

    def open_later(self, handle, seconds):
        """Opens the gate from another thread after a delay (for calls that
        block); the returned threading.Event is set just before it opens."""
        self._closed.remove(handle)
        opening = threading.Event()

        def open_gate():
            opening.set()
            _C._open_stream_gate(handle)

        threading.Timer(seconds, open_gate).start()
        return opening

    def open_all(self):
        while self._closed:
            _C._open_stream_gate(self._closed.pop())


@pytest.fixture
def gates():
    g = Gates()
    try:
        yield g
    finally:
        g.open_all()
        for d in range(torch.neuron.device_count()):
            torch.neuron.synchronize(d)


def requires_devices(n):
    return pytest.mark.skipif(
        torch.neuron.device_count() < n, reason=f"needs {n} neuron devices"
    )


@pytest.fixture(autouse=True)
def restore_device_state():
    """Every test starts and ends on neuron:0 with default streams."""
    mode = torchneuron.get_fallback_mode()
    yield
    torchneuron.set_fallback_mode(mode)
    for d in range(torch.neuron.device_count()):
        # A test that provoked an asynchronous error leaves its streams in
        # the error state (sticky until cleared): the next test starts clean.
        torch.neuron.clear_error(d)
        torch.accelerator.set_stream(torch.neuron.default_stream(d))
    torch.neuron.set_device(0)


def pytest_configure(config):
    # The fallback warns once per op; the tests that check the warning use
    # pytest.warns, which sees it regardless of this filter.
    config.addinivalue_line(
        "filterwarnings", "ignore:The operator .* has no native neuron kernel:UserWarning"
    )


# ---- ISA paths: which kernel variants a run exercised -----------------------
# The kernels carry baseline, AVX2 and AVX-512 variants (TORCHNEURON_ISA picks
# one, by default the host's best). The whole suite runs at one level;
# tests/test_isa_levels.py re-runs a sample at each lower level the host has
# and records it here, so that the report says which paths a green run
# covered and which this host could not run.

ISA_ALL_LEVELS = ("avx512", "avx2", "baseline")
ISA_SAMPLED = {}  # level -> checks that passed there (test_isa_levels.py)


def _host_has_avx512_bf16():
    """The avx512 level's bfloat16 pair products (GEMM, conv) run where the
    CPU has AVX512_BF16 (the runtime asks the CPU the same question)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512_bf16" in line for line in f)
    except OSError:
        return False


def _isa_state():
    """(active, supported, how) of this process, or None with the error."""
    try:
        levels = torch.neuron.isa_levels()
    except RuntimeError as error:
        return None, str(error)
    how = "forced by TORCHNEURON_ISA" if os.environ.get("TORCHNEURON_ISA") else "default"
    return (levels["active"], levels["supported"], how), None


def pytest_report_header(config):
    state, error = _isa_state()
    if state is None:
        return f"neuron ISA paths: unknown ({error})"
    active, supported, how = state
    lower = [level for level in supported if level != active]
    missing = [level for level in ISA_ALL_LEVELS if level not in supported]
    line = f"neuron ISA paths: host supports {','.join(supported)}; this run: {active} ({how})"
    if lower:
        line += f", then {','.join(lower)} (a sample, tests/test_isa_levels.py)"
    if missing:
        line += f"; not on this host: {','.join(missing)}"
    return line


def pytest_terminal_summary(terminalreporter):
    state, error = _isa_state()
    if state is None:
        terminalreporter.write_line(f"neuron ISA paths exercised: unknown ({error})")
        return
    active, supported, how = state
    bf16 = active == "avx512" and _host_has_avx512_bf16()
    ran = [f"{active}{' with avx512_bf16' if bf16 else ''} (every test, {how})"]
    ran += [f"{level} ({count} sampled checks)" for level, count in ISA_SAMPLED.items()]
    missing = [level for level in ISA_ALL_LEVELS if level != active and level not in ISA_SAMPLED]
    if not bf16:
        missing.append("avx512_bf16")
    line = "neuron ISA paths exercised: " + ", ".join(ran)
    if missing:
        line += "; not exercised: " + ",".join(missing)
    terminalreporter.write_line(line)
