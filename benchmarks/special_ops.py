"""Special pointwise math on neuron versus PyTorch CPU, measured in the same
run: logaddexp(2), xlog1py, nextafter, heaviside, gcd/lcm, sinc, entr, the
shrinks (forward and gradient), glu (forward and gradient) and frexp.

Each op runs on 4M elements (--quick: 1M) of float32 (int32 for gcd/lcm,
bfloat16 rows where noted). Each time is the median over blocks of runs,
neuron and CPU taking turns (best shown too); ratio = CPU time / neuron
time (above 1.0 neuron is faster).
PyTorch CPU runs with --cpu-threads threads (default 2).

    python benchmarks/special_ops.py [--repeats N] [--cpu-threads T] [--quick]
                                     [--cpu-time] [--only NAME,...] [--settle S]

--cpu-time times CPU seconds of every thread (time.process_time) instead of
wall clock: on a loaded host, with --cpu-threads 1 and
TORCHNEURON_NUM_THREADS=1, the kernels' cost rather than the load's.
--only runs the rows whose name starts with one of the given names.
--settle S (wall clock only; default 0.01) sleeps S seconds after each CPU
run, untimed: PyTorch's OpenMP worker spins for about 4.5 ms of a core
after every CPU call, and a neuron run started in that window had only one
free core for its two kernel threads (a 2-thread median no faster than
one thread; docs/performance.md, "The two-thread wall loss of 1M-element
pointwise ops"). --settle 0 gives the old in-turn timing.

Rows below 1.0 (first measurement, --quick, AMD EPYC with 2 cores shared
with other jobs, so noisy): sinc called a scalar libm function per element
(sin); since session 46 float32 sinc and entr run without libm, vectorised
(docs/performance.md, "The two-thread wall loss of 1M-element pointwise
ops"). (frexp did too, one frexpf call
per element; since session 45 it reads the exponent off the bits in a
vectorised loop: docs/performance.md, "frexp without libm".) gcd ran
PyTorch's Euclid loop per element, as the CPU does (0.8x); since session
46 contiguous int32 runs take a vectorised binary gcd (pointwise_gcd.c). Session 44
vectorised float32 logaddexp(2) (an fmaxf call had kept the loop scalar),
nextafter (bit stepping instead of libm) and glu_backward (e^-b in vmath's
double exp instead of libm expf): docs/performance.md, "Pointwise speed
clause rows".
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import host_line, interleaved


def case(name, make, fn, repeats, clock=time.perf_counter, settle=0.0):
    """Neuron (each run synchronized) and CPU runs in turns
    (timing.interleaved), so that both sides share the host's load. (Not
    alternating_blocks: its runs free their outputs before the block's one
    synchronize, and the adaptive fuser (runtime/src/fuse/adaptive.c) drops
    queued ops whose every output is freed: 0.01 ms per 1M-element op.)"""
    inputs = {dev: [t.to(dev) for t in make()] for dev in ("neuron", "cpu")}

    def runner(dev):
        def run():
            with torch.no_grad():
                return fn(*inputs[dev])  # kept by interleaved until the synchronize
        return run
    nm, nb, cm, cb = interleaved(runner("neuron"), runner("cpu"), repeats, clock=clock, settle=settle)
    print(f"{name:<40}{nm * 1e3:9.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--settle", type=float, default=0.01)
    args = parser.parse_args()
    only = [o for o in args.only.split(",") if o]
    clock = time.process_time if args.cpu_time else time.perf_counter

    def row(name, make, fn, repeats):  # case(), filtered by --only, with the chosen clock
        if not only or any(name.startswith(o) for o in only):
            case(name, make, fn, repeats, clock, 0.0 if args.cpu_time else args.settle)

    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    n = (1 << 20) if args.quick else (1 << 22)
    print(host_line())
    print(f"{n} elements; CPU threads: {args.cpu_threads}; median of {args.repeats} runs a side, in turns "
          f"(best shown too); {'CPU' if args.cpu_time else 'wall'} time"
          f"{'' if args.cpu_time else f', {args.settle * 1e3:g} ms settle after each CPU run'}; ratio = CPU / neuron")
    print(f"{'case':<40}{'neuron ms':>9}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")

    def randn(*dtypes):
        return lambda: [torch.randn(n).to(d) for d in dtypes]

    def ints():
        return [torch.randint(-1000, 1000, (n,), dtype=torch.int32) for _ in range(2)]

    f32, bf16 = torch.float32, torch.bfloat16
    row("logaddexp f32", randn(f32, f32), torch.logaddexp, args.repeats)
    row("logaddexp bf16", randn(bf16, bf16), torch.logaddexp, args.repeats)
    row("logaddexp2 f32", randn(f32, f32), torch.logaddexp2, args.repeats)
    row("xlog1py f32", randn(f32, f32), torch.special.xlog1py, args.repeats)
    row("nextafter f32", randn(f32, f32), torch.nextafter, args.repeats)
    row("heaviside f32", randn(f32, f32), torch.heaviside, args.repeats)
    row("gcd int32", ints, torch.gcd, args.repeats)
    row("lcm int32", ints, torch.lcm, args.repeats)
    row("sinc f32", randn(f32), torch.sinc, args.repeats)
    row("entr f32", randn(f32), torch.special.entr, args.repeats)
    row("hardshrink f32", randn(f32), F.hardshrink, args.repeats)
    row("softshrink f32", randn(f32), F.softshrink, args.repeats)
    row("softshrink_backward f32", randn(f32, f32),
         lambda g, x: torch.ops.aten.softshrink_backward(g, x, 0.5), args.repeats)
    row("glu f32 [n/512, 1024]", lambda: [torch.randn(n // 512, 1024)], lambda x: F.glu(x), args.repeats)
    row("glu bf16 [n/512, 1024]", lambda: [torch.randn(n // 512, 1024).to(bf16)], lambda x: F.glu(x),
         args.repeats)
    row("glu_backward f32 [n/512, 1024]", lambda: [torch.randn(n // 512, 512), torch.randn(n // 512, 1024)],
         lambda g, x: torch.ops.aten.glu_backward(g, x, -1), args.repeats)
    row("frexp f32", randn(f32), torch.frexp, args.repeats)
    row("frexp f64", lambda: [torch.randn(n, dtype=torch.float64)], torch.frexp, args.repeats)


if __name__ == "__main__":
    main()
