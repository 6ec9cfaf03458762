"""The instructions of NKI.md's "implement these first" list, the ALU ops and
activation functions, and the nki.language conveniences, on the simulator
against NumPy / PyTorch CPU references."""

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def hbm_out(tile, dtype=nl.float32):
    """Stores an on-chip tile to a new kernel output."""
    out = nl.ndarray(tile.shape, dtype, buffer=nl.shared_hbm)
    nl.store(out, tile)
    return out


# ---- ALU ops and activation functions ------------------------------------------

def positive(*shape):
    return np.abs(randn(*shape)) + 0.25


ALU_CASES = [  # name, reference, input generator
    ("add", np.add, randn), ("subtract", np.subtract, randn),
    ("multiply", np.multiply, randn), ("divide", np.divide, randn),
    ("maximum", np.maximum, randn), ("minimum", np.minimum, randn),
    ("power", np.power, positive), ("mod", np.fmod, positive),
    ("abs_max", lambda a, b: np.maximum(np.abs(a), np.abs(b)), randn),
    ("equal", np.equal, randn), ("not_equal", np.not_equal, randn),
    ("greater", np.greater, randn), ("greater_equal", np.greater_equal, randn),
    ("less", np.less, randn), ("less_equal", np.less_equal, randn),
    ("logical_and", np.logical_and, lambda *s: np.round(randn(*s))),
    ("logical_or", np.logical_or, lambda *s: np.round(randn(*s))),
    ("logical_xor", np.logical_xor, lambda *s: np.round(randn(*s))),
]


@pytest.mark.parametrize("name,ref,gen", ALU_CASES, ids=[c[0] for c in ALU_CASES])
def test_tensor_tensor_and_tensor_scalar_ops(name, ref, gen):
    @nki.jit
    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        t = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_tensor(t, x, y, getattr(nl, name))
        s = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_scalar(s, x, getattr(nl, name), 0.5, reverse0=True)
        return hbm_out(t), hbm_out(s)

    a, b = gen(16, 24), gen(16, 24)
    b[0, :4] = a[0, :4]  # some equal pairs for the comparisons
    out, out2 = k(a, b)
    np.testing.assert_allclose(out, ref(a, b).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(out2, ref(np.float32(0.5), a).astype(np.float32), rtol=1e-6)


ACT_CASES = [("exp", torch.exp), ("log", torch.log), ("tanh", torch.tanh),
             ("sigmoid", torch.sigmoid), ("relu", torch.relu),
             ("gelu", torch.nn.functional.gelu),
             ("gelu_apprx_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
             ("silu", torch.nn.functional.silu), ("softplus", torch.nn.functional.softplus),
             ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt), ("reciprocal", torch.reciprocal),
             ("square", torch.square), ("abs", torch.abs), ("sign", torch.sign),
             ("sin", torch.sin), ("cos", torch.cos), ("arctan", torch.atan),
             ("erf", torch.erf), ("negative", torch.neg), ("copy", lambda x: x)]


@pytest.mark.parametrize("name,ref", ACT_CASES, ids=[c[0] for c in ACT_CASES])
def test_activation_functions(name, ref):
    x = torch.rand(8, 33) * 4 + 0.1
    x[0, :8] = -x[0, :8]  # some negatives where the function is defined for them
    if name in ("log", "sqrt", "rsqrt"):
        x = x.abs()
    fn = getattr(nl, name)

    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, nl.float32)
        nisa.activation(t, fn, nl.load(a))
        return hbm_out(t)

    torch.testing.assert_close(torch.from_numpy(k(x.numpy())), ref(x), rtol=1e-5, atol=1e-6)


def test_bitwise_ops_act_on_bits():
    @nki.jit
    def k(a, b):
        t = nl.ndarray(a.shape, nl.int32)
        nisa.tensor_tensor(t, nl.load(a), nl.load(b), nl.bitwise_xor)
        nisa.tensor_scalar(t, t, nl.left_shift, 2, op1=nl.bitwise_and, operand1=0xFFFF)
        u = nl.ndarray(a.shape, nl.int32)
        nisa.tensor_tensor(u, nl.load(a), nl.load(b), nl.bitwise_or)
        nisa.tensor_scalar(u, u, nl.right_shift, 3)
        return hbm_out(t, nl.int32), hbm_out(u, nl.int32)

    a = np.arange(12, dtype=np.int32).reshape(3, 4) * 12345
    b = np.full((3, 4), 0x5A5A, np.int32)
    t, u = k(a, b)
    np.testing.assert_array_equal(t, ((a ^ b) << 2) & 0xFFFF)
    np.testing.assert_array_equal(u, (a | b) >> 3)


