"""What running PyTorch's own device-generic test files on neuron found
(docs/conformance.md, "Upstream record"), checked here against the CPU
without the upstream files: complex special values (C99 Annex G) and
tan/tanh near their poles, the CPU's errors for complex neg/abs with an
out= of another dtype, unfold_backward's step and size, index_put_ without
indices and a boolean-mask assignment of the wrong shape, index_fill_ with
an index tensor on the host, and how the conformance report classifies the
failures that remain."""

import itertools
import math

import pytest
import torch
import torchneuron  # noqa: F401  (registers the neuron device)
from torchneuron.tools.conformance_causes import cause_of, documented_exception

from conftest import no_fallback

DEV = "neuron"
CDTYPES = [torch.complex64, torch.complex128]
INF, NAN = math.inf, math.nan

# Fallback counts a test provokes on purpose stay out of the tests after it.
pytestmark = pytest.mark.usefixtures("op_tracking")


# ---- complex special values ---------------------------------------------------

# Every pair of these as (real, imaginary): the infinities and NaN upstream's
# extremal tests use, signed zeros, ordinary and huge/tiny values, pi/2.
PARTS = [INF, -INF, NAN, 0.0, -0.0, 1.0, -2.5, 25.0, 1e30, -1e-30, math.pi / 2]
SPECIAL = [complex(a, b) for a, b in itertools.product(PARTS, PARTS)]
SPECIAL_OPS = ["exp", "exp2", "sqrt", "rsqrt", "tanh", "tan", "atanh", "atan", "sigmoid"]


def _assert_same_parts(actual, expected, rtol, inputs):
    """Each real part and each imaginary part is the CPU's: NaN where it is
    NaN, the same infinity or zero (with its sign), else within rtol."""
    a, e = torch.view_as_real(actual.cpu()), torch.view_as_real(expected)
    exact = (a == e) & (torch.signbit(a) == torch.signbit(e))
    near = torch.isclose(a, e, rtol=rtol, atol=0) & (e != 0) & e.isfinite()
    ok = (a.isnan() & e.isnan()) | exact | near
    bad = (~ok).any(-1).nonzero().flatten().tolist()
    assert not bad, [(inputs[i], complex(*e[i].tolist()), complex(*a[i].tolist())) for i in bad[:6]]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", SPECIAL_OPS)
def test_complex_special_values_are_the_cpus(name, dtype):
    z = torch.tensor(SPECIAL, dtype=dtype)
    expected = getattr(torch, name)(z)
    with no_fallback():
        actual = getattr(torch, name)(z.to(DEV))
    _assert_same_parts(actual, expected, 2e-6 if dtype == torch.complex64 else 1e-14, SPECIAL)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_exp_of_infinities_as_upstream_asserts_off_the_cpu(dtype):
    # test_unary_ufuncs.py's test_exp checks these on every device but the CPU
    z = torch.tensor([complex(INF, 0.0), complex(INF, INF), complex(INF, NAN), complex(0.0, INF),
                      complex(NAN, INF)], dtype=dtype, device=DEV)
    with no_fallback():
        r = torch.view_as_real(torch.exp(z)).cpu()
    assert r[0].tolist() == [INF, 0.0]
    assert r[1, 0] == INF and r[1, 1].isnan() and r[2, 0] == INF and r[2, 1].isnan()
    assert r[3:].isnan().all()


def _upstream_tol(dtype):
    return {"rtol": 1.3e-6, "atol": 1e-5} if dtype == torch.complex64 else {"rtol": 1e-7, "atol": 1e-7}


