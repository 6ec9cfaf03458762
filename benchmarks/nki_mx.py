"""NKI MX instructions: simulation time of one nc_matmul_mx (128 partitions x
4 values of contraction, M 128, N 512, float8_e4m3fn_x4) and one quantize_mx
([128, 512] float16) kernel, against torch.matmul of the same logical fp32
product ([128, 512] x [512, 512]) on the CPU with one thread, medians of 21
runs each, turn by turn in one process. Runs on a trn3 device (the MX
instructions need NeuronCore-v4).

    NEURON_PLATFORM_TARGET_OVERRIDE=trn3 python benchmarks/nki_mx.py
"""

import time

import numpy as np
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import mx


@nki.jit
def mx_matmul(st, mv, st_scale, mv_scale):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 128), nl.float8_e4m3fn_x4)
    b = nl.ndarray((128, 512), nl.float8_e4m3fn_x4)
    nisa.dma_copy(a, st.view(nl.float8_e4m3fn_x4))
    nisa.dma_copy(b, mv.view(nl.float8_e4m3fn_x4))
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(acc, a, b, nl.load(st_scale), nl.load(mv_scale))
    res = nl.ndarray((128, 512), nl.float32)
    nisa.tensor_copy(res, acc)
    nl.store(out, res)
    return out


@nki.jit
def quantize(x):
    words = nl.ndarray((128, 128), nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    q = nl.ndarray((128, 128), nl.float8_e4m3fn_x4)
    s = nl.ndarray((128, 128), nl.uint8)
    nisa.quantize_mx(q, nl.load(x), s)
    nisa.dma_copy(words, q)
    return words


def median_us(fn, n=21):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[n // 2] * 1e6


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    st = mx.pack(rng.normal(0, 50, (128, 512)), nl.float8_e4m3fn_x4)
    mv = mx.pack(rng.normal(0, 50, (128, 2048)), nl.float8_e4m3fn_x4)
    st_scale, mv_scale = np.full((128, 128), 127, np.uint8), np.full((128, 512), 127, np.uint8)
    x = rng.normal(0, 1, (128, 512)).astype(np.float16)
    a, b = torch.randn(128, 512), torch.randn(512, 512)
    sim_mm, sim_q = nki.simulate(mx_matmul), nki.simulate(quantize)
    sim_mm(st, mv, st_scale, mv_scale), sim_q(x)  # trace once
    for turn in range(3):
        t_mm = median_us(lambda: sim_mm(st, mv, st_scale, mv_scale))
        t_q = median_us(lambda: sim_q(x))
        t_torch = median_us(lambda: a @ b)
        print(f"turn {turn}: nc_matmul_mx kernel {t_mm:.0f} us, quantize_mx kernel {t_q:.0f} us, "
              f"torch.matmul fp32 1 thread {t_torch:.0f} us; nc_matmul_mx / torch "
              f"{t_mm / t_torch:.1f}x")
    est = nki.benchmark(mx_matmul)(st, mv, st_scale, mv_scale)
    print(f"estimated trn3 latency of the matmul kernel: {est.latency_us:.2f} us")


if __name__ == "__main__":
    main()
