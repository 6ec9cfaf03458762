"""Shape-family ops on neuron against PyTorch CPU: data movement (cat,
stack, flip, roll, repeat, tril/triu), factories (arange, range, linspace,
logspace, eye, full) and sorting (sort, argsort, msort, topk, kthvalue,
median, nanmedian, unique, unique_consecutive).

Every test runs with op tracking cleared and asserts afterwards that no op
went through the CPU fallback."""

import contextlib
import io
import os
import subprocess
import sys

import pytest
import torch

import torchneuron

DEV = "neuron"
ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NUMERIC_DTYPES = [d for d in ALL_DTYPES if d is not torch.bool]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def make(shape, dtype, low=-50, high=50, seed=0):
    """A CPU tensor of dtype with values in [low, high) (ties likely for narrow ranges)."""
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype is torch.uint8:
        low, high = max(low, 0), min(high, 256)
        low, high = (0, 100) if low >= high else (low, high)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def layouts(t):
    """(name, cpu view, neuron view) of t: contiguous, transposed, sliced."""
    n = t.to(DEV)
    out = [("contiguous", t, n)]
    if t.dim() >= 2:
        out.append(("transposed", t.transpose(0, -1), n.transpose(0, -1)))
    if t.dim() >= 1 and t.shape[-1] > 2:
        out.append(("sliced", t[..., ::2], n[..., ::2]))
    return out


def same(neuron, cpu):
    """Exact equality (dtype, shape and values; NaNs equal)."""
    got = neuron.cpu()
    assert got.dtype == cpu.dtype and got.shape == cpu.shape, (got.dtype, got.shape, cpu.dtype, cpu.shape)
    torch.testing.assert_close(got, cpu, rtol=0, atol=0, equal_nan=True)


def close(neuron, cpu):
    torch.testing.assert_close(neuron.cpu(), cpu, equal_nan=True)


# ---- cat and stack -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_matches_cpu_for_every_dtype_dim_and_layout(dtype, dim):
    a, b = make((4, 6), dtype, seed=1), make((4, 6), dtype, seed=2)
    for (_, ac, an), (_, bc, bn) in zip(layouts(a), layouts(b)):
        same(torch.cat([an, bn, an], dim), torch.cat([ac, bc, ac], dim))


def test_cat_of_many_inputs_spans_several_ops():
    parts = [make((3, i % 4, 2), torch.float32, seed=i) for i in range(23)]
    same(torch.cat([p.to(DEV) for p in parts], 1), torch.cat(parts, 1))


def test_cat_promotes_mixed_dtypes_like_cpu():
    parts = [make((2, 3), torch.int8), make((2, 3), torch.bool, seed=3),
             make((1, 3), torch.float16, seed=4), make((2, 3), torch.int64, seed=5)]
    same(torch.cat([p.to(DEV) for p in parts]), torch.cat(parts))
    ints = [make((2, 2), torch.uint8), make((2, 2), torch.int16, seed=6)]
    same(torch.cat([p.to(DEV) for p in ints], 1), torch.cat(ints, 1))


def test_cat_skips_legacy_empty_1d_inputs_and_handles_zero_size():
    a = make((2, 3), torch.float32)
    empty = torch.empty(0)
    same(torch.cat([a.to(DEV), empty.to(DEV), a.to(DEV)], 1), torch.cat([a, empty, a], 1))
    z = torch.empty(2, 0)
    same(torch.cat([z.to(DEV), a.to(DEV)], 1), torch.cat([z, a], 1))
    same(torch.cat([torch.empty(0, 3).to(DEV)] * 2), torch.cat([torch.empty(0, 3)] * 2))


def test_cat_out_casts_to_a_wider_out_and_resizes_it():
    a = make((3, 4), torch.float32)
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    torch.cat([a.to(DEV), a.to(DEV)], 0, out=out)
    same(out, torch.cat([a, a]).double())
    # A transposed out keeps its strides when its size already fits.
    out_t = torch.empty(4, 6, device=DEV).t()
    torch.cat([a.to(DEV), a.to(DEV)], 0, out=out_t)
    assert out_t.stride() == (1, 6)
    same(out_t, torch.cat([a, a]))


