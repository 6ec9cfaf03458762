"""neuronxcc.nki.isa: the legacy dialect's instructions, which return their result.

``nisa.activation(op=nl.exp, data=x)`` allocates the result tile and records
the same instruction as the current dialect's destination-first
``nisa.activation(dst, nl.exp, x)``; every hardware rule is the current
dialect's. ``mask=`` clips the operands to the mask's box (see
legacy.language); element-wise instructions, generators and transposes
also take comparisons over several axes (legacy/masked_result.py,
legacy/masked_transpose.py). Index expressions feed ``iota`` and ``affine_select``.
"""

from torchneuron.nki import isa as _cur
from torchneuron.nki import language as _nl
from torchneuron.nki.isa import (  # noqa: F401  (same names in both dialects)
    Engine, NkiValidationError, dge_mode, engine, get_nc_version, gpsimd_engine, nc_version,
    oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine, vector_engine)
from torchneuron.nki.legacy.index import IndexExpr, Mask, clip, mask_box
from torchneuron.nki.legacy.language import _expand, reduce_masked
from torchneuron.nki.legacy.masked_result import (
    SKIP, from_partition_0, normalize, partial, partial_nothing, run_masked, skipped)
from torchneuron.nki.legacy.masked_transpose import masked_transpose
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import PSUM as _PSUM, fail


def _sbuf(shape, dtype, *tiles):
    return _nl.ndarray(tuple(shape), _nl._result_dtype(dtype, *tiles), buffer=_nl.sbuf)


def _with_mask(build=None, elementwise=False):
    """build(box-clipped operands...) runs on the mask's box; the result is
    full-size. elementwise: build acts element by element, so the mask may
    hold comparisons over several axes (i_p >= i_f): it runs on the box
    around them from partition 0 and the elements outside are not written."""
    if build is None:
        return lambda b: _with_mask(b, elementwise)

    def call(*args, mask=None, **kwargs):
        return run_masked(build, args, kwargs, mask, triangles=elementwise, expand=_expand,
                          elementwise=elementwise)

    call.__name__ = build.__name__
    call.__doc__ = build.__doc__
    return call


def nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, perf_mode=None, mask=None, **_):
    """A new PSUM tile [M, N] (fp32) = stationary[K, M].T @ moving[K, N];
    ``psum_tile += nisa.nc_matmul(...)`` accumulates into psum_tile. With
    perf_mode double_row the operands are fp8 [K, 2, M] and [K, 2, N].
    Either operand may be masked (``stationary[i_f < 64]``)."""
    from torchneuron.nki.legacy.operand_mask import masked_matmul

    if isinstance(mask, Mask) and mask.residual():
        fail("nc_matmul's mask= cannot hold a comparison over several axes: the reference "
             "masks a matmul's operands instead (nisa.nc_matmul(stationary[i_k >= i_m], "
             "moving))", "mask", "nki.isa.nc_matmul")
    return masked_matmul(
        lambda s, m: _nc_matmul(s, m, is_transpose=is_transpose, perf_mode=perf_mode,
                                mask=mask), stationary, moving, 0)


