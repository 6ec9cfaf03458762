"""The Dynamo backend "neuron": AOTAutograd, then our graph compiler.

``torch.compile(model, backend="neuron")`` finds ``neuron_backend`` through
the ``torch_dynamo_backends`` entry point. AOTAutograd splits forward and
backward graphs (ATen IR, with the decompositions of decompositions.py);
each graph is lowered to a plan of compiled segments and eager nodes
(plan.py), looked up in the caches first (cache.py), and wrapped in a
CompiledGraph (runner.py).
"""

import contextlib
import functools
import gc
import os
import time
import warnings

from torchneuron.compiler import cache as _cache
from torchneuron.compiler import metrics as _metrics

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIONS = {
    "fallback_execution": "on a compilation failure, run the graph eagerly with a warning",
    "debug_dir": "write the FX graphs, graph IR and fusion plans there",
    "fuse": "fuse pointwise chains (default True)",
    "cache": "use the in-memory and disk caches (default True)",
}


class CompilationError(RuntimeError):
    """A graph the neuron backend could not compile; names the node and why."""


class _Config:
    def __init__(self, mode, options):
        if mode is not None and mode not in MODES:
            raise ValueError(f"torch.compile backend 'neuron': unknown mode {mode!r}; "
                             f"expected one of {', '.join(MODES)}")
        options = dict(options or {})
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            known = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            raise ValueError(f"torch.compile backend 'neuron': unknown option(s) {', '.join(unknown)}; "
                             f"known options are {known}")
        self.mode = mode or "default"
        self.fallback_execution = bool(options.get("fallback_execution", False))
        self.debug_dir = options.get("debug_dir") or os.environ.get("TORCHNEURON_DEBUG_DIR") or None
        self.fuse = bool(options.get("fuse", True))
        self.cache = bool(options.get("cache", True))


_graph_ids = {"forward": 0, "backward": 0, "inference": 0}


def _next_name(kind):
    _graph_ids[kind] += 1
    return f"{kind}_{_graph_ids[kind] - 1}"


