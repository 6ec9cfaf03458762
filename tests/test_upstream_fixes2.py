"""Neuron-only failures of PyTorch's own test_reductions.py and
test_tensor_creation_ops.py (docs/conformance.md, "Upstream record, second
set"), each checked here against the CPU: the same exception type and the
same wording for bad input, the same values for good input, no fallback.
"""

import pytest
import torch

import torchneuron
from cpu_errors import assert_raises_like_cpu

DEV = "neuron"
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


# ---- histc: an integer input is told about a bad range first ------------------------
# test_reductions.py::test_histc_min_max_errors_*_int*: the CPU checks the
# range before it finds that histc has no integer kernel.

@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_histc_integer_input_with_min_above_max_reports_the_range(dtype):
    assert_raises_like_cpu(lambda d: torch.histc(torch.tensor([1, 2, 3], dtype=dtype, device=d),
                                                 bins=4, min=5, max=1))


@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool])
@pytest.mark.parametrize("shape", [(3,), (0,), (2, 3)])
def test_histc_integer_input_with_a_good_range_raises_like_cpu(dtype, shape):
    # An integer input is refused after the range checks: first for bin edges
    # its dtype cannot hold (the CPU writes them into a tensor of the input's
    # dtype; min == max on a zero-size input widens to [-1, 1], which uint8
    # cannot hold), then for the missing integer kernel. bool has no linspace.
    x = torch.arange(6)[: torch.Size(shape).numel()].reshape(shape).to(dtype)
    ranges = [(0, 3), (0, 0), (-1, 3), (-0.5, 0.2), (0, 300), (0, 1e5), (-200, 3),
              (0, 3e9), (0, 1e19), (-1e19, 0)]
    for lo, hi in ranges:
        assert_raises_like_cpu(lambda d: torch.histc(x.to(d), bins=4, min=lo, max=hi))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_histc_float_input_with_a_wide_range_matches_cpu(dtype):
    x = torch.tensor([-150.0, 0.0, 250.0, 1e4], dtype=dtype)
    for lo, hi in ((0, 300), (-200, 3), (0, 1e5), (0, 3e9)):
        assert torch.equal(torch.histc(x.to(DEV), bins=4, min=lo, max=hi).cpu(),
                           torch.histc(x, bins=4, min=lo, max=hi))


def test_histc_float16_input_with_edges_float16_cannot_hold_raises_like_cpu():
    x = torch.tensor([-150.0, 0.0, 250.0], dtype=torch.float16)
    for lo, hi in ((0, 1e5), (-7e4, 0), (0, 3e9)):
        assert_raises_like_cpu(lambda d: torch.histc(x.to(d), bins=4, min=lo, max=hi))
    assert torch.equal(torch.histc(x.to(DEV), bins=4, min=-200, max=6e4).cpu(),
                       torch.histc(x, bins=4, min=-200, max=6e4))


def test_histc_float_input_with_min_above_max_still_raises_like_cpu():
    assert_raises_like_cpu(lambda d: torch.histc(torch.ones(3, device=d), bins=4, min=5, max=1))
    x = torch.tensor([0.5, 1.5, 2.5, 0.25])
    assert torch.equal(torch.histc(x.to(DEV), bins=3, min=0, max=3).cpu(), torch.histc(x, bins=3, min=0, max=3))


# ---- mode with out= of the wrong dtype ----------------------------------------------
# test_reductions.py::test_mode_wrong_dtype: the CPU's wording, "expected
# scalar type X but got Y for values/indices".

@pytest.mark.parametrize("x_ty, v_ty, i_ty", [
    (torch.uint8, torch.int8, torch.long),
    (torch.int8, torch.int16, torch.long),
    (torch.int32, torch.float32, torch.long),
    (torch.float32, torch.float64, torch.long),
    (torch.uint8, torch.uint8, torch.int8),
    (torch.int32, torch.int32, torch.float32),
    (torch.float32, torch.float32, torch.float64),
    (torch.float32, torch.float64, torch.int32),  # both wrong: values is checked first
])
def test_mode_out_of_the_wrong_dtype_raises_like_cpu(x_ty, v_ty, i_ty):
    def call(d):
        x = torch.ones(10, device=d, dtype=x_ty)
        torch.mode(x, -1, True, out=(torch.ones(10, device=d, dtype=v_ty), torch.ones(10, device=d, dtype=i_ty)))

    assert_raises_like_cpu(call)