def test_cat_rejects_bad_inputs_with_cpus_messages():
    a = make((2, 3), torch.float32).to(DEV)
    with pytest.raises(TypeError, match="can't be cast to the desired output type"):
        torch.cat([a, a], out=torch.empty(4, 3, dtype=torch.int64, device=DEV))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([a, make((2, 4), torch.float32).to(DEV)], 0)
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        torch.cat([torch.tensor(1.0, device=DEV)])
    with pytest.raises(RuntimeError, match="same device|to be on"):
        torch.cat([a, make((2, 3), torch.float32)])
    with pytest.raises(RuntimeError, match="memory location"):
        torch.cat([a, a], out=torch.empty(0, device=DEV).set_(a.untyped_storage(), 0, (4, 3)))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack_runs_natively_through_cat(dim):
    a, b = make((3, 4), torch.float32), make((3, 4), torch.float32, seed=9)
    same(torch.stack([a.to(DEV), b.to(DEV), a.to(DEV)], dim), torch.stack([a, b, a], dim))
    same(torch.hstack([a.to(DEV), b.to(DEV)]), torch.hstack([a, b]))
    same(torch.vstack([a.to(DEV), b.to(DEV)]), torch.vstack([a, b]))


# ---- flip, roll, repeat ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dims", [[0], [1], [0, 1], [-1, 0], []])
def test_flip_matches_cpu(dtype, dims):
    t = make((3, 5), dtype)
    for _, c, n in layouts(t):
        same(torch.flip(n, dims), torch.flip(c, dims))
    same(torch.fliplr(t.to(DEV)), torch.fliplr(t))
    same(torch.flipud(t.to(DEV)), torch.flipud(t))


def test_flip_of_zero_size_and_0d_and_duplicate_dims():
    same(torch.flip(torch.empty(0, 3).to(DEV), [0, 1]), torch.flip(torch.empty(0, 3), [0, 1]))
    same(torch.flip(torch.tensor(2.5).to(DEV), [0]), torch.flip(torch.tensor(2.5), [0]))
    with pytest.raises(RuntimeError, match="appears multiple times|duplicate"):
        torch.flip(torch.ones(2, 2, device=DEV), [0, 0])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roll_matches_cpu_on_one_and_many_dims(dtype):
    t = make((3, 4, 5), dtype)
    for _, c, n in layouts(t):
        same(torch.roll(n, 2, 0), torch.roll(c, 2, 0))
        same(torch.roll(n, (-1, 7), (1, 2)), torch.roll(c, (-1, 7), (1, 2)))
        same(torch.roll(n, 4), torch.roll(c, 4))  # flattened


def test_roll_handles_more_than_four_dims_repeats_and_zero_shifts():
    t = make((2, 3, 2, 3, 2, 3), torch.float32)
    shifts, dims = (1, 2, -1, 4, 1, -2), (0, 1, 2, 3, 4, 5)
    same(torch.roll(t.to(DEV), shifts, dims), torch.roll(t, shifts, dims))
    same(torch.roll(t.to(DEV), (1, 1), (1, 1)), torch.roll(t, (1, 1), (1, 1)))
    same(torch.roll(t.to(DEV), (3, 0), (1, 2)), torch.roll(t, (3, 0), (1, 2)))
    same(torch.roll(torch.empty(0, 3).to(DEV), 1, 1), torch.roll(torch.empty(0, 3), 1, 1))
    with pytest.raises(RuntimeError, match="must align"):
        torch.roll(t.to(DEV), (1, 2), (0,))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.bfloat16, torch.float64])
def test_repeat_and_tile_run_natively(dtype):
    t = make((2, 3), dtype)
    for _, c, n in layouts(t):
        same(n.repeat(2, 1, 3), c.repeat(2, 1, 3))
        same(n.tile((2, 2)), c.tile((2, 2)))
    same(t.to(DEV).repeat(0, 2), t.repeat(0, 2))


# ---- tril and triu -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("diagonal", [-4, -1, 0, 2, 6])
def test_tril_triu_match_cpu(dtype, diagonal):
    t = make((2, 4, 5), dtype)
    for _, c, n in layouts(t):
        same(torch.tril(n, diagonal), torch.tril(c, diagonal))
        same(torch.triu(n, diagonal), torch.triu(c, diagonal))


