"""The legacy neuronxcc.nki dialect: kernels written as AWS's samples write them, run
unmodified after torchneuron.nki.legacy.install(), checked against PyTorch CPU."""

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


# ---- kernels, in the legacy style ---------------------------------------------

@nki.jit
def add_grid(a, b):
    """Tensor add over a 2-d tile grid: programs split the rows, tails masked."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    per_program = (rows + nl.num_programs(0) - 1) // nl.num_programs(0)
    row0 = nl.program_id(0) * per_program
    i_p, i_f = nl.mgrid[0:128, 0:256]
    for r in nl.affine_range((per_program + 127) // 128):
        for c in nl.affine_range((cols + 255) // 256):
            rr, cc = row0 + r * 128 + i_p, c * 256 + i_f
            m = (rr < rows) & (rr < row0 + per_program) & (cc < cols)
            x = nl.load(a[rr, cc], mask=m)
            y = nl.load(b[rr, cc], mask=m)
            nl.store(out[rr, cc], value=nl.add(x, y, mask=m), mask=m)
    return out


@nki.jit
def transpose_by_index(a):
    """out[j, i] = a[i, j]: the load reads a with swapped index expressions."""
    n, m = a.shape
    out = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(m)[:, None]
    i_f = nl.arange(n)[None, :]
    tile = nl.load(a[i_f, i_p])  # tile[p, f] = a[f, p]
    out[i_p, i_f] = tile
    return out


@nki.jit
def transpose_tensor_engine(a):
    n, m = a.shape
    out = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.transpose(nl.load(a)))
    return out


@nki.jit
def matmul_nc(lhsT, rhs):
    """out = lhsT.T @ rhs with PSUM accumulation over K tiles (nisa.nc_matmul)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    i_k = nl.arange(128)[:, None]
    i_m = nl.arange(128)[None, :]
    i_n = nl.arange(512)[None, :]
    i_out = nl.arange(128)[:, None]
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.load(lhsT[k * 128 + i_k, m * 128 + i_m])
                rhs_tile = nl.load(rhs[k * 128 + i_k, n * 512 + i_n])
                acc += nisa.nc_matmul(lhsT_tile, rhs_tile)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[m * 128 + i_out, n * 512 + i_n], value=res)
    return out


