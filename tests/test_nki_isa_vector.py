"""nki.isa's scan, bn_stats/bn_aggr and top-8 instructions against NumPy, with their rules."""

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import NkiError

from nki_testing import rule_of


def rng(seed=0):
    return np.random.default_rng(seed)


@nki.jit
def scan_kernel(a, b, init, op0, op1, reverse0, reverse1, tile_initial):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    initial = nl.load(init) if tile_initial else 0.5
    res = nl.ndarray(a.shape, nl.float32)
    nisa.tensor_tensor_scan(res, x, y, initial, op0, op1, reverse0=reverse0, reverse1=reverse1)
    nl.store(out, res)
    return out


def scan_reference(a, b, init, op0, op1, reverse0, reverse1):
    out = np.empty_like(a)
    prev = init[:, 0].copy()
    for j in range(a.shape[1]):
        x = op0(prev, a[:, j]) if reverse0 else op0(a[:, j], prev)
        prev = (op1(b[:, j], x) if reverse1 else op1(x, b[:, j])).astype(np.float32)
        out[:, j] = prev
    return out


@pytest.mark.parametrize("op0,op1,np0,np1", [
    (nl.multiply, nl.add, np.multiply, np.add),  # a linear recurrence
    (nl.add, nl.maximum, np.add, np.maximum),
])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("tile_initial", [False, True])
def test_tensor_tensor_scan(op0, op1, np0, np1, reverse, tile_initial):
    a = rng(1).uniform(0.5, 1.0, (16, 40)).astype(np.float32)
    b = rng(2).standard_normal((16, 40)).astype(np.float32)
    init = rng(3).standard_normal((16, 1)).astype(np.float32)
    got = nki.simulate(scan_kernel)(a, b, init, op0, op1, reverse, reverse, tile_initial)
    ref_init = init if tile_initial else np.full((16, 1), 0.5, np.float32)
    ref = scan_reference(a, b, ref_init, np0, np1, reverse, reverse)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_scan_is_a_cumulative_sum_on_neuron_tensors():
    x = torch.randn(8, 300)
    ones = torch.ones(8, 300)
    out = scan_kernel(ones.to("neuron"), x.to("neuron"), torch.zeros(8, 1).to("neuron"),
                      nl.multiply, nl.add, False, False, True).cpu()
    torch.testing.assert_close(out, torch.cumsum(x, dim=1), rtol=1e-4, atol=1e-4)


