"""Lowering FX nodes (ATen IR from AOTAutograd) to graph IR nodes.

Each ATen overload with a lowering has a function ``fn(ctx, node)`` in the
``LOWERINGS`` table (filled with ``@lowers("aten.op.overload", ...)`` here,
in ``lower_pointwise.py`` and ``lower_nn.py``). It reads its operands with
``ctx.operand(arg)``, allocates its results with ``ctx.result(node)``,
emits runtime ops with ``ctx.emit(...)`` and returns the value of the node
(a View, or a tuple of Views for ops with several results). A lowering
raises ``Unsupported`` for a case it does not cover; the node then runs
through the eager path between compiled segments, and nothing it emitted
is kept.

Layouts (shape, strides, storage offset) of every value come from the FX
node's fake tensor (``node.meta["val"]``), so views cost nothing: a view op
just gives the same buffer another layout, and results are laid out as
eager lays them out.
"""

import operator

import sympy
import torch

from torchneuron.compiler.ir import Immediate, Unsupported, View, sym_expr

aten = torch.ops.aten

LOWERINGS = {}


def lowers(*targets):
    """Registers fn as the lowering of each target (an OpOverload or its
    name, "aten.add.Tensor")."""

    def register(fn):
        for t in targets:
            if isinstance(t, str):
                t = resolve(t)
                if t is None:
                    continue
            LOWERINGS[t] = fn
        return fn

    return register


def resolve(name):
    """The OpOverload named "aten.op.overload" (None if this torch lacks it)."""
    parts = name.split(".")
    if parts[0] != "aten" or len(parts) not in (2, 3):
        raise ValueError(name)
    packet = getattr(aten, parts[1], None)
    if packet is None:
        return None
    return getattr(packet, parts[2] if len(parts) == 3 else "default", None)


def fake(arg):
    """The fake tensor (or value) an FX argument stands for."""
    if isinstance(arg, torch.fx.Node):
        return arg.meta.get("val")
    return arg


def numel_expr(shape):
    n = 1
    for s in shape:
        n = n * sym_expr(s)
    return n


def extent_expr(shape, strides):
    """Elements from the first to one past the last of a layout."""
    shape = [sym_expr(s) for s in shape]
    strides = [sym_expr(s) for s in strides]
    if any(isinstance(s, int) and s == 0 for s in shape):
        return 0
    e = 1
    for size, stride in zip(shape, strides):
        e = e + (size - 1) * stride
    return e


def is_contiguous_layout(shape, strides):
    expected = 1
    for size, stride in reversed(list(zip(shape, strides))):
        if sympy.simplify(sym_expr(size) - 1) != 0 and sympy.simplify(sym_expr(stride) - expected) != 0:
            return False
        expected = expected * sym_expr(size)
    return True


