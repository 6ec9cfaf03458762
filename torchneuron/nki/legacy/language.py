"""neuronxcc.nki.language: the legacy dialect's nl, on top of torchneuron.nki.language.

The names are the current ``nl``'s, plus ``arange`` / ``mgrid`` index
expressions and ``mask=`` on every tile-producing call: the inputs are
clipped to the mask's box, and a result computed on a box is placed at the
box's position in a tile of the full shape (the rest of the tile is
undefined, as on hardware). ``par_dim`` marks the partition dim of an
``ndarray`` shape: dims before it are block dims, each block its own tile
(allocated when first indexed, so blocks live and die separately as the
compiler's rotating buffers do).
"""

import builtins
import functools

from torchneuron.nki import isa as _cur_isa
from torchneuron.nki import language as _cur
from torchneuron.nki import trace as _trace
from torchneuron.nki.legacy.index import (  # noqa: F401  (nl.arange, nl.mgrid)
    IndexedView, IndexExpr, Mask, arange, clip, mask_box, mgrid)
from torchneuron.nki.legacy.masked_result import (
    SKIP, from_partition_0, normalize, partial, partial_nothing, reduction_identity, run_masked,
    skipped)
from torchneuron.nki.legacy.masked_transpose import masked_transpose
from torchneuron.nki.legacy.operand_mask import masked_matmul
from torchneuron.nki.ops import ActivationFunction, AluOp
from torchneuron.nki import indirect as _indirect
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail

for _name in _cur.__all__:
    globals()[_name] = getattr(_cur, _name)


def _expand(result, box):
    """A result computed on the box, placed in a tile of the full shape."""
    if not box or not isinstance(result, NkiTensor):
        return result
    full, index, grown = list(result.shape), [], False
    for a, size in enumerate(result.shape):
        lo, hi, extent = box.get(a, (0, size, size))
        if size == hi - lo and size != extent:
            full[a], grown = extent, True
            index.append(slice(lo, hi))
        else:
            index.append(slice(None))
    if not grown:
        return result
    buffer = _cur.psum if result.storage.buffer == _trace.PSUM else _cur.sbuf
    out = _cur.ndarray(tuple(full), result.dtype, buffer=buffer)
    _cur_isa.tensor_copy(out[tuple(index)], result)
    return out


def masked(fn, triangles=False):
    """fn with the legacy mask= argument (and IndexedView operands).
    triangles: fn is element-wise, so a mask's comparisons over several axes
    (i_p >= i_f) compute the box around them; the elements outside such a
    comparison are not written (legacy/masked_result.py)."""

    @functools.wraps(fn)
    def call(*args, mask=None, **kwargs):
        return run_masked(fn, args, kwargs, mask, triangles, expand=_expand)

    return call


def masked_reduction(fn, op_name):
    """A reduction fn(x, axis, ...) with mask=: masked-out elements take no
    part (a comparison over several axes gives them the reduction's identity
    first, by GpSimd affine_select); the box over the kept axes and the
    comparisons over kept axes only bound the result's written elements."""

    @functools.wraps(fn)
    def call(x, axis, *args, mask=None, keepdims=False, **kwargs):
        return reduce_masked(lambda t: fn(t, axis, *args, keepdims=keepdims, **kwargs),
                             x, axis, keepdims, mask, op_name)

    return call


