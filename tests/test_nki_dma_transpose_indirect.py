"""nki.isa.dma_transpose's indirect (software-DGE) form: src is an HBM
tensor indexed by a uint32 SBUF index tile (``x[idx, ...]``), whose rows it
gathers (indices read partition first) and transposes; against torch
(index_select + permute, bit for bit: 2-byte dtypes, no conversion), on the
host simulator and on neuron tensors, with a negative test per rule."""

import numpy as np
import pytest
import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import expect_rule, rule_of_body


@nki.jit
def gather_transpose(x, idx, oob):
    """x: [R, ...] in HBM; idx: [P, K] uint32 in HBM, loaded to SBUF."""
    n = idx.shape[0] * idx.shape[1]
    shape = (n,) + tuple(x.shape[1:])
    axes = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[len(shape)]
    out_shape = tuple(shape[a] for a in axes)
    out = nl.ndarray(out_shape, x.dtype, buffer=nl.shared_hbm)
    i = nl.load(idx)
    if idx.dtype != nl.uint32:  # torch has no uint32 tensors here: int32 ones, converted
        u = nl.ndarray(idx.shape, nl.uint32, buffer=nl.sbuf)
        nisa.tensor_copy(u, i)
        i = u
    t = nl.ndarray(out_shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(t, 0.0)
    nisa.dma_transpose(t, x[i], dge_mode=nisa.dge_mode.swdge,
                       oob_mode=nisa.oob_mode.skip if oob else nisa.oob_mode.error)
    nl.store(out, t)
    return out


def _want(x, idx):
    order = idx.t().reshape(-1).long()  # partition first: idx[p, j] is row j * P + p
    rows = x.index_select(0, order)
    axes = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[rows.ndim]
    return rows.permute(*axes).contiguous()


@pytest.mark.parametrize("shape, idx_shape", [((40, 96), (16, 1)), ((300, 128), (128, 2)),
                                              ((50, 3, 32), (32, 1)), ((20, 1, 4, 16), (16, 1))])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int16])
def test_indirect_transpose_matches_torch(shape, idx_shape, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 100).to(dtype)
    idx = torch.randint(0, shape[0], idx_shape, generator=g, dtype=torch.int64)
    got = gather_transpose(x, idx.numpy().astype(np.uint32), False)
    assert got.dtype == dtype and torch.equal(got, _want(x, idx))


def test_indirect_transpose_on_neuron_tensors_and_non_contiguous_src():
    x = (torch.randn(96, 64) * 10).to(torch.bfloat16).t()  # [64, 96], not contiguous
    idx = torch.arange(63, -1, -2, dtype=torch.int32).reshape(32, 1)
    torchneuron.clear_op_tracking()
    got = gather_transpose(x.to("neuron"), idx.to("neuron"), False).cpu()
    assert not torchneuron.get_fallback_ops()
    assert torch.equal(got, _want(x, idx))


def test_out_of_range_indices_leave_their_rows():
    x = torch.arange(40 * 16, dtype=torch.int16).reshape(40, 16)
    idx = torch.tensor([[3], [40], [7], [1000]] * 4, dtype=torch.int64)
    got = gather_transpose(x, idx.numpy().astype(np.uint32), True)
    want = torch.zeros(16, 16, dtype=torch.int16)  # the memset's zeros stay
    for r, i in enumerate(idx.reshape(-1).tolist()):
        if i < 40:
            want[:, r] = x[i]
    assert torch.equal(got, want)


def test_out_of_range_indices_are_an_error_by_default():
    x = torch.arange(40 * 16, dtype=torch.int16).reshape(40, 16)
    idx = torch.tensor([[3], [40]] * 8, dtype=torch.int64)
    expect_rule("oob_mode", gather_transpose, x, idx.numpy().astype(np.uint32), False,
                match=r"nki.isa.dma_transpose: \[oob_mode\].*index 40 ")


def test_the_indirect_form_is_a_trn2_instruction():
    from conftest import check_output, run_python

    code = """
        import numpy as np
        import torchneuron.nki as nki, torchneuron.nki.isa as nisa, torchneuron.nki.language as nl

        @nki.jit
        def k(x, idx):
            t = nl.ndarray((16, 16), x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(t, x[nl.load(idx)])
            out = nl.ndarray((16, 16), x.dtype, buffer=nl.shared_hbm)
            nl.store(out, t)
            return out

        try:
            k(np.zeros((32, 16), np.float16), np.zeros((16, 1), np.uint32))
        except nki.NkiError as e:
            print("RULE", e.rule)
    """
    out = check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}))
    assert "RULE nc_version" in out, out


# ---- rules ----------------------------------------------------------------------


def test_indirect_rules():
    x = np.zeros((64, 32), np.float16)
    idx = np.zeros((16, 1), np.uint32)

    def hwdge(x, idx):
        nisa.dma_transpose(nl.ndarray((32, 16), nl.float16), x[nl.load(idx)],
                           dge_mode=nisa.dge_mode.hwdge)

    def from_sbuf(x, idx):
        nisa.dma_transpose(nl.ndarray((32, 16), nl.float16), nl.load(x)[nl.load(idx)])

    def hbm_indices(x, idx):
        nisa.dma_transpose(nl.ndarray((32, 16), nl.float16), x[idx])

    def int32_indices(x, idx):
        i = nl.ndarray((16, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_transpose(nl.ndarray((32, 16), nl.float16), x[i])

    def eight_indices(x, idx):
        i = nl.ndarray((8, 1), nl.uint32, buffer=nl.sbuf)
        nisa.dma_transpose(nl.ndarray((32, 8), nl.float16), x[i])

    def two_columns_of_16(x, idx):
        i = nl.ndarray((16, 2), nl.uint32, buffer=nl.sbuf)
        nisa.dma_transpose(nl.ndarray((32, 32), nl.float16), x[i])

    def wide_rows(x, idx):
        nisa.dma_transpose(nl.ndarray((256, 16), nl.float16), x.reshape((8, 256))[nl.load(idx)])

    def four_d(x, idx):
        nisa.dma_transpose(nl.ndarray((4, 2, 2, 16), nl.float16),
                           x.reshape((64, 2, 4, 4))[nl.load(idx), :, 0:2, :])

    def wrong_dst(x, idx):
        nisa.dma_transpose(nl.ndarray((16, 32), nl.float16), x[nl.load(idx)])

    def not_a_tile(x, idx):
        nisa.dma_transpose(3.0, x[nl.load(idx)])

    assert rule_of_body(hwdge, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(from_sbuf, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(hbm_indices, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(int32_indices, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(eight_indices, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(two_columns_of_16, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(wide_rows, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(four_d, x, idx) == "dma_transpose_indirect"
    assert rule_of_body(wrong_dst, x, idx) == "shape_mismatch"
    assert rule_of_body(not_a_tile, x, idx) == "operand"
    x32 = np.zeros((64, 32), np.float32)

    def fp32_src(x, idx):
        nisa.dma_transpose(nl.ndarray((32, 16), nl.float32), x[nl.load(idx)])

    assert rule_of_body(fp32_src, x32, idx) == "dma_transpose_dtype"
