"""Convolution forward and backward on neuron versus PyTorch CPU (oneDNN), same process.

Shapes: the three 3x3 layers of benchmarks/train.py's CNN (batch 64) and a
few ResNet-like ones (3x3 stride 1 and 2, 1x1), float32 and bfloat16.
Forward is aten.convolution; backward is aten.convolution_backward with
grad_input and grad_weight (no bias gradient: that is a plain reduction),
except for the first CNN layer whose input needs no gradient (as in
training). Neuron and CPU runs alternate so that load from other processes
hits both alike; each figure is the median of the runs (best run in
brackets). ratio = CPU time / neuron time (above 1.0: neuron is faster).
PyTorch CPU uses 2 threads unless --cpu-threads says otherwise; neuron
uses TORCHNEURON_NUM_THREADS (default: all cores). On a loaded machine
(load above the core count) PyTorch's OpenMP threads wait on descheduled
peers and its 2-thread times balloon: compare one thread on each side too,

    TORCHNEURON_NUM_THREADS=1 python benchmarks/conv.py --cpu-threads 1 [--cpu-time]

(--cpu-time: process CPU seconds, which do not count waiting for a core.)

    python benchmarks/conv.py [--repeats N] [--dtype float32|bfloat16|both] [--only SUBSTR]
"""

import argparse
import os
import time

import torch
import torchneuron  # noqa: F401

from timing import interleaved

# label, batch, c_in, c_out, h (= w), kernel, stride, padding, input needs grad
SHAPES = [
    ("cnn conv1 3->32 32x32", 64, 3, 32, 32, 3, 1, 1, False),
    ("cnn conv2 32->64 16x16", 64, 32, 64, 16, 3, 1, 1, True),
    ("cnn conv3 64->128 8x8", 64, 64, 128, 8, 3, 1, 1, True),
    ("resnet 64->64 56x56 3x3", 8, 64, 64, 56, 3, 1, 1, True),
    ("resnet 128->256 28x28 3x3 s2", 8, 128, 256, 28, 3, 2, 1, True),
    ("resnet 256->64 56x56 1x1", 8, 256, 64, 56, 1, 1, 0, True),
]


def case(shape, dtype, repeats, clock):
    _, n, ci, co, hw, k, s, p, need_gx = shape
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, ci, hw, hw, generator=g).to(dtype)
    w = (torch.randn(co, ci, k, k, generator=g) / (ci * k * k) ** 0.5).to(dtype)
    ho = (hw + 2 * p - k) // s + 1
    gy = torch.randn(n, co, ho, ho, generator=g).to(dtype)
    conv = torch.ops.aten.convolution.default
    back = torch.ops.aten.convolution_backward.default
    args = ([s, s], [p, p], [1, 1], False, [0, 0], 1)
    mask = [need_gx, True, False]
    xd, wd, gyd = x.to("neuron"), w.to("neuron"), gy.to("neuron")
    fd, fdb, fc, fcb = interleaved(lambda: conv(xd, wd, None, *args), lambda: conv(x, w, None, *args), repeats,
                                   clock)
    bd, bdb, bc, bcb = interleaved(lambda: back(gyd, xd, wd, None, *args, mask),
                                   lambda: back(gy, x, w, None, *args, mask), repeats, clock)
    fwd, bwd = ((fd, fdb), (fc, fcb)), ((bd, bdb), (bc, bcb))
    flops = 2.0 * n * co * ho * ho * ci * k * k
    return fwd, bwd, flops, flops * (2 if need_gx else 1)


def fmt(t):
    return f"{t[0] * 1e3:8.3f} [{t[1] * 1e3:7.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cpu-threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "both"], default="both")
    ap.add_argument("--only", default=None, help="run the shapes whose label contains this")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time process CPU seconds (every thread) instead of wall time: stable on a loaded machine")
    args = ap.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    torch.set_num_threads(args.cpu_threads)
    dtypes = [torch.float32, torch.bfloat16] if args.dtype == "both" else [getattr(torch, args.dtype)]
    print(f"load average {os.getloadavg()[0]:.2f}; CPU threads {torch.get_num_threads()}; "
          f"neuron threads {os.environ.get('TORCHNEURON_NUM_THREADS', 'default')}")
    print(f"ms ({'process CPU time' if args.cpu_time else 'wall time'}): median [best]; "
          "ratio = CPU median / neuron median")
    for dtype in dtypes:
        print(f"\n{str(dtype).replace('torch.', '')}")
        print(f"{'shape':32} {'fwd neuron':>19} {'fwd cpu':>19} {'ratio':>6} "
              f"{'bwd neuron':>19} {'bwd cpu':>19} {'ratio':>6} {'GF/s f/b':>11}")
        tot = [0.0, 0.0, 0.0, 0.0]
        for shape in SHAPES:
            if args.only and args.only not in shape[0]:
                continue
            (fd, fc), (bd, bc), ff, bf = case(shape, dtype, args.repeats, clock)
            if shape[0].startswith("cnn"):
                for i, v in enumerate((fd[0], fc[0], bd[0], bc[0])):
                    tot[i] += v
            print(f"{shape[0]:32} {fmt(fd)} {fmt(fc)} {fc[0] / fd[0]:6.2f} {fmt(bd)} {fmt(bc)} "
                  f"{bc[0] / bd[0]:6.2f} {ff / fd[0] / 1e9:5.0f}/{bf / bd[0] / 1e9:<5.0f}")
        if tot[0] > 0:
            print(f"{'cnn total (sum of medians)':32} {tot[0] * 1e3:8.3f} {'':9} {tot[1] * 1e3:8.3f} {'':9} "
                  f"{tot[1] / tot[0]:6.2f} {tot[2] * 1e3:8.3f} {'':9} {tot[3] * 1e3:8.3f} {'':9} "
                  f"{tot[3] / tot[2]:6.2f}")


if __name__ == "__main__":
    main()