@_with_mask
def _nc_matmul(stationary, moving, is_transpose=False, perf_mode=None):
    if is_transpose and perf_mode is None:
        return _nc_transpose(moving)
    pairs = 2 if str(getattr(perf_mode, "value", perf_mode)) == "double_row" else 1
    out = _nl.ndarray((stationary.free_size() // pairs, moving.free_size() // pairs),
                      _nl.float32, buffer=_nl.psum)
    return _cur.nc_matmul(out, stationary, moving, accumulate=False, perf_mode=perf_mode,
                          is_transpose=is_transpose)


def nc_transpose(data, dtype=None, engine=None, mask=None, **_):
    """A new tile data.T: in PSUM from the Tensor engine (the default), in
    SBUF from the Vector engine (<= 32x32); mask= is over data's axes
    (legacy/masked_transpose.py)."""
    return masked_transpose(_nc_transpose, data, (), dict(dtype=dtype, engine=engine), mask,
                            "nki.isa.nc_transpose")


def _nc_transpose(data, dtype=None, engine=None):
    on_vector = engine is vector_engine
    out = _nl.ndarray((data.free_size(), data.shape[0]),
                      _nl.as_dtype(dtype) if dtype is not None else
                      (data.dtype if on_vector else _nl.float32),
                      buffer=_nl.sbuf if on_vector else _nl.psum)
    flat = data if data.ndim == 2 else data.reshape(data.shape[0], data.free_size())
    return _cur.nc_transpose(out, flat, engine=engine)


def activation(op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, dtype=None,
               mask=None, **_):
    """A new SBUF tile op(data * scale + bias); with reduce_op, reduce_res
    gets each partition's reduction of it. Element-wise, so a mask may hold
    comparisons over several axes: the elements outside are not written and
    take no part in the reduction."""
    mask = normalize(mask)
    if reduce_res is not None and isinstance(mask, Mask) and \
            (mask.residual() or mask_box(mask, triangles=True).get(0, (0,))[0] > 0):
        # (rows starting below partition 0 too: reduce_res keeps the rows above)
        return _activation_reduce_masked(op, data, bias, scale, reduce_op, reduce_res, dtype,
                                         mask)
    return run_masked(_activation, (op, data),
                      dict(bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           dtype=dtype), mask, triangles=reduce_res is None, expand=_expand,
                      elementwise=True)


def activation_reduce(op, data, reduce_op, reduce_res, bias=None, scale=1.0, dtype=None,
                      mask=None, **_):
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                      reduce_res=reduce_res, dtype=dtype, mask=mask)


def _activation(op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, dtype=None):
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    return _cur.activation(out, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                           reduce_res=reduce_res)


def _activation_reduce_masked(op, data, bias, scale, reduce_op, reduce_res, dtype, mask):
    """activation with reduce under comparisons over several axes
    (_reduce_masked), the activation in fp32."""
    return _reduce_masked(
        lambda dst, d, box: _cur.activation(dst, op, d, bias=clip(bias, box), scale=scale),
        data, reduce_op, reduce_res, dtype, mask, "nki.isa.activation", _nl.float32)


def _reduce_masked(elementwise, data, reduce_op, reduce_res, dtype, mask, name, inter):
    """An element-wise instruction with a reduce per partition under a mask
    over several axes (or one starting below row 0): elementwise(dst, data,
    box) on the box (from partition 0) into an ``inter`` tile, the
    masked-out elements given the reduction's identity, a Vector reduce per
    partition; the output and reduce_res written where the mask holds
    (reduce_res keeps its rows outside the mask's rows)."""
    from torchneuron.nki.legacy.language import _select_outside
    from torchneuron.nki.legacy.masked_result import (
        PartialTile, alu_name, from_partition_0, partial, reduction_identity)

    box = mask_box(mask, triangles=True)
    compute = from_partition_0(box, (data,), True)
    d = clip(data, compute)
    values = _nl.ndarray(_nl._tile_shape(d), inter, buffer=_nl.sbuf)
    elementwise(values, d, compute)
    identity = reduction_identity(alu_name(reduce_op, name), inter)
    kept = _select_outside(values, mask.residual(), compute, identity)
    rows = reduce_res.shape[0]
    red = _nl.ndarray((rows, 1), inter, buffer=_nl.sbuf)
    _cur.tensor_reduce(red[0:d.shape[0], :], reduce_op, kept, list(range(1, d.ndim)))
    flat = reduce_res if reduce_res.ndim == 2 else reduce_res.reshape(rows, 1)
    PartialTile(red, {0: box[0]} if 0 in box else {}, []).assign_into(flat)
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    _cur.tensor_copy(clip(out, compute), values)
    return partial(out, box, mask.residual())


