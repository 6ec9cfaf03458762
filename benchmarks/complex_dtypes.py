"""The storage dtypes (complex64/128, uint16/32/64) on neuron against
PyTorch CPU, in one run: conversions, conjugation, byte-moving shape ops,
the complex add/sub with alpha (one runtime kernel), and the complex mul /
polar / sum / div / exp / log / sqrt / trigonometric functions composed
from native real kernels, and the inverse functions, pow,
prod, cumsum and cumprod on the planes, and the indexing and padding ops on
the real view (index_select, gather, index_put, scatter_add, pad, tril), the
GEMM family (mm, addmm, baddbmm, addmv), isnan, logical_and, lerp and
logsumexp.

    .venv/bin/python benchmarks/complex_dtypes.py [--threads 2] [--repeats 7] [--only index,pad]

Neuron and CPU runs alternate (timing.interleaved); each line prints the
medians and the ratio CPU time / neuron time (above 1.0: neuron faster).
CPU runs with --threads intra-op threads; neuron's kernel pool has its own
TORCHNEURON_NUM_THREADS (default: all cores)."""

import argparse

import torch

import torchneuron  # noqa: F401  (registers the device)
from timing import interleaved

N = 4 * 1024 * 1024


def cases():
    g = torch.Generator().manual_seed(0)
    f32 = torch.randn(N, generator=g)
    c64 = torch.randn(N, dtype=torch.complex64, generator=g)
    c128 = c64.to(torch.complex128)
    u32 = torch.randint(0, 2**31, (N,), generator=g).to(torch.uint32)
    square = c64.view(2048, 2048)
    yield "float32 -> complex64 4M", (f32,), lambda x: x.to(torch.complex64)
    yield "complex64 -> complex128 4M", (c64,), lambda x: x.to(torch.complex128)
    yield "complex128 -> float32 (real) 4M", (c128,), lambda x: x.real.to(torch.float32)
    yield "conj_physical complex64 4M", (c64,), lambda x: torch.conj_physical(x)
    yield "resolve_conj complex64 2048^2 .t()", (square,), lambda x: x.t().conj().resolve_conj()
    yield "contiguous complex128 2048^2 .t()", (c128.view(2048, 2048),), lambda x: x.t().contiguous()
    yield "cat 2 x 2M complex64 dim=0", (c64[: N // 2], c64[N // 2:]), lambda a, b: torch.cat([a, b])
    yield "flip complex64 2048^2 dim=1", (square,), lambda x: x.flip(1)
    yield "uint32 -> float64 4M", (u32,), lambda x: x.to(torch.float64)
    yield "zeros complex128 4M", (None,), lambda d: torch.zeros(N, dtype=torch.complex128, device=d)
    # composed from native real kernels (complex_ops.cpp, reduce.cpp)
    half = c64[: N // 2]
    yield "mul complex64 2M x 2M", (half, c64[N // 2:]), lambda a, b: a * b
    yield "mul complex64 [2048,1024] x [1024] bcast", (half.view(2048, 1024), c64[:1024]), \
        lambda a, b: a * b
    # add/sub with alpha: the runtime's complex ADD kernel (complex_add.cpp)
    yield "add complex64 2M + 2M", (half, c64[N // 2:]), torch.add
    yield "sub complex64 2M - 2M alpha=2", (half, c64[N // 2:]), lambda a, b: torch.sub(a, b, alpha=2)
    yield "add complex128 2M + 2M alpha=1j", (c128[: N // 2], c128[N // 2:]), \
        lambda a, b: torch.add(a, b, alpha=1j)
    yield "add complex64 [2048,1024] + [1024] bcast", (half.view(2048, 1024), c64[:1024]), torch.add
    r, theta = f32[: N // 2].abs(), f32[N // 2:]
    yield "polar float32 2M", (r, theta), lambda a, b: torch.polar(a, b)
    yield "sum complex64 2048^2 dim=1", (square,), lambda x: x.sum(1)
    # complex math on the planes (complex_math.cpp)
    yield "div complex64 2M / 2M", (half, c64[N // 2:]), lambda a, b: a / b
    yield "exp complex64 2M", (half,), torch.exp
    yield "log complex64 2M", (half,), torch.log
    yield "sqrt complex64 2M", (half,), torch.sqrt
    yield "tanh complex64 2M", (half,), torch.tanh
    yield "sin complex128 2M", (c128[: N // 2],), torch.sin
    # inverse functions, pow, prod and scans (complex_math_{inverse,pow,scan}.cpp)
    quarter = c64[: N // 4]
    yield "asin complex64 1M", (quarter,), torch.asin
    yield "acosh complex64 1M", (quarter,), torch.acosh
    yield "atanh complex64 1M", (quarter,), torch.atanh
    yield "log1p complex64 1M", (quarter,), torch.log1p
    yield "expm1 complex64 1M", (quarter,), torch.expm1
    yield "pow complex64 1M ** 2.5", (quarter,), lambda x: x ** 2.5
    yield "pow complex64 1M ** 1M", (quarter, c64[N // 4: N // 2]), torch.pow
    yield "prod complex64 [1024,1024] dim=1", (quarter.view(1024, 1024),), lambda x: x.prod(1)
    yield "cumsum complex64 [1024,1024] dim=1", (quarter.view(1024, 1024),), lambda x: x.cumsum(1)
    yield "cumprod complex64 [1024,1024] dim=1", (quarter.view(1024, 1024) * 0.1 + 1,), \
        lambda x: x.cumprod(1)
    # indexing and padding on the real view (complex_index.cpp, pad.cpp)
    rows = torch.randint(0, 2048, (1024,), generator=g)
    yield "index_select complex64 2048^2 1024 rows", (square, rows), lambda x, i: x.index_select(0, i)
    yield "index_select complex128 2048^2 1024 cols", (c128.view(2048, 2048), rows), \
        lambda x, i: x.index_select(1, i)
    gidx = torch.randint(0, 2048, (2048, 512), generator=g)
    yield "gather complex64 2048^2 [2048,512] dim=1", (square, gidx), lambda x, i: x.gather(1, i)
    yield "index_put_ accumulate complex64 2048^2 1024 rows", (square, rows, c64[: 1024 * 2048].view(1024, 2048)), \
        lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True)
    yield "scatter_add complex64 2048^2 dim=1", (square, gidx, c64[: 2048 * 512].view(2048, 512)), \
        lambda x, i, v: x.scatter_add(1, i, v)
    images = c64[: 16 * 256 * 256].view(16, 256, 256)
    yield "reflection pad complex64 [16,256,256] 2-d by 3", (images,), \
        lambda x: torch.nn.functional.pad(x, (3, 3, 3, 3), mode="reflect")
    yield "tril complex64 2048^2", (square,), torch.tril
    # the GEMM family as four real GEMMs on the planes (complex_gemm.cpp)
    m512 = c64[: 512 * 512].view(512, 512)
    yield "mm complex64 512^2 @ 512^2", (m512, c64[-512 * 512:].view(512, 512)), torch.mm
    yield "mm complex128 512^2 @ 512^2", (m512.to(torch.complex128), c128[-512 * 512:].view(512, 512)), torch.mm
    yield "addmm complex64 512^2 beta=0.5 alpha=2j", (c64[N // 2: N // 2 + 512 * 512].view(512, 512), m512,
                                                      c64[-512 * 512:].view(512, 512)), \
        lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2j)
    batch = c64[: 16 * 128 * 128].view(16, 128, 128)
    yield "baddbmm complex64 16x128^2", (batch, batch, c64[-16 * 128 * 128:].view(16, 128, 128)), torch.baddbmm
    yield "addmv complex64 2048^2 @ 2048", (c64[:2048], square, c64[-2048:]), torch.addmv
    # predicates, logical ops, lerp and logsumexp (complex_predicates.cpp, complex_lerp.cpp, complex_reduce.cpp)
    yield "isnan complex64 2M", (half,), torch.isnan
    yield "logical_and complex64 2M", (half, c64[N // 2:]), torch.logical_and
    yield "lerp complex64 2M weight 0.3", (half, c64[N // 2:]), lambda a, b: torch.lerp(a, b, 0.3)
    yield "logsumexp complex64 [1024,1024] dim=1", (quarter.view(1024, 1024),), lambda x: torch.logsumexp(x, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated substrings: run the matching rows only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'op':38s} {'cpu ms':>9s} {'neuron ms':>10s} {'ratio':>7s}")
    only = [s for s in args.only.split(",") if s]
    for name, inputs, fn in cases():
        if only and not any(s in name for s in only):
            continue
        if inputs == (None,):
            cpu_args, dev_args = ("cpu",), ("neuron",)
        else:
            cpu_args = inputs
            dev_args = tuple(t.to("neuron") for t in inputs)
        torchneuron.clear_op_tracking()
        dev_med, _, cpu_med, _ = interleaved(lambda: fn(*dev_args), lambda: fn(*cpu_args),
                                             args.repeats)
        fell_back = torchneuron.get_fallback_ops()
        note = f"  (fallback: {sorted(fell_back)})" if fell_back else ""
        print(f"{name:38s} {cpu_med * 1e3:9.2f} {dev_med * 1e3:10.2f} "
              f"{cpu_med / dev_med:7.2f}{note}")


if __name__ == "__main__":
    main()
