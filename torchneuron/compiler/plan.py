"""Lowering a whole FX graph into a plan: compiled segments and eager nodes.

The plan is plain data (JSON-compatible, graph IR blobs as bytes), so that
the disk cache can store it and validate it on load; ``runner.py`` turns a
plan and its FX graph into the callable AOTAutograd gets back.

Nodes are taken in graph order. Consecutive nodes with a lowering form a
segment, one graph IR and one launch. A node without a lowering (or whose
lowering raises ``Unsupported``) closes the segment and runs through the
eager dispatcher on the calling thread; the next lowerable node opens a new
segment. Values a segment defines and a later step (or the graph's output)
uses are exported: the buffer they live in becomes an output of the
segment, and the runner rebuilds the value with ``as_strided``. Values whose
type is an integer (sizes) are computed on the host from their symbolic
expression.
"""

import functools

import torch

from torchneuron import _C
from torchneuron.compiler import lower_nn as _lower_nn  # noqa: F401  (registers lowerings)
from torchneuron.compiler import lower_pointwise as _lower_pointwise  # noqa: F401
from torchneuron.compiler import streams as _streams  # noqa: F401
from torchneuron.compiler.ir import INPUT, OUTPUT, Exprs, GraphBuilder, Unsupported
from torchneuron.compiler.lower_nki import lower_nki, nki_kernel_of
from torchneuron.compiler.lowering import LOWERINGS, Context

PLAN_VERSION = 1

_OP_CODES = None


def op_codes():
    global _OP_CODES
    if _OP_CODES is None:
        _OP_CODES = dict(_C._op_codes())
    return _OP_CODES


def _symbol_sources(gm):
    """symbol -> how to read its value from the graph's arguments:
    ("arg", i) for a SymInt argument, ("size", i, d) / ("stride", i, d) /
    ("offset", i) of a tensor argument."""
    sources = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(placeholders):
        val = n.meta.get("val")
        if isinstance(val, torch.SymInt):
            e = val.node.expr
            if e.is_Symbol and e not in sources:
                sources[e] = ("arg", i)
    for i, n in enumerate(placeholders):
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for kind, values in (("size", val.shape), ("stride", val.stride())):
            for d, s in enumerate(values):
                if isinstance(s, torch.SymInt):
                    e = s.node.expr
                    if e.is_Symbol and e not in sources:
                        sources[e] = (kind, i, d)
        off = val.storage_offset()
        if isinstance(off, torch.SymInt) and off.node.expr.is_Symbol and off.node.expr not in sources:
            sources[off.node.expr] = ("offset", i)
    return sources


class FrozenExprs(Exprs):
    """Expressions over the graph's known symbols only."""

    def __init__(self, symbols):
        super().__init__()
        self.symbols = dict(symbols)

    def symbol(self, sym):
        if sym not in self.symbols:
            raise Unsupported(f"size {sym} is not known before the graph runs")
        return self.symbols[sym]


def _is_size_value(val):
    return isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool)