@pytest.mark.parametrize("dtype", CDTYPES)
def test_tanh_and_tan_near_their_poles(dtype):
    # tanh's poles are at i pi/2 (tan's at pi/2): there cosh 2a + cos 2b,
    # the textbook denominator, cancels to a few digits in float32
    g = torch.Generator().manual_seed(0)
    near_zero = (torch.rand(4096, generator=g, dtype=torch.float64) - 0.5) * 1e-2
    near_pole = math.pi / 2 + (torch.rand(4096, generator=g, dtype=torch.float64) - 0.5) * 1e-2
    for name, z in (("tanh", torch.complex(near_zero, near_pole)), ("tan", torch.complex(near_pole, near_zero))):
        z = z.to(dtype)
        expected = getattr(torch, name)(z)
        with no_fallback():
            actual = getattr(torch, name)(z.to(DEV))
        assert expected.abs().max() > 100  # the samples do reach the poles
        torch.testing.assert_close(actual.cpu(), expected, **_upstream_tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_tanh_far_out_keeps_its_tiny_imaginary_part(dtype):
    z = torch.tensor([complex(25, 1), complex(-25, 3), complex(100, 1), complex(30, -2)], dtype=dtype)
    expected = torch.tanh(z)
    with no_fallback():
        actual = torch.tanh(z.to(DEV))
    _assert_same_parts(actual, expected, 1e-5 if dtype == torch.complex64 else 1e-12, z.tolist())


@pytest.mark.parametrize("dtype", CDTYPES)
def test_atanh_near_one_and_far_right_as_cpu(dtype):
    # x = 1 with a tiny y (whose square underflows in float32) and x >> 1,
    # where the difference of two logs lost digits
    z = torch.tensor([complex(1, -1e-30), complex(1, 1e-20), complex(-1, 1e-30), complex(25, 1),
                      complex(1, 25), complex(-2.5, 25), complex(0.999, 0.001)], dtype=dtype)
    expected = torch.atanh(z)
    with no_fallback():
        actual = torch.atanh(z.to(DEV))
    torch.testing.assert_close(actual.cpu(), expected, **_upstream_tol(dtype))


@pytest.mark.parametrize("name", ["log2", "log10"])
@pytest.mark.parametrize("dtype", CDTYPES)
def test_log2_log10_divide_by_the_log_of_the_base(name, dtype):
    # the CPU divides log z by ln 2 or ln 10; the special values are exact
    z = torch.tensor([complex(INF, INF), complex(INF, -INF), complex(-INF, 2), complex(3, -4), 1j], dtype=dtype)
    expected = getattr(torch, name)(z)
    with no_fallback():
        actual = getattr(torch, name)(z.to(DEV))
    assert torch.equal(torch.view_as_real(actual.cpu()), torch.view_as_real(expected))


# ---- errors the CPU raises ------------------------------------------------------

def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type itself is compared
        return type(e), str(e).split("\n")[0]
    return None


@pytest.mark.parametrize("op", [torch.neg, torch.abs])
@pytest.mark.parametrize("dtypes", [(torch.complex64, torch.complex128), (torch.complex128, torch.complex64),
                                    (torch.complex64, torch.int64), (torch.complex128, torch.bool)])
def test_unary_out_of_another_dtype_raises_as_on_cpu(op, dtypes):
    # test_type_promotion.py's test_unary_op_out_casting
    def run(device):
        t = torch.tensor([1 + 2j, -3j], dtype=dtypes[0], device=device)
        return _error(lambda: op(t, out=torch.empty(0, dtype=dtypes[1], device=device)))

    with no_fallback():
        got = run(DEV)
    assert got is not None and got == run("cpu")


@pytest.mark.parametrize("dtype", CDTYPES)
def test_unary_out_that_the_cpu_accepts_still_works(dtype):
    z = torch.tensor([3 + 4j, -1j, 0j], dtype=dtype)
    real = torch.float64 if dtype == torch.complex64 else torch.float32
    cases = [(torch.neg, dtype), (torch.abs, dtype), (torch.abs, real), (torch.angle, torch.complex128)]
    for op, out_dtype in cases:
        expected = op(z, out=torch.empty(0, dtype=out_dtype))
        with no_fallback():
            out = torch.empty(0, dtype=out_dtype, device=DEV)
            op(z.to(DEV), out=out)
        torch.testing.assert_close(out.cpu(), expected)


def test_unfold_backward_checks_step_then_size_as_on_cpu():
    # test_shape_ops.py's test_unfold_backward_errors: ValueError for the step
    for args in [([6], 0, 3, 0), ([6], 0, 3, -2), ([6], 0, -1, 1), ([6], 0, -1, 0), ([], 0, 1, 0)]:
        def run(device, args=args):
            grad = torch.randn(2, 3, device=device)
            return _error(lambda: torch.ops.aten.unfold_backward(grad, *args))

        with no_fallback():
            got = run(DEV)
        assert got is not None and got == run("cpu"), args


@pytest.mark.parametrize("accumulate", [True, False])
@pytest.mark.parametrize("shape", [[], [3]])
def test_index_put_without_indices_raises_runtime_error(shape, accumulate):
    # test_indexing.py's test_index_put_accumulate_empty (the CPU fails in
    # its own kernels' asserts here, a RuntimeError too)
    x = torch.rand(shape, device=DEV)
    with pytest.raises(RuntimeError) as info:
        x.index_put([], torch.tensor([1.0], device=DEV), accumulate)
    assert info.type is RuntimeError


def test_boolean_mask_assignment_reports_the_shape_before_the_dtype():
    # test_indexing.py's test_boolean_assignment_value_mismatch
    for values, sliced in (([], False), ([1, 2, 3], False), ([1, 2, 3], True)):
        def run(device, values=values, sliced=sliced):
            a = torch.arange(0, 4, device=device)
            a = a[:1] if sliced else a

            def assign():
                a[a > -1] = torch.tensor(values, dtype=torch.float32).to(device)

            return _error(assign)

        with no_fallback():
            got = run(DEV)
        assert got is not None and "shape mismatch" in got[1] and got == run("cpu")


def test_boolean_mask_assignment_of_one_host_value_converts_as_on_cpu():
    # PyTorch makes self[mask] = v a masked_fill_ when v is one host element
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-9, 9, (3, 4, 5), generator=g)
    mask = torch.rand(4, 5, generator=g) > 0.5
    for index, value in (((torch.tensor([True, False, True]),), torch.tensor(1.5)),
                         ((slice(None), mask), torch.tensor([2.7])),
                         ((x > 0,), torch.tensor(-7.9, dtype=torch.float64))):
        expected = x.clone()
        expected[index] = value
        got = x.to(DEV)
        dev_index = tuple(i.to(DEV) if isinstance(i, torch.Tensor) else i for i in index)
        with no_fallback():
            got[dev_index] = value
        assert torch.equal(got.cpu(), expected)


