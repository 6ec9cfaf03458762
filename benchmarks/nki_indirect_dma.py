"""NKI dma_copy's indirect form (gather and scatter-add of HBM rows by an
SBUF index tile): simulation speed on neuron tensors against PyTorch CPU's
index_select / index_add of the same data, in alternating blocks of runs
(timing.alternating_blocks, medians), and the cost model's estimate of the
gather next to a direct load of the same bytes.

The gather kernel loads [128, 1] int32 indices per tile and gathers 128
rows of a [R, F] fp32 HBM tensor per tile into SBUF (nl.load(x[i])), then
stores them; the scatter-add kernel adds 128 rows per tile into a copy of
the tensor (dma_copy(out[i], t, dst_rmw_op=nl.add, unique_indices=False)).

    python benchmarks/nki_indirect_dma.py [--rows 8192] [--cols 512] [--tiles 8] [--repeats 9]
"""

import argparse

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from timing import alternating_blocks


@nki.jit
def gather(x, idx):
    out = nl.ndarray((idx.shape[0], x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(idx.shape[0] // 128):
        rows = nl.ds(t * 128, 128)
        nl.store(out[rows], nl.load(x[nl.load(idx[rows])]))
    return out


@nki.jit
def direct(x, idx):
    """The same bytes without indices: rows 0..N-1."""
    out = nl.ndarray((idx.shape[0], x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(idx.shape[0] // 128):
        rows = nl.ds(t * 128, 128)
        nl.load(idx[rows])
        nl.store(out[rows], nl.load(x[rows]))
    return out


@nki.jit
def scatter_add(x, idx, src):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[0] // 128):
        rows = nl.ds(t * 128, 128)
        nl.store(out[rows], nl.load(x[rows]))
    for t in nl.sequential_range(idx.shape[0] // 128):
        rows = nl.ds(t * 128, 128)
        nisa.dma_copy(out[nl.load(idx[rows])], nl.load(src[rows]), dst_rmw_op=nl.add,
                      unique_indices=False)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=512)
    parser.add_argument("--tiles", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    n = 128 * args.tiles
    x = torch.randn(args.rows, args.cols, generator=g)
    idx = torch.randint(0, args.rows, (n, 1), generator=g, dtype=torch.int32)
    src = torch.randn(n, args.cols, generator=g)
    order = idx[:, 0].long()
    dx, di, ds = x.to("neuron"), idx.to("neuron"), src.to("neuron")
    assert torch.equal(gather(dx, di).cpu(), x.index_select(0, order))
    torch.testing.assert_close(scatter_add(dx, di, ds).cpu(), x.index_add(0, order, src))
    sim, _, cpu, _ = alternating_blocks(lambda: gather(dx, di), lambda: x.index_select(0, order),
                                        args.repeats)
    print(f"gather of {n} rows of [{args.rows}, {args.cols}] fp32: simulated {sim * 1e3:.3f} ms, "
          f"torch CPU index_select {cpu * 1e3:.3f} ms, ratio {sim / cpu:.2f}x "
          f"(per run, medians of {args.repeats} alternating blocks of 4)")
    sim, _, cpu, _ = alternating_blocks(lambda: scatter_add(dx, di, ds),
                                        lambda: x.index_add(0, order, src), args.repeats)
    print(f"scatter-add of {n} rows into [{args.rows}, {args.cols}] fp32 (with its copy): "
          f"simulated {sim * 1e3:.3f} ms, torch CPU index_add {cpu * 1e3:.3f} ms, "
          f"ratio {sim / cpu:.2f}x")
    ind = nki.benchmark(gather)(x, idx)
    plain = nki.benchmark(direct)(x, idx)
    print(f"estimate (trn2 default): gather {ind.latency_us:.2f} us (GpSimd descriptor time "
          f"{ind.busy_us['GpSimd']:.3f} us), the same bytes by direct loads "
          f"{plain.latency_us:.2f} us")


if __name__ == "__main__":
    main()