@_with_mask(elementwise=True)
def tensor_tensor(data1, data2, op, dtype=None, engine=None, **_):
    """A new SBUF tile data1 op data2."""
    out = _sbuf(_nl._tile_shape(data1), dtype, data1, data2)
    return _cur.tensor_tensor(out, data1, data2, op, engine=engine)


@_with_mask(elementwise=True)
def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  dtype=None, engine=None, **_):
    """A new SBUF tile (data op0 operand0) op1 operand1."""
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    return _cur.tensor_scalar(out, data, op0, operand0, reverse0=reverse0, op1=op1,
                              operand1=operand1, reverse1=reverse1, engine=engine)


@_with_mask(elementwise=True)
def scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         dtype=None, **_):
    out = _sbuf(_nl._tile_shape(data), dtype, data, operand1)
    return _cur.scalar_tensor_tensor(out, data, op0, operand0, op1, operand1,
                                     reverse0=reverse0, reverse1=reverse1)


def tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None,
                         mask=None, **_):
    """A new SBUF tile data op0 operand0, each partition's reduce_op
    reduction of it in reduce_res. Element-wise with a reduce, as activation
    with reduce_res: under a mask over several axes the elements outside are
    not written and take no part in the reduction (computed in fp32 for a
    float result)."""
    mask = normalize(mask)
    if isinstance(mask, Mask) and mask.residual():
        out_dtype = _nl._result_dtype(dtype, data)
        return _reduce_masked(
            lambda dst, d, box: _cur.tensor_scalar(dst, d, op0, clip(operand0, box),
                                                   reverse0=reverse0),
            data, reduce_op, reduce_res, dtype, mask, "nki.isa.tensor_scalar_reduce",
            _nl.float32 if out_dtype.is_float else out_dtype)
    return _tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0,
                                 dtype=dtype, mask=mask)


@_with_mask
def _tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=False,
                          dtype=None):
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    return _cur.tensor_scalar_reduce(out, data, op0, operand0, reduce_op, reduce_res,
                                     reverse0=reverse0)


def tensor_reduce(op, data, axis, dtype=None, negate=False, keepdims=False, engine=None,
                  mask=None, **_):
    """A new SBUF tile: op-reduction of data over ``axis`` (trailing free axes);
    under a mask the masked-out elements take no part (legacy.language)."""
    from torchneuron.nki.legacy.masked_result import alu_name

    return reduce_masked(
        lambda t: _tensor_reduce(op, t, axis, dtype=dtype, negate=negate, keepdims=keepdims,
                                 engine=engine),
        data, axis, keepdims, mask, alu_name(op, "nki.isa.tensor_reduce"))


