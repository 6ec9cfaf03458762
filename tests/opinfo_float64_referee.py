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
(cond through the SVD, and LDL^T/LDL^H)."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

REFEREED = {"linalg.ldl_factor_ex", "linalg.ldl_factor"}
REFEREED_COMPLEX64 = {"linalg.ldl_factor_ex", "linalg.ldl_factor", "linalg.cond"}
_WIDER = {torch.float32: torch.float64, torch.complex64: torch.complex128}


def applies(opinfo_id: str, variant: str, dtype: torch.dtype) -> bool:
    return variant != "grad" and ((dtype == torch.float32 and opinfo_id in REFEREED)
                                  or (dtype == torch.complex64 and opinfo_id in REFEREED_COMPLEX64))


def _float64(x):
    return tree_map(lambda t: t.detach().to(_WIDER[t.dtype])
                    if isinstance(t, torch.Tensor) and t.dtype in _WIDER else t, x)


def check(op, sample, actual, expected, tol) -> str | None:
    reference = op(_float64(sample.input), *_float64(sample.args), **_float64(sample.kwargs))
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
        within = error <= atol + rtol * r.abs()
        no_worse = error <= (e.to(r.dtype) - r).abs() + atol
        if not bool((within | no_worse).all()):
            return (f"float64 referee: item [{index}] is {error.max().item():.3g} off the float64 result, "
                    f"the CPU's {(e.to(r.dtype) - r).abs().max().item():.3g}")
    return None
