"""Lowerings of the non-pointwise ops models use: matrix products, softmax,
norms, reductions, indexing, cat, padding, losses, attention, convolution,
pooling and batch norm.

Each lowering gives the runtime op exactly the operands the eager shim
gives it (torchneuron/csrc/*.cpp; operand lists in
runtime/include/neuronrt/ops/*.h): the same op, the same views, scalars
and compute dtype, and the same contiguous copies and temporaries where the
shim makes them (a kernel's rounding can depend on the strides it reads:
softmax over a strided view does not round as over a contiguous one), so
that float32 results are eager's bit for bit. Where PyTorch's meta function
states a result differently from the shim (float32 statistics of a 16-bit
layer norm), the value is computed as the shim computes it and converted
into the stated result. A case the shim handles in a way that has no
static form here (generator state, a data-dependent size, a branch on a
size only known at run time) raises Unsupported, so that the node runs
eagerly.
"""

import math
import struct

import sympy
import torch

from torchneuron.compiler.ir import TEMP, Immediate, Unsupported, View, sym_expr
from torchneuron.compiler.lowering import LOWERINGS, broadcast_to, copy_into, fake, is_contiguous_layout
from torchneuron.compiler.lowering import lowers as _lowers
from torchneuron.compiler.lowering import numel_expr, same

aten = torch.ops.aten

FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
REDUCED = (torch.float16, torch.bfloat16)


def _write_empty_results(fn):
    """fn, whose results without elements are written by a zero-element
    fill: the lowerings emit nothing for an empty result, and the runtime
    rejects a graph in which a node reads a temporary that no node writes
    (a later node reading the empty result: eye(0), a pad of an empty batch)."""

    def lower(ctx, node):
        value = fn(ctx, node)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, View) and static_empty(v.shape) and ctx.b.buffers[v.buffer][0] == TEMP:
                zero = False if v.dtype == torch.bool else 0.0 if v.dtype.is_floating_point else 0
                ctx.emit("fill", [v], [], [zero])
        return value

    lower.__name__, lower.__doc__ = fn.__name__, fn.__doc__
    return lower


def lowers(*targets):
    """lowering.lowers, for this module's lowerings (see _write_empty_results)."""

    def register(fn):
        _lowers(*targets)(_write_empty_results(fn))
        return fn

    return register


# ---- helpers ---------------------------------------------------------------


def bind(node):
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out = {}
    args = list(node.args)
    for k, a in enumerate(schema.arguments):
        if k < len(args):
            out[a.name] = args[k]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return out


def const(e):
    """The int value of a size expression, or None when it is symbolic."""
    e = sym_expr(e)
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Expr) and e.is_number:
        try:
            return int(e)
        except TypeError:
            return None
    return None


def is_one(e):
    return const(e) == 1


def static_empty(shape):
    """Whether a shape provably has no elements."""
    return any(const(s) == 0 for s in shape)


