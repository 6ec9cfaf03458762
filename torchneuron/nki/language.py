"""nki.language: buffers, dtypes, allocation and the conveniences built on nki.isa.

Every convenience that returns a tile allocates a new SBUF (or PSUM) tile and
records the instructions that fill it, exactly as a kernel author would
write them with ``nki.isa``.
"""

import builtins
import math

from torchneuron.nki import isa as nisa
from torchneuron.nki import trace
from torchneuron.nki.dtypes import (  # noqa: F401  (re-exported as nl.<dtype>)
    NkiDtype, bfloat16, bool_, float4_e2m1fn_x4, float8_e4m3, float8_e4m3fn_x4, float8_e5m2,
    float8_e5m2_x4, float8_e8m0fnu, float16, float32, int8, int16, int32, int64, tfloat32, uint8,
    uint16, uint32, as_dtype)
from torchneuron.nki.ops import ACTIVATION_CODES, ALU_CODES, ActivationFunction, AluOp
from torchneuron.nki.slicing import ds  # noqa: F401  (nl.ds)
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


class Buffer:
    def __init__(self, name, code, hbm_kind=None):
        self.name = name
        self.code = code
        self.hbm_kind = hbm_kind

    def __repr__(self):
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", trace.SBUF)
psum = Buffer("psum", trace.PSUM)
hbm = Buffer("hbm", trace.HBM, "shared")
shared_hbm = Buffer("shared_hbm", trace.HBM, "shared")
private_hbm = Buffer("private_hbm", trace.HBM, "private")


class MemoryRegion:
    """The buffers by region name: nl.MemoryRegion.sbuf is nl.sbuf."""

    sbuf = sbuf
    psum = psum
    private_hbm = private_hbm
    shared_hbm = shared_hbm


DType = NkiDtype  # the type of nl.float32, nl.bfloat16, ...


def _buffer_of(x):
    """The Buffer of a buffer or of a tensor (its storage's buffer)."""
    if isinstance(x, Buffer):
        return x
    if isinstance(x, NkiTensor):
        return {trace.SBUF: sbuf, trace.PSUM: psum}.get(x.storage.buffer, hbm)
    fail(f"expected a buffer (nl.sbuf, nl.psum, nl.hbm, ...) or a tensor, got {x!r}", "buffer")


def is_hbm(buffer):
    """Whether buffer (or a tensor's buffer) is HBM: hbm, shared_hbm or private_hbm."""
    return _buffer_of(buffer).code == trace.HBM


def is_sbuf(buffer):
    return _buffer_of(buffer).code == trace.SBUF


def is_psum(buffer):
    return _buffer_of(buffer).code == trace.PSUM


def is_on_chip(buffer):
    """Whether buffer (or a tensor's buffer) is SBUF or PSUM."""
    return _buffer_of(buffer).code != trace.HBM


class tile_size:
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_num_banks = 8


for _name in ALU_CODES:
    if _name != "bypass":
        globals()[_name] = AluOp(_name)
for _name in ACTIVATION_CODES:
    globals()[_name] = ActivationFunction(_name)
bypass = AluOp("bypass")
identity = globals()["copy"]  # the activation; nl.copy (below) is also the tile copy

affine_range = range
sequential_range = range
static_range = range


def par_dim(size):
    return size


def _grid_shape():
    """The launch grid's shape: kernel[4] is (4,), kernel[2, 3] is (2, 3)."""
    count = trace.current().num_programs
    return getattr(count, "shape", (int(count),))


def program_id(axis=0):
    """This program's coordinate on a grid axis (row-major: on a [2, 3] grid,
    program 4 is (1, 1)); 0 on an axis past the grid's."""
    shape, pid = _grid_shape(), trace.current().program_id
    if axis >= len(shape):
        return 0
    for size in shape[axis + 1:]:
        pid //= size
    return pid % shape[axis]


def num_programs(axis=0):
    """The grid's size on an axis (1 past its axes)."""
    shape = _grid_shape()
    return shape[axis] if axis < len(shape) else 1