def _tensor_reduce(op, data, axis, dtype=None, negate=False, keepdims=False, engine=None):
    axes = {a % data.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    shape = [1 if d in axes else s for d, s in enumerate(data.shape)
             if keepdims or d not in axes]
    while len(shape) < 2:
        shape.append(1)
    out = _sbuf(shape, dtype, data)
    return _cur.tensor_reduce(out, op, data, sorted(axes), negate=negate, engine=engine)


@_with_mask(elementwise=True)
def tensor_copy(src, dtype=None, engine=None, **_):
    """A new SBUF tile equal to src (converted to dtype)."""
    out = _sbuf(_nl._tile_shape(src), dtype, src)
    return _cur.tensor_copy(out, src, engine=engine)


def _write_masked_in_place(dst, mask, write):
    """An in-place instruction on dst under a mask over several axes:
    write(region, box) writes a scratch copy of dst over the box around the
    mask (from partition 0), and the elements where the mask holds are
    copied into dst (tensor_copy_predicated), the others keep dst's."""
    from torchneuron.nki.legacy.masked_result import PartialTile

    box, residual, compute = _mask_parts(mask)
    scratch = _nl.ndarray(tuple(dst.shape), dst.dtype, buffer=_nl.sbuf)
    region = clip(scratch, compute)
    _cur.tensor_copy(region, clip(dst, compute))
    write(region, compute)
    PartialTile(scratch, box, residual).assign_into(dst)


def tensor_copy_predicated(src, dst, predicate, mask=None, reverse_pred=False, **_):
    """dst = src where predicate (the legacy form writes dst in place); under
    a mask only the masked elements may change."""
    mask = normalize(mask)
    if mask is SKIP:
        return
    if isinstance(mask, Mask) and mask.residual():
        def write(region, box):
            pred = clip(predicate, box)
            _cur.tensor_copy_predicated(region, clip(src, box),
                                        _nl.logical_not(pred) if reverse_pred else pred)

        return _write_masked_in_place(dst, mask, write)
    box = mask_box(mask)
    src, dst, predicate = clip(src, box), clip(dst, box), clip(predicate, box)
    if reverse_pred:
        predicate = _nl.logical_not(predicate)
    _cur.tensor_copy_predicated(dst, src, predicate)


@_with_mask(elementwise=True)
def reciprocal(data, dtype=None, **_):
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    return _cur.reciprocal(out, data)


def _affine(expr, name, box=None):
    """(offset, channel_multiplier, pattern, extents) of an affine index
    expression (at least 2 axes); with a box {axis: (lo, hi, n)} the
    pattern covers the box only and the offset starts at its corner."""
    if not isinstance(expr, IndexExpr):
        fail(f"{name} takes an index expression of nl.arange / nl.mgrid axes", "operand",
             f"nki.isa.{name}")
    n = max(expr.ndim, 2)
    extents = (1,) * (n - expr.ndim) + expr.extents
    shift = n - expr.ndim
    coefs = {a + shift: c for a, c in expr.coefs.items()}
    box = box or {}
    span = [box.get(a, (0, extents[a]))[:2] for a in range(n)]
    offset = expr.const + sum(c * span[a][0] for a, c in coefs.items())
    pattern = [[coefs.get(a, 0), span[a][1] - span[a][0]] for a in range(1, n)]
    return offset, coefs.get(0, 0), pattern, extents


def _mask_parts(mask):
    """(box, comparisons over several axes, compute box from partition 0) of
    a Mask or None, for an instruction that writes a new tile element by
    element (legacy/masked_result.py)."""
    box = mask_box(mask, triangles=True)
    residual = mask.residual() if mask is not None else []
    return box, residual, from_partition_0(box, (), True)


def iota(expr, dtype, mask=None, **_):
    """A new SBUF tile holding the index expression's values (GpSimd iota);
    under a mask only the masked elements are written (the box around them
    is computed, from partition 0)."""
    mask = normalize(mask)
    offset, multiplier, pattern, extents = _affine(expr, "iota")
    out = _nl.ndarray(extents, dtype, buffer=_nl.sbuf)
    if mask is SKIP:
        return partial_nothing(out)
    box, residual, compute = _mask_parts(mask)
    offset, multiplier, pattern, _ = _affine(expr, "iota", compute)
    region = clip(out, compute)
    if _nl.as_dtype(dtype) is _nl.int32:
        _cur.iota(region, pattern, offset=offset, channel_multiplier=multiplier)
    else:
        values = _nl.ndarray(_nl._tile_shape(region), _nl.int32, buffer=_nl.sbuf)
        _cur.iota(values, pattern, offset=offset, channel_multiplier=multiplier)
        _cur.tensor_copy(region, values)
    return partial(out, box, residual)


_COMPARE = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


def affine_select(pred, on_true_tile, on_false_value, mask=None, dtype=None, **_):
    """A new SBUF tile: on_true_tile where the affine predicate (i_p >= i_f,
    ...) holds, else on_false_value; under a mask only the masked elements
    are written (the box around them is selected, from partition 0)."""
    if not isinstance(pred, Mask) or len(pred.terms) != 1:
        fail("affine_select takes one comparison of index expressions (e.g. i_p >= i_f)",
             "operand", "nki.isa.affine_select")
    mask = normalize(mask)
    expr, op = pred.terms[0]
    _affine(expr, "affine_select")
    out = _sbuf(_nl._tile_shape(on_true_tile), dtype, on_true_tile)
    if mask is SKIP:
        return partial_nothing(out)
    box, residual, compute = _mask_parts(mask)
    offset, multiplier, pattern, _ = _affine(expr, "affine_select", compute)
    on_true_tile = clip(on_true_tile, compute)
    if isinstance(on_true_tile, NkiTensor) and on_true_tile.storage.buffer == _PSUM:
        # GpSimd reads SBUF only; legacy kernels (the published flash
        # attention) select straight from a matmul's PSUM tile, which the
        # legacy compiler moves to SBUF first: so does this (a Vector copy)
        on_true_tile = _cur.tensor_copy(_nl.ndarray(_nl._tile_shape(on_true_tile),
                                                    on_true_tile.dtype, buffer=_nl.sbuf),
                                        on_true_tile)
    _cur.affine_select(clip(out, compute), pattern, multiplier, on_true_tile, on_false_value,
                       cmp_op=getattr(_nl, _COMPARE[op]), offset=offset)
    return partial(out, box, residual)


def memset(shape, value, dtype, mask=None, engine=None, **_):
    """A new SBUF tile of shape filled with value; under a mask only the
    masked elements are written (the box around them is set, from
    partition 0)."""
    out = _nl.ndarray(tuple(shape), dtype, buffer=_nl.sbuf)
    mask = normalize(mask)
    if mask is SKIP:
        return partial_nothing(out)
    box, residual, compute = _mask_parts(mask)
    _cur.memset(clip(out, compute), value, engine=engine)
    return partial(out, box, residual)


@_with_mask
def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       dtype=None, **_):
    """A new SBUF tile: the scan op1(op0(data0[j], prev), data1[j]) from initial."""
    out = _sbuf(_nl._tile_shape(data0), dtype, data0, data1)
    return _cur.tensor_tensor_scan(out, data0, data1, initial, op0, op1, reverse0=reverse0,
                                   reverse1=reverse1)


