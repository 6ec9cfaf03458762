"""nki.isa: the NeuronCore instructions. Every call takes the destination first.

Each function checks what only Python can (argument kinds, which ops fit),
then records one instruction; the simulator checks the hardware rules when
the traced program is created and reports them with this call's line.
"""

import numpy as np

from torchneuron.nki import trace
from torchneuron.nki.isa_enums import reduce_cmd
from torchneuron.nki.ops import ActivationFunction, alu_code
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


class Engine:
    def __init__(self, name, code):
        self.name = name
        self.code = code

    def __repr__(self):
        return f"nki.isa.{self.name}"


tensor_engine = Engine("tensor_engine", trace.TENSOR_ENGINE)
vector_engine = Engine("vector_engine", trace.VECTOR_ENGINE)
scalar_engine = Engine("scalar_engine", trace.SCALAR_ENGINE)
gpsimd_engine = Engine("gpsimd_engine", trace.GPSIMD_ENGINE)
unknown_engine = None


def _tile(x, what, name):
    if not isinstance(x, NkiTensor):
        if getattr(x, "scalar", False):  # a window whose start is read while the kernel runs
            fail(f"{what} of {name} is a view with a runtime start (nl.ds(word, n) or a "
                 "scalar_offset): only DMAs (dma_copy, nl.load / nl.store, dma_transpose's src) "
                 "and tensor_copy_dynamic_src / tensor_copy_dynamic_dst read an address from "
                 "memory; copy the window into a tile first", "dynamic_start", name)
        fail(f"{what} must be a tensor (NkiTensor), got {type(x).__name__}", "operand", name)
    return x


def _rec(t, name, **kw):
    return t.record(name=name, **kw)[0]


def _engine(engine, default):
    if engine is None:
        return default
    if isinstance(engine, Engine):
        return engine.code
    if int(engine) < 0:  # nisa.engine.unknown: the instruction's usual engine
        return default
    return int(engine)


def _scalar_operand(x, name, what):
    """An operand that is a [P, 1] tile or a number: (record, immediate)."""
    if isinstance(x, NkiTensor):
        return _rec(x, name), 0.0
    try:
        return trace.NO_AP, float(x)
    except (TypeError, ValueError):
        fail(f"{what} must be a number or a [P, 1] tile, got {type(x).__name__}", "operand", name)


