"""nl reductions and normalisations over a tile's trailing free axes:
average, var, all, softmax and rms_norm.

Each is the instruction sequence a kernel author would write: reductions on
the Vector engine keep the reduced axes as size-1 dims, which then broadcast
back over the tile as zero-stride operands. Intermediates are fp32, as the
engines compute; only the result takes the requested dtype.
"""

from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


def _tile(x, name):
    if not isinstance(x, NkiTensor):
        fail(f"{name} takes a tile, got {type(x).__name__}", "operand", f"nki.language.{name}")
    return x


def _kept(op, x, axis):
    """op-reduction of x over axis as fp32, reduced axes kept as size 1, and
    the number of elements each result covers."""
    return nl._reduce(op, x, axis, True, nl.float32)


def _over(kept, shape):
    """kept (reduced axes of size 1) as a zero-stride view of shape."""
    return kept.broadcast_to(shape)


def _drop(kept, axis, x):
    """A view of kept without the reduced axes (at least 2-D, as nl.sum)."""
    axes = {a % x.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    shape = [s for d, s in enumerate(kept.shape) if d not in axes]
    while len(shape) < 2:
        shape.append(1)
    return kept.reshape(shape)


def _scaled(x, factor, dtype):
    out = nl.ndarray(x.shape, dtype)
    nisa.tensor_scalar(out, x, nl.multiply, factor)
    return out


def average(x, axis, dtype=None, **_):
    """The mean along axis (numpy.average without weights)."""
    return nl.mean(_tile(x, "average"), axis, dtype=dtype)


def var(x, axis, dtype=None, **_):
    """The population variance along axis (numpy.var, ddof=0), two-pass:
    the mean, then the mean of squared deviations from it."""
    _tile(x, "var")
    total, n = _kept("add", x, axis)
    mean = _scaled(total, 1.0 / n, nl.float32)
    centered = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_tensor(centered, x, _over(mean, x.shape), nl.subtract)
    nisa.activation(centered, nl.square, centered)
    squares, _ = _kept("add", centered, axis)
    out = _scaled(squares, 1.0 / n, nl._result_dtype(dtype, x))
    return _drop(out, axis, x)


def all(x, axis, dtype=nl.bool_, **_):  # noqa: A001 (NKI's name)
    """Whether every element along axis is nonzero (NaN counts as true, as
    in numpy.all)."""
    _tile(x, "all")
    nonzero = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_scalar(nonzero, x, nl.not_equal, 0.0)
    smallest, _ = _kept("minimum", nonzero, axis)
    out = nl.ndarray(smallest.shape, nl.as_dtype(dtype))
    nisa.tensor_copy(out, smallest)
    return _drop(out, axis, x)


def softmax(x, axis, dtype=None, compute_dtype=None, **_):
    """exp(x - max) / sum(exp(x - max)) along axis (torch.softmax)."""
    _tile(x, "softmax")
    top, _ = _kept("maximum", x, axis)
    e = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_tensor(e, x, _over(top, x.shape), nl.subtract)
    nisa.activation(e, nl.exp, e)
    total, _ = _kept("add", e, axis)
    out = nl.ndarray(x.shape, nl._result_dtype(dtype or compute_dtype, x))
    nisa.tensor_tensor(out, e, _over(total, x.shape), nl.divide)
    return out


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, **_):
    """x / sqrt(sum(x^2 along axis) / n + epsilon) * w. w has x's shape or
    broadcasts to it (a [1, F] row is spread over the partitions)."""
    name = "nki.language.rms_norm"
    _tile(x, "rms_norm"), _tile(w, "rms_norm")
    if int(n) < 1:
        fail(f"rms_norm needs a positive element count n, got {n}", "operand", name)
    if w.ndim != x.ndim or any(a != b and a != 1 for a, b in zip(w.shape, x.shape)):
        fail(f"the weight {w.shape} does not broadcast to the input {x.shape}", "broadcast", name)
    if w.shape[0] != x.shape[0]:
        w = nl.broadcast_to(w, (x.shape[0],) + w.shape[1:])
    squares = nl.ndarray(x.shape, nl.float32)
    nisa.activation(squares, nl.square, x)
    total, _ = _kept("add", squares, axis)
    rstd = nl.ndarray(total.shape, nl.float32)
    nisa.tensor_scalar(rstd, total, nl.multiply, 1.0 / int(n), op1=nl.add, operand1=epsilon)
    nisa.activation(rstd, nl.rsqrt, rstd)
    normed = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_tensor(normed, x, _over(rstd, x.shape), nl.multiply)
    out = nl.ndarray(x.shape, nl._result_dtype(dtype or compute_dtype, x))
    nisa.tensor_tensor(out, normed, w.broadcast_to(x.shape), nl.multiply)
    return out
