"""Timing helpers shared by the benchmark scripts (run them as scripts:
their folder is then on sys.path)."""

import os
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


def median_and_best(fn, sync, repeats: int, clock=time.perf_counter) -> tuple:
    """(median, best) seconds of `repeats` runs of fn() followed by sync(),
    after a warm-up run. With clock=time.process_time: CPU seconds of the
    whole process (every thread)."""
    output = fn()
    sync()
    times = []
    for _ in range(repeats):
        start = clock()
        output = fn()  # kept until sync(): see rotating_blocks
        sync()
        times.append(clock() - start)
    del output
    return statistics.median(times), min(times)


def interleaved(fn_dev, fn_cpu, repeats: int, clock=time.perf_counter, settle: float = 0.0) -> tuple:
    """(neuron median, neuron best, CPU median, CPU best) seconds of
    alternating timed runs of fn_dev() + synchronize and fn_cpu(), after one
    warm-up each: alternating spreads the machine's load over both sides.
    (PyTorch's OpenMP workers spin for a while after each CPU call, so a
    short neuron run can start with its cores taken: a 256^3 GEMM measured
    9-29 GF/s in some runs, 74-112 with OMP_WAIT_POLICY=PASSIVE. Pausing
    before each run instead made the CPU side erratic: 3-22 GF/s at 512^3.)
    clock=time.process_time measures CPU seconds of every thread instead:
    on a loaded machine, time spent waiting for a core does not count.)
    settle > 0 sleeps that many seconds (untimed) after each CPU run, so
    that a neuron run does not start while PyTorch's OpenMP worker still
    spins: on the 2-core Zen 4 it burns 4.5 ms of a core after every CPU
    call (OMP_WAIT_POLICY unset), through the whole of a 1 ms neuron op,
    whose kernel helper then never gets its core (docs/performance.md,
    "The two-thread wall loss of 1M-element pointwise ops"). Both sides then
    start with their helper threads asleep."""
    import torch

    fn_dev()
    torch.neuron.synchronize()
    fn_cpu()
    dev, cpu = [], []
    for _ in range(repeats):
        start = clock()
        output = fn_dev()  # kept until the synchronize: see rotating_blocks
        torch.neuron.synchronize()
        dev.append(clock() - start)
        del output
        start = clock()
        fn_cpu()
        cpu.append(clock() - start)
        if settle > 0:
            time.sleep(settle)
    return statistics.median(dev), min(dev), statistics.median(cpu), min(cpu)


def alternating_blocks(fn_dev, fn_cpu, samples: int, block: int = 4, settle: float = 0.05) -> tuple:
    """(neuron median, neuron best, CPU median, CPU best) seconds per run,
    from `samples` timed blocks per side, the sides alternating. A block is
    `block` back-to-back runs, timed as a whole: on neuron, the launches and
    one synchronize at the end, the way accelerator benchmarks time a device
    that runs asynchronously (torch.utils.benchmark does the same for CUDA);
    on CPU, the calls.

    Each side runs as a program using only it would: back to back. Each
    block starts with one untimed run (the first call after the other side
    wakes the threads that slept meanwhile), and a neuron block starts
    `settle` seconds after the CPU block: PyTorch's OpenMP workers keep
    spinning on both cores for a while after a CPU call, which no program
    running on neuron alone shares its cores with. Alternating the blocks
    spreads the load of other processes over both sides."""
    (dev_median, dev_best), (cpu_median, cpu_best) = rotating_blocks(
        [(fn_dev, True), (fn_cpu, False)], samples, block, settle)
    return dev_median, dev_best, cpu_median, cpu_best


def rotating_blocks(sides, samples: int, block: int = 4, settle: float = 0.05) -> list:
    """[(median, best) seconds per run] for each of `sides`, a list of (fn,
    on_neuron): blocks of each side in turn, `samples` rounds, timed as
    alternating_blocks describes (a neuron block starts `settle` seconds
    after the block before it). The host's memory bandwidth and other
    processes' load drift over seconds; taking turns gives each side the
    same share of it."""
    import torch

    def run(fn, on_neuron, n):
        # The outputs live until the synchronize: adaptive eager drops queued
        # work whose every output is freed (nothing could observe it), and a
        # block of discarded results would then time nothing.
        outputs = [fn() for _ in range(n)]
        if on_neuron:
            torch.neuron.synchronize()
        del outputs

    times = [[] for _ in sides]
    for _ in range(samples):
        for (fn, on_neuron), side_times in zip(sides, times):
            if on_neuron:
                time.sleep(settle)
            run(fn, on_neuron, 1)
            start = time.perf_counter()
            run(fn, on_neuron, block)
            side_times.append((time.perf_counter() - start) / block)
    return [(statistics.median(t), min(t)) for t in times]


def cpu_model() -> str:
    """The host's CPU model as /proc/cpuinfo names it (every figure quotes it)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def host_line() -> str:
    """One line naming the host, its load and both sides' thread counts."""
    import torch

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    usable_note = f" ({usable} usable by this process)" if usable != cores else ""
    return (f"host: {cpu_model()}, {cores} cores{usable_note}, load average {os.getloadavg()[0]:.1f} at the "
            f"start; torch {torch.__version__}, PyTorch CPU threads {torch.get_num_threads()}, neuron "
            f"kernel threads {os.environ.get('TORCHNEURON_NUM_THREADS', 'default (the usable cores)')}")
