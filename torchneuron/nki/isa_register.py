"""nki.isa's virtual registers: register_alloc, register_move, register_load
and register_store.

A register holds a 32-bit scalar for the engine sequencers. A value moved in
is a trace-time constant (usable as a Python int, e.g. a loop count); a value
loaded from memory exists only when the kernel runs, so register_load is a
DMA that snapshots the element into a [1, 1] SBUF word (the sequencer's read)
and register_store copies that word out, its raw bits. A loaded register
bounds a compiled loop (nl.fori_loop, nl.while_loop's condition) or moves
an access (nl.ds start, scalar_offset) while the kernel runs.
"""

import numbers

from torchneuron.nki import trace
from torchneuron.nki.isa import _tile, dma_copy, memset
from torchneuron.nki.trace import fail


class VirtualRegister:
    """A virtual register (nisa.register_alloc): a constant known at trace time,
    or a value loaded from memory while the kernel runs."""

    __slots__ = ("constant", "word")

    def __init__(self, constant=None):
        self.constant = constant
        self.word = None  # the [1, 1] SBUF snapshot of a loaded value

    def __index__(self):
        if self.constant is None:
            fail("this register holds a value loaded while the kernel runs; only a constant "
                 "(register_alloc(x) / register_move) is known at trace time (a runtime value "
                 "bounds an nl.fori_loop, not a Python loop)",
                 "dynamic_register", "nki.isa.VirtualRegister")
        return self.constant

    __int__ = __index__

    def __repr__(self):
        held = self.constant if self.constant is not None else (
            "loaded" if self.word is not None else "unset")
        return f"VirtualRegister({held})"


def _constant(x, name):
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        fail(f"a register holds a compile-time integer, got {x!r}", "operand", name)
    if not -2**31 <= int(x) < 2**31:
        fail(f"{x} does not fit a 32-bit register", "operand", name)
    return int(x)


def _register(reg, name):
    if not isinstance(reg, VirtualRegister):
        fail(f"expected a register from nisa.register_alloc, got {type(reg).__name__}",
             "operand", name)
    return reg


def _scalar_tile(t, what, name):
    _tile(t, what, name)
    if t.size != 1:
        fail(f"{what} must hold exactly one element (shape [1] or [1, 1]), got {list(t.shape)}",
             "register_operand", name)
    if t.storage.buffer == trace.PSUM:
        fail(f"{what} must be in HBM or SBUF", "register_operand", name)
    if t.dtype.itemsize > 4:
        fail(f"a register holds up to 32 bits; {what} is {t.dtype}", "register_operand", name)
    return t if t.ndim == 2 or t.on_chip else t.reshape(1, 1)


def register_alloc(x=None):
    """A new virtual register, holding the integer x when given."""
    return VirtualRegister(None if x is None else _constant(x, "nki.isa.register_alloc"))


def register_move(dst, imm):
    """dst = imm, a compile-time constant integer."""
    name = "nki.isa.register_move"
    reg = _register(dst, name)
    reg.constant, reg.word = _constant(imm, name), None
    return reg


def register_load(dst, src):
    """dst = the single element of src (HBM or SBUF), read when the kernel runs."""
    name = "nki.isa.register_load"
    from torchneuron.nki import language as nl

    reg = _register(dst, name)
    src = _scalar_tile(src, "src", name)
    word = nl.ndarray((1, 1), src.dtype, buffer=nl.sbuf)
    dma_copy(word, src)
    reg.constant, reg.word = None, word
    return reg


def register_store(dst, src):
    """The register src's value into dst, a one-element HBM or SBUF tensor (raw
    bits of a loaded value; a constant converted to dst's dtype)."""
    name = "nki.isa.register_store"
    from torchneuron.nki import language as nl

    reg = _register(src, name)
    dst = _scalar_tile(dst, "dst", name)
    if reg.constant is None and reg.word is None:
        fail("the register was never given a value (register_alloc(x), register_move or "
             "register_load)", "register_unset", name)
    if reg.word is not None:
        word = reg.word
        if word.dtype is not dst.dtype:
            if word.dtype.itemsize != dst.dtype.itemsize:
                fail(f"a register loaded from {word.dtype} stores its raw bits: dst must be "
                     f"{word.dtype.itemsize * 8}-bit, got {dst.dtype}", "register_operand", name)
            word = word.view(dst.dtype)
        dma_copy(dst, word)
        return dst
    if dst.on_chip:
        memset(dst, reg.constant)
    else:
        word = nl.ndarray((1, 1), dst.dtype, buffer=nl.sbuf)
        memset(word, reg.constant)
        dma_copy(dst, word)
    return dst

