"""Pointwise ops on neuron against PyTorch CPU.

Each case runs one call on CPU tensors and on their neuron twins (same
values, same views) and checks that the results agree (exactly for integers
and bools, within the dtype's OpInfo tolerance for floats), that a call the
CPU refuses fails on neuron with the same exception type, and that nothing
ran through the CPU fallback. Every op is tried on every dtype over the
layouts: contiguous, transposed, broadcast, 0-d, zero-size, Python scalar
operands, out= of another dtype and in-place.

Where our result is defined exactly (the correctly rounded float16/bfloat16
tables, the float32 functions with a stated ulp bound), the values are
checked against an exact float64 reference instead (exact_oracle.py): the
CPU's answer there depends on the host's ISA. The CPU still decides dtypes,
shapes and which calls are errors.
"""

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from conftest import assert_same as assert_same_bits
from exact_oracle import CORRECTLY_ROUNDED_16BIT, FLOAT32_ULP_BOUNDS, all_patterns, ulps
from exact_oracle import exact as exact_values

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# (rtol, atol): torch.testing's defaults per dtype.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
             torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, math.inf, -math.inf, math.nan]


def ids(dtypes):
    return [str(d).replace("torch.", "") for d in dtypes]


def values(shape, dtype, seed=0, kind="any"):
    """Test values: small integers (with ties and zeros, both signs where the
    dtype has them), normal floats scaled by 3 with the special values
    (signed zeros, infinities, NaN) mixed in. kind="nonzero" keeps integers
    away from 0 (divisors), "unit" keeps floats inside (-1, 1), "positive"
    keeps them above 0."""
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    if dtype == torch.bool:
        out = torch.rand(n, generator=g) < 0.5
        if kind == "nonzero":
            out[:] = True
        return out.reshape(shape)
    if not dtype.is_floating_point:
        low = 0 if dtype == torch.uint8 else -9
        out = torch.randint(low, 10, (n,), generator=g, dtype=torch.int64)
        if kind == "nonzero":
            out[out == 0] = 3
        return out.to(dtype).reshape(shape)
    out = 3 * torch.randn(n, generator=g, dtype=torch.float64)
    if kind == "unit":
        out = torch.tanh(out)
    elif kind == "finite":
        out[::5] = torch.tensor([0.0, -0.0, 1e30, -1e30, 88.0, -88.0] * n)[: len(out[::5])]
    elif kind == "positive":
        out = out.abs() + 0.1
    elif n >= 2 * len(SPECIALS):
        out[::2][: len(SPECIALS)] = torch.tensor(SPECIALS, dtype=torch.float64)
    return out.to(dtype).reshape(shape)


def assert_same(got, expected, tol=None):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, tol)
        return
    if not isinstance(expected, torch.Tensor):
        assert got == expected
        return
    assert got.device.type == "neuron", got.device
    got = got.cpu()
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.is_floating_point:
        rtol, atol = tol or TOLERANCE[expected.dtype]
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, expected), (got, expected)


def to_neuron(x):
    if isinstance(x, torch.Tensor):
        return x.to("neuron")
    if isinstance(x, (list, tuple)):
        return type(x)(to_neuron(v) for v in x)
    if isinstance(x, dict):
        return {k: to_neuron(v) for k, v in x.items()}
    return x


def assert_exact(got, expected, x, reference):
    """got against reference = (math_fn, ulp_bound) of x (see
    exact_reference): math_fn computed in float64, then for ulp_bound None
    correctly rounded and compared bit for bit (signs of zero included),
    else within ulp_bound ulps. Dtype and shape are the CPU's (expected)."""
    math_fn, bound = reference
    assert got.device.type == "neuron", got.device
    got = got.cpu()
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    if bound is None:
        assert_same_bits(got, exact_values(math_fn, x.to(got.dtype)))
    elif got.numel() > 0:
        values = torch.tensor([math_fn(v) for v in x.double().flatten().tolist()], dtype=torch.float64)
        err = ulps(got.flatten(), values)
        worst = err.argmax()
        assert err[worst].item() <= bound, (x.flatten()[worst].item(), got.flatten()[worst].item(),
                                            values[worst].item(), bound)


def exact_reference(name, dtype):
    """(float64 function, ulp bound) defining op name's result in dtype: bound
    None for the correctly rounded float16/bfloat16 tables, the bound that
    vmath.h states for float32; None if the result is not defined exactly
    (then the CPU is the reference)."""
    if dtype in (torch.float16, torch.bfloat16) and name in CORRECTLY_ROUNDED_16BIT:
        return CORRECTLY_ROUNDED_16BIT[name], None
    if dtype == torch.float32 and name in FLOAT32_ULP_BOUNDS:
        return FLOAT32_ULP_BOUNDS[name]
    return None


