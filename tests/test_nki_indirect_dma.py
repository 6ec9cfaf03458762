"""nki.isa.dma_copy's indirect form (and nl.load / nl.store of an indexed
tensor): a gather of HBM rows named by an SBUF index tile, a scatter into
them, a scatter-add; against torch (index_select, index_copy, index_add) on
the host simulator and on neuron tensors, the documented out-of-bounds
behaviour (oob_mode error / skip), and a negative test per rule."""

import numpy as np
import pytest
import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import NkiError

from nki_testing import expect_rule, rule_of_body


def _oob(skip):
    return nisa.oob_mode.skip if skip else nisa.oob_mode.error


@nki.jit
def gather(x, idx, skip, fill):
    """out[p] = x[idx[p]] (rows whose index is skipped keep `fill`)."""
    out = nl.ndarray((idx.shape[0],) + tuple(x.shape[1:]), x.dtype, buffer=nl.shared_hbm)
    i = nl.load(idx)
    t = nl.ndarray(out.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(t, fill)
    nisa.dma_copy(t, x[i], oob_mode=_oob(skip))
    nl.store(out, t)
    return out


@nki.jit
def gather_load(x, idx):
    """nl.load of an indexed tensor, columns 2..9 only."""
    out = nl.ndarray((idx.shape[0], 8), x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x[nl.load(idx), 2:10]))
    return out


@nki.jit
def gather_ap(x, idx):
    """The current dialect's access-pattern form: x.ap(..., vector_offset=idx)."""
    rows, cols = x.shape
    p = idx.shape[0]
    out = nl.ndarray((p, cols - 1), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, cols - 1), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x.ap([[cols, p], [1, cols - 1]], offset=1, vector_offset=nl.load(idx),
                          indirect_dim=0), dge_mode=nisa.dge_mode.swdge)
    nl.store(out, t)
    return out


@nki.jit
def scatter(base, idx, src, skip, add, unique):
    """out = base, then out[idx[p]] = src[p] (or += with add)."""
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(base))
    i = nl.load(idx)
    s = nl.load(src)
    if add:
        nisa.dma_copy(out[i], s, dst_rmw_op=nl.add, unique_indices=unique)
    elif skip:
        nisa.dma_copy(out[i], s, oob_mode=nisa.oob_mode.skip)
    else:
        nl.store(out[i], s)
    return out


def _idx(values):
    return torch.tensor(values, dtype=torch.int32).reshape(-1, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32,
                                   torch.int8])
def test_gather_matches_index_select(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(50, 96, generator=g) * 50).to(dtype)
    idx = torch.randint(0, 50, (32, 1), generator=g, dtype=torch.int32)  # duplicates too
    got = gather(x, idx, False, 0.0)
    assert got.dtype == dtype and torch.equal(got, x.index_select(0, idx[:, 0].long()))


def test_gather_3d_rows_and_uint32_indices():
    x = torch.randn(20, 3, 16)
    idx = np.array([[19], [0], [7], [7]], np.uint32)
    got = gather(x, idx, False, 0.0)
    assert torch.equal(got, x[torch.tensor([19, 0, 7, 7])])


def test_nl_load_of_an_indexed_column_window():
    x = torch.randn(40, 12)
    idx = _idx([5, 39, 0, 17, 5])
    assert torch.equal(gather_load(x, idx), x[idx[:, 0].long(), 2:10])


def test_access_pattern_form_with_an_offset():
    x = torch.randn(30, 9)
    idx = _idx([29, 3, 3, 11])
    assert torch.equal(gather_ap(x, idx), x[idx[:, 0].long(), 1:])


def test_gather_on_neuron_tensors_from_a_non_contiguous_tensor():
    x = torch.randn(64, 48).t()  # [48, 64], not contiguous
    idx = _idx(list(range(47, -1, -3)))
    torchneuron.clear_op_tracking()
    got = gather(x.to("neuron"), idx.to("neuron"), False, 0.0).cpu()
    assert not torchneuron.get_fallback_ops()
    assert torch.equal(got, x[idx[:, 0].long()])


def test_scatter_matches_index_copy():
    base, src = torch.randn(40, 24), torch.randn(16, 24)
    idx = torch.randperm(40, generator=torch.Generator().manual_seed(1))[:16].int().reshape(-1, 1)
    got = scatter(base, idx, src, False, False, True)
    assert torch.equal(got, base.index_copy(0, idx[:, 0].long(), src))


