"""What running PyTorch's own device-generic test files on neuron found
(docs/conformance.md, "Upstream record"), checked here against the CPU
without the upstream files: complex special values (C99 Annex G) and
tan/tanh near their poles, the CPU's errors for neg/abs with an out= of the
other complex dtype, unfold_backward's step and size, index_put_ without
indices and a boolean-mask assignment of the wrong shape, index_fill_ with
an index tensor on the host, and how the conformance report classifies the
failures that remain."""

import itertools
import math

import pytest
import torch
import torchneuron  # noqa: F401  (registers the neuron device)

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