def _psum_region(t):
    """Index of the PSUM words a view covers in its storage's written map: a
    pair of slices for the usual dense tile, else index arrays."""
    size = t.dtype.itemsize
    free = [(st, n) for st, n in zip(t.strides[1:], t.shape[1:]) if n != 1]
    if t.strides[0] == 1 and len(free) <= 1 and (not free or free[0][0] == 1):
        count = free[0][1] if free else 1
        words = slice(t.offset * size // 4, ((t.offset + count) * size + 3) // 4)
        return slice(t.partition, t.partition + t.shape[0]), words
    parts = t.partition + t.strides[0] * np.arange(t.shape[0])
    elems = np.full(1, t.offset, dtype=np.int64)
    for size_d, stride in zip(t.shape[1:], t.strides[1:]):
        elems = (elems[:, None] + stride * np.arange(size_d)[None, :]).reshape(-1)
    return np.ix_(parts, np.unique((elems * size) // 4))


def _in_bounds(t):
    rows, words = t.storage.psum_written.shape
    last = t.partition + t.strides[0] * (t.shape[0] - 1)
    lo = t.offset + sum(st * (n - 1) for st, n in zip(t.strides[1:], t.shape[1:]) if st < 0)
    hi = t.offset + sum(st * (n - 1) for st, n in zip(t.strides[1:], t.shape[1:]) if st > 0)
    size = t.dtype.itemsize
    return 0 <= min(t.partition, last) and max(t.partition, last) < rows and lo >= 0 and \
        (hi + 1) * size <= words * 4


def _psum_state(t):
    """'none', 'all' or 'some': how much of the PSUM region was written."""
    if not _in_bounds(t):
        return "none"  # the simulator's bounds check reports it
    region = t.storage.psum_written[_psum_region(t)]
    return "all" if region.all() else ("some" if region.any() else "none")


def _mark_written(t):
    if t.storage.psum_written is not None and _in_bounds(t):
        t.storage.psum_written[_psum_region(t)] = True


def _emit(name, opcode, engine, dst, aps, **kw):
    trace.current().emit(name, opcode, engine, aps, **kw)
    _mark_written(dst)


_REDUCE_FLAGS = {
    reduce_cmd.idle: 0,
    reduce_cmd.reset: trace.FLAG_REDUCE_RESET,
    reduce_cmd.reduce: trace.FLAG_REDUCE_FOLD,
    reduce_cmd.reset_reduce: trace.FLAG_REDUCE_RESET | trace.FLAG_REDUCE_FOLD,
    reduce_cmd.load_reduce: trace.FLAG_REDUCE_LOAD | trace.FLAG_REDUCE_FOLD,
}


def _reduce_flags(cmd, name):
    try:
        return _REDUCE_FLAGS[reduce_cmd(cmd)]
    except (ValueError, KeyError, TypeError):
        fail(f"reduce_cmd must be a nisa.reduce_cmd, got {cmd!r}", "operand", name)


# ---- Tensor engine ----------------------------------------------------------

def _perf_mode(perf_mode, name):
    from torchneuron.nki.isa_enums import matmul_perf_mode
    if perf_mode is None:
        return matmul_perf_mode.none
    try:
        return matmul_perf_mode(getattr(perf_mode, "value", perf_mode))
    except ValueError:
        fail(f"perf_mode must be a nisa.matmul_perf_mode (none or double_row), got "
             f"{perf_mode!r}", "matmul_perf_mode", name)


def _check_double_row(stationary, moving, is_transpose, tile_position, tile_size, name):
    """The layout rules of perf_mode=double_row that only the shapes show."""
    if is_transpose:
        fail("perf_mode=double_row cannot be combined with the Tensor engine's transpose mode",
             "double_row_mode", name)
    if tile_size and len(tile_size) == 2 and tile_size[1] != 128 or \
            tile_position and len(tile_position) == 2 and tile_position[1] != 0:
        fail("perf_mode=double_row cannot be combined with column tiling (tile_size column "
             "128, tile_position column 0)", "double_row_mode", name)
    for what, t in (("stationary", stationary), ("moving", moving)):
        if t.ndim < 3 or t.shape[1] != 2:
            fail(f"perf_mode=double_row: {what} must be [K, 2, ...] (the contraction split over "
                 f"the partitions and a most major free dim of 2; pad an odd contraction with "
                 f"zeros), got {list(t.shape)}", "double_row_layout", name)


def nc_matmul(dst, stationary, moving, accumulate=None, is_transpose=False, perf_mode=None,
              tile_position=(), tile_size=(), **_):
    """dst[M, N] (PSUM, fp32) = stationary[K, M].T @ moving[K, N]. With
    accumulate=None the first write to a PSUM region overwrites and later
    writes add; True / False force it. perf_mode=nisa.matmul_perf_mode.double_row
    (trn2 on) takes fp8 stationary [K, 2, M] and moving [K, 2, N] and
    contracts over both the K partitions and the dim of 2 (2K terms) at the
    time of a K-term matmul."""
    name = "nki.isa.nc_matmul"
    for what, t in (("dst", dst), ("stationary", stationary), ("moving", moving)):
        _tile(t, what, name)
    double_row = _perf_mode(perf_mode, name).value == "double_row"
    if double_row:
        _check_double_row(stationary, moving, is_transpose, tile_position, tile_size, name)
    if is_transpose:
        return nc_transpose(dst, moving)
    if accumulate is None:
        state = _psum_state(dst) if dst.storage.psum_written is not None else "none"
        if state == "some":
            fail("accumulate=None on a PSUM region that is only partly written: the first-write "
                 "rule is ambiguous; pass accumulate=True or False", "psum_accumulate", name)
        accumulate = state == "all"
    flags = (trace.FLAG_ACCUMULATE if accumulate else 0) | \
        (trace.FLAG_DOUBLE_ROW if double_row else 0)
    _emit(name, trace.MATMUL, trace.TENSOR_ENGINE, dst,
          [_rec(dst, name), _rec(stationary, name), _rec(moving, name)], flags=flags)
    return dst


def nc_transpose(dst, data, engine=None):
    """dst[F, P] = data[P, F]: on the Tensor engine into PSUM (<= 128x128), or
    on the Vector engine (<= 32x32)."""
    name = "nki.isa.nc_transpose"
    _tile(dst, "dst", name), _tile(data, "data", name)
    default = trace.TENSOR_ENGINE if dst.storage.buffer == trace.PSUM else trace.VECTOR_ENGINE
    _emit(name, trace.TRANSPOSE, _engine(engine, default), dst,
          [_rec(dst, name), _rec(data, name)])
    return dst


# ---- Scalar engine ----------------------------------------------------------

# The NumPy functions the reference's activation table accepts as op
# ("Supported Activation Functions": nl.exp or numpy.exp, ...).
_NUMPY_ACTIVATIONS = {np.square: "square", np.tanh: "tanh", np.sqrt: "sqrt", np.exp: "exp",
                      np.log: "log", np.sin: "sin", np.cos: "cos", np.arctan: "arctan",
                      np.sign: "sign"}


def _activation_code(op, name):
    if isinstance(op, ActivationFunction):
        return op.code
    if isinstance(op, np.ufunc) and op in _NUMPY_ACTIVATIONS:
        from torchneuron.nki import language

        return getattr(language, _NUMPY_ACTIVATIONS[op]).code
    fail(f"{op!r} is not an activation function (nl.exp, nl.tanh, ..., or the NumPy function "
         "the reference accepts: np.exp, np.tanh, np.sqrt, np.log, np.square, np.sin, np.cos, "
         "np.arctan, np.sign)", "operand", name)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=None, **_):
    """dst = op(data * scale + bias); scale is a number or [P, 1] tile, bias a
    [P, 1] tile; with reduce_res, the row sums of the result go there (or,
    per reduce_cmd, the Scalar engine's reduce registers they fold into)."""
    name = "nki.isa.activation"
    _tile(dst, "dst", name), _tile(data, "data", name)
    if getattr(op, "name", None) == "prelu":
        fail("nl.prelu takes its negative slope from relu_param, which only "
             "nisa.activate2 has", "operand", name)
    if reduce_res is not None and reduce_op not in (None,) and alu_code(reduce_op) != 1:
        fail("activation reduces with nl.add only", "operand", name)
    bias_rec = _rec(_tile(bias, "bias", name), name) if bias is not None else trace.NO_AP
    scale_rec, scale_imm = _scalar_operand(scale, name, "scale")
    red = _rec(_tile(reduce_res, "reduce_res", name), name) if reduce_res is not None else trace.NO_AP
    flags = _reduce_flags(reduce_cmd if reduce_cmd is not None else 0, name)
    _emit(name, trace.ACTIVATION, trace.SCALAR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), bias_rec, scale_rec, red],
          func=(_activation_code(op, name),), flags=flags, imm=(scale_imm,))
    if reduce_res is not None:
        _mark_written(reduce_res)
    return dst


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, **_):
    return activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                      reduce_res=reduce_res)