def check(fn, *args, tol=None, exact=None, **kwargs):
    """fn on CPU and on neuron: the same result, or the same exception type;
    and no CPU fallback either way. With exact (see exact_reference), the
    values are checked against it applied to args[0] instead of the CPU's."""
    dev_args, dev_kwargs = to_neuron(args), to_neuron(kwargs)
    x = args[0].clone() if exact is not None else None  # before an in-place fn changes it
    torchneuron.clear_op_tracking()
    try:
        expected = fn(*args, **kwargs)
    except Exception as error:
        with pytest.raises(type(error)):
            got = fn(*dev_args, **dev_kwargs)
            torch.neuron.synchronize()
        assert torchneuron.get_fallback_ops() == {}
        return None
    got = fn(*dev_args, **dev_kwargs)
    if exact is not None and expected.dtype.is_floating_point:
        assert_exact(got, expected, x, exact)
    else:
        assert_same(got, expected, tol)
    assert torchneuron.get_fallback_ops() == {}
    return expected


# ---- op tables ------------------------------------------------------------
# name -> (function, input kind)

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "sgn": torch.sgn,
    "reciprocal": torch.reciprocal, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "exp": torch.exp,
    "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "sin": torch.sin, "cos": torch.cos,
    "tan": torch.tan, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan,
    "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "round_decimals": lambda x: torch.round(x, decimals=2),
    "round_negative_decimals": lambda x: torch.round(x, decimals=-1),
    "round_zero_decimals": lambda x: torch.round(x, decimals=0),
    "trunc": torch.trunc, "frac": torch.frac, "nan_to_num": torch.nan_to_num,
    "nan_to_num_values": lambda x: torch.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0),
    "isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf,
    "isneginf": torch.isneginf, "isfinite": torch.isfinite, "signbit": torch.signbit,
    "logical_not": torch.logical_not, "bitwise_not": torch.bitwise_not, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "elu": F.elu,
    "elu_scaled": lambda x: F.elu(x, alpha=0.5), "celu": lambda x: F.celu(x, 1.5),
    "selu": F.selu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "mish": F.mish, "logsigmoid": F.logsigmoid, "hardtanh": F.hardtanh,
    "hardtanh_range": lambda x: F.hardtanh(x, 0.0, 2.0), "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "threshold": lambda x: F.threshold(x, 0.5, -7.0), "relu6": F.relu6,
    "clamp": lambda x: torch.clamp(x, -2, 2), "clamp_float": lambda x: torch.clamp(x, -1.5, 2.5),
    "clamp_min": lambda x: torch.clamp(x, min=0.5), "clamp_max": lambda x: torch.clamp(x, max=1),
    "clamp_min_": lambda x: torch.clamp_min(x, 1), "clamp_max_": lambda x: torch.clamp_max(x, -1),
    "pow_2": lambda x: torch.pow(x, 2), "pow_3": lambda x: x ** 3, "pow_half": lambda x: x ** 0.5,
    "pow_neg_half": lambda x: x ** -0.5, "pow_neg_1": lambda x: x ** -1,
    "pow_neg_2": lambda x: x ** -2.0, "pow_1_7": lambda x: x ** 1.7,
    "pow_scalar_base": lambda x: 2 ** x, "pow_float_base": lambda x: 1.5 ** x,
    "add_scalar": lambda x: x + 3, "add_float": lambda x: x + 0.1234567,
    "sub_scalar": lambda x: x - 2, "rsub_scalar": lambda x: 1 - x, "mul_scalar": lambda x: x * 3,
    "mul_float": lambda x: x * 0.1234567, "div_scalar": lambda x: x / 3,
    "div_trunc_scalar": lambda x: torch.div(x, 3, rounding_mode="trunc"),
    "div_floor_scalar": lambda x: torch.div(x, -0.7, rounding_mode="floor"),
    "floordiv_scalar": lambda x: x // 2, "remainder_scalar": lambda x: x % 3,
    "rremainder_scalar": lambda x: 7 % torch.where(x == 0, torch.ones_like(x), x),
    "fmod_scalar": lambda x: torch.fmod(x, 2.5), "eq_scalar": lambda x: x == 1,
    "ne_scalar": lambda x: x != 0.1234567, "lt_scalar": lambda x: x < 0.5,
    "le_scalar": lambda x: x <= 2, "gt_scalar": lambda x: x > -1, "ge_scalar": lambda x: x >= 0,
    "and_scalar": lambda x: x & 6, "or_scalar": lambda x: x | 1, "xor_scalar": lambda x: x ^ 3,
    "lshift_scalar": lambda x: x << 2, "rshift_scalar": lambda x: x >> 1,
    "copysign_scalar": lambda x: torch.copysign(x, -1.0),
    "masked_fill_scalar": lambda x: x.masked_fill(x > 0, 5),
    "where_scalar": lambda x: torch.where(x > 0, x, 0),
}