def test_scatter_with_repeated_indices_keeps_the_last_partition():
    base, src = torch.zeros(8, 4), torch.arange(16.0).reshape(4, 4)
    got = scatter(base, _idx([3, 5, 3, 3]), src, False, False, True)
    want = base.clone()
    want[5], want[3] = src[1], src[3]  # rows move in partition order: the last write lands
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scatter_add_with_repeated_indices_adds_every_row(dtype):
    g = torch.Generator().manual_seed(2)
    base = torch.randn(10, 32, generator=g).to(dtype)
    src = torch.randn(24, 32, generator=g).to(dtype)
    idx = torch.randint(0, 10, (24, 1), generator=g, dtype=torch.int32)
    got = scatter(base, idx, src, False, True, False)
    want = base.float().index_add(0, idx[:, 0].long(), src.float())
    if dtype == torch.float32:  # one fp32 add per row, in partition order
        want = base.clone()
        for p, r in enumerate(idx[:, 0].tolist()):
            want[r] += src[p]
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


def test_scatter_add_with_unique_indices():
    base, src = torch.randn(12, 8), torch.randn(6, 8)
    idx = _idx([11, 0, 4, 7, 2, 9])
    got = scatter(base, idx, src, False, True, True)
    assert torch.equal(got, base.index_add(0, idx[:, 0].long(), src))


# ---- out of bounds (nki.isa.dma_copy: oob_mode error raises, skip skips the row) ----------


def test_out_of_bounds_index_is_an_error_naming_the_kernel_line():
    x = torch.randn(10, 4)
    expect_rule("oob_mode", gather, x, _idx([2, 10, 3]), False, 0.0,
                match=r"test_nki_indirect_dma.py:\d+: nki.isa.dma_copy: "
                      r"\[oob_mode\].*index 10 \(partition 1")
    # int32 indices below 0 are out too
    expect_rule("oob_mode", gather, x, _idx([-1, 0]), False, 0.0, match=r"index -1 ")


def test_out_of_bounds_rows_are_skipped():
    x = torch.randn(10, 4)
    got = gather(x, _idx([2, 10, -5, 9]), True, -7.0)
    want = torch.full((4, 4), -7.0)
    want[0], want[3] = x[2], x[9]
    assert torch.equal(got, want)
    base, src = torch.zeros(6, 3), torch.ones(3, 3)
    got = scatter(base, _idx([6, 1, 100]), src, True, False, True)
    want = base.clone()
    want[1] = 1.0
    assert torch.equal(got, want)


def test_repeated_indices_declared_unique_are_an_error():
    expect_rule("unique_indices", scatter, torch.zeros(4, 2), _idx([2, 0, 2]), torch.ones(3, 2),
                False, True, True, match=r"\[unique_indices\].*index 2 repeats")


def test_out_of_bounds_on_the_device_raises_at_the_next_synchronize():
    x = torch.randn(10, 4, device="neuron")
    out = gather(x, _idx([11]).to("neuron"), False, 0.0)
    with pytest.raises(IndexError, match="oob_mode"):
        out.cpu()
    torch.neuron.clear_error()
    assert torch.equal(gather(x, _idx([3]).to("neuron"), False, 0.0).cpu(), x.cpu()[3:4])


# ---- cost ----------------------------------------------------------------------------


@nki.jit
def direct(x, idx):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.load(idx)
    nl.store(out, nl.load(x))
    return out


@nki.jit
def indirect(x, idx):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x[nl.load(idx)]))
    return out


def test_an_indirect_gather_costs_descriptor_generation_on_gpsimd():
    x = np.zeros((128, 512), np.float32)
    idx = np.arange(128, dtype=np.int32).reshape(128, 1)
    ind = nki.benchmark(indirect)(x, idx)
    plain = nki.benchmark(direct)(x, idx)
    assert ind.busy_us["GpSimd"] > 0 and plain.busy_us["GpSimd"] == 0
    assert ind.latency_us > plain.latency_us
    # 140 cycles of index read plus one per descriptor, at the GpSimd clock
    hz = torch.neuron.get_device_properties(0).gpsimd_engine_hz
    assert ind.busy_us["GpSimd"] == pytest.approx((140 + 128) / hz * 1e6, rel=0.05)


# ---- rules ---------------------------------------------------------------------------