# ---- Vector / GpSimd engines ------------------------------------------------

def _alu(op, name):
    try:
        return alu_code(op)
    except (KeyError, TypeError):
        fail(f"{op!r} is not an ALU op (nl.add, nl.maximum, ...)", "operand", name)


def tensor_tensor(dst, data1, data2, op, engine=None, **_):
    """dst = data1 op data2 (element-wise; not both inputs in PSUM)."""
    name = "nki.isa.tensor_tensor"
    for what, t in (("dst", dst), ("data1", data1), ("data2", data2)):
        _tile(t, what, name)
    _emit(name, trace.TENSOR_TENSOR, _engine(engine, trace.VECTOR_ENGINE), dst,
          [_rec(dst, name), _rec(data1, name), _rec(data2, name)], func=(_alu(op, name),))
    return dst


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=None, **_):
    """dst = (data op0 operand0) op1 operand1; operands are numbers or [P, 1]
    tiles; reverse swaps an op's operands."""
    name = "nki.isa.tensor_scalar"
    _tile(dst, "dst", name), _tile(data, "data", name)
    r0, i0 = _scalar_operand(operand0, name, "operand0")
    r1, i1 = _scalar_operand(operand1 if op1 is not None else 0.0, name, "operand1")
    flags = (trace.FLAG_REVERSE0 if reverse0 else 0) | (trace.FLAG_REVERSE1 if reverse1 else 0)
    f1 = _alu(op1, name) if op1 is not None else 0
    _emit(name, trace.TENSOR_SCALAR, _engine(engine, trace.VECTOR_ENGINE), dst,
          [_rec(dst, name), _rec(data, name), r0, r1], func=(_alu(op0, name), f1),
          flags=flags, imm=(i0, i1))
    return dst


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False,
                         reduce_cmd=reduce_cmd.idle, **_):
    """dst = data op0 operand0, and reduce_res[P, 1] = reduce_op over each row
    (or, per reduce_cmd, the Vector engine's reduce registers it folds into)."""
    name = "nki.isa.tensor_scalar_reduce"
    _tile(dst, "dst", name), _tile(data, "data", name), _tile(reduce_res, "reduce_res", name)
    r0, i0 = _scalar_operand(operand0, name, "operand0")
    _emit(name, trace.TENSOR_SCALAR, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), r0, trace.NO_AP, _rec(reduce_res, name)],
          func=(_alu(op0, name), 0, _alu(reduce_op, name)),
          flags=(trace.FLAG_REVERSE0 if reverse0 else 0) | _reduce_flags(reduce_cmd, name),
          imm=(i0, 0.0))
    _mark_written(reduce_res)
    return dst


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
                         reverse1=False, **_):
    """dst = (data op0 operand0) op1 operand1, operand0 a number or [P, 1]
    tile, operand1 a tile."""
    name = "nki.isa.scalar_tensor_tensor"
    _tile(dst, "dst", name), _tile(data, "data", name), _tile(operand1, "operand1", name)
    r0, i0 = _scalar_operand(operand0, name, "operand0")
    flags = (trace.FLAG_REVERSE0 if reverse0 else 0) | (trace.FLAG_REVERSE1 if reverse1 else 0)
    _emit(name, trace.SCALAR_TENSOR_TENSOR, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name), r0, _rec(operand1, name)],
          func=(_alu(op0, name), _alu(op1, name)), flags=flags, imm=(i0,))
    return dst


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, engine=None, **_):
    """dst = op-reduction of data over ``axis`` (trailing free axes)."""
    name = "nki.isa.tensor_reduce"
    _tile(dst, "dst", name), _tile(data, "data", name)
    axes = sorted({a % data.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))})
    if axes != list(range(data.ndim - len(axes), data.ndim)) or axes[0] == 0:
        fail(f"tensor_reduce reduces trailing free axes; got axis={axis} of a "
             f"{data.ndim}-D tile", "reduce_axes", name)
    rec, tail = data.record(split=axes[0], name=name)
    _emit(name, trace.TENSOR_REDUCE, _engine(engine, trace.VECTOR_ENGINE), dst,
          [_rec(dst, name), rec], func=(_alu(op, name),), axes=tail,
          flags=trace.FLAG_NEGATE if negate else 0)
    return dst


