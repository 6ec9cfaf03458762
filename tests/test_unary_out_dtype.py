"""A unary op's out= of another dtype, against PyTorch CPU with no fallback
(issue 20; test_type_promotion.py's test_unary_op_out_casting): neg, floor,
abs, sign, nan_to_num... write only into self's dtype, exp, sigmoid... cast
their result into any out it casts to, complex64 into complex128 included."""

import pytest
import torch

from conftest import no_fallback

SAME_DTYPE_ONLY = ["neg", "floor", "ceil", "trunc", "round", "abs", "frac", "sign", "sgn", "bitwise_not",
                   "nan_to_num"]
CASTING = ["exp", "sin", "sqrt", "sigmoid", "expm1", "reciprocal", "rsqrt", "log", "tanh"]
PAIRS = [(torch.float32, torch.complex64), (torch.float64, torch.complex64), (torch.int64, torch.complex128),
         (torch.complex64, torch.complex128), (torch.complex128, torch.complex64), (torch.float32, torch.float64)]


def run(name, dtype, out_dtype, device):
    x = torch.tensor([[1.5, -2.25, 0.0], [4.0, 0.5, -0.75]])
    if dtype.is_complex:
        x = torch.complex(x, x.flip(0))
    x = x.to(dtype).to(device)
    out = torch.empty(0, dtype=out_dtype, device=device)
    result = getattr(torch, name)(x.t(), out=out)  # a transposed input too
    assert result is out
    return out


def on_both(call, errors=(RuntimeError,)):
    """(cpu result, neuron result computed with no fallback), or None when
    the CPU raises: then neuron must raise the same error, word for word."""
    try:
        expected = call("cpu")
    except errors as cpu_error:
        with pytest.raises(type(cpu_error)) as error:
            call("neuron")
        assert str(error.value) == str(cpu_error)
        return None
    with no_fallback():
        return expected, call("neuron").cpu()


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}".replace("torch.", ""))
@pytest.mark.parametrize("name", SAME_DTYPE_ONLY + CASTING)
def test_unary_out_of_another_dtype_matches_cpu(name, pair):
    dtype, out_dtype = pair
    results = on_both(lambda device: run(name, dtype, out_dtype, device), (RuntimeError, NotImplementedError))
    if results is None:
        return
    expected, actual = results
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=2e-6, atol=1e-6, equal_nan=True)


def test_the_same_dtype_rule_is_the_cpus():
    # real into complex: the CPU's "Found dtype ... but expected ..." at the call
    x = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Found dtype ComplexFloat but expected Float"):
        torch.neg(x, out=torch.empty(0, dtype=torch.complex64, device="neuron"))
    with pytest.raises(RuntimeError, match="nan_to_num: dtype of out: ComplexFloat should be same as input: Float"):
        torch.nan_to_num(x, out=torch.empty(0, dtype=torch.complex64, device="neuron"))


@pytest.mark.parametrize("name", ["clamp_min", "clamp_max"])
@pytest.mark.parametrize("dtype,bound,out_dtype", [
    (torch.float32, 0, torch.float64), (torch.int32, 0, torch.int64), (torch.int32, 0.5, torch.float32),
    (torch.int32, 0.5, torch.float64), (torch.float32, 0, torch.float32), (torch.bool, 0, torch.int64)])
def test_clamp_with_a_number_writes_only_its_own_dtype(name, dtype, bound, out_dtype):
    # the CPU's clamp_min/clamp_max(Scalar) are unary ops on self (promoted
    # with the bound when self is not floating): out= must have that dtype
    def call(device):
        x = torch.tensor([-1, 2, 0], device=device).to(dtype)
        out = torch.empty(0, dtype=out_dtype, device=device)
        return getattr(torch, name)(x, bound, out=out)
    results = on_both(call)
    if results is None:
        return
    expected, actual = results
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.complex64, torch.complex128), (torch.complex128, torch.complex64),
                                             (torch.complex64, torch.float32), (torch.float32, torch.complex64)])
def test_ternary_out_of_another_dtype_matches_cpu(name, dtype, out_dtype):
    # test_type_promotion's test_ternary_out_promotion: complex64 inputs
    # into a complex128 out compute in complex64 and are cast, natively
    def call(device):
        g = torch.Generator().manual_seed(0)
        x = torch.rand(3, 2, generator=g, dtype=torch.float64).to(dtype).to(device) + 0.5
        out = torch.empty(3, 2, dtype=out_dtype, device=device)
        return getattr(torch, name)(x, x, x.t().t(), value=0.5, out=out)
    results = on_both(call)
    if results is None:
        return
    expected, actual = results
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-6)
