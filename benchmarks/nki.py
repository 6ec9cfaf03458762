"""NKI: simulation speed of a tiled bf16 matmul versus PyTorch CPU, and the
cost model's estimated Trainium latency.

Part 1 times examples/nki/matmul.py on neuron tensors (simulated on this
host, end to end: launch, simulation, synchronize) against torch.matmul of
the same bf16 product on the CPU, both the median of several runs in this
process. Issue 18's target is a ratio of at most 1.5. The process CPU time of
both (every thread) is printed too: on a shared host it is the steadier ratio.
Part 2 times two kernels of many small instructions the same way and states
the simulator's cost per instruction: a 4096-step linear recurrence
h = a * h + b written as 4096 chained nisa.tensor_tensor_scan instructions
(one [128, 4] chunk each, the next starting from the last column), and the
softmax of examples/nki/softmax.py over 64 tiles of [128, 512].
Part 3 prints the estimated latency on the configured generation
(NEURON_PLATFORM_TARGET_OVERRIDE, default trn2) with per-engine busy time;
these are estimates from published per-instruction costs, clocks and DMA
bandwidths, not measurements.

    python benchmarks/nki.py [--size 1024] [--repeats 5] [--trace out.json]
"""

import argparse
import os
import sys
import time

import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))
from timing import median_and_best, median_time  # noqa: E402
from matmul import matmul_tiled  # noqa: E402
from softmax import softmax  # noqa: E402

import torchneuron.nki.isa as nisa  # noqa: E402
import torchneuron.nki.language as nl  # noqa: E402

SCAN_STEPS, SCAN_CHUNK = 4096, 4


@nki.jit
def chained_scan(a, b):
    """h[:, j] = a[:, j] * h[:, j-1] + b[:, j] over SCAN_STEPS chunks."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    a_t, b_t = nl.load(a), nl.load(b)
    h = nl.ndarray(a.shape, nl.float32)
    carry = 0.0
    for s in range(SCAN_STEPS):
        c0 = s * SCAN_CHUNK
        nisa.tensor_tensor_scan(h[:, c0:c0 + SCAN_CHUNK], a_t[:, c0:c0 + SCAN_CHUNK],
                                b_t[:, c0:c0 + SCAN_CHUNK], carry, nl.multiply, nl.add)
        carry = h[:, c0 + SCAN_CHUNK - 1:c0 + SCAN_CHUNK]
    nl.store(out, h)
    return out


def small_instructions(repeats):
    """Per-instruction cost of the simulator on kernels of small instructions."""
    cols = SCAN_STEPS * SCAN_CHUNK
    a = (torch.rand(128, cols) * 0.5).to("neuron")
    b = torch.randn(128, cols).to("neuron")
    x_cpu = torch.randn(64 * 128, 512)
    x = x_cpu.to("neuron")
    print("Many small instructions (simulated; launch to synchronize):")
    for name, kernel, args, cpu_fn in (
            ("scan 4096 x tensor_tensor_scan", chained_scan, (a, b), None),
            ("softmax 64 tiles [128, 512]", softmax, (x,), lambda: torch.softmax(x_cpu, 1))):
        count = sum(nki.benchmark(kernel)(*args).instructions.values())

        def run():
            kernel(*args)
            torch.neuron.synchronize()

        t = median_time(run, repeats)
        extra = ""
        if cpu_fn is not None:
            extra = f"   torch CPU softmax {median_time(cpu_fn, repeats) * 1e3:7.2f} ms"
        print(f"  {name:32s} {count:5d} instructions {t * 1e3:8.2f} ms = "
              f"{t / count * 1e6:6.2f} us per instruction{extra}")



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
    # Process CPU time (every thread): on a shared host torch's OpenMP workers
    # lose their cores more than the simulator's pool, which skews wall ratios.
    cpu_cpu = median_and_best(lambda: torch.matmul(lhsT.T, rhs), lambda: None, args.repeats,
                              clock=time.process_time)[0]
    sim_cpu = median_and_best(simulated, lambda: None, args.repeats, clock=time.process_time)[0]
    out = matmul_tiled(lhsT_dev, rhs_dev).cpu().float()
    err = (out - (lhsT.float().T @ rhs.float())).abs().max().item()
    print(f"{n}x{n}x{n} bf16 matmul (threads: {torch.get_num_threads()}, load average "
          f"{os.getloadavg()[0]:.1f})")
    print(f"  torch CPU matmul        {cpu * 1e3:9.2f} ms")
    print(f"  NKI simulation (neuron) {sim * 1e3:9.2f} ms   ratio {sim / cpu:5.2f}x "
          f"(target: 1.5x)   max abs error {err:.3g}")
    print(f"  process CPU: torch {cpu_cpu * 1e3:.2f} ms, simulation {sim_cpu * 1e3:.2f} ms, "
          f"ratio {sim_cpu / cpu_cpu:5.2f}x")

    small_instructions(args.repeats)

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