def tensor_copy(dst, src, engine=None, **_):
    """dst = src, converted to dst's dtype (bit-exact when the dtypes match)."""
    name = "nki.isa.tensor_copy"
    _tile(dst, "dst", name), _tile(src, "src", name)
    _emit(name, trace.TENSOR_COPY, _engine(engine, trace.VECTOR_ENGINE), dst,
          [_rec(dst, name), _rec(src, name)])
    return dst


def tensor_copy_predicated(dst, src, predicate, **_):
    """dst = src where predicate != 0; elsewhere dst keeps its value."""
    name = "nki.isa.tensor_copy_predicated"
    for what, t in (("dst", dst), ("src", src), ("predicate", predicate)):
        _tile(t, what, name)
    _emit(name, trace.COPY_PREDICATED, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(src, name), _rec(predicate, name)])
    return dst


def reciprocal(dst, data, **_):
    """dst = 1 / data (Vector engine)."""
    name = "nki.isa.reciprocal"
    _tile(dst, "dst", name), _tile(data, "data", name)
    _emit(name, trace.TENSOR_SCALAR, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(data, name)], func=(_alu("divide", name),),
          flags=trace.FLAG_REVERSE0, imm=(1.0,))
    return dst


def memset(dst, value, engine=None, **_):
    """Fills dst with value."""
    name = "nki.isa.memset"
    _tile(dst, "dst", name)
    _emit(name, trace.MEMSET, _engine(engine, trace.VECTOR_ENGINE), dst, [_rec(dst, name)],
          imm=(float(value),))
    return dst


