"""Pointwise ops on neuron versus PyTorch CPU, measured in the same run.

Part 1: throughput on 16M float32 and bfloat16 elements for add, mul, gelu
and exp, both functional (a fresh output each call, as user code allocates)
and with out= (no allocation), with GB/s (bytes read + written).
Part 2: per-op host cost of small ops (100 elements), timed over a loop that
ends with a synchronize, so queued work is paid for.
Part 3 (--numbers16, alone): bfloat16 and float16 with a Python number
(x * 2, x + 1, x / 3, x.mul_(0.5)) at [8192, 768] and [1024, 1024], the two
devices in turns (timing.interleaved), in wall time and in CPU time of
the whole process (every thread).

Ratios are CPU time / neuron time: above 1.0 neuron is faster. The CPU runs
with torch.set_num_threads(--threads); neuron with TORCHNEURON_NUM_THREADS
(default: all cores). Figures are medians of several trials.

    python benchmarks/pointwise.py [--threads 2] [--quick] [--numbers16]
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401
from timing import interleaved


def median_seconds(fn, sync, repeats):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def no_sync():
    pass


OPS = {
    "add": (lambda a, b: torch.add(a, b), lambda a, b, out: torch.add(a, b, out=out), 3),
    "mul": (lambda a, b: torch.mul(a, b), lambda a, b, out: torch.mul(a, b, out=out), 3),
    "gelu": (lambda a, b: F.gelu(a), lambda a, b, out: torch._C._nn.gelu(a, out=out), 2),
    "exp": (lambda a, b: torch.exp(a), lambda a, b, out: torch.exp(a, out=out), 2),
}


def throughput(n, repeats):
    print(f"Large tensors: {n / 2**20:.0f}M elements, CPU/neuron time ratios")
    print(f"{'op':6s} {'dtype':9s} {'mode':10s} {'cpu ms':>8s} {'neuron ms':>10s} {'GB/s':>6s} {'ratio':>6s}")
    for dtype in (torch.float32, torch.bfloat16):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(n, generator=g).to(dtype)
        b = torch.randn(n, generator=g).to(dtype)
        an, bn = a.to("neuron"), b.to("neuron")
        out, outn = torch.empty_like(a), torch.empty_like(an)
        for name, (functional, with_out, tensors) in OPS.items():
            for mode in ("functional", "out="):
                if mode == "functional":
                    cpu = median_seconds(lambda: functional(a, b), no_sync, repeats)
                    dev = median_seconds(lambda: functional(an, bn), torch.neuron.synchronize, repeats)
                else:
                    cpu = median_seconds(lambda: with_out(a, b, out), no_sync, repeats)
                    dev = median_seconds(lambda: with_out(an, bn, outn), torch.neuron.synchronize, repeats)
                gbs = tensors * n * a.element_size() / dev / 1e9
                print(f"{name:6s} {str(dtype)[6:]:9s} {mode:10s} {cpu * 1e3:8.2f} {dev * 1e3:10.2f} "
                      f"{gbs:6.1f} {cpu / dev:6.2f}")


def small_ops(iters, repeats):
    print("\nSmall tensors: 100 elements, host cost per op (us), neuron/CPU cost ratios")
    x, y = torch.randn(100), torch.randn(100)
    xn, yn = x.to("neuron"), y.to("neuron")
    ops = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "relu": lambda a, b: torch.relu(a),
           "gelu": lambda a, b: F.gelu(a), "where": lambda a, b: torch.where(a > b, a, b),
           "add_": lambda a, b: a.add_(b)}
    for name, op in ops.items():
        def loop(a, b):
            for _ in range(iters):
                op(a, b)
        cpu = median_seconds(lambda: loop(x, y), no_sync, repeats) / iters * 1e6
        dev = median_seconds(lambda: loop(xn, yn), torch.neuron.synchronize, repeats) / iters * 1e6
        print(f"{name:6s} cpu {cpu:6.2f}  neuron {dev:6.2f}  neuron/cpu {dev / cpu:5.2f}")


class HalveDouble:
    """x.mul_(0.5), then x.mul_(2) on the next call, and so on: both exact,
    the values stay where they were (halving alone reaches float32
    subnormals within a few hundred runs, whose arithmetic is far slower)."""

    def __init__(self):
        self.factor = 2.0

    def __call__(self, x):
        self.factor = 0.5 if self.factor == 2.0 else 2.0
        return x.mul_(self.factor)


NUMBER_OPS = {
    "x * 2": lambda x: x * 2,
    "x + 1": lambda x: x + 1,
    "x / 3": lambda x: x / 3,
    "x.mul_(0.5)": HalveDouble(),
}


def numbers16(repeats):
    print("16-bit floats with a Python number, CPU/neuron time ratios (medians, in turns)")
    print(f"{'op':12s} {'dtype':9s} {'shape':10s} {'wall cpu':>9s} {'neuron':>7s} {'ratio':>6s}"
          f" {'cpu-time cpu':>13s} {'neuron':>7s} {'ratio':>6s}")
    for shape in ((8192, 768), (1024, 1024)):
        for dtype in (torch.bfloat16, torch.float16):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
            xn = x.to("neuron")
            for name, op in NUMBER_OPS.items():
                row = []
                for clock in (time.perf_counter, time.process_time):
                    dev, _, cpu, _ = interleaved(lambda: op(xn), lambda: op(x), repeats, clock=clock)
                    row += [cpu * 1e3, dev * 1e3, cpu / dev]
                print(f"{name:12s} {str(dtype)[6:]:9s} {'x'.join(map(str, shape)):10s} {row[0]:9.3f} {row[1]:7.3f}"
                      f" {row[2]:6.2f} {row[3]:13.3f} {row[4]:7.3f} {row[5]:6.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--quick", action="store_true", help="1M elements, fewer repeats")
    parser.add_argument("--numbers16", action="store_true", help="only part 3: 16-bit floats with a number")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.numbers16:
        numbers16(7 if args.quick else 21)
        return
    throughput(2**20 if args.quick else 16 * 2**20, 3 if args.quick else 7)
    small_ops(200 if args.quick else 2000, 3 if args.quick else 5)


if __name__ == "__main__":
    main()