BINARY = {
    "add": torch.add, "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "add_float_alpha": lambda a, b: torch.add(a, b, alpha=0.5),
    "sub": torch.sub, "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3), "rsub": torch.rsub,
    "mul": torch.mul, "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "pow": torch.pow, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor, "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "bitwise_left_shift": torch.bitwise_left_shift, "bitwise_right_shift": torch.bitwise_right_shift,
    "lshift": lambda a, b: a << b, "rshift": lambda a, b: a >> b,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3), "lerp_far": lambda a, b: torch.lerp(a, b, 0.8),
    "clamp_min": torch.clamp_min, "clamp_max": torch.clamp_max,
    "clamp_lower": lambda a, b: torch.clamp(a, min=b), "clamp_upper": lambda a, b: torch.clamp(a, max=b),
}
DIVISIONS = {"div_trunc", "div_floor", "floor_divide", "remainder", "fmod"}

TERNARY = {
    "where": lambda c, a, b: torch.where(c > 0, a, b),
    "where_uint8_condition": lambda c, a, b: torch.where((c > 0).to(torch.uint8), a, b),
    "lerp_tensor": lambda c, a, b: torch.lerp(a, b, c),
    "addcmul": lambda c, a, b: torch.addcmul(c, a, b, value=2),
    "addcdiv": lambda c, a, b: torch.addcdiv(c, a, b, value=0.5),
    "clamp_tensor": lambda c, a, b: torch.clamp(c, a, b),
    "masked_fill_tensor": lambda c, a, b: a.masked_fill(c > 0, b.reshape(-1)[0]),
}

KIND = {name: "any" for name in [*UNARY, *BINARY, *TERNARY]}
KIND.update({"erfinv": "unit", "atanh": "unit", "asin": "unit", "acos": "unit",
             # float64 gelu compares with the CPU, whose gelu(+inf) depends
             # on its kernel path (NaN on some vectorised ones; ours is inf:
             # test_activation_edges_follow_the_formula); float16 turns
             # "finite"'s 1e30 into inf, which the exact reference covers
             "gelu": "finite"})


# ---- unary ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_matches_cpu(name, dtype):
    fn, kind = UNARY[name], KIND[name]
    ref = exact_reference(name, dtype)
    x = values((4, 6), dtype, kind=kind)
    if check(fn, x, exact=ref) is None:
        return
    check(fn, values((6, 4), dtype, seed=1, kind=kind).t(), exact=ref)  # transposed
    check(fn, values((), dtype, seed=2, kind=kind), exact=ref)  # 0-d
    check(fn, values((0, 3), dtype, kind=kind), exact=ref)  # zero-size
    check(fn, values((3, 8), dtype, seed=3, kind=kind)[:, ::2], exact=ref)  # sliced


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CORRECTLY_ROUNDED_16BIT))
def test_16bit_table_is_correctly_rounded_on_every_pattern(name, dtype):
    # every input, against the float64 function rounded once (a detour
    # through float32 rounds twice and is off by one ulp on a few of them)
    x = all_patterns(dtype)
    torchneuron.clear_op_tracking()
    got = UNARY[name](x.to("neuron"))
    assert_same_bits(got, exact_values(CORRECTLY_ROUNDED_16BIT[name], x))
    assert torchneuron.get_fallback_ops() == {}


def float32_sweep():
    """The inputs on which runtime/tests/test_pointwise.c measures vmath.h's
    bounds: every 4099th float32 bit pattern (all signs and exponents,
    subnormals, infinities, NaNs), and every 4th point of its grid on
    [-40, 40] (computed as it does, in float32)."""
    patterns = torch.arange(0, 2**32, 4099, dtype=torch.int64)
    spread = torch.where(patterns >= 2**31, patterns - 2**32, patterns).to(torch.int32).view(torch.float32)
    i = torch.arange(0, 400_001, 4, dtype=torch.float32)
    return torch.cat([spread, -40.0 + 80.0 * i / 400000.0])


@pytest.mark.parametrize("name", sorted(FLOAT32_ULP_BOUNDS))
def test_float32_transcendentals_keep_their_ulp_bound(name):
    math_fn, bound = FLOAT32_ULP_BOUNDS[name]
    x = float32_sweep()
    torchneuron.clear_op_tracking()
    got = UNARY[name](x.to("neuron")).cpu()
    reference = torch.tensor([math_fn(v) for v in x.double().tolist()], dtype=torch.float64)
    err = ulps(got, reference)
    worst = err.argmax()
    assert err[worst].item() <= bound, (x[worst].item(), got[worst].item(), reference[worst].item())
    assert torchneuron.get_fallback_ops() == {}