def concrete_int(value, what):
    """A Python int (a SymInt or size expression only when it is constant)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    c = const(value) if isinstance(value, (torch.SymInt, sympy.Expr)) else None
    if c is None:
        raise Unsupported(f"{what} {value!r} is not a constant")
    return c


def wrap_dim(dim, ndim):
    dim = concrete_int(dim, "dim")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise Unsupported(f"dim {dim} out of range for {ndim} dims")
    return dim + n if dim < 0 else dim


def merge(v, groups):
    """v seen with one dim per group of consecutive dims [(start, end), ...]
    (an empty group is a unit dim), or None when some group's dims do not
    merge into one stride (proved with same())."""
    shape, strides = [], []
    for start, end in groups:
        dims = [d for d in range(start, end) if not is_one(v.shape[d])]
        if not dims:
            shape.append(1)
            strides.append(1)
            continue
        for a, b in zip(dims, dims[1:]):
            if not same(v.strides[a], v.strides[b] * v.shape[b]):
                return None
        shape.append(numel_expr([v.shape[d] for d in range(start, end)]))
        strides.append(v.strides[dims[-1]])
    # A unit dim's stride does not address anything; give it the row-major
    # value, as the shim's contiguous views do.
    for k in range(len(shape) - 1, -1, -1):
        if is_one(shape[k]):
            strides[k] = strides[k + 1] * shape[k + 1] if k + 1 < len(shape) else 1
    return v.with_layout(shape, strides)


def contiguous(ctx, v):
    """v, or a contiguous copy of it (Tensor.contiguous())."""
    if is_contiguous_layout(v.shape, v.strides):
        return v
    t = ctx.temp(v.dtype, v.shape)
    copy_into(ctx, t, v)
    return t


def merged_input(ctx, v, groups, dense=False):
    """An input seen as merged groups of dims, copied to a contiguous
    temporary first when its strides do not allow the view (or, with
    dense, when it is not contiguous: the shim's Tensor.contiguous(); the
    kernels' results may depend on the strides they read)."""
    if dense:
        v = contiguous(ctx, v)
    m = merge(v, groups)
    if m is None:
        m = merge(contiguous(ctx, v), groups)
        assert m is not None
    return m


class Output:
    """An output seen as merged groups of dims: the result itself when its
    layout allows, else a contiguous temporary that ``finish`` copies into
    the result (as the shim does for a result that is not contiguous)."""

    def __init__(self, ctx, out, groups, dense=False):
        self.ctx, self.out, self.temp = ctx, out, None
        self.view = None if dense and not is_contiguous_layout(out.shape, out.strides) else merge(out, groups)
        if self.view is None:
            self.temp = ctx.temp(out.dtype, out.shape)
            self.view = merge(self.temp, groups)

    def finish(self):
        if self.temp is not None:
            copy_into(self.ctx, self.out, self.temp)
        return self.out


def typed_scalar(value, dtype):
    """A Scalar as the shim converts it for an op computing in dtype."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unsupported("a symbolic scalar")
    if not isinstance(value, (bool, int, float)):
        raise Unsupported(f"scalar {value!r}")
    if dtype.is_floating_point:
        return float(value)
    if isinstance(value, float):
        if value != value or math.isinf(value):
            raise Unsupported("a non-finite scalar for an integer op")
        return int(value)
    return int(value)


def tensor_val(arg):
    f = fake(arg)
    if not isinstance(f, torch.Tensor):
        raise Unsupported("expected a tensor argument")
    if f.device.type != "neuron":
        raise Unsupported(f"a tensor on {f.device}")
    return f


def node_uses(node, k):
    """Whether some user reads result k of a multi-result node."""
    import operator
    return any(u.target is operator.getitem and u.args[1] == k for u in node.users)


def results(ctx, node):
    """A tuple of fresh results, None where the fake result is not a tensor."""
    vals = node.meta["val"]
    return tuple(ctx.result(node, k) if isinstance(v, torch.Tensor) else None
                 for k, v in enumerate(vals))


# ---- matrix products (gemm.cpp) ----------------------------------------------

GEMM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8,
               torch.int16, torch.int32, torch.int64)


def emit_gemm(ctx, out, a, b, cin=None, alpha=1, beta=0):
    dtype = a.dtype
    if dtype not in GEMM_DTYPES:
        raise Unsupported(f"gemm of {dtype}")
    if b.dtype != dtype or out.dtype != dtype or (cin is not None and cin.dtype != dtype):
        raise Unsupported("gemm operands of different dtypes")
    if static_empty(out.shape):
        return out
    use_cin = cin is not None and beta != 0
    inputs = [a, b] + ([broadcast_to(cin, out.shape)] if use_cin else [])
    ctx.emit("gemm", [out], inputs, [typed_scalar(alpha, dtype), typed_scalar(beta, dtype)],
             compute_dtype=dtype)
    return out


@lowers("aten.mm.default", "aten.bmm.default")
def _mm(ctx, node):
    a, b = node.args[0], node.args[1]
    tensor_val(a), tensor_val(b)
    out = ctx.result(node)
    return emit_gemm(ctx, out, ctx.operand(a), ctx.operand(b))


@lowers("aten.addmm.default", "aten.baddbmm.default")
def _addmm(ctx, node):
    args = bind(node)
    names = ("mat1", "mat2") if node.target is aten.addmm.default else ("batch1", "batch2")
    for k in ("self",) + names:
        tensor_val(args[k])
    beta, alpha = args["beta"], args["alpha"]
    if not isinstance(beta, (bool, int, float)) or not isinstance(alpha, (bool, int, float)):
        raise Unsupported("addmm with a non-number alpha/beta")
    out = ctx.result(node)
    self_ = ctx.operand(args["self"])
    if self_.ndim > out.ndim:
        raise Unsupported("addmm: self has more dims than the result")
    return emit_gemm(ctx, out, ctx.operand(args[names[0]]), ctx.operand(args[names[1]]), self_,
                     alpha, beta)


@lowers("aten.mv.default")
def _mv(ctx, node):
    mat, vec = node.args[0], node.args[1]
    tensor_val(mat), tensor_val(vec)
    out = ctx.result(node)
    m, v = ctx.operand(mat), ctx.operand(vec)
    if m.ndim != 2 or v.ndim != 1:
        raise Unsupported("mv shapes")
    o = out.with_layout((out.shape[0], 1), (out.strides[0], 1))
    vv = v.with_layout((v.shape[0], 1), (v.strides[0], 1))
    emit_gemm(ctx, o, m, vv)
    return out


@lowers("aten.dot.default")
def _dot(ctx, node):
    x, y = node.args[0], node.args[1]
    tensor_val(x), tensor_val(y)
    out = ctx.result(node)
    a, b = ctx.operand(x), ctx.operand(y)
    if a.ndim != 1 or b.ndim != 1:
        raise Unsupported("dot shapes")
    if a.dtype not in GEMM_DTYPES:
        raise Unsupported(f"dot of {a.dtype}")
    ctx.emit("gemm", [out.with_layout((1, 1), (1, 1))],
             [a.with_layout((1, a.shape[0]), (0, a.strides[0])),
              b.with_layout((b.shape[0], 1), (b.strides[0], 0))],
             [typed_scalar(1, a.dtype), typed_scalar(0, a.dtype)], compute_dtype=a.dtype)
    return out


# ---- softmax (nn_softmax.cpp) --------------------------------------------------


def around(v, dim):
    """Groups [outer, n, inner] of v's dims around dim."""
    if v.ndim == 0:
        return [(0, 0), (0, 0), (0, 0)]
    d = wrap_dim(dim, v.ndim)
    return [(0, d), (d, d + 1), (d + 1, v.ndim)]


def emit_softmax(ctx, node, code, inputs, dim):
    out = ctx.result(node)
    if out.dtype not in FLOATING:
        raise Unsupported(f"{code} of {out.dtype}")
    if static_empty(out.shape):
        return out
    groups = around(out, dim)
    views = [merged_input(ctx, ctx.operand(a), groups, dense=True) for a in inputs]
    o = Output(ctx, out, groups, dense=True)
    ctx.emit(code, [o.view], views, compute_dtype=torch.float32)
    return o.finish()


@lowers("aten._softmax.default")
def _softmax(ctx, node):
    x, dim, _ = node.args[:3]
    tensor_val(x)
    return emit_softmax(ctx, node, "softmax", [x], dim)


@lowers("aten._log_softmax.default")
def _log_softmax(ctx, node):
    x, dim, _ = node.args[:3]
    tensor_val(x)
    return emit_softmax(ctx, node, "log_softmax", [x], dim)


@lowers("aten._softmax_backward_data.default")
def _softmax_backward(ctx, node):
    grad, output, dim = node.args[:3]
    tensor_val(grad), tensor_val(output)
    return emit_softmax(ctx, node, "softmax_backward", [grad, output], dim)


@lowers("aten._log_softmax_backward_data.default")
def _log_softmax_backward(ctx, node):
    grad, output, dim = node.args[:3]
    tensor_val(grad), tensor_val(output)
    return emit_softmax(ctx, node, "log_softmax_backward", [grad, output], dim)


# ---- layer norm, RMS norm (nn_norm.cpp) -----------------------------------------


def vector_operand(ctx, arg):
    """An optional parameter as the shim's vector_view(flat(t)): absent, the
    1-d view, or the contiguous tensor seen flat."""
    if arg is None:
        return None
    v = ctx.operand(arg)
    if static_empty(v.shape):
        return None
    if v.ndim == 1:
        return v
    v = contiguous(ctx, v)
    return v.with_layout((numel_expr(v.shape),), (1,))


def flat_stat(ctx, arg_or_view):
    """A statistics tensor (mean, rstd) as a contiguous 1-d view."""
    v = arg_or_view if isinstance(arg_or_view, View) else ctx.operand(arg_or_view)
    if static_empty(v.shape):
        return None
    if v.ndim == 1:
        return v
    v = contiguous(ctx, v)
    return v.with_layout((numel_expr(v.shape),), (1,))


def flat_out(v):
    """A result (statistics, parameter gradient) as a 1-d view of its
    elements; it must be contiguous, as the shim allocates it."""
    if v is None or static_empty(v.shape):
        return None
    if v.ndim == 1:
        return v
    if not is_contiguous_layout(v.shape, v.strides):
        raise Unsupported("a statistics result that is not contiguous")
    return v.with_layout((numel_expr(v.shape),), (1,))


def param_dtype(x_dtype, *params):
    """PyTorch's param_scalar_type(input, is_mixed_type(input, params...)):
    float32 when 16-bit data comes with float32 parameters, else the
    input's dtype (the statistics' dtype in the shim)."""
    first = next((p.dtype for p in params if p is not None), None)
    if x_dtype in REDUCED and first == torch.float32:
        return torch.float32
    return x_dtype


class Stat:
    """A statistics result as the shim computes it: in eager_dtype (which
    the fake result may not have: PyTorch's meta functions give float32
    statistics for 16-bit inputs), then converted into the result."""

    def __init__(self, ctx, result, eager_dtype):
        self.ctx, self.result, self.temp = ctx, result, None
        if result is not None and result.dtype != eager_dtype:
            self.temp = ctx.temp(eager_dtype, result.shape)
        self.view = flat_out(self.temp if self.temp is not None else result)

    def finish(self):
        if self.temp is not None:
            copy_into(self.ctx, self.result, self.temp)
        return self.result


def rows_groups(ndim, normalized_dims):
    axis = ndim - normalized_dims
    if axis < 0:
        raise Unsupported("normalized_shape longer than the input")
    return [(0, axis), (axis, ndim)]


def check_norm_input(v):
    if v.dtype not in FLOATING:
        raise Unsupported(f"a norm of {v.dtype}")


@lowers("aten.native_layer_norm.default")
def _layer_norm(ctx, node):
    args = bind(node)
    x = ctx.operand(args["input"])
    tensor_val(args["input"])
    check_norm_input(x)
    eps = args["eps"]
    if not isinstance(eps, (int, float)):
        raise Unsupported("a symbolic eps")
    groups = rows_groups(x.ndim, len(args["normalized_shape"]))
    y, mean, rstd = results(ctx, node)
    M = numel_expr(x.shape[:groups[1][0]])
    if const(M) == 0:
        return y, mean, rstd
    X = merged_input(ctx, x, groups, dense=True)
    w = vector_operand(ctx, args["weight"])
    b = vector_operand(ctx, args["bias"])
    Y = Output(ctx, y, groups, dense=True)
    sdt = param_dtype(x.dtype, *(fake(args[k]) for k in ("weight", "bias")))
    mean_s, rstd_s = Stat(ctx, mean, sdt), Stat(ctx, rstd, sdt)
    ctx.emit("layer_norm", [Y.view, mean_s.view, rstd_s.view], [X, w, b],
             [float(eps)], compute_dtype=torch.float32)
    return Y.finish(), mean_s.finish(), rstd_s.finish()


@lowers("aten.native_layer_norm_backward.default")
def _layer_norm_backward(ctx, node):
    args = bind(node)
    tensor_val(args["input"]), tensor_val(args["grad_out"])
    x = ctx.operand(args["input"])
    check_norm_input(x)
    mask = list(args["output_mask"])
    groups = rows_groups(x.ndim, len(args["normalized_shape"]))
    vals = node.meta["val"]
    dx = ctx.result(node, 0) if mask[0] and isinstance(vals[0], torch.Tensor) else None
    dw = ctx.result(node, 1) if mask[1] and args["weight"] is not None and isinstance(vals[1], torch.Tensor) else None
    db = ctx.result(node, 2) if mask[2] and args["bias"] is not None and isinstance(vals[2], torch.Tensor) else None
    N = numel_expr(x.shape[groups[1][0]:])
    M = numel_expr(x.shape[:groups[1][0]])
    if (dx is None and dw is None and db is None) or const(N) == 0:
        return dx, dw, db
    X = merged_input(ctx, x, groups, dense=True)
    dY = merged_input(ctx, ctx.operand(args["grad_out"]), groups, dense=True)
    DX = Output(ctx, dx, groups, dense=True) if dx is not None and const(M) != 0 else None
    ctx.emit("layer_norm_backward", [DX.view if DX else None, flat_out(dw), flat_out(db)],
             [dY, X, flat_stat(ctx, args["mean"]), flat_stat(ctx, args["rstd"]),
              vector_operand(ctx, args["weight"])], compute_dtype=torch.float32)
    if DX is not None:
        DX.finish()
    return dx, dw, db


def rms_eps(dtype, eps):
    if eps is not None:
        if not isinstance(eps, (int, float)):
            raise Unsupported("a symbolic eps")
        return float(eps)
    return float(torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps)


@lowers("aten._fused_rms_norm.default")
def _rms_norm(ctx, node):
    args = bind(node)
    tensor_val(args["input"])
    x = ctx.operand(args["input"])
    check_norm_input(x)
    groups = rows_groups(x.ndim, len(args["normalized_shape"]))
    vals = node.meta["val"]
    y, rstd = ctx.result(node, 0), ctx.result(node, 1)
    if len(vals) != 2:
        raise Unsupported("_fused_rms_norm with other results")
    if const(numel_expr(x.shape[:groups[1][0]])) == 0:
        return y, rstd
    wf = fake(args["weight"])
    if y.dtype != (torch.promote_types(x.dtype, wf.dtype) if wf is not None else x.dtype):
        raise Unsupported("an RMS norm result dtype other than the shim's")
    X = merged_input(ctx, x, groups, dense=True)
    Y = Output(ctx, y, groups, dense=True)
    rstd_s = Stat(ctx, rstd, torch.float64 if x.dtype == torch.float64 else torch.float32)
    ctx.emit("rms_norm", [Y.view, rstd_s.view], [X, vector_operand(ctx, args["weight"])],
             [rms_eps(x.dtype, args["eps"])], compute_dtype=torch.float32)
    return Y.finish(), rstd_s.finish()


@lowers("aten._fused_rms_norm_backward.default")
def _rms_norm_backward(ctx, node):
    args = bind(node)
    tensor_val(args["input"]), tensor_val(args["grad_out"])
    x = ctx.operand(args["input"])
    check_norm_input(x)
    mask = list(args["output_mask"])
    groups = rows_groups(x.ndim, len(args["normalized_shape"]))
    vals = node.meta["val"]
    dx = ctx.result(node, 0) if mask[0] and isinstance(vals[0], torch.Tensor) else None
    dw = ctx.result(node, 1) if mask[1] and args["weight"] is not None and isinstance(vals[1], torch.Tensor) else None
    N = numel_expr(x.shape[groups[1][0]:])
    M = numel_expr(x.shape[:groups[1][0]])
    if (dx is None and dw is None) or const(N) == 0:
        return dx, dw
    X = merged_input(ctx, x, groups, dense=True)
    dY = merged_input(ctx, ctx.operand(args["grad_out"]), groups, dense=True)
    DX = Output(ctx, dx, groups, dense=True) if dx is not None and const(M) != 0 else None
    ctx.emit("rms_norm_backward", [DX.view if DX else None, flat_out(dw)],
             [dY, X, flat_stat(ctx, args["rstd"]), vector_operand(ctx, args["weight"])],
             compute_dtype=torch.float32)
    if DX is not None:
        DX.finish()
    return dx, dw


# ---- reductions (reduce.cpp) -----------------------------------------------------


def dims_mask(dims, ndim, allow_empty=False):
    """ATen's make_dim_mask: no dims (None or []) reduce every dim, unless
    allow_empty and dims is an empty list."""
    if dims is None:
        return [True] * ndim
    if isinstance(dims, int):
        dims = [dims]
    dims = list(dims)
    if ndim == 0:
        for d in dims:
            wrap_dim(d, 0)
        return []
    if not dims:
        return [not allow_empty] * ndim
    mask = [False] * ndim
    for d in dims:
        mask[wrap_dim(d, ndim)] = True
    return mask


def keepdim_view(out, inp, mask):
    """out seen with inp's rank: size 1, stride 0 in each reduced dim."""
    if out.ndim == inp.ndim:
        return out
    shape, strides, k = [], [], 0
    for d in range(inp.ndim):
        if mask[d]:
            shape.append(1)
            strides.append(0)
        else:
            shape.append(out.shape[k])
            strides.append(out.strides[k])
            k += 1
    if k != out.ndim:
        raise Unsupported("a reduction result of unexpected rank")
    return out.with_layout(shape, strides)


def input_for(ctx, v, result):
    """The input as PyTorch reduces it: converted to the result dtype unless
    the runtime reads it exactly (self.to(result) keeps a dense layout)."""
    i = v.dtype
    exact = (i == result or (not i.is_floating_point and result == torch.int64)
             or (i in REDUCED and result in (torch.float32, torch.float64))
             or (i == torch.float32 and result == torch.float64))
    if exact:
        return v
    if not is_contiguous_layout(v.shape, v.strides):
        raise Unsupported("a converted reduction input that is not contiguous")
    t = ctx.temp(result, v.shape)
    copy_into(ctx, t, v)
    return t


def emit_reduction(ctx, code, inp, mask, outs, scalars=()):
    """[outputs..., in]: outputs in keepdim form; compute dtype the input's."""
    if all(static_empty(o.shape) for o in outs):
        return
    ctx.emit(code, [keepdim_view(o, inp, mask) for o in outs], [inp], scalars, compute_dtype=inp.dtype)


def _reduce(ctx, node, code, dims, allow_empty=False, convert=True, scalars=()):
    x = node.args[0]
    tensor_val(x)
    v = ctx.operand(x)
    out = ctx.result(node)
    mask = dims_mask(dims, v.ndim, allow_empty)
    inp = input_for(ctx, v, out.dtype) if convert else v
    emit_reduction(ctx, code, inp, mask, [out], scalars)
    return out


@lowers("aten.sum.dim_IntList")
def _sum_dim(ctx, node):
    return _reduce(ctx, node, "sum", bind(node)["dim"])


@lowers("aten.sum.default")
def _sum_all(ctx, node):
    return _reduce(ctx, node, "sum", None)


@lowers("aten.mean.dim")
def _mean_dim(ctx, node):
    if tensor_val(node.args[0]).dtype not in FLOATING:
        raise Unsupported("mean of a non-floating tensor")
    return _reduce(ctx, node, "mean", bind(node)["dim"])


@lowers("aten.mean.default")
def _mean_all(ctx, node):
    if tensor_val(node.args[0]).dtype not in FLOATING:
        raise Unsupported("mean of a non-floating tensor")
    return _reduce(ctx, node, "mean", None)


@lowers("aten.prod.default")
def _prod_all(ctx, node):
    return _reduce(ctx, node, "prod", None)


@lowers("aten.prod.dim_int")
def _prod_dim(ctx, node):
    return _reduce(ctx, node, "prod", [bind(node)["dim"]])


@lowers("aten.amax.default")
def _amax(ctx, node):
    return _reduce(ctx, node, "amax", bind(node)["dim"], convert=False)


@lowers("aten.amin.default")
def _amin(ctx, node):
    return _reduce(ctx, node, "amin", bind(node)["dim"], convert=False)


@lowers("aten.max.default", "aten.min.default")
def _extreme_all(ctx, node):
    x = tensor_val(node.args[0])
    if static_empty(x.shape):
        raise Unsupported("max() of an empty tensor")
    code = "amax" if node.target is aten.max.default else "amin"
    return _reduce(ctx, node, code, None, convert=False)


@lowers("aten.max.dim", "aten.min.dim")
def _extreme_dim(ctx, node):
    args = bind(node)
    tensor_val(args["self"])
    v = ctx.operand(args["self"])
    values, indices = ctx.result(node, 0), ctx.result(node, 1)
    mask = [False] * v.ndim
    if v.ndim:
        mask[wrap_dim(args["dim"], v.ndim)] = True
    code = "argmax" if node.target is aten.max.dim else "argmin"
    emit_reduction(ctx, code, v, mask, [values, indices])
    return values, indices


@lowers("aten.argmax.default", "aten.argmin.default")
def _arg_extreme(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dtype == torch.bool:
        raise Unsupported("argmax of bool")
    v = ctx.operand(args["self"])
    out = ctx.result(node)
    mask = dims_mask(None if args["dim"] is None else [args["dim"]], v.ndim)
    code = "argmax" if node.target is aten.argmax.default else "argmin"
    emit_reduction(ctx, code, v, mask, [out])
    return out


def _var(ctx, node, take_sqrt, with_mean):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dtype not in FLOATING:
        raise Unsupported("var of a non-floating tensor")
    v = ctx.operand(args["self"])
    correction = args["correction"]
    c = 1.0 if correction is None else correction
    if not isinstance(c, (int, float)):
        raise Unsupported("a symbolic correction")
    mask = dims_mask(args["dim"], v.ndim)
    if with_mean:
        var, mean = ctx.result(node, 0), ctx.result(node, 1)
        outs = [var, mean]
    else:
        var = ctx.result(node)
        outs = [var]
    inp = input_for(ctx, v, var.dtype)
    emit_reduction(ctx, "var", inp, mask, outs, [float(c), float(take_sqrt)])
    return tuple(outs) if with_mean else var


@lowers("aten.var.correction")
def _var_correction(ctx, node):
    return _var(ctx, node, False, False)


@lowers("aten.std.correction")
def _std_correction(ctx, node):
    return _var(ctx, node, True, False)


@lowers("aten.var_mean.correction")
def _var_mean(ctx, node):
    return _var(ctx, node, False, True)


@lowers("aten.std_mean.correction")
def _std_mean(ctx, node):
    return _var(ctx, node, True, True)


@lowers("aten.linalg_vector_norm.default")
def _vector_norm(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dtype not in FLOATING:
        raise Unsupported("norm of a non-floating tensor")
    ord_ = args["ord"]
    if not isinstance(ord_, (int, float)):
        raise Unsupported("a symbolic norm order")
    dim = args["dim"]
    dims = None if dim is None or len(dim) == 0 else dim
    return _reduce(ctx, node, "norm", dims, scalars=[float(ord_)])


@lowers("aten.logsumexp.default")
def _logsumexp(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dtype not in FLOATING:
        raise Unsupported("logsumexp of a non-floating tensor")
    dims = list(args["dim"])
    if not dims and x.dim() > 0 and not static_empty(x.shape) and not args["keepdim"]:
        raise Unsupported("logsumexp over dims=[] (an error in PyTorch)")
    return _reduce(ctx, node, "logsumexp", dims)


@lowers("aten.any.default", "aten.all.default")
def _any_all(ctx, node):
    code = "any" if node.target is aten.any.default else "all"
    return _reduce(ctx, node, code, None, convert=False)


@lowers("aten.any.dim", "aten.all.dim")
def _any_all_dim(ctx, node):
    code = "any" if node.target is aten.any.dim else "all"
    x = tensor_val(node.args[0])
    mask_dims = [bind(node)["dim"]] if x.dim() else None
    return _reduce(ctx, node, code, mask_dims, convert=False)


@lowers("aten.any.dims", "aten.all.dims")
def _any_all_dims(ctx, node):
    code = "any" if node.target is aten.any.dims else "all"
    return _reduce(ctx, node, code, bind(node)["dim"], allow_empty=True, convert=False)


@lowers("aten.cumsum.default", "aten.cumprod.default")
def _scan(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    v = ctx.operand(args["self"])
    out = ctx.result(node)
    if out.dtype == torch.bool:
        raise Unsupported("a scan with a bool result")
    if static_empty(out.shape):
        return out
    inp = input_for(ctx, v, out.dtype)
    dim = wrap_dim(args["dim"], x.dim())
    code = "cumsum" if node.target is aten.cumsum.default else "cumprod"
    ctx.emit(code, [out], [inp], [dim], compute_dtype=inp.dtype)
    return out


# ---- indexing (index.cpp) ----------------------------------------------------------

INDEX_DTYPES = (torch.int64, torch.int32)


def flat_index(ctx, arg):
    """index.reshape(-1) as a 1-d view (a contiguous copy when the layout
    does not merge)."""
    v = ctx.operand(arg)
    return merged_input(ctx, v, [(0, v.ndim)])


def emit_index_select(ctx, out, src, dim, index):
    """The shim's index_select_into: out, src restrided over out's shape,
    src's dim as the geometry, the 1-d index along dim."""
    if static_empty(out.shape):
        return out
    nd = max(src.ndim, 1)
    if src.ndim == 0:
        shape, out_strides, src_strides = [1], [1], [1]
        size, stride = 1, 1
    else:
        shape = list(out.shape)
        out_strides = list(out.strides)
        src_strides = list(src.strides)
        size, stride = src.shape[dim], src_strides[dim]
    if const(size) == 0:
        raise Unsupported("index_select from an empty dim (an error)")
    src_strides[dim] = 0
    index_strides = [0] * nd
    index_strides[dim] = 0 if index.ndim == 0 else index.strides[0]
    ctx.emit("index_select",
             [out.with_layout(shape, out_strides)],
             [src.with_layout(shape, src_strides), src.with_layout((size,), (stride,)),
              index.with_layout(shape, index_strides)],
             [dim])
    return out


@lowers("aten.index_select.default")
def _index_select(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    idx = tensor_val(args["index"])
    if idx.dim() > 1 or idx.dtype not in INDEX_DTYPES:
        raise Unsupported("index_select index")
    dim = wrap_dim(args["dim"], x.dim())
    out = ctx.result(node)
    return emit_index_select(ctx, out, ctx.operand(args["self"]), dim, ctx.operand(args["index"]))


@lowers("aten.embedding.default")
def _embedding(ctx, node):
    args = bind(node)
    w = tensor_val(args["weight"])
    idx = tensor_val(args["indices"])
    if w.dim() != 2 or idx.dtype not in INDEX_DTYPES:
        raise Unsupported("embedding shapes or index dtype")
    out = ctx.result(node)
    weight = ctx.operand(args["weight"])
    index = ctx.operand(args["indices"]) if idx.dim() == 1 else flat_index(ctx, args["indices"])
    # index_select's result is [n, D], contiguous; the embedding's result is
    # its view as indices.shape + [D].
    flat = merge(out, [(0, out.ndim - 1), (out.ndim - 1, out.ndim)])
    if flat is None or not is_contiguous_layout(out.shape, out.strides):
        raise Unsupported("an embedding result that is not contiguous")
    emit_index_select(ctx, flat, weight, 0, index)
    return out


@lowers("aten.gather.default")
def _gather(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    idx = tensor_val(args["index"])
    if idx.dtype != torch.int64:
        raise Unsupported("gather index dtype")
    out = ctx.result(node)
    if static_empty(idx.shape):
        return out
    src, index = ctx.operand(args["self"]), ctx.operand(args["index"])
    dim = wrap_dim(args["dim"], x.dim())

    def nonempty(v):
        return (list(v.shape), list(v.strides)) if v.ndim else ([1], [1])

    shape, index_strides = nonempty(index)
    src_shape, src_strides = nonempty(src)
    _, out_strides = nonempty(out)
    if len(src_strides) != len(shape):
        raise Unsupported("gather index rank")
    size, stride = src_shape[dim], src_strides[dim]
    if const(size) == 0:
        raise Unsupported("gather from an empty dim (an error)")
    src_strides[dim] = 0
    ctx.emit("gather", [out.with_layout(shape, out_strides)],
             [src.with_layout(shape, src_strides), src.with_layout((size,), (stride,)),
              index.with_layout(shape, index_strides)], [dim])
    return out


@lowers("aten.embedding_dense_backward.default")
def _embedding_backward(ctx, node):
    args = bind(node)
    g = tensor_val(args["grad_output"])
    idx = tensor_val(args["indices"])
    if idx.dtype not in INDEX_DTYPES:
        raise Unsupported("embedding index dtype")
    padding_idx = concrete_int(args["padding_idx"], "padding_idx")
    scale = bool(args["scale_grad_by_freq"])
    out = ctx.result(node)
    if static_empty(out.shape):
        return out
    if not is_contiguous_layout(out.shape, out.strides) or out.ndim != 2:
        raise Unsupported("an embedding gradient that is not contiguous [V, D]")
    grad = ctx.operand(args["grad_output"])
    if grad.ndim == 0:
        raise Unsupported("a 0-d embedding gradient")
    grad2 = merged_input(ctx, grad, [(0, grad.ndim - 1), (grad.ndim - 1, grad.ndim)])
    flat = flat_index(ctx, args["indices"])
    ctx.emit("embedding_dense_backward", [out], [grad2, flat], [padding_idx, int(scale)])
    return out


# ---- cat (shape.cpp) --------------------------------------------------------------

CAT_GROUP = 7


@lowers("aten.cat.default")
def _cat(ctx, node):
    args = bind(node)
    out = ctx.result(node)
    tensors = list(args["tensors"])
    if static_empty(out.shape):
        return out
    dim = wrap_dim(args["dim"], out.ndim)
    views = []
    for t in tensors:
        f = tensor_val(t)
        if f.dim() == 1 and const(sym_expr(f.shape[0])) == 0:
            continue  # legacy empty input
        if static_empty(f.shape):
            continue
        views.append(ctx.operand(t))
    offset = 0
    for start in range(0, len(views), CAT_GROUP):
        group = views[start:start + CAT_GROUP]
        off = const(offset)
        if off is None:
            raise Unsupported("cat of more than 7 inputs with a symbolic offset")
        ctx.emit("cat", [out], group, [dim, off])
        for v in group:
            offset = offset + v.shape[dim]
    return out


# ---- factories ---------------------------------------------------------------------


def _round_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


@lowers("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(ctx, node):
    val = node.meta["val"]
    if val.device.type != "neuron":
        raise Unsupported(f"arange on {val.device}")
    args = bind(node)
    if node.target is aten.arange.default:
        start, step = 0, 1
    else:
        start = args["start"]
        step = args.get("step", 1) if node.target is aten.arange.start_step else 1
    for s in (start, step):
        if not isinstance(s, (bool, int, float)):
            raise Unsupported("arange with a symbolic start or step")
    out = ctx.result(node)
    if out.ndim != 1:
        raise Unsupported("arange result rank")
    if static_empty(out.shape):
        return out
    dt = out.dtype
    if dt.is_floating_point:
        conv = _round_float32 if dt in REDUCED else float
        scalars = [conv(float(start)), conv(float(step))]
    else:
        if isinstance(start, float) or isinstance(step, float):
            raise Unsupported("an integer arange with float bounds")
        scalars = [int(start), int(step)]
    ctx.emit("arange", [out], [], scalars)
    return out


# ---- losses (nn_loss.cpp) -------------------------------------------------------------

REDUCTION_NONE = 0


def long_target(ctx, arg):
    t = tensor_val(arg)
    v = ctx.operand(arg)
    if t.dtype == torch.int64:
        return v
    if t.dtype != torch.uint8:
        raise Unsupported("nll target dtype")
    if not is_contiguous_layout(v.shape, v.strides):
        raise Unsupported("a converted target that is not contiguous")
    tmp = ctx.temp(torch.int64, v.shape)
    copy_into(ctx, tmp, v)
    return tmp


def nll_geometry(x):
    """(groups of input dims for [batch, classes, 1], target/output groups for [batch, 1])."""
    if x.ndim == 1:
        return [(0, 0), (0, 1), (1, 1)], [(0, 0), (0, 0)]
    if x.ndim == 2:
        return [(0, 1), (1, 2), (2, 2)], [(0, 1), (1, 1)]
    raise Unsupported("nll_loss of an input with more than 2 dims")


@lowers("aten.nll_loss_forward.default")
def _nll_loss(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dtype not in FLOATING:
        raise Unsupported("nll_loss of a non-floating tensor")
    reduction = concrete_int(args["reduction"], "reduction")
    ignore_index = concrete_int(args["ignore_index"], "ignore_index")
    v = ctx.operand(args["self"])
    in_groups, t_groups = nll_geometry(v)
    out, total = ctx.result(node, 0), ctx.result(node, 1)
    X = merged_input(ctx, v, in_groups)
    T = merged_input(ctx, long_target(ctx, args["target"]), t_groups)
    w = None
    if args["weight"] is not None:
        w = vector_operand(ctx, args["weight"])
        if w is not None and not is_contiguous_layout(w.shape, w.strides):
            w = contiguous(ctx, w)
    if reduction == REDUCTION_NONE:
        O = Output(ctx, out, t_groups)
        ctx.emit("nll_loss", [O.view, total], [X, T, w], [reduction, ignore_index],
                 compute_dtype=torch.float32)
        O.finish()
    else:
        ctx.emit("nll_loss", [out, total], [X, T, w], [reduction, ignore_index],
                 compute_dtype=torch.float32)
    return out, total


@lowers("aten.nll_loss_backward.default")
def _nll_loss_backward(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    tensor_val(args["grad_output"]), tensor_val(args["total_weight"])
    reduction = concrete_int(args["reduction"], "reduction")
    ignore_index = concrete_int(args["ignore_index"], "ignore_index")
    v = ctx.operand(args["self"])
    in_groups, t_groups = nll_geometry(v)
    gi = ctx.result(node)
    if static_empty(gi.shape):
        return gi
    GI = Output(ctx, gi, in_groups)
    go = ctx.operand(args["grad_output"])
    if reduction == REDUCTION_NONE:
        go = merged_input(ctx, go, t_groups)
    T = merged_input(ctx, long_target(ctx, args["target"]), t_groups)
    w = None
    if args["weight"] is not None:
        w = vector_operand(ctx, args["weight"])
        if w is not None and not is_contiguous_layout(w.shape, w.strides):
            w = contiguous(ctx, w)
    ctx.emit("nll_loss_backward", [GI.view], [go, T, w, ctx.operand(args["total_weight"])],
             [reduction, ignore_index], compute_dtype=torch.float32)
    return GI.finish()


# ---- attention (attention.cpp) ---------------------------------------------------------


def as4d(v):
    if v.ndim == 4:
        return v
    if v.ndim != 3:
        raise Unsupported("attention operands must be 3-d or 4-d")
    return v.with_layout((1,) + v.shape, (v.shape[0] * v.strides[0],) + v.strides)


def attention_scalars(scale, E, causal, dropout_p):
    if dropout_p is None:
        dropout_p = 0.0
    if not isinstance(dropout_p, (int, float)) or dropout_p != 0:
        # The shim reserves Philox offsets from the device generator at
        # launch time; a graph has no such state.
        raise Unsupported("attention with dropout")
    if scale is None:
        e = const(E)
        if e is None:
            raise Unsupported("attention with a symbolic head dim and no scale")
        scale = 1.0 / math.sqrt(float(e))
    if not isinstance(scale, (int, float)):
        raise Unsupported("a symbolic attention scale")
    return [float(scale), int(bool(causal)), float(dropout_p), 0, 0]


def attention_mask(ctx, arg, B, H, L, S):
    if arg is None:
        return None
    m = tensor_val(arg)
    if m.dim() > 4 or not (m.dtype == torch.bool or m.dtype.is_floating_point):
        raise Unsupported("attention mask")
    return broadcast_to(ctx.operand(arg), (B, H, L, S))


def check_attention_dtypes(*vals):
    dt = vals[0].dtype
    if dt not in (torch.float32, torch.bfloat16, torch.float16) or any(v.dtype != dt for v in vals):
        raise Unsupported("attention dtypes")


@lowers("aten._scaled_dot_product_fused_attention_overrideable.default")
def _sdpa(ctx, node):
    args = bind(node)
    qf, kf, vf = (tensor_val(args[k]) for k in ("query", "key", "value"))
    check_attention_dtypes(qf, kf, vf)
    q, k, v = (as4d(ctx.operand(args[n])) for n in ("query", "key", "value"))
    B, H, L, E = q.shape
    S = k.shape[2]
    scalars = attention_scalars(args["scale"], E, args["is_causal"], args["dropout_p"])
    mask = attention_mask(ctx, args["attn_bias"], B, H, L, S)
    vals = node.meta["val"]
    out = ctx.result(node, 0)
    lse = ctx.result(node, 1)
    if lse.ndim == 2:
        lse4 = lse.with_layout((1,) + lse.shape, (lse.shape[0] * lse.strides[0],) + lse.strides)
    else:
        lse4 = lse
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    ctx.emit("sdpa_forward", [as4d(out), lse4], inputs, scalars)
    # The other results: no cumulative sequence lengths, the sizes (host
    # values the plan computes), no debug mask, and the Philox seed and
    # offset, which eager returns as CPU scalar tensors (0 and 0 without
    # dropout). Only the backward reads them, and only with dropout: they
    # are given here as device scalars holding the same zeros.
    rest = [None] * (len(vals) - 2)
    for k in (6, 7):
        if k < len(vals) and isinstance(vals[k], torch.Tensor) and node_uses(node, k):
            z = ctx.temp(torch.int64, ())
            ctx.emit("fill", [z], [], [0])
            rest[k - 2] = z
    return (out, lse, *rest)


@lowers("aten._scaled_dot_product_fused_attention_overrideable_backward.default")
def _sdpa_backward(ctx, node):
    args = bind(node)
    qf, kf, vf = (tensor_val(args[k]) for k in ("query", "key", "value"))
    gf = tensor_val(args["grad_out"])
    check_attention_dtypes(qf, kf, vf, gf)
    q, k, v = (as4d(ctx.operand(args[n])) for n in ("query", "key", "value"))
    g, o = as4d(ctx.operand(args["grad_out"])), as4d(ctx.operand(args["out"]))
    lse = ctx.operand(args["logsumexp"])
    if lse.ndim == 2:
        lse = lse.with_layout((1,) + lse.shape, (lse.shape[0] * lse.strides[0],) + lse.strides)
    B, H, L, E = q.shape
    S = k.shape[2]
    scalars = attention_scalars(args["scale"], E, args["is_causal"], args["dropout_p"])
    mask = attention_mask(ctx, args["attn_bias"], B, H, L, S)
    want = list(args["grad_input_mask"])
    want_bias = want[3] and args["attn_bias"] is not None
    if want_bias:
        raise Unsupported("the gradient of an attention mask")
    stats = ctx.temp(torch.float32, (B, H, L, 2))
    ctx.emit("sdpa_backward_stats", [stats], [g, o, lse], scalars)
    vals = node.meta["val"]

    def grad(index, like):
        if isinstance(vals[index], torch.Tensor):
            return ctx.result(node, index)
        return ctx.temp(like.dtype, like.shape)  # not returned

    gq = gk = gv = None
    q_in_kv = want[0] and mask is None
    if want[1] or want[2] or q_in_kv:
        gk, gv = grad(1, k), grad(2, v)
        outs = [as4d(gk), as4d(gv)]
        if q_in_kv:
            gq = grad(0, q)
            outs.append(as4d(gq))
        ctx.emit("sdpa_backward_kv", outs, [g, q, k, v, stats] + ([mask] if mask is not None else []),
                 scalars)
    if want[0] and not q_in_kv:
        gq = grad(0, q)
        ctx.emit("sdpa_backward_q", [as4d(gq)], [g, q, k, v, stats] + ([mask] if mask is not None else []),
                 scalars)
    return (gq if want[0] else None, gk if want[1] else None, gv if want[2] else None, None)


# ---- convolution (conv.cpp) ---------------------------------------------------------


def image(v):
    """The shim's image_view: [N, C, H, W]; a 3-d tensor is a batch of one."""
    if v.ndim == 4:
        return v
    if v.ndim == 3:
        return v.with_layout((1,) + v.shape, (0,) + v.strides)
    raise Unsupported("an image operand that is not 3-d or 4-d")


def int_list(values, what, n=None):
    if isinstance(values, (int, torch.SymInt)):
        values = [values]
    out = [concrete_int(x, what) for x in values]
    if n is not None and len(out) != n:
        raise Unsupported(f"{what} of length {len(out)}")
    return out


def conv_scalars(args):
    stride = int_list(args["stride"], "stride", 2)
    padding = int_list(args["padding"], "padding", 2)
    dilation = int_list(args["dilation"], "dilation", 2)
    return stride + padding + dilation + [concrete_int(args["groups"], "groups")]


def check_conv(x, w):
    if x.dim() != 4 or w.dim() != 4:
        raise Unsupported("a convolution that is not 2-d")
    if x.dtype not in FLOATING or w.dtype != x.dtype:
        raise Unsupported("convolution dtypes")


@lowers("aten.convolution.default")
def _convolution(ctx, node):
    args = bind(node)
    x, w = tensor_val(args["input"]), tensor_val(args["weight"])
    check_conv(x, w)
    scalars = conv_scalars(args)
    out = ctx.result(node)
    if static_empty(out.shape):
        return out
    inputs = [ctx.operand(args["input"]), ctx.operand(args["weight"])]
    if args["bias"] is not None:
        b = tensor_val(args["bias"])
        if b.dtype != x.dtype:
            raise Unsupported("a convolution bias of another dtype")
        inputs.append(ctx.operand(args["bias"]))
    code = "conv2d_input_grad" if args["transposed"] else "conv2d"
    ctx.emit(code, [out], inputs, scalars, compute_dtype=x.dtype)
    return out


@lowers("aten.convolution_backward.default")
def _convolution_backward(ctx, node):
    args = bind(node)
    g, x, w = tensor_val(args["grad_output"]), tensor_val(args["input"]), tensor_val(args["weight"])
    check_conv(x, w)
    if g.dim() != 4 or g.dtype != x.dtype:
        raise Unsupported("convolution_backward grad_output")
    scalars = conv_scalars(args)
    mask = list(args["output_mask"])
    transposed = bool(args["transposed"])
    go, inp, weight = (ctx.operand(args[k]) for k in ("grad_output", "input", "weight"))
    gi = gw = gb = None
    if mask[0]:
        gi = ctx.result(node, 0)
        if not static_empty(gi.shape):
            ctx.emit("conv2d" if transposed else "conv2d_input_grad", [gi], [go, weight], scalars,
                     compute_dtype=go.dtype)
    if mask[1]:
        gw = ctx.result(node, 1)
        if not static_empty(gw.shape):
            img, cols = (go, inp) if transposed else (inp, go)
            ctx.emit("conv2d_weight_grad", [gw], [img, cols], scalars, compute_dtype=img.dtype)
    if mask[2]:
        gb = ctx.result(node, 2)
        # grad_output.sum([0, 2, 3]) (a native reduction)
        emit_reduction(ctx, "sum", input_for(ctx, go, gb.dtype), [True, False, True, True], [gb])
    return gi, gw, gb


# ---- pooling (pool.cpp) ------------------------------------------------------------


def pair_at(values, i, fallback=None):
    values = int_list(values, "pool argument")
    if not values:
        return pair_at(fallback, i)
    return values[0] if len(values) == 1 else values[i]


def window_scalars(kernel, stride, padding):
    return ([pair_at(kernel, i) for i in range(2)] + [pair_at(stride, i, kernel) for i in range(2)]
            + [pair_at(padding, i) for i in range(2)])


@lowers("aten.max_pool2d_with_indices.default")
def _max_pool2d(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dim() not in (3, 4):
        raise Unsupported("max_pool2d input rank")
    scalars = window_scalars(args["kernel_size"], args["stride"], args["padding"])
    scalars += [pair_at(args["dilation"], i) for i in range(2)]
    out, indices = ctx.result(node, 0), ctx.result(node, 1)
    if static_empty(out.shape):
        return out, indices
    v = ctx.operand(args["self"])
    ctx.emit("max_pool2d", [image(out), image(indices)], [image(v)], scalars, compute_dtype=v.dtype)
    return out, indices


@lowers("aten.max_pool2d_with_indices_backward.default")
def _max_pool2d_backward(ctx, node):
    args = bind(node)
    g = tensor_val(args["grad_output"])
    if g.dim() not in (3, 4):
        raise Unsupported("max_pool2d_backward rank")
    gi = ctx.result(node)
    if gi.dtype not in FLOATING:
        raise Unsupported("max_pool2d_backward of a non-floating tensor")
    if static_empty(gi.shape):
        return gi
    go = ctx.operand(args["grad_output"])
    ctx.emit("max_pool2d_backward", [image(gi)], [image(go), image(ctx.operand(args["indices"]))],
             compute_dtype=go.dtype)
    return gi


# ---- batch norm (nn_batch_norm.cpp) ----------------------------------------------------


def bcs_groups(ndim):
    if ndim < 2:
        raise Unsupported("batch_norm input with fewer than 2 dims")
    return [(0, 1), (1, 2), (2, ndim)]


def param_operand(ctx, arg):
    """The shim's param_view: absent, the 1-d view, or a contiguous flat copy."""
    if arg is None:
        return None
    v = ctx.operand(arg)
    if v.ndim == 1:
        return v
    return vector_operand(ctx, arg)


def emit_batch_norm(ctx, node, args, training, running_mean, running_var):
    """BATCH_NORM into the node's results (out, save_mean, save_invstd)."""
    x = tensor_val(args["input"])
    if x.dtype not in FLOATING:
        raise Unsupported("batch_norm of a non-floating tensor")
    momentum, eps = args["momentum"], args["eps"]
    if not isinstance(momentum, (int, float)) or not isinstance(eps, (int, float)):
        raise Unsupported("a symbolic momentum or eps")
    v = ctx.operand(args["input"])
    groups = bcs_groups(v.ndim)
    out, save_mean, save_invstd = ctx.result(node, 0), ctx.result(node, 1), ctx.result(node, 2)
    if static_empty(v.shape) and not training:
        return out, save_mean, save_invstd
    X = merged_input(ctx, v, groups)
    Y = Output(ctx, out, groups)
    for r in (running_mean, running_var):
        if r is not None and r.ndim != 1:
            raise Unsupported("running statistics that are not 1-d")
    sdt = param_dtype(x.dtype, *(fake(args[k]) for k in ("weight", "bias", "running_mean", "running_var")
                                 if k in args))
    mean_s = Stat(ctx, save_mean if training else None, sdt)
    invstd_s = Stat(ctx, save_invstd if training else None, sdt)
    ctx.emit("batch_norm", [Y.view, mean_s.view, invstd_s.view, running_mean, running_var],
             [X, param_operand(ctx, args["weight"]), param_operand(ctx, args["bias"])],
             [int(bool(training)), float(momentum), float(eps)], compute_dtype=torch.float32)
    Y.finish()
    mean_s.finish(), invstd_s.finish()
    if not training:
        _eval_statistics(ctx, save_mean, save_invstd, running_mean, running_var, float(eps))
    return out, save_mean, save_invstd


def _eval_statistics(ctx, save_mean, save_invstd, running_mean, running_var, eps):
    """save_mean and save_invstd in eval mode as PyTorch's meta function
    (the graph's) states them for a non-CPU device: the running mean and
    1 / sqrt(running_var + eps), in the results' dtype (the kernel does not
    write them: eager neuron returns them empty, as the CPU does)."""
    if save_mean is not None and running_mean is not None and not static_empty(save_mean.shape):
        copy_into(ctx, save_mean, running_mean)
    if save_invstd is None or running_var is None or static_empty(save_invstd.shape):
        return
    dt = save_invstd.dtype
    if dt not in FLOATING or save_invstd.shape != running_var.shape:
        raise Unsupported("eval-mode batch_norm statistics")
    var = ctx.temp(dt, save_invstd.shape)
    copy_into(ctx, var, running_var)
    shifted, root = ctx.temp(dt, save_invstd.shape), ctx.temp(dt, save_invstd.shape)
    ctx.emit("add", [shifted], [var, Immediate(eps, dt)], [1], compute_dtype=dt)
    ctx.emit("sqrt", [root], [shifted], compute_dtype=dt)
    ctx.emit("div", [save_invstd], [Immediate(1.0, dt), root], compute_dtype=dt)


@lowers("aten._native_batch_norm_legit_functional.default")
def _batch_norm_functional(ctx, node):
    args = bind(node)
    training = bool(args["training"])
    # The functional form clones the running statistics and updates the clones.
    clones = []
    for k, name in ((3, "running_mean"), (4, "running_var")):
        if args[name] is None:
            clones.append(None)
            continue
        tensor_val(args[name])
        c = ctx.result(node, k)
        copy_into(ctx, c, ctx.operand(args[name]))
        clones.append(c)
    out, mean, invstd = emit_batch_norm(ctx, node, args, training, clones[0], clones[1])
    return out, mean, invstd, clones[0], clones[1]


@lowers("aten._native_batch_norm_legit.no_stats")
def _batch_norm_no_stats(ctx, node):
    args = bind(node)
    return emit_batch_norm(ctx, node, args, bool(args["training"]), None, None)


@lowers("aten.native_batch_norm_backward.default")
def _batch_norm_backward(ctx, node):
    args = bind(node)
    x = tensor_val(args["input"])
    if x.dtype not in FLOATING:
        raise Unsupported("batch_norm_backward of a non-floating tensor")
    train = bool(args["train"])
    eps = args["eps"]
    if not isinstance(eps, (int, float)):
        raise Unsupported("a symbolic eps")
    mean_arg = args["save_mean"] if train else args["running_mean"]
    stat_arg = args["save_invstd"] if train else args["running_var"]
    if mean_arg is None or stat_arg is None:
        raise Unsupported("batch_norm_backward without statistics")
    mask = list(args["output_mask"])
    vals = node.meta["val"]
    dx = ctx.result(node, 0) if mask[0] and isinstance(vals[0], torch.Tensor) else None
    dw = ctx.result(node, 1) if mask[1] and isinstance(vals[1], torch.Tensor) else None
    db = ctx.result(node, 2) if mask[2] and isinstance(vals[2], torch.Tensor) else None
    v = ctx.operand(args["input"])
    groups = bcs_groups(v.ndim)
    C = v.shape[1]
    if const(C) == 0 or (dx is None and dw is None and db is None):
        return dx, dw, db
    X = merged_input(ctx, v, groups)
    GY = merged_input(ctx, ctx.operand(args["grad_out"]), groups)
    DX = Output(ctx, dx, groups) if dx is not None and not static_empty(dx.shape) else None
    for r in (dw, db):
        if r is not None and r.ndim != 1:
            raise Unsupported("a parameter gradient that is not 1-d")
    ctx.emit("batch_norm_backward", [DX.view if DX else None, dw, db],
             [GY, X, param_operand(ctx, args["weight"]), param_operand(ctx, mean_arg),
              param_operand(ctx, stat_arg)], [int(train), float(eps)], compute_dtype=torch.float32)
    if DX is not None:
        DX.finish()
    return dx, dw, db


# ---- padding and scatters into slices (PyTorch's composites: fill / clone, then
# a copy into a narrowed view, each a native neuron op) ------------------------------


def narrow(v, dim, start, length, step=1):
    """v narrowed along dim (start, length: size expressions)."""
    shape = list(v.shape)
    strides = list(v.strides)
    offset = v.offset + sym_expr(start) * strides[dim]
    shape[dim] = sym_expr(length)
    strides[dim] = strides[dim] * step
    return v.with_layout(shape, strides, offset)


def fill_scalar(value):
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) or not isinstance(value, (bool, int, float)):
        raise Unsupported("a fill value that is not a number")
    return value


@lowers("aten.constant_pad_nd.default")
def _constant_pad_nd(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    pad = int_list(args["pad"], "pad")
    value = fill_scalar(args["value"])
    if len(pad) % 2 or len(pad) // 2 > x.dim():
        raise Unsupported("constant_pad_nd pad length")
    v = ctx.operand(args["self"])
    out = ctx.result(node)
    nd = v.ndim
    c_in = v
    positive = False
    for i in range(nd - len(pad) // 2, nd):
        k = 2 * (nd - i - 1)
        if pad[k] < 0:
            c_in = narrow(c_in, i, -pad[k], c_in.shape[i] + pad[k])
        elif pad[k] != 0:
            positive = True
        if pad[k + 1] < 0:
            c_in = narrow(c_in, i, 0, c_in.shape[i] + pad[k + 1])
        elif pad[k + 1] != 0:
            positive = True
    if not positive:
        # c_input.clone()
        if not static_empty(out.shape):
            copy_into(ctx, out, c_in)
        return out
    if static_empty(out.shape):
        return out
    ctx.emit("fill", [out], [], [value])
    c_out = out
    for i in range(nd - len(pad) // 2, nd):
        k = 2 * (nd - i - 1)
        if pad[k] > 0:
            c_out = narrow(c_out, i, pad[k], c_out.shape[i] - pad[k])
        if pad[k + 1] > 0:
            c_out = narrow(c_out, i, 0, c_out.shape[i] - pad[k + 1])
    if not static_empty(c_out.shape):
        copy_into(ctx, c_out, c_in)
    return out


def _slice_start(start, size):
    if start is None:
        return 0
    s = sym_expr(start)
    c = const(s)
    if c is None:
        raise Unsupported("a symbolic slice start")
    if c < 0:
        return size + c
    return c


@lowers("aten.slice_scatter.default")
def _slice_scatter(ctx, node):
    args = bind(node)
    x, src = tensor_val(args["self"]), tensor_val(args["src"])
    out = ctx.result(node)
    v, s = ctx.operand(args["self"]), ctx.operand(args["src"])
    if v.ndim == 0 or s.ndim != v.ndim:
        raise Unsupported("slice_scatter ranks")
    dim = wrap_dim(args["dim"], v.ndim)
    step = concrete_int(args["step"], "step")
    if step <= 0:
        raise Unsupported("slice_scatter step")
    start = _slice_start(args["start"], v.shape[dim])
    if not static_empty(out.shape):
        copy_into(ctx, out, v)
    if not static_empty(s.shape):
        copy_into(ctx, narrow(out, dim, start, s.shape[dim], step), s)
    return out


@lowers("aten.select_scatter.default")
def _select_scatter(ctx, node):
    args = bind(node)
    tensor_val(args["self"]), tensor_val(args["src"])
    out = ctx.result(node)
    v, s = ctx.operand(args["self"]), ctx.operand(args["src"])
    if v.ndim == 0 or s.ndim != v.ndim - 1:
        raise Unsupported("select_scatter ranks")
    dim = wrap_dim(args["dim"], v.ndim)
    index = _slice_start(args["index"], v.shape[dim])
    if not static_empty(out.shape):
        copy_into(ctx, out, v)
        sel = narrow(out, dim, index, 1)
        shape = list(sel.shape)
        strides = list(sel.strides)
        del shape[dim], strides[dim]
        copy_into(ctx, sel.with_layout(shape, strides), s)
    return out


def _lift_fresh_copy(ctx, node):
    tensor_val(node.args[0])
    out = ctx.result(node)
    if not static_empty(out.shape):
        copy_into(ctx, out, ctx.operand(node.args[0]))
    return out


if aten.lift_fresh_copy.default not in LOWERINGS:
    lowers("aten.lift_fresh_copy.default")(_lift_fresh_copy)


# ---- scatters and advanced indexing (index.cpp, index_launch.cpp) -------------------------


INDEX_ASSIGN, INDEX_SUM = 0, 1
MAX_INDEX_TENSORS = 5


def nonempty(v):
    """(shape, strides) of v as at least 1-d (a 0-d tensor is [1])."""
    if v.ndim == 0:
        return [1], [1]
    return list(v.shape), list(v.strides)


class Access:
    """The shim's IndexAccess: the target over `shape` (stride 0 where the
    indices replace its dims), and per index the target dim it selects."""

    def __init__(self, target, shape, target_strides, sizes, strides, dims, indices, index_strides):
        self.target, self.shape, self.target_strides = target, list(shape), list(target_strides)
        self.sizes, self.strides, self.dims = list(sizes), list(strides), list(dims)
        self.indices, self.index_strides = list(indices), [list(s) for s in index_strides]

    def target_view(self):
        return self.target.with_layout(self.shape, self.target_strides)

    def index_operands(self):
        if len(self.indices) > MAX_INDEX_TENSORS:
            raise Unsupported("more than 5 index tensors")
        ops = [self.target.with_layout(self.sizes, self.strides)]
        for idx, st in zip(self.indices, self.index_strides):
            ops.append(idx.with_layout(self.shape, st))
        return ops


def dim_access(target, dim, shape, index, index_strides):
    t_shape, t_strides = nonempty(target)
    size, stride = t_shape[dim], t_strides[dim]
    t_strides[dim] = 0
    return Access(target, shape, t_strides, [size], [stride], [dim], [index], [index_strides])


def emit_scatter(ctx, code, access, source, reduce, include_self, alpha):
    """[dst_r, src, geometry, idx...] scalars [reduce, include_self, alpha, dims...]."""
    dst = access.target_view()
    ctx.emit(code, [dst], [source] + access.index_operands(),
             [reduce, int(bool(include_self)), alpha] + access.dims)


def _copy_self(ctx, node, self_arg):
    out = ctx.result(node)
    if not static_empty(out.shape):
        copy_into(ctx, out, ctx.operand(self_arg))
    return out


def _scatter_common(ctx, node, code, reduce, value=None):
    args = bind(node)
    x = tensor_val(args["self"])
    idx = tensor_val(args["index"])
    if idx.dtype != torch.int64:
        raise Unsupported("scatter index dtype")
    out = _copy_self(ctx, node, args["self"])
    if static_empty(idx.shape):
        return out
    dim = wrap_dim(args["dim"], x.dim())
    if const(nonempty(out)[0][dim]) == 0:
        raise Unsupported("scatter into an empty dim (an error)")
    index = ctx.operand(args["index"])
    shape, index_strides = nonempty(index)
    access = dim_access(out, dim, shape, index, index_strides)
    if value is not None:
        source = Immediate(fill_scalar(value), out.dtype)
    else:
        src = ctx.operand(args["src"])
        if src.dtype != out.dtype:
            raise Unsupported("scatter source of another dtype")
        source = src.with_layout(shape, nonempty(src)[1])
    emit_scatter(ctx, code, access, source, reduce, True, 1)
    return out


@lowers("aten.scatter.src")
def _scatter_src(ctx, node):
    return _scatter_common(ctx, node, "scatter", INDEX_ASSIGN)


@lowers("aten.scatter.value")
def _scatter_value(ctx, node):
    return _scatter_common(ctx, node, "scatter", INDEX_ASSIGN, value=bind(node)["value"])


@lowers("aten.scatter_add.default")
def _scatter_add(ctx, node):
    return _scatter_common(ctx, node, "scatter_add", INDEX_SUM)


@lowers("aten.index_add.default")
def _index_add(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    idx = tensor_val(args["index"])
    src = tensor_val(args["source"])
    if idx.dim() > 1 or idx.dtype not in INDEX_DTYPES or src.dtype != x.dtype:
        raise Unsupported("index_add arguments")
    alpha = args["alpha"]
    if not isinstance(alpha, (bool, int, float)):
        raise Unsupported("a symbolic alpha")
    out = _copy_self(ctx, node, args["self"])
    if static_empty(src.shape) or static_empty(idx.shape):
        return out
    dim = wrap_dim(args["dim"], x.dim())
    if const(nonempty(out)[0][dim]) == 0:
        raise Unsupported("index_add into an empty dim (an error)")
    index = ctx.operand(args["index"])
    source = ctx.operand(args["source"])
    shape, src_strides = nonempty(source)
    index_strides = [0] * len(shape)
    index_strides[dim] = 0 if index.ndim == 0 else index.strides[0]
    access = dim_access(out, dim, shape, index, index_strides)
    emit_scatter(ctx, "index_add", access, source.with_layout(shape, src_strides), INDEX_SUM, True, alpha)
    return out


def broadcast_shape(shapes):
    """The broadcast of size-expression shapes (right-aligned)."""
    n = max(len(s) for s in shapes)
    out = []
    for d in range(n):
        size = 1
        for s in shapes:
            k = d - (n - len(s))
            if k < 0:
                continue
            e = s[k]
            if is_one(e):
                continue
            if is_one(size):
                size = e
            elif not same(size, e):
                raise Unsupported("index tensors that do not broadcast")
        out.append(size)
    return out


def advanced_access(ctx, target, index_args):
    """The shim's advanced_access for integer index tensors (boolean masks
    need nonzero(), a data-dependent size: Unsupported)."""
    idx = []
    for a in index_args:
        if a is None:
            idx.append(None)
            continue
        f = tensor_val(a)
        if f.dtype not in (torch.int64, torch.int32):
            raise Unsupported("an index tensor that is not int32/int64")
        idx.append(ctx.operand(a))
    if len(idx) > target.ndim:
        raise Unsupported("too many indices")
    if all(i is None for i in idx):
        raise Unsupported("no index tensor")
    common = broadcast_shape([i.shape for i in idx if i is not None])
    idx = [broadcast_to(i, common) if i is not None else None for i in idx]
    idx += [None] * (target.ndim - len(idx))
    order = list(range(target.ndim))
    defined = [d for d in order if idx[d] is not None]
    contiguous_subspace = defined == list(range(defined[0], defined[-1] + 1))
    if not contiguous_subspace:
        order = defined + [d for d in order if idx[d] is None]
        idx = [idx[d] for d in order]
        target = target.with_layout([target.shape[d] for d in order], [target.strides[d] for d in order])
    before = 0
    while idx[before] is None:
        before += 1
    k = 0
    while before + k < target.ndim and idx[before + k] is not None:
        k += 1
    after = target.ndim - before - k
    shape = list(target.shape[:before]) + list(common) + list(target.shape[before + k:])
    t_strides = list(target.strides[:before]) + [0] * len(common) + list(target.strides[before + k:])
    sizes, strides, dims, indices, index_strides = [], [], [], [], []
    for j in range(k):
        size = target.shape[before + j]
        if const(size) == 0:
            raise Unsupported("indexing an empty dim")
        i = idx[before + j]
        sizes.append(size)
        strides.append(target.strides[before + j])
        dims.append(order[before + j])
        indices.append(i)
        index_strides.append([0] * before + list(i.strides) + [0] * after)
    return Access(target, shape, t_strides, sizes, strides, dims, indices, index_strides)


@lowers("aten.index.Tensor")
def _index(ctx, node):
    args = bind(node)
    tensor_val(args["self"])
    out = ctx.result(node)
    a = advanced_access(ctx, ctx.operand(args["self"]), list(args["indices"]))
    if len(a.shape) != out.ndim:
        raise Unsupported("index result rank")
    if static_empty(out.shape):
        return out
    ctx.emit("index", [out.with_layout(a.shape, out.strides)], [a.target_view()] + a.index_operands(), a.dims)
    return out


@lowers("aten.index_put.default")
def _index_put(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    vf = fake(args["values"])
    if not isinstance(vf, torch.Tensor) or vf.device.type != "neuron" or vf.dtype != x.dtype:
        raise Unsupported("index_put values")
    out = _copy_self(ctx, node, args["self"])
    a = advanced_access(ctx, out, list(args["indices"]))
    if static_empty(a.shape):
        return out
    values = broadcast_to(ctx.operand(args["values"]), a.shape)
    emit_scatter(ctx, "index_put", a, values, INDEX_SUM if args["accumulate"] else INDEX_ASSIGN, True, 1)
    return out


def _scalar_tensor(ctx, node):
    val = node.meta["val"]
    if val.device.type != "neuron":
        raise Unsupported(f"scalar_tensor on {val.device}")
    out = ctx.result(node)
    ctx.emit("fill", [out], [], [fill_scalar(node.args[0])])
    return out


if aten.scalar_tensor.default not in LOWERINGS:
    lowers("aten.scalar_tensor.default")(_scalar_tensor)


@lowers("aten.flip.default")
def _flip(ctx, node):
    # A copy from a view that walks the flipped dims backwards (shape.cpp).
    args = bind(node)
    x = tensor_val(args["self"])
    out = ctx.result(node)
    if static_empty(out.shape):
        return out
    v = ctx.operand(args["self"])
    flipped = set(wrap_dim(d, x.dim()) for d in args["dims"])
    offset, strides = v.offset, list(v.strides)
    for d in sorted(flipped):
        if const(v.shape[d]) is not None and const(v.shape[d]) <= 1:
            continue
        offset = offset + (v.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    ctx.emit("copy", [out], [v.with_layout(v.shape, strides, offset)])
    return out


def _avg_scalars(args):
    div = args["divisor_override"]
    return (window_scalars(args["kernel_size"], args["stride"], args["padding"])
            + [int(bool(args["count_include_pad"])), 0 if div is None else concrete_int(div, "divisor")])


@lowers("aten.avg_pool2d.default")
def _avg_pool2d(ctx, node):
    args = bind(node)
    x = tensor_val(args["self"])
    if x.dim() not in (3, 4) or not (x.dtype in FLOATING or x.dtype == torch.int64):
        raise Unsupported("avg_pool2d input")
    scalars = _avg_scalars(args)
    out = ctx.result(node)
    if static_empty(out.shape):
        return out
    v = ctx.operand(args["self"])
    ctx.emit("avg_pool2d", [image(out)], [image(v)], scalars, compute_dtype=v.dtype)
    return out


@lowers("aten.avg_pool2d_backward.default")
def _avg_pool2d_backward(ctx, node):
    args = bind(node)
    g = tensor_val(args["grad_output"])
    if g.dim() not in (3, 4):
        raise Unsupported("avg_pool2d_backward rank")
    scalars = _avg_scalars(args)
    gi = ctx.result(node)
    if gi.dtype not in FLOATING:
        raise Unsupported("avg_pool2d_backward of a non-floating tensor")
    if static_empty(gi.shape):
        return gi
    go = ctx.operand(args["grad_output"])
    ctx.emit("avg_pool2d_backward", [image(gi)], [image(go)], scalars, compute_dtype=go.dtype)
    return gi


@lowers("aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(ctx, node):
    x = tensor_val(node.args[0])
    if x.dim() not in (3, 4) or x.dtype not in FLOATING or any(const(s) == 0 for s in x.shape[-2:]):
        raise Unsupported("adaptive_avg_pool2d input")
    out = ctx.result(node)
    if static_empty(out.shape):
        return out
    v = ctx.operand(node.args[0])
    ctx.emit("adaptive_avg_pool2d", [image(out)], [image(v)], compute_dtype=v.dtype)
    return out


@lowers("aten._adaptive_avg_pool2d_backward.default")
def _adaptive_avg_pool2d_backward(ctx, node):
    g, x = tensor_val(node.args[0]), tensor_val(node.args[1])
    if g.dim() not in (3, 4) or x.dim() != g.dim() or x.dtype not in FLOATING or g.dtype != x.dtype:
        raise Unsupported("adaptive_avg_pool2d_backward input")
    gi = ctx.result(node)
    if static_empty(gi.shape):
        return gi
    go = ctx.operand(node.args[0])
    ctx.emit("adaptive_avg_pool2d_backward", [image(gi)], [image(go)], compute_dtype=go.dtype)
    return gi


@lowers("aten.adaptive_max_pool2d.default")
def _adaptive_max_pool2d(ctx, node):
    x = tensor_val(node.args[0])
    if x.dim() not in (3, 4):
        raise Unsupported("adaptive_max_pool2d input")
    out, indices = ctx.result(node, 0), ctx.result(node, 1)
    if static_empty(out.shape):
        return out, indices
    v = ctx.operand(node.args[0])
    ctx.emit("adaptive_max_pool2d", [image(out), image(indices)], [image(v)], compute_dtype=v.dtype)
    return out, indices


@lowers("aten.adaptive_max_pool2d_backward.default")
def _adaptive_max_pool2d_backward(ctx, node):
    args = bind(node)
    g = tensor_val(args["grad_output"])
    if g.dim() not in (3, 4):
        raise Unsupported("adaptive_max_pool2d_backward rank")
    gi = ctx.result(node)
    if gi.dtype not in FLOATING:
        raise Unsupported("adaptive_max_pool2d_backward of a non-floating tensor")
    if static_empty(gi.shape):
        return gi
    go = ctx.operand(args["grad_output"])
    ctx.emit("max_pool2d_backward", [image(gi)], [image(go), image(ctx.operand(args["indices"]))],
             compute_dtype=go.dtype)
    return gi
