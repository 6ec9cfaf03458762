"""Masks on the legacy dialect's transposes (nl.transpose, nisa.nc_transpose,
nl.load_transpose2d, nisa.dma_transpose).

The reference's masking section: each comparison of a mask says "which
range of indices along one of the input tile axes should be valid for the
computation". A transpose's input axes are its output's axes swapped, so
output element (f, p) is written where the mask holds at input element
(p, f): the mask's expressions are the input's, their axes swapped for the
result. The transpose is computed on the input box from index 0 on both
axes (the result then starts at partition 0, as a new tile does, whatever
the mask's lower bounds); the bounds and the comparisons over both axes
(i_p >= i_f) mark what the result wrote (legacy/masked_result.py).
"""

from torchneuron.nki.legacy.index import IndexExpr, clip, mask_box
from torchneuron.nki.legacy.masked_result import SKIP, normalize, partial, skipped
from torchneuron.nki.trace import fail


def _swap_expr(expr):
    """expr over (p, f) as one over (f, p)."""
    if expr.ndim > 2:
        fail(f"a transpose's mask {expr!r} spans {expr.ndim} axes; a transpose's input has 2",
             "mask")
    pad = 2 - expr.ndim
    extents = (1,) * pad + tuple(expr.extents)
    coefs = {1 - (a + pad): c for a, c in expr.coefs.items()}
    return IndexExpr(expr.const, coefs, (extents[1], extents[0]))


def _swap_box(box):
    return {1 - a: b for a, b in box.items()}


def masked_transpose(fn, x, args, kwargs, mask, name):
    """fn(x, *args, **kwargs), a transpose of the 2-D x, under the legacy
    mask (over x's axes)."""
    mask = normalize(mask)
    if mask is SKIP:
        return skipped(fn, (x,) + tuple(args), kwargs)
    if mask is None:
        return fn(x, *args, **kwargs)
    if len(x.shape) != 2:
        fail(f"a masked transpose takes a 2-D input tile, got shape {tuple(x.shape)}", "mask",
             name)
    box = mask_box(mask, triangles=True)
    for a in box:
        if a > 1:
            fail(f"the mask bounds axis {a}; a transpose's input has 2", "mask", name)
    compute = {a: (0, hi, n) for a, (lo, hi, n) in box.items()}
    result = fn(clip(x, compute), *args, **kwargs)
    from torchneuron.nki.legacy.language import _expand

    result = _expand(result, _swap_box(compute))
    return partial(result, _swap_box(box), [(_swap_expr(e), op) for e, op in mask.residual()])
