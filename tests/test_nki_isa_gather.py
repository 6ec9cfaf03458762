"""nki.isa's topk, local_gather, nc_n_gather, sequence_bounds, nc_stream_shuffle
and exponential against torch / NumPy references, with their rules (one row
per rule is in test_nki_rules.py) and cost-model entries."""

import itertools
import json

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from conftest import check_output, run_python
from nki_testing import rule_of_body


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- topk ---------------------------------------------------------------------------

@nki.jit
def topk_kernel(x, n, k, sorted_):
    rows, cols = x.shape
    vals = nl.ndarray((rows, k), nl.float32, buffer=nl.shared_hbm)
    idxs = nl.ndarray((rows, k), nl.uint32, buffer=nl.shared_hbm)
    src = nl.ndarray((rows, cols), nl.bfloat16)
    nisa.tensor_copy(src, nl.load(x))
    v = nl.ndarray((rows, k), nl.bfloat16)
    i = nl.ndarray((rows, k), nl.uint32)
    nisa.memset(v, 7.0), nisa.memset(i, 7)  # columns topk leaves alone keep these
    nisa.topk(v, i, src, n, sorted=sorted_)
    vf = nl.ndarray((rows, k), nl.float32)
    nisa.tensor_copy(vf, v)
    nl.store(vals, vf), nl.store(idxs, i)
    return vals, idxs