def program_ndim():
    """The number of axes of the launch grid."""
    return len(_grid_shape())


# ---- allocation --------------------------------------------------------------

def ndarray(shape, dtype, buffer=None, name=None, address=None, **_):
    """A new tensor: on chip (sbuf/psum; shape[0] is the partition dim) or in
    HBM (shared_hbm outputs are returned to the caller)."""
    buffer = sbuf if buffer is None else buffer
    if not isinstance(buffer, Buffer):
        fail(f"buffer must be nl.sbuf, nl.psum or an HBM buffer, got {buffer!r}", "buffer")
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    try:
        dtype = as_dtype(dtype)
    except TypeError as e:
        fail(str(e), "dtype", "nki.language.ndarray")
    tracer = trace.current()
    location = trace.caller_location()
    if buffer.code == trace.HBM:
        storage = tracer.new_storage(trace.HBM, dtype, shape, buffer.hbm_kind, location)
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        return NkiTensor(storage, dtype, shape, list(reversed(strides)))
    if len(shape) < 2:
        fail(f"on-chip tensors are at least 2-D (partition dim first), got shape {shape}",
             "shape", "nki.language.ndarray")
    if address is not None:
        address = (int(address[0]), int(address[1]))
    storage = tracer.new_storage(buffer.code, dtype, shape, "tile", location, address)
    strides, acc = [], 1
    for s in reversed(shape[1:]):
        strides.append(acc)
        acc *= s
    return NkiTensor(storage, dtype, shape, [1] + list(reversed(strides)))


def _filled(shape, dtype, buffer, value):
    t = ndarray(shape, dtype, buffer=buffer)
    nisa.memset(t, value)
    return t


def zeros(shape, dtype, buffer=None, **kw):
    return _filled(shape, dtype, buffer, 0)


def ones(shape, dtype, buffer=None, **kw):
    return _filled(shape, dtype, buffer, 1)


def full(shape, fill_value, dtype, buffer=None, **kw):
    return _filled(shape, dtype, buffer, fill_value)


def zeros_like(t, dtype=None, buffer=None, **kw):
    return zeros(t.shape, dtype or t.dtype, buffer=buffer)


def empty_like(t, dtype=None, buffer=None, **kw):
    return ndarray(t.shape, dtype or t.dtype, buffer=buffer)


# ---- movement ----------------------------------------------------------------

def _tile_shape(t):
    if t.on_chip or t.ndim >= 2:
        return t.shape
    return (1, t.shape[0]) if t.ndim == 1 else (1, 1)


def load(src, dtype=None, **_):
    """A new SBUF tile holding src (an HBM view)."""
    tile = ndarray(_tile_shape(src), dtype or src.dtype, buffer=sbuf)
    nisa.dma_copy(tile, src)
    return tile


def load_transpose2d(src, dtype=None, **_):
    """A new SBUF tile [P, F] holding the 2-D HBM tensor src [F, P]
    transposed: the DMA reads src column by column."""
    name = "nki.language.load_transpose2d"
    if not isinstance(src, NkiTensor) or src.on_chip:
        fail("load_transpose2d loads from an HBM tensor", "operand", name)
    if src.ndim != 2:
        fail(f"load_transpose2d takes a 2-D tensor, got shape {src.shape}", "shape", name)
    tile = ndarray(src.shape[::-1], dtype or src.dtype, buffer=sbuf)
    nisa.dma_copy(tile, src.permute(1, 0))
    return tile


def shared_identity_matrix(n, dtype=uint8, **_):
    """A new [n, n] SBUF tile holding the identity: iota writes c - i, which
    is zero on the diagonal."""
    offsets = ndarray((n, n), int32, buffer=sbuf)
    nisa.iota(offsets, [[-1, n]], offset=0, channel_multiplier=1)
    identity = ndarray((n, n), dtype, buffer=sbuf)
    nisa.tensor_scalar(identity, offsets, globals()["equal"], 0)
    return identity


