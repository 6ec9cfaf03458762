"""The graph IR as the front end builds it, and its binary form.

The binary form is the one ``runtime/include/neuronrt/graph.h`` specifies:
the C loader validates it (every id, count and expression) and the disk
cache stores it as it is. Sizes, strides and offsets are expressions of the
graph's symbolic sizes, written in postfix; sympy expressions from Dynamo's
SymInts are translated here, and an expression the runtime cannot evaluate
raises ``Unsupported`` so that the node runs eagerly instead.
"""

import struct
import zlib

import sympy
import torch

MAGIC = 0x4754524E
VERSION = 2
# The node code of an NKI kernel (NRT_GRAPH_NKI in graph.h).
NKI_CODE = 0x00100000

# nrt_expr_op
CONST, SYM, ADD, SUB, MUL, FLOORDIV, MOD, MAX, MIN = range(9)
MAX_EXPR_TERMS = 64

# nrt_buffer_kind
INPUT, OUTPUT, TEMP = 0, 1, 2

# nrt_dtype, in the runtime's order (neuronrt/op.h). The storage dtypes the
# runtime appends after float64 (uint16/32/64, complex64/128) are left out on
# purpose: few runtime ops take them (the graph loader refuses the rest), so a
# graph that meets one is Unsupported and runs eagerly, where the counted CPU
# fallback serves what has no native kernel. Codes 0-9 are unchanged, so the
# plan format (PLAN_VERSION) is too.
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}


class Unsupported(Exception):
    """A node (or graph) the compiler cannot lower; the message says why."""


def dtype_code(dtype):
    try:
        return DTYPE_CODE[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no compiled kernels (the node runs eagerly)") from None


def sym_expr(value):
    """The sympy expression (or int) of an int or SymInt."""
    if isinstance(value, torch.SymInt):
        return value.node.expr
    if isinstance(value, (int, sympy.Expr)):
        return value
    raise Unsupported(f"size {value!r} of type {type(value).__name__} is not an integer")


def _sympy_function_names():
    """Names of torch's integer sympy functions that map to runtime ops."""
    names = {}
    try:
        from torch.utils._sympy import functions as F
        for name, op in (("FloorDiv", FLOORDIV), ("PythonMod", MOD), ("Mod", MOD),
                         ("ModularIndexing", None), ("Max", MAX), ("Min", MIN)):
            if hasattr(F, name):
                names[getattr(F, name)] = (name, op)
    except ImportError:
        pass
    return names


_FUNCTIONS = _sympy_function_names()


class Exprs:
    """The graph's expression table: each distinct expression once, so that
    equal sizes have equal ids (the compiler compares ids)."""

    def __init__(self):
        self.symbols = {}   # sympy.Symbol -> index
        self.table = []     # postfix term lists
        self.index = {}     # tuple(terms) -> id

    def symbol(self, sym):
        if sym not in self.symbols:
            self.symbols[sym] = len(self.symbols)
        return self.symbols[sym]

    def _terms(self, e, out):
        if isinstance(e, bool):
            raise Unsupported("a boolean where a size was expected")
        if isinstance(e, int):
            out.append((CONST, e))
            return
        if isinstance(e, sympy.Integer):
            out.append((CONST, int(e)))
            return
        if isinstance(e, sympy.Symbol):
            out.append((SYM, self.symbol(e)))
            return
        if isinstance(e, sympy.Add):
            args = list(e.args)
            self._terms(args[0], out)
            for a in args[1:]:
                self._terms(a, out)
                out.append((ADD, 0))
            return
        if isinstance(e, sympy.Mul):
            args = list(e.args)
            for a in args:
                if isinstance(a, sympy.Rational) and not isinstance(a, sympy.Integer):
                    raise Unsupported(f"size expression {e} is not integral")
            self._terms(args[0], out)
            for a in args[1:]:
                self._terms(a, out)
                out.append((MUL, 0))
            return
        if isinstance(e, sympy.Pow):
            base, exp = e.args
            if not (isinstance(exp, sympy.Integer) and 1 <= int(exp) <= 8):
                raise Unsupported(f"size expression {e} has a non-integer power")
            self._terms(base, out)
            for _ in range(int(exp) - 1):
                self._terms(base, out)
                out.append((MUL, 0))
            return
        fn = _FUNCTIONS.get(type(e))
        if fn is not None and fn[1] is not None:
            args = list(e.args)
            if fn[1] in (MAX, MIN):
                self._terms(args[0], out)
                for a in args[1:]:
                    self._terms(a, out)
                    out.append((fn[1], 0))
                return
            if len(args) == 2:
                self._terms(args[0], out)
                self._terms(args[1], out)
                out.append((fn[1], 0))
                return
        if isinstance(e, (sympy.Max, sympy.Min)):
            op = MAX if isinstance(e, sympy.Max) else MIN
            args = list(e.args)
            self._terms(args[0], out)
            for a in args[1:]:
                self._terms(a, out)
                out.append((op, 0))
            return
        raise Unsupported(f"size expression {e} ({type(e).__name__}) has no runtime form")

    def id(self, value):
        e = sym_expr(value)
        if isinstance(e, sympy.Expr):
            e = sympy.expand(e) if e.is_polynomial() else e
        terms = []
        self._terms(e, terms)
        if len(terms) > MAX_EXPR_TERMS:
            raise Unsupported(f"size expression {e} is too long for the runtime")
        key = tuple(terms)
        if key not in self.index:
            self.index[key] = len(self.table)
            self.table.append(key)
        return self.index[key]


class View:
    """A view of a buffer: dtype, element offset, shape and strides (ints or
    sympy expressions). ``buffer`` is None for an absent operand."""

    __slots__ = ("buffer", "dtype", "offset", "shape", "strides")

    def __init__(self, buffer, dtype, offset, shape, strides):
        self.buffer = buffer
        self.dtype = dtype
        self.offset = sym_expr(offset)
        self.shape = tuple(sym_expr(s) for s in shape)
        self.strides = tuple(sym_expr(s) for s in strides)

    @property
    def ndim(self):
        return len(self.shape)

    def with_layout(self, shape, strides, offset=None):
        return View(self.buffer, self.dtype, self.offset if offset is None else offset, shape, strides)

    def __repr__(self):
        return f"View(b{self.buffer}, {self.dtype}, +{self.offset}, {self.shape}, {self.strides})"


class Immediate:
    """A host value as an operand (a Python number in the graph)."""

    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype):
        self.value = value
        self.dtype = dtype