# ---- binary ---------------------------------------------------------------

def binary_inputs(name, dtype, shape_a, shape_b, seed=0, other_dtype=None):
    a = values(shape_a, dtype, seed, KIND[name])
    kind_b = "nonzero" if name in DIVISIONS else KIND[name]
    b = values(shape_b, other_dtype or dtype, seed + 7, kind_b)
    if name in ("bitwise_left_shift", "bitwise_right_shift", "lshift", "rshift") and \
            not b.dtype.is_floating_point and b.dtype != torch.bool:
        b = b.abs()  # shifts by -9..9 and beyond the width are covered by test_shift_edges
    return a, b


def binary_check(name, fn, a, b, b_on_cpu=False):
    """check() of fn(a, b) (b stays a CPU tensor if b_on_cpu), except for
    float16/bfloat16 add/sub with alpha != 1: the CPU rounds alpha * b to the
    16-bit type in its scalar path (small or strided tensors) but not in its
    vectorised one, so there the reference is the vectorised result,
    computed in float32 and rounded once, as neuron does."""
    common = torch.result_type(a, b)
    if "alpha" not in name or common not in (torch.float16, torch.bfloat16):
        if b_on_cpu:
            return check(lambda a: fn(a, b), a)
        return check(fn, a, b)
    expected = fn(a.to(common).float(), b.to(common).float()).to(common)
    torchneuron.clear_op_tracking()
    assert_same(fn(a.to("neuron"), b if b_on_cpu else b.to("neuron")), expected)
    assert torchneuron.get_fallback_ops() == {}
    return expected


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_matches_cpu(name, dtype):
    fn = BINARY[name]

    def run(shape_a, shape_b, seed=0, transpose=False, b_on_cpu=False):
        a, b = binary_inputs(name, dtype, shape_a, shape_b, seed)
        return binary_check(name, fn, a.t() if transpose else a, b, b_on_cpu)

    if run((4, 6), (4, 6)) is None:
        return
    run((6, 4), (4, 6), seed=1, transpose=True)  # transposed against contiguous
    run((4, 6), (6,), seed=2)  # broadcast row
    run((4, 1), (1, 6), seed=3)  # broadcast both
    run((), (), seed=4)  # 0-d
    run((4, 6), (), seed=5)  # 0-d neuron operand
    run((4, 6), (), seed=6, b_on_cpu=True)  # 0-d CPU operand
    run((0, 6), (6,))  # zero-size


MIXED = [(torch.int32, torch.float32), (torch.uint8, torch.int8), (torch.bool, torch.int16),
         (torch.float16, torch.float64), (torch.bfloat16, torch.int32), (torch.float16, torch.bfloat16),
         (torch.int64, torch.bfloat16)]


@pytest.mark.parametrize("dtypes", MIXED, ids=["-".join(ids(pair)) for pair in MIXED])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_type_promotion_matches_cpu(name, dtypes):
    a, b = binary_inputs(name, dtypes[0], (3, 5), (3, 5), other_dtype=dtypes[1])
    binary_check(name, BINARY[name], a, b)
    a, b = binary_inputs(name, dtypes[0], (3, 5), (), seed=1, other_dtype=dtypes[1])
    binary_check(name, BINARY[name], a, b)  # a 0-d tensor of another dtype does not promote


OUT_DTYPES = [torch.bool, torch.int32, torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=ids(OUT_DTYPES))
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.float32], ids=ids([torch.int64, torch.float16, torch.float32]))
@pytest.mark.parametrize("name", ["add", "mul", "div", "div_floor", "remainder", "pow", "maximum",
                                  "eq", "lt", "logical_and", "bitwise_xor", "atan2", "copysign"])
def test_out_of_another_dtype_matches_cpu(name, dtype, out_dtype):
    fn = BINARY[name]
    a, b = binary_inputs(name, dtype, (3, 5), (5,))
    check(lambda a, b, out: (fn(a, b, out=out), out)[1], a, b, torch.empty(3, 5, dtype=out_dtype))
    check(lambda a, b, out: (fn(a, b, out=out), out)[1], a, b, torch.empty(0, dtype=out_dtype))