def test_tril_triu_in_place_out_and_errors():
    t = make((5, 3), torch.float32)
    n = t.to(DEV)
    n.tril_(-1)
    same(n, t.tril(-1))
    n = t.to(DEV).t()
    n.triu_(1)
    same(n, t.t().triu(1))
    out = torch.empty(0, device=DEV)
    torch.triu(t.to(DEV), 0, out=out)
    same(out, t.triu())
    x = t.to(DEV)
    torch.tril(x, 0, out=x)
    same(x, t.tril())
    same(torch.tril(torch.empty(0, 4).to(DEV)), torch.tril(torch.empty(0, 4)))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device=DEV))


# ---- factories ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("args", [(10,), (2, 9), (-3, 17, 4), (5, -5, -1), (0, 1, 0.1), (-2.5, 3.7, 0.3),
                                  (1, 1000, 7)])
def test_arange_matches_cpu_size_dtype_and_values(dtype, args):
    try:
        want = torch.arange(*args, dtype=dtype)
    except (RuntimeError, ValueError) as e:
        with pytest.raises(type(e), match=str(e)[:20]):
            torch.arange(*args, dtype=dtype, device=DEV)
        return
    got = torch.arange(*args, dtype=dtype, device=DEV)
    (same if not dtype.is_floating_point else close)(got, want)


def test_arange_infers_dtype_and_rejects_bad_ranges():
    same(torch.arange(5, device=DEV), torch.arange(5))
    same(torch.arange(0, 2, 0.25, device=DEV), torch.arange(0, 2, 0.25))
    same(torch.arange(0.0, 3, device=DEV), torch.arange(0.0, 3))
    same(torch.arange(0, 3, 0.5, dtype=torch.int32, device=DEV), torch.arange(0, 3, 0.5, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 5, 0, device=DEV)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(0, 5, -1, device=DEV)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.arange(3, dtype=torch.bool, device=DEV)


def test_arange_out_fills_a_strided_or_multidim_out():
    out = torch.empty(20, device=DEV)[::2]
    torch.arange(10, out=out)
    same(out, torch.arange(10, dtype=torch.float32))
    out = torch.empty(2, 3, dtype=torch.int64, device=DEV)
    torch.arange(6, out=out)
    same(out, torch.arange(6).view(2, 3))
    out = torch.empty(3, dtype=torch.int16, device=DEV)
    torch.arange(1, 8, 2, out=out)
    same(out, torch.arange(1, 8, 2, dtype=torch.int16))


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_range_includes_the_end_like_cpu(dtype):
    with pytest.warns(UserWarning):
        got = torch.range(1, 9, 2, dtype=dtype, device=DEV)
    with pytest.warns(UserWarning):
        want = torch.range(1, 9, 2, dtype=dtype)
    same(got, want)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("args", [(0, 1, 7), (-3.3, 10.7, 100), (10, -5, 33), (2, 2, 5), (0, 100, 1), (0, 1, 0),
                                  (1, 75, 37)])
def test_linspace_matches_cpu(dtype, args):
    try:
        want = torch.linspace(*args, dtype=dtype)
    except RuntimeError:
        return  # values that do not fit dtype: CPU rejects them before any kernel
    got = torch.linspace(*args, dtype=dtype, device=DEV)
    (same if not dtype.is_floating_point else close)(got, want)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("args", [(0, 2, 5), (-1, 1, 9, 2.0), (0, 3, 1), (0, 1, 0), (1, 2, 4, 3.0)])
def test_logspace_matches_cpu(dtype, args):
    want = torch.logspace(*args, dtype=dtype)
    got = torch.logspace(*args, dtype=dtype, device=DEV)
    (same if not dtype.is_floating_point else close)(got, want)


def test_linspace_logspace_reject_bool_and_negative_steps():
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.linspace(0, 1, 3, dtype=torch.bool, device=DEV)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.logspace(0, 1, 3, dtype=torch.bool, device=DEV)
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.linspace(0, 1, -1, device=DEV)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_eye_full_zeros_ones_match_cpu(dtype):
    same(torch.eye(4, dtype=dtype, device=DEV), torch.eye(4, dtype=dtype))
    same(torch.eye(3, 5, dtype=dtype, device=DEV), torch.eye(3, 5, dtype=dtype))
    same(torch.eye(0, 2, dtype=dtype, device=DEV), torch.eye(0, 2, dtype=dtype))
    same(torch.full((2, 3), 1, dtype=dtype, device=DEV), torch.full((2, 3), 1, dtype=dtype))
    same(torch.zeros(3, 2, dtype=dtype, device=DEV), torch.zeros(3, 2, dtype=dtype))
    same(torch.ones(2, dtype=dtype, device=DEV), torch.ones(2, dtype=dtype))
    t = make((2, 2), dtype).to(DEV)
    same(torch.full_like(t, 0), torch.full((2, 2), 0, dtype=dtype))
    out = torch.empty(7, dtype=dtype, device=DEV)
    torch.eye(2, 3, out=out)
    same(out, torch.eye(2, 3, dtype=dtype))


def test_full_with_float_value_infers_default_dtype_and_eye_rejects_negative():
    same(torch.full((3,), 2.5, device=DEV), torch.full((3,), 2.5))
    same(torch.full((2,), 7, device=DEV), torch.full((2,), 7))
    with pytest.raises(RuntimeError, match="must be greater or equal to 0"):
        torch.eye(-1, device=DEV)


# ---- sort, argsort, msort ----------------------------------------------------------------


def with_specials(t):
    """t (float) with NaN, infinities and signed zeros mixed in."""
    t = t.clone()
    flat = t.view(-1)
    specials = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, float("nan"), -0.0]
    for i, v in enumerate(specials):
        if i * 3 < flat.numel():
            flat[i * 3] = v
    return t


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_matches_cpu_values_and_indices(dtype, descending):
    t = make((6, 40), dtype, low=-5, high=5)
    if dtype.is_floating_point:
        t = with_specials(t)
    for _, c, n in layouts(t):
        for dim in range(c.dim()):
            v, i = torch.sort(n, dim=dim, descending=descending, stable=True)
            vc, ic = torch.sort(c, dim=dim, descending=descending, stable=True)
            same(v, vc)
            same(i, ic)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.float32, torch.float64])