def test_low_precision_storage_rounds():
    @nki.jit
    def k(a, dt):
        return hbm_out(nl.load(a, dtype=dt))

    a = np.array([[1.0, 1.0625, 300.0, 0.001, -2.75, 1000.0]], np.float32)
    np.testing.assert_array_equal(k(a, nl.float8_e4m3), [[1.0, 1.0, np.inf, 0.001953125, -2.75,
                                                          np.inf]])
    np.testing.assert_array_equal(k(a, nl.float8_e5m2), [[1.0, 1.0, 320.0, 0.0009765625, -3.0,
                                                          1024.0]])
    np.testing.assert_array_equal(k(a, nl.int8), [[1, 1, 127, 0, -3, 127]])
    expect = torch.tensor(a).bfloat16().float().numpy()
    np.testing.assert_array_equal(k(a, nl.bfloat16), expect)


# ---- the Tensor engine ----------------------------------------------------------

def test_nc_matmul_first_write_rule_and_forced_accumulate():
    @nki.jit
    def k(s_in, m_in, m2_in):
        s, m, m2 = nl.load(s_in), nl.load(m_in), nl.load(m2_in)
        acc = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, s, m)  # first write: overwrites the NaN of fresh PSUM
        nisa.nc_matmul(acc, s, m2)  # later write: adds
        first = nl.copy(acc)
        nisa.nc_matmul(acc, s, m, accumulate=False)  # forced overwrite
        second = nl.copy(acc)
        nisa.nc_matmul(acc, s, m2, accumulate=True)  # forced add
        return hbm_out(first), hbm_out(second), hbm_out(acc)

    s, m, m2 = randn(64, 32), randn(64, 48), randn(64, 48)
    first, second, third = k(s, m, m2)
    np.testing.assert_allclose(first, s.T @ m + s.T @ m2, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(second, s.T @ m, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(third, s.T @ m + s.T @ m2, rtol=1e-5, atol=1e-4)


def test_nc_matmul_is_transpose_and_both_transpose_engines():
    @nki.jit
    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        t = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(t, x, x, is_transpose=True)
        small = nl.ndarray((y.shape[1], y.shape[0]), nl.float32)
        nisa.nc_transpose(small, y)  # into SBUF: the Vector engine (<= 32x32)
        return hbm_out(t), hbm_out(small)

    a, b = randn(100, 70), randn(20, 32)
    t, small = k(a, b)
    np.testing.assert_array_equal(t, a.T)
    np.testing.assert_array_equal(small, b.T)


def test_matmul_in_low_precision_accumulates_in_fp32():
    @nki.jit
    def k(s_in, m_in, dt):
        acc = nl.ndarray((s_in.shape[1], m_in.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, nl.load(s_in, dtype=dt), nl.load(m_in, dtype=dt))
        return hbm_out(acc)

    s, m = randn(128, 16), randn(128, 40)
    for dt, torch_dt in ((nl.bfloat16, torch.bfloat16), (nl.float16, torch.float16)):
        ref = (torch.tensor(s).to(torch_dt).double().T @ torch.tensor(m).to(torch_dt).double())
        np.testing.assert_allclose(k(s, m, dt), ref.float().numpy(), rtol=1e-5, atol=1e-4)


# ---- Scalar, Vector and GpSimd instructions -------------------------------------

def test_activation_scale_tile_bias_and_reduce():
    @nki.jit
    def k(a, s, b):
        x, scale, bias = nl.load(a), nl.load(s), nl.load(b)
        t = nl.ndarray(a.shape, nl.float32)
        sums = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.activation(t, nl.exp, x, bias=bias, scale=scale, reduce_op=nl.add, reduce_res=sums)
        u = nl.ndarray(a.shape, nl.float32)
        sums2 = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.activation_reduce(u, nl.tanh, x, reduce_op=nl.add, reduce_res=sums2, scale=2.0)
        return hbm_out(t), hbm_out(sums), hbm_out(u), hbm_out(sums2)

    a, s, b = randn(12, 20), randn(12, 1), randn(12, 1)
    t, sums, u, sums2 = k(a, s, b)
    ref = np.exp(a * s + b)
    np.testing.assert_allclose(t, ref, rtol=1e-5)
    np.testing.assert_allclose(sums[:, 0], ref.sum(1), rtol=1e-5)
    np.testing.assert_allclose(u, np.tanh(2 * a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sums2[:, 0], np.tanh(2 * a).sum(1), rtol=1e-5, atol=1e-5)


def sequential_row_sums(x):
    acc = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1]):
        acc = acc + x[:, j]
    return acc


def test_activation_reduce_sums_each_row_in_order():
    # Partitions' sums are taken 16 rows at a time (40 = 2 x 16 + 8); a
    # reduce_res inside the input's own tile takes the one-row-at-a-time path.
    @nki.jit
    def k(a, b):
        x, bias = nl.load(a), nl.load(b)
        t = nl.ndarray(a.shape, nl.float32)
        sums = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.activation(t, nl.exp, x, bias=bias, reduce_op=nl.add, reduce_res=sums)
        rows, cols = a.shape
        buf = nl.ndarray((rows, cols + 1), nl.float32)
        nisa.tensor_copy(buf[:, 0:cols], x)
        u = nl.ndarray(a.shape, nl.float32)
        nisa.activation(u, nl.copy, buf[:, 0:cols], scale=3.0, reduce_op=nl.add, reduce_res=buf[:, cols:cols + 1])
        return hbm_out(t), hbm_out(sums), hbm_out(u), hbm_out(buf[:, cols:cols + 1])

    a, b = randn(40, 300), randn(40, 1)
    t, sums, u, own = k(a, b)
    np.testing.assert_allclose(t, np.exp(a + b), rtol=1e-5)
    np.testing.assert_array_equal(sums[:, 0].view(np.uint32), sequential_row_sums(t).view(np.uint32))
    np.testing.assert_array_equal(own[:, 0].view(np.uint32), sequential_row_sums(u).view(np.uint32))


def test_tensor_scalar_with_tile_operands_and_reduce():
    @nki.jit
    def k(a, c):
        x, col = nl.load(a), nl.load(c)
        t = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_scalar(t, x, nl.subtract, col, op1=nl.divide, operand1=4.0, reverse1=True)
        r = nl.ndarray(a.shape, nl.float32)
        rmax = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.tensor_scalar_reduce(r, x, nl.multiply, col, reduce_op=nl.maximum, reduce_res=rmax)
        return hbm_out(t), hbm_out(r), hbm_out(rmax)

    a, c = randn(10, 16), randn(10, 1)
    t, r, rmax = k(a, c)
    np.testing.assert_allclose(t, 4.0 / (a - c), rtol=1e-5)
    np.testing.assert_allclose(r, a * c, rtol=1e-6)
    np.testing.assert_allclose(rmax[:, 0], (a * c).max(1), rtol=1e-6)


def test_scalar_tensor_tensor_order_of_operands():
    @nki.jit
    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        t = nl.ndarray(a.shape, nl.float32)
        nisa.scalar_tensor_tensor(t, x, nl.subtract, 1.5, nl.divide, y)
        u = nl.ndarray(a.shape, nl.float32)
        nisa.scalar_tensor_tensor(u, x, nl.subtract, 1.5, nl.divide, y, reverse0=True,
                                  reverse1=True)
        return hbm_out(t), hbm_out(u)

    a, b = randn(6, 9), randn(6, 9)
    t, u = k(a, b)
    np.testing.assert_allclose(t, (a - 1.5) / b, rtol=1e-5)
    np.testing.assert_allclose(u, b / (1.5 - a), rtol=1e-5)


def test_tensor_reduce_over_trailing_axes_with_negate():
    @nki.jit
    def k(a):
        x = nl.load(a.reshape((a.shape[0], 4, 6)))
        both = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.tensor_reduce(both, nl.add, x, axis=(1, 2))
        last = nl.ndarray((a.shape[0], 4), nl.float32)
        nisa.tensor_reduce(last, nl.maximum, x, axis=2, negate=True)
        kept = nl.ndarray((a.shape[0], 4, 1), nl.float32)
        nisa.tensor_reduce(kept, nl.minimum, x, axis=-1, keepdims=True)
        prod = nl.ndarray((a.shape[0], 4), nl.float32)
        nisa.tensor_reduce(prod, nl.multiply, x, axis=2)
        return hbm_out(both), hbm_out(last), hbm_out(kept), hbm_out(prod)

    a = randn(9, 24)
    x = a.reshape(9, 4, 6)
    both, last, kept, prod = k(a)
    np.testing.assert_allclose(both[:, 0], a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(last, -x.max(2))
    np.testing.assert_array_equal(kept, x.min(2, keepdims=True))
    np.testing.assert_allclose(prod, x.prod(2), rtol=1e-5)


def chained_extreme(x, is_max):
    """nc_alu's maximum / minimum chain along rows: a NaN sticks, ties go to the later value."""
    acc = np.full(x.shape[0], -np.inf if is_max else np.inf, np.float32)
    for j in range(x.shape[1]):
        keep = (acc != acc) | ((acc > x[:, j]) if is_max else (acc < x[:, j]))
        acc = np.where(keep, acc, x[:, j])
    return acc


@pytest.mark.parametrize("cols", [5, 16, 37, 512])
def test_tensor_reduce_max_min_bits_with_nan_zeros_and_infinities(cols):
    # Rows of every kind the vectorised reduction must hand back to the chain:
    # a NaN (first, middle, last), zeros of both signs as the result, all -inf / +inf.
    @nki.jit
    def k(a):
        x = nl.load(a)
        hi, lo = nl.ndarray((a.shape[0], 1), nl.float32), nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.tensor_reduce(hi, nl.maximum, x, axis=1)
        nisa.tensor_reduce(lo, nl.minimum, x, axis=1)
        return hbm_out(hi), hbm_out(lo)

    a = randn(12, cols)
    a[0, 0] = a[1, cols // 2] = a[2, -1] = np.nan
    a[3] = -np.abs(a[3]); a[3, ::3] = 0.0; a[3, 1::3] = -0.0   # max is a zero
    a[4] = np.abs(a[4]); a[4, ::2] = -0.0; a[4, -1] = 0.0       # min is a zero
    a[5] = -np.inf
    a[6] = np.inf
    a[7, -1] = 1e30; a[8, 0] = -1e30                             # extreme at the ends
    a[9] = 3.0                                                   # all equal
    hi, lo = k(a)
    for got, is_max in ((hi[:, 0], True), (lo[:, 0], False)):
        want = chained_extreme(a, is_max)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_tensor_copy_and_dma_are_bit_exact_for_matching_dtypes():
    @nki.jit
    def k(a):
        x = nl.load(a)
        y = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_copy(y, x)
        return hbm_out(y)

    bits = np.array([[0x7FC00001, 0xFFC12345, 0x80000000, 0x00000001, 0x7F800000, 0x3F800000]],
                    np.uint32)
    out = k(bits.view(np.float32))
    np.testing.assert_array_equal(out.view(np.uint32), bits)


def test_tensor_copy_converts_dtypes_saturating_integers():
    @nki.jit
    def k(a):
        x = nl.load(a)
        y = nl.ndarray(a.shape, nl.uint8)
        nisa.tensor_copy(y, x)
        return hbm_out(y, nl.uint8)

    a = np.array([[-3.0, 0.4, 2.5, 3.5, 254.6, 1000.0, np.nan]], np.float32)
    np.testing.assert_array_equal(k(a), [[0, 0, 2, 4, 255, 255, 0]])


def test_dma_copy_between_every_pair_of_memories():
    @nki.jit
    def k(a):
        staged = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(staged, a)  # HBM -> HBM
        x = nl.ndarray(a.shape, nl.float32)
        nisa.dma_copy(x, staged)  # HBM -> SBUF
        y = nl.ndarray(a.shape, nl.bfloat16)
        nisa.dma_copy(y, x)  # SBUF -> SBUF, converting
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, y)  # SBUF -> HBM, converting back
        return staged, out

    a = randn(40, 30)
    staged, out = k(a)
    np.testing.assert_array_equal(staged, a)
    np.testing.assert_array_equal(out, torch.tensor(a).bfloat16().float().numpy())


def test_memset_reciprocal_and_copy_predicated():
    @nki.jit
    def k(a):
        x = nl.load(a)
        ints = nl.ndarray(a.shape, nl.int32)
        nisa.memset(ints, 7)
        inv = nl.ndarray(a.shape, nl.float32)
        nisa.reciprocal(inv, x)
        mask = nl.greater(x, 0.0)
        kept = nl.zeros(a.shape, nl.float32)
        nisa.tensor_copy_predicated(kept, x, mask)
        return hbm_out(ints, nl.int32), hbm_out(inv), hbm_out(kept)

    a = randn(5, 7)
    ints, inv, kept = k(a)
    np.testing.assert_array_equal(ints, 7)
    np.testing.assert_allclose(inv, 1 / a, rtol=1e-6)
    np.testing.assert_array_equal(kept, np.where(a > 0, a, 0))


def test_iota_and_affine_select():
    @nki.jit
    def k(a):
        idx = nl.ndarray((4, 6), nl.int32)
        nisa.iota(idx, [[1, 6]], offset=10, channel_multiplier=100)
        vals = nl.ndarray((4, 6), nl.float32)
        nisa.tensor_copy(vals, idx)
        nisa.affine_select(vals, [[-1, 6]], 1, vals, -1.0, cmp_op=nl.greater_equal)
        grid = nl.ndarray((4, 2, 3), nl.int32)
        nisa.iota(grid, [[10, 2], [1, 3]])
        return hbm_out(vals), hbm_out(grid, nl.int32)

    vals, grid = k(np.zeros(1, np.float32))
    c, i = np.meshgrid(np.arange(4), np.arange(6), indexing="ij")
    np.testing.assert_array_equal(vals, np.where(c - i >= 0, 10 + 100 * c + i, -1.0))
    np.testing.assert_array_equal(grid, np.broadcast_to([[0, 1, 2], [10, 11, 12]], (4, 2, 3)))


# ---- views in instructions ------------------------------------------------------

def test_views_in_instructions():
    @nki.jit
    def k(a, v):
        x = nl.load(a)  # [8, 12]
        col = nl.load(v.expand_dims(1))  # HBM [8] -> [8, 1]
        wide = nl.ndarray(a.shape, nl.float32)
        nisa.tensor_tensor(wide, x, col.broadcast_to((8, 12)), nl.add)  # stride-0 free dim
        evens = nl.ndarray((8, 6), nl.float32)
        nisa.tensor_copy(evens, x[:, ::2])
        cube = x.reshape((8, 3, 4))
        picked = nl.ndarray((8, 4), nl.float32)
        nisa.tensor_copy(picked, cube.select(1, 2))
        swapped = nl.ndarray((8, 4, 3), nl.float32)
        nisa.tensor_copy(swapped, cube.permute(0, 2, 1))
        raw = nl.ndarray((4, 3), nl.float32)
        nisa.tensor_copy(raw, x.ap([[12, 4], [4, 3]], offset=1))  # rows 0-3, columns 1::4
        as_bits = nl.ndarray((8, 12), nl.int32)
        nisa.tensor_copy(as_bits, x.view(nl.int32))
        return (hbm_out(wide), hbm_out(evens), hbm_out(picked), hbm_out(swapped),
                hbm_out(raw), hbm_out(as_bits, nl.int32), hbm_out(x.slice(1, 4, 8)))

    a, v = randn(8, 12), randn(8)
    wide, evens, picked, swapped, raw, as_bits, sliced = k(a, v)
    cube = a.reshape(8, 3, 4)
    np.testing.assert_array_equal(wide, a + v[:, None])
    np.testing.assert_array_equal(evens, a[:, ::2])
    np.testing.assert_array_equal(picked, cube[:, 2])
    np.testing.assert_array_equal(swapped, cube.transpose(0, 2, 1))
    np.testing.assert_array_equal(raw, a[0:4, 1::4])
    np.testing.assert_array_equal(as_bits, a.view(np.int32))
    np.testing.assert_array_equal(sliced, a[:, 4:8])


# ---- nki.language conveniences --------------------------------------------------

def test_reductions_and_nl_conveniences():
    @nki.jit
    def k(a):
        x = nl.load(a)
        tiles = (nl.sum(x, axis=1), nl.max(x, axis=1), nl.min(x, axis=1), nl.mean(x, axis=1),
                 nl.prod(x, axis=1), nl.where(nl.greater(x, 0.0), x, 0.0),
                 nl.where(nl.less(x, 0.0), 1.0, x),
                 nl.matmul(x, x, transpose_x=True), nl.matmul(x, x), nl.transpose(x),
                 nl.divide(x, 2.0), nl.subtract(1.0, x), nl.maximum(x, nl.copy(x)),
                 nl.exp(x), nl.full(x.shape, 2.5, nl.float32), nl.ones(x.shape, nl.float32),
                 nl.zeros_like(x), nl.add(x, nl.max(x, axis=1)))
        return tuple(hbm_out(t) for t in tiles)

    a = randn(16, 16)
    (s, m, mn, mean, prod, relu, where2, gram, square, tr, half, rsub, same, e, full, ones,
     zeros, add_col) = k(a)
    np.testing.assert_allclose(s[:, 0], a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m[:, 0], a.max(1))
    np.testing.assert_array_equal(mn[:, 0], a.min(1))
    np.testing.assert_allclose(mean[:, 0], a.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(prod[:, 0], a.prod(1), rtol=1e-5)
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    np.testing.assert_array_equal(where2, np.where(a < 0, 1.0, a))
    np.testing.assert_allclose(gram, a.T @ a, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(square, a @ a, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(tr, a.T)
    np.testing.assert_array_equal(half, a / 2)
    np.testing.assert_array_equal(rsub, 1 - a)
    np.testing.assert_array_equal(same, a)
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(full, 2.5)
    np.testing.assert_array_equal(ones, 1)
    np.testing.assert_array_equal(zeros, 0)
    np.testing.assert_array_equal(add_col, a + a.max(1, keepdims=True))


def test_range_aliases_unroll_like_range():
    assert nl.affine_range is range and nl.sequential_range is range and nl.static_range is range

    @nki.jit
    def k(a):
        x = nl.load(a)
        acc = nl.zeros(a.shape, nl.float32)
        for _ in nl.affine_range(2):
            for _ in nl.sequential_range(3):
                for _ in nl.static_range(1, 3):
                    nisa.tensor_tensor(acc, acc, x, nl.add)
        return hbm_out(acc)

    a = randn(3, 5)
    np.testing.assert_allclose(k(a), 12 * a, rtol=1e-6)


def test_private_hbm_and_manual_placement():
    @nki.jit
    def k(a):
        scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.private_hbm)
        nl.store(scratch, nl.load(a))
        pinned = nl.ndarray(a.shape, nl.float32, address=(0, 0))  # manual SBUF placement
        nisa.dma_copy(pinned, scratch)
        other = nl.multiply(pinned, 3.0)  # automatic: never over the manual tile
        acc = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum, address=(0, 2048))
        nisa.nc_matmul(acc, pinned, pinned)
        return hbm_out(nl.add(pinned, other)), hbm_out(acc)

    a = randn(8, 16)
    summed, gram = k(a)
    np.testing.assert_allclose(summed, 4 * a, rtol=1e-6)
    np.testing.assert_allclose(gram, a.T @ a, rtol=1e-5, atol=1e-5)


def test_manual_placements_may_alias():
    @nki.jit
    def k(a):
        first = nl.ndarray(a.shape, nl.float32, address=(0, 1024))
        nisa.dma_copy(first, a)
        alias = nl.ndarray(a.shape, nl.float32, address=(0, 1024))  # not fresh: keeps a
        return hbm_out(nl.multiply(alias, 2.0))

    a = randn(4, 8)
    np.testing.assert_array_equal(k(a), 2 * a)
