"""An exact oracle for special functions where PyTorch CPU is the less
accurate side.

Our special functions are computed in double and rounded once (see
runtime/src/ops/special/). PyTorch CPU computes float32 (and integer
inputs promoted to float32) in float arithmetic, and some of its float64
kernels are accurate only to about 1e-7 (the Bessel functions J and Y, Airy
Ai) or 5e-10 (trigamma). Where neuron's result and the CPU's differ by more
than the OpInfo's tolerance, the element is checked against the function's
value computed with mpmath at 40 digits, rounded once to the result dtype:
neuron must be within the tolerance of that. Elements where the two devices
agree are not recomputed.
"""

from __future__ import annotations

import math

import mpmath
import torch

from exact_oracle import round_to

mpmath.mp.dps = 40
INF = mpmath.inf


def _polygamma_at(x, n):
    """psi^(n)(x); at a pole the limit PyTorch reports: NaN for digamma,
    (-1)^(n+1) infinity above it."""
    n = int(n)
    try:
        return mpmath.psi(n, x)
    except (ZeroDivisionError, ValueError):
        return mpmath.nan if n == 0 else (1 if n % 2 else -1) * INF


def _degree(n):
    n = float(n)
    return int(n) if math.isfinite(n) and abs(n) < 2.0**63 else -1


def _polynomial(fn):
    def value(x, n):
        k = _degree(n)
        return mpmath.mpf(0) if k < 0 else fn(k, x)
    return value


def _bessel_y(order):
    return lambda x: mpmath.nan if x < 0 else -INF if x == 0 else mpmath.bessely(order, x)


# OpInfo name (variant_test_name for polygamma) -> exact function of the
# sample's operands (the input, then the tensor or scalar arguments).
EXACT = {
    "special.erfcx": lambda x: mpmath.exp(x * x) * mpmath.erfc(x),
    "special.i0e": lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)),
    "special.i1e": lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)),
    "special.i1": lambda x: mpmath.besseli(1, x),
    "i0": lambda x: mpmath.besseli(0, x),
    "special.bessel_j0": lambda x: mpmath.besselj(0, x),
    "special.bessel_j1": lambda x: mpmath.besselj(1, x),
    "special.bessel_y0": _bessel_y(0),
    "special.bessel_y1": _bessel_y(1),
    "special.airy_ai": mpmath.airyai,
    "digamma": lambda x: _polygamma_at(x, 0),
    "polygamma": _polygamma_at,  # the samples' argument is n
    "special.polygamma": _polygamma_at,
    "special.hermite_polynomial_h": _polynomial(lambda k, x: mpmath.hermite(k, x)),
    "special.hermite_polynomial_he": _polynomial(
        lambda k, x: mpmath.hermite(k, x / mpmath.sqrt(2)) / mpmath.power(2, mpmath.mpf(k) / 2)),
    "special.laguerre_polynomial_l": _polynomial(lambda k, x: mpmath.laguerre(k, 0, x)),
    "special.legendre_polynomial_p": _polynomial(lambda k, x: mpmath.legendre(k, x)),
}

DEFAULT_TOL = {torch.float16: (1e-5, 1e-3), torch.bfloat16: (1e-5, 1.6e-2),
               torch.float32: (1e-5, 1.3e-6), torch.float64: (1e-7, 1e-7)}


def _key(op) -> str:
    return op.name


def applies(op, variant: str) -> bool:
    return variant != "grad" and _key(op) in EXACT


def _operands(sample, shape):
    values = [sample.input, *[a for a in sample.args if isinstance(a, (torch.Tensor, int, float))]]
    out = []
    for v in values:
        t = v if isinstance(v, torch.Tensor) else torch.tensor(v)
        out.append(t.detach().cpu().to(torch.float64).broadcast_to(shape))
    return out


# At most this many disagreeing elements of a sample go to mpmath (about a
# millisecond each): a large float64 reference input of the Bessel functions
# disagrees with the CPU's float64 cephes kernels almost everywhere, and all
# 54,000 of bessel_y1's took two minutes. Past it, the elements checked are
# spread evenly over the disagreeing ones, plus the largest disagreements.
MAX_CHECKED = 2048


def _to_check(disagree: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor) -> list[int]:
    if disagree.numel() <= MAX_CHECKED:
        return disagree.tolist()
    step = -(-disagree.numel() // MAX_CHECKED)
    spread = disagree[::step]
    gap = (actual[disagree] - expected[disagree]).abs().nan_to_num(nan=math.inf)
    largest = disagree[gap.topk(64).indices]
    return sorted(set(spread.tolist()) | set(largest.tolist()))


def check(op, sample, actual: torch.Tensor, expected: torch.Tensor, tol) -> str | None:
    """None if every element of actual is within tol of the CPU's value or,
    failing that, of the exact value; else a description of the first
    element that is neither."""
    if not (isinstance(actual, torch.Tensor) and actual.is_floating_point()):
        return "not a floating-point result"
    atol, rtol = tol if tol is not None else DEFAULT_TOL[actual.dtype]
    close = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    fn = EXACT[_key(op)]
    operands = [t.reshape(-1) for t in _operands(sample, actual.shape)]
    flat_actual, flat_expected = actual.reshape(-1), expected.reshape(-1)
    for i in _to_check((~close).reshape(-1).nonzero().flatten(), flat_actual, flat_expected):
        args = [float(t[i]) for t in operands]
        exact = float(fn(*[mpmath.mpf(a) for a in args]))
        if actual.dtype != torch.float64:
            exact = round_to(exact, actual.dtype)
        got = float(flat_actual[i])
        if math.isnan(exact) and math.isnan(got):
            continue
        if got == exact or abs(got - exact) <= atol + rtol * abs(exact):
            continue
        return (f"element {i} at {args}: neuron {got!r}, CPU {float(flat_expected[i])!r}, "
                f"exact {exact!r} (rounded to {actual.dtype})")
    return None
