"""nki.isa's random numbers against a NumPy XORWOW fed with the state the
kernel reads back (rand_get_state), and their rules."""

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of


def xorwow_rows(state, n, streams):
    """NumPy reference: n draws per row from [rows, 6 * streams] states;
    element j uses stream j % streams (Marsaglia's XORWOW)."""
    s = state.astype(np.uint64).reshape(state.shape[0], streams, 6).copy()
    out = np.empty((state.shape[0], n), np.uint32)
    mask = np.uint64(0xFFFFFFFF)
    for j in range(n):
        k = j % streams
        x = s[:, k]
        t = (x[:, 0] ^ (x[:, 0] >> np.uint64(2))) & mask
        x[:, 0], x[:, 1], x[:, 2], x[:, 3] = x[:, 1], x[:, 2], x[:, 3], x[:, 4].copy()
        v = x[:, 4]
        x[:, 4] = ((v ^ (v << np.uint64(4))) ^ (t ^ (t << np.uint64(1)))) & mask
        x[:, 5] = (x[:, 5] + np.uint64(362437)) & mask
        out[:, j] = ((x[:, 4] + x[:, 5]) & mask).astype(np.uint32)
    return out


@nki.jit
def rng_kernel(seed, n, engine_code):
    engine = nisa.gpsimd_engine if engine_code else nisa.vector_engine
    words = 6 if engine_code else 24
    state_out = nl.ndarray((32, words), nl.uint32, buffer=nl.shared_hbm)
    bits_out = nl.ndarray((32, n), nl.uint32, buffer=nl.shared_hbm)
    again_out = nl.ndarray((32, n), nl.uint32, buffer=nl.shared_hbm)
    if seed is not None:
        nisa.set_rng_seed(nl.load(seed))
    state = nl.ndarray((32, words), nl.uint32)
    nisa.rand_get_state(state, engine=engine)
    bits = nl.ndarray((32, n), nl.uint32)
    nisa.rng(bits, engine=engine)
    nisa.rand_set_state(state, engine=engine)  # rewind: the same bits again
    again = nl.ndarray((32, n), nl.uint32)
    nisa.rng(again, engine=engine)
    nl.store(state_out, state), nl.store(bits_out, bits), nl.store(again_out, again)
    return state_out, bits_out, again_out


@pytest.mark.parametrize("engine_code,streams", [(0, 4), (1, 1)])
def test_rng_is_xorwow_and_state_round_trips(engine_code, streams):
    state, bits, again = nki.simulate(rng_kernel)(None, 40, engine_code)
    np.testing.assert_array_equal(bits, xorwow_rows(state, 40, streams))
    np.testing.assert_array_equal(again, bits)
    assert len(np.unique(bits)) > 1200  # lanes and streams differ


def test_set_rng_seed_decides_the_numbers():
    s1, b1, _ = nki.simulate(rng_kernel)(np.array([[7]], np.uint32), 16, 0)
    s2, b2, _ = nki.simulate(rng_kernel)(np.array([[7]], np.uint32), 16, 0)
    s3, b3, _ = nki.simulate(rng_kernel)(np.array([[8]], np.uint32), 16, 0)
    np.testing.assert_array_equal(b1, b2)
    assert (b1 != b3).mean() > 0.99
    np.testing.assert_array_equal(b3, xorwow_rows(s3, 16, 4))


def test_narrow_rng_keeps_the_low_bits():
    @nki.jit
    def k():
        state_out = nl.ndarray((8, 24), nl.uint32, buffer=nl.shared_hbm)
        out = nl.ndarray((8, 64), nl.uint16, buffer=nl.shared_hbm)
        state = nl.ndarray((8, 24), nl.uint32)
        nisa.rand_get_state(state)
        r = nl.ndarray((8, 64), nl.uint16)
        nisa.rng(r)
        nl.store(state_out, state), nl.store(out, r)
        return state_out, out

    state, got = nki.simulate(k)()
    np.testing.assert_array_equal(got, (xorwow_rows(state, 64, 4) & 0xFFFF).astype(np.uint16))