def test_boolean_mask_assignment_errors_as_on_cpu():
    def run(device, assign):
        x = torch.zeros(3, 4, 5, device=device)
        return _error(lambda: assign(x, device))

    cases = [
        # a mask whose shape is not the indexed dims'
        lambda x, d: x.__setitem__((slice(None), torch.ones(3, 5, dtype=torch.bool, device=d)), torch.tensor(1.0)),
        # a value of another dtype with an integer index
        lambda x, d: x.__setitem__(torch.tensor([0, 2], device=d), torch.tensor(1, dtype=torch.int64)),
    ]
    for assign in cases:
        with no_fallback():
            got = run(DEV, assign)
        assert got is not None and got == run("cpu", assign)


# ---- index_fill_ with a host index ---------------------------------------------

FILL_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.uint8, torch.bool,
               torch.complex64, torch.complex128]


def _fill_value(dtype):
    if dtype == torch.bool:
        return True
    if dtype.is_complex:
        return 1.5 - 2j
    return 3 if not dtype.is_floating_point else 2.5


@pytest.mark.parametrize("dtype", FILL_DTYPES)
def test_index_fill_takes_an_index_on_the_host(dtype):
    # test_sort_and_select.py fills a device tensor at torch.randint (host) positions
    g = torch.Generator().manual_seed(0)
    base = (torch.randn(4, 5, 6, generator=g) * 5).to(dtype)
    value = _fill_value(dtype)
    cases = [(0, torch.tensor([3, 0, 3])), (1, torch.tensor(2)), (-1, torch.tensor([], dtype=torch.long)),
             (2, torch.tensor([3, -1]))]
    for (dim, index), strided in itertools.product(cases, (False, True)):
        x = base.transpose(0, 2) if strided else base
        for v in (value, torch.tensor(value), torch.tensor(value, device=DEV)):
            expected = x.index_fill(dim, index, v.cpu() if isinstance(v, torch.Tensor) else v)
            with no_fallback():
                got = x.to(DEV).index_fill(dim, index, v)
            assert torch.equal(got.cpu(), expected), (dim, index, strided, v)


def test_index_fill_of_a_0d_tensor_with_a_host_index():
    with no_fallback():
        got = torch.tensor(1.0, device=DEV).index_fill_(0, torch.tensor([0]), -4.0)
    assert got.item() == -4.0 and got.dim() == 0


# ---- the conformance report's classification -----------------------------------

def test_sparse_and_quantized_failures_are_their_own_causes():
    sparse = ("NotImplementedError: Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with "
              "arguments from the 'Sparseneuron' backend. This could be because")
    quantized = ("NotImplementedError: Could not run 'aten::_empty_affine_quantized' with arguments from the "
                 "'Quantizedneuron' backend.")
    assert cause_of("failed", sparse) == "sparse tensors are not supported on neuron"
    assert cause_of("failed", quantized) == "quantized tensors are not supported on neuron"


def test_documented_exceptions_need_the_test_and_its_message():
    node = "test_indexing.py::TestIndexingPRIVATEUSE1::test_advancedindex_neuron_float64"
    assert documented_exception(node, "AssertionError: IndexError not raised") is not None
    assert documented_exception(
        "test_indexing.py::NumpyTestsNEURON::test_trivial_fancy_out_of_bounds_neuron",
        "AssertionError: IndexError not raised by __getitem__") is not None
    # another failure of the same test is still ours, as is the message elsewhere
    assert documented_exception(node, "AssertionError: Tensor-likes are not close!") is None
    assert documented_exception("test_indexing.py::TestIndexingPRIVATEUSE1::test_index_neuron",
                                "AssertionError: IndexError not raised") is None
