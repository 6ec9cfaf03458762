"""A float64 referee for float32 linear algebra whose CPU result depends on
the host.

PyTorch CPU's float32 factorisations come from MKL, whose code path (and so
its rounding) differs between Intel and AMD hosts; on an Intel Xeon its
float32 LDL^T of an OpInfo 5x5 sample is off the float64 factor by 1.4e-5,
neuron's by 6e-8. Where neuron's float32 result and the CPU's differ beyond
the tolerance, the same call is made on the sample converted to float64
(on the CPU): every floating element of neuron's result must be within the
tolerance of that, or no farther from it than the CPU's result is; integer
results (pivots, infos) must equal the CPU's. complex64 the same way with a
complex128 referee, for the ops whose complex kernels compute in complex128
(cond through the SVD, and LDL^T/LDL^H).

Convolutions too. PyTorch CPU sends a 16-bit transposed convolution to
oneDNN (float32 sums rounded once, as neuron) or, when an output_padding is
not below its stride or the host lacks oneDNN's 16-bit support (float16
without AVX512-FP16, as on AMD EPYC), to its slow path, which rounds every
product and every col2im addition to the 16-bit dtype: there neuron is the
closer to float64 and the CPU is what differs. Their float32 gradients are
sums of up to thousands of products whose order (MKL's, oneDNN's or
neuron's GEMM) differs by host; where a sum cancels (the OpInfo's
conv_transpose3d sample sums 200 products of total magnitude 712 to -15.02)
any order's rounding can exceed the tolerance. A convolution's results and
gradients are bilinear sums, so the same call on the absolute values gives
each element's sum of |products|, and a float32 element may be off float64
by the tolerance plus GRAD_ROUNDING units of roundoff of that sum (any
order's error bound is k units for k terms). Their float32 and complex64
forward results the same way: neuron's 3-d convolutions sum in another
order than the CPU's (2-d convolutions over depth-folded channels), so an
element whose sum cancels may differ from the CPU's by more than the
tolerance while both are within that bound of float64."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

REFEREED = {"linalg.ldl_factor_ex", "linalg.ldl_factor"}
REFEREED_COMPLEX64 = {"linalg.ldl_factor_ex", "linalg.ldl_factor", "linalg.cond"}
CONVOLUTIONS = {f"nn.functional.conv{kind}{d}d" for kind in ("", "_transpose") for d in (1, 2, 3)}
GRAD_ROUNDING = 8  # units of float32 roundoff (2**-24) of an element's sum of |products|
_WIDER = {torch.float32: torch.float64, torch.complex64: torch.complex128,
          torch.float16: torch.float64, torch.bfloat16: torch.float64}


def applies(opinfo_id: str, variant: str, dtype: torch.dtype) -> bool:
    if opinfo_id in CONVOLUTIONS:
        return (variant == "grad" and dtype == torch.float32) or (
            variant != "grad" and dtype in (torch.float16, torch.bfloat16, torch.float32, torch.complex64))
    return variant != "grad" and ((dtype == torch.float32 and opinfo_id in REFEREED)
                                  or (dtype == torch.complex64 and opinfo_id in REFEREED_COMPLEX64))


def _float64(x):
    return tree_map(lambda t: t.detach().to(_WIDER[t.dtype])
                    if isinstance(t, torch.Tensor) and t.dtype in _WIDER else t, x)


def _grads(op, sample, seed, magnitude: bool):
    """The grad variant's gradients (tests/opinfo_support.py: every floating
    input a leaf, the same float32 cotangents) computed in float64; with
    magnitude, of the absolute values (inputs and cotangents)."""
    leaves = []

    def leaf(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t = t.detach().to(torch.float64)
            t = (t.abs() if magnitude else t).requires_grad_(True)
            leaves.append(t)
        return t

    i, a, k = tree_map(leaf, (sample.input, sample.args, sample.kwargs))
    out = sample.output_process_fn_grad(op(i, *a, **k))
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    cotangents = [torch.randn(t.shape, generator=gen, dtype=torch.float32).to(torch.float64) for t in outs]
    if magnitude:
        cotangents = [c.abs() for c in cotangents]
    return torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)


def check_grad(op, sample, actual, expected, tol, seed) -> str | None:
    """float32 gradients of a bilinear op: each element within the tolerance
    of float64 plus GRAD_ROUNDING roundoffs of its sum of |products|."""
    reference, magnitude = _grads(op, sample, seed, False), _grads(op, sample, seed, True)
    got, want = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if not (len(got) == len(want) == len(reference)):
        return "float64 referee: the float64 gradients have another structure"
    atol, rtol = tol
    for index, (a, e, r, m) in enumerate(zip(got, want, reference, magnitude)):
        error = (a.to(torch.float64) - r).abs()
        bound = atol + rtol * r.abs() + GRAD_ROUNDING * 2.0 ** -24 * m
        if not bool((error <= bound).all()):
            worst = int((error - bound).argmax())
            return (f"float64 referee: gradient [{index}] is {error.flatten()[worst].item():.3g} off the float64 "
                    f"result where {bound.flatten()[worst].item():.3g} is allowed (the CPU's "
                    f"{(e.to(torch.float64) - r).abs().flatten()[worst].item():.3g})")
    return None


def _magnitudes(op, sample):
    """A convolution of the absolute values (float64): each element's sum of
    |products|, the scale of any summation order's roundoff."""
    def magnitude(t):
        return t.abs() if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) else t
    i, a, k = tree_map(magnitude, _float64((sample.input, sample.args, sample.kwargs)))
    return tree_flatten(op(i, *a, **k))[0]


def check(op, sample, actual, expected, tol) -> str | None:
    reference = op(_float64(sample.input), *_float64(sample.args), **_float64(sample.kwargs))
    roundoff = None  # a convolution's float32 / complex64 sums: any order's roundoff allowed
    if op.name in CONVOLUTIONS and not op.variant_test_name and \
            tree_flatten(actual)[0][0].dtype in (torch.float32, torch.complex64):
        roundoff = [GRAD_ROUNDING * 2.0 ** -24 * m for m in _magnitudes(op, sample)]
    got, want, exact = (tree_flatten(x)[0] for x in (actual, expected, reference))
    if not (len(got) == len(want) == len(exact)):
        return "float64 referee: the float64 call returned another structure"
    atol, rtol = tol
    for index, (a, e, r) in enumerate(zip(got, want, exact)):
        if not isinstance(a, torch.Tensor) or not (a.is_floating_point() or a.is_complex()):
            if not (torch.equal(a, e) if isinstance(a, torch.Tensor) else a == e):
                return f"float64 referee: item [{index}] differs from the CPU's"
            continue
        error = (a.to(r.dtype) - r).abs()
        within = error <= atol + rtol * r.abs() + (roundoff[index] if roundoff else 0.0)
        no_worse = error <= (e.to(r.dtype) - r).abs() + atol
        if not bool((within | no_worse).all()):
            return (f"float64 referee: item [{index}] is {error.max().item():.3g} off the float64 result, "
                    f"the CPU's {(e.to(r.dtype) - r).abs().max().item():.3g}")
    return None
