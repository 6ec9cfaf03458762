"""Shape-family throughput on neuron against PyTorch CPU, in one run.

    .venv/bin/python benchmarks/shape_ops.py [--threads 2] [--repeats 5]

Each line prints the best-of-N time on CPU and on neuron (synchronised) and
the ratio CPU time / neuron time (above 1.0 means neuron is faster). CPU
runs with --threads intra-op threads; neuron's kernel pool has its own
TORCHNEURON_NUM_THREADS (default: all cores)."""

import argparse
import time

import torch

import torchneuron  # noqa: F401  (registers the device)

N = 16 * 1024 * 1024


def best_time(fn, sync, repeats):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def cases():
    g = torch.Generator().manual_seed(0)
    f32 = torch.randn(N, generator=g)
    bf16 = f32.to(torch.bfloat16)
    i64 = torch.randint(0, 100000, (N,), generator=g)
    square = f32.view(4096, 4096)
    halves = list(f32.view(4096, 4096).chunk(2, 0))
    sixteen = list(f32.view(4096, 4096).chunk(16, 1))
    yield "sort 16M float32", (f32,), lambda x: torch.sort(x)
    yield "sort 16M float32 stable", (f32,), lambda x: torch.sort(x, stable=True)
    yield "sort 16M bfloat16", (bf16,), lambda x: torch.sort(x)
    yield "sort 16M int64", (i64,), lambda x: torch.sort(x)
    yield "sort 4096x4096 f32 dim=1", (square,), lambda x: torch.sort(x, 1)
    yield "argsort 4096x4096 f32 dim=0", (square,), lambda x: torch.argsort(x, dim=0)
    yield "topk 16M f32 k=100", (f32,), lambda x: torch.topk(x, 100)
    yield "topk 4096x4096 f32 k=16", (square,), lambda x: torch.topk(x, 16, 1)
    yield "median 4096x4096 f32 dim=1", (square,), lambda x: torch.median(x, 1)
    small_ints = i64.view(4096, 4096) % 50
    yield "mode 4096x4096 int64 (50 values) dim=1", (small_ints,), lambda x: torch.mode(x, 1)
    yield "mode 4096x4096 f32 dim=0", (square,), lambda x: torch.mode(x, 0)
    yield "unique 16M int64 inverse+counts", (i64,), \
        lambda x: torch.unique(x, return_inverse=True, return_counts=True)
    yield "cat 2 x 8M f32 dim=0", tuple(halves), lambda *xs: torch.cat(xs, 0)
    yield "cat 2 x 8M f32 dim=1", tuple(halves), lambda *xs: torch.cat(xs, 1)
    yield "cat 16 x 1M f32 dim=0", tuple(sixteen), lambda *xs: torch.cat(xs, 0)
    yield "cat 2 x 8M f32/bf16 dim=0", (halves[0], halves[1].bfloat16()), \
        lambda *xs: torch.cat(xs, 0)
    yield "flip 16M f32", (square,), lambda x: torch.flip(x, [1])
    yield "roll 16M f32", (square,), lambda x: torch.roll(x, (5, 7), (0, 1))
    yield "tril 4096x4096 f32", (square,), lambda x: torch.tril(x)
    yield "arange 16M f32", (None,), lambda x: torch.arange(0, N, 1.0, device=x)
    yield "linspace 16M f32", (None,), lambda x: torch.linspace(-1, 1, N, device=x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="run the rows whose name contains this")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    neuron_sync = torch.neuron.synchronize
    print(f"{'op':34s} {'cpu ms':>9s} {'neuron ms':>10s} {'ratio':>7s}")
    for name, inputs, fn in cases():
        if args.only not in name:
            continue
        if inputs == (None,):  # factories take the device
            cpu_args, dev_args = ("cpu",), ("neuron",)
        else:
            cpu_args, dev_args = inputs, tuple(t.to("neuron") for t in inputs)
        cpu = best_time(lambda: fn(*cpu_args), lambda: None, args.repeats)
        dev = best_time(lambda: fn(*dev_args), neuron_sync, args.repeats)
        print(f"{name:34s} {cpu * 1e3:9.1f} {dev * 1e3:10.1f} {cpu / dev:6.2f}x")


if __name__ == "__main__":
    main()