@_with_mask
def bn_stats(data, dtype=None, **_):
    """A new [P, 6] SBUF tile of bn_stats tuples of data."""
    return _cur.bn_stats(_sbuf((data.shape[0], 6), dtype, data), data)


@_with_mask
def bn_aggr(data, dtype=None, **_):
    """A new [P, 2] SBUF tile: (mean, variance) from bn_stats tuples."""
    return _cur.bn_aggr(_sbuf((data.shape[0], 2), dtype, data), data)


@_with_mask
def max8(src, dtype=None, **_):
    """A new [P, 8] SBUF tile: the 8 largest values per partition, descending."""
    return _cur.max8(_sbuf((src.shape[0], 8), dtype, src), src)


@_with_mask
def nc_find_index8(data, vals, dtype=None, **_):
    """A new [P, 8] uint32 tile: where each of vals first occurs in data."""
    out = _nl.ndarray((data.shape[0], 8), _nl.as_dtype(dtype or _nl.uint32), buffer=_nl.sbuf)
    return _cur.nc_find_index8(out, data, vals)


@_with_mask
def nc_match_replace8(data, vals, imm, dst_idx=None, dtype=None, **_):
    """A new tile: data with the first occurrences of vals replaced by imm."""
    out = _sbuf(_nl._tile_shape(data), dtype, data)
    return _cur.nc_match_replace8(out, data, vals, imm, dst_idx=dst_idx)


