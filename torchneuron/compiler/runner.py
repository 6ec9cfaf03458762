"""Running a plan: the callable AOTAutograd gets back for one FX graph.

Each call reads the symbolic sizes from the arguments, then walks the
plan's steps: a segment is one launch of its compiled program on the
current stream (outputs and arena from the caching allocator), an eager
node is the ordinary ATen call on the calling thread, a host value is a
size evaluated from its expression. Exported values are rebuilt with
``as_strided`` on the buffer that holds them, so views keep their aliasing
and strides.
"""

import re

import torch

from torchneuron import _C
from torchneuron.compiler import metrics as _metrics
from torchneuron.compiler.streams import StreamActions
from torchneuron.compiler.ir import ADD, CONST, FLOORDIV, MAX, MIN, MOD, MUL, SUB, SYM, MAX_EXPR_TERMS

_DTYPES = {str(d): d for d in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                               torch.int64, torch.float16, torch.bfloat16, torch.float32,
                               torch.float64)}


class PlanError(ValueError):
    """A plan (from the disk cache) that does not fit its graph."""


# TORCHNEURON_LOG_OPS is read once, when the extension loads.
_OP_LOG = _C._op_log_enabled()
_BINARY = {ADD: "+", SUB: "-", MUL: "*", FLOORDIV: "//", MOD: "%"}


def expr_source(terms, num_symbols):
    """Python source of a postfix expression over s[0..]."""
    if not isinstance(terms, list) or not 1 <= len(terms) <= MAX_EXPR_TERMS:
        raise PlanError("malformed expression")
    stack = []
    for t in terms:
        if not (isinstance(t, list) and len(t) == 2 and all(isinstance(x, int) for x in t)):
            raise PlanError("malformed expression term")
        op, arg = t
        if op == CONST:
            stack.append(f"({arg})")
        elif op == SYM:
            if not 0 <= arg < num_symbols:
                raise PlanError("expression names an unknown symbol")
            stack.append(f"s[{arg}]")
        elif op in _BINARY or op in (MAX, MIN):
            if len(stack) < 2:
                raise PlanError("malformed expression")
            b, a = stack.pop(), stack.pop()
            if op in _BINARY:
                stack.append(f"({a}{_BINARY[op]}{b})")
            else:
                stack.append(f"{'max' if op == MAX else 'min'}({a},{b})")
        else:
            raise PlanError("unknown expression op")
    if len(stack) != 1:
        raise PlanError("malformed expression")
    return stack[0]


def _layout_fn(layout, num_symbols):
    """(shape, stride, offset) of an exported value: constants, or a
    function of the symbol values."""
    parts = [[expr_source(t, num_symbols) for t in layout["shape"]],
             [expr_source(t, num_symbols) for t in layout["stride"]],
             expr_source(layout["offset"], num_symbols)]
    src = f"lambda s: (({','.join(parts[0])}{',' if parts[0] else ''}), ({','.join(parts[1])}{',' if parts[1] else ''}), {parts[2]})"
    fn = eval(compile(src, "<layout>", "eval"), {"__builtins__": {"max": max, "min": min}})
    if "s[" not in src:
        const = fn(())
        return lambda s: const
    return fn


