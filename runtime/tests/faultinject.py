#!/usr/bin/env python3
"""Out-of-memory sweep over the runtime's C tests, in the manner of SQLite.

Needs a build configured with -DNRT_SANITIZE=address -DNRT_FAULT_INJECTION=ON
(`make faultinject`). For each test it first runs the test unharmed, with
NRT_FAULT_AT=0, which counts the runtime's host and device allocations (the
count K is printed at exit, see runtime/fault/fault_injection.c). Then it
runs the test again with NRT_FAULT_AT=N, failing the Nth allocation, for
every N from 1 to DENSE and, past that, for about SPARSE values of N spread
evenly up to K, and finally N = K + 1. Each run must end in one of:

  exit 0   the failure was absorbed (a fallback, a retry, an unused path);
  exit 1   a clean test failure: the test's first failed check (the run
           sets CHECK_EXIT_ON_FAILURE=1, so check.h exits there) is a call
           that returned an error status (CHECK_STATUS prints "returned
           NRT_ERROR_..."), or the fault hit a child process the test
           spawned, which reports to its parent by exit code.

Anything else is a bug and fails the sweep: a sanitizer report (ASan,
LSan, UBSan; their exit code is set to 86 and stderr is scanned), a signal,
a timeout (a hang), another exit code, or a failed check with no error
status anywhere (an error that was swallowed and produced a wrong result).

What it covers: every test_* binary except the four whose single run takes
one to three minutes under ASan on two cores (HEAVY: GEMM, convolution,
vision and reduction, whose oracles are long loops); name them to sweep
them too. That leaves the device layer, memory, the caching allocator,
streams and events, the NC simulator and the pointwise, shape, index,
random, nn, attention, optimizer and AMP kernels; the heavy tests' kernels
allocate their scratch in the same way (allocate, check, return the
status) as the swept ones. A test is swept at every N up to DENSE, then
at SPARSE values of N spread evenly up to its count K, then at K + 1 (where
nothing fails any more), unless that would take longer than its share of
--budget seconds (the same share for every test, judged from its unharmed
run): then the values are thinned evenly to fit, and the summary says so.
The default budget keeps the sweep near 4 minutes on two idle cores.

Usage: faultinject.py BUILD_DIR [--jobs J] [--budget SECONDS] [--dense D]
                       [--sparse S] [--strict] [test ...]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import time

HEAVY = {"test_conv", "test_gemm", "test_reduce", "test_vision"}
SANITIZER_EXIT = 86
SANITIZER_TEXT = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|UndefinedBehaviorSanitizer")
STATUS_TEXT = re.compile(r"returned NRT_ERROR_\w+")
# A failed check with no error status after an injected fault: either an
# error was swallowed (a bug) or the runtime absorbed the fault in a way the
# test can see (a retry counted in the allocator's statistics, a segment
# released and its address reused). Listed for a reader; --strict fails them.
WARNING = "a check failed but no call returned an error status"
# Found anywhere in the output, not only at the start of a line: the test's
# stdout goes to the pipe in blocks, which may cut a line where stderr's
# message lands (a run on CI lost its "failing allocation" line that way).
FIRED = re.compile(r"nrt-fault: pid=(\d+) failing allocation \d+")
REPORT = re.compile(r"nrt-fault: pid=(\d+) allocations=(\d+) injected=([01])")


def run(binary, n, timeout):
    """Runs binary with the Nth allocation failing; returns (exit code or
    None after a timeout, the test's pid, its output)."""
    env = dict(os.environ)
    env["NRT_FAULT_AT"] = str(n)
    env["CHECK_EXIT_ON_FAILURE"] = "1"  # check.h: the first failure is the verdict
    env["ASAN_OPTIONS"] = f"detect_leaks=1:exitcode={SANITIZER_EXIT}:abort_on_error=0"
    env["UBSAN_OPTIONS"] = f"exitcode={SANITIZER_EXIT}:print_stacktrace=1"
    with subprocess.Popen([binary], env=env, cwd=os.path.dirname(binary),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as p:
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            rc = None
    return rc, p.pid, out.decode(errors="replace")


def timed_run(binary, n, timeout):
    t0 = time.monotonic()
    result = run(binary, n, timeout)
    return time.monotonic() - t0, result


def verdict(rc, pid, out):
    """None if the run ended cleanly, else what went wrong."""
    if SANITIZER_TEXT.search(out) or rc == SANITIZER_EXIT:
        return "sanitizer report"
    if rc is None:
        return "timeout (hang)"
    if rc < 0:
        return f"killed by signal {-rc}"
    if rc == 0:
        return None
    if rc != 1:
        return f"exit code {rc}"
    fired = [int(p) for p in FIRED.findall(out)]
    if not fired:
        return "a check failed, and no fault was injected"
    child_injected = any(p != pid for p in fired)
    if STATUS_TEXT.search(out) or child_injected:
        return None
    return WARNING


def schedule(k, dense, sparse):
    """The values of N to try for a test that makes k allocations."""
    ns = list(range(1, min(k, dense) + 1))
    if k > dense:
        step = max(1, (k - dense) // sparse)
        ns += list(range(dense + step, k + 1, step))
    return ns + [k + 1]


def thin(ns, keep):
    """keep values of ns, evenly spread, always with the first and last."""
    if keep >= len(ns):
        return ns
    keep = max(keep, 2)
    return sorted({ns[round(i * (len(ns) - 1) / (keep - 1))] for i in range(keep)})


def fit(ns, k, seconds, share):
    """ns thinned until their estimated cost fits in share seconds. A run
    failing at N stops there (CHECK_EXIT_ON_FAILURE), so it costs about
    N / k of the unharmed run, plus the start of a process."""
    def cost(values):
        return sum(0.05 + seconds * min(1.0, n / k) for n in values)
    lo, hi = 2, len(ns)
    while lo < hi:  # the most values that fit
        mid = (lo + hi + 1) // 2
        if cost(thin(ns, mid)) <= share:
            lo = mid
        else:
            hi = mid - 1
    return thin(ns, lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("tests", nargs="*", help="test names (default: all test_* binaries)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds of sweep (after the unharmed runs) to aim for")
    ap.add_argument("--dense", type=int, default=250)
    ap.add_argument("--sparse", type=int, default=100)
    ap.add_argument("--strict", action="store_true",
                    help="fail the sweep on a failed check with no error status too")
    args = ap.parse_intermixed_args()

    test_dir = os.path.join(args.build_dir, "runtime")
    names = args.tests or sorted(f for f in os.listdir(test_dir)
                                 if f.startswith("test_") and f not in HEAVY
                                 and os.access(os.path.join(test_dir, f), os.X_OK))
    log_dir = os.path.join(args.build_dir, "faultinject")
    os.makedirs(log_dir, exist_ok=True)
    for stale in os.listdir(log_dir):
        os.remove(os.path.join(log_dir, stale))
    start = time.monotonic()
    failures = []

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        binaries = {name: os.path.abspath(os.path.join(test_dir, name)) for name in names}
        baselines = {name: pool.submit(timed_run, b, 0, 600) for name, b in binaries.items()}
        plans = {}
        unharmed = {}
        for name, fut in baselines.items():
            seconds, (rc, _, out) = fut.result()
            reports = REPORT.findall(out)
            if rc == 0 and not reports and "nrt-fault" not in out:
                # The counter is linked in with the first allocation the
                # runtime makes; a test that makes none has nothing to fail.
                print(f"{name}: makes no runtime allocation; nothing to sweep", flush=True)
                continue
            if rc != 0 or not reports:
                print(f"{name}: does not pass without faults (exit {rc}); not swept", flush=True)
                failures.append((name, 0, "fails without faults"))
                continue
            k = max(int(a) for _, a, _ in reports)
            # Generous: a run that fails early is shorter, one that hangs is
            # what the timeout is for.
            timeout = max(30.0, 10 * seconds)
            share = args.budget * args.jobs / len(names)
            ns = fit(schedule(k, args.dense, args.sparse), k, seconds, share)
            plans[name] = (k, ns, timeout)
            unharmed[name] = seconds

        futures = {}
        for name, (k, ns, timeout) in plans.items():
            for n in ns:
                futures[pool.submit(timed_run, binaries[name], n, timeout)] = (name, n)
        results = {name: {"clean_pass": 0, "clean_fail": 0, "warned": 0, "bad": 0, "seconds": 0.0}
                   for name in plans}
        for fut in concurrent.futures.as_completed(futures):
            name, n = futures[fut]
            seconds, (rc, pid, out) = fut.result()
            results[name]["seconds"] += seconds
            why = verdict(rc, pid, out)
            r = results[name]
            if why is None:
                r["clean_pass" if rc == 0 else "clean_fail"] += 1
                continue
            log = os.path.join(log_dir, f"{name}.{n}.log")
            with open(log, "w") as f:
                f.write(out)
            if why == WARNING and not args.strict:
                r["warned"] += 1
                print(f"warning {name} NRT_FAULT_AT={n}: {why} (log: {log})", flush=True)
                continue
            r["bad"] += 1
            failures.append((name, n, why))
            print(f"FAIL {name} NRT_FAULT_AT={n}: {why} (log: {log})", flush=True)

    for name, (k, ns, _) in plans.items():
        r = results[name]
        every = "every N" if ns == list(range(1, k + 2)) else f"{len(ns)} values of N"
        # The seconds say where the sweep's time went (wall time of the runs,
        # which overlap --jobs at a time): the unharmed run, then the sweep.
        print(f"{name}: {k} allocations, {every}: {r['clean_pass']} passed, "
              f"{r['clean_fail']} failed cleanly, {r['warned']} warnings, {r['bad']} bad "
              f"({unharmed[name]:.1f} s unharmed, {r['seconds']:.1f} s swept)")
    print(f"fault injection: {len(failures)} bad run(s) in {time.monotonic() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