def reduce_masked(reduce, x, axis, keepdims, mask, op_name):
    """reduce(x) under mask (see masked_reduction); op_name "mean" divides
    each row's sum by its count of masked-in elements."""
    mask = normalize(mask)
    if mask is SKIP:
        return skipped(reduce, (x,), {})
    box = mask_box(mask, triangles=True)
    compute = from_partition_0(box, (x,), True)
    x = clip(x, compute)
    ndim = x.ndim
    axes = {a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    residual = mask.residual() if mask is not None else []
    if not residual:
        result = reduce(x)
    elif op_name == "mean":
        ones = _cur.ndarray(tuple(x.shape), _cur.float32, buffer=_cur.sbuf)
        _cur_isa.memset(ones, 1.0)
        inside = _select_outside(ones, residual, compute, 0.0)
        masked_x = _select_outside(x, residual, compute, 0.0)
        total = _cur.sum(masked_x, tuple(axes), dtype=_cur.float32, keepdims=keepdims)
        count = _cur.sum(inside, tuple(axes), dtype=_cur.float32, keepdims=keepdims)
        out_dtype = skipped(reduce, (x,), {}).dtype  # the plain mean's (traced, dropped)
        result = _cur.elementwise(_cur.divide, total, count, dtype=out_dtype)
    else:
        result = reduce(_select_outside(x, residual, compute,
                                        reduction_identity(op_name, x.dtype)))
    kept = [a for a in range(ndim) if a not in axes]
    new_axis = {a: (a if keepdims else kept.index(a)) for a in kept}
    out_box = {new_axis[a]: b for a, b in box.items() if a in new_axis}
    result = _expand(result, from_partition_0(out_box, (), True))
    out_terms = [(_remap(e, new_axis, result.shape), op) for e, op in residual
                 if not set(e.coefs) & axes]
    return partial(result, out_box, out_terms)


def _remap(expr, new_axis, shape):
    """expr over the reduction's input axes, as one over its result's."""
    coefs = {new_axis[a]: c for a, c in expr.coefs.items()}
    return IndexExpr(expr.const, coefs, tuple(n if a in coefs else 1 for a, n in enumerate(shape)))


class _LegacyAlu(AluOp):
    def __call__(self, x, y, dtype=None, mask=None, **_):
        return masked(lambda a, b: _cur.elementwise(self, a, b, dtype=dtype),
                      triangles=True)(x, y, mask=mask)


class _LegacyActivation(ActivationFunction):
    def __call__(self, x, dtype=None, mask=None, **_):
        return masked(lambda a: _cur.unary(self, a, dtype=dtype), triangles=True)(x, mask=mask)


for _name in list(globals()):
    _value = globals()[_name]
    if type(_value) is AluOp:
        globals()[_name] = _LegacyAlu(_value.name)
    elif type(_value) is ActivationFunction:
        globals()[_name] = _LegacyActivation(_value.name)


class _LegacyCopy(_LegacyActivation):
    """nl.copy: the identity activation as an op, a tile copy when called."""

    def __call__(self, x, dtype=None, mask=None, **_):
        return masked(lambda a: _cur.copy(a, dtype=dtype), triangles=True)(x, mask=mask)


copy = _LegacyCopy("copy")
identity = copy

for _name in ("where", "logical_not", "invert"):  # element-wise
    globals()[_name] = masked(getattr(_cur, _name), triangles=True)
for _name in ("all", "var", "softmax", "rms_norm", "broadcast_to"):
    globals()[_name] = masked(getattr(_cur, _name))


def transpose(x, dtype=None, mask=None, **kwargs):
    """A new SBUF tile x.T; mask= is over x's axes (legacy/masked_transpose.py)."""
    return masked_transpose(_cur.transpose, x, (), dict(dtype=dtype, **kwargs), mask,
                            "nki.language.transpose")


def load_transpose2d(src, dtype=None, mask=None, **kwargs):
    """A new SBUF tile src.T read from HBM; mask= is over src's axes."""
    return masked_transpose(_cur.load_transpose2d, src, (), dict(dtype=dtype, **kwargs), mask,
                            "nki.language.load_transpose2d")

_matmul = masked(_cur.matmul)


def matmul(x, y, transpose_x=False, mask=None, **kwargs):
    """x @ y (x given as [K, M] with transpose_x) in a new PSUM tile; x and y
    may be masked operands (``lhs_T[i_f < 64]``, legacy/operand_mask.py).
    A plain mask= is a bool or box: the reference says a matmul's mask
    cannot tell its operands' free axes apart and masks operands instead,
    so a comparison over several axes is refused."""
    if isinstance(mask, Mask) and mask.residual():
        fail("nl.matmul's mask= cannot hold a comparison over several axes: the reference "
             "masks a matmul's operands instead (nl.matmul(lhs_T[i_k >= i_m], rhs, "
             "transpose_x=True))", "mask", "nki.language.matmul")
    return masked_matmul(lambda a, b: _matmul(a, b, transpose_x=transpose_x, mask=mask,
                                              **kwargs),
                         x, y, 0 if transpose_x else 1)


for _name, _op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"), ("prod", "multiply"),
                   ("mean", "mean"), ("average", "mean")):
    globals()[_name] = masked_reduction(getattr(_cur, _name), _op)


# ---- allocation with block dims ----------------------------------------------

class ParDim(int):
    """nl.par_dim(n): the partition dim of an ndarray shape (block dims come before it)."""


def par_dim(size):
    return ParDim(size)


