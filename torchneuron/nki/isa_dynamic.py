"""nki.isa.tensor_copy_dynamic_src / tensor_copy_dynamic_dst: the compute
instructions that take a start read while the kernel runs.

The ISA reference gives a runtime offset to these two copies only ("with src
located at a dynamic offset within each partition"; "the dynamic offset must
be a scalar value resided in SBUF"; the same partitions and elements per
partition on both sides; cost max(MIN_II_DYNAMIC, N), MIN_II_DYNAMIC roughly
600 cycles). The moving side is a free-dim window of an SBUF / PSUM tile
whose start is an int32 word, a loaded register or an NkiScalar:
``t[:, nl.ds(word, 16)]`` or ``t.ap(..., scalar_offset=word, indirect_dim=1)``.
Any other compute instruction given such a view fails (``dynamic_start``,
torchneuron/nki/isa.py ``_tile``): on hardware only DMAs and these copies
read an address from memory.
"""

from torchneuron.nki import trace
from torchneuron.nki.isa import _engine, _mark_written, _rec
from torchneuron.nki.tensor import IndirectTensor, NkiTensor
from torchneuron.nki.trace import fail

_ENGINES = (trace.VECTOR_ENGINE, trace.SCALAR_ENGINE, trace.GPSIMD_ENGINE)


def _copy(dst, src, moved_is_dst, engine, name):
    moved, other = (dst, src) if moved_is_dst else (src, dst)
    what = "dst" if moved_is_dst else "src"
    if not (isinstance(moved, IndirectTensor) and moved.scalar):
        fail(f"{what} of {name} is a tile window with a runtime start "
             f"(t[:, nl.ds(word, n)] or t.ap(..., scalar_offset=word)), got "
             f"{type(moved).__name__}", "operand", name)
    if not isinstance(other, NkiTensor):
        fail(f"the other side of {name} is a plain tile, got {type(other).__name__}", "operand",
             name)
    view = moved.row
    if not view.on_chip or not other.on_chip:
        fail(f"{name} copies within SBUF / PSUM (a DMA moves HBM data: nisa.dma_copy)",
             "on_chip_only", name)
    code = _engine(engine, trace.VECTOR_ENGINE)
    if code not in _ENGINES:
        fail(f"{name} runs on the Vector, Scalar or GpSimd engine", "engine", name)
    d, s = (view, other) if moved_is_dst else (other, view)
    flags = trace.FLAG_SCALAR_OFFSET | (trace.FLAG_INDIRECT_DST if moved_is_dst
                                        else trace.FLAG_INDIRECT_SRC)
    trace.current().emit(name, trace.TENSOR_COPY, code,
                         [_rec(d, name), _rec(s, name), _rec(moved.indices, name)], flags=flags,
                         imm=(0.0, 0.0, float(moved.bound), float(moved.step)))
    if not moved_is_dst:
        _mark_written(d)
    return dst


def tensor_copy_dynamic_src(dst, src, engine=None, **_):
    """dst = src, src a free-dim window of an SBUF / PSUM tile starting where
    an int32 word says when the kernel runs (converted to dst's dtype)."""
    return _copy(dst, src, False, engine, "nki.isa.tensor_copy_dynamic_src")


def tensor_copy_dynamic_dst(dst, src, engine=None, **_):
    """dst = src, dst a free-dim window of an SBUF / PSUM tile starting where
    an int32 word says when the kernel runs."""
    return _copy(dst, src, True, engine, "nki.isa.tensor_copy_dynamic_dst")