def test_default_sort_gives_cpus_values_and_consistent_indices(dtype):
    t = make((5, 30), dtype, low=-3, high=3)
    for descending in (False, True):
        v, i = torch.sort(t.to(DEV), descending=descending)
        vc, _ = torch.sort(t, descending=descending)
        same(v, vc)
        same(t.gather(1, i.cpu()), vc)
        assert torch.equal(i.sort(1).values.cpu(), torch.arange(30).expand(5, 30))


def test_sort_places_nan_last_ascending_and_first_descending():
    t = torch.tensor([3.0, float("nan"), -1.0, float("inf"), float("nan"), -float("inf"), -0.0, 0.0])
    for dtype in FLOAT_DTYPES:
        x = t.to(dtype)
        for descending in (False, True):
            v, i = torch.sort(x.to(DEV), descending=descending, stable=True)
            vc, ic = torch.sort(x, descending=descending, stable=True)
            same(v, vc)
            same(i, ic)
    # -0.0 and 0.0 are equal: a stable sort keeps their order, signs intact.
    v, _ = torch.sort(torch.tensor([0.0, -0.0, 0.0, -0.0]).to(DEV), stable=True)
    assert torch.equal(torch.signbit(v.cpu()), torch.tensor([False, True, False, True]))


@pytest.mark.parametrize("n", [1, 47, 5000, 70000, 300000])
def test_sort_of_long_rows_matches_cpu(n):
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        t = make((n,), dtype, low=-1000, high=1000, seed=n)
        v, i = torch.sort(t.to(DEV), stable=True)
        vc, ic = torch.sort(t, stable=True)
        same(v, vc)
        same(i, ic)


def test_sort_of_zero_size_0d_out_and_aliasing():
    same(torch.sort(torch.empty(0, 3).to(DEV), 1)[0], torch.empty(0, 3))
    v, i = torch.sort(torch.tensor(4.0).to(DEV))
    same(v, torch.tensor(4.0))
    same(i, torch.tensor(0))
    t = make((4, 9), torch.float32)
    x = t.to(DEV)
    idx = torch.empty(0, dtype=torch.int64, device=DEV)
    torch.sort(x, 1, out=(x, idx))  # values written over the input
    vc, ic = torch.sort(t, dim=1, stable=True)
    same(x, vc)
    same(idx, ic)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sort(x, 2)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.float32, torch.bfloat16])