def store(dst, value, **_):
    """Writes value to dst (PSUM values pass through an SBUF copy: DMA cannot
    read PSUM)."""
    if isinstance(value, NkiTensor) and value.storage.buffer == trace.PSUM:
        value = copy(value, dtype=dst.dtype)
    nisa.dma_copy(dst, value)
    return dst


class _Copy(ActivationFunction):
    """nl.copy: the identity activation as an op, a tile copy when called."""

    def __call__(self, x, dtype=None, **_):
        """A new SBUF tile equal to x (converted to dtype)."""
        out = ndarray(_tile_shape(x), dtype or x.dtype, buffer=sbuf)
        if x.on_chip:
            nisa.tensor_copy(out, x)
        else:
            nisa.dma_copy(out, x)
        return out


copy = _Copy("copy")


class _Prelu(ActivationFunction):
    """nl.prelu: x where x >= 0, else alpha * x; as an op it takes its slope
    from activate2's relu_param."""

    def __call__(self, x, alpha=0.0, dtype=None, **_):
        """A new SBUF tile prelu(x) with negative slope alpha (a number or a
        [P, 1] tile): one activate2 on trn3; on trn1 / trn2, which lack
        activate2, max(x, 0) + alpha * min(x, 0) in two Vector instructions
        (the same values; a zero result may differ in sign)."""
        out = ndarray(_tile_shape(x), _result_dtype(dtype, x))
        if nisa.get_nc_version() >= nisa.nc_version.gen4:
            nisa.activate2(out, self, x, 0.0, 0.0, None, None, relu_param=alpha)
            return out
        neg = ndarray(_tile_shape(x), float32)
        g = globals()
        nisa.tensor_scalar(neg, x, g["minimum"], 0.0, op1=g["multiply"], operand1=alpha)
        nisa.scalar_tensor_tensor(out, data=x, op0=g["maximum"], operand0=0.0, op1=g["add"],
                                  operand1=neg)
        return out


prelu = _Prelu("prelu")


def transpose(x, dtype=None, **_):
    """A new SBUF tile x.T (via the Tensor engine and PSUM)."""
    p, f = x.shape[0], x.free_size()
    flat = x if x.ndim == 2 else x.reshape(p, f)
    t = ndarray((f, p), x.dtype, buffer=psum)
    nisa.nc_transpose(t, flat)
    return copy(t, dtype=dtype or x.dtype)


def matmul(x, y, transpose_x=False, **_):
    """A new PSUM tile x @ y (fp32). With transpose_x, x is given as [K, M]."""
    if not transpose_x:
        x = transpose(x)
    out = ndarray((x.free_size(), y.free_size()), float32, buffer=psum)
    nisa.nc_matmul(out, x, y)
    return out


# ---- shapes ------------------------------------------------------------------

def _on_chip_tile(x, name):
    if not isinstance(x, NkiTensor):
        fail(f"{name} takes a tile, got {type(x).__name__}", "operand", f"nki.language.{name}")
    if not x.on_chip:
        fail(f"{name} takes an SBUF or PSUM tile, not an HBM tensor (nl.load it first)",
             "on_chip_only", f"nki.language.{name}")
    return x


def broadcast_to(x, shape, dtype=None, **_):
    """A new SBUF tile of ``shape`` holding x repeated along its size-1
    dims (NumPy rules, same rank). x itself when the shape already matches
    and no other dtype is asked for."""
    name = "nki.language.broadcast_to"
    _on_chip_tile(x, "broadcast_to")
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or any(o != n and o != 1 for o, n in zip(x.shape, shape)):
        fail(f"cannot broadcast a {x.shape} tile to {shape}: the rank stays and each dim "
             "matches or grows from 1", "broadcast", name)
    out_dtype = as_dtype(dtype) if dtype is not None else x.dtype
    if shape == x.shape:
        return x if out_dtype is x.dtype else copy(x, dtype=out_dtype)
    out = ndarray(shape, out_dtype)
    if shape[0] == x.shape[0]:
        nisa.tensor_copy(out, x.broadcast_to(shape))
        return out
    # Compute engines keep data on its partitions; spreading one partition
    # over many is a DMA (which cannot read PSUM).
    src = x if x.storage.buffer == trace.SBUF else copy(x)
    nisa.dma_copy(out, src.broadcast_to(shape))
    return out


