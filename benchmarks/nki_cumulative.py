"""NKI: a row cumulative sum with nisa.tensor_scalar_cumulative against
torch.cumsum on the CPU, both medians in this process.

One instruction over the whole row, then the same row in chunks whose
instructions continue the Vector engine's reduce register (reduce_cmd
reduce): the difference over the extra instructions is the simulator's
per-instruction overhead.

    python benchmarks/nki_cumulative.py [--cols 4096] [--chunks 64] [--repeats 7]
"""

import argparse
import os

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from timing import median_time


@nki.jit
def cumsum(x, chunks):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, nl.float32)
    width = cols // chunks
    for c in range(chunks):
        cmd = nisa.reduce_cmd.reset_reduce if c == 0 else nisa.reduce_cmd.reduce
        part = slice(c * width, (c + 1) * width)
        nisa.tensor_scalar_cumulative(r[:, part], t[:, part], nl.add, nl.add, 0.0, reduce_cmd=cmd)
    nl.store(out, r)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    x = torch.randn(128, args.cols)
    dev = x.to("neuron")
    cpu = median_time(lambda: torch.cumsum(x, 1), args.repeats)
    times = {}
    for chunks in (1, args.chunks):
        def simulated():
            cumsum(dev, chunks)
            torch.neuron.synchronize()

        times[chunks] = median_time(simulated, args.repeats)
        err = (cumsum(dev, chunks).cpu() - torch.cumsum(x, 1)).abs().max().item()
        print(f"  {chunks:3d} instruction(s): {times[chunks] * 1e3:8.3f} ms  "
              f"ratio {times[chunks] / cpu:6.2f}x torch   max abs error {err:.3g}")
    per = (times[args.chunks] - times[1]) / (args.chunks - 1)
    print(f"128 x {args.cols} fp32 cumsum: torch CPU {cpu * 1e3:.3f} ms (load average "
          f"{os.getloadavg()[0]:.1f}); per extra instruction {per * 1e6:.1f} us")
    est = nki.benchmark(cumsum)(dev, args.chunks)
    print(f"Estimated {est.target} latency (cost model, not a measurement): "
          f"{est.latency_us:.2f} us, Vector busy {est.busy_us['Vector']:.2f} us")


if __name__ == "__main__":
    main()
