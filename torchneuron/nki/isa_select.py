"""nki.isa's activate2, tensor_scalar_cumulative, select_reduce, range_select
(Vector / Scalar), nonzero_with_count (GpSimd) and dma_transpose (DMA).

Several fold their results into the engine's reduce registers, one fp32 per
partition lane kept across instructions: ``reduce_cmd`` says whether an
instruction resets them, folds into them or leaves them alone
(``nisa.reduce_cmd``). The simulator checks each instruction's rules and runs
it (runtime/src/nc/exec_select.c).
"""

from torchneuron.nki import dtypes, trace
from torchneuron.nki.isa import (
    _alu, _emit, _engine, _mark_written, _rec, _reduce_flags, _scalar_operand, _tile)
from torchneuron.nki.isa_enums import reduce_cmd as _reduce_cmd
from torchneuron.nki.ops import ActivationFunction
from torchneuron.nki.tensor import IndirectTensor, NkiTensor
from torchneuron.nki.trace import fail

_FP32_MIN = -3.4028234663852886e38

def _optional(t, what, name):
    return _rec(_tile(t, what, name), name) if t is not None else trace.NO_AP


def _op_or_bypass(op, name):
    return 0 if op is None else _alu(op, name)


def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False,
              reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=_reduce_cmd.idle,
              engine=None, **_):
    """dst = op((data op0 imm0) op1 imm1) on the Scalar engine (trn3 only);
    imm0 / imm1 are numbers or [P, 1] tiles, relu_param the slope of
    nl.prelu (a number or a [P, 1] tile); the results reduce (reduce_op)
    into reduce_res and the reduce registers."""
    name = "nki.isa.activate2"
    _tile(dst, "dst", name), _tile(data, "data", name)
    if not isinstance(op, ActivationFunction):
        fail(f"{op!r} is not an activation function (nl.exp, nl.prelu, ...)", "operand", name)
    r0, i0 = _scalar_operand(imm0, name, "imm0")
    r1, i1 = _scalar_operand(imm1, name, "imm1")
    flags = (trace.FLAG_REVERSE0 if reverse0 else 0) | (trace.FLAG_REVERSE1 if reverse1 else 0)
    flags |= _reduce_flags(reduce_cmd, name)
    red_op = _alu(reduce_op if reduce_op is not None else "add", name)
    if isinstance(relu_param, NkiTensor):
        relu, slope, flags = _rec(relu_param, name), 0.0, flags | trace.FLAG_RELU_TILE
    else:
        try:
            slope = float(relu_param)
        except (TypeError, ValueError):
            fail(f"relu_param must be a number or a [P, 1] tile, got {type(relu_param).__name__}",
                 "operand", name)
        relu = trace.NO_AP
    _emit(name, trace.ACTIVATE2, _engine(engine, trace.SCALAR_ENGINE), dst,
          [_rec(dst, name), _rec(data, name), r0, r1, _optional(reduce_res, "reduce_res", name),
           relu],
          func=(op.code, _op_or_bypass(op0, name), _op_or_bypass(op1, name)), flags=flags,
          axes=red_op, imm=(i0, i1, slope))
    if reduce_res is not None:
        _mark_written(reduce_res)
    return dst


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=_reduce_cmd.reset_reduce, reverse0=False, **_):
    """dst[:, j] = reg = op1(op0(src[:, j], imm0), reg) along each partition;
    reg starts at op1's identity (reset_reduce), at imm1 (load_reduce) or
    where the previous instruction left the Vector engine's register (reduce)."""
    name = "nki.isa.tensor_scalar_cumulative"
    _tile(dst, "dst", name), _tile(src, "src", name)
    r0, i0 = _scalar_operand(imm0, name, "imm0")
    flags = _reduce_flags(reduce_cmd, name) | (trace.FLAG_REVERSE0 if reverse0 else 0)
    if flags & trace.FLAG_REDUCE_LOAD and imm1 is None:
        fail("reduce_cmd=load_reduce starts from imm1, which is missing", "operand", name)
    _emit(name, trace.SCALAR_CUMULATIVE, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(src, name), r0], func=(_alu(op0, name), _alu(op1, name)),
          flags=flags, imm=(i0, float(imm1) if imm1 is not None else 0.0))
    return dst


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None,
                  reduce_cmd=_reduce_cmd.idle, reduce_op=None, reverse_pred=False, **_):
    """dst = where(predicate, on_true, on_false) (predicate an 8/16-bit
    integer tile, on_false a number or [P, 1] tile); reduce_res[P, 1] gets
    the maximum of each row of dst."""
    name = "nki.isa.select_reduce"
    for what, t in (("dst", dst), ("predicate", predicate), ("on_true", on_true)):
        _tile(t, what, name)
    if reduce_op is not None and _alu(reduce_op, name) != _alu("maximum", name):
        fail("select_reduce reduces with nl.maximum only", "operand", name)
    r3, i3 = _scalar_operand(on_false, name, "on_false")
    flags = _reduce_flags(reduce_cmd, name) | (trace.FLAG_REVERSE0 if reverse_pred else 0)
    _emit(name, trace.SELECT_REDUCE, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(predicate, name), _rec(on_true, name), r3,
           _optional(reduce_res, "reduce_res", name)], flags=flags, imm=(i3,))
    if reduce_res is not None:
        _mark_written(reduce_res)
    return dst


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=_reduce_cmd.idle, reduce_res=None, reduce_op=None, range_start=0.0,
                 on_false_value=_FP32_MIN, **_):
    """dst[:, j] = on_true_tile[:, j] where comp_op0(j + range_start, bound0)
    and comp_op1(j + range_start, bound1) (bounds are [P, 1] tiles), else
    on_false_value (fp32's lowest by default); reduce_res[P, 1] gets the
    reduce_op (maximum) of each row of dst."""
    name = "nki.isa.range_select"
    for what, t in (("dst", dst), ("on_true_tile", on_true_tile), ("bound0", bound0),
                    ("bound1", bound1)):
        _tile(t, what, name)
    flags = _reduce_flags(reduce_cmd, name)
    red = _alu(reduce_op if reduce_op is not None else "maximum", name)
    _emit(name, trace.RANGE_SELECT, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(on_true_tile, name), _rec(bound0, name), _rec(bound1, name),
           _optional(reduce_res, "reduce_res", name)],
          func=(_alu(comp_op0, name), _alu(comp_op1, name), red), flags=flags,
          imm=(float(range_start), float(on_false_value)))
    if reduce_res is not None:
        _mark_written(reduce_res)
    return dst


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, **_):
    """On partitions 0, 16, ..., 112 of src [P, T] (one per GpSimd core):
    dst[p, :N] = the indices of the N nonzero elements + index_offset,
    dst[p, N:T] = padding_val, dst[p, T] = N. Other partitions of dst keep
    their values."""
    name = "nki.isa.nonzero_with_count"
    _tile(dst, "dst", name), _tile(src, "src", name)
    _emit(name, trace.NONZERO_WITH_COUNT, trace.GPSIMD_ENGINE, dst,
          [_rec(dst, name), _rec(src, name)], imm=(int(index_offset), int(padding_val)))
    return dst


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(dst, src, axes=None, dge_mode=None, oob_mode=None, **_):
    """dst = src with its axes permuted by DMA (HBM or SBUF; 2-byte dtypes, no
    conversion): 2-D [P, F] -> [F, P] (axes (1, 0)), 3-D [A, B, C] -> [C, B, A]
    (axes (2, 1, 0)), 4-D [A, B, C, D] -> [D, B, C, A] (axes (3, 1, 2, 0)),
    the only permutations the reference lists. dge_mode=hwdge adds its
    rules: src.shape[0] == 16 and src.shape[-1] a multiple of 128. The
    indirect form (src = hbm_tensor[indices, ...] with a uint32 SBUF index
    tile, software DGE) transposes the rows the indices name. A src moved by
    an access pattern's runtime scalar_offset (``x.ap(..., scalar_offset=w)``,
    or an nl.ds with a runtime start) transposes the view where the word puts
    it, read when the kernel runs, as dma_copy's scalar_offset."""
    name = "nki.isa.dma_transpose"
    if isinstance(dst, IndirectTensor):
        fail("dma_transpose writes a plain dst; only its src is indirect (an index tile or a "
             "scalar_offset)", "indirect_dma", name)
    if isinstance(src, IndirectTensor) and src.scalar:
        return _dma_transpose_moved(dst, src, axes, dge_mode, oob_mode, name)
    if isinstance(src, IndirectTensor):
        return _dma_transpose_indirect(dst, src, axes, dge_mode, oob_mode, name)
    _check_dma_transpose(dst, src, axes, dge_mode, name)
    _emit(name, trace.DMA_TRANSPOSE, trace.DMA_ENGINE, dst, [_rec(dst, name), _rec(src, name)],
          imm=(float(src.shape[-1]),))
    return dst