def same(a, b):
    """Whether two size expressions are provably equal."""
    a, b = sym_expr(a), sym_expr(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0


class Context:
    """Lowering state of one compiled segment: the builder, the values the
    segment defines, and the segment's inputs (FX values defined outside)."""

    def __init__(self, builder):
        self.b = builder
        self.values = {}       # fx node -> View or tuple
        self.inputs = []       # fx nodes, in input-slot order
        self.host_scalars = set()  # input slots that are 0-d CPU tensors
        self.node = None       # the node being lowered

    # ---- values ---------------------------------------------------------

    def value(self, arg):
        """The View (or tuple) of an FX tensor value, making it a segment
        input if it is defined outside the segment."""
        if not isinstance(arg, torch.fx.Node):
            raise Unsupported(f"expected a tensor, got {type(arg).__name__}")
        if arg in self.values:
            return self.values[arg]
        val = arg.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"input {arg.name} is not a tensor")
        if val.device.type == "cpu" and val.dim() == 0:
            # A CPU scalar (a Python number Dynamo made an input): the
            # runner moves it to the device before the launch; as a 0-d
            # tensor it promotes as the CPU scalar does.
            self.host_scalars.add(len(self.inputs))
        elif val.device.type != "neuron":
            raise Unsupported(f"input {arg.name} is on {val.device}, not neuron")
        buf = self.b.input(val.dtype, extent_expr(val.shape, val.stride()))
        self.inputs.append(arg)
        v = View(buf, val.dtype, 0, val.shape, val.stride())
        self.values[arg] = v
        return v

    def operand(self, arg, dtype=None):
        """A tensor operand (View) or a Python number (Immediate of dtype)."""
        if isinstance(arg, torch.fx.Node):
            v = self.value(arg)
            if not isinstance(v, View):
                raise Unsupported(f"{arg.name} is not a single tensor")
            return v
        if isinstance(arg, (bool, int, float)):
            return Immediate(arg, dtype if dtype is not None else number_dtype(arg))
        if arg is None:
            return None
        raise Unsupported(f"operand of type {type(arg).__name__}")

    def result(self, node=None, index=None, val=None):
        """A fresh temporary laid out as the node's fake result (or val)."""
        if val is None:
            val = (node if node is not None else self.node).meta["val"]
            if index is not None:
                val = val[index]
        if not isinstance(val, torch.Tensor):
            raise Unsupported("a result that is not a tensor")
        offset = sym_expr(val.storage_offset())
        buf = self.b.temp(val.dtype, extent_expr(val.shape, val.stride()) + offset)
        return View(buf, val.dtype, offset, val.shape, val.stride())

    def temp(self, dtype, shape):
        """A contiguous scratch temporary."""
        strides = contiguous_strides(shape)
        buf = self.b.temp(dtype, numel_expr(shape))
        return View(buf, dtype, 0, shape, strides)

    def emit(self, code, outputs, inputs, scalars=(), compute_dtype=None):
        self.b.node(code, outputs, inputs, scalars, compute_dtype,
                    fx_name=self.node.name if self.node is not None else "")


def contiguous_strides(shape):
    strides = []
    acc = 1
    for s in reversed(list(shape)):
        strides.append(acc)
        acc = acc * sym_expr(s)
    return tuple(reversed(strides))


def number_dtype(x):
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    return torch.float64


def broadcast_to(v, shape):
    """v broadcast to shape (right-aligned, size-1 dims get stride 0)."""
    if isinstance(v, Immediate) or v is None:
        return v
    shape = tuple(sym_expr(s) for s in shape)
    lead = len(shape) - v.ndim
    if lead < 0:
        raise Unsupported("an operand with more dimensions than the result")
    strides = []
    for d, size in enumerate(shape):
        k = d - lead
        if k < 0:
            strides.append(0)
        elif isinstance(v.shape[k], int) and v.shape[k] == 1 and not (isinstance(size, int) and size == 1):
            strides.append(0)
        else:
            strides.append(v.strides[k])
    return View(v.buffer, v.dtype, v.offset, shape, strides)


# ---- structural nodes ----------------------------------------------------


@lowers(operator.getitem)
def _getitem(ctx, node):
    base, index = node.args
    v = ctx.values.get(base)
    if v is None:
        raise Unsupported("getitem of a value from outside the segment")
    if not isinstance(v, tuple):
        raise Unsupported("getitem of a single tensor")
    item = v[index]
    if item is None:
        raise Unsupported("getitem of a result the lowering did not produce")
    return item


def _view_like(ctx, node):
    """A view op: the result shares its input's buffer, laid out as the fake result."""
    src = ctx.operand(node.args[0])
    val = node.meta["val"]
    base = fake(node.args[0])
    offset = src.offset + (sym_expr(val.storage_offset()) - sym_expr(base.storage_offset()))
    return View(src.buffer, val.dtype, offset, val.shape, val.stride())


VIEW_OPS = [
    "aten.view.default", "aten._unsafe_view.default", "aten.permute.default",
    "aten.transpose.int", "aten.t.default", "aten.expand.default", "aten.slice.Tensor",
    "aten.select.int", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
    "aten.squeeze.default", "aten.as_strided.default", "aten.alias.default",
    "aten.detach.default", "aten.diagonal.default", "aten.unfold.default",
    "aten.view_as_real.default", "aten.narrow.default", "aten.movedim.int",
    "aten.expand_as.default", "aten.reshape.default",
]


