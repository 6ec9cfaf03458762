"""Throughput of softmax, log_softmax, layer_norm, GELU, SiLU and cross_entropy on neuron
versus PyTorch CPU, on transformer shapes.

Activations [8*1024, 768] (softmax, log_softmax, layer_norm forward and
forward+backward; GELU (erf and tanh forms) and SiLU forward) and logits [8*1024, 50257] (cross_entropy forward and
forward+backward: log_softmax + nll_loss and their gradients), float32 and
bfloat16. Each time is the median of several runs measured in this process
(the best run is printed too: on a shared machine it shows what each side
does undisturbed); a ratio is CPU time / neuron time (above 1.0 means
neuron is faster). PyTorch CPU runs with 2 threads unless --cpu-threads
says otherwise. --quick uses [8*128, 50257] logits.

    python benchmarks/nn_ops.py [--repeats N] [--cpu-threads T] [--quick]
"""

import argparse

import torch
import torch.nn.functional as F

import torchneuron  # noqa: F401

from timing import median_and_best as seconds


def fwd_bwd(fn):
    """A closure running fn's forward and its backward into the leaves."""
    def run(*tensors):
        leaves = [t.detach().requires_grad_() if t.is_floating_point() else t for t in tensors]
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smaller logits")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)

    rows = 8 * 1024
    logit_rows = 8 * 128 if args.quick else rows
    cases = {
        "softmax": ((rows, 768), lambda x: F.softmax(x, -1)),
        "log_softmax": ((rows, 768), lambda x: F.log_softmax(x, -1)),
        "softmax fwd+bwd": ((rows, 768), fwd_bwd(lambda x: F.softmax(x, -1))),
        "layer_norm": ((rows, 768), lambda x, w, b: F.layer_norm(x, (768,), w, b)),
        "gelu": ((rows, 768), lambda x: F.gelu(x)),
        "gelu tanh": ((rows, 768), lambda x: F.gelu(x, approximate="tanh")),
        "silu": ((rows, 768), lambda x: F.silu(x)),
        "layer_norm fwd+bwd": ((rows, 768), fwd_bwd(lambda x, w, b: F.layer_norm(x, (768,), w, b))),
        "cross_entropy": ((logit_rows, 50257), lambda x, t: F.cross_entropy(x, t)),
        "cross_entropy fwd+bwd": ((logit_rows, 50257), fwd_bwd(lambda x, t: F.cross_entropy(x, t))),
    }
    print(f"CPU threads: {args.cpu_threads}; median of {args.repeats}; ratio = cpu / neuron")
    print(f"{'op':<23}{'shape':<15}{'dtype':<10}{'neuron ms':>10}{'cpu ms':>9}{'ratio':>7}"
          f"  {'best: neuron':>12}{'cpu':>8}{'ratio':>7}")
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for name, (shape, fn) in cases.items():
            x = torch.randn(shape, generator=g).to(dtype)
            cpu_args = [x]
            if "layer_norm" in name:
                cpu_args += [torch.randn(768, generator=g).to(dtype), torch.randn(768, generator=g).to(dtype)]
            if "cross_entropy" in name:
                cpu_args.append(torch.randint(0, shape[1], (shape[0],), generator=g))
            dev_args = [a.to("neuron") for a in cpu_args]
            t_dev, best_dev = seconds(lambda: fn(*dev_args), torch.neuron.synchronize, args.repeats)
            t_cpu, best_cpu = seconds(lambda: fn(*cpu_args), lambda: None, args.repeats)
            label = "x".join(str(s) for s in shape)
            print(f"{name:<23}{label:<15}{str(dtype).replace('torch.', ''):<10}"
                  f"{t_dev * 1e3:>10.2f}{t_cpu * 1e3:>9.2f}{t_cpu / t_dev:>6.2f}x"
                  f"  {best_dev * 1e3:>12.2f}{best_cpu * 1e3:>8.2f}{best_cpu / best_dev:>6.2f}x")


if __name__ == "__main__":
    main()