def expand_dims(data, axis):
    """A view of data with a size-1 dim inserted at each ``axis`` (positions
    in the result, as numpy.expand_dims); on chip the partition dim stays
    first, so axis 0 is refused."""
    name = "nki.language.expand_dims"
    if not isinstance(data, NkiTensor):
        fail(f"expand_dims takes a tensor, got {type(data).__name__}", "operand", name)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = data.ndim + len(axes)
    positions = sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axes)
    if len(set(positions)) != len(positions) or not builtins.all(0 <= a < ndim for a in positions):
        fail(f"expand_dims axis {axis} is out of range or repeated for a {data.ndim}-D "
             "tensor", "expand_dims", name)
    if data.on_chip and positions[0] == 0:
        fail("expand_dims cannot insert a dim before the partition dim (axis 0) of an "
             "on-chip tile", "expand_dims", name)
    for a in positions:
        data = data.expand_dims(a)
    return data


# ---- element-wise and reductions ---------------------------------------------

def _result_dtype(dtype, *tiles):
    if dtype is not None:
        return as_dtype(dtype)
    ts = [t for t in tiles if isinstance(t, NkiTensor)]
    if any(t.storage.buffer == trace.PSUM for t in ts):
        return float32
    kinds = {t.dtype for t in ts}
    if len(kinds) == 1:
        return kinds.pop()
    return float32 if any(t.dtype.is_float for t in ts) else int32


def elementwise(op, x, y, dtype=None):
    """x op y as a new SBUF tile: tensor_tensor for two tiles of one shape,
    tensor_scalar when one side is a number or a [P, 1] tile."""
    out_dtype = _result_dtype(dtype, x, y)
    xt, yt = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not xt and not yt:
        fail("nl element-wise ops need at least one tile", "operand", f"nl.{op.name}")
    if xt and yt and x.free_size() == y.free_size():
        out = ndarray(_tile_shape(x), out_dtype)
        nisa.tensor_tensor(out, x, y, op)
        return out
    if xt and (not yt or y.free_size() == 1):
        out = ndarray(_tile_shape(x), out_dtype)
        nisa.tensor_scalar(out, x, op, y)
        return out
    out = ndarray(_tile_shape(y), out_dtype)
    nisa.tensor_scalar(out, y, op, x, reverse0=True)
    return out


def unary(fn, x, dtype=None):
    """fn(x) as a new SBUF tile (Scalar engine activation)."""
    out = ndarray(_tile_shape(x), _result_dtype(dtype, x))
    nisa.activation(out, fn, x)
    return out


def negative_of(x, dtype=None):
    return unary(globals()["negative"], x, dtype)


def _reduce(op_name, x, axis, keepdims, dtype):
    axes = sorted({a % x.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))})
    shape = [s for d, s in enumerate(x.shape) if d not in axes or keepdims]
    shape = [1 if (d in axes) else s for d, s in enumerate(x.shape)] if keepdims else shape
    while len(shape) < 2:
        shape.append(1)
    out = ndarray(tuple(shape), _result_dtype(dtype, x))
    nisa.tensor_reduce(out, globals()[op_name], x, axes)
    return out, math.prod(x.shape[a] for a in axes)


def sum(x, axis, dtype=None, keepdims=False, **_):  # noqa: A001 (NKI's name)
    return _reduce("add", x, axis, keepdims, dtype)[0]


def max(x, axis, dtype=None, keepdims=False, **_):  # noqa: A001
    return _reduce("maximum", x, axis, keepdims, dtype)[0]


def min(x, axis, dtype=None, keepdims=False, **_):  # noqa: A001
    return _reduce("minimum", x, axis, keepdims, dtype)[0]


def prod(x, axis, dtype=None, keepdims=False, **_):
    return _reduce("multiply", x, axis, keepdims, dtype)[0]