def test_argsort_and_msort_run_natively(dtype):
    t = make((7, 9), dtype, low=-4, high=4)
    same(torch.argsort(t.to(DEV), dim=0, stable=True), torch.argsort(t, dim=0, stable=True))
    same(torch.argsort(t.to(DEV), dim=1, descending=True, stable=True),
         torch.argsort(t, dim=1, descending=True, stable=True))
    same(torch.msort(t.to(DEV)), torch.msort(t))


# ---- topk, kthvalue, median ----------------------------------------------------------------


def distinct(shape, dtype, seed=0):
    """Values without ties (a permutation), so that indices are determined."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n, generator=g) - n // 2).to(dtype).view(shape)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_cpu_on_distinct_values(dtype, largest):
    t = distinct((6, 40), dtype) if dtype not in (torch.uint8, torch.int8) else distinct((6, 20), torch.int64).to(dtype)
    for _, c, n in layouts(t):
        for dim in range(c.dim()):
            for k in (0, 1, 3, c.shape[dim]):
                v, i = torch.topk(n, k, dim, largest)
                vc, ic = torch.topk(c, k, dim, largest)
                same(v, vc)
                same(i, ic)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int32])
def test_topk_with_ties_and_nan_gives_cpus_values_and_consistent_indices(dtype):
    t = make((4, 50), dtype, low=-3, high=3)
    if dtype.is_floating_point:
        t = with_specials(t)
    for largest in (True, False):
        v, i = torch.topk(t.to(DEV), 7, 1, largest)
        vc, _ = torch.topk(t, 7, 1, largest)
        same(v, vc)
        same(t.gather(1, i.cpu()), vc)


def test_topk_out_long_rows_and_errors():
    t = make((100000,), torch.float32, seed=5)
    v, i = torch.topk(t.to(DEV), 50)
    vc, ic = torch.topk(t, 50)
    same(v, vc)
    same(t[i.cpu()], vc)
    vo, io = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.int64, device=DEV)
    torch.topk(t.to(DEV), 3, largest=False, out=(vo, io))
    same(vo, torch.topk(t, 3, largest=False).values)
    same(torch.topk(torch.tensor(3.0).to(DEV), 1)[0], torch.tensor(3.0))
    with pytest.raises(RuntimeError, match="out of range"):
        torch.topk(torch.ones(3, device=DEV), 4)
    with pytest.raises(RuntimeError, match="bool"):
        torch.topk(torch.ones(3, dtype=torch.bool, device=DEV), 1)


def check_selection(values, indices, cpu_values, t, dim, keepdim):
    """values match CPU's; indices point at elements equal to them."""
    same(values, cpu_values)
    idx = indices.cpu() if keepdim else indices.cpu().unsqueeze(dim)
    picked = t.gather(dim, idx)
    picked = picked if keepdim else picked.squeeze(dim)
    same(picked, cpu_values)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_median_nanmedian_match_cpu(dtype, keepdim):
    t = make((5, 12), dtype, low=-4, high=4)
    if dtype.is_floating_point:
        t = with_specials(t)
    for _, c, n in layouts(t):
        for dim in range(c.dim()):
            for k in (1, 3, c.shape[dim]):
                v, i = torch.kthvalue(n, k, dim, keepdim)
                check_selection(v, i, torch.kthvalue(c, k, dim, keepdim).values, c, dim, keepdim)
            v, i = torch.median(n, dim, keepdim)
            check_selection(v, i, torch.median(c, dim, keepdim).values, c, dim, keepdim)
            v, i = torch.nanmedian(n, dim, keepdim)
            check_selection(v, i, torch.nanmedian(c, dim, keepdim).values, c, dim, keepdim)
        same(torch.median(n), torch.median(c))
        same(torch.nanmedian(n), torch.nanmedian(c))


