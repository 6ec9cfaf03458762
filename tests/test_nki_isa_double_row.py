"""nc_matmul perf_mode=double_row (fp8, NeuronCore-v3 on) against NumPy and
torch references, its layout / dtype / generation rules (one negative case
each; test_nki_rules.py has the rows) and its cost-model entry."""

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from conftest import check_output, run_python
from nki_testing import rule_of_body

DOUBLE_ROW = nisa.matmul_perf_mode.double_row


def hbm_out(tile, dtype=nl.float32):
    out = nl.ndarray(tile.shape, dtype, buffer=nl.shared_hbm)
    nl.store(out, tile)
    return out


@nki.jit
def double_row_kernel(s_in, m_in, s_dt, m_dt):
    """dst = double_row nc_matmul of s_in [K, 2, M] and m_in [K, 2, N] loaded
    as fp8; also returns the fp8 operands as float32 (the values used)."""
    k, _, m = s_in.shape
    n = m_in.shape[2]
    s = nl.load(s_in, dtype=s_dt)
    mv = nl.load(m_in, dtype=m_dt)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, s, mv, perf_mode=DOUBLE_ROW)
    s32 = nl.ndarray(s.shape, nl.float32)
    nisa.tensor_copy(s32, s)
    m32 = nl.ndarray(mv.shape, nl.float32)
    nisa.tensor_copy(m32, mv)
    res = nl.ndarray((m, n), nl.float32)
    nisa.tensor_copy(res, acc)
    return hbm_out(res), hbm_out(s32), hbm_out(m32)


def sequential_reference(s, m):
    """fp32, term by term in the simulator's order (partition p, then j):
    fp8 products are exact in fp32, so this is bit-exact."""
    k = s.shape[0]
    acc = np.zeros((s.shape[2], m.shape[2]), np.float32)
    for p in range(k):
        for j in range(2):
            acc = (acc + np.outer(s[p, j], m[p, j]).astype(np.float32)).astype(np.float32)
    return acc


@pytest.mark.parametrize("s_dt,m_dt", [(nl.float8_e4m3, nl.float8_e4m3),
                                       (nl.float8_e5m2, nl.float8_e5m2),
                                       (nl.float8_e4m3, nl.float8_e5m2)])
def test_double_row_is_the_plain_matmul_of_the_2k_terms(s_dt, m_dt):
    rng = np.random.default_rng(1)
    k, m, n = 32, 24, 40
    s_in = rng.standard_normal((k, 2, m)).astype(np.float32)
    m_in = rng.standard_normal((k, 2, n)).astype(np.float32)
    out, s, mv = double_row_kernel(s_in, m_in, s_dt, m_dt)
    # The values really are fp8 (rounded on load), not the fp32 inputs.
    assert not np.array_equal(s, s_in)
    np.testing.assert_array_equal(out, sequential_reference(s, mv))
    # The same product as torch's matmul over the 2K contraction.
    expect = torch.from_numpy(s.reshape(2 * k, m)).double().T @ \
        torch.from_numpy(mv.reshape(2 * k, n)).double()
    np.testing.assert_allclose(out, expect.numpy(), rtol=1e-5, atol=1e-4)


def test_double_row_full_size_exact_values():
    """128 x (128 x 2) x 512, the largest tile: small integers times 1/4 are
    exact in both fp8 formats and their sums exact in fp32, so any order
    gives torch's result bit for bit."""
    rng = np.random.default_rng(2)
    s_in = (rng.integers(-8, 9, (128, 2, 128)) * 0.25).astype(np.float32)
    m_in = (rng.integers(-8, 9, (128, 2, 512)) * 0.25).astype(np.float32)
    out, s, mv = double_row_kernel(s_in, m_in, nl.float8_e4m3, nl.float8_e5m2)
    np.testing.assert_array_equal(s, s_in)
    expect = torch.from_numpy(s_in.reshape(256, 128)).T @ torch.from_numpy(m_in.reshape(256, 512))
    np.testing.assert_array_equal(out, expect.numpy())


