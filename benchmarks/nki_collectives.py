"""NKI collectives on a grid of two programs: simulation speed of an
all_reduce (in SBUF tiles) against PyTorch CPU's a[0] + a[1] of the same
size, and the cost model's estimate for one core.

Both sides are the median of several runs in this process, on neuron tensors
(launch, interleaved simulation of both programs, synchronize). The kernel
loads each core's [128, F] tile, all-reduces it across the two cores and
stores it, so it moves 4x the bytes of the CPU add; the ratio says what the
interleaved run costs, not that the two compute the same amount.

A second row times nki.lnc.sendrecv_compute (each core's tile reduced with
the other's) the same way. With ``--ranks 2`` it spawns two ranks of a
``neuron`` process group instead, and each turn times, on both ranks at
once: nki.distributed(all_reduce) of a [128, F] float32 tile on neuron
tensors (launch + synchronize), then torch.distributed.all_reduce of the
same-size CPU tensor (gloo): PyTorch CPU's own collective. Rank 0 prints
the medians of the turns.

    python benchmarks/nki_collectives.py [--free 2048] [--repeats 7] [--ranks 2]
"""

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.language as nl
from timing import interleaved, median_time

PAIR = ncc.ReplicaGroup([[0, 1]])


@nki.jit
def all_reduce_tiles(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = ncc.rank_id()
    t = nl.load(a[r])
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    ncc.all_reduce([t], [s], PAIR, nl.add)
    nl.store(out[r], s)
    return out


@nki.jit
def exchange_reduce(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = nl.program_id(0)
    t = nl.load(a[r])
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nki.lnc.sendrecv_compute(t, s, 1 - r, 1 - r, nl.add)
    nl.store(out[r], s)
    return out


@nki.jit
def rank_all_reduce(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    ncc.all_reduce([t], [s], PAIR, nl.add)
    nl.store(out, s)
    return out


def _rank(rank, store, free, repeats):
    import torchneuron  # noqa: F401

    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=2)
    x = torch.randn(128, free, generator=torch.Generator().manual_seed(rank))
    dev = x.to("neuron")
    kernel = nki.distributed(rank_all_reduce)
    want = x.clone()
    dist.all_reduce(want)
    assert torch.equal(kernel(dev).cpu(), want)
    nki_t, cpu_t = [], []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        kernel(dev)
        torch.neuron.synchronize()
        nki_t.append(time.perf_counter() - start)
        dist.barrier()
        y = x.clone()
        start = time.perf_counter()
        dist.all_reduce(y)
        cpu_t.append(time.perf_counter() - start)
    if rank == 0:
        a, b = statistics.median(nki_t), statistics.median(cpu_t)
        print(f"2 ranks, all_reduce of [128, {free}] fp32: nki.distributed {a * 1e3:.3f} ms, "
              f"torch.distributed (gloo, CPU tensors) {b * 1e3:.3f} ms, ratio {a / b:.2f}x "
              f"(medians of {repeats} turns)")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--free", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--ranks", type=int, default=0)
    args = parser.parse_args()
    if args.ranks:
        if args.ranks != 2:
            raise SystemExit("--ranks takes 2")
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(_rank, args=(os.path.join(d, "store"), args.free, args.repeats), nprocs=2)
        return
    a = torch.randn(2, 128, args.free)
    dev = a.to("neuron")
    out = all_reduce_tiles[2](dev).cpu()
    assert torch.equal(out[0], a[0] + a[1]) and torch.equal(out[1], a[0] + a[1])
    sim = median_time(lambda: (all_reduce_tiles[2](dev), torch.neuron.synchronize()), args.repeats)
    cpu = median_time(lambda: a[0] + a[1], args.repeats)
    print(f"all_reduce of 2 x [128, {args.free}] fp32 on kernel[2]: simulated {sim * 1e3:.3f} ms, "
          f"torch CPU a[0] + a[1] {cpu * 1e3:.3f} ms, ratio {sim / cpu:.2f}x")
    want = a[0] + a[1]
    out = exchange_reduce[2](dev).cpu()
    assert torch.equal(out[0], want) and torch.equal(out[1], want)
    sim, _, cpu, _ = interleaved(lambda: exchange_reduce[2](dev), lambda: a[0] + a[1], args.repeats)
    print(f"nki.lnc.sendrecv_compute of 2 x [128, {args.free}] fp32 on kernel[2]: simulated "
          f"{sim * 1e3:.3f} ms, torch CPU a[0] + a[1] {cpu * 1e3:.3f} ms, ratio {sim / cpu:.2f}x")
    est = all_reduce_tiles.specialise((a,), {}, 0, 2).estimate()
    print(f"estimate (one core, trn2 default): {est['total_ns'] / 1e3:.2f} us, "
          f"DMA bytes {est['dma_bytes']}")


if __name__ == "__main__":
    main()