INPLACE = {"add_": lambda a, b: a.add_(b), "sub_": lambda a, b: a.sub_(b, alpha=2),
           "mul_": lambda a, b: a.mul_(b), "div_": lambda a, b: a.div_(b),
           "floor_divide_": lambda a, b: a.floor_divide_(b), "remainder_": lambda a, b: a.remainder_(b),
           "pow_": lambda a, b: a.pow_(b), "eq_": lambda a, b: a.eq_(b), "lt_": lambda a, b: a.lt_(b),
           "logical_or_": lambda a, b: a.logical_or_(b), "bitwise_and_": lambda a, b: a.bitwise_and_(b),
           "ilshift": lambda a, b: a.__ilshift__(b), "clamp_min_": lambda a, b: a.clamp_min_(b),
           "hypot_": lambda a, b: a.hypot_(b), "lerp_": lambda a, b: a.lerp_(b, 0.25),
           "copysign_": lambda a, b: a.copysign_(b), "atan2_": lambda a, b: a.atan2_(b),
           "masked_fill_": lambda a, b: a.masked_fill_(b > 0, 2), "exp_": lambda a, b: a.exp_(),
           "neg_": lambda a, b: a.neg_(), "relu_": lambda a, b: a.relu_(),
           "sigmoid_": lambda a, b: a.sigmoid_(), "clamp_": lambda a, b: a.clamp_(-1, 1),
           "nan_to_num_": lambda a, b: a.nan_to_num_(), "gelu_": lambda a, b: torch.ops.aten.gelu_(a)}


@pytest.mark.parametrize("other", [torch.float32, torch.int64], ids=["float32", "int64"])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_matches_cpu(name, dtype, other):
    fn = INPLACE[name]
    ref = exact_reference(name.rstrip("_"), dtype)
    a = values((4, 6), dtype, kind="finite" if name == "gelu_" else "any")
    b = values((6,), other, seed=1, kind="nonzero")
    check(lambda a, b: (fn(a, b), a)[1], a, b, exact=ref)
    check(lambda a, b: (fn(a, b), a)[1], values((6, 4), dtype, seed=2, kind="finite").t(), b,
          exact=ref)


# ---- ternary ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
@pytest.mark.parametrize("name", list(TERNARY))
def test_ternary_matches_cpu(name, dtype):
    fn = TERNARY[name]
    c, a, b = (values(s, dtype, seed) for seed, s in enumerate([(4, 6), (4, 6), (4, 6)]))
    if check(fn, c, a, b) is None:
        return
    check(fn, values((6, 4), dtype).t(), values((4, 1), dtype, 1), values((6,), dtype, 2))
    check(fn, values((), dtype), values((), dtype, 1), values((), dtype, 2))
    check(fn, values((0, 6), dtype), values((6,), dtype, 1), values((0, 1), dtype, 2))


# ---- selected semantics --------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64],
                         ids=ids([torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]))
@pytest.mark.parametrize("name", ["div_trunc", "div_floor", "floor_divide", "remainder", "fmod"])
def test_integer_division_by_zero_raises(name, dtype):
    a = torch.tensor([5, 6, 7], dtype=dtype, device="neuron")
    b = torch.tensor([1, 0, 2], dtype=dtype, device="neuron")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        BINARY[name](a, b).cpu()
    # the kernel's error is sticky on the stream, as a device error is in
    # CUDA, until cleared; then the stream works again
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a.cpu()
    torch.neuron.clear_error()
    assert BINARY[name](a, b + 1).cpu().tolist() == BINARY[name](a.cpu(), b.cpu() + 1).tolist()


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_integer_modulo_by_a_host_zero_raises_at_the_call(name):
    """A zero divisor the host holds (a Python number, a CPU scalar tensor)
    raises at the call, as on CPU, without touching the stream."""
    fn = getattr(torch, name)
    a = torch.tensor([5, 6, 7], device="neuron")
    for divisor in (0, torch.tensor(0)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a.cpu(), divisor)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a, divisor)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(a.clone(), name + "_")(divisor)
    assert a.cpu().tolist() == [5, 6, 7]  # nothing sticky was left on the stream
    assert fn(a, 4).cpu().tolist() == fn(a.cpu(), 4).tolist()
    assert fn(a.double(), 0).cpu().isnan().all()  # floating: NaN, as on CPU


def test_integer_division_by_a_device_zero_raises_at_the_call_when_launches_block():
    """A zero divisor on the device is found by the kernel: asynchronous, as
    on CUDA, unless NEURON_LAUNCH_BLOCKING=1 makes each launch wait for its
    kernel, when the call itself raises."""
    script = textwrap.dedent("""
        import torch
        a = torch.tensor([5, -6, 7], device="neuron")
        b = torch.tensor([1, 0, 2], device="neuron")
        for name in ["fmod", "remainder", "floor_divide"]:
            try:
                getattr(torch, name)(a, b)
                print(name, "returned")
            except RuntimeError as e:
                assert "ZeroDivisionError" in str(e), e
                print(name, "raised")
            torch.neuron.clear_error()
        print(torch.fmod(a, b + 1).cpu().tolist())
    """)
    env = dict(os.environ, NEURON_LAUNCH_BLOCKING="1")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["fmod raised", "remainder raised", "floor_divide raised",
                                          str(torch.fmod(torch.tensor([5, -6, 7]), torch.tensor([2, 1, 3])).tolist())]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64],
                         ids=ids([torch.int8, torch.int16, torch.int32, torch.int64]))
