"""Dense linear algebra on neuron (runtime/src/ops/linalg/) versus PyTorch
CPU (LAPACK through MKL or OpenBLAS, whichever this torch build carries),
measured in the same run, turn by turn (timing.interleaved): solve, inv, det,
cholesky, solve_triangular, qr (reduced: geqrf + Q), geqrf, eigh and eigvalsh,
eig and eigvals (n <= 512),
svd and svdvals (n <= 128), lstsq (tall 2n x n systems with 8
right-hand sides, each driver; the SVD-based gelsd and gelss n <= 128; gelsy
is a pivoted QR), matrix_exp, ldl_factor (blocked from n = 96) and ldl_solve
on batches of small matrices and on single large ones, float32 and float64
(--dtypes complex64,complex128 for the complex kernels: every op above).

Each time is the median of --repeats alternating runs (best shown too);
ratio = CPU time / neuron time (above 1.0 neuron is faster). PyTorch CPU
runs with --cpu-threads threads (default 2).

    python benchmarks/linalg.py [--repeats N] [--cpu-threads T] [--quick] [--only qr,geqrf]
                                [--dtypes float32,float64]
"""

import argparse

import torch
import torchneuron  # noqa: F401

from timing import interleaved


def spd(a):
    return a @ a.mH + a.shape[-1] * torch.eye(a.shape[-1], dtype=a.dtype)


OPS = {
    "solve": (lambda a, b: torch.linalg.solve(a, b), lambda a: a),
    "inv": (lambda a, b: torch.linalg.inv(a), lambda a: a),
    "det": (lambda a, b: torch.linalg.det(a), lambda a: a),
    "cholesky": (lambda a, b: torch.linalg.cholesky(a), spd),
    "solve_triangular": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), lambda a: a),
    "qr": (lambda a, b: torch.linalg.qr(a), lambda a: a),
    "geqrf": (lambda a, b: torch.geqrf(a), lambda a: a),
    "eigh": (lambda a, b: torch.linalg.eigh(a), lambda a: a + a.mH),
    "eigvalsh": (lambda a, b: torch.linalg.eigvalsh(a), lambda a: a + a.mH),
    "eig": (lambda a, b: torch.linalg.eig(a), lambda a: a),
    "eigvals": (lambda a, b: torch.linalg.eigvals(a), lambda a: a),
    "svd": (lambda a, b: torch.linalg.svd(a, full_matrices=False), lambda a: a),
    "svdvals": (lambda a, b: torch.linalg.svdvals(a), lambda a: a),
    "lstsq_gels": (lambda a, b: torch.linalg.lstsq(a, b, driver="gels"), None),
    "lstsq_gelsy": (lambda a, b: torch.linalg.lstsq(a, b, driver="gelsy"), None),
    "lstsq_gelsd": (lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"), None),
    "lstsq_gelss": (lambda a, b: torch.linalg.lstsq(a, b, driver="gelss"), None),
    "matrix_exp": (lambda a, b: torch.linalg.matrix_exp(a), lambda a: a / a.shape[-1]),
    "ldl_factor": (lambda a, b: torch.linalg.ldl_factor(a), lambda a: a + a.mT - 2 * a.shape[-1] * torch.eye(
        a.shape[-1], dtype=a.dtype)),
    "ldl_solve": (lambda f, b: torch.linalg.ldl_solve(f[0], f[1], b), "ldl"),
}

# The largest n an op is measured at: svd's one-sided Jacobi is O(n^3) per
# sweep, meant for small matrices (eigh is a Jacobi below n = 64 and a
# tridiagonal QL from there).
# lstsq's gelsd and gelss solve through the same SVD. eig's unblocked
# Hessenberg QR is O(n^3) in scalar loops.
MAX_N = {"eig": 512, "eigvals": 512, "svd": 128, "svdvals": 128, "lstsq_gelsd": 128, "lstsq_gelss": 128}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated op names (default: all)")
    parser.add_argument("--dtypes", default="float32,float64", help="comma-separated dtypes")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    shapes = [(512, 8), (64, 32), (8, 128), (1, 512)] + ([] if args.quick else [(1, 1024)])
    print(f"{'op':<18}{'dtype':<9}{'batch x n':<12}{'neuron ms':>10}{'best':>8}{'cpu ms':>9}{'best':>8}{'ratio':>7}")
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for name, (fn, prepare) in OPS.items():
            if args.only and name not in args.only.split(","):
                continue
            for batch, n in shapes:
                if n > MAX_N.get(name, n):
                    continue
                g = torch.Generator().manual_seed(0)
                a = torch.randn(batch, n, n, generator=g, dtype=dtype) + n * torch.eye(n, dtype=dtype)
                b = torch.randn(batch, n, 8, generator=g, dtype=dtype)
                if prepare is None:  # least squares: tall 2n x n systems
                    a = torch.cat([a, torch.randn(batch, n, n, generator=g, dtype=dtype)], -2)
                    b = torch.randn(batch, 2 * n, 8, generator=g, dtype=dtype)
                elif prepare == "ldl":  # solve with a factorisation made beforehand (on the CPU)
                    a = torch.linalg.ldl_factor(a + a.mT - 2 * n * torch.eye(n, dtype=dtype))
                else:
                    a = prepare(a)
                na = tuple(t.to("neuron") for t in a) if isinstance(a, tuple) else a.to("neuron")
                nb = b.to("neuron")
                with torch.no_grad():
                    dm, db, cm, cb = interleaved(lambda: fn(na, nb), lambda: fn(a, b), args.repeats)
                print(f"{name:<18}{str(dtype)[6:]:<9}{f'{batch}x{n}':<12}{dm * 1e3:10.3f}{db * 1e3:8.3f}"
                      f"{cm * 1e3:9.3f}{cb * 1e3:8.3f}{cm / dm:7.2f}")


if __name__ == "__main__":
    main()