@_with_mask
def tensor_partition_reduce(op, data, dtype=None, **_):
    """A new [1, F...] SBUF tile: op-reduction of data across partitions."""
    out = _sbuf((1,) + tuple(data.shape[1:]), dtype, data)
    return _cur.tensor_partition_reduce(out, op, data)


@_with_mask(elementwise=True)
def dropout(data, prob, dtype=None, **_):
    """A new SBUF tile: data with elements zeroed with probability prob."""
    out = _nl.ndarray(_nl._tile_shape(data), data.dtype, buffer=_nl.sbuf)
    _cur.dropout(out, data, prob)
    return out if dtype is None or _nl.as_dtype(dtype) == data.dtype else _nl.copy(out, dtype=dtype)


def range_select(on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.idle,
                 reduce_res=None, reduce_op=None, range_start=0, on_false_value=None, dtype=None,
                 mask=None, **_):
    """A new SBUF tile: on_true_tile where both comparisons of the free index
    (+ range_start) with bound0 / bound1 hold, else on_false_value. Under a
    mask the instruction runs on the masked columns, so range_start moves to
    the first of them (each element compares its own column index, as
    without the mask); without reduce_res it is element-wise and takes
    comparisons over several axes."""
    m = normalize(mask)
    if isinstance(m, Mask) and len(on_true_tile.shape) == 2:
        first = mask_box(m, triangles=True).get(1)
        if first is not None and first[2] == on_true_tile.shape[1]:
            range_start = range_start + first[0]
    build = _range_select_elementwise if reduce_res is None else _range_select
    return build(on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
                 reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
                 on_false_value=on_false_value, dtype=dtype, mask=mask)


def _range_select_build(on_true_tile, comp_op0, comp_op1, bound0, bound1,
                        reduce_cmd=reduce_cmd.idle, reduce_res=None, reduce_op=None, range_start=0,
                        on_false_value=None, dtype=None):
    out = _sbuf(_nl._tile_shape(on_true_tile), dtype, on_true_tile)
    extra = {} if on_false_value is None else {"on_false_value": on_false_value}
    return _cur.range_select(out, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                             reduce_cmd=reduce_cmd, reduce_res=reduce_res, reduce_op=reduce_op,
                             range_start=range_start, **extra)


_range_select = _with_mask(_range_select_build)
_range_select_elementwise = _with_mask(_range_select_build, elementwise=True)


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=None, reverse_pred=False, mask=None, **_):
    """dst = where(predicate, on_true, on_false), the row max in reduce_res
    (the legacy form also writes a given dst); under a mask only the masked
    elements of dst may change."""
    mask = normalize(mask)
    if mask is SKIP:
        return dst
    if isinstance(mask, Mask) and mask.residual():
        if reduce_res is not None:
            fail("select_reduce with reduce_res under a mask over several axes: the row "
                 "reduction would need the masked-out elements left out; select without "
                 "reduce_res, then reduce under the mask (nisa.tensor_reduce)", "mask",
                 "nki.isa.select_reduce")

        def write(region, box):
            _cur.select_reduce(region, clip(predicate, box), clip(on_true, box), on_false,
                               reverse_pred=reverse_pred)

        _write_masked_in_place(dst, mask, write)
        return dst
    box = mask_box(mask)
    return _cur.select_reduce(clip(dst, box), clip(predicate, box), clip(on_true, box),
                              on_false, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                              reduce_op=reduce_op, reverse_pred=reverse_pred)


def dma_transpose(src, axes=None, mask=None, dtype=None, **_):
    """A new SBUF tile src.T, moved by DMA (2-D, 2-byte dtypes); mask= is
    over src's axes (legacy/masked_transpose.py)."""
    return masked_transpose(_dma_transpose, src, (), dict(axes=axes), mask,
                            "nki.isa.dma_transpose")


def _dma_transpose(src, axes=None):
    out = _nl.ndarray((src.shape[-1], src.shape[0]), src.dtype, buffer=_nl.sbuf)
    return _cur.dma_transpose(out, src, axes=axes)