def test_integer_extremes_wrap_like_cpu(dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([info.min, info.max, info.min, -1, 7, info.max], dtype=dtype)
    b = torch.tensor([-1, -1, 1, info.min, -2, 2], dtype=dtype)
    for fn in [torch.add, torch.sub, torch.mul, lambda a, b: torch.pow(a, b.abs() % 5)]:
        check(fn, a, b)
    check(torch.neg, a)
    check(torch.abs, a)
    # the CPU's own INT_MIN / -1 traps for int32/int64 (a SIGFPE); on neuron
    # it wraps to INT_MIN with remainder 0, as the narrower types do on CPU
    divisions = [lambda a, b: torch.div(a, b, rounding_mode="trunc"),
                 lambda a, b: torch.div(a, b, rounding_mode="floor"), torch.remainder, torch.fmod]
    for fn in divisions:
        check(fn, a[1:], b[1:])
        got = fn(a[:1].to("neuron"), b[:1].to("neuron")).cpu()
        assert got.item() == (0 if fn in (torch.remainder, torch.fmod) else info.min)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64],
                         ids=ids([torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]))
def test_shift_edges_match_cpu(dtype):
    width = torch.iinfo(dtype).bits
    a = torch.tensor([1, -1, 100, -100, 3, 5], dtype=torch.int64).to(dtype)
    b = torch.tensor([0, 3, width - 1, width, width + 5, -1], dtype=torch.int64).to(dtype)
    check(torch.bitwise_left_shift, a, b)
    check(torch.bitwise_right_shift, a, b)


def test_integer_pow_negative_exponents_match_cpu():
    a = torch.tensor([2, -1, 1, 0, -1, 3])
    b = torch.tensor([-1, -3, -2, -1, -4, 0])
    check(torch.pow, a, b)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.pow(a.to("neuron"), -1)


def test_float16_bfloat16_round_like_cpu():
    # integer and wider inputs are rounded to the common dtype first; results
    # are rounded to it before an out= of another dtype receives them
    x = torch.tensor([0.1, 0.2, 300.0, 1.0 / 3], dtype=torch.bfloat16)
    y = torch.tensor([0.2, 0.3, 1.0, 2.0 / 3], dtype=torch.bfloat16)
    check(lambda x, y, out: torch.add(x, y, out=out), x, y, torch.empty(4))
    check(lambda x, i: x + i, x, torch.tensor([257, 513, 1025, 3], dtype=torch.int32))
    check(lambda x, s: x == s, x, torch.tensor(0.1, dtype=torch.float64))
    check(lambda x: x == 0.1, x)
    check(lambda x: x * 0.1234567, x)  # mul and div keep a scalar's precision, as the CPU does
    check(lambda x: x + 0.1234567, x)  # add rounds it
    for dtype in (torch.float16, torch.bfloat16):
        a = (100 * torch.randn(1000, generator=torch.Generator().manual_seed(0))).to(dtype)
        b = (3 * torch.randn(1000, generator=torch.Generator().manual_seed(1))).to(dtype)
        check(lambda a, b: torch.div(a, b, rounding_mode="floor"), a, b, tol=(0, 0))
        check(lambda a, b: torch.div(a, b, rounding_mode="trunc"), a, b, tol=(0, 0))
        check(lambda a: torch.div(a, 0.7, rounding_mode="floor"), a, tol=(0, 0))


def test_where_moves_bits_unchanged():
    payload = torch.tensor([0x7E01, 0x7C00, -1024, 0x0001], dtype=torch.int16).view(torch.float16)
    cond = torch.tensor([True, False, True, True])
    got = torch.where(cond.to("neuron"), payload.to("neuron"), 0.0).cpu()
    assert got.view(torch.int16).tolist() == [0x7E01, 0, -1024, 1]


