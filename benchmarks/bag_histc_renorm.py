"""embedding_bag (sum, mean, max; forward and forward+backward), histc and
renorm on neuron versus PyTorch CPU, measured in the same run with
alternating timed runs (interleaved), medians of --repeats.

Shapes: a [100K, 64] float32 table, 64K indices in 4K bags (a recommender's
pooled lookup); histc of 16M float32 values into 100 bins; renorm of a
[4096, 4096] float32 matrix along dim 0 (p=2). ratio = cpu / neuron: above
1.0 means neuron is faster. PyTorch CPU runs with --cpu-threads threads.

    python benchmarks/bag_histc_renorm.py [--repeats N] [--cpu-threads T]
"""

import argparse

import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

from timing import interleaved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    g = torch.Generator().manual_seed(0)

    table = torch.randn(100_000, 64, generator=g)
    indices = torch.randint(0, 100_000, (65536,), generator=g)
    offsets = torch.arange(0, 65536, 16)
    table_n, indices_n, offsets_n = table.to("neuron"), indices.to("neuron"), offsets.to("neuron")
    x = torch.randn(16 * 2**20, generator=g)
    x_n = x.to("neuron")
    m = torch.randn(4096, 4096, generator=g)
    m_n = m.to("neuron")

    def bag(w, i, o, mode, backward):
        def run():
            leaf = w.detach().requires_grad_(backward)
            out = F.embedding_bag(i, leaf, o, mode=mode)
            if backward:
                out.sum().backward()
            else:
                return out
        return run

    cases = []
    for mode in ("sum", "mean", "max"):
        for backward in (False, True):
            name = f"embedding_bag {mode}{' fwd+bwd' if backward else ''}"
            cases.append((name, bag(table_n, indices_n, offsets_n, mode, backward),
                          bag(table, indices, offsets, mode, backward)))
    cases.append(("histc 16M, 100 bins", lambda: torch.histc(x_n, 100, -3, 3), lambda: torch.histc(x, 100, -3, 3)))
    cases.append(("renorm [4096,4096] p=2", lambda: torch.renorm(m_n, 2, 0, 30.0),
                  lambda: torch.renorm(m, 2, 0, 30.0)))
    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats}; ratio = cpu / neuron")
    print(f"{'op':<30}{'neuron ms':>10}{'cpu ms':>9}{'ratio':>8}")
    for name, fn_dev, fn_cpu in cases:
        t_dev, _, t_cpu, _ = interleaved(fn_dev, fn_cpu, args.repeats)
        print(f"{name:<30}{t_dev * 1e3:>10.2f}{t_cpu * 1e3:>9.2f}{t_cpu / t_dev:>7.2f}x")


if __name__ == "__main__":
    main()
