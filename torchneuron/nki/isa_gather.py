"""nki.isa's top-k, gathers, shuffle, segment bounds and exponential.

``topk`` and ``local_gather`` run on the GpSimd engine, whose eight cores
each own 16 partitions: both work one 16-partition group at a time.
``nc_n_gather`` gathers within each partition, ``sequence_bounds`` turns
segment ids into (start, end) pairs, ``nc_stream_shuffle`` (Vector) moves
whole partitions within 32-partition quadrants, and ``exponential`` (Vector,
NeuronCore-v4) is ``exp(src - max_value)`` with a running sum in the reduce
registers. The simulator checks the ISA reference's rules (dtypes, sizes,
generation) and runs them in runtime/src/nc/exec_gather.c.
"""

import numbers

from torchneuron.nki import trace
from torchneuron.nki.isa import _emit, _mark_written, _rec, _reduce_flags, _scalar_operand, _tile
from torchneuron.nki.isa_enums import reduce_cmd as _reduce_cmd
from torchneuron.nki.trace import fail


def _int(value, what, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        fail(f"{what} must be a compile-time integer, got {value!r}", "operand", name)
    return int(value)


def topk(val_dst, idx_dst, src, n, sorted=False, **_):  # noqa: A002 (the reference's name)
    """Per group of 16 partitions, the k largest of the n bfloat16 elements of
    src read as a snake (element i at partition i % 16, column i // 16), k
    being val_dst's free size: val_dst (bfloat16) gets the values and idx_dst
    (uint32) their snake indices, result j at partition j % 16, column
    j // 16, in ascending order (descending with ``sorted=True``); equal
    values rank the lower index first. Columns from ceil(k / 16) on are left
    as they were; the unused slots of the last written column get -inf and
    index 0xffffffff."""
    name = "nki.isa.topk"
    for what, t in (("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src)):
        _tile(t, what, name)
    n = _int(n, "n", name)
    _emit(name, trace.TOPK, trace.GPSIMD_ENGINE, val_dst,
          [_rec(val_dst, name), _rec(src, name), _rec(idx_dst, name)],
          flags=trace.FLAG_REVERSE0 if sorted else 0, imm=(n,))
    _mark_written(idx_dst)
    return val_dst, idx_dst


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=_reduce_cmd.idle,
                reduce_init=0.0, **_):
    """dst = exp(src - max_value) on the Vector engine (NeuronCore-v4), in
    fp32; max_value is a number or a [P, 1] float32 tile. With reduce_cmd
    (reset_reduce, reduce, load_reduce from reduce_init) the row sums fold
    into the Vector engine's reduce registers; reduce_res [P, 1] receives
    them (with idle, this instruction's row sums alone)."""
    name = "nki.isa.exponential"
    _tile(dst, "dst", name), _tile(src, "src", name)
    rec, imm = _scalar_operand(max_value, name, "max_value")
    red = _rec(_tile(reduce_res, "reduce_res", name), name) if reduce_res is not None \
        else trace.NO_AP
    try:
        init = float(reduce_init)
    except (TypeError, ValueError):
        fail(f"reduce_init must be a number, got {type(reduce_init).__name__}", "operand", name)
    _emit(name, trace.EXPONENTIAL, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(src, name), rec, trace.NO_AP, red],
          flags=_reduce_flags(reduce_cmd, name), imm=(imm, init))
    if reduce_res is not None:
        _mark_written(reduce_res)
    return dst


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, **_):
    """Per group of 16 partitions (one GpSimd core): the group's uint16
    indices, flattened partition first (index[16g, 0], index[16g + 1, 0],
    ...), the first num_valid_indices of them, are element offsets into each
    partition's row of src_buffer; dst[p, v * E + e] = src_buffer[p,
    index_v + e] for E = num_elem_per_idx contiguous elements. An offset past
    the row reads as all-ones bytes (the reference leaves it undefined)."""
    name = "nki.isa.local_gather"
    for what, t in (("dst", dst), ("src_buffer", src_buffer), ("index", index)):
        _tile(t, what, name)
    e = _int(num_elem_per_idx, "num_elem_per_idx", name)
    v = index.free_size() * 16 if num_valid_indices is None else \
        _int(num_valid_indices, "num_valid_indices", name)
    _emit(name, trace.LOCAL_GATHER, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _rec(src_buffer, name), _rec(index, name)], imm=(e, v))
    return dst


def nc_n_gather(dst, data, indices, **_):
    """dst[p, j] = data[p, indices[p, j]] within each partition, the free dims
    of data flattened; indices are uint32 (an index past the row reads as
    all-ones bytes)."""
    name = "nki.isa.nc_n_gather"
    for what, t in (("dst", dst), ("data", data), ("indices", indices)):
        _tile(t, what, name)
    _emit(name, trace.N_GATHER, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), _rec(indices, name)])
    return dst


def sequence_bounds(dst, segment_ids, **_):
    """dst[0, 0, i] / dst[0, 1, i] = the start / end (exclusive) index of the
    run of equal ids that element i of segment_ids [1, n] belongs to; id 0 is
    padding, with bounds (n, -1). float32 or int32 tiles, GpSimd engine."""
    name = "nki.isa.sequence_bounds"
    _tile(dst, "dst", name), _tile(segment_ids, "segment_ids", name)
    _emit(name, trace.SEQUENCE_BOUNDS, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _rec(segment_ids, name)])
    return dst


def _mask_immediates(shuffle_mask, name):
    try:
        mask = [int(m) for m in shuffle_mask]
    except (TypeError, ValueError):
        fail("shuffle_mask must be a list of 32 integers", "shuffle_mask", name)
    if len(mask) != 32 or any(not (0 <= m < 32 or m == 255) for m in mask):
        fail(f"shuffle_mask must hold 32 source partitions in [0, 32) or 255 (keep), got "
             f"{mask}", "shuffle_mask", name)
    # 6 bits per entry, 8 entries per immediate (exact in a double); 63 keeps.
    imm = [0, 0, 0, 0]
    for i, m in enumerate(mask):
        imm[i // 8] += (63 if m == 255 else m) << (6 * (i % 8))
    return imm


def nc_stream_shuffle(dst, src, shuffle_mask, **_):
    """Within each 32-partition quadrant, dst partition i = src partition
    shuffle_mask[i] (255: dst partition i is left alone), the same mask for
    every quadrant; Vector engine, SBUF or PSUM, in place allowed."""
    name = "nki.isa.nc_stream_shuffle"
    _tile(dst, "dst", name), _tile(src, "src", name)
    _emit(name, trace.STREAM_SHUFFLE, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(src, name)], imm=_mask_immediates(shuffle_mask, name))
    return dst
