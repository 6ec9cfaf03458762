"""Vision ops on neuron versus PyTorch CPU: pooling, upsampling, padding,
unfold/fold, convolution, uint8 image resizing.

ResNet-like shapes ([32, 64, 56, 56] 3x3 convolution, the stem's max pool)
and a small CNN's layers, forward and forward+backward, NCHW and
channels_last. Each time is the median of several runs measured in this
process (the best run is printed too: on a shared machine it shows what each
side does undisturbed); a ratio is CPU time / neuron time (above 1.0 means
neuron is faster). The uint8 resize rows alternate neuron and CPU runs
(turn by turn, timing.interleaved, at least 9 each; with --cpu-time in CPU
seconds of the process per call instead of wall-clock). PyTorch CPU runs with 2 threads unless --cpu-threads says
otherwise; GFLOP/s counts 2 * MACs of the convolution (3x for fwd+bwd).

    python benchmarks/vision_ops.py [--repeats N] [--cpu-threads T] [--quick] [--only TEXT] [--cpu-time]
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import interleaved
from timing import median_and_best as seconds




ONLY = None  # --only: run the cases whose name contains this text
CPU_TIME = False  # --cpu-time: the uint8 resize rows in CPU seconds per call


def case(name, make, fn, backward, flops, repeats):
    """Times fn on both devices; with backward, forward + backward of sum(fn * g)."""
    if ONLY and ONLY not in name:
        return
    results = []
    for dev in ("neuron", "cpu"):
        inputs = [t.to(dev) for t in make()]
        if backward:
            for t in inputs:
                if t.is_floating_point():
                    t.requires_grad_(True)
            grad = torch.randn_like(fn(*inputs)).to(dev)

            def run():
                for t in inputs:
                    t.grad = None
                fn(*inputs).backward(grad)
        else:
            def run():
                with torch.no_grad():
                    fn(*inputs)
        sync = torch.neuron.synchronize if dev == "neuron" else (lambda: None)
        results.append(seconds(run, sync, repeats))
    (nm, nb), (cm, cb) = results
    gflops = f"{flops / nm * 1e-9:7.1f}" if flops else " " * 7
    print(f"{name:<44}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{gflops}{cm / nm:7.2f}")


def case_turns(name, make, fn, repeats):
    """Forward only, neuron and CPU runs alternating (turn by turn)."""
    if ONLY and ONLY not in name:
        return
    x = make()
    xd = x.to("neuron")
    clock = time.process_time if CPU_TIME else time.perf_counter
    nm, nb, cm, cb = interleaved(lambda: fn(xd), lambda: fn(x), repeats, clock=clock)
    print(f"{name:<44}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{'':7}{cm / nm:7.2f}")


def conv_flops(n, c, k, oh, ow, kh, kw, groups=1):
    return 2.0 * n * k * oh * ow * (c // groups) * kh * kw


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smaller ResNet batch (8)")
    parser.add_argument("--only", default=None, help="run only the cases whose name contains this text")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the uint8 resize rows in CPU seconds of the process (all threads)")
    args = parser.parse_args()
    global ONLY, CPU_TIME
    ONLY = args.only
    CPU_TIME = args.cpu_time
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    n = 8 if args.quick else 32
    cl = torch.channels_last

    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats} (best shown too); ratio = CPU / neuron")
    print(f"{'case':<44}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'GFLOP/s':>7}{'ratio':>7}")

    def img(*shape, fmt=torch.contiguous_format):
        return lambda: [torch.randn(*shape).contiguous(memory_format=fmt)]

    for bwd in (False, True):
        tag = "fwd+bwd" if bwd else "fwd"
        case(f"max_pool2d 3x3/2 [{n},64,112,112] {tag}", img(n, 64, 112, 112),
             lambda x: F.max_pool2d(x, 3, 2, 1), bwd, 0, args.repeats)
        case(f"max_pool2d 3x3/2 [{n},64,112,112] CL {tag}", img(n, 64, 112, 112, fmt=cl),
             lambda x: F.max_pool2d(x, 3, 2, 1), bwd, 0, args.repeats)
        case(f"fractional_max_pool2d 2 ratio 0.7 [{n},64,56,56] {tag}", img(n, 64, 56, 56),
             lambda x: F.fractional_max_pool2d(x, 2, output_ratio=(0.7, 0.7),
                                               _random_samples=torch.full((x.shape[0], 64, 2), 0.5, device=x.device)),
             bwd, 0, args.repeats)
        case(f"avg_pool2d 2x2/2 [{n},128,56,56] {tag}", img(n, 128, 56, 56),
             lambda x: F.avg_pool2d(x, 2), bwd, 0, args.repeats)
        case(f"adaptive_avg_pool2d 7 [{n},512,14,14] {tag}", img(n, 512, 14, 14),
             lambda x: F.adaptive_avg_pool2d(x, 7), bwd, 0, args.repeats)
        case(f"upsample nearest x2 [{n},64,56,56] {tag}", img(n, 64, 56, 56),
             lambda x: F.interpolate(x, scale_factor=2), bwd, 0, args.repeats)
        case(f"upsample bilinear x2 [{n},64,56,56] {tag}", img(n, 64, 56, 56),
             lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), bwd, 0, args.repeats)
        case(f"upsample bicubic x2 [{n},64,56,56] {tag}", img(n, 64, 56, 56),
             lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), bwd, 0, args.repeats)
        # image preprocessing: antialiased downscaling of a batch of photos
        for filt in ("bilinear", "bicubic"):
            case(f"resize {filt} aa 512->224 [{n // 4},3,512,512] {tag}", img(n // 4, 3, 512, 512),
                 lambda x, filt=filt: F.interpolate(x, size=(224, 224), mode=filt, antialias=True), bwd, 0,
                 args.repeats)
        if not bwd:
            # uint8 photos resized for a classifier (the CPU's fixed-point kernels; forward only), turn by turn
            for fmt, ftag in ((torch.contiguous_format, ""), (cl, " CL")):
                for filt, aa in (("bilinear", False), ("bilinear", True), ("bicubic", False), ("bicubic", True)):
                    case_turns(f"u8 {filt}{' aa' if aa else ''} 512->224 [8,3,512,512]{ftag}",
                               lambda fmt=fmt: torch.randint(0, 256, (8, 3, 512, 512), dtype=torch.uint8)
                               .contiguous(memory_format=fmt),
                               lambda x, filt=filt, aa=aa: F.interpolate(x, size=(224, 224), mode=filt,
                                                                         antialias=aa),
                               max(args.repeats, 9))
        for mode in ("reflect", "replicate"):
            case(f"pad {mode} 3 [{n},64,56,56] {tag}", img(n, 64, 56, 56),
                 lambda x, mode=mode: F.pad(x, (3, 3, 3, 3), mode=mode), bwd, 0, args.repeats)
        # unfold's backward is fold and fold's is unfold: the fwd+bwd rows time both kernels
        case(f"unfold 3x3 pad 1 [{n // 4},64,56,56] {tag}", img(n // 4, 64, 56, 56),
             lambda x: F.unfold(x, 3, padding=1), bwd, 0, args.repeats)
        case(f"fold 3x3 pad 1 -> [{n // 4},64,56,56] {tag}", img(n // 4, 64 * 9, 56 * 56),
             lambda x: F.fold(x, (56, 56), 3, padding=1), bwd, 0, args.repeats)
        case(f"unfold 4x4/4 patches [{n},3,224,224] {tag}", img(n, 3, 224, 224),
             lambda x: F.unfold(x, 4, stride=4), bwd, 0, args.repeats)

    convs = [
        # name, input shape, weight shape, kwargs
        (f"conv 3x3 [{n},64,56,56]", (n, 64, 56, 56), (64, 64, 3, 3), dict(padding=1)),
        (f"conv 1x1 [{n},256,56,56]->64", (n, 256, 56, 56), (64, 256, 1, 1), {}),
        (f"conv 3x3/2 [{n},128,56,56]->128", (n, 128, 56, 56), (128, 128, 3, 3), dict(stride=2, padding=1)),
        (f"conv 7x7/2 stem [{n // 4},3,224,224]", (n // 4, 3, 224, 224), (64, 3, 7, 7), dict(stride=2, padding=3)),
        (f"depthwise 3x3 [{n},128,56,56]", (n, 128, 56, 56), (128, 1, 3, 3), dict(padding=1, groups=128)),
        ("small CNN conv1 [64,1,28,28]->16", (64, 1, 28, 28), (16, 1, 3, 3), dict(padding=1)),
        ("small CNN conv2 [64,16,14,14]->32", (64, 16, 14, 14), (32, 16, 3, 3), dict(padding=1)),
    ]
    for name, xs, ws, kw in convs:
        x = torch.randn(*xs)
        w = torch.randn(*ws) * 0.1
        out = F.conv2d(x, w, **kw)
        flops = conv_flops(xs[0], xs[1], ws[0], out.shape[2], out.shape[3], ws[2], ws[3], kw.get("groups", 1))
        for fmt, ftag in ((torch.contiguous_format, ""), (cl, " CL")):
            for bwd in (False, True):
                tag = "fwd+bwd" if bwd else "fwd"
                case(f"{name}{ftag} {tag}",
                     lambda: [x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt), torch.randn(ws[0])],
                     lambda x, w, b: F.conv2d(x, w, b, **kw), bwd, flops * (3 if bwd else 1), args.repeats)


if __name__ == "__main__":
    main()
