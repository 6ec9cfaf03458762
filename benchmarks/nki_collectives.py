"""NKI collectives on a grid of two programs: simulation speed of an
all_reduce (in SBUF tiles) against PyTorch CPU's a[0] + a[1] of the same
size, and the cost model's estimate for one core.

Both sides are the median of several runs in this process, on neuron tensors
(launch, interleaved simulation of both programs, synchronize). The kernel
loads each core's [128, F] tile, all-reduces it across the two cores and
stores it, so it moves 4x the bytes of the CPU add; the ratio says what the
interleaved run costs, not that the two compute the same amount.

    python benchmarks/nki_collectives.py [--free 2048] [--repeats 7]
"""

import argparse

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.language as nl
from timing import median_time

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--free", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    a = torch.randn(2, 128, args.free)
    dev = a.to("neuron")
    out = all_reduce_tiles[2](dev).cpu()
    assert torch.equal(out[0], a[0] + a[1]) and torch.equal(out[1], a[0] + a[1])
    sim = median_time(lambda: (all_reduce_tiles[2](dev), torch.neuron.synchronize()), args.repeats)
    cpu = median_time(lambda: a[0] + a[1], args.repeats)
    print(f"all_reduce of 2 x [128, {args.free}] fp32 on kernel[2]: simulated {sim * 1e3:.3f} ms, "
          f"torch CPU a[0] + a[1] {cpu * 1e3:.3f} ms, ratio {sim / cpu:.2f}x")
    est = all_reduce_tiles.specialise((a,), {}, 0, 2).estimate()
    print(f"estimate (one core, trn2 default): {est['total_ns'] / 1e3:.2f} us, "
          f"DMA bytes {est['dma_bytes']}")


if __name__ == "__main__":
    main()
