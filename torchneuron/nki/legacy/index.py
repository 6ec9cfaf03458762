"""Index expressions of the legacy dialect: nl.arange, nl.mgrid and masks.

``i_p = nl.arange(128)[:, None]`` is the coordinate along axis 0 of the tile
being indexed; ``a[k * 128 + i_p, i_f]`` indexes dimension 0 of ``a`` with
the affine expression ``128 k + i_p``. An expression is ``const + sum(coef
* i_axis)`` over the tile's axes, each axis ranging over ``0..extent-1``.
Indexing a tensor with such expressions is an affine map from tile
coordinates to the tensor's elements, so it becomes an ordinary strided
view (an NkiTensor) whose shape is the axes' extents.

A mask (``i_p < n``, ``(i_p >= 2) & (i_f < 7)``) is a conjunction of
comparisons of such expressions with constants; a comparison that bounds
one axis narrows the box of the tile the mask selects, and masked
instructions act on that box only: a masked load of a tail tile never reads
outside the tensor. A comparison over several axes (i_p >= i_f, a triangle)
is not a box: loads, stores, element-wise ops (nl and nisa), reductions,
activations, transposes, generators and atomic_rmw take it (Mask.residual,
legacy/language.py, legacy/isa.py, legacy/masked_transpose.py); the
instructions whose elements depend on others refuse it. A mask
&-ed with a bool (a comparison of loop variables) is itself or False
(legacy/masked_result.py: the instruction is dropped).
"""

import operator

from torchneuron.nki.tensor import IndirectTensor, NkiTensor
from torchneuron.nki.trace import fail


def _int(v, what):
    try:
        return operator.index(v)
    except TypeError:
        fail(f"{what} must be an int or an index expression, got {type(v).__name__}", "index")


class IndexExpr:
    """const + sum(coef[a] * i_a); extents[a] is axis a's size (1: broadcast)."""

    __slots__ = ("const", "coefs", "extents")

    def __init__(self, const, coefs, extents):
        self.const = const
        self.coefs = coefs  # {axis: coef}
        self.extents = extents  # tuple: size of each axis position (1 = broadcast)

    @property
    def ndim(self):
        return len(self.extents)

    @property
    def shape(self):
        return self.extents

    def __repr__(self):
        terms = " + ".join(f"{c}*i{a}" for a, c in sorted(self.coefs.items()))
        return f"IndexExpr({terms or 0} + {self.const}, extents={self.extents})"

    # ---- axis placement: arange(n)[:, None] --------------------------------

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        old_axis, coefs, extents = 0, {}, []
        for i in index:
            if i is None:
                extents.append(1)
            elif isinstance(i, slice) and i == slice(None):
                if old_axis >= self.ndim:
                    fail("too many axes in an index expression's [...]", "index")
                if old_axis in self.coefs:
                    coefs[len(extents)] = self.coefs[old_axis]
                extents.append(self.extents[old_axis])
                old_axis += 1
            else:
                fail("index expressions take only ':' and None in [...] (to place axes)", "index")
        if old_axis != self.ndim:
            fail("an index expression's [...] must mention every axis", "index")
        return IndexExpr(self.const, coefs, tuple(extents))

    # ---- affine arithmetic -------------------------------------------------

    def _combine(self, other, sign):
        if isinstance(other, IndexExpr):
            n = max(self.ndim, other.ndim)
            a = (1,) * (n - self.ndim) + self.extents
            b = (1,) * (n - other.ndim) + other.extents
            extents = []
            for x, y in zip(a, b):
                if x != y and 1 not in (x, y):
                    fail(f"index expressions of extents {self.extents} and {other.extents} "
                         "do not broadcast", "index")
                extents.append(max(x, y))
            coefs = {k + n - self.ndim: c for k, c in self.coefs.items()}
            for k, c in other.coefs.items():
                k += n - other.ndim
                coefs[k] = coefs.get(k, 0) + sign * c
            return IndexExpr(self.const + sign * other.const,
                             {k: c for k, c in coefs.items() if c}, tuple(extents))
        if isinstance(other, NkiTensor):
            if sign != 1:
                fail("a runtime index word is added to an index expression (word + i_f), "
                     "never subtracted", "index")
            return DynamicIndex(other, self)
        return IndexExpr(self.const + sign * _int(other, "an index offset"), dict(self.coefs),
                         self.extents)

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return (self * -1)._combine(other, 1)

    def __neg__(self):
        return self * -1

    def __mul__(self, k):
        if isinstance(k, IndexExpr):
            fail("the product of two index expressions is not affine", "index")
        k = _int(k, "an index multiplier")
        return IndexExpr(self.const * k, {a: c * k for a, c in self.coefs.items() if c * k},
                         self.extents)

    __rmul__ = __mul__

    def __floordiv__(self, k):
        fail("integer division of an index expression is not affine: write the index as "
             "const + coef * i (nl.mgrid / nl.arange with a step)", "index")

    __mod__ = __floordiv__

    # ---- comparisons give masks --------------------------------------------

    def _compare(self, other, op):
        diff = self - other if not isinstance(other, IndexExpr) else self._combine(other, -1)
        return Mask([(diff, op)])

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    __hash__ = object.__hash__

    def bounds(self, box):
        """(min, max) of the expression over the box {axis: (lo, hi)}."""
        lo = hi = self.const
        for a, c in self.coefs.items():
            start, stop = box.get(a, (0, self.extents[a]))
            ends = (c * start, c * (stop - 1))
            lo += min(ends)
            hi += max(ends)
        return lo, hi


