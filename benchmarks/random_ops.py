"""Throughput of the random ops on 16M elements, neuron versus PyTorch CPU.

Each op fills a 16M-element tensor (float32 unless noted) on neuron and on
the CPU (torch.set_num_threads(2), the CPU baseline of the issue); every
figure is the median of several trials measured in this run, neuron timings
end with a synchronize. Values differ between the two (different
generators); the work is the same. Ratios > 1 mean neuron is faster.

    python benchmarks/random_ops.py [--quick] [--threads N]
"""

import argparse
import statistics
import time

import torch
import torchneuron  # noqa: F401

N = 16 * 1024 * 1024


def median_ms(fn, sync, repeats):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    parser.add_argument("--threads", type=int, default=2, help="CPU baseline threads")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    torch.set_num_threads(args.threads)

    cpu_f32, dev_f32 = torch.empty(N), torch.empty(N, device="neuron")
    cpu_bf16 = torch.empty(N, dtype=torch.bfloat16)
    dev_bf16 = torch.empty(N, dtype=torch.bfloat16, device="neuron")
    cpu_i64 = torch.empty(N, dtype=torch.int64)
    dev_i64 = torch.empty(N, dtype=torch.int64, device="neuron")
    x_cpu = torch.randn(N)
    x_dev = x_cpu.to("neuron")
    cases = [
        ("uniform_", cpu_f32, dev_f32, lambda t: t.uniform_()),
        ("normal_", cpu_f32, dev_f32, lambda t: t.normal_()),
        ("uniform_ bf16", cpu_bf16, dev_bf16, lambda t: t.uniform_()),
        ("normal_ bf16", cpu_bf16, dev_bf16, lambda t: t.normal_()),
        ("bernoulli_(0.5)", cpu_f32, dev_f32, lambda t: t.bernoulli_(0.5)),
        ("random_(0, 1000) int64", cpu_i64, dev_i64, lambda t: t.random_(0, 1000)),
        ("exponential_", cpu_f32, dev_f32, lambda t: t.exponential_()),
        ("native_dropout(0.1)", x_cpu, x_dev, lambda t: torch.ops.aten.native_dropout(t, 0.1, True)),
    ]
    print(f"Random ops on {N // (1024 * 1024)}M elements, median of {repeats} "
          f"(CPU with {args.threads} threads)")
    print(f"{'op':<26}{'neuron ms':>11}{'cpu ms':>10}{'Gelem/s':>9}{'cpu/neuron':>12}")
    for name, cpu, dev, fill in cases:
        t_dev = median_ms(lambda: fill(dev), torch.neuron.synchronize, repeats)
        t_cpu = median_ms(lambda: fill(cpu), lambda: None, repeats)
        print(f"{name:<26}{t_dev:>11.2f}{t_cpu:>10.2f}{N / t_dev / 1e6:>9.2f}{t_cpu / t_dev:>11.2f}x")
    n_perm = 1 << 22
    t_dev = median_ms(lambda: torch.randperm(n_perm, device="neuron"), torch.neuron.synchronize, repeats)
    t_cpu = median_ms(lambda: torch.randperm(n_perm), lambda: None, repeats)
    print(f"{'randperm(4M)':<26}{t_dev:>11.2f}{t_cpu:>10.2f}{n_perm / t_dev / 1e6:>9.2f}"
          f"{t_cpu / t_dev:>11.2f}x")


if __name__ == "__main__":
    main()
