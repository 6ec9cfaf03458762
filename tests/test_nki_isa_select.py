"""nki.isa's activate2 (and nl.prelu), tensor_scalar_cumulative, select_reduce,
range_select, nonzero_with_count and dma_transpose against NumPy / torch,
with their rules and engines."""

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of


def rng(seed=0):
    return np.random.default_rng(seed)


def _np_alu(name):
    return {None: lambda x, s: x, "add": np.add, "subtract": np.subtract,
            "multiply": np.multiply}[name]


# ---- activate2 and nl.prelu ----------------------------------------------------------
# activate2 is NeuronCore-v4 only: its numerics run on trn3 in test_nki_trn3.py; here
# nl.prelu's trn2 lowering and the rules other than nc_version.

@pytest.mark.parametrize("alpha", [0.0, 0.1, -0.5])
def test_prelu_matches_leaky_relu_on_neuron(alpha):
    """On trn2 nl.prelu lowers to tensor_scalar + scalar_tensor_tensor (no activate2)."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.prelu(nl.load(x), alpha))
        return out

    x = torch.randn(64, 80)
    got = k(x.to("neuron")).cpu()
    torch.testing.assert_close(got, torch.nn.functional.leaky_relu(x, alpha), rtol=0, atol=0)


def test_activate2_rules():
    def ops(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.exp, t, 1.0, 1.0, nl.add, nl.add)

    def engine(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.exp, t, 1.0, 1.0, nl.multiply, nl.add,
                       engine=nisa.vector_engine)

    def reduce_on_gpsimd(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.exp, t, 1.0, 1.0, nl.multiply, nl.add,
                       reduce_res=nl.ndarray((4, 1), nl.float32), engine=nisa.gpsimd_engine)

    def imm_shape(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.exp, t, t, 1.0, nl.multiply, nl.add)

    def prelu_in_activation(x):
        nisa.activation(nl.ndarray((4, 8), nl.float32), nl.prelu, nl.load(x))

    x = np.zeros((4, 8), np.float32)
    assert rule_of(ops, x) == "activate2_ops"
    assert rule_of(engine, x) == "engine"
    assert rule_of(reduce_on_gpsimd, x) == "engine"
    assert rule_of(imm_shape, x) == "operand_shape"
    assert rule_of(prelu_in_activation, x) == "operand"


# ---- tensor_scalar_cumulative ---------------------------------------------------------

def cumulative_reference(x, op0, imm0, op1, start):
    out = np.empty_like(x)
    reg = np.full(x.shape[0], start, np.float32)
    for j in range(x.shape[1]):
        reg = op1(op0(x[:, j], imm0), reg).astype(np.float32)
        out[:, j] = reg
    return out


@pytest.mark.parametrize("op1,np1,start", [(nl.add, np.add, 0.0), (nl.multiply, np.multiply, 1.0),
                                           (nl.maximum, np.maximum, -np.inf),
                                           (nl.minimum, np.minimum, np.inf),
                                           (nl.subtract, np.subtract, 0.0)])
def test_tensor_scalar_cumulative(op1, np1, start):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, nl.float32)
        nisa.tensor_scalar_cumulative(r, nl.load(x), nl.multiply, op1, 0.5)
        nl.store(out, r)
        return out

    x = rng(4).uniform(0.5, 1.5, (16, 30)).astype(np.float32)
    ref = cumulative_reference(x, np.multiply, np.float32(0.5), np1, start)
    np.testing.assert_allclose(nki.simulate(k)(x), ref, rtol=1e-5, atol=1e-6)


def test_cumulative_sum_in_chunks_continues_the_register():
    """Chunk 1 resets, later chunks reduce on: the whole row's cumsum (torch)."""
    @nki.jit
    def k(x, load):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray(x.shape, nl.float32)
        first = nisa.reduce_cmd.load_reduce if load else nisa.reduce_cmd.reset_reduce
        for c in range(4):
            cmd = first if c == 0 else nisa.reduce_cmd.reduce
            nisa.tensor_scalar_cumulative(r[:, 50 * c:50 * (c + 1)], t[:, 50 * c:50 * (c + 1)],
                                          nl.add, nl.add, 0.0, imm1=10.0, reduce_cmd=cmd)
        nl.store(out, r)
        return out

    x = torch.randn(32, 200)
    torch.testing.assert_close(k(x.to("neuron"), False).cpu(), torch.cumsum(x, 1), rtol=1e-4,
                               atol=1e-4)
    torch.testing.assert_close(k(x.to("neuron"), True).cpu(), torch.cumsum(x, 1) + 10, rtol=1e-4,
                               atol=1e-4)


