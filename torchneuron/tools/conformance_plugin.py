"""pytest plugin for torchneuron.tools.conformance: one JSON line per test,
written as each test starts and ends, so a run that crashes or hangs still
tells which tests finished and which one was running.

Loaded with ``-p torchneuron.tools.conformance_plugin``; it does nothing
unless TORCHNEURON_CONFORMANCE_LOG names the file to append to.
TORCHNEURON_CONFORMANCE_SKIP may name a file of node ids (one a line) to
deselect: the runner's way to resume a file after a crash.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

_LOG = os.environ.get("TORCHNEURON_CONFORMANCE_LOG")
_SKIP = os.environ.get("TORCHNEURON_CONFORMANCE_SKIP")
_CPU_TWINS = os.environ.get("TORCHNEURON_CONFORMANCE_CPU_TWINS") == "1"


def _instantiate_cpu_twins() -> None:
    """Let a class the file instantiates with except_for="cpu" have its CPU
    class too (test_binary_ufuncs.py's TestBinaryUfuncsDevice): without it a
    neuron failure there has no CPU result to compare with. The CPU side of
    the runner sets TORCHNEURON_CONFORMANCE_CPU_TWINS; the tests run as
    written, their own `device_type == "cpu"` branches included."""
    from torch.testing._internal import common_device_type as cdt

    filter_types = cdt.filter_desired_device_types

    def keep_cpu(bases, except_for=None, only_for=None):
        if except_for is not None:
            names = [except_for] if isinstance(except_for, str) else list(except_for)
            except_for = [name for name in names if name != "cpu"] or None
        return filter_types(bases, except_for, only_for)

    cdt.filter_desired_device_types = keep_cpu


if _CPU_TWINS:
    _instantiate_cpu_twins()


def _write(record: dict) -> None:
    # Opened per record: a crash loses at most the line being written.
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _message(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(longrepr).strip().splitlines()[-1] if str(longrepr).strip() else ""


def pytest_collection_modifyitems(config, items):
    if not _SKIP or not os.path.exists(_SKIP):
        return
    with open(_SKIP, encoding="utf-8") as f:
        skip = {line.strip() for line in f if line.strip()}
    kept = [item for item in items if item.nodeid not in skip]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in skip])
    items[:] = kept


def pytest_runtest_logstart(nodeid, location):
    if _LOG:
        _write({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    if not _LOG:
        return
    # One outcome per test: the call, or the setup/teardown that failed or skipped.
    if report.when != "call" and report.outcome == "passed":
        return
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "xpassed" if report.outcome == "passed" else "xfailed"
    _write({"event": "report", "nodeid": report.nodeid, "when": report.when,
            "outcome": outcome, "message": _message(report)[:2000]})


def _take_device_error() -> str | None:
    """The asynchronous error left on the neuron device, cleared; None if none."""
    torch = sys.modules.get("torch")
    neuron = getattr(torch, "neuron", None) if torch is not None else None
    if neuron is None or not hasattr(neuron, "clear_error"):
        return None
    try:
        neuron.synchronize()
    except Exception as exc:  # the sticky error of a kernel this test queued
        neuron.clear_error()
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    return None


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the test
def pytest_runtest_teardown(item, nextitem):
    # neuron reports an index out of range asynchronously, as CUDA does, and
    # the error stays on the stream: every later test would fail with it.
    # The test that queued the kernel fails in its teardown instead, and the
    # error is cleared for the next test.
    if not _LOG:
        return
    error = _take_device_error()
    if error is not None:
        raise RuntimeError(f"asynchronous device error left by the test: {error}")


def pytest_sessionfinish(session, exitstatus):
    if not _LOG:
        return
    fallback_ops: dict[str, int] = {}
    try:
        import torchneuron

        fallback_ops = dict(torchneuron.get_fallback_ops())
    except Exception:  # the CPU side may run without the backend
        pass
    _write({"event": "finish", "exitstatus": int(exitstatus), "fallback_ops": fallback_ops})
