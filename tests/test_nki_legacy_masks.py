"""Masks of the legacy dialect beyond loads, stores and element-wise ops: bool
masks (comparisons of loop variables) keep or drop an instruction, a masked
result assigned to a tile writes only its masked elements, and reductions
under a mask over several axes (a causal triangle) leave the masked-out
elements out. Checked against PyTorch CPU."""

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401  (the neuron device)
import torchneuron.nki.legacy as legacy

from nki_testing import expect_rule

legacy.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def run(kernel, *args):
    out = nki.simulate_kernel(kernel, *[a.numpy() if isinstance(a, torch.Tensor) else a
                                        for a in args])
    if isinstance(out, tuple):
        return tuple(torch.from_numpy(np.asarray(o)) for o in out)
    return torch.from_numpy(np.asarray(out))


# ---- the motivating case: causal attention, tiles above the diagonal skipped --

@nki.jit
def causal_attention(qT, kT, v, scale):
    """softmax(q k^T * scale, causal) @ v and its row max, over 64 x 64 tiles:
    tiles above the diagonal are dropped by bool masks (ki <= qi), the
    diagonal tile's triangle by a mask over two axes on the row max, the
    exp (assigned into a zeroed tile) and the row sum."""
    d, S = qT.shape
    T = 64
    o = nl.ndarray((S, d), dtype=nl.float32, buffer=nl.shared_hbm)
    row_max = nl.ndarray((S, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(T)[:, None]
    i_f = nl.arange(T)[None, :]
    for qi in nl.affine_range(S // T):
        q = nl.load(qT[:, qi * T:(qi + 1) * T])
        m = nl.full((T, 1), -1e30, nl.float32)
        scores = []
        for ki in nl.affine_range(S // T):
            needed = ki <= qi
            causal = (qi * T + i_p >= ki * T + i_f) & needed
            k = nl.load(kT[:, ki * T:(ki + 1) * T], mask=needed)
            s = nl.ndarray((T, T), nl.float32, buffer=nl.sbuf)
            s[...] = nl.multiply(nl.matmul(q, k, transpose_x=True, mask=needed), scale,
                                 mask=needed)
            m[...] = nl.maximum(m, nl.max(s, axis=1, keepdims=True, mask=causal), mask=needed)
            scores.append(s)
        total = nl.zeros((T, 1), nl.float32, buffer=nl.sbuf)
        acc = nl.zeros((T, d), nl.float32, buffer=nl.psum)
        for ki in nl.affine_range(S // T):
            needed = ki <= qi
            causal = (qi * T + i_p >= ki * T + i_f) & needed
            p = nl.zeros((T, T), nl.float32, buffer=nl.sbuf)
            p[...] = nl.exp(nl.subtract(scores[ki], m, mask=causal), mask=causal)
            total[...] = nl.add(total, nl.sum(p, axis=1, keepdims=True, mask=causal),
                                mask=needed)
            pT = nl.copy(nl.transpose(p))
            vt = nl.load(v[ki * T:(ki + 1) * T, :])
            acc += nl.matmul(pT, vt, transpose_x=True, mask=needed)
        nl.store(o[qi * T:(qi + 1) * T, :], nl.divide(acc, total))
        nl.store(row_max[qi * T:(qi + 1) * T, :], m)
    return o, row_max


def test_causal_attention_with_masks_matches_torch():
    S, d, scale = 128, 32, 0.25
    q, k, v = rand(S, d, seed=1), rand(S, d, seed=2), rand(S, d, seed=3)
    o, row_max = run(causal_attention, q.T.contiguous(), k.T.contiguous(), v, scale)
    scores = (q @ k.T) * scale
    scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(row_max, scores.amax(1, keepdim=True))
    torch.testing.assert_close(o, torch.softmax(scores, 1) @ v, atol=1e-5, rtol=1e-4)


# ---- reductions under a mask over several axes ---------------------------------

def _reduce_kernel(fn, op, shift, keepdims):
    @nki.jit
    def k(a, base):
        rows, cols = a.shape
        out = nl.ndarray(base.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        r = nl.load(base)
        i_p, i_f = nl.mgrid[0:rows, 0:cols]
        mask = (i_p + shift >= i_f) & (i_f < cols - 1)
        if fn == "isa":
            got = nisa.tensor_reduce(op, t, axis=(1,), keepdims=keepdims, mask=mask,
                                     dtype=nl.float32)
        else:
            got = getattr(nl, fn)(t, axis=1, keepdims=keepdims, mask=mask, dtype=nl.float32)
        if keepdims:
            r[...] = got
        else:
            r[:, 0] = got
        nl.store(out, r)
        return out

    return k


_TORCH = {"sum": lambda x: x.nansum(1), "max": lambda x: x.amax(1), "min": lambda x: x.amin(1),
          "prod": lambda x: x.nan_to_num(1.0).prod(1), "mean": lambda x: x.nanmean(1)}


@pytest.mark.parametrize("fn", ["sum", "max", "min", "prod", "mean"])
@pytest.mark.parametrize("shift,keepdims", [(0, True), (-2, False), (3, True)])
def test_reduction_under_a_triangle_leaves_masked_out_elements_out(fn, shift, keepdims):
    rows, cols = 8, 6
    a = rand(rows, cols, seed=4) + (1.0 if fn == "prod" else 0.0)
    base = torch.full((rows, 1), -5.0)
    got = run(_reduce_kernel(fn, None, shift, keepdims), a, base)
    p, f = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    keep = (p + shift >= f) & (f < cols - 1)
    fill = {"max": float("-inf"), "min": float("inf")}.get(fn, float("nan"))
    want = _TORCH[fn](torch.where(keep, a, torch.tensor(fill)))[:, None]
    if fn == "sum":
        want = torch.where(keep.any(1, keepdim=True), want, torch.zeros(()))
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("op,torch_op", [(np.max, "amax"), (nl.add, "nansum"),
                                         (nl.minimum, "amin")])
def test_isa_tensor_reduce_under_a_triangle(op, torch_op):
    rows, cols = 8, 6
    a = rand(rows, cols, seed=5)
    got = run(_reduce_kernel("isa", op, 1, True), a, torch.zeros(rows, 1))
    p, f = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    keep = (p + 1 >= f) & (f < cols - 1)
    fill = {"amax": float("-inf"), "amin": float("inf")}.get(torch_op, float("nan"))
    want = getattr(torch.where(keep, a, torch.tensor(fill)), torch_op)(1, keepdim=True)
    torch.testing.assert_close(got, want)


@nki.jit
def box_reductions(a, base):
    """A box on the reduced axis narrows the reduction; one on the kept axis
    bounds the rows written (the others keep base)."""
    out = nl.ndarray((a.shape[0], 2), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nl.load(base)
    i_p, i_f = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    r[:, 0:1] = nl.sum(t, axis=1, keepdims=True, mask=(i_f < 1))
    r[:, 1:2] = nl.max(t, axis=1, keepdims=True, mask=(i_p >= 3) & (i_f >= 2))
    nl.store(out, r)
    return out


def test_box_masks_on_reductions():
    a, base = rand(8, 5, seed=6), torch.full((8, 2), 9.0)
    got = run(box_reductions, a, base)
    want = base.clone()
    want[:, 0] = a[:, 0]
    want[3:, 1] = a[3:, 2:].amax(1)
    torch.testing.assert_close(got, want)


# ---- bool masks and what a masked result writes --------------------------------

@nki.jit
def bool_masks(a, b):
    """A False mask drops the instruction: its assignment, += and store write
    nothing; a True mask is no mask."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    for i in nl.affine_range(3):
        y[...] = nl.add(y, x, mask=(i == 1))
        y += nl.multiply(x, 100.0, mask=(i > 5))
        nl.store(out, value=nl.exp(x), mask=(i * 2 > 10))
    nl.store(out, value=y, mask=(i >= 2))  # the loop variable after the loop: True
    return out


def test_bool_masks_keep_or_drop_the_instruction():
    a, b = rand(4, 8, seed=7), rand(4, 8, seed=8)
    torch.testing.assert_close(run(bool_masks, a, b), b + a)


@nki.jit
def partial_assignments(a, base):
    """Masked results assigned to a tile write their masked elements only."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    r = nl.load(base)
    i_p, i_f = nl.mgrid[0:a.shape[0], 0:a.shape[1]]
    r[...] = nl.exp(x, mask=(i_p < 2))
    r[...] = nl.negative(x, mask=(i_p >= 4) & (i_p - 4 >= i_f))
    acc = nl.zeros(a.shape, nl.float32, buffer=nl.sbuf)
    acc += nl.multiply(x, 2.0, mask=(i_f >= 5))
    acc += nl.multiply(x, 3.0, mask=(i_p >= i_f))
    r[...] = nl.add(r, acc)
    nl.store(out, r)
    return out


def test_masked_results_write_only_their_elements():
    a, base = rand(8, 8, seed=9), torch.full((8, 8), 0.5)
    p, f = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    want = torch.where(p < 2, a.exp(), base)
    want = torch.where((p >= 4) & (p - 4 >= f), -a, want)
    acc = torch.where(f >= 5, 2 * a, 0.0) + torch.where(p >= f, 3 * a, 0.0)
    torch.testing.assert_close(run(partial_assignments, a, base), want + acc)


# ---- rules ------------------------------------------------------------------------

def test_a_mask_that_is_not_a_comparison_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(a), mask="rows < 4"))
        return out

    err = expect_rule("mask", nki.simulate_kernel, k, np.zeros((4, 4), np.float32))
    assert "got str" in str(err)


def test_a_triangle_on_a_reduction_without_identity_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:4, 0:4]
        nl.store(out, nisa.tensor_reduce(nl.subtract, nl.load(a), axis=(1,), keepdims=True,
                                         mask=(i_p >= i_f)))
        return out

    err = expect_rule("mask", nki.simulate_kernel, k, np.zeros((4, 4), np.float32))
    assert "identity" in str(err)


def test_a_masked_result_assigned_to_another_shape_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        i_p, i_f = nl.mgrid[0:4, 0:4]
        r = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        r[:, 0:4] = x
        r[:, 4:8] = x
        r[:, 0:1] = nl.exp(x, mask=(i_p < 2))
        nl.store(out, r[:, 0:4])
        return out

    expect_rule("shape_mismatch", nki.simulate_kernel, k, np.zeros((4, 4), np.float32))


# ---- operand masking of matmuls ------------------------------------------------

@nki.jit
def operand_masked_matmuls(lhsT, rhs, x, base):
    """The reference's operand masking: each matmul operand indexed by its own
    mask; masked-out elements take no part, free-axis bounds leave the
    result's other rows / columns as they were."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((4, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    a, b, xm, r0 = nl.load(lhsT), nl.load(rhs), nl.load(x), nl.load(base)
    i_p = nl.arange(K)[:, None]
    i_m = nl.arange(M)[None, :]
    i_n = nl.arange(N)[None, :]
    free = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    free[...] = nl.copy(r0)
    free[...] = nl.matmul(a[i_m < 5], b[i_n <= 6], transpose_x=True)
    nl.store(out[0], nl.copy(free))
    nl.store(out[1], nl.copy(nl.matmul(a[i_p < 3], b, transpose_x=True)))
    nl.store(out[2], nl.copy(nisa.nc_matmul(a[i_p >= i_m], b)))
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    acc += nl.matmul(xm[nl.arange(K)[None, :] < 4], b)  # x is [M, K]: a bound on K
    nl.store(out[3], nl.copy(acc))
    return out


def test_operand_masked_matmuls_match_torch():
    K, M, N = 8, 8, 12
    a, b, base = rand(K, M, seed=10), rand(K, N, seed=11), rand(M, N, seed=12)
    x = a.T.contiguous()
    got = run(operand_masked_matmuls, a, b, x, base)
    want0 = base.clone()
    want0[:5, :7] = (a.T @ b)[:5, :7]
    k, m = torch.meshgrid(torch.arange(K), torch.arange(M), indexing="ij")
    torch.testing.assert_close(got[0], want0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], a[:3].T @ b[:3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[2], torch.where(k >= m, a, 0.0).T @ b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[3], x[:, :4] @ b[:4], atol=1e-5, rtol=1e-5)


def test_a_masked_operand_outside_a_matmul_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.exp(t[nl.arange(4)[None, :] < 2]))
        return out

    err = expect_rule("mask", nki.simulate_kernel, k, np.zeros((4, 4), np.float32))
    assert "matmul operand" in str(err)


@nki.jit
def activation_reduce_triangle(a, bias, base):
    """exp(2 a + bias) and its row sum where i_p >= i_f and i_p >= 2: the
    other elements keep base, rows 0-1 of the sum keep -1."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x, b, r = nl.load(a), nl.load(bias), nl.load(base)
    sums = nl.full((rows, 1), -1.0, nl.float32)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    r[...] = nisa.activation(nl.exp, x, bias=b, scale=2.0, reduce_op=nl.add, reduce_res=sums,
                             mask=(i_p >= i_f) & (i_p >= 2))
    nl.store(out[:, 0:cols], r)
    nl.store(out[:, cols:cols + 1], sums)
    return out


def test_activation_with_reduce_under_a_triangle():
    rows, cols = 8, 6
    a, bias, base = rand(rows, cols, seed=13), rand(rows, 1, seed=14), rand(rows, cols, seed=15)
    got = run(activation_reduce_triangle, a, bias, base)
    p, f = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    keep = (p >= f) & (p >= 2)
    act = torch.exp(2 * a + bias)
    torch.testing.assert_close(got[:, :cols], torch.where(keep, act, base))
    sums = torch.where(keep, act, 0.0).sum(1)
    sums[:2] = -1.0
    torch.testing.assert_close(got[:, cols], sums)


def test_index_expressions_on_block_dims_are_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((2, nl.par_dim(4), 8), dtype=a.dtype, buffer=nl.sbuf)
        buf[0] = nl.load(a)
        i_b = nl.arange(2)[:, None, None]
        nl.store(out, buf[i_b, 0:4, 0:8])
        return out

    err = expect_rule("index", nki.simulate_kernel, k, np.zeros((4, 8), np.float32))
    assert "separate tile" in str(err)


# ---- what the published flash-attention kernel also needs ------------------------

@nki.jit
def numpy_ops_and_psum_select(a, b):
    """nisa.activation with a NumPy function as op (the reference's activation
    table: np.exp, np.tanh...), and affine_select straight from a matmul's
    PSUM tile (moved to SBUF first)."""
    out = nl.ndarray((2, 8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(out[0], nisa.activation(np.tanh, x, bias=None, scale=0.5))
    q_pos = nl.arange(8)[:, None]
    k_pos = nl.arange(8)[None, :]
    scores = nl.matmul(x, y, transpose_x=True)
    nl.store(out[1], nisa.affine_select(pred=(q_pos >= k_pos), on_true_tile=scores,
                                        on_false_value=-9984.0, dtype=nl.float32))
    return out


def test_numpy_activation_ops_and_a_select_from_psum():
    a, b = rand(8, 8, seed=16), rand(8, 8, seed=17)
    got = run(numpy_ops_and_psum_select, a, b)
    torch.testing.assert_close(got[0], torch.tanh(0.5 * a))
    want = torch.where(torch.ones(8, 8, dtype=torch.bool).tril(), a.T @ b, torch.tensor(-9984.0))
    torch.testing.assert_close(got[1], want, atol=1e-5, rtol=1e-5)


def test_a_numpy_function_outside_the_activation_table_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.activation(np.abs, nl.load(a)))
        return out

    err = expect_rule("operand", nki.simulate_kernel, k, np.zeros((4, 4), np.float32))
    assert "np.exp" in str(err)


@nki.jit
def int_and_bf16_reductions(a, b):
    """Triangular max / min of an int32 tile (identity: the dtype's extremes)
    and a bfloat16 row sum."""
    rows, cols = a.shape
    out = nl.ndarray((rows, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b, dtype=nl.bfloat16)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    r = nl.ndarray((rows, 3), nl.float32, buffer=nl.sbuf)
    r[:, 0:1] = nl.max(x, axis=1, keepdims=True, mask=(i_p >= i_f))
    r[:, 1:2] = nl.min(x, axis=1, keepdims=True, mask=(i_p >= i_f))
    r[:, 2:3] = nl.sum(y, axis=1, keepdims=True, mask=(i_p + 2 >= i_f), dtype=nl.float32)
    nl.store(out, r)
    return out


def test_triangular_reductions_of_int32_and_bfloat16_tiles():
    a = torch.randint(-1000, 1000, (8, 8), generator=torch.Generator().manual_seed(18),
                      dtype=torch.int32)
    b = rand(8, 8, seed=19).bfloat16().float()
    got = run(int_and_bf16_reductions, a, b)
    p, f = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    big = torch.iinfo(torch.int32)
    want_max = torch.where(p >= f, a, big.min).amax(1).float()
    want_min = torch.where(p >= f, a, big.max).amin(1).float()
    want_sum = torch.where(p + 2 >= f, b, 0.0).sum(1)
    torch.testing.assert_close(got[:, 0], want_max)
    torch.testing.assert_close(got[:, 1], want_min)
    torch.testing.assert_close(got[:, 2], want_sum)


@nki.jit
def isa_calls_under_bool_masks(a, base):
    """The nisa calls of the published flash attention under bool masks, and
    an activation with reduce whose mask starts at row 2 (the rows above
    keep their reduce_res)."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols + 2), dtype=nl.float32, buffer=nl.shared_hbm)
    x, r = nl.load(a), nl.load(base)
    t = nl.ndarray((rows, cols), nl.float32, buffer=nl.psum)
    t[...] = nl.copy(r)
    for step in nl.affine_range(2):
        t[...] = nisa.nc_transpose(x, mask=(step == 1))
    mx = nl.full((rows, 1), 7.0, nl.float32)
    mx[...] = nisa.tensor_reduce(np.max, x, axis=(1,), keepdims=True, mask=False)
    sums = nl.full((rows, 1), -1.0, nl.float32)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    nisa.activation(np.exp, x, reduce_op=nl.add, reduce_res=sums, mask=(i_p >= 2))
    res = nl.ndarray((rows, cols + 2), nl.float32, buffer=nl.sbuf)
    res[:, 0:cols] = nl.copy(t)
    res[:, cols:cols + 1] = mx
    res[:, cols + 1:cols + 2] = sums
    nl.store(out, res)
    return out


def test_isa_calls_under_bool_masks_and_a_reduce_below_row_0():
    a, base = rand(8, 8, seed=20), rand(8, 8, seed=21)
    got = run(isa_calls_under_bool_masks, a, base)
    torch.testing.assert_close(got[:, :8], a.T)
    torch.testing.assert_close(got[:, 8], torch.full((8,), 7.0))
    sums = a.exp().sum(1)
    sums[:2] = -1.0
    torch.testing.assert_close(got[:, 9], sums)