def _dma_transpose_moved(dst, src, axes, dge_mode, oob_mode, name):
    """dma_transpose of a view moved by one scalar_offset word: the direct
    form's rules on the view at offset 0, the word's on dma_copy's terms
    (any DGE but none; oob_mode error or skip: the whole transfer)."""
    mode = _mode_name(dge_mode)
    if mode not in (None, "unknown", "swdge", "hwdge"):
        fail(f"a scalar_offset (a start address read while the kernel runs) needs DGE: "
             f"dge_mode unknown, swdge or hwdge, got {mode}", "indirect_dge", name)
    if _mode_name(oob_mode) not in (None, "error", "skip"):
        fail(f"oob_mode must be nisa.oob_mode.error or skip, got {oob_mode!r}", "operand", name)
    view = src.row
    _check_dma_transpose(dst, view, axes, dge_mode, name)
    flags = trace.FLAG_SCALAR_OFFSET | trace.FLAG_INDIRECT_SRC | \
        (trace.FLAG_OOB_SKIP if _mode_name(oob_mode) == "skip" else 0) | \
        (trace.FLAG_HWDGE if mode == "hwdge" else 0)
    _emit(name, trace.DMA_TRANSPOSE, trace.DMA_ENGINE, dst,
          [_rec(dst, name), _rec(view, name), _rec(src.indices, name)], flags=flags,
          imm=(float(view.shape[-1]), 0.0, float(src.bound), float(src.step)))
    return dst