@contextlib.contextmanager
def _no_cyclic_gc():
    """Python's cyclic collector paused while a graph is traced and compiled.

    Tracing allocates millions of short-lived objects, and each full
    collection walks every object of the process (torch's included): the
    collector took a third of the first step's time. Reference counting
    still frees what becomes garbage; the few cycles tracing leaves are
    collected once the collector runs again. A collector the user has
    disabled stays disabled."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def compile_graph(gm, example_inputs, kind, config):
    with _no_cyclic_gc():
        return _compile_graph(gm, example_inputs, kind, config)


def _compile_graph(gm, example_inputs, kind, config):
    """The callable for one ATen FX graph (forward, backward or inference)."""
    from torchneuron.compiler.plan import build_plan
    from torchneuron.compiler.runner import CompiledGraph, compile_ir

    name = _next_name(kind)
    start = time.perf_counter()
    source = "compiled"
    reasons = {}
    try:
        key = _cache.graph_key(gm, config.fuse) if config.cache else None
        entry = _cache.lookup(key) if key else None
        if entry is not None:
            plan, programs, source = entry
            try:
                runner = CompiledGraph(gm, plan, programs, name)
            except Exception as e:  # a plan that does not fit: recompile
                source = "compiled"
                warnings.warn(f"torchneuron: a cached plan did not fit graph {name} ({e}); recompiling")
                entry = None
        if entry is None:
            plan, reasons = build_plan(gm, name, fuse=config.fuse)
            programs = [compile_ir(s["ir"], plan["fuse"], s.get("op_nodes")) for s in plan["steps"]
                        if s["kind"] == "segment" and s["ir"] is not None]
            runner = CompiledGraph(gm, plan, programs, name)
            _warn_eager(reasons)
            if key:
                _cache.store(key, plan, programs)
    except Exception as e:
        if config.fallback_execution:
            warnings.warn(f"torchneuron: graph {name} failed to compile ({type(e).__name__}: {e}); "
                          "running it eagerly (fallback_execution)")
            _metrics.count("compile.fallbacks")
            return gm.forward
        if isinstance(e, CompilationError):
            raise
        raise CompilationError(f"torch.compile backend 'neuron': graph {name} failed to compile: "
                               f"{type(e).__name__}: {e}") from e
    ms = (time.perf_counter() - start) * 1e3
    _record(runner, programs, kind, ms, source, example_inputs)
    if config.debug_dir:
        _write_debug(config.debug_dir, runner, programs, gm, reasons if source == "compiled" else {})
    return runner


_warned_nodes = set()


def _warn_eager(reasons):
    """Names each op that ran eagerly inside a compiled graph, once per op."""
    new = {}
    for node, why in reasons.items():
        op = why.split(":", 1)[0]
        if op not in _warned_nodes:
            _warned_nodes.add(op)
            new[op] = why
    if new:
        warnings.warn("torchneuron: these ops run through the eager path between compiled "
                      "segments: " + "; ".join(new.values()))


def _record(runner, programs, kind, ms, source, example_inputs):
    _metrics.count("compile.graphs")
    _metrics.count(f"compile.graphs.{kind}")
    if source == "memory":
        _metrics.count("compile.cache_hits")
    elif source == "disk":
        _metrics.count("compile.disk_cache_hits")
    fused = epilogues = regions = 0
    for p in programs:
        info = p.info()
        fused += info["fused_groups"]
        epilogues += info["gemm_epilogues"]
        regions += info["row_regions"]
    _metrics.count("compile.fused_kernels", fused)
    _metrics.count("compile.gemm_epilogues", epilogues)
    _metrics.count("compile.row_regions", regions)
    runner.metrics_row = _metrics.add_row({
        "name": runner.name, "kind": kind,
        "nodes": sum(1 for n in runner.gm.graph.nodes if n.op == "call_function"),
        "segments": runner.num_launchable, "fused_groups": fused, "gemm_epilogues": epilogues, "row_regions": regions,
        "eager_nodes": len(runner.eager_nodes), "eager_ops": sorted({s for s in runner.eager_nodes}),
        "arena_bytes": 0, "compile_ms": round(ms, 3), "source": source,
    })


def _write_debug(directory, runner, programs, gm, reasons):
    from torchneuron import _C
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, runner.name)
    with open(base + ".fx.txt", "w") as f:
        f.write(gm.print_readable(print_output=False))
    with open(base + ".plan.txt", "w") as f:
        k = 0
        for s in runner.plan["steps"]:
            if s["kind"] == "eager" and s.get("host"):
                f.write(f"host op {s['node']} (CPU scalars)\n")
            elif s["kind"] == "eager":
                f.write(f"eager {s['node']}: {reasons.get(s['node'], '')}\n")
            elif s["kind"] == "host":
                f.write(f"host {s['node']}\n")
            else:
                f.write(f"segment of {len(s['nodes'])} nodes ({s['num_ops']} ops): {' '.join(s['nodes'])}\n")
                if s["ir"] is not None:
                    p = programs[k]
                    k += 1
                    f.write(_C._graph_text(s["ir"]))
                    f.write("\n")
                    f.write(p.plan_text())
                    f.write("\n")


def _decompositions():
    from torchneuron.compiler.decompositions import decomposition_table
    return decomposition_table()


def neuron_backend(gm, example_inputs, mode=None, options=None, **kwargs):
    """The Dynamo backend function (``torch.compile(backend="neuron")``)."""
    import torchneuron  # noqa: F401  (the device, when reached through the entry point)
    from torch._dynamo.backends.common import aot_autograd

    if kwargs:
        raise ValueError(f"torch.compile backend 'neuron': unexpected arguments {sorted(kwargs)}")
    config = _Config(mode, options)
    if config.debug_dir:
        os.makedirs(config.debug_dir, exist_ok=True)
        with open(os.path.join(config.debug_dir, f"dynamo_{_graph_ids['forward'] + _graph_ids['inference']}.fx.txt"), "w") as f:
            f.write(gm.print_readable(print_output=False))
    fw = functools.partial(compile_graph, kind="forward", config=config)
    bw = functools.partial(compile_graph, kind="backward", config=config)
    inf = functools.partial(compile_graph, kind="inference", config=config)
    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw, inference_compiler=inf,
                           decompositions=_decompositions())
    with _no_cyclic_gc():
        return backend(gm, example_inputs)