class BlockTensor:
    """An ndarray with block dims: each block is a separate on-chip tile."""

    def __init__(self, blocks, tile_shape, dtype, buffer, name=None):
        self.blocks = tuple(blocks)
        self.tile_shape = tuple(int(s) for s in tile_shape)
        self.dtype = _cur.as_dtype(dtype)
        self._buffer = buffer
        self._tiles = {}

    @property
    def shape(self):
        return self.blocks + self.tile_shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def buffer(self):
        return self._buffer.name

    def _tile(self, block):
        for b, n in zip(block, self.blocks):
            if not 0 <= b < n:
                fail(f"block index {block} is out of range for block dims {self.blocks}",
                     "out_of_bounds")
        tile = self._tiles.get(block)
        if tile is None:
            tile = _cur.ndarray(self.tile_shape, self.dtype, buffer=self._buffer)
            self._tiles[block] = tile
        return tile

    def _split(self, index):
        index = index if isinstance(index, tuple) else (index,)
        k = len(self.blocks)
        block = []
        for i in index[:k]:
            if isinstance(i, (IndexExpr, slice)) or i is Ellipsis:
                # The reference indexes block dims with loop variables only
                # (a[i, j]): each block is its own physical tile, so an index
                # expression or slice over them would be one access spanning
                # several tiles, which no instruction makes.
                fail("block dims are indexed with ints (loop variables), one block at a time: "
                     "each block is a separate tile, so an index expression or slice cannot "
                     "span them (fold the blocks into a free dim to access them together)",
                     "index")
            block.append(int(i) + (self.blocks[len(block)] if int(i) < 0 else 0))
        if len(block) < k:
            fail(f"index all {k} block dims before the tile's dims", "index")
        return self._tile(tuple(block)), index[k:]

    def __getitem__(self, index):
        tile, rest = self._split(index)
        return tile[rest] if rest else tile

    def __setitem__(self, index, value):
        tile, rest = self._split(index)
        if rest:
            tile[rest] = value
        else:
            tile[...] = value


