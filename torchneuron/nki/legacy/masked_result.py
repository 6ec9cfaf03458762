"""What a masked instruction of the legacy dialect writes.

The reference's masking: a mask "informs the compiler to skip generating
the instruction or generate the instruction with a smaller input tile
shape". So

* a mask that is a plain bool (comparisons of loop variables and
  program ids, which trace to ints: ``q_tile * 128 >= k_tile * 512``) keeps
  (True) or drops (False) the whole instruction;
* a masked instruction's result, assigned to a tile (``t[...] = nl.exp(x,
  mask=m)``) or accumulated into one (``psum += nl.matmul(..., mask=m)``),
  writes the masked elements only: the others keep what the tile held, as
  the compiler makes the assigned tile the instruction's destination.

A result is therefore a ``PartialTile``: the full-shape tile plus the part
of it the instruction wrote (a box, the mask's comparisons over several
axes, or nothing when the instruction was dropped).
"""

from torchneuron.nki import isa as _cur_isa
from torchneuron.nki import language as _cur
from torchneuron.nki import trace as _trace
from torchneuron.nki.legacy.index import IndexExpr, Mask, clip, mask_box
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


class _Skip:
    """The mask False: the instruction is not generated."""

    def __repr__(self):
        return "mask=False"


SKIP = _Skip()


def normalize(mask):
    """None (no mask), SKIP, or a Mask. A bool mask (loop variables and
    program ids compared at trace time) keeps or drops the instruction."""
    if mask is None or isinstance(mask, (Mask, _Skip)):
        return mask
    if isinstance(mask, bool) or type(mask).__name__ == "bool_":
        return None if bool(mask) else SKIP
    fail(f"mask must be a comparison of index expressions (or of loop variables), got "
         f"{type(mask).__name__}", "mask")


def run_masked(fn, args, kwargs, mask, triangles=False, expand=None, elementwise=False):
    """fn on the operands clipped to the mask's box; the result placed in a
    full-shape tile (expand) and marked with what it holds. triangles: fn is
    element-wise and takes comparisons over several axes (their box)."""
    mask = normalize(mask)
    if mask is SKIP:
        return skipped(fn, args, kwargs)
    box = mask_box(mask, triangles)
    compute = from_partition_0(box, args, triangles or elementwise)
    args = [clip(a, compute) for a in args]
    kwargs = {k: clip(v, compute) for k, v in kwargs.items()}
    result = fn(*args, **kwargs)
    if expand is not None:
        result = expand(result, compute)
    return partial(result, box, mask.residual() if triangles and mask is not None else [])


def from_partition_0(box, operands, elementwise):
    """The box an element-wise instruction computes: from partition 0 when
    the mask starts further down, as engines write the partitions they read
    and a new result tile starts at partition 0 (the rows above the mask are
    computed but not written: the result is marked with the mask's box)."""
    if not elementwise or 0 not in box or box[0][0] == 0:
        return box
    if not all(t.on_chip for t in operands if isinstance(t, NkiTensor)):
        return box
    lo, hi, n = box[0]
    return {**box, 0: (0, hi, n)}


def skipped(fn, args, kwargs):
    """The result of a dropped instruction: fn is traced for its result's
    shape and dtype, then its instructions are removed."""
    tracer = _trace.current()
    n = len(tracer.instructions)
    result = fn(*args, **kwargs)
    del tracer.instructions[n:]
    if isinstance(result, NkiTensor):
        return PartialTile(result, None, None)
    return result


def partial_nothing(tile):
    """tile, marked as written nowhere (its instruction was dropped)."""
    return PartialTile(tile, None, None)


def partial(result, box, residual):
    """result marked with the box / comparisons that bound what was written
    (result unchanged when that is all of it)."""
    if not isinstance(result, NkiTensor):
        return result
    shape = tuple(result.shape)
    box = {a: (lo, hi, n) for a, (lo, hi, n) in box.items()
           if a < len(shape) and n == shape[a] and (lo, hi) != (0, n)}
    residual = [(e, op) for e, op in residual if len(e.extents) == len(shape) and
                all(x in (1, n) for x, n in zip(e.extents, shape))]
    if not box and not residual:
        return result
    return PartialTile(result, box, residual)


