"""GEMM throughput on neuron versus PyTorch CPU (MKL/oneDNN), same process.

Square products 256..4096 and transformer-shaped ones (GPT-2 small MLP and
projection shapes for 2048 tokens, the training products of
`benchmarks/train.py --profile gpt-wide` (width 256, MLP 1024, 2048 tokens:
forward x @ W^T "nt", input gradient dy @ W "nn", weight gradient dy^T @ x
"tn" with the transposed operand as autograd hands it over), attention-like
batched products, and memory-bound matrix-vector shapes), in float32 and
bfloat16 (float16 on request: float32 accumulation of exact products on
neuron, no target). `--only SUBSTRING` keeps the products whose label contains it.

Timing (`--timing blocks`, the default): each side runs blocks of
back-to-back products of about 10 ms or more, and the blocks alternate, so
that load from other processes hits both sides alike. A neuron block is
timed from its first launch to one synchronize after its last, as
accelerator benchmarks time a device that runs asynchronously; it starts
50 ms after the CPU block, once PyTorch's OpenMP workers (which spin for
about 10 ms after a CPU call) have stopped taking the cores. The time per
product is the median over the blocks (the best block is printed too: on a
shared machine it shows what each side does undisturbed). `--timing
interleaved` alternates single calls instead, with a synchronize after each
neuron call: it charges neuron with the wake-up of its threads and, for short
products, with cores still taken by the CPU's spinning OpenMP workers.
GFLOP/s counts 2*m*n*k per product; ratio is CPU time / neuron time (above
1.0 means neuron is faster). PyTorch CPU runs with 2
threads unless --cpu-threads says otherwise; neuron uses its kernel thread
pool (TORCHNEURON_NUM_THREADS, default: all cores).

    python benchmarks/gemm.py [--repeats N] [--cpu-threads T] [--dtype float32|bfloat16|float16]
                              [--timing blocks|interleaved]
"""

import argparse
import os
import statistics

import torch
import torchneuron  # noqa: F401

from timing import alternating_blocks, interleaved

SHAPES = [
    # label, batch, m, k, n, layout of the second operand
    ("square 256", 1, 256, 256, 256, "nn"),
    ("square 512", 1, 512, 512, 512, "nn"),
    ("square 1024", 1, 1024, 1024, 1024, "nn"),
    ("square 2048", 1, 2048, 2048, 2048, "nn"),
    ("square 4096", 1, 4096, 4096, 4096, "nn"),
    ("mlp up   2048x768 @ 768x3072", 1, 2048, 768, 3072, "nn"),
    ("mlp down 2048x3072 @ 3072x768", 1, 2048, 3072, 768, "nn"),
    ("proj     2048x768 @ 768x768", 1, 2048, 768, 768, "nn"),
    ("linear   2048x768 @ (3072x768)^T", 1, 2048, 768, 3072, "nt"),
    # gpt-wide training (2048 tokens, width 256, MLP 1024): forward, grad input, grad weight
    ("wide fc    2048x256 @ (1024x256)^T", 1, 2048, 256, 1024, "nt"),
    ("wide proj  2048x1024 @ (256x1024)^T", 1, 2048, 1024, 256, "nt"),
    ("wide qkv   2048x256 @ (768x256)^T", 1, 2048, 256, 768, "nt"),
    ("wide dx fc 2048x1024 @ 1024x256", 1, 2048, 1024, 256, "nn"),
    ("wide dx pr 2048x256 @ 256x1024", 1, 2048, 256, 1024, "nn"),
    ("wide dW fc (2048x1024)^T @ 2048x256", 1, 1024, 2048, 256, "tn"),
    ("wide dW pr (2048x256)^T @ 2048x1024", 1, 256, 2048, 1024, "tn"),
    ("wide dW at (2048x256)^T @ 2048x256", 1, 256, 2048, 256, "tn"),
    # gpt training at width 128 (2048 tokens, MLP 512; benchmarks/train.py's GPT 2L 128w): forward,
    # grad input, grad weight. Reported as their own group, outside the overall geometric mean
    # (which stays comparable with earlier runs).
    ("small qkv   2048x128 @ (384x128)^T", 1, 2048, 128, 384, "nt"),
    ("small fc    2048x128 @ (512x128)^T", 1, 2048, 128, 512, "nt"),
    ("small proj  2048x128 @ (128x128)^T", 1, 2048, 128, 128, "nt"),
    ("small mproj 2048x512 @ (128x512)^T", 1, 2048, 512, 128, "nt"),
    ("small dx qkv 2048x384 @ 384x128", 1, 2048, 384, 128, "nn"),
    ("small dx fc  2048x128 @ 128x512", 1, 2048, 128, 512, "nn"),
    ("small dW qkv (2048x384)^T @ 2048x128", 1, 384, 2048, 128, "tn"),
    ("small dW fc  (2048x128)^T @ 2048x512", 1, 128, 2048, 512, "tn"),
    ("attn bmm 12x(128x64 @ 64x128)", 12, 128, 64, 128, "nn"),
    ("attn bmm 12x(128x128 @ 128x64)", 12, 128, 128, 64, "nn"),
    ("matrix-vector 4096x4096 @ 4096x1", 1, 4096, 4096, 1, "nn"),
    ("linear, 1 token: 1x768 @ (3072x768)^T", 1, 1, 768, 3072, "nt"),
]