def test_median_of_nan_rows_empty_tensors_and_errors():
    t = torch.tensor([[1.0, float("nan"), 2.0, float("nan")], [float("nan")] * 4, [3.0, 1.0, 2.0, 0.0]])
    v, i = torch.median(t.to(DEV), 1)
    vc, ic = torch.median(t, 1)
    same(v, vc)
    same(i, ic)  # the first NaN of a row
    v, i = torch.nanmedian(t.to(DEV), 1)
    check_selection(v, i, torch.nanmedian(t, 1).values, t, 1, False)
    same(torch.median(torch.empty(0).to(DEV)), torch.median(torch.empty(0)))
    same(torch.median(torch.tensor(2.0).to(DEV), 0)[0], torch.tensor(2.0))
    with pytest.raises(IndexError, match="non-zero size"):
        torch.median(torch.empty(0, 3, device=DEV), 0)
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.kthvalue(torch.ones(3, device=DEV), 4)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.median(torch.ones(3, dtype=torch.bool, device=DEV))


# ---- unique ------------------------------------------------------------------------------


def check_unique(got, want):
    for g, w in zip(got, want):
        same(g, w)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unique_matches_cpu_with_inverse_and_counts(dtype):
    t = make((6, 7), dtype, low=-5, high=5)
    for _, c, n in layouts(t):
        for sorted_ in (True, False):
            check_unique(torch.unique(n, sorted=sorted_, return_inverse=True, return_counts=True),
                         torch.unique(c, sorted=sorted_, return_inverse=True, return_counts=True))
        same(torch.unique(n), torch.unique(c))
        check_unique(torch.unique(n, return_counts=True), torch.unique(c, return_counts=True))


def test_unique_keeps_every_nan_and_merges_signed_zeros():
    t = torch.tensor([float("nan"), 1.0, -0.0, 0.0, 1.0, float("nan")])
    v, inv, cnt = torch.unique(t.to(DEV), return_inverse=True, return_counts=True)
    vc, invc, cntc = torch.unique(t, return_inverse=True, return_counts=True)
    same(v, vc)
    same(cnt, cntc)
    assert v.cpu()[inv.cpu()].isnan().equal(t.isnan())  # NaNs map to NaN runs


