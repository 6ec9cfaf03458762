"""nki.isa's MX block-scaled instructions (NeuronCore-v4): quantize_mx on
the Vector engine and nc_matmul_mx on the Tensor engine.

A block is 8 partitions x one packed element (4 values): 32 values sharing
one E8M0 scale byte (2^(b - 127)). Block g of a tile (partitions 8 g ..
8 g + 7) keeps its scales in partition (g // 4) * 32 + g % 4 of the scale
tile: four rows at the same offset in each 32-partition quadrant, as the
reference describes. The simulator checks the rules and runs both in
runtime/src/nc/exec_mx.c; ``torchneuron.nki.mx`` packs and unpacks values on
the host.
"""

from torchneuron.nki import trace
from torchneuron.nki.isa import _emit, _psum_state, _rec, _tile
from torchneuron.nki.trace import fail


def quantize_mx(dst, src, dst_scale, **_):
    """Quantize a float16 / bfloat16 src [P, 4 F] (P a multiple of 32) into
    dst [P, F] of float8_e4m3fn_x4 / float8_e5m2_x4 and E8M0 scales in
    dst_scale (float8_e8m0fnu, or uint8 holding the same bytes; one per block of 8 partitions x 4 values; the scale is
    2^(floor(log2 amax) - emax + 1), twice the OCP sample algorithm's, so
    the largest value never saturates; values round to nearest even)."""
    name = "nki.isa.quantize_mx"
    for what, t in (("dst", dst), ("src", src), ("dst_scale", dst_scale)):
        _tile(t, what, name)
    _emit(name, trace.QUANTIZE_MX, trace.VECTOR_ENGINE, dst,
          [_rec(dst, name), _rec(src, name), _rec(dst_scale, name)])
    return dst


def _tiling(tile_position, tile_size, name):
    if not tile_position and not tile_size:
        return 0, 128
    if not tile_position or not tile_size:
        fail("tile_position and tile_size must be set together", "mx_tile_position", name)
    try:
        (row, col), (rows, cols) = tile_position, tile_size
        row, col, rows, cols = int(row), int(col), int(rows), int(cols)
    except (TypeError, ValueError):
        fail("tile_position / tile_size are (row, column) pairs of ints", "mx_tile_position", name)
    if col != 0 or cols != 128:
        fail(f"nc_matmul_mx tiles rows only: start column must be 0 and column size 128, got "
             f"{col} and {cols}", "mx_tile_position", name)
    return row, rows


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, **_):
    """dst[M, N] (PSUM, fp32) = the MX product of stationary [K, M] and moving
    [K, N] (packed float8_e4m3fn_x4 / float8_e5m2_x4 / float4_e2m1fn_x4; the
    contraction runs over the K partitions and the 4 values of each element),
    every value times its block's E8M0 scale from stationary_scale [.., M] /
    moving_scale [.., N] (float8_e8m0fnu or uint8). accumulate as for nc_matmul; tile_position /
    tile_size pick a row tile of 32, 64 or 128 PE rows."""
    name = "nki.isa.nc_matmul_mx"
    for what, t in (("dst", dst), ("stationary", stationary), ("moving", moving),
                    ("stationary_scale", stationary_scale), ("moving_scale", moving_scale)):
        _tile(t, what, name)
    start, rows = _tiling(tile_position, tile_size, name)
    if accumulate is None:
        state = _psum_state(dst) if dst.storage.psum_written is not None else "none"
        if state == "some":
            fail("accumulate=None on a PSUM region that is only partly written: the first-write "
                 "rule is ambiguous; pass accumulate=True or False", "psum_accumulate", name)
        accumulate = state == "all"
    _emit(name, trace.MATMUL_MX, trace.TENSOR_ENGINE, dst,
          [_rec(dst, name), _rec(stationary, name), _rec(moving, name),
           _rec(stationary_scale, name), _rec(moving_scale, name)],
          flags=trace.FLAG_ACCUMULATE if accumulate else 0, imm=(start, rows))
    return dst