def test_cumulative_rules():
    def bad_op1(x):
        nisa.tensor_scalar_cumulative(nl.ndarray((4, 8), nl.float32), nl.load(x), nl.add,
                                      nl.divide, 1.0)

    def bad_op0(x):
        nisa.tensor_scalar_cumulative(nl.ndarray((4, 8), nl.float32), nl.load(x), nl.equal,
                                      nl.add, 1.0)

    def int32(x):
        nisa.tensor_scalar_cumulative(nl.ndarray((4, 8), nl.int32), nl.load(x), nl.add, nl.add,
                                      1.0)

    def no_imm1(x):
        nisa.tensor_scalar_cumulative(nl.ndarray((4, 8), nl.float32), nl.load(x), nl.add, nl.add,
                                      1.0, reduce_cmd=nisa.reduce_cmd.load_reduce)

    x = np.zeros((4, 8), np.float32)
    assert rule_of(bad_op1, x) == "cumulative_ops"
    assert rule_of(bad_op0, x) == "cumulative_ops"
    assert rule_of(int32, x) == "dtype"
    assert rule_of(no_imm1, x) == "operand"


# ---- select_reduce and range_select ---------------------------------------------------

@nki.jit
def select_kernel(pred, x, other, reverse, other_tile):
    rows = x.shape[0]
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    red_out = nl.ndarray((rows, 1), nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray(x.shape, nl.float32)
    red = nl.ndarray((rows, 1), nl.float32)
    on_false = nl.load(other) if other_tile else -2.5
    nisa.select_reduce(res, nl.load(pred), nl.load(x), on_false, reduce_res=red,
                       reverse_pred=reverse)
    nl.store(out, res), nl.store(red_out, red)
    return out, red_out


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("other_tile", [False, True])
@pytest.mark.parametrize("pred_dtype", [np.uint8, np.int16])
def test_select_reduce(reverse, other_tile, pred_dtype):
    x = rng(5).standard_normal((24, 36)).astype(np.float32)
    pred = rng(6).integers(0, 3, (24, 36)).astype(pred_dtype)
    other = rng(7).standard_normal((24, 1)).astype(np.float32)
    got, red = nki.simulate(select_kernel)(pred, x, other, reverse, other_tile)
    keep = (pred == 0) if reverse else (pred != 0)
    ref = np.where(keep, x, other if other_tile else np.float32(-2.5))
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(red[:, 0], ref.max(axis=1))


@nki.jit
def causal_kernel(x, lo, hi, start):
    rows = x.shape[0]
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    red_out = nl.ndarray((rows, 1), nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray(x.shape, nl.float32)
    red = nl.ndarray((rows, 1), nl.float32)
    nisa.range_select(res, nl.load(x), nl.greater_equal, nl.less, nl.load(lo), nl.load(hi),
                      reduce_res=red, range_start=start)
    nl.store(out, res), nl.store(red_out, red)
    return out, red_out


def test_range_select_causal_window():
    x = rng(8).standard_normal((32, 64)).astype(np.float32)
    lo = np.zeros((32, 1), np.float32)
    hi = (np.arange(32, dtype=np.float32) + 1)[:, None]  # row r keeps columns j + 8 < r + 1
    got, red = nki.simulate(causal_kernel)(x, lo, hi, 8.0)
    j = np.arange(64)[None, :] + 8
    ref = np.where((j >= lo) & (j < hi), x, np.float32(-3.4028234663852886e38))
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(red[:, 0], ref.max(axis=1))


def test_reduce_registers_carry_the_max_across_instructions():
    """select_reduce over two halves: reset_reduce, then reduce: the row max."""
    @nki.jit
    def k(pred, x):
        out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        p, t = nl.load(pred), nl.load(x)
        res = nl.ndarray(x.shape, nl.float32)
        red = nl.ndarray((x.shape[0], 1), nl.float32)
        half = x.shape[1] // 2
        nisa.select_reduce(res[:, :half], p[:, :half], t[:, :half], -100.0, reduce_res=red,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.select_reduce(res[:, half:], p[:, half:], t[:, half:], -100.0, reduce_res=red,
                           reduce_cmd=nisa.reduce_cmd.reduce)
        nl.store(out, red)
        return out

    x = torch.randn(16, 40)
    pred = (torch.rand(16, 40) > 0.3).to(torch.uint8)
    ref = torch.where(pred.bool(), x, torch.tensor(-100.0)).amax(1, keepdim=True)
    torch.testing.assert_close(k(pred.to("neuron"), x.to("neuron")).cpu(), ref, rtol=0, atol=0)


def test_select_and_range_rules():
    def float_pred(x):
        t = nl.load(x)
        nisa.select_reduce(nl.ndarray((4, 8), nl.float32), t, t, 0.0)

    def int32_on_true(x):
        p = nl.ndarray((4, 8), nl.uint8)
        nisa.memset(p, 1)
        nisa.select_reduce(nl.ndarray((4, 8), nl.int32), p, nl.ndarray((4, 8), nl.int32), 0.0)

    def both_psum(x):
        p = nl.ndarray((4, 8), nl.uint8, buffer=nl.psum)
        v = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.memset(p, 1), nisa.memset(v, 1.0)
        nisa.select_reduce(nl.ndarray((4, 8), nl.float32), p, v, 0.0)

    def shape(x):
        p = nl.ndarray((4, 4), nl.uint8)
        nisa.memset(p, 1)
        nisa.select_reduce(nl.ndarray((4, 8), nl.float32), p, nl.load(x), 0.0)

    def not_a_comparison(x):
        b = nl.zeros((4, 1), nl.float32)
        nisa.range_select(nl.ndarray((4, 8), nl.float32), nl.load(x), nl.add, nl.less, b, b)

    def bound_shape(x):
        t = nl.load(x)
        nisa.range_select(nl.ndarray((4, 8), nl.float32), t, nl.less, nl.less, t, t)

    x = np.zeros((4, 8), np.float32)
    assert rule_of(float_pred, x) == "dtype"
    assert rule_of(int32_on_true, x) == "dtype"
    assert rule_of(both_psum, x) == "tensor_tensor_psum_inputs"
    assert rule_of(shape, x) == "shape_mismatch"
    assert rule_of(not_a_comparison, x) == "range_select_ops"
    assert rule_of(bound_shape, x) == "operand_shape"


# ---- nonzero_with_count (GpSimd) ------------------------------------------------------

def test_nonzero_with_count_on_every_16th_partition():
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], x.shape[1] + 1), nl.int32, buffer=nl.shared_hbm)
        r = nl.ndarray((x.shape[0], x.shape[1] + 1), nl.int32)
        nisa.memset(r, -7)
        nisa.nonzero_with_count(r, nl.load(x), index_offset=100, padding_val=-1)
        nl.store(out, r)
        return out

    x = rng(9).standard_normal((128, 20)).astype(np.float32)
    x[rng(10).random((128, 20)) < 0.5] = 0.0
    x[16] = 0.0  # no nonzeros at all
    got = nki.simulate(k)(x)
    for p in range(128):
        if p % 16:
            assert (got[p] == -7).all()
            continue
        idx = np.flatnonzero(x[p])
        ref = np.full(21, -1, np.int32)
        ref[:len(idx)] = idx + 100
        ref[20] = len(idx)
        np.testing.assert_array_equal(got[p], ref)


