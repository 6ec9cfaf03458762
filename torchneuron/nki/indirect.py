"""dma_copy's indirect form: a gather or scatter of HBM rows by an index tile.

The NKI ISA reference (nki.isa.dma_copy) documents it: with software DGE the
GpSimd engine generates the descriptors while the instruction runs, one per
row, from "a list of dynamic indices from SBUF"; bounds are checked at run
time (``oob_mode=error`` fails, ``oob_mode=skip`` skips the row); with
``dst_rmw_op`` only ``oob_mode.error`` is allowed, and ``unique_indices``
says whether a read-modify-write scatter's indices are unique (duplicates
are serialised by the compiler when they are not). nl.load / nl.store /
nl.atomic_rmw of an indexed tensor come here too, and so does an access
pattern's runtime ``scalar_offset`` (one word moving a plain copy's side:
any DGE but none, since the reference gives "a dynamic start address" to
software and hardware DGE). The rules:

* ``indirect_dge``      software DGE only (dge_mode unknown or swdge); a
                        scalar_offset copy any DGE but none;
* ``indirect_dma``      exactly one side indexed, an HBM tensor, the other
                        side an SBUF tile;
* ``indirect_indices``  the indices an int32 / uint32 SBUF tile [P, 1], one
                        per partition of the tile (a scalar_offset: one
                        [1, 1] word);
* ``indirect_rmw_oob``  a read-modify-write allows only oob_mode=error;
* ``shape_mismatch``    a row has the tile's elements per partition;
* at run time ``oob_mode`` (an index out of bounds under oob_mode=error) and
  ``unique_indices`` (a repeated index in a read-modify-write scatter
  declared unique).
"""

from torchneuron.nki import dtypes, trace
from torchneuron.nki.ops import alu_code
from torchneuron.nki.tensor import IndirectTensor, NkiTensor
from torchneuron.nki.trace import fail

_INDEX_DTYPES = (dtypes.int32, dtypes.uint32)


def _mode(mode):
    return None if mode is None else str(getattr(mode, "name", mode))


def _check_indices(idx, tile, name):
    if not isinstance(idx, NkiTensor) or idx.storage.buffer != trace.SBUF:
        where = idx.buffer if isinstance(idx, NkiTensor) else type(idx).__name__
        fail(f"the indices of an indirect access are an SBUF tile, got {where}",
             "indirect_indices", name)
    if idx.dtype not in _INDEX_DTYPES or idx.ndim != 2 or idx.shape[1] != 1:
        fail(f"the indices are an int32 / uint32 tile [P, 1], got a {list(idx.shape)} "
             f"{idx.dtype} tile", "indirect_indices", name)
    if idx.shape[0] != tile.shape[0]:
        fail(f"one index per partition: {idx.shape[0]} indices for a {tile.shape[0]}-partition "
             "tile", "indirect_indices", name)


def _flags(dst_rmw_op, oob_mode, unique_indices, name):
    """The flags every indirect copy shares: oob_mode and the read-modify-write."""
    skip = _mode(oob_mode) == "skip"
    if _mode(oob_mode) not in (None, "error", "skip"):
        fail(f"oob_mode must be nisa.oob_mode.error or skip, got {oob_mode!r}", "operand", name)
    flags = trace.FLAG_OOB_SKIP if skip else 0
    if dst_rmw_op is not None:
        try:
            add = alu_code(dst_rmw_op) == alu_code("add")
        except (TypeError, KeyError):
            add = False
        if not add:
            fail(f"dst_rmw_op must be nl.add (the only read-modify-write a DMA does), got "
                 f"{dst_rmw_op!r}", "operand", name)
        if skip:
            fail("a read-modify-write dma_copy (dst_rmw_op) allows only oob_mode=error",
                 "indirect_rmw_oob", name)
        flags |= trace.FLAG_ACCUMULATE | (trace.FLAG_UNIQUE_INDICES if unique_indices else 0)
    return flags


