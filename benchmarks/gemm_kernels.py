"""bfloat16 GEMM micro-kernels (AMX, AVX512-BF16) against PyTorch CPU, turn by turn.

Runs without the Python extension: each turn times PyTorch CPU's bfloat16
torch.matmul (oneDNN; best of the turn's reps), then the runtime's
`gemm_kernel_time` (built in the build tree: rt_gemm on the kernel thread
pool, bfloat16 in and out) with each kernel, best of the same reps. Prints
GF/s of the medians and the median over turns of the per-turn ratio CPU time
/ neuron time (above 1.0: neuron faster), and the load average.

    python benchmarks/gemm_kernels.py --timer build/runtime/gemm_kernel_time [--turns 5]
"""

import argparse
import os
import statistics
import subprocess
import time

import torch

SHAPES = [(2048, 2048, 2048), (1024, 1024, 1024), (2048, 3072, 768), (2048, 768, 3072), (512, 512, 512)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timer", required=True, help="path of gemm_kernel_time")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--kernels", default="amxbf16,avx512bf16")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    kernels = args.kernels.split(",")
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for m, n, k in SHAPES:
        a, b = torch.randn(m, k).bfloat16(), torch.randn(k, n).bfloat16()
        torch.matmul(a, b)
        reps = max(3, int(2e10 / (2 * m * n * k)))
        times = {name: [] for name in ["cpu"] + kernels}
        for _ in range(args.turns):
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                torch.matmul(a, b)
                best = min(best, time.perf_counter() - t0)
            times["cpu"].append(best)
            time.sleep(0.05)  # let oneDNN's OpenMP workers stop spinning
            for name in kernels:
                out = subprocess.run([args.timer, str(m), str(n), str(k), name, str(reps)],
                                     capture_output=True, text=True, check=True)
                times[name].append(float(out.stdout))
        gflops = {name: 2 * m * n * k / statistics.median(v) / 1e9 for name, v in times.items()}
        ratios = {name: statistics.median(c / x for c, x in zip(times["cpu"], times[name])) for name in kernels}
        cells = "  ".join(f"{name} {gflops[name]:.1f} GF/s ({ratios[name]:.2f}x)" for name in kernels)
        print(f"{m}x{k} @ {k}x{n}: cpu {gflops['cpu']:.1f} GF/s  {cells}")
    print("load average at the end", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
