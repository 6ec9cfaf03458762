"""3-d vision ops on neuron versus PyTorch CPU: Conv3d / ConvTranspose3d
(forward, and forward + backward with all three gradients), 3-d pooling
(max, average, adaptive) and 3-d upsampling (nearest, trilinear), on small
video / volumetric shapes, NCDHW and channels_last_3d.

The two sides run turn by turn (timing.interleaved: one neuron run, then
one CPU run, repeated), so that the load of a shared machine falls on both;
each time is the median of those runs (the best is printed too). A ratio
is CPU time / neuron time (above 1.0 means neuron is faster). PyTorch CPU
runs with 2 threads unless --cpu-threads says otherwise. On a busy shared
machine, --cpu-time measures the process's CPU time (all its threads)
instead of wall time, so that other processes' load does not count; with
one thread per side both sides then count the same single core's work:

    TORCHNEURON_NUM_THREADS=1 python benchmarks/vision3d_ops.py --cpu-time --cpu-threads 1
    python benchmarks/vision3d_ops.py [--repeats N] [--cpu-threads T] [--cpu-time] [--only TEXT]
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import host_line, interleaved


def interleaved_cpu_time(fn_dev, fn_cpu, repeats):
    """timing.interleaved with the process's CPU time (every thread) as the clock."""
    return interleaved(fn_dev, fn_cpu, repeats, clock=time.process_time)


OPTIONS = argparse.Namespace(cpu_time=False, only=None)


def case(name, make, fn, backward, repeats):
    if OPTIONS.only and not any(o in name for o in OPTIONS.only):
        return
    runs = []
    for dev in ("neuron", "cpu"):
        inputs = [t.to(dev) for t in make()]
        if backward:
            for t in inputs:
                t.requires_grad_(True)
            grad = torch.randn(fn(*inputs).shape).to(dev)

            def run(inputs=inputs, grad=grad):
                for t in inputs:
                    t.grad = None
                fn(*inputs).backward(grad)
        else:
            def run(inputs=inputs):
                with torch.no_grad():
                    fn(*inputs)
        runs.append(run)
    timer = interleaved_cpu_time if OPTIONS.cpu_time else interleaved
    nm, nb, cm, cb = timer(runs[0], runs[1], repeats)
    print(f"{name:<52}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time (all threads) instead of wall time")
    parser.add_argument("--only", action="append",
                        help="run only the cases whose name contains this text (repeatable)")
    args = parser.parse_args()
    OPTIONS.cpu_time, OPTIONS.only = args.cpu_time, args.only
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    cl = torch.channels_last_3d
    print(host_line())
    print(f"clock: {'process CPU time' if args.cpu_time else 'wall time'}; turn by turn, median of {args.repeats} (best shown too); "
          f"ratio = CPU / neuron")
    print(f"{'case':<52}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")

    convs = [
        ("conv3d 3x3x3 [4,16,8,28,28]->32", (4, 16, 8, 28, 28), (32, 16, 3, 3, 3), dict(padding=1), False),
        ("conv3d 3x3x3/2 [4,32,8,28,28]->64", (4, 32, 8, 28, 28), (64, 32, 3, 3, 3), dict(stride=2, padding=1),
         False),
        ("conv3d 1x1x1 [4,64,8,14,14]->32", (4, 64, 8, 14, 14), (32, 64, 1, 1, 1), {}, False),
        ("conv_transpose3d 2x2x2/2 [4,32,4,14,14]->16", (4, 32, 4, 14, 14), (32, 16, 2, 2, 2), dict(stride=2),
         True),
    ]
    for name, xs, ws, kw, tr in convs:
        op = F.conv_transpose3d if tr else F.conv3d
        x, w, b = torch.randn(*xs), torch.randn(*ws) * 0.1, torch.randn(ws[1] if tr else ws[0])
        for fmt, ftag in ((torch.contiguous_format, ""), (cl, " CL")):
            for bwd in (False, True):
                case(f"{name}{ftag} {'fwd+bwd' if bwd else 'fwd'}",
                     lambda fmt=fmt: [x.contiguous(memory_format=fmt), w, b],
                     lambda x, w, b, op=op, kw=kw: op(x, w, b, **kw), bwd, args.repeats)

    pools = [
        ("max_pool3d 3x3x3/2 [4,32,16,28,28]", lambda t: F.max_pool3d(t, 3, 2, 1)),
        ("avg_pool3d 2x2x2/2 [4,32,16,28,28]", lambda t: F.avg_pool3d(t, 2)),
        ("adaptive_avg_pool3d (2,7,7) [4,32,16,28,28]", lambda t: F.adaptive_avg_pool3d(t, (2, 7, 7))),
        ("adaptive_max_pool3d (2,7,7) [4,32,16,28,28]", lambda t: F.adaptive_max_pool3d(t, (2, 7, 7))),
    ]
    x = torch.randn(4, 32, 16, 28, 28)
    for name, fn in pools:
        for fmt, ftag in ((torch.contiguous_format, ""), (cl, " CL")):
            for bwd in (False, True):
                case(f"{name}{ftag} {'fwd+bwd' if bwd else 'fwd'}", lambda fmt=fmt: [x.contiguous(memory_format=fmt)],
                     fn, bwd, args.repeats)

    upsamples = [
        ("upsample nearest3d x2 [4,16,8,28,28]", lambda t: F.interpolate(t, scale_factor=2)),
        ("upsample trilinear3d x2 [4,16,8,28,28]", lambda t: F.interpolate(t, scale_factor=2, mode="trilinear")),
    ]
    x = torch.randn(4, 16, 8, 28, 28)
    for name, fn in upsamples:
        for fmt, ftag in ((torch.contiguous_format, ""), (cl, " CL")):
            for bwd in (False, True):
                case(f"{name}{ftag} {'fwd+bwd' if bwd else 'fwd'}", lambda fmt=fmt: [x.contiguous(memory_format=fmt)],
                     fn, bwd, args.repeats)


if __name__ == "__main__":
    main()