def _is_view_of_input(node):
    """The fake result really aliases the input (reshape may copy)."""
    val = node.meta.get("val")
    src = fake(node.args[0])
    if not isinstance(val, torch.Tensor) or not isinstance(src, torch.Tensor):
        return False
    try:
        return val.untyped_storage()._cdata == src.untyped_storage()._cdata
    except Exception:
        return False


def _view(ctx, node):
    if node.target is aten.reshape.default and not _is_view_of_input(node):
        raise Unsupported("a reshape that copies")
    if node.meta["val"].dtype != fake(node.args[0]).dtype:
        raise Unsupported("a view that changes the dtype")
    return _view_like(ctx, node)


lowers(*VIEW_OPS)(_view)


def _multi_view(ctx, node):
    src = ctx.operand(node.args[0])
    base = fake(node.args[0])
    out = []
    for val in node.meta["val"]:
        offset = src.offset + (sym_expr(val.storage_offset()) - sym_expr(base.storage_offset()))
        out.append(View(src.buffer, val.dtype, offset, val.shape, val.stride()))
    return tuple(out)


lowers("aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int",
       "aten.chunk.default", "aten.tensor_split.sections")(_multi_view)


def copy_into(ctx, dst, src):
    """dst = src (COPY converts dtypes, broadcasts src)."""
    ctx.emit("copy", [dst], [broadcast_to(src, dst.shape)])


@lowers("aten.clone.default", "aten.contiguous.default", "aten._to_copy.default",
        "aten.to.dtype", "aten.to.dtype_layout", "aten._to_copy")
@lowers(*([torch.ops.prims.convert_element_type.default]
          if hasattr(torch.ops.prims, "convert_element_type") else []))
def _copy(ctx, node):
    val = node.meta["val"]
    if val.device.type != "neuron":
        raise Unsupported(f"a copy to {val.device}")
    src = ctx.operand(node.args[0])
    out = ctx.result(node)
    copy_into(ctx, out, src)
    return out


@lowers("aten.copy.default")
def _copy_functional(ctx, node):
    # copy(self, src): a new tensor laid out as self, with src's values.
    out = ctx.result(node)
    copy_into(ctx, out, ctx.operand(node.args[1]))
    return out


@lowers("aten.empty.memory_format", "aten.empty_strided.default", "aten.empty_like.default",
        "aten.new_empty.default", "aten.new_empty_strided.default")
def _empty(ctx, node):
    val = node.meta["val"]
    if val.device.type != "neuron":
        raise Unsupported(f"an allocation on {val.device}")
    # Its values are unspecified; zeros keep every later read defined (the
    # runtime refuses a graph that reads memory nothing wrote).
    return _fill_value(ctx, node, 0)


def _fill_value(ctx, node, value):
    out = ctx.result(node)
    if out.dtype.is_floating_point:
        value = float(value)
    elif out.dtype == torch.bool:
        value = bool(value)
    else:
        value = int(value)
    ctx.emit("fill", [out], [], [value])
    return out


@lowers("aten.full.default", "aten.new_full.default", "aten.full_like.default")
def _full(ctx, node):
    val = node.meta["val"]
    if val.device.type != "neuron":
        raise Unsupported(f"an allocation on {val.device}")
    value = node.args[1] if node.target is not aten.new_full.default else node.args[2]
    if not isinstance(value, (bool, int, float)):
        raise Unsupported("a fill value that is not a number")
    return _fill_value(ctx, node, value)


@lowers("aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default")
def _zeros(ctx, node):
    if node.meta["val"].device.type != "neuron":
        raise Unsupported("an allocation off the device")
    return _fill_value(ctx, node, 0)


@lowers("aten.ones.default", "aten.ones_like.default", "aten.new_ones.default")
def _ones(ctx, node):
    if node.meta["val"].device.type != "neuron":
        raise Unsupported("an allocation off the device")
    return _fill_value(ctx, node, 1)


@lowers("aten.fill.Scalar")
def _fill_scalar(ctx, node):
    value = node.args[1]
    if not isinstance(value, (bool, int, float)):
        raise Unsupported("a fill value that is not a number")
    return _fill_value(ctx, node, value)
