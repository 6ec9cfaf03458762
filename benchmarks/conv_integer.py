"""Integer convolution on neuron versus PyTorch CPU, same process.

Forward F.conv2d / F.conv3d / F.conv_transpose2d in int8 and int64 (the
CPU's slow_conv2d: im2col and its integer GEMM; for transposed and
dilated convolutions the CPU computes only int64). Neuron and CPU runs
alternate (timing.interleaved); each figure is the median of the runs
(best run in brackets); ratio = CPU median / neuron median (above 1.0:
neuron is faster). PyTorch CPU uses 2 threads unless --cpu-threads says
otherwise; neuron uses TORCHNEURON_NUM_THREADS (default: all cores).

    python benchmarks/conv_integer.py [--repeats N] [--cpu-threads T] [--only SUBSTR]
"""

import argparse
import os

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import interleaved

# label, function, input shape, weight shape, keyword arguments, dtypes
SHAPES = [
    ("conv2d 32->64 16x16 3x3 b8", F.conv2d, (8, 32, 16, 16), (64, 32, 3, 3), dict(padding=1),
     [torch.int8, torch.int64]),
    ("conv2d 64->64 28x28 3x3 s2 b4", F.conv2d, (4, 64, 28, 28), (64, 64, 3, 3), dict(padding=1, stride=2),
     [torch.int8, torch.int64]),
    ("conv2d 128->32 28x28 1x1 b4", F.conv2d, (4, 128, 28, 28), (32, 128, 1, 1), {}, [torch.int8, torch.int64]),
    ("conv2d depthwise 64 28x28 3x3 b4", F.conv2d, (4, 64, 28, 28), (64, 1, 3, 3), dict(padding=1, groups=64),
     [torch.int8, torch.int64]),
    ("conv1d 64->64 L512 k5 b8", F.conv1d, (8, 64, 512), (64, 64, 5), dict(padding=2), [torch.int8, torch.int64]),
    ("conv3d 16->32 12^3 3x3x3 b2", F.conv3d, (2, 16, 12, 12, 12), (32, 16, 3, 3, 3), dict(padding=1),
     [torch.int8, torch.int64]),
    ("conv_transpose2d 64->32 14x14 s2 b4", F.conv_transpose2d, (4, 64, 14, 14), (64, 32, 4, 4),
     dict(stride=2, padding=1), [torch.int64]),
]


def values(dtype, shape, gen):
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return torch.randint(lo, hi + 1, shape, generator=gen).to(dtype)


def fmt(t):
    return f"{t[0] * 1e3:9.3f} [{t[1] * 1e3:8.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--cpu-threads", type=int, default=2)
    ap.add_argument("--only", default=None, help="run the shapes whose label contains this")
    args = ap.parse_args()
    torch.set_num_threads(args.cpu_threads)
    print(f"load average {os.getloadavg()[0]:.2f}; CPU threads {torch.get_num_threads()}; "
          f"neuron threads {os.environ.get('TORCHNEURON_NUM_THREADS', 'default')}")
    print("ms: median [best]; ratio = CPU median / neuron median")
    print(f"{'shape':38} {'dtype':6} {'neuron':>20} {'cpu':>20} {'ratio':>6}")
    for label, fn, xs, ws, kwargs, dtypes in SHAPES:
        if args.only and args.only not in label:
            continue
        for dtype in dtypes:
            gen = torch.Generator().manual_seed(0)
            x, w = values(dtype, xs, gen), values(dtype, ws, gen)
            xd, wd = x.to("neuron"), w.to("neuron")
            assert torch.equal(fn(xd, wd, **kwargs).cpu(), fn(x, w, **kwargs)), label
            d, db, c, cb = interleaved(lambda: fn(xd, wd, **kwargs), lambda: fn(x, w, **kwargs), args.repeats)
            print(f"{label:38} {str(dtype).replace('torch.', ''):6} {fmt((d, db))} {fmt((c, cb))} {c / d:6.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
