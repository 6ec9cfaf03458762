"""Indexing ops on neuron versus PyTorch CPU, in one run.

Large: row gathers from a [1M, 64] table (index_select, embedding, x[idx]),
1-d random gathers, row updates (index_add_, index_put_ with accumulate,
scatter_add_), embedding backward, nonzero / masked_select over 16M
elements, searchsorted. Small: per-op cost of index_select and x[idx] on a
[64, 16] tensor, with add as the engine's reference, over a loop that ends
with a synchronize.

CPU and neuron runs alternate and each figure is the best of several, so
that load from other processes affects both sides alike. PyTorch CPU uses
the same number of threads as the neuron kernels (TORCHNEURON_NUM_THREADS,
default 2 here).

    TORCHNEURON_NUM_THREADS=2 python benchmarks/index_ops.py [--quick]
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

SYNC = torch.neuron.synchronize


def timed(fn, sync):
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def compare(name, cpu_fn, neuron_fn, rounds):
    cpu_fn()
    neuron_fn()
    SYNC()
    cpu = neuron = float("inf")
    for _ in range(rounds):
        cpu = min(cpu, timed(cpu_fn, lambda: None))
        neuron = min(neuron, timed(neuron_fn, SYNC))
    print(f"{name:44s} cpu {cpu * 1e3:9.3f} ms  neuron {neuron * 1e3:9.3f} ms  ratio {cpu / neuron:5.2f}x",
          flush=True)


def per_op(fn, sync, iters, rounds=5):
    for _ in range(50):
        fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    args = parser.parse_args()
    threads = int(os.environ.get("TORCHNEURON_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    rounds = 3 if args.quick else 9
    scale = 8 if args.quick else 1
    torch.manual_seed(0)
    print(f"threads: {threads} (PyTorch CPU and neuron kernels)")

    rows = 1_000_000 // scale
    table = torch.randn(rows, 64)
    index = torch.randint(0, rows, (65536,))
    table_n, index_n = table.to("neuron"), index.to("neuron")
    compare("index_select [1M,64] f32, 64K rows", lambda: table.index_select(0, index),
            lambda: table_n.index_select(0, index_n), rounds)
    compare("embedding [1M,64] f32, [64,1024] idx", lambda: F.embedding(index.view(64, 1024), table),
            lambda: F.embedding(index_n.view(64, 1024), table_n), rounds)
    compare("table[idx] [1M,64] f32", lambda: table[index], lambda: table_n[index_n], rounds)
    table_b, table_bn = table.bfloat16(), table_n.bfloat16()
    compare("index_select [1M,64] bf16, 64K rows", lambda: table_b.index_select(0, index),
            lambda: table_bn.index_select(0, index_n), rounds)
    del table_b, table_bn

    n = 16_000_000 // scale
    flat = torch.randn(n)
    flat_index = torch.randint(0, n, (n // 4,))
    flat_n, flat_index_n = flat.to("neuron"), flat_index.to("neuron")
    compare("index_select 1-d 16M f32, 4M idx", lambda: flat.index_select(0, flat_index),
            lambda: flat_n.index_select(0, flat_index_n), rounds)
    compare("gather 1-d 16M f32, 4M idx", lambda: flat.gather(0, flat_index),
            lambda: flat_n.gather(0, flat_index_n), rounds)

    dst, dst_n = torch.zeros(rows, 64), torch.zeros(rows, 64, device="neuron")
    src = torch.randn(65536, 64)
    src_n = src.to("neuron")
    compare("index_add_ [1M,64], 64K rows", lambda: dst.index_add_(0, index, src),
            lambda: dst_n.index_add_(0, index_n, src_n), rounds)
    compare("index_put_ accumulate [1M,64], 64K rows", lambda: dst.index_put_((index,), src, accumulate=True),
            lambda: dst_n.index_put_((index_n,), src_n, accumulate=True), rounds)
    expanded, expanded_n = index.view(-1, 1).expand(-1, 64), index_n.view(-1, 1).expand(-1, 64)
    compare("scatter_add_ [1M,64], 64K rows (expanded idx)", lambda: dst.scatter_add_(0, expanded, src),
            lambda: dst_n.scatter_add_(0, expanded_n, src_n), rounds)
    grad = torch.randn(64, 1024, 64)
    words = torch.randint(0, 50000, (64, 1024))
    grad_n, words_n = grad.to("neuron"), words.to("neuron")
    compare("embedding_dense_backward [50K,64], 64K idx",
            lambda: torch.ops.aten.embedding_dense_backward(grad, words, 50000, -1, False),
            lambda: torch.ops.aten.embedding_dense_backward(grad_n, words_n, 50000, -1, False), rounds)
    del dst, dst_n, grad, grad_n

    mask = torch.rand(n) > 0.5
    mask_n = mask.to("neuron")
    compare("nonzero 16M bool", lambda: mask.nonzero(), lambda: mask_n.nonzero(), rounds)
    compare("masked_select 16M f32", lambda: flat.masked_select(mask), lambda: flat_n.masked_select(mask_n), rounds)
    bounds = torch.sort(torch.randn(100000)).values
    values = torch.randn(1_000_000 // scale)
    bounds_n, values_n = bounds.to("neuron"), values.to("neuron")
    compare("searchsorted 100K bounds, 1M values", lambda: torch.searchsorted(bounds, values),
            lambda: torch.searchsorted(bounds_n, values_n), rounds)

    small = torch.randn(64, 16)
    rows3 = torch.tensor([3, 1, 7])
    small_n, rows3_n = small.to("neuron"), rows3.to("neuron")
    iters = 500 if args.quick else 2000
    for name, cpu_fn, neuron_fn in [
        ("index_select [64,16], 3 rows", lambda: small.index_select(0, rows3), lambda: small_n.index_select(0, rows3_n)),
        ("x[idx] [64,16], 3 rows", lambda: small[rows3], lambda: small_n[rows3_n]),
        ("add [64,16] (engine reference)", lambda: small + small, lambda: small_n + small_n),
    ]:
        cpu = per_op(cpu_fn, lambda: None, iters)
        neuron = per_op(neuron_fn, SYNC, iters)
        print(f"{name:44s} cpu {cpu * 1e6:9.2f} us  neuron {neuron * 1e6:9.2f} us  ratio {cpu / neuron:5.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
