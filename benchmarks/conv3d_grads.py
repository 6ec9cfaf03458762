"""3-d convolution on neuron versus PyTorch CPU, one op at a time: the
forward, the input gradient and the weight gradient separately
(aten.convolution_backward with one output mask each), float32 and
bfloat16, NCDHW and channels_last_3d, stride 1 and 2. vision3d_ops.py times
forward and forward + backward; this splits the backward to say which
gradient is slow.

The two sides run turn by turn (timing.interleaved); each figure is the
median (best shown too); ratio = CPU time / neuron time. With --cpu-time,
process CPU time (every thread) instead of wall time; with one thread per
side both count one core's work, whatever the other processes' load:

    TORCHNEURON_NUM_THREADS=1 python benchmarks/conv3d_grads.py --cpu-time --cpu-threads 1
    python benchmarks/conv3d_grads.py [--repeats N] [--cpu-threads T] [--cpu-time] [--only TEXT]
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import host_line, interleaved

CASES = [
    ("3x3x3 [4,16,8,28,28]->32", (4, 16, 8, 28, 28), (32, 16, 3, 3, 3), (1, 1, 1)),
    ("3x3x3/2 [4,32,8,28,28]->64", (4, 32, 8, 28, 28), (64, 32, 3, 3, 3), (2, 2, 2)),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--only", action="append", help="run only the rows whose name contains this text")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(host_line())
    print(f"clock: {'process CPU time' if args.cpu_time else 'wall time'}; turn by turn, median of {args.repeats}; "
          f"ratio = CPU / neuron")
    print(f"{'case':<52}{'neuron ms':>10}{'best':>8}{'cpu ms':>8}{'best':>8}{'ratio':>7}")
    for dtype in (torch.float32, torch.bfloat16):
        for name, xs, ws, stride in CASES:
            for cl in (False, True):
                x = torch.randn(*xs).to(dtype)
                w = (torch.randn(*ws) * 0.1).to(dtype)
                if cl:
                    x = x.contiguous(memory_format=torch.channels_last_3d)
                g = torch.randn_like(F.conv3d(x, w, None, stride, 1))
                ops = {}
                for dev in ("neuron", "cpu"):
                    xd, wd, gd = x.to(dev), w.to(dev), g.to(dev)

                    def grad(mask, xd=xd, wd=wd, gd=gd):
                        torch.ops.aten.convolution_backward(gd, xd, wd, None, stride, (1, 1, 1), (1, 1, 1), False,
                                                            (0, 0, 0), 1, mask)
                    ops.setdefault("fwd", []).append(lambda xd=xd, wd=wd: F.conv3d(xd, wd, None, stride, 1))
                    ops.setdefault("input grad", []).append(lambda grad=grad: grad([True, False, False]))
                    ops.setdefault("weight grad", []).append(lambda grad=grad: grad([False, True, False]))
                for what, (dev_fn, cpu_fn) in ops.items():
                    row = f"{str(dtype)[6:]} {name}{' CL' if cl else ''} {what}"
                    if args.only and not any(o in row for o in args.only):
                        continue
                    with torch.no_grad():
                        nm, nb, cm, cb = interleaved(dev_fn, cpu_fn, args.repeats, clock=clock)
                    print(f"{row:<52}{nm * 1e3:10.2f}{nb * 1e3:8.2f}{cm * 1e3:8.2f}{cb * 1e3:8.2f}{cm / nm:7.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