def ndarray(shape, dtype, buffer=None, name=None, **kwargs):
    """A new tensor; a shape with nl.par_dim after other dims has block dims."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    at = next((i for i, s in enumerate(shape) if isinstance(s, ParDim)), 0)
    if at == 0:
        return _cur.ndarray(shape, dtype, buffer=buffer, name=name, **kwargs)
    buffer = _cur.sbuf if buffer is None else buffer
    if not _cur.is_on_chip(buffer):
        fail("block dims (dims before nl.par_dim) exist for SBUF and PSUM tensors only",
             "buffer", "nki.language.ndarray")
    return BlockTensor(shape[:at], shape[at:], dtype, buffer, name)


def _filled(value):
    def make(shape, dtype, buffer=None, name=None, **kwargs):
        t = ndarray(shape, dtype, buffer=buffer, name=name)
        if isinstance(t, BlockTensor):
            import itertools

            for block in itertools.product(*(range(n) for n in t.blocks)):
                _cur_isa.memset(t[block], value)
        else:
            _cur_isa.memset(t, value)
        return t

    return make


zeros = _filled(0)
ones = _filled(1)


def full(shape, fill_value, dtype, buffer=None, name=None, **kwargs):
    return _filled(fill_value)(shape, dtype, buffer=buffer, name=name)


# ---- movement with masks -----------------------------------------------------

_COMPARE = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


def _select_outside(src, terms, box, fill):
    """A new SBUF tile of src's dtype: src where every comparison (expr, op)
    of terms holds (at the box's coordinates), else fill. GpSimd
    affine_select, one per comparison, as masks are lowered to selects."""
    shape = tuple(src.shape)
    out = src
    for expr, op in terms:
        if expr.ndim != len(shape):
            fail(f"the mask's comparison {expr!r} {op} 0 spans {expr.ndim} axes; the tile has "
                 f"{len(shape)}", "mask")
        offset = expr.const + builtins.sum(c * box.get(a, (0,))[0] for a, c in expr.coefs.items())
        pattern = [[expr.coefs.get(a, 0), shape[a]] for a in range(1, len(shape))]
        dst = _cur.ndarray(shape, src.dtype, buffer=_cur.sbuf)
        _cur_isa.affine_select(dst, pattern, expr.coefs.get(0, 0), out, fill,
                               cmp_op=getattr(_cur, _COMPARE[op]), offset=offset)
        out = dst
    return out


def _triangle(terms, box, shape):
    """A float32 SBUF tile of shape: 1 where every comparison of terms holds
    (at the box's coordinates), else 0."""
    pred = _cur.ndarray(shape, _cur.float32, buffer=_cur.sbuf)
    _cur_isa.memset(pred, 1.0)
    return _select_outside(pred, terms, box, 0.0)


def load(src, mask=None, dtype=None, **_):
    """A new SBUF tile holding src; under a mask only the masked box is read
    (a comparison over several axes reads the box around it: the elements
    outside it are undefined in the tile). src may be indexed by a tile of
    indices (a gather of rows: indirect DMA; the mask then keeps a box of
    partitions, with their indices, and of free elements)."""
    mask = normalize(mask)
    shape = _cur._tile_shape(src) if isinstance(src, NkiTensor) else tuple(src.shape)
    tile = _cur.ndarray(shape, dtype or src.dtype, buffer=_cur.sbuf)
    if mask is SKIP:
        return partial_nothing(tile)
    box = mask_box(mask, triangles=True)
    _cur_isa.dma_copy(clip(tile, box), clip(src, box))
    return partial(tile, box, mask.residual() if mask is not None else [])


def store(dst, value, mask=None, **_):
    """Writes value to dst; under a mask only the masked box is written. dst
    may be indexed by a tile of indices (a scatter of rows: indirect DMA)."""
    mask = normalize(mask)
    if mask is SKIP:
        return
    box = mask_box(mask, triangles=True)
    triangle = mask.residual() if isinstance(mask, Mask) else []
    if not triangle:
        _cur.store(clip(dst, box), clip(value, box))
        return
    # A comparison over several axes (i_p >= i_f): the box around it is read,
    # the masked elements replaced, and the box written back, so the
    # elements outside the mask keep what dst held. On chip the merge runs
    # from partition 0 (engines write the partitions they read): a box
    # starting at row lo is read into rows lo.. of the merged tile, and the
    # predicate also asks i_p >= lo.
    compute = from_partition_0(box, (value,), True)
    dst, value = clip(dst, box), clip(value, compute)
    if not isinstance(dst, NkiTensor) or not isinstance(value, NkiTensor):
        fail("a store under a mask over several axes writes a tile to a plain tensor view",
             "mask", "nki.language.store")
    shape = tuple(value.shape)
    lo = box.get(0, (0,))[0] if compute is not box else 0
    rows = (slice(lo, None),) + (slice(None),) * (len(shape) - 1)
    terms = list(triangle)
    if lo:
        terms.append((IndexExpr(-lo, {0: 1}, (shape[0],) + (1,) * (len(shape) - 1)), ">="))
    merged = _cur.ndarray(shape, dst.dtype, buffer=_cur.sbuf)
    _cur_isa.dma_copy(merged[rows] if lo else merged, dst)
    _cur_isa.tensor_copy_predicated(merged, value, _triangle(terms, compute, shape))
    _cur_isa.dma_copy(dst, merged[rows] if lo else merged)


def atomic_rmw(dst, value, op, mask=None, **_):
    """dst = op(dst, value) on the HBM rows an index tile names, atomically
    (every repeated index adds); under a mask only the masked box. A
    comparison over several axes (i_p >= i_f) gives the masked-out elements
    of value op's identity (0 for add) by affine_select, so they leave dst
    as it was."""
    mask = normalize(mask)
    if mask is SKIP:
        return None
    box = mask_box(mask, triangles=True)
    residual = mask.residual() if mask is not None else []
    if residual:
        value = _identity_outside(value, residual, box, op, clip(dst, box))
    elif box and isinstance(value, NkiTensor):
        value = clip(value, box)
    return _indirect.atomic_rmw(clip(dst, box), value, op)


def _identity_outside(value, residual, box, op, dst):
    """value over the box, its elements outside the comparisons residual
    replaced by op's identity (an SBUF tile shaped as dst). The selects run
    from partition 0 (engines write the partitions they read); the rows
    below the box's first are sliced off."""
    from torchneuron.nki.legacy.masked_result import (
        alu_name, from_partition_0, reduction_identity)

    identity = reduction_identity(alu_name(op, "nki.language.atomic_rmw"), dst.dtype)
    compute = from_partition_0(box, (), True)
    if not isinstance(value, NkiTensor):
        try:
            number = float(value)
        except (TypeError, ValueError):
            fail(f"value must be a tile or a number, got {type(value).__name__}", "operand",
                 "nki.language.atomic_rmw")
        shape = tuple(n if a != 0 or 0 not in compute else compute[0][1]
                      for a, n in enumerate(dst.shape))
        value = _cur.full(shape, number, dst.dtype, buffer=_cur.sbuf)
    else:
        value = clip(value, compute)
        if value.storage.buffer == _trace.PSUM:
            value = _cur.copy(value, dtype=dst.dtype)
    selected = _select_outside(value, residual, compute, identity)
    lo = box.get(0, (0,))[0]
    return selected[(slice(lo, None),) + (slice(None),) * (selected.ndim - 1)] if lo else selected


def program_id(axis=0):
    return _cur.program_id(axis)


def spmd_dim(*sizes, **_):
    """Accepted in launch grids for compatibility: the product of the sizes."""
    import math

    return math.prod(int(s) for s in sizes)


__all__ = sorted(set(_cur.__all__) | {"arange", "mgrid", "par_dim", "spmd_dim", "atomic_rmw"})
