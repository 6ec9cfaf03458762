"""GEMM micro-kernels against PyTorch CPU, turn by turn, without the Python extension.

Runs without the Python extension: each turn times PyTorch CPU's
torch.matmul (best of the turn's reps), then the runtime's
`gemm_kernel_time` (built in the build tree: rt_gemm on the kernel thread
pool) with each kernel, best of the same reps. Prints GF/s of the medians
and the median over turns of the per-turn ratio CPU time / neuron time
(above 1.0: neuron faster), and the load average.

`--dtype bfloat16` (default): bfloat16 in and out, the AMX and AVX512-BF16
kernels against oneDNN on square and MLP products. `--dtype float32`: the
float32 kernels (avx512_12x32, the hand-scheduled AVX-512 tile;
avx512cc_12x32, its compiler-scheduled twin; avx2_6x16) against MKL on the products of
benchmarks/gemm.py (nn, nt = second operand stored transposed, tn = first
operand stored transposed, and attention's batched ones).

`--clock cpu` compares on one thread by CPU time instead of wall time: the
PyTorch side by the calling thread's CPU time (torch.set_num_threads(1)
computes there), the runtime by the timer's process CPU time (its pool has
one thread). Other processes taking turns on the core then change little
but cache contents, so kernels can be compared on a loaded host (load 8-12),
where wall times vary by 2x between runs.

`--clock scaling` leaves PyTorch out: each timer runs each product on one
kernel thread and on --cpu-threads threads (TORCHNEURON_NUM_THREADS) in
every turn, by wall time, and prints the median per-turn ratio of the two
(what the pool's split gains; 2.0 is perfect on two threads).

`--timer` given twice (say, a timer built from main, then the branch's)
times each kernel with both in every turn: before/after in the same minute.

    python benchmarks/gemm_kernels.py --timer build/runtime/gemm_kernel_time [--timer OTHER]
        [--turns 5] [--dtype bfloat16|float32] [--clock wall|cpu|scaling] [--kernels a,b] [--only SUBSTRING]
        [--shapes default|gemm]
"""

import argparse
import os
import statistics
import subprocess
import time

import torch

BF16_SHAPES = [(1, 2048, 2048, 2048, "nn"), (1, 1024, 1024, 1024, "nn"), (1, 2048, 3072, 768, "nn"),
               (1, 2048, 768, 3072, "nn"), (1, 512, 512, 512, "nn")]
# batch, m, n, k, layout: benchmarks/gemm.py's float32 products (squares up to 2048).
F32_SHAPES = [(1, 256, 256, 256, "nn"), (1, 512, 512, 512, "nn"), (1, 1024, 1024, 1024, "nn"),
              (1, 2048, 2048, 2048, "nn"), (1, 2048, 3072, 768, "nn"), (1, 2048, 768, 3072, "nn"),
              (1, 2048, 768, 768, "nn"), (1, 2048, 3072, 768, "nt"), (1, 2048, 1024, 256, "nt"),
              (1, 2048, 256, 1024, "nt"), (1, 2048, 768, 256, "nt"), (1, 2048, 256, 1024, "nn"),
              (1, 2048, 1024, 256, "nn"), (1, 1024, 256, 2048, "tn"), (1, 256, 1024, 2048, "tn"),
              (1, 256, 256, 2048, "tn"), (1, 2048, 384, 128, "nt"), (1, 2048, 512, 128, "nt"),
              (1, 2048, 128, 128, "nt"), (1, 2048, 128, 512, "nt"), (1, 2048, 128, 384, "nn"),
              (1, 2048, 512, 128, "nn"), (1, 384, 128, 2048, "tn"), (1, 128, 512, 2048, "tn"),
              (12, 128, 128, 64, "nn"), (12, 128, 64, 128, "nn")]


