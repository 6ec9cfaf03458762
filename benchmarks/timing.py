"""Timing helpers shared by the benchmark scripts (run them as scripts:
their folder is then on sys.path)."""

import statistics
import time


def median_time(fn, repeats: int, warmup: bool = True, clock=time.perf_counter) -> float:
    """Median seconds of fn() over `repeats` calls (after one warm-up call)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)
