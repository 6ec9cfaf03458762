"""Run PyTorch's own device-generic test files against neuron, and the same
tests on the CPU beside them, and report what fails on neuron alone.

    python -m torchneuron.tools.conformance --pytorch-tests ~/pytorch/test
    python -m torchneuron.tools.conformance --pytorch-tests DIR \\
        --files test_view_ops.py test_nn.py:TestNNDeviceType --json report.json

PyTorch's test files are not shipped with the wheel and are not ours to
commit: check out the PyTorch release that matches the installed torch
(docs/conformance.md says how). Each file runs twice in its own pytest
process: once with PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1 (the neuron
instantiation the backend's autoload makes possible) and once with =cpu.
A test is paired with its CPU twin by name (TestFooPRIVATEUSE1.test_x_neuron_float32
and TestFooCPU.test_x_cpu_float32), so a failure is counted as ours only when
the CPU passes the same test with this torch. Failures are grouped by cause
(torchneuron/tools/conformance_causes.py). A run that crashes resumes after
the test that crashed it; one that hangs past --timeout is stopped and the
running test named.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from torchneuron.tools.conformance_causes import cause_of, documented_exception

# The files the eager-conformance issue measured; test_nn only for its
# device-generic class.
DEFAULT_FILES = [
    "test_view_ops.py", "test_indexing.py", "test_shape_ops.py", "test_reductions.py",
    "test_binary_ufuncs.py", "test_unary_ufuncs.py", "test_sort_and_select.py",
    "test_tensor_creation_ops.py", "test_type_promotion.py", "test_nn.py:TestNNDeviceType",
]
SIDES = {"neuron": "privateuse1", "cpu": "cpu"}
PLUGIN = "torchneuron.tools.conformance_plugin"
MAX_RESUMES = 20


@dataclass
class SideRun:
    """One pytest process tree (with resumes) for one file and one device."""
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # nodeid -> (outcome, message)
    crashed: list[str] = field(default_factory=list)   # nodeids running when the process died
    hung: str | None = None                             # nodeid running at the timeout
    fallback_ops: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    error: str | None = None                            # the file did not run at all


def parse_spec(spec: str) -> tuple[str, str | None]:
    """"test_nn.py:TestNNDeviceType" -> ("test_nn.py", "TestNNDeviceType")."""
    name, _, keyword = spec.partition(":")
    return name, keyword or None


def read_log(path: Path, run: SideRun) -> str | None:
    """Fold a plugin log into run; return the node id started but not reported."""
    running = None
    if not path.exists():
        return None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line being written when the process died
        event = rec.get("event")
        if event == "start":
            running = rec["nodeid"]
        elif event == "report":
            prev = run.outcomes.get(rec["nodeid"])
            # A failing teardown after a passing call still fails the test.
            if prev is None or prev[0] in ("passed", "xfailed", "skipped"):
                run.outcomes[rec["nodeid"]] = (rec["outcome"], rec.get("message", ""))
            if rec["nodeid"] == running:
                running = None
        elif event == "finish":
            run.fallback_ops.update(rec.get("fallback_ops", {}))
            running = None
    return running


def run_side(test_dir: Path, spec: str, side: str, timeout: float, work: Path,
             extra_args: list[str]) -> SideRun:
    name, keyword = parse_spec(spec)
    run = SideRun()
    if not (test_dir / name).exists():
        run.error = f"{name} not found in {test_dir}"
        return run
    stem = f"{Path(name).stem}-{side}"
    log, skip = work / f"{stem}.jsonl", work / f"{stem}.skip"
    env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR=SIDES[side],
               TORCHNEURON_CONFORMANCE_LOG=str(log), TORCHNEURON_CONFORMANCE_SKIP=str(skip),
               # CPU classes for the tests a file runs on devices other than the CPU only
               TORCHNEURON_CONFORMANCE_CPU_TWINS="1" if side == "cpu" else "0")
    # No "-W ignore": upstream tests count the warnings an op gives
    # (catch_warnings(record=True)), and an ignore filter hides them.
    cmd = [sys.executable, "-m", "pytest", name, "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
           "--tb=line", *extra_args]
    if keyword:
        cmd += ["-k", keyword]
    start = time.monotonic()
    for _ in range(MAX_RESUMES + 1):
        remaining = timeout - (time.monotonic() - start)
        try:
            proc = subprocess.run(cmd, cwd=test_dir, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=max(remaining, 1))
        except subprocess.TimeoutExpired:
            run.hung = read_log(log, run) or "(between tests)"
            break
        running = read_log(log, run)
        log.unlink(missing_ok=True)
        if proc.returncode >= 0 and running is None:
            # pytest exit 5 is "nothing collected"; 2-4 are usage/collection errors.
            if proc.returncode in (2, 3, 4) and not run.outcomes:
                lines = proc.stdout.decode(errors="replace").strip().splitlines()
                # pytest's "E   ..." lines say why; else its last lines.
                why = [ln[1:].strip() for ln in lines if ln.startswith("E ")] or lines[-3:]
                run.error = " / ".join(why[:3]) or f"pytest exited {proc.returncode}"
            break
        # Killed by a signal (or died mid-test): resume after the test that was running.
        culprit = running or "(during collection)"
        run.crashed.append(culprit)
        if running is None:
            break
        run.outcomes[running] = ("crashed", f"process died (exit {proc.returncode})")
        with open(skip, "w", encoding="utf-8") as f:
            f.write("\n".join(run.outcomes) + "\n")
    run.seconds = time.monotonic() - start
    return run


# Upstream names an instantiated test {name}{params}_{device}{dtypes}: the
# device is the rightmost "_<device>" of the name, after any parameters.
# The neuron class is TestFooPRIVATEUSE1 for a file's first class only:
# instantiating it leaves upstream's PrivateUse1TestBase.device_type set to
# the backend's name, so the file's later classes come out as TestBarNEURON
# (test_view_ops.py's TestOldViewOps, test_indexing.py's NumpyTests).
_CLASS_DEVICE = re.compile(r"(PRIVATEUSE1|NEURON|CPU)$")
_TOKEN = {"PRIVATEUSE1": "_neuron", "NEURON": "_neuron", "CPU": "_cpu"}


def pair_key(nodeid: str) -> str:
    """The device-neutral name of a test, shared by its neuron and CPU twins."""
    path, _, rest = nodeid.partition("::")
    parts = rest.split("::")
    match = _CLASS_DEVICE.search(parts[0]) if len(parts) >= 2 else None
    if match:
        parts[0] = parts[0][:match.start()]
        token = _TOKEN[match.group(1)]
        name = parts[-1]
        at = name.rfind(token)
        if at >= 0 and (at + len(token) == len(name) or name[at + len(token)] in "_["):
            parts[-1] = name[:at] + "_DEVICE" + name[at + len(token):]
    return "::".join([path, *parts])


FAILED = ("failed", "error", "crashed", "xpassed")


@dataclass
class FileReport:
    spec: str
    counts: Counter = field(default_factory=Counter)
    causes: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)
    failed_on_cpu_too: list[dict] = field(default_factory=list)
    fallback_ops: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def compare(spec: str, neuron: SideRun, cpu: SideRun) -> FileReport:
    rep = FileReport(spec, fallback_ops=neuron.fallback_ops, seconds=neuron.seconds + cpu.seconds)
    for side, run in (("neuron", neuron), ("cpu", cpu)):
        if run.error:
            rep.notes.append(f"{side}: did not run: {run.error}")
        if run.hung:
            rep.notes.append(f"{side}: stopped at the timeout while running {run.hung}")
        for nodeid in run.crashed:
            rep.notes.append(f"{side}: the process died in {nodeid}")
    cpu_by_key = {pair_key(k): v for k, v in cpu.outcomes.items()}
    for nodeid, (outcome, message) in sorted(neuron.outcomes.items()):
        twin = cpu_by_key.get(pair_key(nodeid))
        if outcome not in FAILED:
            rep.counts[outcome] += 1
            continue
        if twin is not None and twin[0] in FAILED:
            rep.counts["failed on CPU too"] += 1
            # kept so that a record can say what failed on both (usually this
            # torch against an older or newer test file)
            rep.failed_on_cpu_too.append({"test": nodeid, "outcome": outcome, "message": message,
                                          "cpu": twin[0], "cpu_message": twin[1],
                                          "cause": cause_of(twin[0], twin[1])})
            continue
        reason = documented_exception(nodeid, message)
        if reason is not None:
            rep.counts["documented exception"] += 1
            continue
        cause = cause_of(outcome, message)
        rep.counts["failed (ours)" if twin is not None else "failed (no CPU twin)"] += 1
        rep.causes[cause] += 1
        rep.failures.append({"test": nodeid, "outcome": outcome, "cause": cause,
                             "message": message,
                             "cpu": twin[0] if twin is not None else None})
    return rep


COLUMNS = ["passed", "failed (ours)", "failed (no CPU twin)", "failed on CPU too",
           "documented exception", "skipped", "xfailed"]


def print_report(reports: list[FileReport], top: int, out=None) -> None:
    out = out or sys.stdout
    widths = [max(len(r.spec) for r in reports + [FileReport("file")])]
    head = ["file"] + COLUMNS + ["fallback ops", "s"]
    rows = []
    total = Counter()
    for r in reports:
        total.update(r.counts)
        rows.append([r.spec] + [str(r.counts[c]) for c in COLUMNS]
                    + [str(len(r.fallback_ops)), f"{r.seconds:.0f}"])
    rows.append(["total"] + [str(total[c]) for c in COLUMNS] + ["", ""])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(row, widths))),
              file=out)
    causes = Counter()
    for r in reports:
        causes.update(r.causes)
        for note in r.notes:
            print(f"note: {r.spec}: {note}", file=out)
    if causes:
        print(f"\nneuron-only failures by cause (top {top} of {len(causes)}):", file=out)
        for cause, n in causes.most_common(top):
            print(f"{n:7d}  {cause}", file=out)
    both = Counter(f["cause"] for r in reports for f in r.failed_on_cpu_too)
    if both:
        # usually the test file against this torch (or NumPy): not neuron's
        print(f"\nfailed on the CPU too, by the CPU's cause (top {top} of {len(both)}):", file=out)
        for cause, n in both.most_common(top):
            print(f"{n:7d}  {cause}", file=out)
    ops = Counter()
    for r in reports:
        ops.update(r.fallback_ops)
    if ops:
        print(f"\nops that ran through the CPU fallback ({len(ops)}):", file=out)
        print("  " + ", ".join(f"{op} ({n})" for op, n in ops.most_common()), file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pytorch-tests", required=True, type=Path,
                    help="the test/ directory of a PyTorch checkout matching the installed torch")
    ap.add_argument("--files", nargs="+", default=DEFAULT_FILES,
                    help="test files, each optionally FILE:KEYWORD (a pytest -k filter)")
    ap.add_argument("--jobs", type=int, default=2, help="pytest processes at once")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per file and device")
    ap.add_argument("--top", type=int, default=25, help="causes to list")
    ap.add_argument("--json", type=Path,
                    help="write every neuron-only failure, and those that fail on the CPU too, here")
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments, one string")
    args = ap.parse_args(argv)

    test_dir = args.pytorch_tests.expanduser().resolve()
    if not test_dir.is_dir():
        ap.error(f"--pytorch-tests: {test_dir} is not a directory")
    extra = args.pytest_args.split()
    with tempfile.TemporaryDirectory(prefix="neuron-conformance-") as tmp, \
            ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        work = Path(tmp)
        futures = {(spec, side): pool.submit(run_side, test_dir, spec, side, args.timeout, work, extra)
                   for spec in args.files for side in SIDES}
        reports = [compare(spec, futures[spec, "neuron"].result(), futures[spec, "cpu"].result())
                   for spec in args.files]
    print_report(reports, args.top)
    if args.json:
        args.json.write_text(json.dumps([
            {"file": r.spec, "counts": dict(r.counts), "causes": dict(r.causes),
             "fallback_ops": dict(r.fallback_ops), "notes": r.notes, "failures": r.failures,
             "failed_on_cpu_too": r.failed_on_cpu_too, "seconds": round(r.seconds, 1)} for r in reports], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
