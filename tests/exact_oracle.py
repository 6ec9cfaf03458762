"""Exact references for kernels whose results are defined exactly.

PyTorch CPU is the wrong oracle where our result is defined to the bit: its
float16/bfloat16 kernels take different paths on different host CPUs
(float32 math rounded, native AVX512-FP16 arithmetic, oneDNN), so a test
against it tests the host. Here the reference is computed in float64 with
Python's math module and rounded once, by the functions below, to the
16-bit type: never through float32 (which would round twice) nor through
torch's conversions (which go through float32).
"""

import math

import torch

# (significand bits, frexp exponent of the smallest normal, largest finite)
FORMATS = {
    torch.float16: (11, -13, 65504.0),
    torch.bfloat16: (8, -125, float.fromhex("0x1.fep127")),
    torch.float32: (24, -125, float.fromhex("0x1.fffffep127")),
}


def round_to(value: float, dtype) -> float:
    """value rounded to nearest, ties to even, in dtype (subnormals and
    overflow to infinity included); the result is a float64 holding a value
    of dtype exactly."""
    if not math.isfinite(value) or value == 0.0:
        return value
    precision, min_exp, largest = FORMATS[dtype]
    _, exp = math.frexp(value)
    quantum = math.ldexp(1.0, max(exp, min_exp) - precision)
    rounded = round(value / quantum) * quantum  # round() on a float: ties to even, exact
    if abs(rounded) > largest:
        return math.copysign(math.inf, value)
    return math.copysign(rounded, value) if rounded == 0.0 else rounded


def exact(fn, x: torch.Tensor) -> torch.Tensor:
    """fn (a float -> float function in float64) applied to every element of
    x, correctly rounded to x's dtype."""
    values = [round_to(fn(v), x.dtype) for v in x.double().flatten().tolist()]
    return torch.tensor(values, dtype=torch.float64).to(x.dtype).reshape(x.shape)


def ulps(got: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """|got - reference| in units of the last place of got's dtype at the
    reference (float64), elementwise; 0 where both are the same infinity or
    both NaN, infinity where only one is."""
    precision, min_exp, largest = FORMATS[got.dtype]
    g, r = got.double(), reference.double()
    # beyond the largest finite value plus half an ulp, the result is infinity
    overflow = largest + math.ldexp(1.0, math.frexp(largest)[1] - precision - 1)
    r = torch.where(r.abs() >= overflow, r.sign() * math.inf, r)
    exp = torch.frexp(r)[1].clamp(min=min_exp)
    ulp = torch.ldexp(torch.ones_like(r), exp - precision)
    err = (g - r).abs() / ulp
    same = (g == r) | (g.isnan() & r.isnan())
    err = torch.where(same, torch.zeros_like(err), err)
    return torch.where(err.isnan(), torch.full_like(err, math.inf), err)


def _exp(x: float) -> float:
    return math.inf if x >= 709.78 else math.exp(x)  # NaN passes


def gelu(x: float) -> float:
    """x Phi(x) = x/2 erfc(-x/sqrt 2): no cancellation at either end."""
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def gelu_tanh(x: float) -> float:
    """x/2 (1 + tanh u) written as x sigmoid(2u), which does not cancel for
    negative u."""
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
    return x / (1.0 + _exp(-2.0 * u))


def silu(x: float) -> float:
    return x / (1.0 + _exp(-x))


def exp(x: float) -> float:
    return _exp(x)


# Unary ops whose float16/bfloat16 results are tables of correctly rounded
# values (RT_DEFINE_TABLE16 in runtime/src/ops/pointwise.h).
CORRECTLY_ROUNDED_16BIT = {"exp": exp, "gelu": gelu, "gelu_tanh": gelu_tanh, "silu": silu}

# float32 results with an error bound in ulps, stated in runtime/src/ops/vmath.h
# (and rechecked against double libm by runtime/tests/test_pointwise.c).
FLOAT32_ULP_BOUNDS = {"exp": (exp, 1.0), "log": (lambda x: math.log(x) if x > 0 else
                                                 (-math.inf if x == 0 else math.nan), 1.0),
                      "tanh": (math.tanh, 2.0), "sigmoid": (lambda x: 1.0 / (1.0 + _exp(-x)), 2.0),
                      "erf": (math.erf, 2.0), "gelu": (gelu, 6.5), "gelu_tanh": (gelu_tanh, 1.0),
                      "silu": (silu, 3.5)}


def all_patterns(dtype) -> torch.Tensor:
    """Every one of the 2^16 float16 or bfloat16 bit patterns."""
    return torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Asserts equal 16-bit patterns, with every NaN matching any NaN (payloads may differ)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    a, e = actual.cpu().view(torch.int16), expected.view(torch.int16)
    mismatch = (a != e) & ~(actual.cpu().isnan() & expected.isnan())
    assert not mismatch.any(), f"{int(mismatch.sum())} differ, first at {mismatch.nonzero()[0].tolist()}"