@nki.jit
def matmul_nl(a, b):
    """out = a @ b with nl.matmul(transpose_x=True) and block-dim SBUF tiles."""
    M, K = a.shape
    _, N = b.shape
    out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    kt = K // 128
    b_tiles = nl.ndarray((kt, nl.par_dim(128), N), dtype=b.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(kt):
        b_tiles[k] = nl.load(b[k * 128:(k + 1) * 128, :])
    for m in nl.affine_range(M // 128):
        acc = nl.zeros((nl.par_dim(128), N), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(kt):
            aT = nl.load_transpose2d(a[m * 128:(m + 1) * 128, k * 128:(k + 1) * 128])
            acc += nl.matmul(aT, b_tiles[k], transpose_x=True)
        nl.store(out[m * 128:(m + 1) * 128, :], value=acc)
    return out


@nki.jit
def softmax_rows(x):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        m = t * 128 + i_p < rows
        tile = nl.load(x[t * 128 + i_p, i_f], mask=m)
        neg_max = nisa.tensor_reduce(nl.max, tile, axis=(1,), negate=True, mask=m)
        e = nisa.activation(op=nl.exp, data=tile, bias=neg_max, mask=m)
        total = nl.sum(e, axis=1, mask=m)
        res = e * nl.reciprocal(total, mask=m)
        nl.store(out[t * 128 + i_p, i_f], value=res, mask=m)
    return out


@nki.jit
def layer_norm(x, gamma, beta, eps):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(rows)[:, None]
    i_f = nl.arange(cols)[None, :]
    i_0 = nl.arange(1)[:, None]
    g = nl.broadcast_to(nl.load(gamma.reshape((1, cols))[i_0, i_f]), (rows, cols))
    bt = nl.broadcast_to(nl.load(beta.reshape((1, cols))[i_0, i_f]), (rows, cols))
    tile = nl.load(x[i_p, i_f])
    mean = nl.mean(tile, axis=1)
    centred = tile - mean
    var = nl.mean(centred * centred, axis=1)
    inv = nl.rsqrt(var + eps)
    nl.store(out[i_p, i_f], value=centred * inv * g + bt)
    return out


@nki.jit
def avg_pool2(x):
    """2x2 average pooling of x[C, H, W] with a 3-axis mgrid."""
    C, H, W = x.shape
    out = nl.ndarray((C, H // 2, W // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    i_c, i_h, i_w = nl.mgrid[0:C, 0:H // 2, 0:W // 2]
    acc = nl.zeros((C, H // 2, W // 2), nl.float32, buffer=nl.sbuf)
    for dh in nl.static_range(2):
        for dw in nl.static_range(2):
            acc += nl.load(x[i_c, 2 * i_h + dh, 2 * i_w + dw])
    nl.store(out[i_c, i_h, i_w], value=acc * 0.25)
    return out


@nki.jit
def causal_fill(x):
    """Keeps x where column <= row, else -1e4 (affine_select on i_p >= i_f)."""
    n, m = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:n, 0:m]
    tile = nl.load(x[i_p, i_f])
    res = nisa.affine_select(i_p - i_f >= 0, tile, -1e4)
    positions = nisa.iota(i_p * m + i_f, dtype=nl.float32)
    nl.store(out[i_p, i_f], value=res + positions * 0.0)
    return out


@nki.jit
def layer_norm_bn_stats(x, eps):
    """Row layer norm (no affine) with bn_stats / bn_aggr over 512-wide chunks."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(rows)[:, None]
    i_f = nl.arange(cols)[None, :]
    i_c = nl.arange(512)[None, :]
    tile = nl.load(x[i_p, i_f])
    chunks = (cols + 511) // 512
    stats = nl.ndarray((rows, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        stats[i_p, 6 * c + nl.arange(6)[None, :]] = nisa.bn_stats(
            tile[i_p, c * 512 + i_c], mask=(c * 512 + i_c < cols))
    mean_var = nisa.bn_aggr(stats)
    rstd = nl.rsqrt(mean_var[i_p, 1] + eps)
    nl.store(out[i_p, i_f], value=(tile - mean_var[i_p, 0]) * rstd)
    return out


@nki.jit
def rms_norm_matmul(x, w, eps):
    """(x / rms(x)) @ w for x [128, K], w [K, N]: the norm feeds the Tensor engine."""
    M, K = x.shape
    _, N = w.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    i_m, i_k = nl.mgrid[0:M, 0:K]
    xt = nl.load(x[i_m, i_k])
    inv = nl.rsqrt(nl.sum(xt * xt, axis=1) * (1.0 / K) + eps)
    xn = xt * inv
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    i_kp = nl.arange(128)[:, None]
    i_n = nl.arange(N)[None, :]
    for k in nl.affine_range(K // 128):
        xnT = nl.copy(nisa.nc_transpose(xn[i_m, k * 128 + nl.arange(128)[None, :]]))
        acc += nisa.nc_matmul(xnT, nl.load(w[k * 128 + i_kp, i_n]))
    nl.store(out[i_m, nl.arange(N)[None, :]], value=acc)
    return out


# ---- tests --------------------------------------------------------------------

def test_install_gives_the_modules():
    import sys

    assert sys.modules["neuronxcc.nki"] is legacy
    from neuronxcc import nki as again
    assert again is nki and nki.language is nl and nki.isa is nisa
    assert legacy.install()  # idempotent


def test_install_never_shadows_a_real_package(monkeypatch):
    import importlib.util
    import sys

    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("neuronxcc")}
    try:
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
        assert legacy.install() is False
        assert "neuronxcc" not in sys.modules
    finally:
        sys.modules.update(saved)


@pytest.mark.parametrize("shape,grid", [((300, 520), 1), ((256, 256), 2), ((130, 7), 2)])
def test_add_grid(shape, grid):
    a, b = rand(*shape, seed=1), rand(*shape, seed=2)
    got = add_grid[grid](a.to("neuron"), b.to("neuron")).cpu()
    torch.testing.assert_close(got, a + b, rtol=0, atol=0)


def test_transpose_by_index_and_tensor_engine():
    a = rand(96, 40)
    torch.testing.assert_close(transpose_by_index(a.to("neuron")).cpu(), a.T.contiguous(),
                               rtol=0, atol=0)
    torch.testing.assert_close(transpose_tensor_engine(a.to("neuron")).cpu(), a.T.contiguous(),
                               rtol=0, atol=0)


def test_tiled_matmul_nc_matmul():
    lhsT, rhs = rand(256, 256, seed=3), rand(256, 1024, seed=4)
    got = matmul_nc(lhsT.to("neuron"), rhs.to("neuron")).cpu()
    torch.testing.assert_close(got, lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_matmul_nl_block_dims_bf16():
    a = rand(128, 256, seed=5).to(torch.bfloat16)
    b = rand(256, 384, seed=6).to(torch.bfloat16)
    got = matmul_nl(a.to("neuron"), b.to("neuron")).cpu()
    ref = (a.float() @ b.float()).to(torch.bfloat16)
    torch.testing.assert_close(got.float(), ref.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("rows", [128, 200])
def test_softmax(rows):
    x = rand(rows, 96, seed=7)
    got = softmax_rows(x.to("neuron")).cpu()
    torch.testing.assert_close(got, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_layer_norm():
    x, g, b = rand(64, 48, seed=8), rand(48, seed=9), rand(48, seed=10)
    got = layer_norm(x.to("neuron"), g.to("neuron"), b.to("neuron"), 1e-5).cpu()
    ref = torch.nn.functional.layer_norm(x, (48,), g, b, eps=1e-5)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cols", [300, 1100])
def test_layer_norm_bn_stats(cols):
    x = rand(96, cols, seed=13) * 2 + 0.5
    got = layer_norm_bn_stats(x.to("neuron"), 1e-5).cpu()
    torch.testing.assert_close(got, torch.nn.functional.layer_norm(x, (cols,), eps=1e-5),
                               rtol=1e-4, atol=1e-4)


def test_rms_norm_fused_with_matmul():
    x, w = rand(128, 256, seed=14), rand(256, 192, seed=15)
    got = rms_norm_matmul(x.to("neuron"), w.to("neuron"), 1e-6).cpu()
    ref = (x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)) @ w
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


def test_avg_pool_mgrid_3d():
    x = rand(16, 8, 12, seed=11)
    got = avg_pool2(x.to("neuron")).cpu()
    torch.testing.assert_close(got, torch.nn.functional.avg_pool2d(x[None], 2)[0],
                               rtol=1e-6, atol=1e-6)


def test_affine_select_and_iota():
    x = rand(32, 48, seed=12)
    got = causal_fill(x.to("neuron")).cpu()
    ref = torch.where(torch.ones(32, 48, dtype=torch.bool).tril(), x, torch.tensor(-1e4))
    torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_baremetal_and_simulate_kernel_on_numpy():
    a, b = rand(130, 7).numpy(), rand(130, 7, seed=3).numpy()
    np.testing.assert_array_equal(nki.baremetal(add_grid)(a, b), a + b)
    np.testing.assert_array_equal(nki.simulate_kernel(add_grid, a, b), a + b)


def test_benchmark_latency_percentiles():
    lhsT, rhs = rand(256, 128).numpy(), rand(256, 512, seed=1).numpy()
    bench = nki.benchmark(warmup=2, iters=5)(matmul_nc)
    got = bench(lhsT, rhs)
    np.testing.assert_allclose(got, lhsT.T @ rhs, rtol=1e-4, atol=1e-4)
    latency = bench.benchmark_result.nc_latency
    p50, p99 = latency.get_latency_percentile(50), latency.get_latency_percentile(99)
    assert 0 < p50 == p99 == bench.benchmark_result.estimate.latency_us
    with pytest.raises(ValueError, match="percentile"):
        latency.get_latency_percentile(101)


# ---- rules ------------------------------------------------------------------------

def test_unmasked_tail_is_out_of_bounds():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:4]
        nl.store(out[i_p, i_f], value=nl.load(a[i_p, i_f]))
        return out

    err = expect_rule("out_of_bounds", nki.simulate_kernel, k, np.zeros((100, 4), np.float32))
    assert "mask it" in str(err)


@nki.jit
def lower_triangle_exp(a, base, shift):
    """out = base, then out[p, f] = exp(a[p, f]) where p + shift >= f and f < 6:
    a triangular mask (a comparison over two axes) with a box bound."""
    rows, cols = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:rows, 0:cols]
    nl.store(out[i_p, i_f], value=nl.load(base[i_p, i_f]))
    tri = (i_p + shift >= i_f) & (i_f < 6)
    x = nl.load(a[i_p, i_f], mask=tri)
    nl.store(out[i_p, i_f], value=nl.exp(x, mask=tri), mask=tri)
    return out


@pytest.mark.parametrize("shape,shift", [((8, 8), 0), ((16, 12), -3), ((5, 9), 2)])
def test_a_triangular_mask_writes_only_its_elements(shape, shift):
    a = torch.randn(shape)
    base = torch.full(shape, -7.0)
    got = torch.from_numpy(nki.simulate_kernel(lower_triangle_exp, a.numpy(), base.numpy(),
                                               shift))
    p, f = torch.meshgrid(torch.arange(shape[0]), torch.arange(shape[1]), indexing="ij")
    keep = (p + shift >= f) & (f < 6)
    torch.testing.assert_close(got, torch.where(keep, a.exp(), base))


def test_a_mask_over_two_axes_is_refused_where_no_box_around_it_will_do():
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.load(a[i_p, i_f])
        nl.store(out, value=nisa.max8(t, mask=(i_p < i_f)))
        return out

    expect_rule("mask", nki.simulate_kernel, k, np.zeros((8, 8), np.float32))


def test_non_affine_index_is_refused():
    @nki.jit
    def k(a):
        i_p, i_f = nl.mgrid[0:8, 0:8]
        nl.load(a[i_p, i_f // 2])

    expect_rule("index", nki.simulate_kernel, k, np.zeros((8, 8), np.float32))


def test_partition_dim_indexed_by_first_axis_only():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        nl.store(out, value=nl.copy(t[i_f, i_p]))
        return out

    expect_rule("index", nki.simulate_kernel, k, np.zeros((8, 8), np.float32))


def test_matmul_accumulate_into_partly_written_psum_is_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        acc[0:64, :] = nl.zeros((64, 128), nl.float32)
        t = nl.load(a)
        acc += nisa.nc_matmul(t, t)
        nl.store(out, value=acc)
        return out

    expect_rule("psum_accumulate", nki.simulate_kernel, k, np.zeros((128, 128), np.float32))


def test_legacy_gathers_bounds_and_shuffle():
    """local_gather and sequence_bounds return tiles; nc_stream_shuffle(src, dst, mask)
    writes dst in place."""

    @nki.jit
    def kernel(src, index, ids, wide):
        gathered = nl.ndarray((16, 8), dtype=src.dtype, buffer=nl.shared_hbm)
        bounds = nl.ndarray((1, 2, 8), dtype=ids.dtype, buffer=nl.shared_hbm)
        shuffled = nl.ndarray((32, 4), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(gathered, nisa.local_gather(nl.load(src), nl.load(index), 2, 4))
        nl.store(bounds, nisa.sequence_bounds(segment_ids=nl.load(ids)))
        t = nl.load(wide[0:32, 0:4])
        out = nl.ndarray((32, 4), dtype=src.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(t, out, [31 - i for i in range(32)])
        nl.store(shuffled, out)
        return gathered, bounds, shuffled

    src = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    index = np.array([[0, 6]] * 32, np.uint16)  # element offsets, E = 2
    ids = np.array([[1, 1, 2, 0, 3, 3, 3, 4]], np.float32)
    gathered, bounds, shuffled = nki.simulate_kernel(kernel, src[:16], index[:16], ids, src)
    # indices partition first: index[0, 0], index[1, 0], ... -> 0, 0, 0, 0 (first 4)
    np.testing.assert_array_equal(gathered, np.tile(src[:16, 0:2], (1, 4)))
    np.testing.assert_array_equal(bounds[0], [[0, 0, 2, 8, 4, 4, 4, 7], [2, 2, 3, -1, 7, 7, 7, 8]])
    np.testing.assert_array_equal(shuffled, src[0:32, 0:4][::-1])


def test_nc_matmul_double_row():
    """perf_mode=double_row through the legacy value-returning nc_matmul: fp8
    [K, 2, M] x [K, 2, N], exact small values, against torch."""
    @nki.jit
    def k(s_in, m_in):
        out = nl.ndarray((s_in.shape[2], m_in.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.load(s_in, dtype=nl.float8_e4m3)
        m = nl.load(m_in, dtype=nl.float8_e5m2)
        r = nisa.nc_matmul(s, m, perf_mode="double_row")
        nl.store(out, value=nl.copy(r, dtype=nl.float32))
        return out

    g = torch.Generator().manual_seed(5)
    s = torch.randint(-8, 9, (64, 2, 16), generator=g).float() * 0.25
    m = torch.randint(-8, 9, (64, 2, 96), generator=g).float() * 0.25
    torch.testing.assert_close(k(s, m), s.reshape(128, 16).T @ m.reshape(128, 96),
                               rtol=0, atol=0)
