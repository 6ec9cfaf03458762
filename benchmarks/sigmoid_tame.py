"""Eager float32 sigmoid: the tame twin against the general loop, same run.

The eager kernel (runtime/src/ops/pointwise/pointwise_unary.c) runs
rt_vm_sigmoidf's tame twin on each contiguous block of 512 values whose
every |x| <= 86, and rt_vm_sigmoidf elsewhere (same bits). Three sides take
turns (timing.rotating_blocks): neuron on tame values (randn * 4), neuron on
the same values with one 100.0 in every block (every block takes the
general loop), and PyTorch CPU on the tame values. Prints medians (best)
per call and the ratios; checks that both neuron results agree bitwise
wherever the inputs do.

    python benchmarks/sigmoid_tame.py [--n 4194304] [--samples 9]
"""

import argparse
import os

import torch

import torchneuron  # noqa: F401
from timing import rotating_blocks

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--n", type=int, default=4 * 2**20, help="elements")
ap.add_argument("--samples", type=int, default=9, help="rounds of turns")
ap.add_argument("--threads", type=int, default=2, help="PyTorch CPU threads")
args = ap.parse_args()
torch.set_num_threads(args.threads)

g = torch.Generator().manual_seed(0)
tame = torch.randn(args.n, generator=g) * 4
wild = tame.clone()
wild[100::512] = 100.0
tame_n, wild_n = tame.to("neuron"), wild.to("neuron")
out_t, out_w = torch.sigmoid(tame_n), torch.sigmoid(wild_n)
same = torch.ones(args.n, dtype=torch.bool)
same[100::512] = False
bits_t = out_t.cpu().view(torch.int32)[same]
bits_w = out_w.cpu().view(torch.int32)[same]
if not torch.equal(bits_t, bits_w):
    raise SystemExit("the tame twin and the general loop differ")

# Into kept outputs (out=): a result dropped before the stream runs the op
# lets adaptive eager execution skip its stores.
out_c = torch.empty_like(tame)
(t_tame, b_tame), (t_wild, b_wild), (t_cpu, b_cpu) = rotating_blocks(
    [(lambda: torch.sigmoid(tame_n, out=out_t), True), (lambda: torch.sigmoid(wild_n, out=out_w), True),
     (lambda: torch.sigmoid(tame, out=out_c), False)], args.samples, block=5)
print(f"load average {os.getloadavg()[0]:.1f}; {args.n} float32 elements; ms per call, median (best)")
print(f"neuron tame blocks     {t_tame * 1e3:7.3f} ({b_tame * 1e3:.3f})")
print(f"neuron general blocks  {t_wild * 1e3:7.3f} ({b_wild * 1e3:.3f})")
print(f"CPU (PyTorch)          {t_cpu * 1e3:7.3f} ({b_cpu * 1e3:.3f})")
print(f"general / tame {t_wild / t_tame:.2f}x; CPU / neuron tame {t_cpu / t_tame:.2f}x; results bitwise equal")