def build_plan(gm, name, fuse=True):
    """The plan of gm (see the module docstring) and the eager nodes' reasons."""
    sources = _symbol_sources(gm)
    symbol_index = {s: k for k, s in enumerate(sources)}
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    output_node = next(n for n in nodes if n.op == "output")

    steps = []            # ("segment", ctx, [nodes]) / ("eager", node) / ("host", node, terms)
    reasons = {}          # node name -> why it ran eagerly

    def new_segment():
        b = GraphBuilder(f"{name}.{sum(1 for s in steps if s[0] == 'segment')}", op_codes())
        b.exprs = FrozenExprs(symbol_index)
        return Context(b)

    ctx = new_segment()
    seg_nodes = []

    def close_segment():
        nonlocal ctx, seg_nodes
        if seg_nodes:
            steps.append(("segment", ctx, seg_nodes))
        ctx = new_segment()
        seg_nodes = []

    host_exprs = FrozenExprs(symbol_index)
    early = set(placeholders)  # values there before any segment runs
    for n in nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op == "get_attr":
            # A constant of the graph module: there from the start, so it
            # does not split segments (a segment reading it takes it as input).
            steps.append(("const", n))
            early.add(n)
            continue
        val = n.meta.get("val")
        if _is_size_value(val):
            try:
                terms = host_exprs.table[host_exprs.id(val)]
                steps.append(("host", n, terms))
                early.add(n)
                continue
            except Unsupported:
                pass
        if _is_host_scalar_op(n) and all(a in early for a in n.all_input_nodes):
            # Arithmetic on CPU scalars (Python numbers Dynamo made tensors):
            # a host computation before the segment, not device work.
            steps.append(("eager", n, "host"))
            early.add(n)
            continue
        fn = LOWERINGS.get(n.target) if n.op == "call_function" else None
        if fn is None and n.op == "call_function":
            kernel = nki_kernel_of(n.target)
            if kernel is not None:
                fn = functools.partial(lower_nki, kernel=kernel)
            elif _streams.is_control_deps(n.target) or _streams.ordering_op(n.target):
                fn = _streams.lower_ordering
        reason = None
        if fn is None:
            reason = "no lowering"
        else:
            mark = (len(ctx.b.nodes), len(ctx.b.buffers), ctx.b.num_inputs, len(ctx.inputs),
                    dict(ctx.values), len(ctx.b.blobs))
            ctx.node = n
            try:
                value = fn(ctx, n)
                if isinstance(value, tuple):
                    _check_items_used(n, value)
                ctx.values[n] = value
                seg_nodes.append(n)
                continue
            except Unsupported as e:
                reason = str(e) or "unsupported"
                # Undo what the lowering emitted.
                del ctx.b.nodes[mark[0]:]
                del ctx.b.buffers[mark[1]:]
                ctx.b.num_inputs = mark[2]
                del ctx.inputs[mark[3]:]
                ctx.host_scalars = {k for k in ctx.host_scalars if k < mark[3]}
                ctx.values = mark[4]
                del ctx.b.blobs[mark[5]:]
        reasons[n.name] = f"{n.target}: {reason}"
        if all(a in early for a in n.all_input_nodes):
            # Needs only what the graph starts with (a CPU scalar's
            # conversion, say): it runs before the open segment, which it
            # does not split.
            steps.append(("eager", n))
            early.add(n)
            continue
        close_segment()
        steps.append(("eager", n))
    close_segment()

    # What each segment must export: values used after it.
    step_of = {}
    for k, s in enumerate(steps):
        if s[0] == "segment":
            for n in s[2]:
                step_of[n] = k
        else:
            step_of[s[1]] = k
    plan_steps = []
    for k, s in enumerate(steps):
        if s[0] == "eager":
            plan_steps.append({"kind": "eager", "node": s[1].name, "host": len(s) > 2})
            continue
        if s[0] == "host":
            plan_steps.append({"kind": "host", "node": s[1].name, "expr": [list(t) for t in s[2]]})
            continue
        if s[0] == "const":
            plan_steps.append({"kind": "const", "node": s[1].name})
            continue
        ctx, seg = s[1], s[2]
        exports = []
        for n in seg:
            users_after = [u for u in n.users if u is output_node or step_of.get(u, -1) != k]
            if not users_after:
                continue
            value = ctx.values[n]
            items = value if isinstance(value, tuple) else (value,)
            layouts = []
            for item in items:
                if item is None:
                    layouts.append(None)
                    continue
                kind, _, slot, _ = ctx.b.buffers[item.buffer]
                if kind == INPUT:
                    src = ("input", slot)
                else:
                    src = ("output", ctx.b.make_output(item.buffer))
                layouts.append({"from": src[0], "slot": src[1], "dtype": str(item.dtype),
                                "shape": [_terms(ctx.b.exprs, x) for x in item.shape],
                                "stride": [_terms(ctx.b.exprs, x) for x in item.strides],
                                "offset": _terms(ctx.b.exprs, item.offset)})
            exports.append({"node": n.name, "tuple": isinstance(value, tuple), "layouts": layouts})
        if not ctx.b.nodes and not ctx.b.num_outputs:
            # Only views: nothing to launch, the exports rebuild everything.
            ir = None
        else:
            ir = ctx.b.serialize()
        out_dtypes = [None] * ctx.b.num_outputs
        for kind, dtype, slot, _ in ctx.b.buffers:
            if kind == OUTPUT:
                out_dtypes[slot] = str(dtype)
        plan_steps.append({"kind": "segment", "ir": ir, "inputs": [n.name for n in ctx.inputs],
                           "host_scalars": sorted(ctx.host_scalars),
                           "output_dtypes": out_dtypes, "exports": exports,
                           "nodes": [n.name for n in seg], "num_ops": len(ctx.b.nodes),
                           "op_nodes": [op.fx_name for op in ctx.b.nodes]})
    sym_list = [list(sources[s]) for s in sources]
    return {"version": PLAN_VERSION, "name": name, "symbols": sym_list,
            "placeholders": [n.name for n in placeholders], "steps": plan_steps,
            "fuse": bool(fuse)}, reasons


def _is_host_scalar_op(n):
    """A call whose result and tensor arguments are all 0-d CPU tensors."""
    def cpu_scalar(v):
        return isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dim() == 0
    if n.op != "call_function" or not cpu_scalar(n.meta.get("val")):
        return False
    return all(cpu_scalar(a.meta.get("val")) or _is_size_value(a.meta.get("val"))
               for a in n.all_input_nodes)


def _check_items_used(n, value):
    """A lowering may leave out results nobody reads (None), not others."""
    import operator
    for u in n.users:
        if u.target is operator.getitem and u.args[0] is n:
            k = u.args[1]
            if not isinstance(k, int) or not 0 <= k < len(value) or value[k] is None:
                raise Unsupported(f"result {k} is used but the lowering does not produce it")
        elif _streams.is_control_deps(u.target) and n not in u.args[2:]:
            continue  # named as an ordering dependency only, never read
        elif u.op != "output":
            raise Unsupported("a multi-result value used other than through getitem")


def _terms(exprs, value):
    return [list(t) for t in exprs.table[exprs.id(value)]]