class DynamicIndex:
    """word + expr: the index of a dim whose start an SBUF word gives while the
    kernel runs (``src[ix, offsets[0, i] + iy]``, the legacy
    tensor_copy_dynamic_src form); the indexed tensor becomes a sliding view
    (an IndirectTensor moved by the word, as ``nl.ds(word, n)``)."""

    __slots__ = ("word", "expr")

    def __init__(self, word, expr):
        self.word = word
        self.expr = expr


def arange(*args):
    """nl.arange(stop) / nl.arange(start, stop[, step]): a 1-D index expression."""
    start, stop, step = slice(*args).indices(1 << 62) if len(args) != 1 else (0, args[0], 1)
    start, stop, step = (_int(v, "nl.arange's bounds") for v in (start, stop, step))
    count = max(0, (stop - start + step - 1) // step) if step > 0 else 0
    if count < 1:
        fail(f"nl.arange({', '.join(map(str, args))}) is empty", "index")
    return IndexExpr(start, {0: step}, (count,))


class _MGrid:
    """nl.mgrid[0:128, 0:512]: one expression per axis, each varying along its own axis."""

    def __getitem__(self, slices):
        slices = slices if isinstance(slices, tuple) else (slices,)
        n = len(slices)
        out = []
        for axis, s in enumerate(slices):
            if not isinstance(s, slice) or s.stop is None:
                fail("nl.mgrid takes slices with a stop: nl.mgrid[0:128, 0:512]", "index")
            step = 1 if s.step is None else _int(s.step, "an mgrid step")
            start = 0 if s.start is None else _int(s.start, "an mgrid start")
            count = max(0, (_int(s.stop, "an mgrid stop") - start + step - 1) // step)
            if step < 1 or count < 1:
                fail(f"nl.mgrid axis {axis} is empty or has a non-positive step", "index")
            extents = [1] * n
            extents[axis] = count
            out.append(IndexExpr(start, {axis: step}, tuple(extents)))
        return tuple(out) if n > 1 else out[0]


mgrid = _MGrid()


class Mask:
    """A conjunction of (expression, comparison with 0)."""

    __slots__ = ("terms",)

    def __init__(self, terms):
        self.terms = terms

    def __and__(self, other):
        if isinstance(other, bool) or type(other).__name__ == "bool_":
            # a comparison of loop variables (traced to a bool): all or nothing
            return self if other else False
        if not isinstance(other, Mask):
            fail("masks combine with & only with other masks", "mask")
        return Mask(self.terms + other.terms)

    __rand__ = __and__

    def __or__(self, other):
        fail("a mask is a conjunction of bounds (&); | cannot be expressed as a box", "mask")

    def box(self, triangles=False):
        """{axis: (lo, hi, extent)}: the tile box the mask's one-axis bounds
        select. A comparison over several axes (i_p < i_f: a triangle) is
        refused unless the caller handles it (triangles=True; residual())."""
        box = {}
        for expr, op in self.terms:
            axes = list(expr.coefs)
            if len(axes) > 1 and triangles:
                continue
            if len(axes) != 1:
                fail(f"each comparison of this mask must bound one index axis, got {expr!r} "
                     f"{op} 0 (here masks select a box of the tile; comparisons over several "
                     "axes are taken by loads, stores and element-wise ops)", "mask")
            axis = axes[0]
            c, k, extent = expr.coefs[axis], expr.const, expr.extents[axis]
            lo, hi, _ = box.get(axis, (0, extent, extent))
            # c * i + k  op  0, for integer i in [0, extent)
            for i_lo, i_hi in [_solve(c, k, op)]:
                lo, hi = max(lo, i_lo), min(hi, i_hi)
            box[axis] = (lo, max(lo, hi), extent)
        return box

    def residual(self):
        """The comparisons over several axes (not a box)."""
        return [(expr, op) for expr, op in self.terms if len(expr.coefs) > 1]


def _solve(c, k, op):
    """Integer i range [lo, hi) where c * i + k op 0 holds."""
    inf = 1 << 62
    if op in ("<", "<="):  # c*i < -k  (or <=)
        bound = -k - (1 if op == "<" else 0)  # c*i <= bound
        if c > 0:
            return -inf, bound // c + 1
        return -(bound // -c), inf  # ceil(bound / c) for c < 0: i >= -bound/-c
    bound = -k + (1 if op == ">" else 0)  # c*i >= bound
    if c > 0:
        return -((-bound) // c), inf  # i >= ceil(bound / c)
    return -inf, (-bound) // (-c) + 1  # i <= floor(bound / c)


def mask_box(mask, triangles=False):
    if mask is None:
        return {}
    if not isinstance(mask, Mask):
        fail(f"mask must be a comparison of index expressions, got {type(mask).__name__}",
             "mask")
    return mask.box(triangles)


class IndexedView:
    """t[exprs] whose full extent leaves t: usable only under a mask that keeps it inside."""

    __slots__ = ("tensor", "exprs", "extents")

    def __init__(self, tensor, exprs, extents):
        self.tensor = tensor
        self.exprs = exprs
        self.extents = extents

    @property
    def shape(self):
        return self.extents

    @property
    def dtype(self):
        return self.tensor.dtype

    def resolve(self, box):
        return _view(self.tensor, self.exprs, self.extents, box)

    def __getattr__(self, name):
        self.resolve({})  # fails with the out-of-bounds message


def has_index_expr(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (IndexExpr, DynamicIndex)) for i in items)


def index_tensor(tensor, index):
    """tensor[index] for an index holding IndexExprs: a view, or an
    IndexedView when the full extent is out of bounds (a mask must clip it)."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) != tensor.ndim:
        fail(f"a {tensor.ndim}-D tensor indexed with index expressions needs {tensor.ndim} "
             f"indices, got {len(items)}", "index")
    exprs, dynamic = [], []
    for d, i in enumerate(items):
        if isinstance(i, DynamicIndex):
            dynamic.append((d, i.word))
            i = i.expr
        elif isinstance(i, NkiTensor) and d > 0:  # src[ix, offsets[0, i], iz]: a word alone
            dynamic.append((d, i))
            i = IndexExpr(0, {}, ())
        if isinstance(i, IndexExpr):
            exprs.append(i)
        elif isinstance(i, slice):
            fail("a slice cannot be mixed with index expressions (use nl.arange for that "
                 "dimension too)", "index")
        else:
            exprs.append(IndexExpr(_int(i, "an index"), {}, ()))
    n = max(e.ndim for e in exprs)
    aligned, extents = [], [1] * n
    for e in exprs:
        e = e._combine(IndexExpr(0, {}, (1,) * n), 1)  # right-align to n axes
        aligned.append(e)
        for a, x in enumerate(e.extents):
            if x != 1 and extents[a] not in (1, x):
                fail("index expressions of different extents on one axis", "index")
            extents[a] = max(extents[a], x)
    if tensor.on_chip and n < 2:
        fail("index expressions of an on-chip tile need at least 2 axes (partition, free)",
             "index")
    if dynamic:
        return _sliding(tensor, aligned, extents, dynamic)
    if _in_bounds(tensor, aligned, extents, {}):
        return _view(tensor, aligned, extents, {})
    return IndexedView(tensor, aligned, tuple(extents))


def _sliding(tensor, exprs, extents, dynamic):
    """The view at word 0, moved by the word on its dim (IndirectTensor.moved,
    as nl.ds with a runtime start; the same rules)."""
    if len(dynamic) > 1:
        fail("one runtime index word per access (it is the access's one scalar_offset)",
             "dynamic_start", "nki.language.ds")
    d, word = dynamic[0]
    view = _view(tensor, exprs, extents, {})
    full = {a: (0, x) for a, x in enumerate(extents)}
    window = exprs[d].bounds(full)[1] + 1
    if tensor.on_chip and word.dtype.name == "uint32":
        from torchneuron.nki import language as nl
        from torchneuron.nki.isa import tensor_copy

        int_word = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        tensor_copy(int_word, word.reshape(1, 1) if word.ndim != 2 else word)
        word = int_word
    return IndirectTensor.moved(tensor, view, word, d, window=window)


def _in_bounds(tensor, exprs, extents, box):
    full = {a: box.get(a, (0, x))[:2] for a, x in enumerate(extents)}
    for e, size in zip(exprs, tensor.shape):
        lo, hi = e.bounds(full)
        if lo < 0 or hi >= size:
            return False
    return True


def _view(tensor, exprs, extents, box):
    full = {a: box.get(a, (0, x))[:2] for a, x in enumerate(extents)}
    for d, (e, size) in enumerate(zip(exprs, tensor.shape)):
        lo, hi = e.bounds(full)
        if lo < 0 or hi >= size:
            fail(f"index expression {e!r} covers {lo}..{hi} of dimension {d} (size {size}); "
                 "out of bounds (mask it)", "out_of_bounds")
    n = len(extents)
    strides = [0] * n
    offset, partition = tensor.offset, tensor.partition
    for d, e in enumerate(exprs):
        on_partition = tensor.on_chip and d == 0
        for a, c in e.coefs.items():
            if tensor.on_chip and on_partition != (a == 0):
                fail("on chip, the partition dim is indexed by the tile's first axis only "
                     f"(dimension {d} uses axis {a})", "index")
            strides[a] += c * tensor.strides[d]
        start = e.const + sum(c * full[a][0] for a, c in e.coefs.items())
        if on_partition:
            partition += start * tensor.strides[d]
        else:
            offset += start * tensor.strides[d]
    shape = [full[a][1] - full[a][0] for a in range(n)]
    if tensor.on_chip and strides[0] == 0:
        strides[0] = 1  # a single partition
    return NkiTensor(tensor.storage, tensor.dtype, shape, strides, offset, partition)


def clip(value, box):
    """The part of a tile (or IndexedView) inside the mask box."""
    if isinstance(value, IndexedView):
        return value.resolve(box)
    if not isinstance(value, (NkiTensor, IndirectTensor)) or not box:
        return value
    index = []
    for a, size in enumerate(value.shape):
        lo, hi, extent = box.get(a, (0, size, size))
        if size == extent and (lo, hi) != (0, size):
            index.append(slice(lo, hi))
        else:
            index.append(slice(None))
    return value[tuple(index)]
