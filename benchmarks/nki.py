"""NKI: simulation speed of a tiled bf16 matmul versus PyTorch CPU, and the
cost model's estimated Trainium latency.

Part 1 times examples/nki/matmul.py on neuron tensors (simulated on this
host, end to end: launch, simulation, synchronize) against torch.matmul of
the same bf16 product on the CPU, both the median of several runs in this
process. The issue's bound is a ratio of at most 3.
Part 2 prints the estimated latency on the configured generation
(NEURON_PLATFORM_TARGET_OVERRIDE, default trn2) with per-engine busy time;
these are estimates from published per-instruction costs, clocks and DMA
bandwidths, not measurements.

    python benchmarks/nki.py [--size 1024] [--repeats 5] [--trace out.json]
"""

import argparse
import os
import sys

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))
from timing import median_time  # noqa: E402
from matmul import matmul_tiled  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trace", help="write the estimated timeline as Chrome trace JSON")
    args = parser.parse_args()
    n = args.size
    lhsT = torch.randn(n, n, dtype=torch.bfloat16)
    rhs = torch.randn(n, n, dtype=torch.bfloat16)
    lhsT_dev, rhs_dev = lhsT.to("neuron"), rhs.to("neuron")

    cpu = median_time(lambda: torch.matmul(lhsT.T, rhs), args.repeats)

    def simulated():
        matmul_tiled(lhsT_dev, rhs_dev)
        torch.neuron.synchronize()

    sim = median_time(simulated, args.repeats)
    out = matmul_tiled(lhsT_dev, rhs_dev).cpu().float()
    err = (out - (lhsT.float().T @ rhs.float())).abs().max().item()
    print(f"{n}x{n}x{n} bf16 matmul (threads: {torch.get_num_threads()}, load average "
          f"{os.getloadavg()[0]:.1f})")
    print(f"  torch CPU matmul        {cpu * 1e3:9.2f} ms")
    print(f"  NKI simulation (neuron) {sim * 1e3:9.2f} ms   ratio {sim / cpu:5.2f}x "
          f"(bound: 3x)   max abs error {err:.3g}")

    est = nki.benchmark(matmul_tiled, save_trace=args.trace)(lhsT_dev, rhs_dev)
    flops = 2.0 * n * n * n
    print(f"Estimated {est.target} latency (cost model, not a measurement): "
          f"{est.latency_us:.1f} us = {flops / est.latency_us / 1e6:.1f} TFLOP/s")
    for engine, busy in est.busy_us.items():
        print(f"  {engine:7s} busy {busy:9.2f} us  ({est.utilization[engine] * 100:5.1f}%)  "
              f"{est.instructions[engine]} instructions")
    if args.trace:
        print(f"  timeline written to {args.trace}")


if __name__ == "__main__":
    main()