def test_language_rand_lowers_to_rng_on_trn2():
    """trn2 has no rand2: nl.rand is rng bits >> 8 times 2^-24 from the same
    Vector-engine generators, so the values are rand2's (test_nki_trn3.py
    checks rand2 against the same reference)."""
    @nki.jit
    def k(x):
        state_out = nl.ndarray((x.shape[0], 24), nl.uint32, buffer=nl.shared_hbm)
        u_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        b_out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
        state = nl.ndarray((x.shape[0], 24), nl.uint32)
        nisa.rand_get_state(state)
        nl.store(state_out, state)
        nl.store(u_out, nl.rand(x.shape))
        nl.store(b_out, nl.rand(x.shape, dtype=nl.bfloat16))
        return state_out, u_out, b_out

    x = np.zeros((16, 300), np.float32)
    state, u, b = nki.simulate(k)(x)
    bits = xorwow_rows(state, 600, 4)
    uniform = (bits >> 8).astype(np.float32) * np.float32(1 / 16777216)
    np.testing.assert_array_equal(u, uniform[:, :300])
    ref_b = torch.from_numpy(uniform[:, 300:]).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(b, ref_b)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert nki.benchmark(k)(x).instructions["Scalar"] == 0


@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_dropout_extremes_on_neuron(prob):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, x.dtype)
        nisa.dropout(d, nl.load(x), prob)
        nl.store(out, d)
        return out

    x = torch.randn(32, 128).to(torch.bfloat16)
    ref = x if prob == 0.0 else torch.zeros_like(x)
    torch.testing.assert_close(k(x.to("neuron")).cpu(), ref, rtol=0, atol=0)


def test_rng_rules():
    def float_bits(x):
        nisa.rng(nl.ndarray((4, 8), nl.float32))

    def empty_range(x):
        nisa.rand2(nl.ndarray((4, 8), nl.float32), 1.0, 1.0)

    def state_size(x):
        nisa.rand_set_state(nl.zeros((4, 6), nl.uint32), engine=nisa.vector_engine)

    def state_dtype(x):
        nisa.rand_get_state(nl.ndarray((4, 6), nl.int16), engine=nisa.gpsimd_engine)

    def seed_shape(x):
        nisa.set_rng_seed(nl.zeros((2, 1), nl.uint32))

    def dropout_dtype(x):
        nisa.dropout(nl.ndarray((4, 8), nl.bfloat16), nl.load(x), 0.5)

    def prob_shape(x):
        t = nl.load(x)
        nisa.dropout(nl.ndarray((4, 8), nl.float32), t, t)

    def rand2_on_gpsimd(x):
        nisa.rng(nl.ndarray((4, 8), nl.uint32), engine=nisa.scalar_engine)

    x = np.zeros((4, 8), np.float32)
    assert rule_of(float_bits, x) == "dtype"
    assert rule_of(empty_range, x) == "rand2_range"
    assert rule_of(state_size, x) == "rng_state_size"
    assert rule_of(state_dtype, x) == "dtype"
    assert rule_of(seed_shape, x) == "rng_state_size"
    assert rule_of(dropout_dtype, x) == "dtype"
    assert rule_of(prob_shape, x) == "operand_shape"
    assert rule_of(rand2_on_gpsimd, x) == "engine"


def test_language_rand_random_seed_and_dropout():
    @nki.jit
    def k(x, seed):
        u1 = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        u2 = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.random_seed(seed)
        nl.store(u1, nl.rand(x.shape))
        nl.random_seed(seed)  # the same seed: the same values
        nl.store(u2, nl.rand(x.shape, dtype=nl.float32))
        nl.store(d, nl.dropout(nl.load(x), 0.5))
        return u1, u2, d

    x = torch.randn(64, 256)
    u1, u2, d = (t.cpu() for t in k(x.to("neuron"), 42))
    torch.testing.assert_close(u1, u2, rtol=0, atol=0)
    assert 0.0 <= float(u1.min()) and float(u1.max()) < 1.0
    assert abs(float(u1.mean()) - 0.5) < 0.01
    kept = d != 0
    torch.testing.assert_close(d[kept], x[kept], rtol=0, atol=0)
    assert abs(float(kept.float().mean()) - 0.5) < 0.02
    u3 = k(x.to("neuron"), 43)[0].cpu()
    assert (u3 != u1).float().mean() > 0.99