def test_indirect_rules():
    x = np.zeros((64, 32), np.float32)
    idx = np.zeros((16, 1), np.int32)

    def tile(shape=(16, 32), buffer=nl.sbuf):
        return nl.ndarray(shape, nl.float32, buffer=buffer)

    def hwdge(x, idx):
        nisa.dma_copy(tile(), x[nl.load(idx)], dge_mode=nisa.dge_mode.hwdge)

    def both(x, idx):
        i = nl.load(idx)
        nisa.dma_copy(x[i], x[i])

    def from_sbuf(x, idx):
        nisa.dma_copy(tile(), nl.load(x)[nl.load(idx)])

    def to_hbm(x, idx):
        nisa.dma_copy(nl.ndarray((16, 32), nl.float32, buffer=nl.shared_hbm), x[nl.load(idx)])

    def hbm_indices(x, idx):
        nisa.dma_copy(tile(), x[idx])

    def float_indices(x, idx):
        nisa.dma_copy(tile(), x[nl.load(idx, dtype=nl.float32)])

    def two_columns(x, idx):
        nisa.dma_copy(tile(), x[nl.ndarray((16, 2), nl.int32, buffer=nl.sbuf)])

    def count(x, idx):
        nisa.dma_copy(tile((8, 32)), x[nl.load(idx)])

    def rmw_skip(x, idx):
        nisa.dma_copy(x[nl.load(idx)], tile(), dst_rmw_op=nl.add, oob_mode=nisa.oob_mode.skip)

    def rmw_multiply(x, idx):
        nisa.dma_copy(x[nl.load(idx)], tile(), dst_rmw_op=nl.multiply)

    def row_size(x, idx):
        nisa.dma_copy(tile((16, 16)), x[nl.load(idx)])

    def ap_on_chip(x, idx):
        nisa.dma_copy(tile(), tile().ap([[32, 16], [1, 32]], vector_offset=nl.load(idx)))

    def ap_dim(x, idx):  # x is 2-D (tests/test_nki_indirect_offsets.py: other dims)
        nisa.dma_copy(tile(), x.ap([[32, 16], [1, 32]], vector_offset=nl.load(idx),
                                   indirect_dim=2))

    assert rule_of_body(hwdge, x, idx) == "indirect_dge"
    assert rule_of_body(both, x, idx) == "indirect_dma"
    assert rule_of_body(from_sbuf, x, idx) == "indirect_dma"
    assert rule_of_body(to_hbm, x, idx) == "indirect_dma"
    assert rule_of_body(ap_on_chip, x, idx) == "indirect_dma"
    assert rule_of_body(ap_dim, x, idx) == "indirect_dma"
    assert rule_of_body(hbm_indices, x, idx) == "indirect_indices"
    assert rule_of_body(float_indices, x, idx) == "indirect_indices"
    assert rule_of_body(two_columns, x, idx) == "indirect_indices"
    assert rule_of_body(count, x, idx) == "indirect_indices"
    assert rule_of_body(rmw_skip, x, idx) == "indirect_rmw_oob"
    assert rule_of_body(rmw_multiply, x, idx) == "operand"
    assert rule_of_body(row_size, x, idx) == "shape_mismatch"


def test_a_malformed_indirect_record_is_refused_at_creation():
    """The simulator's own checks (runtime/src/nc/check_indirect.c) stand
    behind the front end's: a record naming more rows than the tensor holds,
    or without its index tile, is an error, never a wild access."""
    from torchneuron.nki import trace

    def emit(rows, with_indices):
        @nki.jit
        def k(x, idx):
            i = nl.load(idx)
            t = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
            ap = [t.record()[0], x[0:1, :].record()[0]] + ([i.record()[0]] if with_indices else [])
            trace.current().emit("nki.isa.dma_copy", trace.DMA_COPY, trace.DMA_ENGINE, ap,
                                 flags=trace.FLAG_INDIRECT_SRC, imm=(rows, 32))
            return nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)

        try:
            nki.simulate(k)(np.zeros((64, 32), np.float32), np.zeros((16, 1), np.int32))
        except NkiError as e:
            return e.rule
        return None

    assert emit(64, True) is None  # rows 0..63: the whole tensor
    assert emit(65, True) == "indirect_dma"  # row 64 would lie past the tensor
    assert emit(64, False) == "indirect_dma"
