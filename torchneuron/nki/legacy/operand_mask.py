"""The legacy dialect's operand masking of matmuls: ``nl.matmul(lhs_T[i_lhs_f
<= 64], rhs[i_rhs_f <= 256], transpose_x=True)``.

A matmul's operands share the contraction axis but each has its own free
axis, which one ``mask=`` over index expressions cannot tell apart, so the
reference masks each operand instead (``tile[mask]``). Here a masked-out
operand element takes no part in the product: it is replaced by 0 (GpSimd
affine_select) and the full-size product is computed; a bound on the
contraction axis (the operands' partition axis) applies to both operands,
bounds on a free axis mark the result's rows / columns as the only ones
written (legacy/masked_result.py), as on hardware the instruction is
generated on the smaller tiles.
"""

from torchneuron.nki.legacy.index import IndexExpr, Mask
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


class MaskedOperand:
    """tile[mask]: a matmul operand with a mask over its axes."""

    __slots__ = ("tile", "mask")

    def __init__(self, tile, mask):
        if not isinstance(tile, NkiTensor) or not tile.on_chip or tile.ndim != 2:
            fail("a tile indexed by a mask (operand masking) must be a 2-D SBUF tile",
                 "mask")
        self.tile = tile
        self.mask = mask

    @property
    def shape(self):
        return self.tile.shape

    @property
    def dtype(self):
        return self.tile.dtype

    def __getattr__(self, name):
        fail("a tile indexed by a mask (tile[i_f < n]) is a matmul operand only: pass it to "
             "nl.matmul or nisa.nc_matmul", "mask")


def _terms(operand, k_axis):
    """The operand's comparisons, over (K, free) axes; the K-only ones."""
    if not isinstance(operand, MaskedOperand):
        return operand, [], []
    terms = []
    for expr, op in operand.mask.terms:
        if expr.ndim > 2:
            fail(f"operand mask {expr!r} {op} 0 spans {expr.ndim} axes; a matmul operand has 2",
                 "mask")
        coefs = {a + 2 - expr.ndim: c for a, c in expr.coefs.items()}
        if k_axis == 1:  # x of matmul(x, y) is [M, K]: swap to (K, M)
            coefs = {1 - a: c for a, c in coefs.items()}
        terms.append((expr.const, coefs, op))
    return operand.tile, terms, [t for t in terms if set(t[1]) <= {0}]


def _select(tile, terms, k_axis):
    """tile with the elements outside terms set to 0."""
    from torchneuron.nki.legacy.language import _select_outside

    if not terms:
        return tile
    shape = tuple(tile.shape)
    exprs = []
    for const, coefs, op in terms:
        if k_axis == 1:
            coefs = {1 - a: c for a, c in coefs.items()}
        exprs.append((IndexExpr(const, coefs, shape), op))
    return _select_outside(tile, exprs, {}, 0.0)


def _free_box(terms, size):
    """The result rows / columns an operand's free-axis bounds leave."""
    lo, hi = 0, size
    for const, coefs, op in terms:
        if set(coefs) == {1}:
            box = Mask([(IndexExpr(const, {0: coefs[1]}, (size,)), op)]).box()
            lo, hi = max(lo, box[0][0]), min(hi, box[0][1])
    return (lo, max(lo, hi), size)


def has_operand_mask(*operands):
    return any(isinstance(o, MaskedOperand) for o in operands)


def masked_matmul(run, x, y, x_k_axis):
    """run(x, y) on operands with their masked-out elements zeroed; the
    result marked with the rows (x's free axis) and columns (y's) written."""
    from torchneuron.nki.legacy.masked_result import partial

    if not has_operand_mask(x, y):
        return run(x, y)
    x, x_terms, x_k = _terms(x, x_k_axis)
    y, y_terms, y_k = _terms(y, 0)
    x = _select(x, x_terms + y_k, x_k_axis)
    y = _select(y, y_terms + x_k, 0)
    result = run(x, y)
    if getattr(result, "box", 0) is None:
        return result  # mask=False dropped the matmul
    rows = _free_box(x_terms, x.shape[1 - x_k_axis])
    cols = _free_box(y_terms, y.shape[1])
    return partial(result, {0: rows, 1: cols}, [])