def _snake(x, group, n):
    """Group g's elements in snake order: element i at partition i % 16, column i // 16."""
    block = x[16 * group:16 * group + 16]
    return torch.tensor([block[i % 16, i // 16] for i in range(n)], dtype=torch.float32)


@pytest.mark.parametrize("sorted_", [False, True])
@pytest.mark.parametrize("n,k", [(100, 20), (128, 16), (37, 5)])
def test_topk_against_torch(sorted_, n, k):
    rows, cols = 32, 8
    # distinct integers: exact in bfloat16, no ties
    x = np.stack([rng(g).permutation(np.arange(-64, 64)) for g in range(rows // 16)])
    x = x.reshape(rows // 16, 16, cols).reshape(rows, cols).astype(np.float32)
    vals, idxs = nki.simulate(topk_kernel)(x, n, k, sorted_)
    written = -(-k // 16)
    for g in range(rows // 16):
        ref_v, ref_i = torch.topk(_snake(x, g, n), k)  # descending
        if not sorted_:
            ref_v, ref_i = ref_v.flip(0), ref_i.flip(0)
        for j in range(16 * written):
            p, c = 16 * g + j % 16, j // 16
            if j < k:
                assert vals[p, c] == ref_v[j] and idxs[p, c] == ref_i[j], (g, j)
            else:  # the rest of the last written column
                assert vals[p, c] == -np.inf and idxs[p, c] == 0xFFFFFFFF
        block = slice(16 * g, 16 * g + 16)
        assert (vals[block, written:] == 7.0).all() and (idxs[block, written:] == 7).all()


def test_topk_ties_rank_the_lower_index_first():
    x = np.zeros((16, 2), np.float32)
    x[3, 0] = x[5, 1] = 1.0  # snake indices 3 and 21
    vals, idxs = nki.simulate(topk_kernel)(x, 32, 3, True)
    assert list(vals[0:3, 0]) == [1.0, 1.0, 0.0]
    assert list(idxs[0:3, 0]) == [3, 21, 0]


def test_topk_rules():
    def wrong_dtype(a):
        nisa.topk(nl.zeros((16, 4), nl.bfloat16), nl.zeros((16, 4), nl.uint32),
                  nl.zeros((16, 4), nl.float32), 16)

    def wrong_index_dtype(a):
        nisa.topk(nl.zeros((16, 4), nl.bfloat16), nl.zeros((16, 4), nl.int32),
                  nl.zeros((16, 4), nl.bfloat16), 16)

    def too_few_columns(a):
        nisa.topk(nl.zeros((16, 4), nl.bfloat16), nl.zeros((16, 4), nl.uint32),
                  nl.zeros((16, 1), nl.bfloat16), 17)

    def in_psum(a):
        nisa.topk(nl.zeros((16, 4), nl.bfloat16), nl.zeros((16, 4), nl.uint32),
                  nl.zeros((16, 4), nl.bfloat16, buffer=nl.psum), 16)

    a = np.zeros((1, 1), np.float32)
    assert rule_of_body(wrong_dtype, a) == "dtype"
    assert rule_of_body(wrong_index_dtype, a) == "dtype"
    assert rule_of_body(too_few_columns, a) == "topk_n"
    assert rule_of_body(in_psum, a) == "gpsimd_no_psum"


def test_topk_range_select_and_nonzero_with_count_need_trn2():
    code = """
        import numpy as np, torchneuron.nki as nki, torchneuron.nki.isa as nisa
        import torchneuron.nki.language as nl

        def topk(a):
            nisa.topk(nl.zeros((16, 8), nl.bfloat16), nl.zeros((16, 8), nl.uint32),
                      nl.zeros((16, 8), nl.bfloat16), 16)

        def range_select(a):
            b = nl.zeros((4, 1), nl.float32)
            nisa.range_select(nl.ndarray((4, 8), nl.float32), nl.zeros((4, 8), nl.float32),
                              nl.greater_equal, nl.less, b, b)

        def nonzero(a):
            nisa.nonzero_with_count(nl.ndarray((16, 9), nl.int32), nl.zeros((16, 8), nl.int32))

        for body in (topk, range_select, nonzero):
            try:
                nki.simulate(nki.jit(body))(np.zeros((1, 1), np.float32))
                print("ran")
            except nki.NkiError as e:
                print(e.rule, e.instruction)
    """
    out = check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}))
    assert out.split() == ["nc_version", "nki.isa.topk", "nc_version", "nki.isa.range_select",
                           "nc_version", "nki.isa.nonzero_with_count"]


# ---- nc_n_gather and local_gather --------------------------------------------------------

@nki.jit
def n_gather_kernel(data, indices):
    out = nl.ndarray(indices.shape, data.dtype, buffer=nl.shared_hbm)
    res = nl.ndarray(indices.shape, data.dtype)
    nisa.nc_n_gather(res, nl.load(data), nl.load(indices))
    nl.store(out, res)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.uint8])
def test_nc_n_gather_against_torch(dtype):
    data = (rng(1).standard_normal((16, 4, 8)) * 50).astype(dtype)
    indices = rng(2).integers(0, 32, (16, 3, 10)).astype(np.uint32)
    got = nki.simulate(n_gather_kernel)(data, indices)
    ref = torch.gather(torch.from_numpy(data.reshape(16, 32)), 1,
                       torch.from_numpy(indices.reshape(16, 30).astype(np.int64)))
    np.testing.assert_array_equal(got, ref.numpy().reshape(16, 3, 10))


def test_nc_n_gather_out_of_range_reads_nan():
    data = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    indices = np.tile(np.array([[0, 7, 8, 0xFFFFFFFF]], np.uint32), (16, 1))
    got = nki.simulate(n_gather_kernel)(data, indices)
    np.testing.assert_array_equal(got[:, :2], data[:, [0, 7]])
    assert np.isnan(got[:, 2:]).all()


def test_nc_n_gather_rules():
    def gather(dst_dtype, dst_cols, index_dtype):
        return lambda: nisa.nc_n_gather(nl.zeros((4, dst_cols), dst_dtype),
                                        nl.zeros((4, 8), nl.float32), nl.zeros((4, 4), index_dtype))

    assert rule_of_body(gather(nl.float32, 4, nl.int32)) == "dtype"
    assert rule_of_body(gather(nl.float16, 4, nl.uint32)) == "dtype"
    assert rule_of_body(gather(nl.float32, 5, nl.uint32)) == "shape_mismatch"


@nki.jit
def local_gather_kernel(src, index, e, v):
    rows = src.shape[0]
    out = nl.ndarray((rows, v * e), src.dtype, buffer=nl.shared_hbm)
    res = nl.ndarray((rows, v * e), src.dtype)
    nisa.local_gather(res, nl.load(src), nl.load(index), num_elem_per_idx=e, num_valid_indices=v)
    nl.store(out, res)
    return out


def _local_gather_ref(src, index, e, v):
    rows = src.shape[0]
    flat = src.reshape(rows, -1)
    out = np.empty((rows, v, e), src.dtype)
    for g in range(rows // 16):
        offsets = index[16 * g:16 * g + 16].flatten(order="F")[:v].astype(np.int64)
        take = offsets[:, None] + np.arange(e)[None, :]
        out[16 * g:16 * g + 16] = flat[16 * g:16 * g + 16][:, take]
    return out.reshape(rows, v * e)


@pytest.mark.parametrize("e,v", [(4, 32), (1, 20), (8, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_local_gather_against_numpy(e, v, dtype):
    rows = 32
    src = rng(3).standard_normal((rows, 64, e)).astype(dtype)
    index = (rng(4).integers(0, 64, (rows, 2)) * e).astype(np.uint16)  # element offsets
    got = nki.simulate(local_gather_kernel)(src, index, e, v)
    np.testing.assert_array_equal(got, _local_gather_ref(src, index, e, v))


def test_local_gather_default_takes_every_index():
    @nki.jit
    def k(src, index):
        out = nl.ndarray((16, 48), src.dtype, buffer=nl.shared_hbm)
        res = nl.ndarray((16, 48), src.dtype)
        nisa.local_gather(res, nl.load(src), nl.load(index))
        nl.store(out, res)
        return out

    src = rng(5).standard_normal((16, 40)).astype(np.float32)
    index = rng(6).integers(0, 40, (16, 3)).astype(np.uint16)
    got = nki.simulate(k)(src, index)
    np.testing.assert_array_equal(got, _local_gather_ref(src, index, 1, 48))


def test_local_gather_rules():
    def gather(dst_dtype, dst_cols, index_dtype, **kwargs):
        return lambda: nisa.local_gather(nl.zeros((16, dst_cols), dst_dtype),
                                         nl.zeros((16, 8), nl.float32),
                                         nl.zeros((16, 1), index_dtype), **kwargs)

    assert rule_of_body(gather(nl.float32, 4, nl.uint32)) == "dtype"
    assert rule_of_body(gather(nl.float16, 4, nl.uint16)) == "dtype"
    assert rule_of_body(gather(nl.float32, 8, nl.uint16)) == "shape_mismatch"
    assert rule_of_body(gather(nl.float32, 8, nl.uint16, num_elem_per_idx=1.5)) == "operand"


# ---- sequence_bounds -----------------------------------------------------------------------

@nki.jit
def bounds_kernel(ids):
    n = ids.shape[1]
    out = nl.ndarray((1, 2, n), ids.dtype, buffer=nl.shared_hbm)
    res = nl.ndarray((1, 2, n), ids.dtype)
    nisa.sequence_bounds(res, nl.load(ids))
    nl.store(out, res)
    return out


def _bounds_ref(ids):
    """Runs of equal ids: each element gets its run's [start, end); id 0 is (n, -1)."""
    n = len(ids)
    start, end, i = np.empty(n), np.empty(n), 0
    for key, run in itertools.groupby(ids):
        length = len(list(run))
        start[i:i + length] = n if key == 0 else i
        end[i:i + length] = -1 if key == 0 else i + length
        i += length
    return np.stack([start, end])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("seed", [0, 1])
def test_sequence_bounds_against_numpy(dtype, seed):
    ids = np.sort(rng(seed).integers(0, 9, 64)).astype(dtype)
    ids[40:44] = 0  # padding inside the tile too
    got = nki.simulate(bounds_kernel)(ids[None, :])
    np.testing.assert_array_equal(got[0], _bounds_ref(ids).astype(dtype))


def test_sequence_bounds_rules():
    assert rule_of_body(lambda: nisa.sequence_bounds(nl.zeros((1, 2, 8), nl.float16),
                                                     nl.zeros((1, 8), nl.float32))) == "dtype"
    assert rule_of_body(lambda: nisa.sequence_bounds(nl.zeros((1, 2, 7), nl.float32),
                                                     nl.zeros((1, 8), nl.float32))) == \
        "shape_mismatch"


# ---- nc_stream_shuffle ----------------------------------------------------------------------

@nki.jit
def shuffle_kernel(x, mask, in_place):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    src = nl.load(x)
    if in_place:
        nisa.nc_stream_shuffle(src, src, mask)
        nl.store(out, src)
    else:
        dst = nl.ndarray(x.shape, x.dtype)
        nisa.memset(dst, -1.0)
        nisa.nc_stream_shuffle(dst, src, mask)
        nl.store(out, dst)
    return out


@pytest.mark.parametrize("in_place", [False, True])
def test_nc_stream_shuffle_against_numpy(in_place):
    x = rng(7).standard_normal((64, 12)).astype(np.float32)
    mask = list(rng(8).permutation(32))
    mask[3] = mask[17] = 255
    got = nki.simulate(shuffle_kernel)(x, mask, in_place)
    ref = x.copy() if in_place else np.full_like(x, -1.0)
    for q in range(2):
        for i, m in enumerate(mask):
            if m != 255:
                ref[32 * q + i] = x[32 * q + m]
    np.testing.assert_array_equal(got, ref)


def test_nc_stream_shuffle_between_quadrants_and_dtypes():
    @nki.jit
    def k(x):
        out = nl.ndarray((32, 6), x.dtype, buffer=nl.shared_hbm)
        src = nl.ndarray((64, 6), x.dtype)
        nisa.dma_copy(src, x)
        dst = nl.ndarray((96, 6), x.dtype)
        nisa.nc_stream_shuffle(dst[64:96], src[32:64], list(range(31, -1, -1)))
        nl.store(out, dst[64:96])
        return out

    x = np.arange(64 * 6, dtype=np.int16).reshape(64, 6)
    np.testing.assert_array_equal(nki.simulate(k)(x), x[32:64][::-1])


def test_nc_stream_shuffle_rules():
    def shuffle(dst, src, mask=tuple(range(32))):  # dst, src: (rows, dtype) of SBUF tiles
        return lambda: nisa.nc_stream_shuffle(nl.zeros((dst[0], 4), dst[1]),
                                              nl.zeros((src[0], 4), src[1]), list(mask))

    f16, f32 = nl.float16, nl.float32
    assert rule_of_body(shuffle((32, f16), (32, f32))) == "dtype"
    assert rule_of_body(shuffle((16, f32), (8, f32))) == "shuffle_mask"
    assert rule_of_body(lambda: nisa.nc_stream_shuffle(nl.zeros((128, 4), f32)[32:96],
                                                       nl.zeros((64, 4), f32), list(range(32)))) \
        == "partition_start"
    assert rule_of_body(shuffle((32, f32), (32, f32), [40] * 32)) == "shuffle_mask"


# ---- exponential (NeuronCore-v4: run on a trn3 device) ---------------------------------------

EXPONENTIAL_ON_TRN3 = """
    import json
    import numpy as np
    import torchneuron.nki as nki, torchneuron.nki.isa as nisa, torchneuron.nki.language as nl

    @nki.jit
    def k(x, m, cmd, init, out_dtype):
        rows = x.shape[0]
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        sums = nl.ndarray((rows, 2), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        res = nl.ndarray(x.shape, out_dtype)
        red = nl.ndarray((rows, 2), nl.float32)
        nisa.memset(red, 0.0)
        nisa.exponential(res, t, max_value=nl.load(m), reduce_res=red[:, 0:1],
                         reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.exponential(res, t, max_value=0.5, reduce_res=red[:, 1:2], reduce_cmd=cmd,
                         reduce_init=init)
        wide = nl.ndarray(x.shape, nl.float32)
        nisa.tensor_copy(wide, res)
        nl.store(out, wide), nl.store(sums, red)
        return out, sums

    x = np.random.default_rng(0).uniform(-3, 3, (32, 40)).astype(np.float32)
    m = x.max(axis=1, keepdims=True)
    results = {}
    for cmd in ("reduce", "load_reduce", "idle"):
        for dt in ("float32", "bfloat16"):
            init = 2.5 if cmd == "load_reduce" else 0.0
            out, sums = nki.simulate(k)(x, m, getattr(nisa.reduce_cmd, cmd), init,
                                        getattr(nl, dt))
            results[cmd + "/" + dt] = [out.tolist(), sums.tolist()]
    print(json.dumps(results))
"""


def test_exponential_against_torch_on_trn3():
    out = json.loads(check_output(run_python(EXPONENTIAL_ON_TRN3,
                                             {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})))
    x = torch.from_numpy(np.random.default_rng(0).uniform(-3, 3, (32, 40)).astype(np.float32))
    first = torch.exp(x - x.max(dim=1, keepdim=True).values)
    second = torch.exp(x - 0.5)
    for key, (vals, sums) in out.items():
        cmd, dt = key.split("/")
        vals, sums = torch.tensor(vals), torch.tensor(sums)
        ref = second.to(getattr(torch, dt)).float()
        torch.testing.assert_close(vals, ref, rtol=1e-6 if dt == "float32" else 0, atol=1e-6)
        # the first instruction reset the registers to its own row sums
        torch.testing.assert_close(sums[:, 0], first.sum(dim=1), rtol=2e-6, atol=0)
        want = {"reduce": first.sum(dim=1) + second.sum(dim=1),
                "load_reduce": 2.5 + second.sum(dim=1),
                "idle": second.sum(dim=1)}[cmd]
        torch.testing.assert_close(sums[:, 1], want, rtol=2e-6, atol=0)


# ---- cost model ------------------------------------------------------------------------------

def test_estimates_follow_the_published_formulas():
    @nki.jit
    def k(a):
        src = nl.zeros((128, 64), nl.bfloat16)
        v, i = nl.ndarray((128, 32), nl.bfloat16), nl.ndarray((128, 32), nl.uint32)
        nisa.topk(v, i, src, 1000)
        g = nl.ndarray((128, 64 * 4), nl.float32)
        nisa.local_gather(g, nl.zeros((128, 64), nl.float32), nl.zeros((128, 4), nl.uint16),
                          num_elem_per_idx=4)
        nisa.nc_n_gather(nl.ndarray((128, 1000), nl.float32), nl.zeros((128, 64), nl.float32),
                         nl.zeros((128, 1000), nl.uint32))

    est = nki.benchmark(k)(np.zeros((1, 1), np.float32))
    ns = {e["name"]: e["dur"] * 1e3 for e in est.trace_events() if e["ph"] == "X"}
    ghz = torch.neuron.get_device_properties(0).gpsimd_engine_hz / 1e9
    # topk: 4 n + k cycles
    assert ns["topk"] == pytest.approx((4 * 1000 + 32) / ghz)
    # local_gather: 150 + V E / C, C = ((28 + 4E) / 4E) / min(4 / 4, E)
    c = ((28 + 16) / 16) / 1
    assert ns["local_gather"] == pytest.approx((150 + 64 * 4 / c) / ghz)
    # nc_n_gather (assumed): 150 per 512-element group + N
    assert ns["nc_n_gather"] == pytest.approx((150 * 2 + 1000) / ghz)