class PartialTile(NkiTensor):
    """A result tile of which only ``box`` (and where the ``residual``
    comparisons hold) was written; box None: nothing was (dropped)."""

    __slots__ = ("box", "residual")

    def __init__(self, tile, box, residual):
        super().__init__(tile.storage, tile.dtype, tile.shape, tile.strides, tile.offset,
                         tile.partition)
        self.box = box
        self.residual = residual

    def plain(self):
        return NkiTensor(self.storage, self.dtype, self.shape, self.strides, self.offset,
                         self.partition)

    def _check(self, dst, name):
        if tuple(dst.shape) != tuple(self.shape):
            fail(f"a masked result of shape {tuple(self.shape)} is written to a view of shape "
                 f"{tuple(dst.shape)}", "shape_mismatch", name)

    def _simple(self):
        """Whether the written part is a box starting at partition 0 (a plain
        copy of it obeys the partition-start rule)."""
        return not self.residual and self.box.get(0, (0,))[0] == 0

    def _predicated(self, dst):
        """(dst, value, predicate) over the box from partition 0: 1 where the
        element was written (the box's first rows and the comparisons over
        several axes are predicate terms)."""
        lo = self.box.get(0, (0,))[0]
        box = {a: b for a, b in self.box.items() if a != 0}
        if 0 in self.box:
            box[0] = (0,) + tuple(self.box[0][1:])
        terms = list(self.residual)
        if lo:
            extents = tuple(n if a == 0 else 1 for a, n in enumerate(self.shape))
            terms.append((IndexExpr(-lo, {0: 1}, extents), ">="))
        dst, value = clip(dst, box), clip(self.plain(), box)
        from torchneuron.nki.legacy.language import _triangle

        return dst, value, _triangle(terms, box, tuple(value.shape))

    def mask(self):
        """The written part as a Mask over the tile's axes."""
        terms = list(self.residual)
        for a, (lo, hi, n) in self.box.items():
            extents = tuple(n if d == a else 1 for d in range(len(self.shape)))
            terms += [(IndexExpr(-lo, {a: 1}, extents), ">="),
                      (IndexExpr(-hi, {a: 1}, extents), "<")]
        return Mask(terms)

    def assign_into(self, dst):
        """dst[...] = self: only the written elements."""
        from torchneuron.nki.tile_operators import assign

        if self.box is None:
            return
        self._check(dst, "assignment")
        if not dst.on_chip:
            from torchneuron.nki.legacy.language import store

            store(dst, self.plain(), mask=self.mask())
        elif self._simple():
            assign(clip(dst, self.box), clip(self.plain(), self.box))
        else:
            _cur_isa.tensor_copy_predicated(*self._predicated(dst))

    def add_into(self, dst, op_name, inplace):
        """dst op= self: only the written elements change."""
        if self.box is None:
            return dst
        self._check(dst, "+=")
        if self._simple():
            inplace(clip(dst, self.box), clip(self.plain(), self.box), op_name)
            return dst
        region, value, predicate = self._predicated(dst)
        if region.storage.buffer == _trace.PSUM and value.storage.buffer == _trace.PSUM:
            # (a masked transpose's PSUM result into a PSUM tile: an element-wise
            # instruction reads at most one PSUM input, so it moves to SBUF)
            value = _cur.copy(value)
        combined = _cur.elementwise(getattr(_cur, op_name), region, value, dtype=region.dtype)
        _cur_isa.tensor_copy_predicated(region, combined, predicate)
        return dst


def reduction_identity(op_name, dtype):
    """The value a masked-out element takes so it changes no reduction
    (an integer tile's extremes for max / min: inf does not convert)."""
    import numpy as np

    if op_name in ("add", "bitwise_or", "bitwise_xor"):
        return 0.0
    if op_name == "multiply":
        return 1.0
    if op_name in ("maximum", "minimum"):
        if dtype.is_float:
            return float("-inf") if op_name == "maximum" else float("inf")
        info = np.iinfo(dtype.numpy if dtype.numpy is not None else np.int32)
        return float(info.min if op_name == "maximum" else info.max)
    fail(f"a mask over several axes on a {op_name} reduction: the masked-out elements "
         "have no identity value to take", "mask")


def alu_name(op, name):
    """The ALU op's name (nl.max, np.max, "maximum"...), for its identity."""
    from torchneuron.nki.ops import AluOp, _numpy_ops

    if isinstance(op, AluOp):
        return op.name
    if isinstance(op, str):
        return op
    found = getattr(op, "alu_name", None) or _numpy_ops().get(op)
    if found is None:
        fail(f"{op!r} is not an ALU op (nl.add, nl.maximum, np.max, ...)", "operand", name)
    return found
