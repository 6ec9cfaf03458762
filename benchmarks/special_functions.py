"""The special functions of runtime/src/ops/special/ on neuron versus
PyTorch CPU, measured turn by turn in the same run.

Each function runs on 1M elements (--quick: 256K) of float32 and float64
drawn from its usual domain. Each time is the median of several runs (best
shown too); ratio = CPU time / neuron time (above 1.0 neuron is faster).
PyTorch CPU runs with --cpu-threads threads (default 2).

    python benchmarks/special_functions.py [--repeats N] [--cpu-threads T] [--quick]

Ours compute every float32 element in double and round once (the CPU
computes float32 in float arithmetic), evaluate series and integrals
rather than fitted polynomials (K0/K1 below x = 20 by a 30- to 300-point
trapezoidal rule, Airy Ai's Maclaurin series in long double), and call the
C library's j0/j1/y0/y1 and lgamma: rows below 1.0 are the price of that
accuracy (docs/ops.md states it per function).
"""

import argparse

import torch
import torchneuron  # noqa: F401

from timing import median_and_best as seconds

S = torch.special
FUNCTIONS = [
    ("lgamma", torch.lgamma, (0.1, 30)), ("digamma", torch.digamma, (-20, 30)),
    ("polygamma(2)", lambda t: torch.polygamma(2, t), (0.1, 30)), ("i0", torch.i0, (-30, 30)),
    ("i1e", S.i1e, (-100, 100)), ("modified_bessel_k0", S.modified_bessel_k0, (0.01, 30)),
    ("scaled_modified_bessel_k1", S.scaled_modified_bessel_k1, (0.01, 100)),
    ("bessel_j0", S.bessel_j0, (-30, 30)), ("bessel_y1", S.bessel_y1, (0.01, 30)),
    ("airy_ai", S.airy_ai, (-15, 10)), ("erfcx", S.erfcx, (-5, 30)), ("ndtri", S.ndtri, (0.0001, 0.9999)),
    ("log_ndtr", S.log_ndtr, (-30, 8)), ("zeta(x, 2.5)", lambda t: S.zeta(t, 2.5), (1.1, 20)),
    ("igamma(x, x)", lambda t: torch.igamma(t, t), (0.1, 50)),
    ("chebyshev_polynomial_t(x, 12)", lambda t: S.chebyshev_polynomial_t(t, 12), (-1, 1)),
    ("hermite_polynomial_h(x, 12)", lambda t: S.hermite_polynomial_h(t, 12), (-3, 3)),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    n = (1 << 18) if args.quick else (1 << 20)
    print(f"{n} elements; CPU threads: {args.cpu_threads}; median of {args.repeats} (best shown too); "
          "ratio = CPU / neuron")
    print(f"{'case':<40}{'neuron ms':>10}{'best':>9}{'cpu ms':>9}{'best':>9}{'ratio':>7}")
    for name, fn, (lo, hi) in FUNCTIONS:
        for dtype in (torch.float32, torch.float64):
            x = (torch.rand(n, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
            results = []
            for dev in ("neuron", "cpu"):
                t = x.to(dev)
                sync = torch.neuron.synchronize if dev == "neuron" else (lambda: None)
                results.append(seconds(lambda: fn(t), sync, args.repeats))
            (nm, nb), (cm, cb) = results
            label = f"{name} {str(dtype)[6:]}"
            print(f"{label:<40}{nm * 1e3:10.2f}{nb * 1e3:9.2f}{cm * 1e3:9.2f}{cb * 1e3:9.2f}{cm / nm:7.2f}")


if __name__ == "__main__":
    main()