def _pattern_record(dst, pattern, name):
    pattern = [[int(s), int(c)] for s, c in pattern]
    if len(pattern) > 4:
        fail("an affine pattern has at most 4 [stride, count] pairs", "max_free_dims", name)
    count = 1
    for _, c in pattern:
        count *= c
    if count != dst.free_size():
        fail(f"the pattern covers {count} elements per partition but dst has "
             f"{dst.free_size()}", "shape_mismatch", name)
    strides = [s for s, _ in pattern] + [0] * (4 - len(pattern))
    counts = [c for _, c in pattern] + [1] * (4 - len(pattern))
    return (-1, 0, 0, 1, 0, 0, len(pattern), 0, tuple(strides), tuple(counts))


def iota(dst, pattern, offset=0, channel_multiplier=0, **_):
    """dst[c, i...] = offset + c * channel_multiplier + sum(stride * i), int32."""
    name = "nki.isa.iota"
    _tile(dst, "dst", name)
    _emit(name, trace.IOTA, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _pattern_record(dst, pattern, name)],
          imm=(int(offset), int(channel_multiplier)))
    return dst


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None,
                  offset=0, **_):
    """dst = on_true_tile where cmp_op(offset + c * channel_multiplier +
    sum(stride * i), 0) holds, else on_false_value (e.g. causal masks)."""
    name = "nki.isa.affine_select"
    _tile(dst, "dst", name), _tile(on_true_tile, "on_true_tile", name)
    cmp = _alu(cmp_op if cmp_op is not None else "equal", name)
    _emit(name, trace.AFFINE_SELECT, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _pattern_record(dst, pattern, name), _rec(on_true_tile, name)],
          func=(cmp,), imm=(int(offset), int(channel_multiplier), float(on_false_value)))
    return dst


# ---- DMA ---------------------------------------------------------------------

def dma_copy(dst, src, dst_rmw_op=None, oob_mode=None, dge_mode=None, unique_indices=True, **_):
    """Copies src to dst (HBM<->SBUF, HBM<->HBM, SBUF<->SBUF), converting the
    dtype; an HBM side is split into rows to match an on-chip side. With
    ``dst_rmw_op=nl.add`` the DMA reads dst back: dst = dst + src in fp32.
    An indexed HBM side (``x[idx]`` or ``x.ap(..., vector_offset=idx)``, idx
    an SBUF [P, 1] int32 / uint32 tile) gathers or scatters rows
    (software DGE); a side ``x.ap(..., scalar_offset=w)`` starts where a
    word read while the kernel runs says (torchneuron/nki/indirect.py has
    their rules)."""
    name = "nki.isa.dma_copy"
    from torchneuron.nki.tensor import IndirectTensor

    if isinstance(dst, IndirectTensor) or isinstance(src, IndirectTensor):
        from torchneuron.nki.indirect import indirect_copy

        return indirect_copy(dst, src, dst_rmw_op, oob_mode, dge_mode, unique_indices, name)
    _tile(dst, "dst", name), _tile(src, "src", name)
    flags = 0
    if dst_rmw_op is not None:
        if _alu(dst_rmw_op, name) != alu_code("add"):
            fail(f"dst_rmw_op must be nl.add (the only read-modify-write a DMA does), got "
                 f"{dst_rmw_op!r}", "operand", name)
        flags = trace.FLAG_ACCUMULATE
    rows = dst.rows() if dst.on_chip else (src.rows() if src.on_chip else None)
    dst_rec = dst.record(name=name, partitions=None if dst.on_chip else rows)[0]
    src_rec = src.record(name=name, partitions=None if src.on_chip else rows)[0]
    _emit(name, trace.DMA_COPY, trace.DMA_ENGINE, dst, [dst_rec, src_rec], flags=flags)
    return dst


