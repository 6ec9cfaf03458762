"""nki.isa's Vector-engine scan, statistics and top-8 instructions, and
GpSimd's reduction across partitions.

``tensor_tensor_scan`` (a recurrence along the free dim), ``bn_stats`` /
``bn_aggr`` (mean and variance in two steps, for layer norms), ``max8``,
``nc_find_index8`` and ``nc_match_replace8`` (the top-k building blocks).
The simulator checks the shapes and size limits of the ISA reference and
executes them in fp32 (runtime/src/nc/exec_vector.c).
"""

from torchneuron.nki import trace
from torchneuron.nki.isa import _alu, _emit, _mark_written, _rec, _scalar_operand, _tile


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       **_):
    """dst[:, j] = op1(op0(data0[:, j], dst[:, j-1]), data1[:, j]) with
    dst[:, -1] = initial (a number or a [P, 1] tile); reverse swaps an op's operands."""
    name = "nki.isa.tensor_tensor_scan"
    for what, t in (("dst", dst), ("data0", data0), ("data1", data1)):
        _tile(t, what, name)
    init_rec, init_imm = _scalar_operand(initial, name, "initial")
    flags = (trace.FLAG_REVERSE0 if reverse0 else 0) | (trace.FLAG_REVERSE1 if reverse1 else 0)
    _emit(name, trace.TENSOR_TENSOR_SCAN, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data0, name), _rec(data1, name), init_rec],
          func=(_alu(op0, name), _alu(op1, name)), flags=flags, imm=(init_imm,))
    return dst


def _unary_stat(name, opcode):
    def instruction(dst, data, **_):
        full = f"nki.isa.{name}"
        _tile(dst, "dst", full), _tile(data, "data", full)
        _emit(full, opcode, trace.VECTOR_ENGINE, dst, [_rec(dst, full), _rec(data, full)])
        return dst

    instruction.__name__ = name
    return instruction


bn_stats = _unary_stat("bn_stats", trace.BN_STATS)
bn_stats.__doc__ = """dst[P, 6] = (count, mean, variance * count) of the even-indexed and then
the odd-indexed elements of each partition of data (at most 512)."""
bn_aggr = _unary_stat("bn_aggr", trace.BN_AGGR)
bn_aggr.__doc__ = """dst[P, 2] = (mean, variance) combining the (count, mean, variance *
count) tuples of one or more bn_stats outputs in data."""
_max8 = _unary_stat("max8", trace.MAX8)


def max8(dst, src=None, data=None, **_):
    """dst[P, 8] = the 8 largest values of each partition of src (8 to 16384
    elements), descending."""
    return _max8(dst, src if src is not None else data)


def nc_find_index8(dst, data, vals, **_):
    """dst[P, 8] (uint32) = for each of vals[P, 8], the index of its first
    occurrence in data (not already claimed by an earlier equal value);
    0xffffffff when absent."""
    name = "nki.isa.nc_find_index8"
    for what, t in (("dst", dst), ("data", data), ("vals", vals)):
        _tile(t, what, name)
    _emit(name, trace.FIND_INDEX8, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), _rec(vals, name)])
    return dst


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, **_):
    """dst = data with the first occurrence of each of vals[P, 8] replaced
    by imm; dst_idx[P, 8] (uint32), when given, receives their indices."""
    name = "nki.isa.nc_match_replace8"
    for what, t in (("dst", dst), ("data", data), ("vals", vals)):
        _tile(t, what, name)
    idx = _rec(_tile(dst_idx, "dst_idx", name), name) if dst_idx is not None else trace.NO_AP
    _emit(name, trace.MATCH_REPLACE8, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), _rec(vals, name), idx], imm=(float(imm),))
    if dst_idx is not None:
        _mark_written(dst_idx)
    return dst


def tensor_partition_reduce(dst, op, data, **_):
    """dst[1, F] = op-reduction of data[P, F] across its partitions (GpSimd):
    nl.add, nl.maximum, nl.minimum, or a bitwise op on integer tiles."""
    name = "nki.isa.tensor_partition_reduce"
    _tile(dst, "dst", name), _tile(data, "data", name)
    _emit(name, trace.PARTITION_REDUCE, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _rec(data, name)], func=(_alu(op, name),))
    return dst
