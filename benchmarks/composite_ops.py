"""Ops added for the eager-conformance issue, on neuron versus PyTorch CPU
in the same run, turn by turn: cdist/pdist (forward and backward), prelu
(forward and backward), bucketize, repeat_interleave with a repeats tensor,
channel_shuffle, index_reduce, max_unpool2d, ctc_loss (forward and
backward), histogramdd, segment_reduce (forward and backward) and
grid_sample (2-d and 3-d, forward and backward).

Each time is the median of several runs (best shown too); ratio = CPU time
/ neuron time (above 1.0 neuron is faster). PyTorch CPU runs with
--cpu-threads threads (default 2).

    python benchmarks/composite_ops.py [--repeats N] [--cpu-threads T] [--only NAME]

Below 1.0 on the 2-core AMD EPYC (first measurement, 2026-12-05): cdist
(0.44-0.65x) sums every pair in float64 from rows converted one at a time
(the CPU sums float32 in float32 with SIMD); pdist (0.05x) computes the
full distance matrix and its gradient, twice the pairs, through index and
index_put steps, where the CPU has a dedicated triangular kernel;
repeat_interleave (0.43x) and max_unpool2d (0.69x) are three native steps
each where the CPU makes one pass; channel_shuffle (0.44x) is one strided
copy whose 5-d view our copy kernel walks slowly. Each is a kernel of its
own to write when it matters. Second session: histogramdd (0.6-0.7x) is
searchsorted per dimension and one accumulating index_put, where the CPU
has one dedicated pass (a composite written for completeness). Third
session: segment_reduce runs on its own kernel (0.35x as a composite, now
1.7-2.2x).
"""

import argparse

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import median_and_best as seconds


ONLY = None  # --only: run the cases whose name contains this


def case(name, make, fn, repeats, grad=False):
    if ONLY and ONLY not in name:
        return
    results = []
    for dev in ("neuron", "cpu"):
        inputs = [t.to(dev).requires_grad_(grad and t.is_floating_point()) for t in make()]
        sync = torch.neuron.synchronize if dev == "neuron" else (lambda: None)

        def run():
            out = fn(*inputs)
            if grad:
                out.sum().backward()
        results.append(seconds(run, sync, repeats))
    (nm, nb), (cm, cb) = results
    print(f"{name:<44}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--only", help="run only the cases whose name contains this")
    args = parser.parse_args()
    global ONLY
    ONLY = args.only
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    r = args.repeats
    print(f"CPU threads: {args.cpu_threads}; median of {r} (best shown too); ratio = CPU / neuron")
    print(f"{'case':<44}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")
    pts = lambda: [torch.randn(8, 256, 64), torch.randn(8, 256, 64)]  # noqa: E731
    case("cdist p=1 [8,256,64]x[8,256,64]", pts, lambda a, b: torch.cdist(a, b, p=1), r)
    case("cdist p=2 no-mm, fwd+bwd", pts, lambda a, b: torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
         r, grad=True)
    case("cdist p=inf fwd+bwd", pts, lambda a, b: torch.cdist(a, b, p=float("inf")), r, grad=True)
    case("pdist p=2 [512,32] fwd+bwd", lambda: [torch.randn(512, 32)], torch.pdist, r, grad=True)
    case("prelu [32,64,56,56] fwd+bwd", lambda: [torch.randn(32, 64, 56, 56), torch.rand(64)], F.prelu, r, grad=True)
    case("bucketize 4M into 1023 edges", lambda: [torch.randn(1 << 22), torch.linspace(-3, 3, 1023)],
         torch.bucketize, r)
    case("repeat_interleave 64K repeats", lambda: [torch.randint(0, 32, (1 << 16,))], torch.repeat_interleave, r)
    case("channel_shuffle [32,64,56,56] g=4", lambda: [torch.randn(32, 64, 56, 56)],
         lambda x: F.channel_shuffle(x, 4), r)
    case("index_reduce amax [4096,256] <- [16384,256]",
         lambda: [torch.randn(4096, 256), torch.randint(0, 4096, (16384,)), torch.randn(16384, 256)],
         lambda x, i, s: x.index_reduce(0, i, s, "amax"), r)

    def unpool_inputs():
        pooled, idx = F.max_pool2d(torch.randn(32, 64, 56, 56), 2, return_indices=True)
        return [pooled, idx]
    case("max_unpool2d [32,64,28,28] -> 56x56", unpool_inputs, lambda y, i: F.max_unpool2d(y, i, 2), r)

    # CTC: 16 utterances of 200 steps over 32 classes, targets of 20-50 labels
    T, N, C = 200, 16, 32
    lengths_in = [T - 5 * n for n in range(N)]
    lengths_tg = [20 + 2 * n for n in range(N)]
    case("ctc_loss T=200 N=16 C=32 L<=50 fwd+bwd",
         lambda: [torch.randn(T, N, C).log_softmax(2), torch.randint(1, C, (N, 50))],
         lambda lp, tg: F.ctc_loss(lp, tg, lengths_in, lengths_tg), r, grad=True)
    case("histogramdd [1M,3] into 16^3 bins", lambda: [torch.randn(1 << 20, 3)],
         lambda x: torch.histogramdd(x, [16, 16, 16]).hist, r)
    img2 = lambda: [torch.randn(8, 32, 64, 64), torch.rand(8, 64, 64, 2) * 2 - 1]  # noqa: E731
    case("grid_sample bilinear [8,32,64,64] fwd+bwd", img2,
         lambda x, g: F.grid_sample(x, g, align_corners=False), r, grad=True)
    case("grid_sample bicubic reflection [8,32,64,64]", img2,
         lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=False), r)
    case("grid_sample 3-d [2,16,16,32,32] fwd+bwd",
         lambda: [torch.randn(2, 16, 16, 32, 32), torch.rand(2, 16, 32, 32, 3) * 2 - 1],
         lambda x, g: F.grid_sample(x, g, align_corners=True), r, grad=True)
    seg_lengths = torch.full((4096,), 256)
    for reduce in ("sum", "max"):
        case(f"segment_reduce {reduce} [1M,4] in 4096 fwd+bwd", lambda: [torch.randn(1 << 20, 4)],
             lambda x, red=reduce: torch.segment_reduce(x, red, lengths=seg_lengths.to(x.device)), r, grad=True)


if __name__ == "__main__":
    main()