def dma_compute(dst, srcs, scales, reduce_op, **_):
    """dst = srcs[0] * scales[0] + srcs[1] * scales[1] + ... in the DMA
    engines' fp32, rounded once into dst (HBM or SBUF; up to 16 sources of
    dst's element count). Only nl.add and scales of 1.0 exist. Simulated as
    a chain of DMAs through an fp32 buffer: one DMA per source plus the
    final one, each costed as a DMA."""
    name = "nki.isa.dma_compute"
    _tile(dst, "dst", name)
    srcs, scales = list(srcs), list(scales)
    if not 1 <= len(srcs) <= 16:
        fail(f"dma_compute takes 1 to 16 sources, got {len(srcs)}", "dma_compute_sources", name)
    if len(scales) != len(srcs) or any(float(x) != 1.0 for x in scales):
        fail(f"dma_compute needs one scale of 1.0 per source (the only scale the DMA engines "
             f"apply), got {scales}", "dma_compute_scales", name)
    if _alu(reduce_op, name) != alu_code("add"):
        fail(f"dma_compute reduces with nl.add only, got {reduce_op!r}", "operand", name)
    for k, t in enumerate(srcs):
        _tile(t, f"srcs[{k}]", name)
        if t.free_size() * t.shape[0] != dst.free_size() * dst.shape[0]:
            fail(f"srcs[{k}] has {t.free_size() * t.shape[0]} elements but dst "
                 f"{dst.free_size() * dst.shape[0]}", "shape_mismatch", name)
    from torchneuron.nki import language as nl
    aliased = any(t.storage is dst.storage for t in srcs[1:])  # read after dst is written
    if len(srcs) == 1 or (dst.dtype is nl.float32 and not aliased):
        acc = dst
    else:
        acc = nl.ndarray(dst.shape, nl.float32, buffer=nl.private_hbm)
    dma_copy(acc, srcs[0])
    for t in srcs[1:]:
        dma_copy(acc, t, dst_rmw_op=nl.add)
    if acc is not dst:
        dma_copy(dst, acc)
    return dst


from torchneuron.nki.isa_vector import (  # noqa: E402,F401  (nisa.<name>)
    bn_aggr, bn_stats, max8, nc_find_index8, nc_match_replace8, tensor_partition_reduce,
    tensor_tensor_scan)
from torchneuron.nki.isa_select import (  # noqa: E402,F401
    activate2, dma_transpose, nonzero_with_count, range_select, select_reduce,
    tensor_scalar_cumulative)
from torchneuron.nki.isa_rng import (  # noqa: E402,F401
    dropout, rand2, rand_get_state, rand_set_state, rng, set_rng_seed)
from torchneuron.nki.isa_gather import (  # noqa: E402,F401
    exponential, local_gather, nc_n_gather, nc_stream_shuffle, sequence_bounds, topk)
from torchneuron.nki.isa_register import (  # noqa: E402,F401
    VirtualRegister, register_alloc, register_load, register_move, register_store)
from torchneuron.nki.isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402,F401
from torchneuron.nki.isa_scalar import NkiScalar, scalar_load, scalar_store  # noqa: E402,F401
from torchneuron.nki.isa_cores import core_barrier, sendrecv  # noqa: E402,F401
from torchneuron.nki.isa_dynamic import (  # noqa: E402,F401
    tensor_copy_dynamic_dst, tensor_copy_dynamic_src)
from torchneuron.nki.isa_enums import (  # noqa: E402,F401
    NkiValidationError, dge_mode, dma_engine, engine, get_nc_version, matmul_perf_mode,
    nc_version, oob_mode)

__all__ = [n for n in dir() if not n.startswith("_") and n not in ("np", "trace", "NkiTensor")
           and n not in ("isa_vector", "isa_enums", "isa_select", "isa_rng", "isa_gather", "isa_register", "isa_mx", "isa_scalar",
                         "isa_cores", "isa_dynamic")]
