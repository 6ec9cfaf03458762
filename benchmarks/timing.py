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


def median_and_best(fn, sync, repeats: int) -> tuple:
    """(median, best) seconds of `repeats` runs of fn() followed by sync(),
    after a warm-up run."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)
