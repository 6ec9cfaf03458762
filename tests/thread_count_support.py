"""Runs a script under several kernel thread counts (TORCHNEURON_NUM_THREADS)
and collects what it prints: tests of results that must not depend on the
thread count assert that every run printed the same digest."""

import os
import subprocess
import sys


def outputs_by_thread_count(script: str, counts=("1", "2", "3")) -> set:
    outputs = set()
    for threads in counts:
        env = dict(os.environ, TORCHNEURON_NUM_THREADS=threads, TORCHNEURON_FALLBACK="error")
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout.strip())
    return outputs
