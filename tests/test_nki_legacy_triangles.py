"""Legacy masks over several axes (a triangle, i_p >= i_f) and boxes on the
calls beyond loads, stores, element-wise nl ops and reductions: transposes
(the mask is over the input's axes), the element-wise nisa calls, iota,
memset, affine_select, the in-place tensor_copy_predicated / select_reduce
and nl.atomic_rmw. Each writes only the masked elements: assigned into a
prefilled tile, the others keep the fill. Checked against NumPy."""

import numpy as np
import pytest

import torchneuron  # noqa: F401  (the neuron device)
import torchneuron.nki.legacy as legacy

from nki_testing import expect_rule

legacy.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

FILL = -7.0


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def keep(rows, cols, shift=0, lo=0):
    """NumPy's picture of (i_p + shift >= i_f) & (i_p >= lo) over [rows, cols]."""
    p, f = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return (p + shift >= f) & (p >= lo)


# ---- transposes: the mask is over the input's axes --------------------------

@nki.jit
def masked_transposes(a, shift):
    """a [P, F] transposed four ways under (i_p + shift >= i_f) & (i_p >= 2),
    each assigned into a tile filled with FILL."""
    rows, cols = a.shape
    out = nl.ndarray((4, cols, rows), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p + shift >= i_f) & (i_p >= 2)
    x = nl.load(a)
    results = [
        lambda: nl.transpose(x, mask=tri),
        lambda: nisa.nc_transpose(x, mask=tri),
        lambda: nisa.nc_transpose(x, engine=nisa.vector_engine, mask=tri),
        lambda: nl.load_transpose2d(a[i_p, i_f], mask=tri),
    ]
    for k, make in enumerate(results):
        t = nl.full((cols, rows), FILL, nl.float32)
        t[...] = make()
        nl.store(out[k], t)
    return out


@pytest.mark.parametrize("shape,shift", [((8, 8), 0), ((12, 20), 3), ((20, 6), -2)])
def test_transposes_write_the_transposed_mask(shape, shift):
    a = rand(*shape, seed=1)
    got = nki.simulate_kernel(masked_transposes, a, shift)
    want = np.where(keep(*shape, shift, lo=2), a, FILL).T
    for k in range(4):
        np.testing.assert_array_equal(got[k], want, err_msg=f"transpose {k}")