class Program:
    """A compiled segment's runtime program (owned handle)."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle and _C is not None:
            _C._graph_program_destroy(self.handle)
            self.handle = 0

    def info(self):
        return _C._graph_program_info(self.handle)

    def plan_text(self, symbols=None):
        return _C._graph_program_plan_text(self.handle, symbols)


def compile_ir(ir, fuse, op_nodes=None):
    handle, err = _C._graph_program_compile(ir, fuse)
    if not handle:
        m = re.search(r"node (\d+)", err)
        where = ""
        if m and op_nodes and int(m.group(1)) < len(op_nodes):
            where = f" (from FX node {op_nodes[int(m.group(1))]})"
        raise PlanError(f"the runtime rejected the graph IR{where}: {err}")
    return Program(handle)


class CompiledGraph:
    """Callable for one FX graph (forward, backward or inference)."""

    def __init__(self, gm, plan, programs, name):
        # AOTAutograd's boxed calling convention (one list of arguments); an
        # instance attribute, so that the wrappers Dynamo puts around a
        # backward (functools.wraps) carry it.
        self._boxed_call = True
        self.peak_arena_bytes = 0
        self.metrics_row = None  # this graph's row of get_compilation_metrics, kept up to date
        self.gm = gm
        self.name = name
        self.plan = plan
        nodes = {n.name: n for n in gm.graph.nodes}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if [n.name for n in placeholders] != plan["placeholders"]:
            raise PlanError("the plan's arguments differ from the graph's")
        index = {}
        for i, n in enumerate(placeholders):
            index[n] = i
        num_symbols = len(plan["symbols"])
        for src in plan["symbols"]:
            if not (isinstance(src, list) and src and src[0] in ("arg", "size", "stride", "offset")
                    and all(isinstance(x, int) for x in src[1:]) and 0 <= src[1] < len(placeholders)):
                raise PlanError("malformed symbol source")
        self.symbol_sources = [tuple(s) for s in plan["symbols"]]
        slots = {n: i for i, n in enumerate(placeholders)}
        next_slot = len(placeholders)
        steps = []
        prog_iter = iter(programs)
        for s in plan["steps"]:
            kind = s.get("kind")
            if kind == "eager":
                n = nodes.get(s["node"])
                if n is None or n.op != "call_function":
                    raise PlanError(f"unknown node {s['node']!r}")
                slots[n] = next_slot
                next_slot += 1
                steps.append(("host_op" if s.get("host") else "eager", n))
            elif kind == "const":
                n = nodes.get(s["node"])
                if n is None or n.op != "get_attr":
                    raise PlanError(f"unknown constant {s['node']!r}")
                value = gm
                for part in n.target.split("."):
                    value = getattr(value, part)
                slots[n] = next_slot
                next_slot += 1
                steps.append(("const", slots[n], value))
            elif kind == "host":
                n = nodes.get(s["node"])
                if n is None:
                    raise PlanError(f"unknown node {s['node']!r}")
                src = expr_source(s["expr"], num_symbols)
                fn = eval(compile(f"lambda s: {src}", "<size>", "eval"), {"__builtins__": {"max": max, "min": min}})
                slots[n] = next_slot
                next_slot += 1
                steps.append(("host", slots[n], fn))
            elif kind == "segment":
                program = next(prog_iter) if s["ir"] is not None else None
                ins = []
                for name_ in s["inputs"]:
                    n = nodes.get(name_)
                    if n is None or n not in slots:
                        raise PlanError(f"segment input {name_!r} is not defined before it")
                    ins.append(slots[n])
                host_scalars = s.get("host_scalars", [])
                if not all(isinstance(k, int) and 0 <= k < len(ins) for k in host_scalars):
                    raise PlanError("malformed host scalar inputs")
                out_dtypes = []
                for d in s["output_dtypes"]:
                    if d not in _DTYPES:
                        raise PlanError("unknown dtype")
                    out_dtypes.append(_DTYPES[d])
                exports = []
                for e in s["exports"]:
                    n = nodes.get(e["node"])
                    if n is None:
                        raise PlanError(f"unknown node {e['node']!r}")
                    layouts = []
                    for lay in e["layouts"]:
                        if lay is None:
                            layouts.append(None)
                            continue
                        limit = len(ins) if lay["from"] == "input" else len(out_dtypes)
                        if lay["from"] not in ("input", "output") or not 0 <= lay["slot"] < limit:
                            raise PlanError("export from an unknown buffer")
                        layouts.append((lay["from"] == "input", lay["slot"], _layout_fn(lay, num_symbols)))
                    slots[n] = next_slot
                    next_slot += 1
                    exports.append((slots[n], e["tuple"], layouts))
                steps.append(("segment", program, ins, out_dtypes, exports, tuple(host_scalars)))
            else:
                raise PlanError("unknown step kind")
        self.steps = steps
        self.num_slots = next_slot
        self.slots = slots
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.output_spec = out.args[0]
        self.output_is_seq = isinstance(self.output_spec, (tuple, list))
        self.eager_nodes = [s[1].name for s in steps if s[0] == "eager"]
        self.num_launchable = sum(1 for s in steps if s[0] == "segment" and s[1] is not None)
        actions = StreamActions(gm)
        self.stream_actions = actions if actions else None

    def _symbols(self, args):
        vals = []
        for src in self.symbol_sources:
            a = args[src[1]]
            if src[0] == "arg":
                vals.append(int(a))
            elif src[0] == "size":
                vals.append(a.size(src[2]))
            elif src[0] == "stride":
                vals.append(a.stride(src[2]))
            else:
                vals.append(a.storage_offset())
        return vals

    def __call__(self, *args):
        if len(args) == 1 and isinstance(args[0], list):  # boxed (arguments are never lists)
            args = tuple(args[0])
        if self.stream_actions is None:
            return self._run(args)
        current = self.stream_actions.before(_device_of((), args))
        result = self._run(args)
        self.stream_actions.after(current)
        return result

    def _run(self, args):
        env = [None] * self.num_slots
        env[:len(args)] = args
        symbols = self._symbols(args)
        device = None
        launches = 0
        for step in self.steps:
            kind = step[0]
            if kind == "segment":
                _, program, ins, out_dtypes, exports, host_scalars = step
                in_tensors = [env[i] for i in ins]
                outs = ()
                if program is not None:
                    if device is None:
                        device = _device_of(in_tensors, args)
                    for k in host_scalars:
                        # A 0-d CPU tensor: its value, filled on the device
                        # (no copy from pageable memory, no synchronisation).
                        t = in_tensors[k]
                        in_tensors[k] = torch.full((), t.item(), dtype=t.dtype, device=f"neuron:{device}")
                    outs, arena = _C._graph_program_run(program.handle, symbols, in_tensors, out_dtypes,
                                                        device)
                    launches += 1
                    if arena > self.peak_arena_bytes:
                        self.peak_arena_bytes = arena
                        if self.metrics_row is not None:
                            self.metrics_row["arena_bytes"] = arena
                for slot, is_tuple, layouts in exports:
                    values = []
                    for lay in layouts:
                        if lay is None:
                            values.append(None)
                            continue
                        from_input, k, fn = lay
                        base = env[ins[k]] if from_input else outs[k]
                        shape, stride, offset = fn(symbols)
                        if from_input:
                            offset = offset + base.storage_offset()
                        values.append(torch.as_strided(base, shape, stride, offset))
                    env[slot] = tuple(values) if is_tuple else values[0]
            elif kind == "eager":
                n = step[1]
                a, kw = _map_args(n, env, self.slots)
                if _OP_LOG:  # its op lines name the graph
                    _C._op_log_set_graph(f"{self.name} (node {n.name})")
                    try:
                        env[self.slots[n]] = _as_traced(n, n.target(*a, **kw))
                    finally:
                        _C._op_log_set_graph("")
                else:
                    env[self.slots[n]] = _as_traced(n, n.target(*a, **kw))
                _metrics.count("compile.eager_nodes")
            elif kind == "host_op":
                n = step[1]
                a, kw = _map_args(n, env, self.slots)
                env[self.slots[n]] = n.target(*a, **kw)
            elif kind == "host":
                env[step[1]] = step[2](symbols)
            else:
                env[step[1]] = step[2]
        if launches:
            _metrics.count("compile.launches", launches)
        return _map_value(self.output_spec, env, self.slots)


def _as_traced(n, value):
    """An eager node's result as the graph expects it (its fake tensor):
    a kernel whose result dtype differs from PyTorch's meta function (16-bit
    statistics of a norm, say) is converted, so that the compiled segments
    after it read what they were compiled for; other mismatches raise."""
    val = n.meta.get("val")
    if isinstance(value, torch.Tensor) and isinstance(val, torch.Tensor):
        if value.dtype != val.dtype:
            value = value.to(val.dtype)
        if value.dim() != val.dim() or value.device.type != val.device.type:
            raise RuntimeError(f"compiled graph: eager node {n.name} ({n.target}) returned a "
                               f"{value.dim()}-d {value.device.type} tensor where the graph "
                               f"expects {val.dim()}-d on {val.device.type}")
        return value
    if isinstance(value, (tuple, list)) and isinstance(val, (tuple, list)) and len(value) == len(val):
        return type(value)(_as_traced_item(v, f) for v, f in zip(value, val))
    return value


def _as_traced_item(value, val):
    if isinstance(value, torch.Tensor) and isinstance(val, torch.Tensor) and value.dtype != val.dtype:
        return value.to(val.dtype)
    return value


def _device_of(tensors, args):
    for t in list(tensors) + list(args):
        if isinstance(t, torch.Tensor) and t.device.type == "neuron":
            return t.device.index
    return torch.neuron.current_device()


def _map_value(a, env, slots):
    if isinstance(a, torch.fx.Node):
        return env[slots[a]]
    if isinstance(a, (list, tuple)):
        return type(a)(_map_value(x, env, slots) for x in a)
    if isinstance(a, dict):
        return {k: _map_value(v, env, slots) for k, v in a.items()}
    return a


def _map_args(n, env, slots):
    return _map_value(n.args, env, slots), _map_value(n.kwargs, env, slots)