# Geometric-mean targets (issue 19): float32 at least MKL's speed, bfloat16
# at least 0.9x oneDNN's.
TARGETS = {"float32": 1.0, "bfloat16": 0.9}


def operands(batch, m, k, n, layout, dtype):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(batch, k, m, generator=g).to(dtype).transpose(1, 2) if layout == "tn" else \
        torch.randn(batch, m, k, generator=g).to(dtype)
    b = torch.randn(batch, n, k, generator=g).to(dtype).transpose(1, 2) if layout == "nt" else \
        torch.randn(batch, k, n, generator=g).to(dtype)
    if batch == 1:
        a, b = a[0], b[0]
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9, help="timed blocks (or calls) per side")
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], action="append")
    parser.add_argument("--max-size", type=int, default=4096, help="skip squares above this")
    parser.add_argument("--only", action="append", help="keep products whose label contains this")
    parser.add_argument("--timing", choices=["blocks", "interleaved"], default="blocks",
                        help="alternate blocks of runs (default) or single calls")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    dtypes = [getattr(torch, d) for d in (args.dtype or ["float32", "bfloat16"])]
    load = os.getloadavg()
    print(f"CPU threads: {args.cpu_threads}; neuron threads: "
          f"{os.environ.get('TORCHNEURON_NUM_THREADS', os.cpu_count())}; median of {args.repeats} {args.timing}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'product':<40}{'dtype':<10}{'neuron GF/s':>12}{'cpu GF/s':>10}{'ratio':>7}"
          f"  {'best: neuron':>12}{'cpu':>8}{'ratio':>7}")
    ratios = {}
    for dtype in dtypes:
        for label, batch, m, k, n, layout in SHAPES:
            if label.startswith("square") and m > args.max_size:
                continue
            if args.only and not any(o in label for o in args.only):
                continue
            a, b = operands(batch, m, k, n, layout, dtype)
            da, db = a.to("neuron"), b.to("neuron")
            if layout == "nt":  # keep the transposed storage on neuron too
                db = b.transpose(-1, -2).contiguous().to("neuron").transpose(-1, -2)
            if layout == "tn":
                da = a.transpose(-1, -2).contiguous().to("neuron").transpose(-1, -2)
            flops = 2.0 * batch * m * n * k
            reps = args.repeats if flops < 2e10 else max(3, args.repeats // 2)
            if args.timing == "blocks":  # blocks of about 10 ms or more
                block = max(1, min(40, round(1e-2 * 150e9 / flops)))
                t_dev, b_dev, t_cpu, b_cpu = alternating_blocks(lambda: da @ db, lambda: a @ b, reps, block)
            else:
                t_dev, b_dev, t_cpu, b_cpu = interleaved(lambda: da @ db, lambda: a @ b, reps)
            name = str(dtype).replace("torch.", "")
            if label.startswith("small"):
                ratios.setdefault(name + " gpt-small training", []).append(t_cpu / t_dev)
            else:
                ratios.setdefault(name, []).append(t_cpu / t_dev)
            if label.startswith("wide"):
                ratios.setdefault(name + " gpt-wide training", []).append(t_cpu / t_dev)
            print(f"{label:<40}{name:<10}{flops / t_dev / 1e9:>12.1f}{flops / t_cpu / 1e9:>10.1f}"
                  f"{t_cpu / t_dev:>6.2f}x  {flops / b_dev / 1e9:>12.1f}{flops / b_cpu / 1e9:>8.1f}"
                  f"{b_cpu / b_dev:>6.2f}x", flush=True)
    for name, r in ratios.items():
        target = TARGETS.get(name.split()[0])
        print(f"{name}: geometric mean ratio {statistics.geometric_mean(r):.2f}x, min {min(r):.2f}x"
              + (f" (target of the geometric mean: >= {target}x)" if target else ""))
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