def mean(x, axis, dtype=None, keepdims=False, **_):
    total, n = _reduce("add", x, axis, keepdims, float32)
    out = ndarray(total.shape, _result_dtype(dtype, x))
    nisa.tensor_scalar(out, total, globals()["multiply"], 1.0 / n)
    return out


sum.alu_name, max.alu_name, min.alu_name, prod.alu_name = "add", "maximum", "minimum", "multiply"


def where(condition, x, y, dtype=None, **_):
    """x where condition is nonzero, else y, as a new SBUF tile."""
    ref = condition
    tiles = [t for t in (x, y) if isinstance(t, NkiTensor)] or [ref]
    out_dtype = _result_dtype(dtype, *tiles)
    out = ndarray(_tile_shape(ref), out_dtype)
    if isinstance(y, NkiTensor):
        nisa.tensor_copy(out, y)
    else:
        nisa.memset(out, y)
    if not isinstance(x, NkiTensor):
        x = full(_tile_shape(ref), x, out_dtype)
    nisa.tensor_copy_predicated(out, x, condition)
    return out


def logical_not(x, dtype=None, **_):
    """1 where x is zero, else 0 (numpy.logical_not), as x's dtype unless
    dtype says otherwise."""
    out = ndarray(_tile_shape(x), _result_dtype(dtype, x))
    nisa.tensor_scalar(out, x, globals()["equal"], 0.0)
    return out


def invert(x, dtype=None, **_):
    """Bitwise NOT of an integer (or bool) tile: XOR with all ones of its
    width (a bool flips its one bit, as numpy.invert)."""
    name = "nki.language.invert"
    if not isinstance(x, NkiTensor):
        fail(f"invert takes a tile, got {type(x).__name__}", "operand", name)
    if x.dtype.is_float:
        fail(f"invert takes an integer tile, got {x.dtype!r}", "dtype", name)
    if x.dtype is bool_:
        ones = 1
    elif x.dtype in (uint8, uint16):
        ones = (1 << (8 * x.dtype.itemsize)) - 1  # -1 would saturate to 0 on store
    else:
        ones = -1  # all 32 bits (int32 / uint32 keep every bit)
    out = ndarray(_tile_shape(x), _result_dtype(dtype, x))
    nisa.tensor_scalar(out, x, globals()["bitwise_xor"], ones)
    return out


def device_print(*args, **kwargs):
    """Accepted for source compatibility; the simulator prints nothing."""


from torchneuron.nki.language_stats import (  # noqa: E402,F401  (nl.<name>; they use the above)
    all, average, rms_norm, softmax, var)
from torchneuron.nki.language_random import (  # noqa: E402,F401
    dropout, rand, random_seed)
from torchneuron.nki import tile_operators  # noqa: E402,F401  (a + b, acc += t on tiles)
from torchneuron.nki.loops import fori_loop, while_loop  # noqa: E402,F401

# The public names: what `from nki.language import *` gives and the API table
# of docs/nki.md lists (elementwise, unary, ... are helpers of the nl ops).
__all__ = sorted(set(ALU_CODES) | set(ACTIVATION_CODES) | {
    "bool_", "uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "float8_e4m3",
    "float8_e5m2", "float16", "bfloat16", "tfloat32", "float32", "DType",
    "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu",
    "sbuf", "psum", "hbm", "shared_hbm", "private_hbm", "MemoryRegion",
    "is_hbm", "is_sbuf", "is_psum", "is_on_chip", "tile_size", "identity",
    "affine_range", "sequential_range", "static_range", "par_dim", "program_id",
    "num_programs", "program_ndim", "ndarray", "zeros", "ones", "full", "zeros_like",
    "empty_like", "load", "load_transpose2d", "shared_identity_matrix", "store", "copy",
    "transpose", "matmul", "broadcast_to", "expand_dims", "ds", "sum", "max", "min", "prod",
    "mean", "where", "logical_not", "invert", "all", "average", "var", "softmax", "rms_norm",
    "device_print", "NkiTensor", "rand", "random_seed", "dropout", "fori_loop", "while_loop"})