@nki.jit
def transposes_into_psum(a, base):
    """Masked Tensor-engine transposes assigned to and accumulated into PSUM
    tiles holding base: only the masked elements change."""
    rows, cols = a.shape
    out = nl.ndarray((2, cols, rows), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    x = nl.load(a)
    for k in nl.affine_range(2):
        t = nl.ndarray((cols, rows), nl.float32, buffer=nl.psum)
        t[...] = nl.copy(nl.load(base))
        if k == 0:
            t[...] = nisa.nc_transpose(x, mask=(i_p >= i_f) & (i_f >= 1))
        else:
            t += nisa.nc_transpose(x, mask=(i_p >= i_f))
        nl.store(out[k], nl.copy(t))
    return out


def test_masked_transposes_assigned_and_accumulated_into_psum():
    a, base = rand(8, 8, seed=13), rand(8, 8, seed=14)
    got = nki.simulate_kernel(transposes_into_psum, a, base)
    p, f = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(got[0], np.where((p >= f) & (f >= 1), a, base.T).T)
    np.testing.assert_allclose(got[1], np.where(p >= f, a + base.T, base.T).T, rtol=1e-6)


@nki.jit
def transpose_of_a_tail(a):
    """A tail tile of a: rows past the tensor are masked off, the transpose
    writes the columns that exist; a box mask on the free axis too."""
    rows, cols = a.shape
    out = nl.ndarray((2, cols, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:cols]
    for k in nl.affine_range(2):
        tile = nl.load(a[k * 128 + i_p, i_f], mask=(k * 128 + i_p < rows))
        t = nl.full((cols, 128), FILL, a.dtype)
        t[...] = nisa.dma_transpose(tile, mask=(k * 128 + i_p < rows) & (i_f >= 3))
        nl.store(out[k], t)
    return out


def test_dma_transpose_of_a_tail_tile():
    a = rand(200, 16, seed=2).astype(np.float16)
    got = nki.simulate_kernel(transpose_of_a_tail, a)
    want = np.full((2, 16, 128), FILL, np.float16)
    want[0, 3:, :] = a[:128, 3:].T
    want[1, 3:, :72] = a[128:, 3:].T
    np.testing.assert_array_equal(got, want)


# ---- a store under a triangle whose rows start below partition 0 -------------

@nki.jit
def store_lower_rows(a, base, lo):
    """out = base, then a stored where i_p >= lo and i_p >= i_f + 1."""
    rows, cols = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(base))
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    nl.store(out[i_p, i_f], value=nl.load(a), mask=(i_p >= lo) & (i_p >= i_f + 1))
    return out


@pytest.mark.parametrize("lo", [0, 3])
def test_a_store_under_a_triangle_below_row_0_keeps_the_rest(lo):
    a, base = rand(12, 10, seed=11), rand(12, 10, seed=12)
    got = nki.simulate_kernel(store_lower_rows, a, base, lo)
    p, f = np.meshgrid(np.arange(12), np.arange(10), indexing="ij")
    np.testing.assert_array_equal(got, np.where((p >= lo) & (p >= f + 1), a, base))


# ---- element-wise nisa calls ------------------------------------------------

@nki.jit
def elementwise_isa(a, b, shift):
    rows, cols = a.shape
    out = nl.ndarray((6, rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p + shift >= i_f) & (i_p >= 1)
    x, y = nl.load(a), nl.load(b)
    results = [
        lambda: nisa.tensor_tensor(x, y, op=nl.add, mask=tri),
        lambda: nisa.tensor_scalar(x, nl.multiply, 3.0, op1=nl.subtract, operand1=1.0,
                                   mask=tri),
        lambda: nisa.tensor_copy(x, mask=tri),
        lambda: nisa.scalar_tensor_tensor(data=x, op0=nl.multiply, operand0=2.0,
                                          op1=nl.add, operand1=y, mask=tri),
        lambda: nisa.reciprocal(y, mask=tri),
        lambda: nisa.activation(np.exp, x, mask=tri),
    ]
    for k, make in enumerate(results):
        t = nl.full((rows, cols), FILL, nl.float32)
        t[...] = make()
        nl.store(out[k], t)
    return out


@pytest.mark.parametrize("shape,shift", [((8, 8), 0), ((16, 24), 4)])
def test_elementwise_isa_calls_write_only_the_triangle(shape, shift):
    a, b = rand(*shape, seed=3), rand(*shape, seed=4) + 3.0
    got = nki.simulate_kernel(elementwise_isa, a, b, shift)
    m = keep(*shape, shift, lo=1)
    wants = [a + b, a * 3.0 - 1.0, a, a * 2.0 + b, 1.0 / b, np.exp(a)]
    for k, want in enumerate(wants):
        np.testing.assert_allclose(got[k], np.where(m, want, FILL), rtol=1e-5, atol=1e-6,
                                   err_msg=f"call {k}")


@nki.jit
def scalar_reduce_triangle(a, lo):
    """tensor_scalar_reduce under (i_p >= i_f) & (i_p >= lo): the product is
    written and summed (and maxed) over the masked elements only; reduce_res
    rows above lo keep their fill."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols + 2), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p >= i_f) & (i_p >= lo)
    x = nl.load(a)
    res = nl.full((rows, cols + 2), FILL, nl.float32)
    sums = nl.full((rows, 1), FILL, nl.float32)
    res[:, 0:cols] = nisa.tensor_scalar_reduce(data=x, op0=nl.multiply, operand0=2.0,
                                               reduce_op=nl.add, reduce_res=sums, mask=tri)
    res[:, cols:cols + 1] = sums
    maxes = nl.full((rows, 1), FILL, nl.float32)
    nisa.tensor_scalar_reduce(data=x, op0=nl.add, operand0=1.0, reduce_op=nl.maximum,
                              reduce_res=maxes, mask=tri)
    res[:, cols + 1:cols + 2] = maxes
    nl.store(out, res)
    return out


@pytest.mark.parametrize("lo", [0, 2])
def test_tensor_scalar_reduce_under_a_triangle_reduces_the_masked_elements(lo):
    a = rand(8, 8, seed=15)
    got = nki.simulate_kernel(scalar_reduce_triangle, a, lo)
    m = keep(8, 8, 0, lo=lo)
    np.testing.assert_allclose(got[:, :8], np.where(m, 2 * a, FILL), rtol=1e-6)
    rows = np.arange(8) >= lo
    want_sum = np.where(m, 2 * a, 0).sum(1)
    want_max = np.where(m, a + 1, -np.inf).max(1)
    np.testing.assert_allclose(got[:, 8], np.where(rows, want_sum, FILL), rtol=1e-5)
    np.testing.assert_allclose(got[:, 9], np.where(rows, want_max, FILL), rtol=1e-6)


@nki.jit
def nl_selects(a, c):
    rows, cols = a.shape
    out = nl.ndarray((3, rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p + 1 >= i_f) & (i_f >= 2)
    x, cond = nl.load(a), nl.load(c)
    results = [
        lambda: nl.where(cond, x, 4.0, mask=tri),
        lambda: nl.logical_not(cond, dtype=nl.float32, mask=tri),
        lambda: nl.invert(cond, mask=tri),
    ]
    for k, make in enumerate(results):
        t = nl.full((rows, cols), FILL, nl.float32)
        t[...] = make()
        nl.store(out[k], t)
    return out


def test_nl_where_logical_not_and_invert_under_a_triangle():
    a = rand(8, 12, seed=16)
    c = (rand(8, 12, seed=17) > 0).astype(np.uint8)
    got = nki.simulate_kernel(nl_selects, a, c)
    p, f = np.meshgrid(np.arange(8), np.arange(12), indexing="ij")
    m = (p + 1 >= f) & (f >= 2)
    np.testing.assert_array_equal(got[0], np.where(m, np.where(c != 0, a, 4.0), FILL))
    np.testing.assert_array_equal(got[1], np.where(m, c == 0, FILL))
    np.testing.assert_array_equal(got[2], np.where(m, (~c).astype(np.float32), FILL))


@nki.jit
def range_selects(a, lo_b, hi_b):
    """range_select under a box on the free axis and under a triangle: each
    element compares its own column index, as without the mask."""
    rows, cols = a.shape
    out = nl.ndarray((2, rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    x, b0, b1 = nl.load(a), nl.load(lo_b), nl.load(hi_b)
    masks = [(i_f >= 3) & (i_p < 6), (i_p + 2 >= i_f) & (i_f >= 1)]
    for k, m in enumerate(masks):
        t = nl.full((rows, cols), FILL, nl.float32)
        t[...] = nisa.range_select(on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                   bound0=b0, bound1=b1, range_start=1, on_false_value=-50.0,
                                   mask=m)
        nl.store(out[k], t)
    return out


def test_range_select_under_masks_keeps_each_elements_column_index():
    a = rand(8, 10, seed=18)
    lo_b = np.arange(8, dtype=np.float32)[:, None]
    hi_b = lo_b + 5
    got = nki.simulate_kernel(range_selects, a, lo_b, hi_b)
    p, f = np.meshgrid(np.arange(8), np.arange(10), indexing="ij")
    picked = np.where((f + 1 >= lo_b) & (f + 1 < hi_b), a, -50.0)
    masks = [(f >= 3) & (p < 6), (p + 2 >= f) & (f >= 1)]
    for k, m in enumerate(masks):
        np.testing.assert_array_equal(got[k], np.where(m, picked, FILL), err_msg=f"mask {k}")


# ---- iota, memset, affine_select --------------------------------------------

@nki.jit
def generators(a, shift):
    rows, cols = a.shape
    out = nl.ndarray((4, rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p + shift >= i_f) & (i_f < cols - 1)
    x = nl.load(a)
    results = [
        lambda: nisa.iota(3 * i_p - i_f + 5, dtype=nl.int32, mask=tri),
        lambda: nisa.iota(i_p + 2 * i_f, dtype=nl.float32, mask=(i_p >= 3) & (i_f < 4)),
        lambda: nisa.memset((rows, cols), 2.5, nl.float32, mask=tri),
        lambda: nisa.affine_select(i_f - i_p >= 1, x, -100.0, mask=tri),
    ]
    for k, make in enumerate(results):
        t = nl.full((rows, cols), FILL, nl.float32)
        t[...] = make()
        nl.store(out[k], t)
    return out


@pytest.mark.parametrize("shape,shift", [((8, 8), 0), ((16, 12), 5)])
def test_iota_memset_and_affine_select_under_masks(shape, shift):
    a = rand(*shape, seed=5)
    got = nki.simulate_kernel(generators, a, shift)
    p, f = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    tri = (p + shift >= f) & (f < shape[1] - 1)
    box = (p >= 3) & (f < 4)
    np.testing.assert_array_equal(got[0], np.where(tri, 3 * p - f + 5, FILL))
    np.testing.assert_array_equal(got[1], np.where(box, p + 2 * f, FILL))
    np.testing.assert_array_equal(got[2], np.where(tri, 2.5, FILL))
    np.testing.assert_array_equal(got[3], np.where(tri, np.where(f - p >= 1, a, -100.0), FILL))


# ---- in-place predicated copy and select -------------------------------------

@nki.jit
def in_place(a, b, pred):
    rows, cols = a.shape
    out = nl.ndarray((2, rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    tri = (i_p >= i_f) & (i_p >= 2)
    x, y, c = nl.load(a), nl.load(b), nl.load(pred)
    d = nl.full((rows, cols), FILL, nl.float32)
    nisa.tensor_copy_predicated(src=x, dst=d, predicate=c, mask=tri)
    nl.store(out[0], d)
    e = nl.full((rows, cols), FILL, nl.float32)
    nisa.select_reduce(dst=e, predicate=c, on_true=y, on_false=1.5, reverse_pred=True,
                       mask=tri)
    nl.store(out[1], e)
    return out


def test_predicated_copy_and_select_reduce_under_a_triangle():
    shape = (16, 16)
    a, b = rand(*shape, seed=6), rand(*shape, seed=7)
    pred = (rand(*shape, seed=8) > 0).astype(np.uint8)
    got = nki.simulate_kernel(in_place, a, b, pred)
    m = keep(*shape, 0, lo=2)
    np.testing.assert_array_equal(got[0], np.where(m & (pred != 0), a, FILL))
    np.testing.assert_array_equal(got[1], np.where(m, np.where(pred == 0, b, 1.5), FILL))


# ---- atomic_rmw -------------------------------------------------------------

@nki.jit
def atomic_triangle(table, idx, value):
    """table[idx[p], f] += value[p, f] where p >= f (repeated rows add)."""
    rows, cols = value.shape
    out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(table))
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    ix = nl.load(idx)
    v = nl.load(value)
    nl.atomic_rmw(out[ix[i_p, 0], i_f], value=v, op=np.add, mask=(i_p >= i_f) & (i_p >= 1))
    nl.atomic_rmw(out[ix[i_p, 0], i_f], value=1.0, op=np.add, mask=(i_p + 1 < i_f))
    return out


def test_atomic_rmw_under_a_triangle_leaves_the_rest_of_dst():
    table = rand(6, 8, seed=9)
    idx = np.array([[0], [3], [3], [5], [1], [0], [2], [3]], np.int32)
    value = rand(8, 8, seed=10)
    want = table.copy()
    for p in range(8):
        for f in range(8):
            if p >= f and p >= 1:
                want[idx[p, 0], f] += value[p, f]
            if p + 1 < f:
                want[idx[p, 0], f] += 1.0
    got = nki.simulate_kernel(atomic_triangle, table.copy(), idx, value)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---- refusals -----------------------------------------------------------------

def test_a_matmul_mask_over_two_axes_is_refused_for_operand_masking():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.load(a)
        nl.store(out, nl.copy(nl.matmul(t, t, transpose_x=True, mask=(i_p >= i_f))))
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 8), np.float32),
                match="operands")


def test_nc_matmul_mask_over_two_axes_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.load(a)
        nl.store(out, nl.copy(nisa.nc_matmul(t, t, mask=(i_p >= i_f))))
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 8), np.float32),
                match="operands")


def test_select_reduce_with_reduce_res_under_a_triangle_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.load(a)
        d = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((8, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=d, predicate=t, on_true=t, on_false=0.0, reduce_res=r,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum,
                           mask=(i_p >= i_f))
        nl.store(out, d)
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 8), np.float32),
                match="reduce_res")


def test_a_masked_transpose_of_a_3d_tile_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.load(a)
        nl.store(out, nisa.nc_transpose(t, mask=(i_p >= 1)))
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 2, 4), np.float32),
                match="2-D")


def test_atomic_rmw_with_an_op_without_identity_under_a_triangle_is_refused():
    @nki.jit
    def k(table, idx, value):
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        nl.atomic_rmw(out[nl.load(idx)[i_p, 0], i_f], value=nl.load(value),
                      op=np.subtract, mask=(i_p >= i_f))
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 8), np.float32),
                np.zeros((8, 1), np.int32), np.zeros((8, 8), np.float32))