@nki.jit
def scan_layouts_kernel(a, b, layout):
    """The scan with its destination on top of its first input (the same
    columns, or shifted one column on) or a strided / bf16 input."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), nl.float32, buffer=nl.shared_hbm)
    y = nl.load(b)
    if layout == "strided":
        wide = nl.ndarray((rows, 2 * cols), nl.float32)
        nisa.tensor_copy(wide[:, 0:2 * cols:2], nl.load(a))
        nisa.tensor_copy(wide[:, 1:2 * cols:2], y)
        res = nl.ndarray((rows, cols), nl.float32)
        nisa.tensor_tensor_scan(res, wide[:, 0:2 * cols:2], y, 0.25, nl.multiply, nl.add)
        nl.store(out, res)
        return out
    if layout == "bf16":
        x = nl.ndarray((rows, cols), nl.bfloat16)
        nisa.tensor_copy(x, nl.load(a))
        res = nl.ndarray((rows, cols), nl.float32)
        nisa.tensor_tensor_scan(res, x, y, 0.25, nl.multiply, nl.add)
        nl.store(out, res)
        return out
    buf = nl.ndarray((rows, cols + 1), nl.float32)
    nisa.tensor_copy(buf[:, 0:cols], nl.load(a))
    shift = 1 if layout == "shifted" else 0
    nisa.tensor_tensor_scan(buf[:, shift:shift + cols], buf[:, 0:cols], y, 0.25, nl.multiply, nl.add)
    nl.store(out, buf[:, shift:shift + cols])
    return out


@pytest.mark.parametrize("layout", ["same", "shifted", "strided", "bf16"])
def test_scan_reads_its_inputs_before_writing(layout):
    # Contiguous fp32 rows are scanned where they lie (the multiply-add chain
    # without the ALU dispatch); a destination that overlaps an input at
    # another offset must still see the input's old values.
    a = rng(4).uniform(0.5, 1.0, (16, 40)).astype(np.float32)
    b = rng(5).standard_normal((16, 40)).astype(np.float32)
    got = nki.simulate(scan_layouts_kernel)(a, b, layout)
    x = torch.from_numpy(a).to(torch.bfloat16).float().numpy() if layout == "bf16" else a
    ref = scan_reference(x, b, np.full((16, 1), 0.25, np.float32), np.multiply, np.add, False, False)
    # float32 multiply, then add: the same two roundings, so the same bits.
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


@nki.jit
def bn_kernel(x, chunk):
    rows, cols = x.shape
    out = nl.ndarray((rows, 2), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    n = (cols + chunk - 1) // chunk
    stats = nl.ndarray((rows, 6 * n), nl.float32)
    for c in range(n):
        width = min(chunk, cols - c * chunk)
        nisa.bn_stats(stats[:, 6 * c:6 * (c + 1)], t[:, c * chunk:c * chunk + width])
    res = nl.ndarray((rows, 2), nl.float32)
    nisa.bn_aggr(res, stats)
    nl.store(out, res)
    return out


@pytest.mark.parametrize("cols,chunk", [(512, 512), (1000, 512), (7, 512), (1, 512), (96, 40)])
def test_bn_stats_bn_aggr_mean_and_variance(cols, chunk):
    x = (rng(4).standard_normal((32, cols)) * 3 + 1).astype(np.float32)
    got = nki.simulate(bn_kernel)(x, chunk)
    np.testing.assert_allclose(got[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], x.var(axis=1), rtol=1e-4, atol=1e-5)


def test_bn_stats_tuples_are_even_and_odd_elements():
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], 6), nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((x.shape[0], 6), nl.float32)
        nisa.bn_stats(s, nl.load(x))
        nl.store(out, s)
        return out

    x = rng(5).standard_normal((4, 9)).astype(np.float32)
    got = nki.simulate(k)(x)
    even, odd = x[:, 0::2], x[:, 1::2]
    ref = np.stack([np.full(4, 5.0), even.mean(1), even.var(1) * 5,
                    np.full(4, 4.0), odd.mean(1), odd.var(1) * 4], axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@nki.jit
def top8_kernel(x, imm):
    rows = x.shape[0]
    vals_out = nl.ndarray((rows, 8), nl.float32, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((rows, 8), nl.uint32, buffer=nl.shared_hbm)
    replaced_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    idx2_out = nl.ndarray((rows, 8), nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(x)
    vals = nl.ndarray((rows, 8), nl.float32)
    nisa.max8(vals, t)
    idx = nl.ndarray((rows, 8), nl.uint32)
    nisa.nc_find_index8(idx, t, vals)
    replaced = nl.ndarray(x.shape, nl.float32)
    idx2 = nl.ndarray((rows, 8), nl.uint32)
    nisa.nc_match_replace8(replaced, t, vals, imm, dst_idx=idx2)
    nl.store(vals_out, vals), nl.store(idx_out, idx)
    nl.store(replaced_out, replaced), nl.store(idx2_out, idx2)
    return vals_out, idx_out, replaced_out, idx2_out


def test_max8_find_index8_match_replace8():
    x = rng(6).standard_normal((16, 100)).astype(np.float32)
    x[3, 10] = x[3, 20] = x[3, 30] = 9.0  # a repeated maximum gets distinct indices
    vals, idx, replaced, idx2 = nki.simulate(top8_kernel)(x, -1e9)
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(idx.astype(np.int64), order)
    np.testing.assert_array_equal(idx2, idx)
    ref = x.copy()
    np.put_along_axis(ref, order, -1e9, 1)
    np.testing.assert_array_equal(replaced, ref)


def test_topk_by_rounds_of_max8_on_neuron():
    """top-16: max8, replace those by -inf, max8 again (the documented recipe)."""
    @nki.jit
    def top16(x):
        out = nl.ndarray((x.shape[0], 16), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        res = nl.ndarray((x.shape[0], 16), nl.float32)
        nisa.max8(res[:, 0:8], t)
        rest = nl.ndarray(x.shape, nl.float32)
        nisa.nc_match_replace8(rest, t, res[:, 0:8], float("-inf"))
        nisa.max8(res[:, 8:16], rest)
        nl.store(out, res)
        return out

    x = torch.randn(32, 64)
    got = top16(x.to("neuron")).cpu()
    torch.testing.assert_close(got, torch.topk(x, 16, dim=1).values, rtol=0, atol=0)


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.maximum, np.max), (nl.minimum, np.min)])
def test_tensor_partition_reduce_floats(op, ref):
    @nki.jit
    def k(x):
        out = nl.ndarray((1, x.shape[1]), nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((1, x.shape[1]), nl.float32)
        nisa.tensor_partition_reduce(r, op, nl.load(x))
        nl.store(out, r)
        return out

    x = rng(7).standard_normal((100, 33)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k)(x), ref(x, axis=0, keepdims=True), rtol=1e-5,
                               atol=1e-5)


def test_tensor_partition_reduce_bitwise_or_and_legacy_form():
    from torchneuron.nki.legacy import isa as legacy_isa

    @nki.jit
    def k(x):
        out = nl.ndarray((1, x.shape[1]), nl.int32, buffer=nl.shared_hbm)
        nl.store(out, legacy_isa.tensor_partition_reduce(nl.bitwise_or, nl.load(x)))
        return out

    x = rng(8).integers(0, 1 << 20, (64, 10)).astype(np.int32)
    np.testing.assert_array_equal(nki.simulate(k)(x), np.bitwise_or.reduce(x, axis=0)[None])


def test_tensor_partition_reduce_rules():
    def float_bits(x):
        nisa.tensor_partition_reduce(nl.ndarray((1, 8), nl.float32), nl.bitwise_or, nl.load(x))

    def two_rows(x):
        nisa.tensor_partition_reduce(nl.ndarray((2, 8), nl.float32), nl.add, nl.load(x))

    assert rule_of(float_bits, np.zeros((4, 8), np.float32)) == "dtype"
    assert rule_of(two_rows, np.zeros((4, 8), np.float32)) == "shape_mismatch"


# ---- rules --------------------------------------------------------------------------

def test_bn_stats_fmax_rule():
    def k(x):
        s = nl.ndarray((4, 6), nl.float32)
        nisa.bn_stats(s, nl.load(x))

    assert rule_of(k, np.zeros((4, 513), np.float32)) == "bn_stats_fmax"


def test_bn_aggr_needs_tuples():
    def k(x):
        s = nl.ndarray((4, 2), nl.float32)
        nisa.bn_aggr(s, nl.load(x))

    assert rule_of(k, np.zeros((4, 7), np.float32)) == "shape_mismatch"


def test_max8_size_and_dst_shape_rules():
    def small(x):
        nisa.max8(nl.ndarray((4, 8), nl.float32), nl.load(x))

    def wide(x):
        nisa.max8(nl.ndarray((4, 9), nl.float32), nl.load(x))

    assert rule_of(small, np.zeros((4, 7), np.float32)) == "max8_size"
    assert rule_of(wide, np.zeros((4, 64), np.float32)) == "shape_mismatch"


def test_find_index8_writes_integers():
    def k(x):
        t = nl.load(x)
        v = nl.ndarray((4, 8), nl.float32)
        nisa.max8(v, t)
        nisa.nc_find_index8(nl.ndarray((4, 8), nl.float32), t, v)

    assert rule_of(k, np.zeros((4, 64), np.float32)) == "dtype"


def test_scan_cannot_read_both_inputs_from_psum():
    def k(x):
        t = nl.load(x)
        p1 = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        p2 = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(p1, t), nisa.tensor_copy(p2, t)
        nisa.tensor_tensor_scan(nl.ndarray((4, 8), nl.float32), p1, p2, 0.0, nl.add, nl.add)

    assert rule_of(k, np.zeros((4, 8), np.float32)) == "tensor_tensor_psum_inputs"


def test_new_instructions_run_on_the_vector_engine():
    def k(x):
        t = nl.load(x)
        nisa.tensor_tensor_scan(nl.ndarray((4, 8), nl.float32), t, t, 0.0, nl.add, nl.add)
        nisa.bn_stats(nl.ndarray((4, 6), nl.float32), t)
        nisa.max8(nl.ndarray((4, 8), nl.float32), t)

    est = nki.benchmark(nki.jit(k))(np.zeros((4, 8), np.float32))
    assert est.instructions["Vector"] == 3 and est.busy_us["Vector"] > 0


def _rule_raise():
    def k(x):
        nisa.max8(nl.ndarray((4, 8), nl.float32), nl.load(x))

    nki.simulate(nki.jit(k))(np.zeros((4, 7), np.float32))


def test_enums_version_and_validation_error():
    assert issubclass(nisa.NkiValidationError, NkiError)
    with pytest.raises(nisa.NkiValidationError):
        _rule_raise()
    assert nisa.get_nc_version() in set(nisa.nc_version)
    assert nisa.engine.vector == 1 and nisa.engine.unknown < 0

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray(x.shape, nl.float32)
        nisa.tensor_scalar(r, t, nl.add, 1.0, engine=nisa.engine.unknown)
        nl.store(out, r)
        return out

    np.testing.assert_array_equal(nki.simulate(k)(np.ones((4, 4), np.float32)), 2.0)