def test_nonzero_with_count_rules():
    def short(x):
        nisa.nonzero_with_count(nl.ndarray((16, 8), nl.int32), nl.load(x))

    def floats(x):
        nisa.nonzero_with_count(nl.ndarray((16, 9), nl.float32), nl.load(x))

    x = np.zeros((16, 8), np.float32)
    assert rule_of(short, x) == "shape_mismatch"
    assert rule_of(floats, x) == "dtype"


# ---- dma_transpose --------------------------------------------------------------------

@pytest.mark.parametrize("through_sbuf", [False, True])
def test_dma_transpose_is_exact(through_sbuf):
    @nki.jit
    def k(x):
        rows, cols = x.shape
        out = nl.ndarray((cols, rows), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((cols, rows), x.dtype)
        if through_sbuf:
            nisa.dma_transpose(t, nl.load(x))
        else:
            nisa.dma_transpose(t, x)
        nl.store(out, t)
        return out

    x = torch.randn(64, 100).to(torch.bfloat16)
    torch.testing.assert_close(k(x.to("neuron")).cpu(), x.T.contiguous(), rtol=0, atol=0)


@pytest.mark.parametrize("shape,axes", [((16, 6, 40), (2, 1, 0)), ((8, 3, 5, 24), (3, 1, 2, 0))])
@pytest.mark.parametrize("through_sbuf", [False, True])
def test_dma_transpose_3d_and_4d(shape, axes, through_sbuf):
    """The reference's 3-D (2, 1, 0) and 4-D (3, 1, 2, 0) permutations, from
    HBM or SBUF, bit for bit as torch.permute (int16 data: no conversion)."""
    @nki.jit
    def k(x):
        out_shape = tuple(x.shape[a] for a in axes)
        out = nl.ndarray(out_shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(out_shape, x.dtype)
        nisa.dma_transpose(t, nl.load(x) if through_sbuf else x, axes=axes)
        nl.store(out, t)
        return out

    x = torch.randint(-30000, 30000, shape, dtype=torch.int16)
    torch.testing.assert_close(k(x), x.permute(*axes).contiguous(), rtol=0, atol=0)
    h = torch.randn(shape).to(torch.float16)
    torch.testing.assert_close(k(h.to("neuron")).cpu(), h.permute(*axes).contiguous(),
                               rtol=0, atol=0)


def test_dma_transpose_rules():
    def fp32(x):
        nisa.dma_transpose(nl.ndarray((8, 4), nl.float32), x)

    def other_axes(x):
        nisa.dma_transpose(nl.ndarray((2, 2, 8), nl.float16), x.reshape(2, 2, 8), axes=(1, 0, 2))

    def five_d(x):
        nisa.dma_transpose(nl.ndarray((2, 2, 2, 2, 2), nl.float16), x.reshape(2, 2, 2, 2, 2))

    def wrong_dst(x):
        nisa.dma_transpose(nl.ndarray((4, 8), nl.float16), x)

    def wrong_3d_dst(x):
        nisa.dma_transpose(nl.ndarray((2, 8, 2), nl.float16), x.reshape(2, 2, 8))

    def hwdge(x):
        nisa.dma_transpose(nl.ndarray((8, 4), nl.float16), x, dge_mode=nisa.dge_mode.hwdge)

    x = np.zeros((4, 8), np.float32)
    assert rule_of(fp32, x) == "dma_transpose_dtype"
    assert rule_of(other_axes, x.astype(np.float16)) == "dma_transpose_axes"
    assert rule_of(five_d, x.astype(np.float16)) == "dma_transpose_axes"
    assert rule_of(wrong_dst, x.astype(np.float16)) == "shape_mismatch"
    assert rule_of(wrong_3d_dst, x.astype(np.float16)) == "shape_mismatch"
    assert rule_of(hwdge, x.astype(np.float16)) == "dma_transpose_hwdge"


# ---- engines and costs ----------------------------------------------------------------

def test_engines_and_costs():
    def k(x, h):
        t = nl.load(x)
        b = nl.zeros((128, 1), nl.float32)
        nisa.activation(nl.ndarray((128, 64), nl.float32), nl.exp, t)
        nisa.tensor_scalar_cumulative(nl.ndarray((128, 64), nl.float32), t, nl.add, nl.add, 0.0)
        p = nl.ndarray((128, 64), nl.uint8)
        nisa.memset(p, 1)
        nisa.select_reduce(nl.ndarray((128, 64), nl.float32), p, t, 0.0)
        nisa.range_select(nl.ndarray((128, 64), nl.float32), t, nl.less, nl.less, b, b)
        nisa.nonzero_with_count(nl.ndarray((128, 65), nl.int32), t)
        nisa.dma_transpose(nl.ndarray((64, 128), nl.float16), h)

    est = nki.benchmark(nki.jit(k))(np.zeros((128, 64), np.float32),
                                    np.zeros((128, 64), np.float16))
    assert est.instructions["Scalar"] == 1
    assert est.instructions["Vector"] >= 4
    assert est.instructions["GpSimd"] >= 1
    assert est.busy_us["Scalar"] > 0 and est.busy_us["GpSimd"] > 0


def test_activation_and_tensor_scalar_reduce_fold_into_the_registers():
    """A row sum over chunks: activation (Scalar) and tensor_scalar_reduce
    (Vector) with reset_reduce, then reduce; idle keeps a chunk's own sum."""
    @nki.jit
    def k(x):
        rows = x.shape[0]
        outs = [nl.ndarray((rows, 1), nl.float32, buffer=nl.shared_hbm) for _ in range(3)]
        t = nl.load(x)
        act = nl.ndarray(x.shape, nl.float32)
        vec = nl.ndarray(x.shape, nl.float32)
        sums = [nl.ndarray((rows, 1), nl.float32) for _ in range(3)]
        for c in range(3):
            cmd = nisa.reduce_cmd.reset_reduce if c == 0 else nisa.reduce_cmd.reduce
            part = slice(32 * c, 32 * (c + 1))
            nisa.activation(act[:, part], nl.exp, t[:, part], reduce_res=sums[0], reduce_cmd=cmd)
            nisa.tensor_scalar_reduce(vec[:, part], t[:, part], nl.multiply, 2.0, nl.maximum,
                                      sums[1], reduce_cmd=cmd)
        nisa.activation(act[:, 0:32], nl.exp, t[:, 0:32], reduce_res=sums[2])  # idle
        for o, s in zip(outs, sums):
            nl.store(o, s)
        return tuple(outs)

    x = torch.randn(16, 96)
    total, vmax, first = (o.cpu() for o in k(x.to("neuron")))
    torch.testing.assert_close(total, torch.exp(x).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vmax, (2 * x).amax(1, keepdim=True), rtol=0, atol=0)
    torch.testing.assert_close(first, torch.exp(x[:, :32]).sum(1, keepdim=True), rtol=1e-5,
                               atol=1e-5)


def test_legacy_value_returning_forms():
    from torchneuron.nki.legacy import isa as lisa
    from torchneuron.nki.legacy import language as lnl

    @nki.jit
    def k(x, xb, pred, lo, hi):
        rows, cols = x.shape
        sel_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        rng_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        drop_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        tr_out = nl.ndarray((cols, rows), nl.bfloat16, buffer=nl.shared_hbm)
        t = lnl.load(x)
        sel = nl.ndarray(x.shape, nl.float32)
        lisa.select_reduce(dst=sel, predicate=lnl.load(pred), on_true=t, on_false=0.0)
        lnl.store(sel_out, sel)
        lnl.store(rng_out, lisa.range_select(on_true_tile=t, comp_op0=nl.greater_equal,
                                             comp_op1=nl.less, bound0=lnl.load(lo),
                                             bound1=lnl.load(hi), on_false_value=-1.0))
        lnl.store(drop_out, lisa.dropout(t, prob=0.0))
        lnl.store(tr_out, lisa.dma_transpose(xb))
        return sel_out, rng_out, drop_out, tr_out

    x = torch.randn(16, 32)
    pred = (torch.rand(16, 32) > 0.5).to(torch.uint8)
    lo = torch.full((16, 1), 4.0)
    hi = torch.arange(16.0)[:, None] + 5
    xb = torch.randn(16, 32).to(torch.bfloat16)
    sel, rs, drop, tr = (t.cpu() for t in k(*(a.to("neuron") for a in (x, xb, pred, lo, hi))))
    torch.testing.assert_close(sel, torch.where(pred.bool(), x, torch.tensor(0.0)), rtol=0, atol=0)
    j = torch.arange(32.0)[None, :]
    torch.testing.assert_close(rs, torch.where((j >= lo) & (j < hi), x, torch.tensor(-1.0)),
                               rtol=0, atol=0)
    torch.testing.assert_close(drop, x, rtol=0, atol=0)
    torch.testing.assert_close(tr, xb.T.contiguous(), rtol=0, atol=0)