def indirect_copy(dst, src, dst_rmw_op, oob_mode, dge_mode, unique_indices, name):
    """One DMA_COPY with the indexed side's row 0, the tile and the indices."""
    scatter = isinstance(dst, IndirectTensor)
    if scatter and isinstance(src, IndirectTensor):
        fail("an indirect dma_copy indexes src or dst, not both", "indirect_dma", name)
    rows, tile = (dst, src) if scatter else (src, dst)
    flags = _flags(dst_rmw_op, oob_mode, unique_indices, name) | \
        (trace.FLAG_INDIRECT_DST if scatter else trace.FLAG_INDIRECT_SRC)
    if rows.scalar:
        return _scalar_offset_copy(dst, src, rows, tile, flags, dge_mode, name)
    if _mode(dge_mode) not in (None, "unknown", "swdge"):
        fail(f"a gather / scatter dma_copy runs on software DGE (dge_mode unknown or swdge), got "
             f"{_mode(dge_mode)}", "indirect_dge", name)
    if rows.base.on_chip:
        fail("an indirect dma_copy indexes the rows of an HBM tensor", "indirect_dma", name)
    if not isinstance(tile, NkiTensor) or tile.storage.buffer != trace.SBUF:
        what = tile.buffer if isinstance(tile, NkiTensor) else type(tile).__name__
        fail(f"the other side of an indirect dma_copy is an SBUF tile, got {what}",
             "indirect_dma", name)
    _check_indices(rows.indices, tile, name)
    parts = rows.row.shape[0]  # 1, or the tile's partitions when another dim is indexed
    if parts not in (1, tile.shape[0]):
        fail(f"the access pattern has {parts} partitions but the tile {tile.shape[0]}",
             "shape_mismatch", name)
    if rows.row.size // parts != tile.free_size():
        fail(f"each indexed row has {rows.row.size // parts} elements "
             f"({list(rows.row.shape[1:])}) but the tile {tile.free_size()} per partition "
             f"({list(tile.shape)})", "shape_mismatch", name)
    dst_rec = (rows.row if scatter else tile).record(name=name)[0]
    src_rec = (tile if scatter else rows.row).record(name=name)[0]
    idx_rec = rows.indices.record(name=name)[0]
    trace.current().emit(name, trace.DMA_COPY, trace.DMA_ENGINE, [dst_rec, src_rec, idx_rec],
                         flags=flags, imm=(float(rows.bound), float(rows.step)))
    return dst


def _scalar_offset_copy(dst, src, moved, other, flags, dge_mode, name):
    """A plain dma_copy whose one side starts where a word read while the
    kernel runs says (``x.ap(..., scalar_offset=word, indirect_dim=d)``).
    The reference (nki.isa.dma_copy) gives a dynamic start address to
    software and hardware DGE, so any dge_mode but none."""
    if _mode(dge_mode) not in (None, "unknown", "swdge", "hwdge"):
        fail(f"a scalar_offset (a start address read while the kernel runs) needs DGE: "
             f"dge_mode unknown, swdge or hwdge, got {_mode(dge_mode)}", "indirect_dge", name)
    if not isinstance(other, NkiTensor):
        fail(f"the other side of a dma_copy is a tensor, got {type(other).__name__}", "operand",
             name)
    view = moved.row
    if view.size != other.size:
        fail(f"dma_copy moves {view.size} elements ({list(view.shape)}) into "
             f"{other.size} ({list(other.shape)})", "shape_mismatch", name)
    d, s = (view, other) if dst is moved else (other, view)
    rows = d.rows() if d.on_chip else (s.rows() if s.on_chip else None)
    dst_rec = d.record(name=name, partitions=None if d.on_chip else rows)[0]
    src_rec = s.record(name=name, partitions=None if s.on_chip else rows)[0]
    flags |= trace.FLAG_SCALAR_OFFSET | (trace.FLAG_HWDGE if _mode(dge_mode) == "hwdge" else 0)
    trace.current().emit(name, trace.DMA_COPY, trace.DMA_ENGINE,
                         [dst_rec, src_rec, moved.indices.record(name=name)[0]],
                         flags=flags, imm=(float(moved.bound), float(moved.step)))
    return dst


def atomic_rmw(dst, value, op, mask=None, **_):
    """dst = op(dst, value) for the HBM rows an index tile names
    (``dst = tensor[indices, ...]``; NKI documents only nl.add and indirect
    dst): atomic, so every repeated index adds its row. value is a tile or
    a number."""
    name = "nki.language.atomic_rmw"
    from torchneuron.nki import language as nl

    if not isinstance(dst, IndirectTensor):
        fail("atomic_rmw's dst is an HBM tensor indexed by an index tile (tensor[indices, ...]), "
             f"got {type(dst).__name__}", "indirect_dma", name)
    if mask is not None:
        fail("masks on an indirect access are not supported", "indirect_dma", name)
    if not isinstance(value, NkiTensor):
        try:
            number = float(value)
        except (TypeError, ValueError):
            fail(f"value must be a tile or a number, got {type(value).__name__}", "operand", name)
        value = nl.full(dst.shape, number, dst.dtype, buffer=nl.sbuf)
    elif value.storage.buffer == trace.PSUM:
        value = nl.copy(value, dtype=dst.dtype)
    from torchneuron.nki.isa import dma_copy

    return dma_copy(dst, value, dst_rmw_op=op, unique_indices=False)
