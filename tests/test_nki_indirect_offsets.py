"""Dynamic offsets of access patterns (nki.language.NkiTensor.ap), as the NKI
access-pattern guide defines them: ``vector_offset`` on a dim other than the
first (partition p keeps its place and moves ``index[p]`` steps of that dim)
and ``scalar_offset`` (one value, read while the kernel runs or known now,
moves the whole pattern along ``indirect_dim``), on HBM and SBUF operands;
checked against NumPy on the host simulator, with the out-of-bounds modes,
the cost on the GpSimd engine and a negative test per rule."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of_body


def _rng(seed):
    return np.random.default_rng(seed)


def _oob(skip):
    return nisa.oob_mode.skip if skip else nisa.oob_mode.error


# ---- vector_offset on indirect_dim 1 --------------------------------------------------


@nki.jit
def window_gather(x, idx, width, skip):
    """out[p] = x[p, idx[p] : idx[p] + width] (skipped partitions keep -1)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, width), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, width), x.dtype, buffer=nl.sbuf)
    nisa.memset(t, -1.0)
    nisa.dma_copy(t, x.ap([[cols, rows], [1, width]], offset=0, vector_offset=nl.load(idx),
                          indirect_dim=1), oob_mode=_oob(skip))
    nl.store(out, t)
    return out


@nki.jit
def window_scatter(base, idx, src):
    """out = base, then out[p, idx[p] : idx[p] + width] = src[p]."""
    rows, cols = base.shape
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, base)
    nisa.dma_copy(out.ap([[cols, rows], [1, src.shape[1]]], offset=0,
                         vector_offset=nl.load(idx), indirect_dim=1), nl.load(src))
    return out


def test_vector_offset_on_the_second_dim_gathers_a_window_per_partition():
    x = _rng(0).standard_normal((8, 40)).astype(np.float32)
    idx = np.array([0, 3, 34, 7, 20, 1, 12, 30], np.int32).reshape(8, 1)
    got = nki.simulate(window_gather)(x, idx, 6, False)
    want = np.stack([x[p, i:i + 6] for p, i in enumerate(idx[:, 0])])
    np.testing.assert_array_equal(got, want)


def test_vector_offset_on_the_second_dim_scatters_a_window_per_partition():
    base = _rng(1).standard_normal((8, 40)).astype(np.float32)
    src = _rng(2).standard_normal((8, 5)).astype(np.float32)
    idx = np.array([5, 0, 35, 9, 2, 17, 30, 11], np.int32).reshape(8, 1)
    got = nki.simulate(window_scatter)(base, idx, src)
    want = base.copy()
    for p, i in enumerate(idx[:, 0]):
        want[p, i:i + 5] = src[p]
    np.testing.assert_array_equal(got, want)


def test_an_offset_is_in_bounds_when_every_partition_stays_inside_the_tensor():
    # The last partition's window ends at 7 * 40 + idx + 5, so idx <= 34.
    x = _rng(3).standard_normal((8, 40)).astype(np.float32)
    idx = np.full((8, 1), 34, np.int32)
    nki.simulate(window_gather)(x, idx, 6, False)
    idx[2, 0] = 35
    with pytest.raises(nki.NkiError, match=r"\[oob_mode\].*index 35 \(partition 2") as e:
        nki.simulate(window_gather)(x, idx, 6, False)
    assert e.value.rule == "oob_mode"
    got = nki.simulate(window_gather)(x, idx, 6, True)
    assert (got[2] == -1).all()
    np.testing.assert_array_equal(got[3], x[3, 34:40])


# ---- scalar_offset ------------------------------------------------------------------