def test_where_and_masked_fill_check_like_cpu():
    x = torch.randn(3, 4)
    check(lambda x: torch.where(x, x, x), x)  # a float condition is refused
    check(lambda x, m: x.masked_fill(m, 1.0), x, (x > 0).to(torch.uint8))  # so is a uint8 mask
    check(lambda x: x.masked_fill(x > 0, torch.ones(2)), x)  # and a value with dimensions
    check(lambda x: x.to(torch.int8).masked_fill(x > 0, 1000), x)  # and an overflowing value
    check(lambda x, y: torch.where(x > 0, x, y), x, torch.zeros(1, 4, dtype=torch.float64))
    check(lambda x, out: torch.where(x > 0, x, 1.0, out=out), x, torch.empty(3, 4, dtype=torch.float64))
    check(lambda x: torch.where(torch.tensor(True), x, 2.0), x)  # CPU 0-d condition


def test_argument_checks_match_cpu():
    x = torch.randn(3, 4)
    i = torch.arange(12).reshape(3, 4)
    b = x > 0
    check(torch.neg, b)
    check(torch.sub, b, b)
    check(lambda x: torch.add(x, x, alpha=0.5), i)
    check(lambda x: torch.div(x, 2, rounding_mode="nearest"), x)
    check(lambda x: F.gelu(x, approximate="sigmoid"), x)
    check(lambda x: torch.clamp(x), x)
    check(lambda x: torch.clamp(x.to(torch.int8), 1000), x)
    check(lambda x: torch.lerp(x, x.double(), 0.5), x)
    check(lambda x: torch.addcdiv(x, i, i), x)
    check(lambda x: F.hardtanh(x.to(torch.uint8)), x)
    check(lambda x, out: torch.isposinf(x, out=out), x, torch.empty(3, 4))
    check(lambda x: torch.exp(x, out=torch.empty(3, 4, dtype=torch.int64)), x)
    check(lambda x: torch.neg(x, out=torch.empty(3, 4, dtype=torch.float64)), x)
    check(lambda x: x.add_(torch.ones(2, 3, 4)), x)  # in-place cannot broadcast its output
    check(lambda i: i.add_(x), i)  # nor cast float to int
    check(lambda i: i << 1.5, i)


# ---- gradients through autograd ----------------------------------------------------

ACTIVATIONS = {
    "relu": F.relu, "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "leaky_relu_inplace": lambda x: F.leaky_relu(x.clone(), 0.1, inplace=True),
    "elu": F.elu, "elu_inplace": lambda x: F.elu(x.clone(), inplace=True), "celu": F.celu,
    "selu": F.selu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "mish": F.mish, "sigmoid": torch.sigmoid, "logsigmoid": F.logsigmoid,
    "tanh": torch.tanh, "hardtanh": F.hardtanh, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2, threshold=1), "threshold": lambda x: F.threshold(x, 0.3, 2.0),
    "relu6": F.relu6, "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 0.5),
    "erf": torch.erf, "sqrt": lambda x: torch.sqrt(x.abs() + 0.1), "clamp": lambda x: torch.clamp(x, -0.5, 0.5),
    "mul": lambda x: x * x, "div": lambda x: x / (x.abs() + 1), "pow": lambda x: x.abs() ** 1.5,
    "where": lambda x: torch.where(x > 0, x, 2 * x), "lerp": lambda x: torch.lerp(x, 2 * x, 0.3),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5), "abs": torch.abs, "atan2": lambda x: torch.atan2(x, x + 2),
}
GRAD_DTYPES = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=ids(GRAD_DTYPES))
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_gradient_matches_cpu(name, dtype):
    fn = ACTIVATIONS[name]
    base = torch.linspace(-4, 4, 41, dtype=torch.float64).reshape(41, 1).repeat(1, 3).to(dtype)
    grad = values((41, 3), torch.float64, seed=5, kind="unit").to(dtype)

    def run(x0, g):
        x = x0.clone().requires_grad_(True)
        y = fn(x)
        y.backward(g)
        return y.detach(), x.grad

    torchneuron.clear_op_tracking()
    expected = run(base, grad)
    got = run(base.to("neuron"), grad.to("neuron"))
    assert_same(got, expected, tol=(2e-2, 1e-2) if dtype == torch.bfloat16 else None)
    assert torchneuron.get_fallback_ops() == {}