def test_unique_of_empty_0d_and_large_inputs():
    check_unique(torch.unique(torch.empty(0).to(DEV), return_inverse=True, return_counts=True),
                 torch.unique(torch.empty(0), return_inverse=True, return_counts=True))
    check_unique(torch.unique(torch.tensor(3).to(DEV), return_inverse=True, return_counts=True),
                 torch.unique(torch.tensor(3), return_inverse=True, return_counts=True))
    t = make((200000,), torch.int64, low=0, high=3000, seed=7)
    check_unique(torch.unique(t.to(DEV), return_inverse=True, return_counts=True),
                 torch.unique(t, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unique_consecutive_matches_cpu(dtype):
    t = make((40,), dtype, low=0, high=3).repeat_interleave(2)
    for _, c, n in layouts(t.view(8, 10)):
        check_unique(torch.unique_consecutive(n, return_inverse=True, return_counts=True),
                     torch.unique_consecutive(c, return_inverse=True, return_counts=True))
        same(torch.unique_consecutive(n), torch.unique_consecutive(c))


# ---- determinism across thread counts --------------------------------------------------------

_THREADS_SCRIPT = r"""
import hashlib, torch, torchneuron
g = torch.Generator().manual_seed(0)
x = torch.randint(-500, 500, (600000,), generator=g).float()
x[::97] = float("nan")
n = x.to("neuron")
outs = [*torch.sort(n, stable=True), *torch.sort(n.view(600, 1000), 0), torch.topk(n, 1000)[1],
        *torch.unique(n.long(), return_inverse=True, return_counts=True),
        torch.cat([n.view(600, 1000)] * 3, 1), torch.linspace(-3, 7, 100001, device="neuron"),
        torch.arange(0, 1, 1e-5, device="neuron"), torch.median(n.view(1000, 600), 1)[1]]
h = hashlib.sha256()
for o in outs:
    h.update(o.cpu().contiguous().numpy().tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_the_thread_count():
    procs = [subprocess.Popen([sys.executable, "-c", _THREADS_SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, TORCHNEURON_NUM_THREADS=threads))
             for threads in ("1", "3")]
    digests = set()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        digests.add(out.strip())
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(_THREADS_SCRIPT, {})
    digests.add(here.getvalue().strip())
    assert len(digests) == 1


# ---- unique along a dim -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_dim_matches_cpu(dtype, dim):
    base = make((5, 3), dtype, low=0, high=2, seed=3)
    t = torch.cat([base, base.flip(0), base[:2]]).view(4, 3, 3)  # repeated slices
    for _, c, n in layouts(t):
        check_unique(torch.unique(n, dim=dim, return_inverse=True, return_counts=True),
                     torch.unique(c, dim=dim, return_inverse=True, return_counts=True))
        check_unique(torch.unique_consecutive(n, dim=dim, return_inverse=True, return_counts=True),
                     torch.unique_consecutive(c, dim=dim, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_unique_dim_with_nan_rows_matches_cpu(dtype):
    """A NaN orders neither way in the CPU's row sort and equals nothing: the
    rows come out in the order of its std::sort (insertion sort up to 16
    rows, introsort beyond), which the device reproduces."""
    nan = float("nan")
    small = torch.tensor([[nan, 1.], [0, 1], [nan, 1], [0, 1], [1, nan], [0, 0]])
    column = torch.tensor([[nan], [1.], [nan], [0.], [1.], [nan], [-1.]])
    g = torch.Generator().manual_seed(5)
    large = torch.randint(0, 3, (300, 3), generator=g).float()  # introsort, then heap sort past its depth
    large[torch.randint(0, 300, (40,), generator=g), torch.randint(0, 3, (40,), generator=g)] = nan
    for t in (small, column, large, large[:40], large[:17]):
        t = t.to(dtype)
        for dim in (0, 1) if t.shape[1] > 1 else (0,):
            check_unique(torch.unique(t.to(DEV), dim=dim, return_inverse=True, return_counts=True),
                         torch.unique(t, dim=dim, return_inverse=True, return_counts=True))
    # a column-major input: the rows are read through their strides
    t = small.t().contiguous().t().to(dtype)
    check_unique(torch.unique(t.to(DEV), dim=0, return_inverse=True, return_counts=True),
                 torch.unique(t, dim=0, return_inverse=True, return_counts=True))


def test_unique_dim_of_zero_size_inputs_and_long_rows():
    check_unique(torch.unique(torch.empty(0, 3).to(DEV), dim=0, return_inverse=True, return_counts=True),
                 torch.unique(torch.empty(0, 3), dim=0, return_inverse=True, return_counts=True))
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        torch.unique(torch.empty(2, 0).to(DEV), dim=0)
    t = make((3000, 4), torch.int64, low=0, high=3, seed=11)
    check_unique(torch.unique(t.to(DEV), dim=0, return_inverse=True, return_counts=True),
                 torch.unique(t, dim=0, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("args", [(4, 4), (3, 5, 1), (5, 3, -2), (0, 3), (3, 3, 10), (3, 3, -10), (1, 7, 3)])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_tril_triu_indices_match_cpu(args, dtype):
    same(torch.tril_indices(*args, dtype=dtype, device=DEV), torch.tril_indices(*args, dtype=dtype))
    same(torch.triu_indices(*args, dtype=dtype, device=DEV), torch.triu_indices(*args, dtype=dtype))


def test_tril_indices_rejects_float_dtypes_and_negative_sizes():
    with pytest.raises(NotImplementedError, match="Float"):
        torch.tril_indices(3, 3, dtype=torch.float32, device=DEV)
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        torch.triu_indices(-1, 3, device=DEV)


def test_cat_and_sort_keep_channels_last_layouts_like_cpu():
    x = make((2, 3, 4, 5), torch.float32).to(memory_format=torch.channels_last)
    y = make((2, 3, 4, 5), torch.float32, seed=4).to(memory_format=torch.channels_last)
    for dim in range(4):
        got, want = torch.cat([x.to(DEV), y.to(DEV)], dim), torch.cat([x, y], dim)
        same(got, want)
        assert got.stride() == want.stride()
    got, want = torch.sort(x.to(DEV), dim=1, stable=True), torch.sort(x, dim=1, stable=True)
    same(got[0], want[0])
    same(got[1], want[1])
    assert got[0].stride() == want[0].stride()