@nki.jit
def pick(x, which, how, skip):
    """out = x[which] of x [E, P, F]: the word read as an SBUF tile, a loaded
    register or an NkiScalar (plus 0), moving the pattern along dim 0."""
    e, p, f = x.shape
    out = nl.ndarray((p, f), x.dtype, buffer=nl.shared_hbm)
    word = nl.load(which)
    if how == "register":
        offset = nisa.register_alloc()
        nisa.register_load(offset, which)
    elif how == "scalar":
        offset = nisa.scalar_load(word) * 1 + 0
    else:
        offset = word
    t = nl.ndarray((p, f), x.dtype, buffer=nl.sbuf)
    nisa.memset(t, -1.0)
    nisa.dma_copy(t, x.ap([[f, p], [1, f]], offset=0, scalar_offset=offset, indirect_dim=0),
                  oob_mode=_oob(skip))
    nl.store(out, t)
    return out


@pytest.mark.parametrize("how", ["tile", "register", "scalar"])
def test_scalar_offset_moves_the_pattern_by_whole_steps_of_its_dim(how):
    x = _rng(4).standard_normal((4, 16, 8)).astype(np.float32)
    for e in (0, 3):
        got = nki.simulate(pick)(x, np.array([[e]], np.int32), how, False)
        np.testing.assert_array_equal(got, x[e])


def test_scalar_offset_out_of_bounds_fails_or_skips_the_transfer():
    x = _rng(5).standard_normal((4, 16, 8)).astype(np.float32)
    with pytest.raises(nki.NkiError, match=r"\[oob_mode\].*scalar_offset 4 is out of bounds"):
        nki.simulate(pick)(x, np.array([[4]], np.int32), "tile", False)
    with pytest.raises(nki.NkiError, match=r"scalar_offset -1 "):
        nki.simulate(pick)(x, np.array([[-1]], np.int32), "tile", False)
    np.testing.assert_array_equal(nki.simulate(pick)(x, np.array([[4]], np.int32), "tile", True),
                                  np.full((16, 8), -1.0, np.float32))


@nki.jit
def batch_slice_to_hbm(x, which):
    """HBM to HBM: out = x[:, which, :] of x [A, B, C], the word on dim 1."""
    a, b, c = x.shape
    out = nl.ndarray((a, c), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, x.ap([[b * c, a], [1, c]], offset=0, scalar_offset=nl.load(which),
                            indirect_dim=1), dge_mode=nisa.dge_mode.hwdge)
    return out


@nki.jit
def store_at(base, which, src):
    """out = base [E, P, F], then out[which] = src [P, F] (scalar_offset on dst)."""
    e, p, f = base.shape
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, base)
    nisa.dma_copy(out.ap([[f, p], [1, f]], offset=0, scalar_offset=nl.load(which),
                         indirect_dim=0), nl.load(src))
    return out


