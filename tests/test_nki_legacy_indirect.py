"""Indirect DMA in the legacy neuronxcc.nki dialect, written as its reference
pages write it: ``nl.load(data[idx_tile[i_p, 0], i_f])``, ``nl.store(data[
idx_tile, i_f], value=...)``, indices from ``nisa.iota``, ``nisa.dma_copy(
..., oob_mode=...)`` and ``dst_rmw_op=np.add``, ``nl.atomic_rmw``; checked
against torch."""

import numpy as np
import torch

import torchneuron.nki.legacy as legacy

from nki_testing import expect_rule

legacy.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@nki.jit
def load_by_loaded_indices(data, idx):
    """Rows of data [128, 512] named by idx [64] (read into SBUF first)."""
    out = nl.ndarray((64, 512), data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    idx_tile = nl.load(idx[i_p])
    nl.store(out[i_p, i_f], value=nl.load(data[idx_tile[i_p, 0], i_f]))
    return out


@nki.jit
def load_by_iota(data):
    """Even rows of data: the indices come from iota."""
    out = nl.ndarray((64, 512), data.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(512)[None, :]
    idx_tile = nisa.iota(2 * nl.arange(64)[:, None], dtype=np.int32)
    nl.store(out, value=nl.load(data[idx_tile, i_f]))
    return out


@nki.jit
def store_even_rows(data, values):
    """out = data, then its even rows = values [64, 512]."""
    out = nl.ndarray(data.shape, data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(data))
    i_f = nl.arange(512)[None, :]
    idx_tile = nisa.iota(2 * nl.arange(64)[:, None], dtype=np.int32)
    tile = nl.load(values)
    nl.store(out[idx_tile, i_f], value=tile[0:64, 0:512])
    return out


@nki.jit
def copy_rows(data, step, skip):
    """dma_copy with in_tensor[idx_tile, iy]: rows 0, step, 2 step, ... (oob per mode)."""
    n, m = data.shape
    out = nl.ndarray((n // 2, m), data.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:n // 2, 0:m]
    idx_tile = nisa.iota(step * nl.arange(n // 2)[:, None], dtype=np.int32)
    out_tile = nisa.memset(shape=(n // 2, m), value=-1, dtype=data.dtype)
    nisa.dma_copy(src=data[idx_tile, iy], dst=out_tile[ix, iy],
                  oob_mode=nisa.oob_mode.skip if skip else nisa.oob_mode.error)
    nl.store(out, value=out_tile)
    return out


@nki.jit
def add_into_rows(data, values, idx):
    """out = data; out[idx[p]] += values[p] through dma_copy's read-modify-write."""
    out = nl.ndarray(data.shape, data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(data))
    n, m = values.shape
    iy = nl.arange(m)[None, :]
    nisa.dma_copy(dst=out[nl.load(idx), iy], src=nl.load(values), dst_rmw_op=np.add)
    return out


@nki.jit
def histogram(bins, counts):
    """counts[b] += 1 for every b in bins [128, 1], with atomic_rmw (duplicates add)."""
    out = nl.ndarray(counts.shape, counts.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(counts))
    b = nl.load(bins)
    ones = nl.full((128, 1), 1, dtype=nl.int32)
    nl.atomic_rmw(out[b, :], value=ones, op=np.add)
    return out


def test_load_by_loaded_indices():
    data = torch.randn(128, 512)
    idx = torch.arange(0, 128, 2, dtype=torch.int32).flip(0)
    assert torch.equal(load_by_loaded_indices(data, idx), data[idx.long()])


def test_load_and_store_by_iota_indices():
    data = torch.randn(128, 512)
    assert torch.equal(load_by_iota(data), data[0::2])
    values = torch.randn(64, 512)
    want = data.clone()
    want[0::2] = values
    assert torch.equal(store_even_rows(data, values), want)


def test_dma_copy_out_of_bounds_error_and_skip():
    data = torch.randn(128, 512)
    assert torch.equal(copy_rows(data, 2, False), data[0::2])
    expect_rule("oob_mode", copy_rows, data, 3, False, match=r"\[oob_mode\].*index 129 ")  # 3 * 43
    got = copy_rows(data, 3, True)
    want = torch.full((64, 512), -1.0)
    want[:43] = data[0::3]
    assert torch.equal(got, want)


def test_read_modify_write_adds_repeated_rows():
    g = torch.Generator().manual_seed(0)
    data, values = torch.randn(16, 32, generator=g), torch.randn(40, 32, generator=g)
    idx = torch.randint(0, 16, (40, 1), generator=g, dtype=torch.int32)
    want = data.clone()
    for p, r in enumerate(idx[:, 0].tolist()):  # the compiler serialises repeated rows
        want[r] += values[p]
    assert torch.equal(add_into_rows(data, values, idx), want)


def test_atomic_rmw_histogram():
    bins = torch.randint(0, 32, (128, 1), generator=torch.Generator().manual_seed(3),
                         dtype=torch.int32)
    counts = torch.zeros(32, 1, dtype=torch.int32)
    got = histogram(bins, counts)
    assert torch.equal(got[:, 0], torch.bincount(bins[:, 0], minlength=32).int())


@nki.jit
def masked_gather(data, idx, rows, cols):
    """out = -1, then out[p, :cols] = data[idx[p], :cols] for p < rows (a masked gather)."""
    out = nl.ndarray((64, 512), data.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:64, 0:512]
    t = nl.full((64, 512), -1.0, dtype=data.dtype)
    nisa.dma_copy(dst=t[i_p, i_f], src=data[nl.load(idx), i_f],
                  mask=(i_p < rows) & (i_f < cols))
    nl.store(out, value=t)
    return out


@nki.jit
def masked_scatter(data, idx, values, rows, cols):
    """out = data, then out[idx[p], :cols] = values[p, :cols] for p < rows."""
    out = nl.ndarray(data.shape, data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(data))
    i_p, i_f = nl.mgrid[0:64, 0:512]
    nl.store(out[nl.load(idx)[i_p, 0], i_f], value=nl.load(values),
             mask=(i_p < rows) & (i_f < cols))
    return out


@nki.jit
def masked_histogram(bins, counts, rows):
    """counts[b] += 1 for the first `rows` bins only (a masked atomic_rmw)."""
    out = nl.ndarray(counts.shape, counts.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(counts))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(1)[None, :]
    ones = nl.full((128, 1), 1, dtype=nl.int32)
    nl.atomic_rmw(out[nl.load(bins), i_f], value=ones, op=np.add, mask=(i_p < rows))
    return out


def test_masks_on_indirect_accesses_keep_a_box_of_partitions_and_elements():
    g = torch.Generator().manual_seed(4)
    data = torch.randn(128, 512, generator=g)
    idx = torch.randint(0, 128, (64, 1), generator=g, dtype=torch.int32)
    got = masked_gather(data, idx, 40, 100)
    want = torch.full((64, 512), -1.0)
    want[:40, :100] = data[idx[:40, 0].long(), :100]
    assert torch.equal(got, want)
    rows = torch.randperm(128, generator=g)[:64].to(torch.int32).reshape(64, 1)
    values = torch.randn(64, 512, generator=g)
    want = data.clone()
    want[rows[:50, 0].long(), :300] = values[:50, :300]
    assert torch.equal(masked_scatter(data, rows, values, 50, 300), want)
    bins = torch.randint(0, 32, (128, 1), generator=g, dtype=torch.int32)
    got = masked_histogram(bins, torch.zeros(32, 1, dtype=torch.int32), 70)
    assert torch.equal(got[:, 0], torch.bincount(bins[:70, 0], minlength=32).int())


def test_legacy_indirect_rules():
    @nki.jit
    def not_indirect(data):
        nl.atomic_rmw(data, value=1.0, op=np.add)
        return nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)

    expect_rule("indirect_dma", nki.simulate_kernel, not_indirect,
                np.zeros((128, 512), np.float32))