def dma_copy(dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None, **_):
    """dst = src through a DMA (HBM <-> SBUF, HBM <-> HBM, SBUF <-> SBUF);
    dst_rmw_op=np.add adds into dst; a side indexed by a tile of indices
    (``in_tensor[idx_tile, iy]``) gathers or scatters rows (indirect DMA)."""
    mask = normalize(mask)
    if mask is SKIP:
        return
    box = mask_box(mask)
    _cur.dma_copy(clip(dst, box), clip(src, box), dst_rmw_op=dst_rmw_op, oob_mode=oob_mode,
                  dge_mode=dge_mode, unique_indices=False)


@_with_mask
def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, **_):
    """A new SBUF tile [P, V * E] of src_buffer's dtype: per 16-partition group,
    E elements at each of the group's first V indices (nisa.local_gather)."""
    v = index.free_size() * 16 if num_valid_indices is None else int(num_valid_indices)
    out = _nl.ndarray((src_buffer.shape[0], v * int(num_elem_per_idx)), src_buffer.dtype,
                      buffer=_nl.sbuf)
    return _cur.local_gather(out, src_buffer, index, num_elem_per_idx=num_elem_per_idx,
                             num_valid_indices=v)


def nc_stream_shuffle(src, dst, shuffle_mask, mask=None, **_):
    """dst partition i = src partition shuffle_mask[i] in each 32-partition
    quadrant (the legacy form takes src first and writes dst in place)."""
    if isinstance(normalize(mask), Mask):  # a bool keeps or drops the instruction
        fail("nc_stream_shuffle takes no mask here", "mask", "nki.isa.nc_stream_shuffle")
    if normalize(mask) is not SKIP:
        _cur.nc_stream_shuffle(dst, src, shuffle_mask)


def sequence_bounds(segment_ids, dtype=None, **_):
    """A new SBUF tile [1, 2, n]: each element's segment start and end
    (nisa.sequence_bounds), in dtype (default: segment_ids' dtype)."""
    out = _nl.ndarray((1, 2, segment_ids.free_size()),
                      _nl.as_dtype(dtype) if dtype is not None else segment_ids.dtype,
                      buffer=_nl.sbuf)
    return _cur.sequence_bounds(out, segment_ids)


__all__ = sorted(n for n, v in globals().items()
                 if not n.startswith("_") and (callable(v) or isinstance(v, Engine))
                 and n not in ("IndexExpr", "Mask", "NkiTensor", "clip", "mask_box", "fail"))


def tensor_copy_dynamic_src(src, mask=None, dtype=None, engine=None, **_):
    """A new SBUF tile: src, a free-dim window of an SBUF / PSUM tile whose
    start is read while the kernel runs (``t[:, nl.ds(word, n)]``)."""
    view = getattr(src, "row", src)
    out = _nl.ndarray(_nl._tile_shape(view), dtype or view.dtype, buffer=_nl.sbuf)
    mask = normalize(mask)
    if mask is SKIP:
        return partial_nothing(out)
    if isinstance(mask, Mask):
        fail("tensor_copy_dynamic_src takes no mask over index expressions here", "mask",
             "nki.isa.tensor_copy_dynamic_src")
    return _cur.tensor_copy_dynamic_src(out, src, engine=engine)


def tensor_copy_dynamic_dst(dst, src, mask=None, dtype=None, engine=None, **_):
    """dst = src, dst a free-dim window of an SBUF / PSUM tile whose start is
    read while the kernel runs (the legacy form writes dst in place)."""
    mask = normalize(mask)
    if mask is SKIP:
        return dst
    if isinstance(mask, Mask):
        fail("tensor_copy_dynamic_dst takes no mask over index expressions here", "mask",
             "nki.isa.tensor_copy_dynamic_dst")
    return _cur.tensor_copy_dynamic_dst(dst, src, engine=engine)
