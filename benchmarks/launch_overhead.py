"""Host CPU time of a small op's whole launch path, neuron against PyTorch CPU.

Per op, in CPU seconds of the whole process (`time.process_time`, every
thread: the stream worker's polling counts): hardshrink of 1 and 1024
float32 elements with a synchronize after every op ("sync") and queued with
one synchronize per block ("queued"), and a chain of 100 dependent neg ops
on 1024 elements per synchronize. Median and best of `--repeats` blocks;
the ratio is CPU's median over neuron's (above 1.0: neuron cheaper). Run
with TORCHNEURON_NUM_THREADS=1 for one thread a side (PyTorch's is set to 1
here).

    TORCHNEURON_NUM_THREADS=1 python benchmarks/launch_overhead.py [--repeats 21]
"""

import argparse
import statistics
import time

import torch
import torchneuron  # noqa: F401

from timing import host_line


def per_op_us(run, n: int, repeats: int) -> tuple:
    run(n)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run(n)
        times.append((time.process_time() - start) / n * 1e6)
    return statistics.median(times), min(times)


def hardshrink(numel: int, sync_each: bool, device: str):
    x = torch.randn(numel, device=device)
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)

    def run(n):
        if sync_each:
            for _ in range(n):
                torch.nn.functional.hardshrink(x)
                sync()
        else:
            outputs = [torch.nn.functional.hardshrink(x) for _ in range(n)]  # kept until the sync
            sync()
            del outputs

    return run


def neg_chain(device: str):
    x = torch.randn(1024, device=device)
    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)

    def run(n):
        for _ in range(n // 100):
            y = x
            for _ in range(100):
                y = y.neg()
            sync()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(host_line())
    rows = [("hardshrink 1, sync", lambda d: hardshrink(1, True, d), 500),
            ("hardshrink 1, queued", lambda d: hardshrink(1, False, d), 500),
            ("hardshrink 1K, sync", lambda d: hardshrink(1024, True, d), 500),
            ("hardshrink 1K, queued", lambda d: hardshrink(1024, False, d), 500),
            ("neg 1K, chain of 100", neg_chain, 1000)]
    print(f"{'CPU us per op':<24}{'neuron med/best':>17}{'cpu med/best':>15}{'cpu/neuron':>12}")
    for name, make, n in rows:
        dev = per_op_us(make("neuron"), n, args.repeats)
        cpu = per_op_us(make("cpu"), n, args.repeats)
        print(f"{name:<24}{dev[0]:>9.2f} /{dev[1]:>5.2f}{cpu[0]:>8.2f} /{cpu[1]:>5.2f}"
              f"{cpu[0] / dev[0]:>11.2f}x")


if __name__ == "__main__":
    main()
