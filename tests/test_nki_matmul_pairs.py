"""nc_matmul of bf16 operands, bit for bit against NumPy's in-order fp32
accumulation (acc = acc + a[k] * b[k], k = 0, 1, ...: a bf16 x bf16 product
is exact in fp32, so this is the fused multiply-add loop the Tensor engine
defines). On hosts with AVX512_BF16 the simulator takes two k steps per
instruction when no denormal can occur and the fp32 path otherwise; both
must give these bits (runtime/src/nc/tensor_engine.c)."""

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def matmul_kt(lhsT, rhs):
    """lhsT [K, M] x rhs [K, N] -> [M, N] fp32, K in tiles of 128 accumulated in PSUM."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k0 in range(0, K, 128):
        kk = min(128, K - k0)
        nisa.nc_matmul(acc, nl.load(lhsT[k0:k0 + kk, :]), nl.load(rhs[k0:k0 + kk, :]))
    res = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nl.store(out, res)
    return out


def bf16_values(rng, shape, exponents):
    """bf16 values with random sign and mantissa and exponents drawn from a
    list (None: zero), as float32."""
    e = rng.choice(len(exponents), size=shape)
    mant = 1 + rng.integers(0, 128, size=shape) / 128.0
    sign = rng.choice([-1.0, 1.0], size=shape)
    vals = np.array([0.0 if x is None else 2.0 ** x for x in exponents])[e]
    return (sign * mant * vals).astype(np.float32)


def reference(a, b):
    acc = np.zeros((a.shape[1], b.shape[1]), np.float32)
    for k in range(a.shape[0]):
        acc = acc + a[k][:, None] * b[k][None, :]   # exact product, one rounding
    return acc


def run(a, b):
    ta = torch.from_numpy(a).to(torch.bfloat16)
    tb = torch.from_numpy(b).to(torch.bfloat16)
    assert torch.equal(ta.float(), torch.from_numpy(a))  # the values are bf16
    return matmul_kt(ta.to("neuron"), tb.to("neuron")).cpu().numpy()


@pytest.mark.parametrize("k,m,n", [(256, 128, 512), (128, 40, 70), (300, 64, 96), (77, 16, 48)])
def test_bits_match_in_order_fp32(k, m, n):
    """Ordinary values (pair path where it applies; odd K: fp32 path)."""
    rng = np.random.default_rng(k + m + n)
    a = bf16_values(rng, (k, m), [None, -3, -1, 0, 1, 2])
    b = bf16_values(rng, (k, n), [None, -2, 0, 3])
    np.testing.assert_array_equal(run(a, b), reference(a, b))


@pytest.mark.parametrize("case", ["edges_of_the_pair_range", "tiny_operand", "cancellation"])
def test_bits_at_and_past_the_pair_path_guard(case):
    """Exponents at the pair path's bounds (-56, 63), one past them (the
    product falls back to the fp32 loop) and sums cancelling to small
    values: the same bits as NumPy in every case."""
    rng = np.random.default_rng(7)
    k, m, n = 256, 64, 128
    if case == "edges_of_the_pair_range":
        a = bf16_values(rng, (k, m), [None, -56, 0, 60])
        b = bf16_values(rng, (k, n), [None, -56, 0, 2])
    elif case == "tiny_operand":
        a = bf16_values(rng, (k, m), [-1, 0, 1])
        b = bf16_values(rng, (k, n), [-1, 0, 1])
        a[3, 5] = 2.0 ** -60          # outside [-56, 63]: this K tile takes the fp32 path
    else:
        a = bf16_values(rng, (k, m), [-50, -40])
        b = bf16_values(rng, (k, n), [-50, -45])
        a[128:], b[128:] = -a[:128], b[:128]   # the second K tile cancels the first
    np.testing.assert_array_equal(run(a, b), reference(a, b))


@nki.jit
def matmul_blocks(lhsT, rhs):
    """matmul_kt over 128-column blocks of M, moving tiles loaded once: the
    stationary tiles are loaded between the matmuls, so on a pool of two or
    more threads each load after a matmul runs during it (on fresh tiles,
    runtime/src/nc/overlap.c) and feeds the next one."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    rhs_tiles = [nl.load(rhs[k0:k0 + 128, :]) for k0 in range(0, K, 128)]
    for m0 in range(0, M, 128):
        acc = nl.ndarray((128, N), nl.float32, buffer=nl.psum)
        for kt, k0 in enumerate(range(0, K, 128)):
            nisa.nc_matmul(acc, nl.load(lhsT[k0:k0 + 128, m0:m0 + 128]), rhs_tiles[kt])
        res = nl.ndarray((128, N), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(res, acc)
        nl.store(out[m0:m0 + 128, :], res)
    return out


def test_bits_with_loads_between_matmuls():
    """Every block's bits are NumPy's, whichever thread loaded its tiles."""
    rng = np.random.default_rng(11)
    a = bf16_values(rng, (384, 256), [None, -3, -1, 0, 1, 2])
    b = bf16_values(rng, (384, 512), [None, -2, 0, 3])
    ta = torch.from_numpy(a).to(torch.bfloat16)
    tb = torch.from_numpy(b).to(torch.bfloat16)
    out = matmul_blocks(ta.to("neuron"), tb.to("neuron")).cpu().numpy()
    np.testing.assert_array_equal(out, reference(a, b))