def test_double_row_accumulates_in_psum_and_matches_two_plain_matmuls():
    """A double_row matmul into a PSUM tile already written adds to it; with
    exact values it equals two plain matmuls, one per half (j = 0, 1)."""
    @nki.jit
    def k(s_in, m_in):
        s = nl.load(s_in, dtype=nl.float8_e4m3)
        mv = nl.load(m_in, dtype=nl.float8_e4m3)
        a = nl.ndarray((16, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(a, s, mv, perf_mode=DOUBLE_ROW)
        nisa.nc_matmul(a, s, mv, perf_mode=DOUBLE_ROW)  # first write done: adds
        b = nl.ndarray((16, 64), nl.float32, buffer=nl.psum)
        for j in range(2):
            nisa.nc_matmul(b, s[:, j, :], mv[:, j, :])
        ra, rb = nl.ndarray((16, 64), nl.float32), nl.ndarray((16, 64), nl.float32)
        nisa.tensor_copy(ra, a)
        nisa.tensor_copy(rb, b)
        return hbm_out(ra), hbm_out(rb)

    rng = np.random.default_rng(3)
    s_in = (rng.integers(-8, 9, (64, 2, 16)) * 0.25).astype(np.float32)
    m_in = (rng.integers(-8, 9, (64, 2, 64)) * 0.25).astype(np.float32)
    a, b = k(s_in, m_in)
    np.testing.assert_array_equal(a, 2 * b)
    np.testing.assert_array_equal(b, s_in.reshape(128, 16).T @ m_in.reshape(128, 64))


# ---- rules ---------------------------------------------------------------------------

def f8(*shape, dtype=nl.float8_e4m3):
    return nl.zeros(shape, dtype)


def pnew(*shape):
    return nl.ndarray(shape, nl.float32, buffer=nl.psum)


def test_double_row_rules():
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 128), nl.zeros((128, 2, 128), nl.bfloat16),
                                              f8(128, 2, 128), perf_mode=DOUBLE_ROW)) \
        == "double_row_dtype"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 256), f8(128, 256), f8(128, 256),
                                              perf_mode=DOUBLE_ROW)) == "double_row_layout"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(64, 128), f8(128, 4, 32), f8(128, 4, 32),
                                              perf_mode=DOUBLE_ROW)) == "double_row_layout"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 128), f8(128, 2, 128), f8(128, 2, 128),
                                              perf_mode=DOUBLE_ROW, is_transpose=True)) \
        == "double_row_mode"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 128), f8(128, 2, 128), f8(128, 2, 128),
                                              perf_mode=DOUBLE_ROW, tile_position=(0, 64),
                                              tile_size=(128, 64))) == "double_row_mode"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 512), f8(128, 2, 128), f8(128, 2, 1024),
                                              perf_mode=DOUBLE_ROW)) == "gemm_moving_fmax"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 128), f8(128, 2, 256), f8(128, 2, 128),
                                              perf_mode=DOUBLE_ROW)) == "gemm_stationary_fmax"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 256), f8(128, 2, 128), f8(128, 2, 128),
                                              perf_mode=DOUBLE_ROW)) == "shape_mismatch"
    assert rule_of_body(lambda: nisa.nc_matmul(pnew(128, 128), f8(128, 2, 128), f8(128, 2, 128),
                                              perf_mode="quad_row")) == "matmul_perf_mode"


def test_double_row_needs_trn2():
    code = """
        import numpy as np, torchneuron.nki as nki, torchneuron.nki.isa as nisa
        import torchneuron.nki.language as nl

        def k(a):
            s = nl.zeros((128, 2, 128), nl.float8_e4m3)
            nisa.nc_matmul(nl.ndarray((128, 128), nl.float32, buffer=nl.psum), s, s,
                           perf_mode=nisa.matmul_perf_mode.double_row)

        try:
            nki.simulate(nki.jit(k))(np.zeros((1, 1), np.float32))
            print("ran")
        except nki.NkiError as e:
            print(e.rule, e.instruction)
    """
    out = check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}))
    assert out.split() == ["nc_version", "nki.isa.nc_matmul"]
    out = check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}))
    assert out.split() == ["ran"]


# ---- cost ----------------------------------------------------------------------------

def test_double_row_costs_a_k_term_matmul():
    """2K terms in the time of K: the fp8 double_row [128, 2, 128] x [128, 2, 512]
    takes as long on the Tensor engine as a bf16 [128, 128] x [128, 512]."""
    def tensor_busy(kernel, *args):
        return nki.benchmark(nki.jit(kernel))(*args).busy_us["Tensor"]

    def dr(a):
        s = nl.zeros((128, 2, 128), nl.float8_e4m3)
        mv = nl.zeros((128, 2, 512), nl.float8_e5m2)
        nisa.nc_matmul(nl.ndarray((128, 512), nl.float32, buffer=nl.psum), s, mv,
                       perf_mode=DOUBLE_ROW)

    def plain(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        mv = nl.zeros((128, 512), nl.bfloat16)
        nisa.nc_matmul(nl.ndarray((128, 512), nl.float32, buffer=nl.psum), s, mv)

    a = np.zeros((1, 1), np.float32)
    assert tensor_busy(dr, a) == pytest.approx(tensor_busy(plain, a))
    assert tensor_busy(plain, a) == pytest.approx(512 / 2.4e9 * 1e6)
