"""nki.isa's device scalars: NkiScalar, scalar_load and scalar_store.

An NkiScalar holds one integer computed on the device. scalar_load reads a
[1, 1] int32 tensor (a DMA into a [1, 1] SBUF word); arithmetic on scalars
(+, -, * with Python ints or other scalars, unary -) and comparisons record
exact 32-bit instructions that wrap on overflow (100000 * 100000 is
1410065408), and scalar_store writes the word out. The value exists only
while the kernel runs: it bounds an nl.fori_loop, starts an nl.ds window or
is an access pattern's scalar_offset, but is no Python int; a comparison's
result cannot be used, as the reference says for 32-bit scalars.

An int64 scalar (scalar_load of an nl.int64 tile) is 64 bits wide for good:
+, -, * with ints or int64 scalars wrap at 64 bits, a comparison is refused
when traced, it is stored only into int64 tiles and moves HBM accesses
(scalar_offset, nl.ds) but bounds no loop, as the reference's NkiScalar
page says. Its words move by DMA, since no compute engine has 64-bit lanes.
"""

import numbers

from torchneuron.nki import trace
from torchneuron.nki.isa import _emit, _rec, _tile, dma_copy, tensor_copy
from torchneuron.nki.ops import alu_code
from torchneuron.nki.trace import fail

_SCALAR = "nki.isa.NkiScalar"


class NkiScalar:
    """One integer computed on the device (from nisa.scalar_load); arithmetic
    with ints or other scalars gives new scalars, wrapping at 32 bits."""

    __slots__ = ("state", "dtype", "is_comparison")

    def __init__(self, state, dtype=None, is_comparison=False):
        from torchneuron.nki import language as nl

        self.state = state  # the [1, 1] int32 SBUF word holding the value
        self.dtype = nl.int32 if dtype is None else dtype
        self.is_comparison = is_comparison

    def _word(self, name):
        if self.is_comparison:
            fail("the result of comparing NkiScalars cannot be used (the reference traces it "
                 "but gives it no use for 32-bit scalars)", "scalar_comparison", name)
        return self.state

    def _binary(self, other, op, reverse=False, comparison=False):
        from torchneuron.nki import language as nl

        name = _SCALAR
        word = self._word(name)
        wide = self.dtype is nl.int64
        if comparison and wide:
            fail("int64 NkiScalars do not compare (the reference rejects it: only +, - and * "
                 "exist at 64 bits)", "scalar_comparison", name)
        if isinstance(other, NkiScalar):
            if other.dtype is not self.dtype:
                fail(f"an NkiScalar combines with one of its own width: {self.dtype} and "
                     f"{other.dtype}", "scalar_operand", name)
            operand, imm = _rec(other._word(name), name), 0
        elif isinstance(other, numbers.Integral) and not isinstance(other, bool):
            bits = 64 if wide else 32
            if not -2**(bits - 1) <= int(other) < 2**(bits - 1):
                fail(f"{other} does not fit a {bits}-bit NkiScalar", "operand", name)
            if abs(int(other)) >= 2**53:  # the record's immediate is a double
                fail(f"an immediate of an int64 NkiScalar is below 2**53 in magnitude, got "
                     f"{other} (load a larger one from a tile)", "operand", name)
            operand, imm = trace.NO_AP, int(other)
        else:
            return NotImplemented
        out = nl.ndarray((1, 1), self.dtype, buffer=nl.sbuf)
        _emit(name, trace.SCALAR_INT, trace.VECTOR_ENGINE, out,
              [_rec(out, name), _rec(word, name), operand], func=(alu_code(op),),
              flags=trace.FLAG_REVERSE0 if reverse else 0, imm=(imm,))
        return NkiScalar(out, self.dtype, comparison)

    def __add__(self, other):
        return self._binary(other, "add")

    def __radd__(self, other):
        return self._binary(other, "add", reverse=True)

    def __sub__(self, other):
        return self._binary(other, "subtract")

    def __rsub__(self, other):
        return self._binary(other, "subtract", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "multiply")

    def __rmul__(self, other):
        return self._binary(other, "multiply", reverse=True)

    def __neg__(self):
        return self._binary(0, "subtract", reverse=True)

    def __lt__(self, other):
        return self._binary(other, "less", comparison=True)

    def __le__(self, other):
        return self._binary(other, "less_equal", comparison=True)

    def __gt__(self, other):
        return self._binary(other, "greater", comparison=True)

    def __ge__(self, other):
        return self._binary(other, "greater_equal", comparison=True)

    def __eq__(self, other):
        return self._binary(other, "equal", comparison=True)

    def __ne__(self, other):
        return self._binary(other, "not_equal", comparison=True)

    __hash__ = object.__hash__

    def __index__(self):
        fail("an NkiScalar exists only while the kernel runs, so it is no Python int (a "
             "Python loop or if on it): bound an nl.fori_loop with it, or use it as an nl.ds "
             "start or an access pattern's scalar_offset", "dynamic_scalar", _SCALAR)

    __int__ = __index__
    __bool__ = __index__

    def __repr__(self):
        return f"NkiScalar({self.dtype}{', comparison' if self.is_comparison else ''})"


def _word_tile(t, what, name):
    from torchneuron.nki import language as nl

    _tile(t, what, name)
    if t.size != 1:
        fail(f"{what} must be a 1x1 tensor, got {list(t.shape)}", "scalar_operand", name)
    if t.dtype not in (nl.int32, nl.int64):
        fail(f"{what} must be int32 or int64 (unsigned dtypes are not accepted), got {t.dtype}",
             "scalar_operand", name)
    return t if t.ndim == 2 or t.on_chip else t.reshape(1, 1)


def scalar_load(src):
    """An NkiScalar holding the value of src, a 1x1 int32 tensor in SBUF or
    HBM, read while the kernel runs."""
    name = "nki.isa.scalar_load"
    from torchneuron.nki import language as nl

    src = _word_tile(src, "src", name)
    word = nl.ndarray((1, 1), src.dtype, buffer=nl.sbuf)
    if src.on_chip and src.dtype is nl.int32:
        tensor_copy(word, src)
    else:  # int64 words move by DMA (no engine has 64-bit lanes)
        dma_copy(word, src)
    return NkiScalar(word, src.dtype)


def scalar_store(dst, src):
    """Writes the scalar src into dst, a 1x1 tensor of its width (int32 or
    int64; SBUF, PSUM or HBM)."""
    name = "nki.isa.scalar_store"
    from torchneuron.nki import language as nl

    if not isinstance(src, NkiScalar):
        fail(f"src must be an NkiScalar, got {type(src).__name__}", "operand", name)
    dst = _word_tile(dst, "dst", name)
    if dst.dtype is not src.dtype:
        fail(f"dst must have the scalar's width: a {src.dtype} scalar into a {dst.dtype} tile "
             "(store at the scalar's own width and convert in memory)", "scalar_operand", name)
    word = src._word(name)
    if dst.on_chip and dst.dtype is nl.int32:
        tensor_copy(dst, word)
    else:
        dma_copy(dst, word)
    return dst