BACKWARD_OPS = {
    "gelu_backward": lambda g, x: torch.ops.aten.gelu_backward(g, x),
    "gelu_tanh_backward": lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh"),
    "silu_backward": torch.ops.aten.silu_backward, "mish_backward": torch.ops.aten.mish_backward,
    "sigmoid_backward": torch.ops.aten.sigmoid_backward, "tanh_backward": torch.ops.aten.tanh_backward,
    "leaky_relu_backward": lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.2, False),
    "elu_backward": lambda g, x: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x),
    "elu_backward_result": lambda g, x: torch.ops.aten.elu_backward(g, 0.5, 1.2, 1.1, True, x),
    "hardtanh_backward": lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 1.0),
    "hardswish_backward": torch.ops.aten.hardswish_backward,
    "hardsigmoid_backward": torch.ops.aten.hardsigmoid_backward,
    "softplus_backward": lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.0, 20.0),
    "threshold_backward": lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.5),
    "log_sigmoid_backward": lambda g, x: torch.ops.aten.log_sigmoid_backward(
        g, x, torch.ops.aten.log_sigmoid_forward(x)[1]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
@pytest.mark.parametrize("name", list(BACKWARD_OPS))
def test_backward_op_matches_cpu(name, dtype):
    # Finite inputs: at NaN and infinity the CPU's vectorised and scalar
    # paths of these kernels disagree with each other.
    fn = BACKWARD_OPS[name]
    # float16 gets 2 ulp: the CPU's scalar path rounds each step to float16
    tol = (2e-3, 1e-5) if dtype == torch.float16 else None
    x = values((4, 6), dtype, kind="finite")
    if check(fn, values((4, 6), dtype, seed=1, kind="finite"), x, tol=tol) is None:
        return
    check(fn, values((6, 4), dtype, seed=1, kind="finite").t(), x, tol=tol)
    # a broadcast gradient; the CPU reference runs on the expanded copy (the
    # CPU's oneDNN hardswish_backward refuses broadcast operands)
    g = values((6,), dtype, seed=1, kind="finite")
    expected = fn(g.expand(4, 6).contiguous(), x)
    torchneuron.clear_op_tracking()
    assert_same(fn(g.to("neuron"), x.to("neuron")), expected, tol)
    assert torchneuron.get_fallback_ops() == {}


def test_activation_edges_follow_the_formula():
    # the CPU's scalar formulas at the edges, e.g. x/2 (1 + erf(x/sqrt 2)):
    # gelu(inf) = inf, gelu(-inf) = -inf * 0 = NaN; no overflow before the end
    x = torch.tensor([math.inf, -math.inf, math.nan, 3.4e38, -3.4e38, 0.0], device="neuron")
    got = F.gelu(x).cpu()
    assert got[0] == math.inf and got[1].isnan() and got[2].isnan()
    assert got[3] == x[3].cpu() and got[4] == 0 and got[5] == 0
    for fn in (F.silu, lambda x: F.gelu(x, approximate="tanh")):
        got = fn(x).cpu()
        assert got[0] == math.inf and got[1].isnan() and got[2].isnan() and got[4] == 0


def test_log_sigmoid_forward_returns_buffer_like_cpu():
    for dtype in FLOATS:
        x = values((5, 7), dtype)
        check(torch.ops.aten.log_sigmoid_forward, x)
        out, buf = torch.empty(5, 7, dtype=dtype), torch.empty(5, 7, dtype=dtype)
        check(lambda x, o, b: torch.ops.aten.log_sigmoid_forward(x, output=o, buffer=b), x, out, buf)


def test_ops_are_counted_as_native():
    x = torch.randn(8, device="neuron")
    torchneuron.clear_op_tracking()
    torch.add(x, 1)
    F.gelu(x)
    torch.where(x > 0, x, 0.0)
    executed = torchneuron.get_executed_ops()
    for name in ("aten::add.Tensor", "aten::gelu", "aten::gt.Scalar", "aten::where.self"):
        assert executed.get(name, 0) >= 1, (name, executed)
    assert torchneuron.get_fallback_ops() == {}


def test_large_tensors_split_across_threads_match_cpu():
    # above the parallel grain: split into ranges; results are per element
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(300_001, generator=torch.Generator().manual_seed(0)).to(dtype)
        for name in ("exp", "gelu", "tanh", "sigmoid"):
            check(UNARY[name], x, exact=exact_reference(name, dtype))
        check(lambda x: x * 2 + 1, x)


def test_results_do_not_depend_on_thread_count():
    script = textwrap.dedent("""
        import torch, torchneuron, torch.nn.functional as F
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1_000_003, generator=g).to("neuron")
        y = torch.randn(1_000_003, generator=g).to("neuron")
        outs = [torch.exp(x), F.gelu(x), torch.tanh(x), torch.sigmoid(x), x * y + 1, torch.pow(x, y),
                F.gelu(x.bfloat16()).float(), torch.div(x, y, rounding_mode="floor"), torch.where(x > y, x, y)]
        import sys
        sys.stdout.buffer.write(torch.stack([o.cpu() for o in outs]).numpy().tobytes())
    """)
    results = []
    for threads in ("1", "3"):
        env = dict(os.environ, TORCHNEURON_NUM_THREADS=threads)
        results.append(subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                      capture_output=True).stdout)
    assert len(results[0]) > 0 and results[0] == results[1]