def _check_dma_transpose(dst, src, axes, dge_mode, name):
    """The direct form's rules: axes, dst's shape, hardware DGE's shapes."""
    _tile(dst, "dst", name), _tile(src, "src", name)
    want = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if want is None or (axes is not None and tuple(axes) != want):
        fail(f"dma_transpose permutes a 2-, 3- or 4-D src with axes (1, 0), (2, 1, 0) or "
             f"(3, 1, 2, 0) respectively; got a {src.ndim}-D src with axes {axes}",
             "dma_transpose_axes", name)
    shape = tuple(src.shape[a] for a in want)
    if tuple(dst.shape) != shape:
        fail(f"dma_transpose of a {list(src.shape)} src with axes {want} needs dst "
             f"{list(shape)}, got {list(dst.shape)}", "shape_mismatch", name)
    if str(getattr(dge_mode, "name", dge_mode)) == "hwdge" and \
            (src.shape[0] != 16 or src.shape[-1] % 128):
        fail(f"a hardware-DGE dma_transpose needs src.shape[0] == 16 and src.shape[-1] a "
             f"multiple of 128, got {list(src.shape)}", "dma_transpose_hwdge", name)


def _mode_name(mode):
    return None if mode is None else str(getattr(mode, "name", mode))


def _dma_transpose_indirect(dst, src, axes, dge_mode, oob_mode, name):
    """The indirect (software-DGE) dma_transpose: gathered = the rows of
    src.base named by src.indices (partition first), then transposed as the
    direct form. The reference's constraints are rule dma_transpose_indirect."""
    rule = "dma_transpose_indirect"
    _tile(dst, "dst", name)
    if src.row.shape[0] != 1:
        fail("the indirect dma_transpose gathers rows of the first dim by an index tile "
             "(indirect_dim=0, the reference's form); another indexed dim is not simulated "
             "for it", rule, name)
    idx = src.indices
    if _mode_name(dge_mode) not in (None, "unknown", "swdge"):
        fail(f"the indirect dma_transpose runs on software DGE (dge_mode unknown or swdge), got "
             f"{_mode_name(dge_mode)}", rule, name)
    if src.base.on_chip:
        fail("the indirect dma_transpose reads its src from HBM", rule, name)
    if not isinstance(idx, NkiTensor) or not idx.on_chip or idx.storage.buffer != trace.SBUF \
            or idx.ndim != 2 or idx.dtype != dtypes.uint32:
        fail(f"the indices are a 2-D uint32 SBUF tile, got a {idx.ndim}-D {idx.dtype} tile in "
             f"{idx.storage.buffer}", rule, name)
    rows, cols = idx.shape
    if not (16 <= rows <= 128 and rows % 16 == 0):
        fail(f"indices.shape[0] must be 16..128 and a multiple of 16, got {rows}", rule, name)
    if cols > 1 and rows != 128:
        fail(f"indices of {cols} columns need exactly 128 partitions, got {rows}", rule, name)
    shape = src.shape
    if shape[-1] > 128:
        fail(f"the indirect dma_transpose moves rows of at most 128 elements (src.shape[-1]), got "
             f"{shape[-1]}", rule, name)
    if len(shape) == 4 and shape[1] != 1 and shape[2] != 1:
        fail(f"a 4-D indirect src needs src.shape[1] or src.shape[2] == 1, got {list(shape)}",
             rule, name)
    want = _DMA_TRANSPOSE_AXES.get(len(shape))
    if want is None or (axes is not None and tuple(axes) != want):
        fail(f"dma_transpose permutes a 2-, 3- or 4-D src with axes (1, 0), (2, 1, 0) or "
             f"(3, 1, 2, 0) respectively; got a {len(shape)}-D src with axes {axes}",
             "dma_transpose_axes", name)
    out = tuple(shape[a] for a in want)
    if tuple(dst.shape) != out:
        fail(f"dma_transpose of a {list(shape)} src with axes {want} needs dst {list(out)}, got "
             f"{list(dst.shape)}", "shape_mismatch", name)
    skip = _mode_name(oob_mode) == "skip"
    _emit(name, trace.DMA_TRANSPOSE, trace.DMA_ENGINE, dst,
          [_rec(dst, name), _rec(src.row, name), _rec(idx, name)], flags=1 | (2 if skip else 0),
          imm=(float(shape[-1]), float(shape[0]), float(src.bound), float(src.step)))
    return dst