def scalar_record(value):
    """(is_float, f, i) of an nrt_scalar."""
    if value is None:
        return (0, 0.0, 0)
    if isinstance(value, torch.SymInt) or isinstance(value, torch.SymFloat):
        raise Unsupported("a symbolic scalar attribute")
    if isinstance(value, bool):
        return (0, float(value), int(value))
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise Unsupported(f"scalar {value} does not fit in 64 bits")
        return (0, float(value), value)
    if isinstance(value, float):
        return (1, value, int(value) if value == value and abs(value) < 9.2e18 else 0)
    raise Unsupported(f"scalar attribute {value!r} of type {type(value).__name__}")


class Node:
    __slots__ = ("code", "compute_dtype", "outputs", "inputs", "scalars", "fx_name")

    def __init__(self, code, compute_dtype, outputs, inputs, scalars, fx_name):
        self.code = code
        self.compute_dtype = compute_dtype
        self.outputs = outputs
        self.inputs = inputs
        self.scalars = scalars
        self.fx_name = fx_name


class GraphBuilder:
    """Builds one graph: buffers, views and nodes, then ``serialize()``."""

    def __init__(self, name, op_codes):
        self.name = name[:255]
        self.op_codes = op_codes  # op name -> nrt_op_code
        self.exprs = Exprs()
        self.buffers = []  # [kind, dtype, slot, numel]
        self.nodes = []
        self.blobs = []    # bytes (the programs of NKI nodes)
        self.num_inputs = 0
        self.num_outputs = 0

    def input(self, dtype, numel):
        dtype_code(dtype)  # Unsupported now, while the node can still run eagerly
        self.buffers.append([INPUT, dtype, self.num_inputs, numel])
        self.num_inputs += 1
        return len(self.buffers) - 1

    def temp(self, dtype, numel):
        dtype_code(dtype)
        self.buffers.append([TEMP, dtype, 0, numel])
        return len(self.buffers) - 1

    def make_output(self, buffer):
        """Turns a temporary into a graph output; returns its output slot."""
        b = self.buffers[buffer]
        if b[0] == OUTPUT:
            return b[2]
        if b[0] != TEMP:
            raise ValueError("only a temporary can become an output")
        b[0], b[2] = OUTPUT, self.num_outputs
        self.num_outputs += 1
        return b[2]

    def blob(self, data):
        """Adds a blob; returns its index."""
        self.blobs.append(bytes(data))
        return len(self.blobs) - 1

    def node(self, code, outputs, inputs, scalars=(), compute_dtype=None, fx_name=""):
        if code not in self.op_codes and code != "nki_kernel":
            raise Unsupported(f"the runtime has no op {code!r}")
        if len(outputs) + len(inputs) > 8:
            raise Unsupported(f"{code}: more than 8 operands")
        if len(scalars) > 8:
            raise Unsupported(f"{code}: more than 8 scalars")
        if compute_dtype is None:
            compute_dtype = outputs[0].dtype if outputs and outputs[0] is not None else torch.float32
        dtype_code(compute_dtype)
        for v in list(outputs) + list(inputs):
            if isinstance(v, View) and len(v.shape) > 25:
                raise Unsupported(f"{code}: more than 25 dimensions")
            if isinstance(v, (View, Immediate)):
                dtype_code(v.dtype)
        self.nodes.append(Node(code, compute_dtype, list(outputs), list(inputs),
                               [scalar_record(s) for s in scalars], fx_name))

    # ---- the binary form ------------------------------------------------

    def serialize(self):
        ex = self.exprs
        # Expression ids for every buffer and operand first (they may add
        # expressions), then the table.
        buffers = [(kind, dtype_code(dtype), slot, ex.id(numel)) for kind, dtype, slot, numel in self.buffers]
        nodes = []
        for n in self.nodes:
            ops = []
            mask = 0
            for k, v in enumerate(n.outputs + n.inputs):
                if isinstance(v, Immediate):
                    # Broadcast over the op's shape, as the eager shim passes it.
                    mask |= 1 << k
                    shape = n.outputs[0].shape if n.outputs and isinstance(n.outputs[0], View) else ()
                    ops.append((-1, dtype_code(v.dtype), len(shape), ex.id(0),
                                tuple(ex.id(s) for s in shape), tuple(ex.id(0) for _ in shape),
                                scalar_record(v.value)))
                elif v is None or v.buffer is None:
                    dt = v.dtype if v is not None else torch.float32
                    ops.append((-1, dtype_code(dt), 1, ex.id(0), (ex.id(0),), (ex.id(1),), None))
                else:
                    ops.append((v.buffer, dtype_code(v.dtype), v.ndim, ex.id(v.offset),
                                tuple(ex.id(s) for s in v.shape), tuple(ex.id(s) for s in v.strides),
                                None))
            code = NKI_CODE if n.code == "nki_kernel" else self.op_codes[n.code]
            nodes.append((code, dtype_code(n.compute_dtype), len(ops),
                          len(n.outputs), n.scalars, mask, ops))
        out = bytearray()
        p = out.extend
        p(struct.pack("<III", MAGIC, VERSION, len(ex.symbols)))
        p(struct.pack("<I", len(ex.table)))
        for terms in ex.table:
            p(struct.pack("<I", len(terms)))
            for op, arg in terms:
                p(struct.pack("<Iq", op, arg))
        p(struct.pack("<I", len(buffers)))
        for b in buffers:
            p(struct.pack("<IiII", *b))
        p(struct.pack("<I", len(nodes)))
        for code, cdt, nops, nout, scalars, mask, ops in nodes:
            p(struct.pack("<IiIIII", code, cdt, nops, nout, len(scalars), mask))
            for s in scalars:
                p(struct.pack("<idq", *s))
            for buf, dt, ndim, off, shape, strides, imm in ops:
                p(struct.pack("<iiII", buf, dt, ndim, off))
                p(struct.pack(f"<{ndim}I", *shape))
                p(struct.pack(f"<{ndim}I", *strides))
                if imm is not None:
                    p(struct.pack("<idq", *imm))
        p(struct.pack("<I", len(self.blobs)))
        for blob in self.blobs:
            p(struct.pack("<I", len(blob)))
            p(blob)
        name = self.name.encode("utf-8", "replace")[:255]
        p(struct.pack("<I", len(name)))
        p(name)
        p(struct.pack("<I", zlib.crc32(out) & 0xFFFFFFFF))
        return bytes(out)