def operands(batch, m, n, k, layout, dtype):
    a = torch.randn(batch, k, m).transpose(1, 2) if layout == "tn" else torch.randn(batch, m, k)
    b = torch.randn(batch, n, k).transpose(1, 2) if layout == "nt" else torch.randn(batch, k, n)
    return (a[0], b[0]) if batch == 1 else (a, b)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timer", required=True, action="append", help="path of gemm_kernel_time (repeatable)")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--clock", choices=["wall", "cpu", "scaling"], default="wall")
    parser.add_argument("--kernels", help="default: amxbf16,avx512bf16 (bfloat16), avx512_12x32 (float32)")
    parser.add_argument("--only", action="append", help="keep products whose label contains this")
    parser.add_argument("--shapes", choices=["default", "gemm"], default="default",
                        help="gemm: benchmarks/gemm.py's products (the float32 list) for either dtype")
    args = parser.parse_args()
    if args.clock == "scaling":
        return scaling(args)
    f32 = args.dtype == "float32"
    threads = 1 if args.clock == "cpu" else args.cpu_threads
    torch.set_num_threads(threads)
    env = dict(os.environ)
    if args.clock == "cpu":  # the timer's pool: one thread, its CPU time is the work
        env.pop("TORCHNEURON_NUM_THREADS", None)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    field = 1 if args.clock == "cpu" else 0
    names = (args.kernels or ("avx512_12x32" if f32 else "amxbf16,avx512bf16")).split(",")
    # one column per kernel and timer: (label, kernel, timer)
    kernels = [(f"{name}[{i}]" if len(args.timer) > 1 else name, name, timer)
               for name in names for i, timer in enumerate(args.timer)]
    for i, timer in enumerate(args.timer):
        print(f"timer [{i}]: {timer}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.dtype}; clock {args.clock}; "
          f"PyTorch threads {threads}")
    ratios = []
    for batch, m, n, k, layout in F32_SHAPES if f32 or args.shapes == "gemm" else BF16_SHAPES:
        product = (f"{batch} x " if batch > 1 else "") + f"{m}x{k} @ {k}x{n} {layout}"
        if args.only and not any(o in product for o in args.only):
            continue
        a, b = operands(batch, m, n, k, layout, torch.float32 if f32 else torch.bfloat16)
        if not f32:
            a, b = a.bfloat16(), b.bfloat16()
        torch.matmul(a, b)
        flops = 2 * batch * m * n * k
        reps = max(3, int(2e10 / flops))
        times = {name: [] for name in ["cpu"] + [label for label, _, _ in kernels]}
        for _ in range(args.turns):
            best = float("inf")
            for _ in range(reps):
                t0 = clock()
                torch.matmul(a, b)
                best = min(best, clock() - t0)
            times["cpu"].append(best)
            time.sleep(0.05)  # let the OpenMP workers stop spinning
            for label, name, timer in kernels:
                cmd = [timer, str(m), str(n), str(k), name, str(reps)]
                if f32 or layout != "nn" or batch > 1:
                    cmd += [layout, "float32" if f32 else "bfloat16", str(batch)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                times[label].append(float(out.stdout.split()[field]))
        gflops = {name: flops / statistics.median(v) / 1e9 for name, v in times.items()}
        labels = [label for label, _, _ in kernels]
        r = {label: statistics.median(c / x for c, x in zip(times["cpu"], times[label])) for label in labels}
        ratios.append([r[label] for label in labels])
        cells = "  ".join(f"{label} {gflops[label]:.1f} GF/s ({r[label]:.2f}x)" for label in labels)
        print(f"{product}: cpu {gflops['cpu']:.1f} GF/s  {cells}", flush=True)
    for i, (label, _, _) in enumerate(kernels if ratios else []):
        col = [row[i] for row in ratios]
        print(f"{label}: geometric mean ratio {statistics.geometric_mean(col):.2f}x, min {min(col):.2f}x")
    print("load average at the end", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def timer_seconds(timer, kernel, batch, m, n, k, layout, f32, reps, threads):
    """Best wall time of one product over reps calls of gemm_kernel_time on `threads` kernel threads."""
    env = dict(os.environ)
    env.pop("TORCHNEURON_NUM_THREADS", None)
    if threads > 1:  # the timer starts the pool only when told a size
        env["TORCHNEURON_NUM_THREADS"] = str(threads)
    cmd = [timer, str(m), str(n), str(k), kernel, str(reps), layout, "float32" if f32 else "bfloat16", str(batch)]
    return float(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout.split()[0])


def scaling(args):
    f32 = args.dtype == "float32"
    kernel = (args.kernels or ("avx512_12x32" if f32 else "amxbf16")).split(",")[0]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.dtype}; {kernel}; "
          f"1 against {args.cpu_threads} kernel threads, wall time")
    for i, timer in enumerate(args.timer):
        print(f"timer [{i}]: {timer}")
    gains = [[] for _ in args.timer]
    for batch, m, n, k, layout in F32_SHAPES if f32 or args.shapes == "gemm" else BF16_SHAPES:
        product = (f"{batch} x " if batch > 1 else "") + f"{m}x{k} @ {k}x{n} {layout}"
        if args.only and not any(o in product for o in args.only):
            continue
        flops = 2 * batch * m * n * k
        reps = max(3, int(1e10 / flops))
        times = {(i, t): [] for i in range(len(args.timer)) for t in (1, args.cpu_threads)}
        for _ in range(args.turns):
            for i, timer in enumerate(args.timer):
                for t in (1, args.cpu_threads):
                    times[(i, t)].append(timer_seconds(timer, kernel, batch, m, n, k, layout, f32, reps, t))
        cells = []
        for i in range(len(args.timer)):
            one, many = times[(i, 1)], times[(i, args.cpu_threads)]
            gain = statistics.median(a / b for a, b in zip(one, many))
            gains[i].append(gain)
            cells.append(f"[{i}] {flops / statistics.median(one) / 1e9:.1f} -> "
                         f"{flops / statistics.median(many) / 1e9:.1f} GF/s ({gain:.2f}x)")
        print(f"{product}: " + "  ".join(cells), flush=True)
    for i, g in enumerate(gains if gains and gains[0] else []):
        print(f"[{i}]: geometric mean gain {statistics.geometric_mean(g):.2f}x, min {min(g):.2f}x")
    print("load average at the end", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
