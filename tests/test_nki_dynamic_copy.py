"""nki.isa.tensor_copy_dynamic_src / tensor_copy_dynamic_dst: the compute
instructions the ISA reference gives a runtime start (an int32 SBUF word),
and the rule refusing a runtime nl.ds start on every other compute
instruction. Checked against NumPy."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of_body


def _rng(seed):
    return np.random.default_rng(seed)


@nki.jit
def copy_window_from(x, start, width):
    """out = x[:, start : start + width], read from an SBUF tile at a start
    known only while the kernel runs."""
    p, f = x.shape
    out = nl.ndarray((p, width), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    word = nl.load(start)
    u = nl.ndarray((p, width), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy_dynamic_src(u, t[:, nl.ds(word, width)])
    nl.store(out, u)
    return out


@nki.jit
def copy_window_to(base, src, start):
    """out = base with out[:, start : start + width] = src (in SBUF)."""
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    t = nl.load(base)
    s = nl.load(src)
    word = nl.load(start)
    nisa.tensor_copy_dynamic_dst(t[:, nl.ds(word, src.shape[1])], s)
    nl.store(out, t)
    return out


@pytest.mark.parametrize("dtype,start", [(np.float32, 0), (np.float16, 13), (np.float32, 24)])
def test_dynamic_src_copies_the_window_the_word_names(dtype, start):
    x = _rng(0).standard_normal((16, 40)).astype(dtype)
    got = nki.simulate(copy_window_from)(x, np.array([[start]], np.int32), 16)
    np.testing.assert_array_equal(got, x[:, start:start + 16].astype(np.float32))


@pytest.mark.parametrize("start", [0, 7, 32])
def test_dynamic_dst_writes_the_window_the_word_names(start):
    base = _rng(1).standard_normal((8, 40)).astype(np.float32)
    src = _rng(2).standard_normal((8, 8)).astype(np.float32)
    got = nki.simulate(copy_window_to)(base, src, np.array([[start]], np.int32))
    want = base.copy()
    want[:, start:start + 8] = src
    np.testing.assert_array_equal(got, want)


def test_dynamic_copy_runs_on_the_vector_engine():
    x = _rng(3).standard_normal((16, 40)).astype(np.float32)
    est = nki.benchmark(copy_window_from)(x, np.array([[4]], np.int32), 16)
    assert est.busy_us["Vector"] > 0


def test_a_start_past_the_tile_fails_the_run():
    x = _rng(4).standard_normal((16, 40)).astype(np.float32)
    with pytest.raises(Exception, match="out of bounds"):
        nki.simulate(copy_window_from)(x, np.array([[30]], np.int32), 16)


# ---- rules ----------------------------------------------------------------------------

def test_a_runtime_start_in_other_compute_instructions_is_refused():
    x = np.zeros((8, 40), np.float32)
    w = np.zeros((1, 1), np.int32)

    def exp_of_window(x, w):
        t, word = nl.load(x), nl.load(w)
        u = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(u, nl.exp, t[:, nl.ds(word, 8)])

    def copy_of_window(x, w):
        t, word = nl.load(x), nl.load(w)
        nisa.tensor_copy(nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf), t[:, nl.ds(word, 8)])

    assert rule_of_body(exp_of_window, x, w) == "dynamic_start"
    assert rule_of_body(copy_of_window, x, w, match="tensor_copy_dynamic_src") == "dynamic_start"


def test_dynamic_copy_rules():
    x = np.zeros((8, 40), np.float32)
    w = np.zeros((1, 1), np.int32)

    def plain_src(x, w):  # no runtime start: a plain tensor_copy does that
        t = nl.load(x)
        nisa.tensor_copy_dynamic_src(nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf), t[:, 0:8])

    def hbm_side(x, w):
        word = nl.load(w)
        nisa.tensor_copy_dynamic_src(nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf),
                                     x[:, nl.ds(word, 8)])

    def wrong_shape(x, w):
        t, word = nl.load(x), nl.load(w)
        nisa.tensor_copy_dynamic_src(nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf),
                                     t[:, nl.ds(word, 8)])

    assert rule_of_body(plain_src, x, w) == "operand"
    assert rule_of_body(hbm_side, x, w) == "on_chip_only"
    assert rule_of_body(wrong_shape, x, w) == "shape_mismatch"


def test_legacy_dynamic_src_returns_the_window():
    import torchneuron.nki.legacy as legacy

    lnl, lisa = legacy.language, legacy.isa

    @legacy.jit
    def kernel(x, start):
        out = lnl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=lnl.shared_hbm)
        t = lnl.load(x)
        word = lnl.load(start)
        lnl.store(out, lisa.tensor_copy_dynamic_src(t[:, lnl.ds(word, 8)]))
        return out

    x = _rng(5).standard_normal((8, 24)).astype(np.float32)
    got = legacy.simulate_kernel(kernel, x, np.array([[9]], np.int32))
    np.testing.assert_array_equal(got, x[:, 9:17])


@pytest.mark.parametrize("alone", [False, True])
def test_legacy_dynamic_src_with_an_index_word(alone):
    """The legacy form: src[ix, offsets[0, i] + iy] (or src[ix, offsets[0, i], iz]),
    a word of an SBUF index tile plus a static index grid, gathers column
    windows one offset at a time."""
    import torchneuron.nki.legacy as legacy

    lnl, lisa = legacy.language, legacy.isa

    @legacy.jit
    def kernel(x, offsets):
        n = offsets.shape[1]
        out = lnl.ndarray((x.shape[0], n, 2), dtype=x.dtype, buffer=lnl.shared_hbm)
        t = lnl.load(x)
        offs = lnl.load(offsets)
        res = lnl.ndarray((x.shape[0], n, 2), dtype=x.dtype, buffer=lnl.sbuf)
        if alone:
            ix, _, iz = lnl.mgrid[0:x.shape[0], 0:1, 0:2]
            for i in lnl.affine_range(n):
                res[ix, i, iz] = lisa.tensor_copy_dynamic_src(t[ix, offs[0, i], iz])
        else:
            ix, iy, iz = lnl.mgrid[0:x.shape[0], 0:1, 0:2]
            for i in lnl.affine_range(n):
                res[ix, i + iy, iz] = lisa.tensor_copy_dynamic_src(t[ix, offs[0, i] + iy, iz])
        lnl.store(out, res)
        return out

    x = _rng(6).standard_normal((8, 20, 2)).astype(np.float32)
    offsets = np.array([[4, 0, 19, 7]], np.int32)
    got = legacy.simulate_kernel(kernel, x, offsets)
    np.testing.assert_array_equal(got, x[:, offsets[0], :])
