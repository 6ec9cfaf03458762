"""Small-batch linear (x W^T + b with few rows, as in decoding or an RNN
step) on neuron versus PyTorch CPU, float32 and bfloat16. With 2..128 rows
the runtime's GEMM computes C^T = W x^T, reading the weight W where it
lies instead of repacking W^T on every call (runtime/src/ops/gemm/gemm.c,
small_m_transposed; bfloat16 only on hosts with AVX512-BF16, where on AMX
hosts the tile kernel loads W's rows as its A tiles). Each time is
the median wall time of several runs in this process, the two devices in
turns; ratio = CPU / neuron (above 1.0: neuron is faster). PyTorch CPU runs
with 2 threads unless --cpu-threads says otherwise.

    python benchmarks/linear_small_batch.py [--repeats N] [--cpu-threads T]
"""

import argparse

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import interleaved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--cpu-threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    print(f"F.linear, median wall ms of {args.repeats}; CPU threads {args.cpu_threads}; ratio = CPU / neuron")
    for dtype in (torch.float32, torch.bfloat16):
        for n, k in ((3072, 768), (4096, 4096)):
            w, b = torch.randn(n, k).to(dtype), torch.randn(n).to(dtype)
            wd, bd = w.to("neuron"), b.to("neuron")
            for m in (4, 8, 16, 32, 64, 128):
                x = torch.randn(m, k).to(dtype)
                xd = x.to("neuron")
                dev, _, cpu, _ = interleaved(lambda: F.linear(xd, wd, bd), lambda: F.linear(x, w, b), args.repeats)
                dev, cpu = dev * 1e3, cpu * 1e3
                name = str(dtype).replace("torch.", "")
                print(f"{name:9s} W[{n},{k}] M={m:3d}  neuron {dev:7.3f}  cpu {cpu:7.3f}  ratio {cpu / dev:5.2f}")


if __name__ == "__main__":
    main()
