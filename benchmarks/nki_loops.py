"""NKI compiled loops: a kernel adding one [P, 512] fp32 row block into an
SBUF accumulator N times, written three ways and timed turn by turn in one
process (medians of 11 runs each, programs already traced and cached):

* ``fori``: nl.fori_loop(0, N, body) — the body is one instruction traced
  once; the simulator branches N times (NRT_NC_BRANCH);
* ``unrolled``: a Python for loop — N instructions in the program;
* ``torch``: ``acc += t`` N times on PyTorch CPU with one thread.

It prints each median, the per-iteration time, and the ratios against
torch; with P = 1 the loop's own overhead (branch, index increment)
dominates. Also the first call (trace + program creation + run) of the
compiled and unrolled kernels, where the compiled loop saves the most.

    python benchmarks/nki_loops.py
"""

import time

import numpy as np
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


def kernel(mode):
    @nki.jit
    def k(x, n):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        acc = nl.zeros(x.shape, nl.float32, buffer=nl.sbuf)
        if mode == "fori":
            nl.fori_loop(0, n, lambda i: nisa.tensor_tensor(acc, acc, t, op=nl.add))
        else:
            for _ in range(n):
                nisa.tensor_tensor(acc, acc, t, op=nl.add)
        nl.store(out, acc)
        return out
    return k


def median_s(fn, runs=11):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2]


def main():
    torch.set_num_threads(1)
    for parts, n in ((1, 4096), (128, 1024)):
        x = np.random.default_rng(0).standard_normal((parts, 512)).astype(np.float32)
        xt = torch.from_numpy(x)
        fori, unrolled = nki.simulate(kernel("fori")), nki.simulate(kernel("unrolled"))
        first = {}
        for name, k in (("fori", fori), ("unrolled", unrolled)):
            t0 = time.perf_counter()
            got = k(x, n)
            first[name] = time.perf_counter() - t0
            assert np.allclose(got, x * n, rtol=1e-4), name

        def eager():
            acc = torch.zeros_like(xt)
            for _ in range(n):
                acc += xt
            return acc

        med = {"fori": median_s(lambda: fori(x, n)), "unrolled": median_s(lambda: unrolled(x, n)),
               "torch": median_s(eager)}
        print(f"[{parts}, 512] fp32, {n} adds: first call fori {first['fori'] * 1e3:.1f} ms, "
              f"unrolled {first['unrolled'] * 1e3:.1f} ms")
        for name, s in med.items():
            print(f"  {name:9s} {s * 1e3:8.2f} ms  {s / n * 1e9:8.0f} ns/iteration  "
                  f"{s / med['torch']:5.2f}x torch")


if __name__ == "__main__":
    main()
