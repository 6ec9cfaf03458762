"""Throughput of large reductions on neuron versus PyTorch CPU.

16M-element float32 and bfloat16 inputs, reduced fully, along the last dim
and along dim 0 of a [4096, 4096] view: sum, amax, logsumexp (and a few
more with --all: aminmax, nansum, cummax and cummin among them; --ops picks
some by name). Each time is the median of several runs measured in this
process (the best run is printed too: on a shared machine it shows what
each side does undisturbed); GB/s counts the input bytes read once; a
ratio is CPU time / neuron time (above 1.0 means neuron is faster).
PyTorch CPU runs with 2 threads unless --cpu-threads says otherwise.

    python benchmarks/reduce.py [--repeats N] [--all] [--ops a,b] [--cpu-threads T]
"""

import argparse

import torch
import torchneuron  # noqa: F401

from timing import median_and_best as seconds




def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--all", action="store_true", help="also mean, var, norm, argmax, cumsum, ...")
    parser.add_argument("--ops", default="", help="comma-separated names: only these (implies --all)")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)

    ops = {
        "sum": lambda x, d: x.sum() if d is None else x.sum(d),
        "amax": lambda x, d: x.amax() if d is None else x.amax(d),
        "logsumexp": lambda x, d: x.logsumexp(tuple(range(x.dim())) if d is None else d),
    }
    if args.all or args.ops:
        ops.update({
            "mean": lambda x, d: x.mean() if d is None else x.mean(d),
            "var": lambda x, d: x.var() if d is None else x.var(d),
            "norm": lambda x, d: torch.linalg.vector_norm(x, dim=d),
            "argmax": lambda x, d: x.argmax(d),
            "cumsum": lambda x, d: x.cumsum(0 if d is None else d),
            # one native pass each (the CPU also makes one)
            "aminmax": lambda x, d: torch.aminmax(x) if d is None else torch.aminmax(x, dim=d),
            "nansum": lambda x, d: x.nansum() if d is None else x.nansum(d),
            "logcumsumexp": lambda x, d: x.logcumsumexp(0 if d is None else d),
            "cummax": lambda x, d: x.cummax(0 if d is None else d),
            "cummin": lambda x, d: x.cummin(0 if d is None else d),
        })
    if args.ops:
        wanted = args.ops.split(",")
        unknown = set(wanted) - set(ops)
        if unknown:
            parser.error(f"unknown ops {sorted(unknown)}; known: {sorted(ops)}")
        ops = {name: ops[name] for name in wanted}
    layouts = {"full": None, "last dim": 1, "dim 0": 0}

    print(f"16M elements as [4096, 4096]; CPU threads: {args.cpu_threads}; "
          f"median of {args.repeats}")
    print(f"{'op':<11}{'dtype':<10}{'reduce':<10}{'neuron ms':>10}{'GB/s':>7}"
          f"{'cpu ms':>9}{'GB/s':>7}{'ratio':>7}  {'best: neuron':>12}{'cpu':>8}{'ratio':>7}")
    for dtype in (torch.float32, torch.bfloat16):
        cpu = torch.randn(4096, 4096).to(dtype)
        dev = cpu.to("neuron")
        nbytes = cpu.numel() * cpu.element_size()
        for name, op in ops.items():
            for label, dim in layouts.items():
                t_dev, best_dev = seconds(lambda: op(dev, dim), torch.neuron.synchronize,
                                          args.repeats)
                t_cpu, best_cpu = seconds(lambda: op(cpu, dim), lambda: None, args.repeats)
                print(f"{name:<11}{str(dtype).replace('torch.', ''):<10}{label:<10}"
                      f"{t_dev * 1e3:>10.2f}{nbytes / t_dev / 1e9:>7.1f}"
                      f"{t_cpu * 1e3:>9.2f}{nbytes / t_cpu / 1e9:>7.1f}{t_cpu / t_dev:>6.2f}x"
                      f"  {best_dev * 1e3:>12.2f}{best_cpu * 1e3:>8.2f}{best_cpu / best_dev:>6.2f}x")


if __name__ == "__main__":
    main()
