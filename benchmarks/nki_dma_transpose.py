"""NKI dma_transpose's indirect (software-DGE) form: simulation speed on
neuron tensors against PyTorch CPU's x.index_select(0, rows).t() of the same
bf16 data, in alternating blocks of runs (timing.alternating_blocks,
medians), and the cost model's estimate.

The kernel loads a [128, K] uint32 index tile (converted from int32 in the
kernel: torch has no uint32 neuron tensors), gathers the 128 * K rows of a
[R, 128] bf16 HBM tensor it names and transposes them into SBUF, then
stores the [128, 128 * K] result.

    python benchmarks/nki_dma_transpose.py [--rows 4096] [--cols 4] [--repeats 9]
"""

import argparse

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from timing import alternating_blocks


@nki.jit
def gather_transpose(x, idx):
    n = idx.shape[0] * idx.shape[1]
    out = nl.ndarray((x.shape[1], n), x.dtype, buffer=nl.shared_hbm)
    i32 = nl.load(idx)
    i = nl.ndarray(idx.shape, nl.uint32, buffer=nl.sbuf)
    nisa.tensor_copy(i, i32)
    t = nl.ndarray((x.shape[1], n), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, x[i], dge_mode=nisa.dge_mode.swdge)
    nl.store(out, t)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.rows, 128, generator=g).bfloat16()
    idx = torch.randint(0, args.rows, (128, args.cols), generator=g, dtype=torch.int32)
    order = idx.t().reshape(-1).long()  # partition first
    want = x.index_select(0, order).t().contiguous()
    dx, di = x.to("neuron"), idx.to("neuron")
    assert torch.equal(gather_transpose(dx, di).cpu(), want)
    sim, _, cpu, _ = alternating_blocks(lambda: gather_transpose(dx, di),
                                        lambda: x.index_select(0, order).t().contiguous(),
                                        args.repeats)
    n = 128 * args.cols
    print(f"indirect dma_transpose of {n} rows of [{args.rows}, 128] bf16: simulated "
          f"{sim * 1e3:.3f} ms, torch CPU index_select + t() {cpu * 1e3:.3f} ms, "
          f"ratio {sim / cpu:.2f}x (per run, medians of {args.repeats} alternating blocks of 4)")
    est = gather_transpose.specialise((x, idx), {}).estimate()
    print(f"estimate (trn2 default): {est['total_ns'] / 1e3:.2f} us, DMA bytes {est['dma_bytes']}")


if __name__ == "__main__":
    main()
