"""Calls that test_binary_ufuncs made through the CPU fallback, now native,
against PyTorch CPU with no fallback (issue 20)."""

import pytest
import torch
from torch.testing import make_tensor

from conftest import no_fallback

DEV = "neuron"

# test_contig_size1_large_dim's shape: make_tensor(exclude_zero=True) runs
# result[result == 0] = replacement, a boolean mask of 12 dims with a 0-d
# value that Python indexing puts on the device.
LARGE = (5, 2, 3, 1, 4, 5, 3, 2, 1, 2, 3, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool,
                                   torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [LARGE, (2,) * 8, (3, 4)])
def test_mask_assignment_of_a_number_runs_natively_at_any_rank(dtype, shape):
    x = torch.zeros(shape, dtype=dtype)
    x.view(-1)[::3] = 1
    value = True if dtype == torch.bool else 3
    xd = x.to(DEV)
    with no_fallback():
        xd[xd == 0] = value
        # a mask covering the leading dims only, and a 0-d device value
        xd[(xd != 0).all(-1)] = torch.tensor(value, dtype=dtype, device=DEV)
    x[x == 0] = value
    x[(x != 0).all(-1)] = torch.tensor(value, dtype=dtype)
    assert torch.equal(xd.cpu(), x)


def test_make_tensor_excluding_zero_runs_natively():
    with no_fallback():
        t = make_tensor(LARGE, dtype=torch.float32, device=DEV, exclude_zero=True)
    assert t.shape == LARGE and not (t.cpu() == 0).any()


def test_mask_assignment_of_an_element_of_self_is_refused():
    # index_put's overlap error, as on CUDA (the CPU reads the value first)
    x = torch.zeros(LARGE, device=DEV)
    with pytest.raises(RuntimeError, match="single memory location"):
        x[x == 0] = x[(0,) * len(LARGE)]


def _pair(a_dtype, b_dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(5, generator=g) * 4 + 1).to(a_dtype)
    b = (torch.rand(5, generator=g) * 4 + 1).to(b_dtype)
    if a.is_complex():
        a = a + 1j * torch.rand(5, generator=g).to(a_dtype)
    return a, b


def _same_error(fn):
    """fn(device) raises what fn(cpu) raises, without the CPU fallback."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with no_fallback(), pytest.raises(type(cpu.value)) as dev:
        fn(DEV)
    assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


# test_type_promotion: real inputs into a complex out (computed in the
# inputs' common dtype, then cast), as every binary ufunc with out= meets it
REAL_INTO_COMPLEX = ["add", "sub", "mul", "div", "atan2", "copysign", "floor_divide", "fmod", "remainder", "eq",
                     "ge", "lt", "maximum", "minimum", "hypot", "nextafter", "xlogy", "clamp_max", "pow",
                     "special.zeta", "special.xlog1py", "special.chebyshev_polynomial_t"]


@pytest.mark.parametrize("name", REAL_INTO_COMPLEX)
@pytest.mark.parametrize("dtypes", [(torch.int16, torch.int32), (torch.float32, torch.float64)])
@pytest.mark.parametrize("out_dtype", [torch.complex64, torch.complex128])
def test_real_inputs_into_a_complex_out_run_natively(name, dtypes, out_dtype):
    fn = eval("torch." + name)
    a, b = _pair(*dtypes)
    try:
        want = fn(a, b, out=torch.empty(5, dtype=out_dtype))
    except (RuntimeError, NotImplementedError):
        pytest.skip(f"{name} refuses {dtypes} on the CPU too")
    out = torch.empty(0, dtype=out_dtype, device=DEV)  # resized as out= resizes
    with no_fallback():
        got = fn(a.to(DEV), b.to(DEV), out=out)
    assert got is out
    torch.testing.assert_close(out.cpu(), want, equal_nan=True)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "eq", "ne", "pow", "logaddexp"])
def test_mixed_complex_inputs_with_out_run_natively(name):
    fn = getattr(torch, name)
    a, b = _pair(torch.complex64, torch.complex128)
    for out_dtype in (torch.complex64, torch.complex128):
        if name in ("eq", "ne"):
            out_dtype = torch.bool if out_dtype == torch.complex64 else torch.complex64
        want = fn(a, b, out=torch.empty(5, dtype=out_dtype))
        out = torch.empty(5, dtype=out_dtype, device=DEV)
        with no_fallback():
            fn(a.to(DEV), b.to(DEV), out=out)
        torch.testing.assert_close(out.cpu(), want, equal_nan=True)
    if name not in ("eq", "ne"):  # a complex result into float16: the CPU's cast error
        _same_error(lambda d: fn(a.to(d), b.to(d), out=torch.empty(5, dtype=torch.float16, device=d)))


@pytest.mark.parametrize("fn", [torch.rsub, lambda x, y: torch.pow(x, y), lambda x, y: torch.rsub(x, y, alpha=2)])
def test_mixed_complex_rsub_and_pow_run_natively(fn):
    a, b = _pair(torch.complex64, torch.complex128)
    with no_fallback():
        got = fn(a.to(DEV), b.to(DEV))
    want = fn(a, b)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


def test_heaviside_of_complex_raises_the_cpus_error_natively():
    z = torch.tensor([1 + 1j, 0j])
    r = torch.tensor([0.5, 0.5])
    _same_error(lambda d: torch.heaviside(z.to(d), z.to(d)))
    _same_error(lambda d: torch.heaviside(r.to(d), z.to(d)))
    _same_error(lambda d: torch.heaviside(r.to(d), r.to(d), out=torch.empty(2, dtype=torch.complex64, device=d)))
    _same_error(lambda d: z.to(d).heaviside_(z.to(d)))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_silu_backward_called_directly_runs_natively(dtype):
    # autograd refuses silu of complex outputs, but the op itself has a CPU
    # kernel: grad * s * (1 + x (1 - s)), s = sigmoid(x)
    from complex_samples import assert_close_to_cpu, complex_randn

    g, x = complex_randn(dtype, 6, 7, seed=1), complex_randn(dtype, 6, 7, seed=2) * 3
    want = torch.ops.aten.silu_backward(g, x)
    out = torch.empty(0, dtype=dtype, device=DEV)
    with no_fallback():
        got = torch.ops.aten.silu_backward(g.to(DEV), x.to(DEV))
        torch.ops.aten.silu_backward.grad_input(g.to(DEV), x.to(DEV)[:1], grad_input=out)  # broadcast
    assert_close_to_cpu(got, want, dtype)
    assert_close_to_cpu(out, torch.ops.aten.silu_backward(g, x[:1]), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int16, torch.int64,
                                   torch.uint8])
def test_real_tensor_against_a_complex_number_compares_natively(dtype):
    # test_type_promotion's op(lhs_f32, complex(1, 1)) for eq and ne: the
    # tensor converted to the common complex dtype (2**24 + 1 rounds in
    # complex64, as on the CPU)
    x = torch.tensor([1, 2, 3, 2**24 + 1, 0]).to(dtype)
    for number in (complex(1, 1), complex(1, 0), complex(2**24 + 1, 0), complex(0, -0.0)):
        for fn in (torch.eq, torch.ne):
            with no_fallback():
                got = fn(x.to(DEV), number)
            assert torch.equal(got.cpu(), fn(x, number)), (fn, number)
