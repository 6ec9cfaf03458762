"""Attention and optimizer steps on neuron versus PyTorch CPU.

SDPA forward and forward+backward at the shapes of benchmarks/train.py's
GPT models ([16, 8, 128, 32] for gpt-wide, [32, 4, 64, 32] for gpt; causal,
float32), at GPT-2 small shapes (B=8, H=12, D=64, causal, L = 256 and 1024;
float32 and bfloat16), and an AdamW step over
about 10M parameters (GPT-2-like tensor shapes), fused=True and
foreach=True, on both devices. Each time is the median of several runs in
this process (the best run is printed too); a ratio is CPU time / neuron
time (above 1.0 means neuron is faster). PyTorch CPU runs with 2 threads
unless --cpu-threads says otherwise; on CPU, SDPA takes PyTorch's flash
attention CPU kernel.

The load average is printed first: the machine may be shared, and the
ratios are only meaningful when both devices ran under the same load. On a
busy machine, --cpu-time measures the process's CPU time (all its threads)
instead of wall time; run it with one thread on each side, so that neither
counts threads waiting for a core:

    python benchmarks/attention.py [--repeats N] [--cpu-threads T] [--quick]
        [--dtype float32|bfloat16] [--no-adamw]
    TORCHNEURON_NUM_THREADS=1 python benchmarks/attention.py --cpu-time --cpu-threads 1
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F
import torchneuron  # noqa: F401

from timing import median_and_best as seconds




def sync_for(device):
    return torch.neuron.synchronize if device == "neuron" else (lambda: None)


def cpu_seconds(fn, sync, repeats):
    """(median, best) process CPU seconds of fn() + sync(), after a warm-up."""
    return seconds(fn, sync, repeats, clock=time.process_time)


def sdpa_cases(args):
    """(shape, dtype) rows: the train.py GPT shapes, then GPT-2 small;
    --dtype keeps one dtype's rows."""
    cases = [((16, 8, 128, 32), torch.float32), ((32, 4, 64, 32), torch.float32)]
    lengths = [256] if args.quick else [256, 1024]
    dtypes = [torch.float32] if args.quick else [torch.float32, torch.bfloat16]
    cases += [((8, 12, L, 64), dtype) for L in lengths for dtype in dtypes]
    return [c for c in cases if args.dtype in (None, str(c[1])[6:])]


def sdpa_rows(args):
    clock = "process CPU time" if args.cpu_time else "wall time"
    print(f"SDPA, causal; CPU threads {args.cpu_threads}; {clock}, median of {args.repeats}")
    print(f"{'B, H, L, D':<18}{'dtype':<9}{'pass':<9}{'neuron ms':>10}{'(best)':>8}{'cpu ms':>9}"
          f"{'(best)':>8}{'ratio':>7}")
    for shape, dtype in sdpa_cases(args):
        base = [torch.randn(shape).to(dtype) for _ in range(3)]
        grad = torch.randn(shape).to(dtype)
        res = {}
        for device in ("neuron", "cpu"):
            q, k, v = (t.to(device).requires_grad_() for t in base)
            g = grad.to(device)

            def fwd():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def fwd_bwd():
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out.backward(g)

            res[device] = {p: args.timer(fn, sync_for(device), args.repeats)
                           for p, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd))}
        for p in ("fwd", "fwd+bwd"):
            (nm, nb), (cm, cb) = res["neuron"][p], res["cpu"][p]
            print(f"{str(list(shape)):<18}{str(dtype)[6:]:<9}{p:<9}{nm * 1e3:>10.2f}"
                  f"{nb * 1e3:>8.2f}{cm * 1e3:>9.2f}{cb * 1e3:>8.2f}{cm / nm:>7.2f}")


def adamw_rows(args):
    # GPT-2-like parameter shapes, about 10M parameters in 50 tensors.
    shapes = []
    for _ in range(4):
        shapes += [(768, 768)] * 3 + [(768,)] * 6 + [(768, 768)] + [(768,)] * 2
    shapes += [(8192, 96)] * 2
    n = sum(torch.Size(s).numel() for s in shapes)
    print(f"\nAdamW step over {n / 1e6:.1f}M float32 parameters in {len(shapes)} tensors")
    print(f"{'impl':<9}{'neuron ms':>10}{'(best)':>8}{'cpu ms':>9}{'(best)':>8}{'ratio':>7}")
    for impl in ("fused", "foreach"):
        res = {}
        for device in ("neuron", "cpu"):
            params = [torch.nn.Parameter(torch.randn(s, device=device)) for s in shapes]
            for p in params:
                p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **{impl: True})
            res[device] = args.timer(opt.step, sync_for(device), args.repeats)
        (nm, nb), (cm, cb) = res["neuron"], res["cpu"]
        print(f"{impl:<9}{nm * 1e3:>10.2f}{nb * 1e3:>8.2f}{cm * 1e3:>9.2f}{cb * 1e3:>8.2f}"
              f"{cm / nm:>7.2f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="L=256 float32 only")
    parser.add_argument("--cpu-time", action="store_true",
                        help="process CPU time instead of wall time (see above)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                        help="only the SDPA rows of this dtype")
    parser.add_argument("--no-adamw", action="store_true", help="skip the AdamW rows")
    args = parser.parse_args()
    args.timer = cpu_seconds if args.cpu_time else seconds
    torch.set_num_threads(args.cpu_threads)
    print("load average (1, 5, 15 min): %.2f %.2f %.2f on %d cores" % (*os.getloadavg(), os.cpu_count()))
    sdpa_rows(args)
    if not args.no_adamw:
        adamw_rows(args)


if __name__ == "__main__":
    main()