@nki.jit
def columns_on_chip(x, which, width):
    """out = x[:, w : w + width], the window chosen in SBUF (dim 1 of the tile;
    on chip the pattern's first pair steps whole partitions of f elements)."""
    p, f = x.shape
    out = nl.ndarray((p, width), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    w = nl.ndarray((p, width), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(w, t.ap([[f, p], [1, width]], offset=0, scalar_offset=nl.load(which),
                          indirect_dim=1))
    nl.store(out, w)
    return out


def test_scalar_offset_on_any_dim_and_either_side():
    x = _rng(6).standard_normal((3, 5, 7)).astype(np.float32)
    got = nki.simulate(batch_slice_to_hbm)(x, np.array([[2]], np.int32))
    np.testing.assert_array_equal(got, x[:, 2, :])
    base = _rng(7).standard_normal((4, 16, 8)).astype(np.float32)
    src = _rng(8).standard_normal((16, 8)).astype(np.float32)
    want = base.copy()
    want[1] = src
    np.testing.assert_array_equal(nki.simulate(store_at)(base, np.array([[1]], np.int32), src),
                                  want)
    t = _rng(9).integers(-100, 100, (32, 64)).astype(np.int32)
    np.testing.assert_array_equal(
        nki.simulate(columns_on_chip)(t, np.array([[50]], np.int32), 14), t[:, 50:64])
    with pytest.raises(nki.NkiError, match=r"scalar_offset 51 is out of bounds: the indexed "
                                           r"dim allows 0\.\.50"):
        nki.simulate(columns_on_chip)(t, np.array([[51]], np.int32), 14)


def test_a_scalar_offset_known_at_trace_time_is_a_static_offset():
    @nki.jit
    def k(x):
        out = nl.ndarray((16, 8), x.dtype, buffer=nl.shared_hbm)
        reg = nisa.register_alloc(2)
        nl.store(out, nl.load(x.ap([[8, 16], [1, 8]], offset=0, scalar_offset=reg,
                                   indirect_dim=0)))
        return out

    x = _rng(10).standard_normal((4, 16, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(k)(x), x[2])
    est = nki.benchmark(k)(x)
    assert est.busy_us.get("GpSimd", 0) == 0  # no descriptor to generate at run time


def test_software_dge_pays_for_a_scalar_offset_on_gpsimd_and_hardware_dge_does_not():
    x = np.zeros((4, 16, 8), np.float32)
    soft = nki.benchmark(pick)(x, np.zeros((1, 1), np.int32), "tile", False)
    assert soft.busy_us["GpSimd"] > 0
    hard = nki.benchmark(batch_slice_to_hbm)(np.zeros((3, 5, 7), np.float32),
                                             np.zeros((1, 1), np.int32))
    assert hard.busy_us.get("GpSimd", 0) == 0


# ---- dma_transpose with a scalar_offset -----------------------------------------------


@nki.jit
def transpose_block(x, w, skip):
    """out = x[w].T for x [E, P, F]: dma_transpose's src moved by the word w."""
    e, p, f = x.shape
    out = nl.ndarray((f, p), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((f, p), x.dtype, buffer=nl.sbuf)
    nisa.memset(t, 0)
    word = nl.ndarray((1, 1), w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(word, w)
    nisa.dma_transpose(t, x.ap([[f, p], [1, f]], offset=0, scalar_offset=word, indirect_dim=0),
                       oob_mode=_oob(skip))
    nl.store(out, t)
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_dma_transpose_moves_its_src_by_a_scalar_offset(dtype):
    x = _rng(20).standard_normal((4, 16, 24)).astype(np.float16)
    for w in (0, 3):
        got = nki.simulate(transpose_block)(x, np.array([[w]], dtype), False)
        np.testing.assert_array_equal(got, x[w].T)


def test_dma_transpose_scalar_offset_out_of_bounds_fails_or_skips():
    x = _rng(21).standard_normal((4, 16, 24)).astype(np.float16)
    skipped = nki.simulate(transpose_block)(x, np.array([[4]], np.int32), True)
    np.testing.assert_array_equal(skipped, np.zeros((24, 16), np.float16))
    with pytest.raises(nki.NkiError, match=r"\[oob_mode\].*scalar_offset 4 ") as e:
        nki.simulate(transpose_block)(x, np.array([[4]], np.int32), False)
    assert e.value.rule == "oob_mode"


@nki.jit
def transpose_window(x, start, width):
    """An SBUF tile's columns [start, start + width), transposed: a runtime
    nl.ds start moves dma_transpose's on-chip src."""
    p, f = x.shape
    out = nl.ndarray((width, p), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(idx, start)
    u = nl.ndarray((width, p), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(u, t[:, nl.ds(idx, width)])
    nl.store(out, u)
    return out


def test_dma_transpose_of_a_sliding_sbuf_window():
    x = _rng(22).standard_normal((32, 40)).astype(np.float16)
    got = nki.simulate(transpose_window)(x, np.array([[13]], np.int32), 16)
    np.testing.assert_array_equal(got, x[:, 13:29].T)
    # software DGE: the GpSimd engine reads the word and writes the descriptors
    est = nki.benchmark(transpose_window)(x, np.array([[13]], np.int32), 16)
    assert est.busy_us["GpSimd"] > 0


# ---- rules ----------------------------------------------------------------------------


def test_dynamic_offset_rules():
    x = np.zeros((4, 16, 8), np.float32)
    w = np.zeros((1, 1), np.int32)

    def tile(shape=(16, 8), dtype=nl.float32):
        return nl.ndarray(shape, dtype, buffer=nl.sbuf)

    def pattern(t, **kw):
        return t.ap([[8, 16], [1, 8]], offset=0, **kw)

    def both(x, w):
        i = nl.load(w)
        nisa.dma_copy(tile(), pattern(x, scalar_offset=i, vector_offset=i))

    def dim_out_of_range(x, w):
        nisa.dma_copy(tile(), pattern(x, scalar_offset=nl.load(w), indirect_dim=3))

    def float_word(x, w):
        nisa.dma_copy(tile(), pattern(x, scalar_offset=nl.load(w, dtype=nl.float32)))

    def hbm_word(x, w):
        nisa.dma_copy(tile(), pattern(x, scalar_offset=w))

    def partition_dim_on_chip(x, w):
        nisa.dma_copy(tile(), nl.load(x[0]).ap([[8, 16], [1, 8]], offset=0,
                                              scalar_offset=nl.load(w), indirect_dim=0))

    def uint32_word_on_chip(x, w):
        word = nl.load(w, dtype=nl.uint32)
        nisa.dma_copy(tile((16, 4)), nl.load(x[0]).ap([[8, 16], [1, 4]], offset=0,
                                                       scalar_offset=word, indirect_dim=1))

    def no_dge(x, w):
        nisa.dma_copy(tile(), pattern(x, scalar_offset=nl.load(w)),
                      dge_mode=nisa.dge_mode.none)

    def wrong_size(x, w):
        nisa.dma_copy(tile((16, 4)), pattern(x, scalar_offset=nl.load(w)))

    def outside_even_at_zero(x, w):
        nisa.dma_copy(tile(), x.ap([[8, 16], [1, 8]], offset=500, scalar_offset=nl.load(w)))

    def transposed_without_dge(x, w):
        nisa.dma_transpose(tile((8, 16), nl.bfloat16),
                           x.ap([[8, 16], [1, 8]], offset=0, dtype=nl.bfloat16,
                                scalar_offset=nl.load(w)), dge_mode=nisa.dge_mode.none)

    def transposed_into_a_moved_dst(x, w):
        nisa.dma_transpose(x.ap([[16, 8], [1, 16]], offset=0, dtype=nl.bfloat16,
                                scalar_offset=nl.load(w)), tile((16, 8), nl.bfloat16))

    def indices_per_partition(x, w):
        i = nl.ndarray((16, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(tile((8, 8)), x.ap([[8, 16], [1, 8]], offset=0, vector_offset=i,
                                         indirect_dim=1))

    def pattern_partitions(x, w):
        i = nl.ndarray((8, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(tile((8, 8)), x.ap([[8, 16], [1, 8]], offset=0, vector_offset=i,
                                         indirect_dim=1))

    assert rule_of_body(both, x, w) == "indirect_dma"
    assert rule_of_body(dim_out_of_range, x, w) == "indirect_dma"
    assert rule_of_body(float_word, x, w) == "indirect_indices"
    assert rule_of_body(hbm_word, x, w) == "indirect_indices"
    assert rule_of_body(partition_dim_on_chip, x, w) == "indirect_dma"
    assert rule_of_body(uint32_word_on_chip, x, w) == "indirect_indices"
    assert rule_of_body(no_dge, x, w) == "indirect_dge"
    assert rule_of_body(wrong_size, x, w) == "shape_mismatch"
    assert rule_of_body(outside_even_at_zero, x, w) == "indirect_dma"
    assert rule_of_body(transposed_without_dge, x, w) == "indirect_dge"
    assert rule_of_body(transposed_into_a_moved_dst, x, w) == "indirect_dma"
    assert rule_of_body(indices_per_partition, x, w) == "indirect_indices"
    assert rule_of_body(pattern_partitions, x, w) == "shape_mismatch"