@pytest.mark.parametrize("shape, dim", [((7,), 0), ((4, 6), 1), ((4, 6), 0), ((3, 0, 2), 2)])
def test_mode_out_of_the_right_dtype_matches_cpu(shape, dim):
    x = torch.randint(0, 3, shape, generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    values, indices = torch.empty(0, dtype=torch.int32), torch.empty(0, dtype=torch.long)
    torch.mode(x, dim, False, out=(values, indices))
    v_dev = torch.empty(0, dtype=torch.int32, device=DEV)
    i_dev = torch.empty(0, dtype=torch.long, device=DEV)
    torch.mode(x.to(DEV), dim, False, out=(v_dev, i_dev))
    assert torch.equal(v_dev.cpu(), values)
    assert torch.equal(i_dev.cpu(), indices)


# ---- complex mean of non-finite values ----------------------------------------------
# test_reductions.py::test_ref_extremal_values_mean_*_complex64: the CPU (and
# NumPy) divide the complex sum by the count as complex numbers, so an
# infinite or NaN part makes the other part NaN; the planes' own means did not.

INF, NAN = float("inf"), float("nan")
EXTREMALS = [0, 1, complex(INF, 0), complex(-INF, 0), complex(NAN, 0), complex(0, INF),
             complex(0, -INF), complex(INF, INF), complex(INF, -INF), complex(-0.0, -0.0)]


def assert_complex_like_cpu(got, expected):
    assert got.device.type == DEV and got.dtype == expected.dtype and got.shape == expected.shape
    # NaN in the same places of each part, the rest within rounding
    torch.testing.assert_close(torch.view_as_real(got.cpu()), torch.view_as_real(expected), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("extremal", EXTREMALS)
def test_complex_mean_with_an_extremal_value_matches_cpu(dtype, extremal):
    t = torch.tensor([1 + 2j, 3 - 1j, 0, -0.5 + 0.5j, 2 + 0j], dtype=dtype)
    t[2] = extremal
    assert_complex_like_cpu(t.to(DEV).mean(), t.mean())
    assert_complex_like_cpu(torch.mean(t.to(DEV), 0, keepdim=True), torch.mean(t, 0, keepdim=True))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.mean(t.to(DEV), 0, out=out)
    assert_complex_like_cpu(out, torch.mean(t, 0))


@pytest.mark.parametrize("shape, dim", [((4, 5), 1), ((4, 5), 0), ((3, 4, 2), (0, 2)), ((0, 3), 0),
                                        ((0, 3), 1), ((), None)])
def test_complex_mean_over_dims_with_extremal_values_matches_cpu(shape, dim):
    g = torch.Generator().manual_seed(1)
    t = torch.randn(shape, dtype=torch.complex64, generator=g)
    flat = t.view(-1)
    for i, v in zip(range(0, flat.numel(), 3), EXTREMALS[2:]):
        flat[i] = v
    dims = () if dim is None else dim
    assert_complex_like_cpu(torch.mean(t.to(DEV), dims), torch.mean(t, dims))
    assert_complex_like_cpu(torch.mean(t.to(DEV).conj(), dims), torch.mean(t.conj(), dims))


# ---- all/any of a complex input with out= -------------------------------------------
# test_reductions.py::test_all_any_vs_numpy_*_complex*: an out of a dtype the
# CPU refuses went through the CPU fallback to raise; now it is refused
# natively. A uint8 out, which the CPU fills from self cast to uint8 (the
# truncated real part), still goes there, counted.

@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("out_dtype", [torch.bool, torch.uint8, torch.float32, torch.int64, torch.complex64])
@pytest.mark.parametrize("op, kwargs", [
    (torch.all, {}), (torch.any, {}), (torch.all, {"dim": 1}), (torch.any, {"dim": 0, "keepdim": True}),
    (torch.all, {"dim": (0, 1)}), (torch.any, {"dim": (1,)}),
])
def test_complex_all_any_out_matches_cpu(dtype, out_dtype, op, kwargs):
    x = torch.tensor([[0, 1j, 2], [0, 0, 0], [1, 1 + 1j, -1j]], dtype=dtype)

    def call(d):
        out = torch.empty(0, dtype=out_dtype, device=d)
        return op(x.to(d), **kwargs, out=out), out

    if out_dtype in (torch.bool, torch.uint8):
        expected, _ = call("cpu")
        got, out = call(DEV)
        assert got is out and out.dtype == expected.dtype
        assert torch.equal(out.cpu(), expected)
        if out_dtype == torch.uint8:  # the one counted fallback, of this op's out= form
            ops = torchneuron.get_fallback_ops()
            assert len(ops) == 1 and next(iter(ops)).startswith(f"aten::{op.__name__}.")
            torchneuron.clear_op_tracking()
    else:
        assert_raises_like_cpu(call)


# ---- var/std of a complex input into an out of its own dtype --------------------------
# test_reductions.py::test_var_vs_numpy / test_std_vs_numpy (complex, use_out):
# the CPU writes the real variance into a complex out (imaginary part 0; for
# std the complex square root, so a NaN variance is nan+nanj); this went
# through the CPU fallback.

@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("op", [torch.var, torch.std])
@pytest.mark.parametrize("values", ["randn", "one_row", "inf", "nan", "empty"])
@pytest.mark.parametrize("kwargs", [{"dim": 0, "correction": 1, "keepdim": False},
                                    {"dim": None, "correction": 0, "keepdim": True},
                                    {"dim": 1, "correction": 1, "keepdim": True}])
def test_complex_var_std_into_a_complex_out_matches_cpu(dtype, op, values, kwargs):
    x = {"randn": lambda: torch.randn(20, 20, dtype=dtype, generator=torch.Generator().manual_seed(2)),
         "one_row": lambda: torch.tensor([[1 + 2j, -1j, 3]], dtype=dtype),
         "inf": lambda: torch.tensor([[1 + 1j, complex(INF, 0)], [2, 3]], dtype=dtype),
         "nan": lambda: torch.tensor([[1 + 1j, complex(NAN, 1)], [2, 3]], dtype=dtype),
         "empty": lambda: torch.zeros(0, 3, dtype=dtype)}[values]()
    expected = torch.empty(0, dtype=dtype)
    op(x, **kwargs, out=expected)
    out = torch.empty(0, dtype=dtype, device=DEV)
    assert op(x.to(DEV), **kwargs, out=out) is out
    assert_complex_like_cpu(out, expected)


# ---- random fills of tensors with more dims than the runtime takes ------------------
# test_reductions.py::test_dim_ndim_limit_*: make_tensor([1] * 65) fills with
# uniform_, which went through the CPU fallback past NRT_MAX_DIMS (25). A
# random op's element i reads counters by its logical row-major index, so
# the output with its size-1 dims dropped and like-stepping dims merged draws
# the same values.

MANY_DIM_SHAPES = [[1] * 65, [2] + [1] * 30 + [3], [2, 3] + [1] * 40 + [4]]
FILLS = {
    "uniform_": lambda t, g: t.uniform_(-2, 3, generator=g),
    "normal_": lambda t, g: t.normal_(1.0, 2.0, generator=g),
    "bernoulli_": lambda t, g: t.bernoulli_(0.3, generator=g),
    "exponential_": lambda t, g: t.exponential_(2.0, generator=g),
    "random_": lambda t, g: t.random_(0, 10, generator=g),
    "log_normal_": lambda t, g: t.log_normal_(generator=g),
    "cauchy_": lambda t, g: t.cauchy_(generator=g),
    "geometric_": lambda t, g: t.geometric_(0.4, generator=g),
}


@pytest.mark.parametrize("name", sorted(FILLS))
@pytest.mark.parametrize("shape", MANY_DIM_SHAPES, ids=lambda s: f"{len(s)}d")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_fill_past_the_runtime_dims_is_native_and_draws_the_flat_values(name, shape, dtype):
    g = torch.Generator(device=DEV)
    x = torch.empty(shape, dtype=dtype, device=DEV)
    flat = torch.empty(x.numel(), dtype=dtype, device=DEV)
    g.manual_seed(11)
    FILLS[name](x, g)
    g.manual_seed(11)
    FILLS[name](flat, g)
    assert x.shape == torch.Size(shape)
    assert torch.equal(x.cpu().reshape(-1), flat.cpu())


def test_random_fill_of_a_non_contiguous_many_dim_view_matches_a_contiguous_one():
    g = torch.Generator(device=DEV)
    x = torch.empty([2] + [1] * 28 + [3, 4], device=DEV).transpose(0, -1)  # 31 dims, 3 after merging
    same = torch.empty(x.shape, device=DEV)
    g.manual_seed(5)
    x.uniform_(generator=g)
    g.manual_seed(5)
    same.uniform_(generator=g)
    assert torch.equal(x.cpu(), same.cpu())


def test_make_tensor_of_65_dims_is_native():
    t = torch.testing.make_tensor([1] * 65, dtype=torch.float, device=DEV, low=-1, high=1)
    assert t.shape == torch.Size([1] * 65) and -1 <= t.item() < 1


def test_random_fill_of_unmergeable_dims_still_falls_back_counted():
    # 26 dims of size 2 that do not merge: past the runtime, the counted fallback
    x = torch.zeros([2] * 26, dtype=torch.int8, device=DEV).permute([d ^ 1 for d in range(26)])
    x.random_(0, 2)
    assert torchneuron.get_fallback_ops() == {"aten::random_.from": 1}
    torchneuron.clear_op_tracking()
    values = x.cpu()
    assert values.min() == 0 and values.max() == 1


# ---- torch.polar's dtype errors -------------------------------------------------------
# test_tensor_creation_ops.py::test_torch_complex_same_dtype_error /
# test_torch_complex_out_dtype_error: polar.out raised the CPU's errors by
# running through the CPU fallback; now natively, as complex.out does.

@pytest.mark.parametrize("op", [torch.complex, torch.polar])
@pytest.mark.parametrize("abs_dtype, angle_dtype, out_dtype", [
    (torch.float32, torch.float64, None), (torch.float64, torch.float32, None),
    (torch.float32, torch.int64, None), (torch.int32, torch.float32, None),
    (torch.bfloat16, torch.bfloat16, None),
    (torch.float32, torch.float32, torch.float32), (torch.float64, torch.float64, torch.float64),
    (torch.float32, torch.float32, torch.complex128), (torch.float64, torch.float64, torch.complex64),
    (torch.float32, torch.float64, torch.float32),  # both wrong: the second argument is checked first
])
def test_complex_and_polar_dtype_errors_like_cpu(op, abs_dtype, angle_dtype, out_dtype):
    def call(d):
        a = torch.tensor([1, 2], dtype=abs_dtype, device=d)
        b = torch.tensor([3, 4], dtype=angle_dtype, device=d)
        if out_dtype is None:
            return op(a, b)
        return op(a, b, out=torch.zeros(2, dtype=out_dtype, device=d))

    assert_raises_like_cpu(call)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polar_out_still_matches_cpu(dtype):
    a = torch.tensor([1.0, 2.0, 0.5], dtype=dtype)
    b = torch.tensor([0.0, 1.0, -2.5], dtype=dtype)
    expected = torch.polar(a, b)
    out = torch.empty(0, dtype=expected.dtype, device=DEV)
    assert torch.polar(a.to(DEV), b.to(DEV), out=out) is out
    torch.testing.assert_close(out.cpu(), expected)


# ---- test_binary_ufuncs.py: heaviside, sub with a bool alpha, lerp's 0-d weight -----

def test_heaviside_of_mixed_dtypes_raises_like_cpu():
    assert_raises_like_cpu(lambda d: torch.heaviside(torch.tensor([1, 0, -2], device=d),
                                                     torch.tensor([0.5], device=d)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float32])
def test_sub_with_a_bool_alpha_raises_like_cpu(dtype):
    assert_raises_like_cpu(lambda d: torch.sub(torch.ones(3, dtype=dtype, device=d),
                                               torch.ones(3, dtype=dtype, device=d), alpha=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weight_dtype", [torch.float16, torch.float32, torch.float64, torch.int64])
def test_lerp_takes_a_0d_weight_of_another_dtype_as_cpu(dtype, weight_dtype):
    start = torch.tensor([1.0, -2.0, 3.5], dtype=dtype)
    end = torch.tensor([0.25, 4.0, -1.0], dtype=dtype)
    weight = torch.tensor(3 if weight_dtype == torch.int64 else 0.375, dtype=weight_dtype)
    expected = torch.lerp(start, end, weight)
    got = torch.lerp(start.to(DEV), end.to(DEV), weight.to(DEV))
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected)


def test_lerp_with_a_1d_weight_of_another_dtype_still_raises_like_cpu():
    assert_raises_like_cpu(lambda d: torch.lerp(torch.ones(3, dtype=torch.float64, device=d),
                                                torch.zeros(3, dtype=torch.float64, device=d),
                                                torch.full((3,), 0.5, device=d)))


# ---- complex operands of two dtypes, or a 0-d CPU operand ---------------------------
# test_binary_ufuncs.py ran eq/ne of complex with real tensors, and add/mul of
# complex tensors with 0-d CPU tensors, through the counted fallback.

MIXED = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
         torch.float64, torch.complex64, torch.complex128]
OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "eq": torch.eq, "ne": torch.ne}


def _values(dtype, shape):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, True][: max(1, torch.Size(shape).numel())]).reshape(shape)
    base = torch.tensor([1.5 - 2j, 0.25 + 0j, -3 + 0.5j, 2 + 2j], dtype=torch.complex128)
    base = base[: max(1, torch.Size(shape).numel())].reshape(shape)
    if dtype.is_complex:
        return base.to(dtype)
    return base.real.to(dtype) if dtype.is_floating_point else base.real.round().to(dtype)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("cdtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("other", MIXED)
@pytest.mark.parametrize("kind", ["tensor", "0-d on the device", "0-d on the CPU"])
def test_complex_with_another_dtype_or_a_cpu_scalar_tensor_is_native(op, cdtype, other, kind):
    if op == "sub" and other == torch.bool:
        pytest.skip("the CPU refuses bool subtraction")
    a = _values(cdtype, (4,))
    b = _values(other, (4,) if kind == "tensor" else ())
    expected = OPS[op](a, b)
    bd = b if kind == "0-d on the CPU" else b.to(DEV)
    for x, y, want in ((a.to(DEV), bd, expected), (bd, a.to(DEV), OPS[op](b, a))):
        got = OPS[op](x, y)
        assert got.dtype == want.dtype and got.device.type == DEV
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


# ---- test_binary_ufuncs.py, session s42-ufall -----------------------------------------
# test_maximum_minimum_complex: the CPU's error, raised natively (no fallback).
@pytest.mark.parametrize("op", [torch.maximum, torch.minimum, torch.fmax, torch.fmin, torch.max, torch.min])
@pytest.mark.parametrize("dtypes", [(torch.complex64, torch.float32), (torch.int64, torch.complex128),
                                    (torch.complex64, torch.complex64)])
def test_extrema_of_complex_raise_the_cpu_error(op, dtypes):
    assert_raises_like_cpu(lambda d: op(torch.ones(2, dtype=dtypes[0], device=d),
                                        torch.ones(2, dtype=dtypes[1], device=d)))
    assert_raises_like_cpu(lambda d: torch.maximum(torch.ones(2, dtype=dtypes[0], device=d),
                                                   torch.ones(2, dtype=dtypes[1], device=d),
                                                   out=torch.empty(2, dtype=dtypes[0], device=d)))


# test_lerp (complex, a 0-d weight on the CPU) and
# test_lerp_weight_scalar_tensor_promotion (complex, a 0-d float weight).
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_lerp_with_a_0d_weight_runs_natively(dtype):
    g = torch.Generator().manual_seed(3)
    start = torch.randn(5, 5, dtype=dtype, generator=g)
    end = torch.randn(5, dtype=dtype, generator=g)
    for weight in (torch.randn([], dtype=dtype, generator=g), torch.tensor(0.25), torch.tensor(0.5, dtype=torch.float64),
                   torch.tensor(3)):
        want = torch.lerp(start, end, weight)
        for w in (weight, weight.to(DEV)):
            got = torch.lerp(start.to(DEV), end.to(DEV), w)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.cpu(), want)
            out = torch.tensor(1.0, dtype=dtype, device=DEV)
            torch.lerp(start.to(DEV), end.to(DEV), w, out=out)
            torch.testing.assert_close(out.cpu(), want)
        got = start.t().to(DEV).lerp(end.to(DEV), weight)  # strided self
        torch.testing.assert_close(got.cpu(), start.t().lerp(end, weight))
