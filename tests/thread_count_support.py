"""Runs a script under several kernel thread counts (TORCHNEURON_NUM_THREADS)
and collects what it prints: tests of results that must not depend on the
thread count assert that every run printed the same digest.

The script runs once in this process, on its kernel threads (the default
count: one per core, 2 on the CI hosts), and once in a child process per
other count (1: no splitting at all; 3: an odd split, more threads than
cores), with fallbacks refused in both places."""

import contextlib
import io
import os
import subprocess
import sys

import torchneuron


def _output_here(script: str) -> str:
    printed = io.StringIO()
    torchneuron.clear_op_tracking()
    with contextlib.redirect_stdout(printed):
        exec(compile(script, "<thread-count script>", "exec"), {"__name__": "__main__"})
    fallbacks = torchneuron.get_fallback_ops()
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"
    return printed.getvalue().strip()


def outputs_by_thread_count(script: str, counts=("1", "3")) -> set:
    outputs = {_output_here(script)}
    for threads in counts:
        env = dict(os.environ, TORCHNEURON_NUM_THREADS=threads, TORCHNEURON_FALLBACK="error")
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout.strip())
    return outputs
