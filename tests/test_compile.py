"""torch.compile(backend="neuron"): the front end's behaviour.

- Registration: the backend resolves by name and is listed by
  torch._dynamo.list_backends() in a fresh interpreter that never imported
  torchneuron itself (the ``torch_dynamo_backends`` entry point); the
  DeviceInterface for ``neuron`` is registered.
- Pointwise chains (float32, bfloat16, int64, bool results, broadcasting,
  transposed and sliced inputs, scalars) compiled against eager neuron: the
  same bits; the counters and the per-graph rows show compiled graphs,
  launches, fused groups and no eager nodes where every op has a lowering.
- An op without a lowering inside pointwise work runs eagerly between
  compiled segments: correct, counted in the row, warned about once.
  Tensor constants made inside the function (FX get_attr nodes). A Python
  float argument that changes value (its CPU-scalar arithmetic runs on the
  host before the program, the rest compiled).
- Stream contexts inside a compiled function: correct; traced with
  fullgraph=True into one launch; work queued on the region's stream
  before the graph is waited for, work queued there after it waits, and
  events recorded in the graph complete after the launch (stream gates).
- Graph breaks, fullgraph=True, compiled code between eager code,
  inference under no_grad, autocast regions inside the compiled function.
- Training an MLP (Linear, GELU, LayerNorm): losses, gradients and weights
  compiled against eager neuron and the CPU; forward and backward graphs.
- Input mutation (in-place ops on arguments, BatchNorm running stats) and
  returned views (strides, offsets, storage aliasing) as in eager.
- Dynamic shapes: mark_dynamic, dynamic=True and automatic dynamism; one
  compilation serves every sequence length.
- Modes and options: every mode; unknown options and modes name the known
  ones; fuse and cache; debug_dir and TORCHNEURON_DEBUG_DIR write the FX
  graph, the graph IR text and the plan.
- fallback_execution, and CompilationError without it.
- Caches: in memory, on disk across processes, the directory's mode,
  corrupt / truncated / foreign / malformed entries and well-formed plans
  that do not fit the graph (each: a warning, recompiled, counted as a
  compilation), concurrent writers, TORCHNEURON_DISK_CACHE=0.
- The graph IR loader from Python: garbage, every truncation and every
  single-byte corruption of a real IR are rejected without a crash.

Every test starts with Dynamo reset, the metrics cleared, the in-memory
plan cache empty and TORCHNEURON_CACHE_DIR pointing at a fresh temporary
directory (nothing is written under ~/.cache).
"""

import base64
import copy
import glob
import hashlib
import json
import os
import re
import stat
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchneuron
from conftest import assert_same, check_output, run_python, run_python_many
from torchneuron import _C, metrics

pytestmark = pytest.mark.timeout(180)

DEV = "neuron"


# ---- fixtures and helpers -----------------------------------------------------


@pytest.fixture(autouse=True)
def fresh_compiler(monkeypatch, tmp_path):
    """Dynamo reset, metrics cleared, an empty plan cache in memory and a
    private disk cache directory; no debug directory from the environment."""
    from torchneuron.compiler import cache

    cache_dir = tmp_path / "tn-cache"
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("TORCHNEURON_DEBUG_DIR", raising=False)
    monkeypatch.delenv("TORCHNEURON_DISK_CACHE", raising=False)
    torch._dynamo.reset()
    cache.clear_memory()
    metrics.clear_all()
    yield cache_dir
    torch._dynamo.reset()
    cache.clear_memory()


def counter(name):
    value = metrics.get_counter_value(name)
    assert value is not None, f"{name} is not a counter (known: {metrics.get_counter_names()})"
    return value


def counters():
    return {name: counter(name) for name in metrics.get_counter_names() if name.startswith("compile.")}


def rows():
    return metrics.get_compilation_metrics()


def compiled(fn, **kwargs):
    kwargs.setdefault("backend", "neuron")
    return torch.compile(fn, **kwargs)


def rand(*shape, dtype=torch.float32, seed=0, device=DEV, low=-3.0, high=3.0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.rand(shape, generator=g) < 0.5
    elif dtype.is_floating_point:
        t = (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    else:
        t = torch.randint(-50, 51, shape, generator=g).to(dtype)
    return t.to(device)


def flat(out):
    """The tensors of a (possibly nested) output, in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return []


def assert_equal_outputs(got, want, what=""):
    """Same structure, dtypes, shapes and bits (NaN equals NaN)."""
    got, want = flat(got), flat(want)
    assert len(got) == len(want), f"{what}: {len(got)} outputs != {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.device == w.device, f"{what} output {k}: device {g.device} != {w.device}"
        try:
            assert_same(g, w.cpu())
        except AssertionError as e:
            raise AssertionError(f"{what} output {k}: {e}") from None


def assert_close_outputs(got, want, rtol, atol, what=""):
    got, want = flat(got), flat(want)
    assert len(got) == len(want), f"{what}: {len(got)} outputs != {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m, k=k: f"{what} output {k}: {m}")


def compile_error(excinfo_value):
    """The CompilationError in an exception's chain (Dynamo wraps backend
    errors in BackendCompilerFailed), or None."""
    from torchneuron.compiler import CompilationError

    seen = set()
    e = excinfo_value
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, CompilationError):
            return e
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return None


def inner_message(excinfo_value):
    """The text of an exception and everything it wraps."""
    parts = []
    seen = set()
    e = excinfo_value
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return "\n".join(parts)


# ---- registration --------------------------------------------------------------


def test_backend_listed_in_fresh_interpreter():
    """The entry point makes "neuron" a Dynamo backend without importing
    torchneuron first; resolving it registers the DeviceInterface."""
    out = check_output(run_python("""
        import json, sys
        import torch
        import torch._dynamo
        listed = "neuron" in torch._dynamo.list_backends()
        from torch._dynamo.backends.registry import lookup_backend
        fn = lookup_backend("neuron")
        from torch._dynamo.device_interface import get_interface_for_device
        iface = get_interface_for_device("neuron")
        print(json.dumps({"listed": listed, "fn": getattr(fn, "__module__", "?"),
                          "iface": iface.__name__, "count": iface.device_count()}))
    """))
    info = json.loads(out.strip().splitlines()[-1])
    assert info["listed"], "neuron is not in torch._dynamo.list_backends()"
    assert info["fn"].startswith("torchneuron.compiler"), info
    assert info["count"] >= 1, info


def test_backend_resolves_by_name_and_device_interface():
    from torch._dynamo.backends.registry import lookup_backend
    from torch._dynamo.device_interface import get_interface_for_device

    import torchneuron.compiler

    assert "neuron" in torch._dynamo.list_backends()
    fn = lookup_backend("neuron")
    assert callable(fn)
    assert fn.__module__.startswith("torchneuron.compiler")
    iface = get_interface_for_device("neuron")
    assert iface.device_count() == torch.neuron.device_count()
    assert iface.is_available()
    assert iface.current_device() == torch.neuron.current_device()
    # The package's own name for the backend function works too.
    x = rand(8, 8)
    out = torch.compile(lambda a: a * 2 + 1, backend=torchneuron.compiler.neuron_backend)(x)
    assert_equal_outputs(out, x * 2 + 1)


# ---- pointwise chains -----------------------------------------------------------


def chain_f32(x, y):
    a = x * 1.5 + y
    b = a * x - y / 3.0
    c = torch.relu(b) + torch.abs(a).sqrt()
    return torch.where(c > 1.0, c, -c) * 0.25 + torch.exp(-torch.abs(x))


def test_float32_chain_bitwise_and_metrics():
    x, y = rand(64, 96, seed=1), rand(64, 96, seed=2)
    want = chain_f32(x, y)
    fn = compiled(chain_f32)
    got = fn(x, y)
    assert_equal_outputs(got, want, "float32 chain")
    assert torch.equal(got, want)
    c = counters()
    assert c["compile.graphs"] >= 1, c
    assert c["compile.graphs.inference"] >= 1, c
    assert c["compile.launches"] >= 1, c
    assert c["compile.eager_nodes"] == 0, c
    assert c["compile.fused_kernels"] > 0, c
    r = rows()
    assert r and r[-1]["kind"] == "inference", r
    assert r[-1]["eager_nodes"] == 0 and r[-1]["eager_ops"] == [], r
    assert r[-1]["fused_groups"] > 0, r
    assert r[-1]["segments"] >= 1 and r[-1]["nodes"] >= 8, r
    assert r[-1]["source"] == "compiled", r
    # A second call launches again and compiles nothing.
    launches = counter("compile.launches")
    assert torch.equal(fn(x, y), want)
    assert counter("compile.launches") > launches
    assert counter("compile.graphs") == c["compile.graphs"]


def chain_sigmoid(x, y):
    """benchmarks/compile.py's chain, plus a broadcast row and a transposed input."""
    z = x * 1.5
    z = z + 0.25
    z = torch.relu(z)
    z = z * z
    z = z - 0.5
    z = torch.sigmoid(z) + torch.tanh(y)
    z = z * 3
    return z.clamp(0, 2) * torch.exp(-x.abs()) - torch.nn.functional.gelu(y)


def test_float32_chain_runs_the_register_loop_bitwise():
    # Rows of 300 (more than one 256-element block); NaN, inf and -0 among the values.
    x = rand(37, 300, seed=3)
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0], device=x.device)
    y = rand(300, 37, seed=4).t()  # transposed: gathered element by element
    want = chain_sigmoid(x, y)
    before = counter("fuse.register_loops")
    got = compiled(chain_sigmoid)(x, y)
    assert torch.equal(got.cpu().view(torch.int32), want.cpu().view(torch.int32))
    assert counter("compile.fused_kernels") > 0 and counter("compile.eager_nodes") == 0
    assert counter("fuse.register_loops") > before


def test_bfloat16_chain():
    x, y = rand(32, 80, dtype=torch.bfloat16, seed=3), rand(32, 80, dtype=torch.bfloat16, seed=4)

    def f(x, y):
        a = x * 1.5 + y
        b = torch.sigmoid(a) * y - x
        return F.gelu(b) * 0.5 + x, (a > b).to(torch.bfloat16) - y.abs()

    want = f(x, y)
    got = compiled(f)(x, y)
    assert [t.dtype for t in got] == [torch.bfloat16, torch.bfloat16]
    assert_equal_outputs(got, want, "bfloat16 chain")
    assert counter("compile.eager_nodes") == 0, rows()


def test_int64_and_bool_results():
    a, b = rand(40, 50, dtype=torch.int64, seed=5), rand(40, 50, dtype=torch.int64, seed=6)
    x = rand(40, 50, seed=7)

    def f(a, b, x):
        i = torch.div(a * 3 + b, 2, rounding_mode="floor") - torch.maximum(a, b)
        j = (i & 0xF) | (b ^ 3)
        mask = (x > 0.5) & (a < b) | torch.isnan(x)
        return i, j.abs(), mask, ~mask, (a == b).logical_or(x < -1)

    want = f(a, b, x)
    got = compiled(f)(a, b, x)
    assert [t.dtype for t in got] == [torch.int64, torch.int64, torch.bool, torch.bool, torch.bool]
    assert_equal_outputs(got, want, "int64/bool")
    assert counter("compile.eager_nodes") == 0, rows()
    assert rows()[-1]["fused_groups"] > 0, rows()


def test_broadcasting():
    x, y, bias = rand(4, 1, 24, seed=8), rand(3, 24, seed=9), rand(24, seed=10)

    def f(x, y, bias):
        return (x + y * bias).tanh() - bias / (1 + y.abs())

    want = f(x, y, bias)
    got = compiled(f)(x, y, bias)
    assert got.shape == (4, 3, 24)
    assert_equal_outputs(got, want, "broadcast")
    assert counter("compile.eager_nodes") == 0, rows()


def test_noncontiguous_inputs():
    base, other = rand(48, 40, seed=11), rand(40, 96, seed=12)
    xt = base.t()                # (40, 48), strides (1, 40)
    ys = other[:, ::2]           # (40, 48), strides (96, 2)
    zs = rand(2, 40, 48, seed=13)[1]   # storage offset 1920

    def f(x, y, z):
        return (x * y + z).sin() * 2 - x

    for args in ((xt, ys, zs), (ys, xt, zs)):
        want = f(*args)
        got = compiled(f)(*args)
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        assert_equal_outputs(got, want, "non-contiguous")
    assert counter("compile.eager_nodes") == 0, rows()


def test_scalars():
    x = rand(16, 32, seed=14)
    s = torch.tensor(0.75, device=DEV)  # a 0-d device tensor

    def f(x, s, alpha):
        return (x * s + alpha) * 3 - 1.25 + x.clamp(-1.0, 1.0) * alpha

    fn = compiled(f)
    for alpha in (0.5, 2.0, -1.5):
        assert_equal_outputs(fn(x, s, alpha), f(x, s, alpha), f"scalars alpha={alpha}")
    assert counter("compile.graphs") >= 1


def test_varying_python_float_stays_compiled():
    x = rand(16, 32, seed=14)

    def f(x, alpha):
        return (x + alpha) * 3 - 1.25 + x.clamp(-1.0, 1.0) * alpha

    fn = compiled(f)
    for alpha in (0.5, 2.0, -1.5):
        assert_equal_outputs(fn(x, alpha), f(x, alpha), f"alpha={alpha}")
    assert [r["eager_nodes"] for r in rows()] == [0] * len(rows()), rows()


def test_tensor_constant_in_graph():
    """A tensor made inside the function is a constant of the graph (an FX
    get_attr node); two functions that differ only in it give their own
    results (the plan cache must not mix them up)."""
    x = rand(4, 2, seed=52)

    def f1(a):
        return a * 2 + torch.tensor([1.0, 2.0], device=DEV)

    def f2(a):
        return a * 2 + torch.tensor([5.0, 7.0], device=DEV)

    assert_equal_outputs(compiled(f1)(x), f1(x), "f1")
    torch._dynamo.reset()
    assert_equal_outputs(compiled(f2)(x), f2(x), "f2")


# ---- ops without a lowering -------------------------------------------------------


def test_op_without_lowering_runs_eagerly_and_warns_once(monkeypatch):
    from torchneuron.compiler import backend

    monkeypatch.setattr(backend, "_warned_nodes", set())
    x = rand(16, 64, seed=15)

    def f(x):
        y = x * 2 + 1
        s, idx = torch.sort(y, dim=-1)
        return (s * 0.5).exp() + idx.float(), y.relu()

    want = f(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = compiled(f)
        for _ in range(3):
            got = fn(x)
            assert_equal_outputs(got, want, "with eager sort")
        # Another function with the same op: already warned about.
        torch._dynamo.reset()
        got2 = compiled(lambda x: torch.sort(x * 3, dim=0)[0] - 1)(x)
    assert_equal_outputs(got2, torch.sort(x * 3, dim=0)[0] - 1)
    eager_warnings = [str(w.message) for w in caught if "eager path" in str(w.message)]
    assert len(eager_warnings) == 1, eager_warnings
    assert "sort" in eager_warnings[0], eager_warnings
    r = rows()
    assert r[0]["eager_nodes"] > 0, r
    assert any("sort" in op for op in r[0]["eager_ops"]), r
    assert r[0]["segments"] >= 2, r  # pointwise work before and after the sort
    assert counter("compile.eager_nodes") >= 3 * r[0]["eager_nodes"]


def test_complex_nodes_run_eagerly_between_compiled_segments():
    # Complex tensors live on the device but the graph compiler has no
    # complex kernels: those nodes run eagerly, the real work around them
    # stays compiled, and nothing fails to compile.
    x = rand(4, 8, seed=16)

    def f(x):
        z = (x * 2).to(torch.complex64)
        return torch.view_as_real(z * z).sum(-1) + x.exp()

    want = f(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compiled(f)(x)
    torch.testing.assert_close(got.cpu(), want.cpu())
    r = rows()
    assert r[-1]["eager_nodes"] > 0, r
    assert any("_to_copy" in op or "mul" in op for op in r[-1]["eager_ops"]), r
    assert counter("compile.fused_kernels") + counter("compile.launches") > 0, counters()


# ---- graph breaks, fullgraph, mixed code, no_grad, autocast ---------------------


def test_graph_break_print(capsys):
    x = rand(8, 16, seed=16)

    def f(x):
        y = x * 2 + 1
        print("between the graphs")
        return y.sin() - x

    got = compiled(f)(x)
    assert "between the graphs" in capsys.readouterr().out
    assert_equal_outputs(got, f(x))
    assert counter("compile.graphs") >= 2, counters()


def test_graph_break_item():
    x = rand(8, 16, seed=17)

    def f(x):
        m = x.abs().max().item()
        return x / m + 1

    got = compiled(f)(x)
    assert_equal_outputs(got, f(x))
    assert counter("compile.graphs") >= 1, counters()


def test_fullgraph():
    x, y = rand(8, 16, seed=18), rand(8, 16, seed=19)
    got = compiled(chain_f32, fullgraph=True)(x, y)
    assert_equal_outputs(got, chain_f32(x, y))
    assert counter("compile.graphs") == 1, counters()

    def broken(x):
        print("break")
        return x + 1

    with pytest.raises(Exception):
        compiled(broken, fullgraph=True)(x)


def test_mixed_eager_and_compiled():
    x = rand(32, 32, seed=20)
    fn = compiled(lambda a, b: (a * b + 1).tanh())
    a = x @ x.t()                # eager
    b = fn(a, x)                 # compiled
    c = b.softmax(-1) + a.mean()  # eager on the compiled result
    d = fn(c, b)                 # compiled again, on eager results
    ea = x @ x.t()
    eb = (ea * x + 1).tanh()
    ec = eb.softmax(-1) + ea.mean()
    ed = (ec * eb + 1).tanh()
    assert_equal_outputs((b, c, d), (eb, ec, ed), "mixed")


def test_no_grad_inference():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8)).to(DEV)
    x = rand(16, 32, seed=21)
    cm = compiled(model)
    with torch.no_grad():
        got = cm(x)
        want = model(x)
    assert not got.requires_grad
    assert_close_outputs(got, want, rtol=1e-5, atol=1e-5, what="no_grad")
    c = counters()
    assert c["compile.graphs.inference"] >= 1 and c["compile.graphs.forward"] == 0, c
    assert c["compile.graphs.backward"] == 0, c


def test_autocast_inside_compiled_function():
    x, w = rand(16, 32, seed=22), rand(32, 24, seed=23)

    def f(x, w):
        with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
            y = x @ w
            z = torch.relu(y) + 1
        return y, z.float() * 2 + x.sum()

    got = compiled(f)(x, w)
    want = f(x, w)
    assert got[0].dtype == want[0].dtype == torch.bfloat16
    assert got[1].dtype == want[1].dtype
    assert_close_outputs(got, want, rtol=1e-2, atol=1e-2, what="autocast")


def _stream_fn(stream):
    def f(a):
        y = a * 2
        stream.wait_stream(torch.neuron.current_stream())  # y is made on the current stream
        with torch.neuron.stream(stream):
            z = y + 1
        torch.neuron.current_stream().wait_stream(stream)
        return z * 3
    return f


def test_stream_context_inside_compiled_function():
    x = rand(8, 16, seed=48)
    f = _stream_fn(torch.neuron.Stream())
    got = compiled(f)(x)
    torch.neuron.synchronize()
    assert_equal_outputs(got, f(x))


def test_stream_context_traced_fullgraph():
    """The stream region, current_stream() and wait_stream are traced into
    one graph, and the ordering ops lower to nothing: one launch, no eager
    node, no graph break."""
    x = rand(8, 16, seed=49)
    f = _stream_fn(torch.neuron.Stream())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs through the eager path" warning
        got = compiled(f, fullgraph=True)(x)
    torch.neuron.synchronize()
    assert_equal_outputs(got, f(x))
    c = counters()
    assert c["compile.launches"] == 1 and c["compile.eager_nodes"] == 0, c


def test_training_through_a_stream_region():
    """Forward and backward graphs with a stream region: AOTAutograd puts
    record_event / wait_event / sync_dealloc into the backward (its frees are
    timed with our roofline, torch's reads a GPU's bandwidth through Triton);
    both graphs compile to one launch each, gradients as eager."""
    side = torch.neuron.Stream()
    torch.manual_seed(0)
    lin = nn.Linear(16, 16).to(DEV)

    def f(x):
        # Without side.wait_stream(current) before the region: with it,
        # torch 2.13's partitioner rejects the joint graph ("Node add was
        # invalid, but is output"), under aot_eager too. Eagerly this reads y
        # unordered; compiled, the region runs on the calling stream in
        # program order, so the reference below is the same math unstreamed.
        y = lin(x)
        with torch.neuron.stream(side):
            z = torch.relu(y) * 2
        torch.neuron.current_stream().wait_stream(side)
        return z + y

    def reference(x):
        y = lin(x)
        return torch.relu(y) * 2 + y

    x = rand(8, 16, seed=53).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compiled(f, fullgraph=True)(x)
        got.sum().backward()
    grads = [x.grad.clone(), lin.weight.grad.clone()]
    x.grad = None
    lin.weight.grad = None
    want = reference(x)
    want.sum().backward()
    torch.neuron.synchronize()
    assert_close_outputs((got, *grads), (want, x.grad, lin.weight.grad), rtol=1e-5, atol=1e-5,
                         what="stream region training")
    c = counters()
    assert c["compile.graphs.forward"] == 1 and c["compile.graphs.backward"] == 1, c
    assert c["compile.launches"] == 2 and c["compile.eager_nodes"] == 0, c


def test_stream_region_waits_for_work_queued_on_its_stream(gates):
    """Work queued on the region's stream before the graph is done before the
    region reads its result, although the region runs inside the launch on
    the calling stream: the launch waits for that stream."""
    side = torch.neuron.Stream()
    x = rand(64, 64, seed=50)
    buf = torch.zeros(64, 64, device=DEV)
    torch.neuron.synchronize()

    def f(b):
        with torch.neuron.stream(side):
            y = b * 2 + 1
        torch.neuron.current_stream().wait_stream(side)
        return y

    cf = compiled(f, fullgraph=True)
    cf(buf)  # compiled and run once with nothing pending
    torch.neuron.synchronize()
    handle = gates.close(side)
    with torch.neuron.stream(side):
        buf.copy_(x)  # held by the gate
    got = cf(buf)
    time.sleep(0.05)
    assert not torch.neuron.current_stream().query()  # the launch waits for side
    gates.open(handle)
    torch.neuron.synchronize()
    assert_equal_outputs(got, x * 2 + 1)


def test_graph_waits_for_an_event_recorded_before_it(gates):
    """wait_event inside the graph on an event recorded outside it: the
    launch waits for the event."""
    side = torch.neuron.Stream()
    event = torch.neuron.Event()
    x = rand(64, 64, seed=52)
    buf = torch.zeros(64, 64, device=DEV)

    def f(b):
        torch.neuron.current_stream().wait_event(event)
        return b - 1

    cf = compiled(f, fullgraph=True)
    event.record(side)
    cf(buf)
    torch.neuron.synchronize()
    handle = gates.close(side)
    with torch.neuron.stream(side):
        buf.copy_(x)  # held by the gate
    event.record(side)
    got = cf(buf)
    time.sleep(0.05)
    assert not torch.neuron.current_stream().query()
    gates.open(handle)
    torch.neuron.synchronize()
    assert_equal_outputs(got, x - 1)
    assert counter("compile.eager_nodes") == 0


def test_work_after_the_graph_on_the_region_stream_sees_its_results(gates):
    """Work queued on the region's stream after the graph runs after the
    launch that computed the region (the stream waits for the calling one),
    and an event the graph records completes only after it."""
    side = torch.neuron.Stream()
    event = torch.neuron.Event()
    x = rand(64, 64, seed=51)

    def f(a):
        with torch.neuron.stream(side):
            y = a * 3
            event.record(side)
        return y

    cf = compiled(f)
    cf(x)
    torch.neuron.synchronize()
    handle = gates.close(torch.neuron.current_stream())
    y = cf(x)  # the launch is held on the calling stream
    with torch.neuron.stream(side):
        z = y + 1  # must wait for the held launch
    time.sleep(0.05)
    assert not side.query() and not event.query()
    gates.open(handle)
    torch.neuron.synchronize()
    assert_equal_outputs(z, x * 3 + 1)


# ---- training -----------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.ln = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.ln(F.gelu(self.fc1(x))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemm_epilogues_forward_and_backward(dtype):
    """Activations and residual adds after the block's GEMMs run as their
    epilogues (forward and backward), bit for bit as eager neuron: the
    epilogue reads the stored product, so no rounding differs."""
    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = torch.nn.Sequential(torch.nn.Linear(96, 384), torch.nn.GELU(), torch.nn.Linear(384, 96))

        def forward(self, x):
            return x + self.mlp(x)              # the residual add follows the second GEMM

    torch.manual_seed(0)
    torchneuron.clear_op_tracking()
    block = Residual()

    def step(model, x):
        y = model(x)
        (y.float() * y.float()).mean().backward()
        return y

    x = rand(4, 50, 96, seed=21, dtype=dtype)  # 200 rows: several blocks of the product
    eager, comp = (copy.deepcopy(block).to(DEV, dtype) for _ in range(2))
    want = step(eager, x.clone().requires_grad_())
    xc = x.clone().requires_grad_()
    got = step(compiled(comp), xc)
    torch.neuron.synchronize()
    assert torch.equal(got, want)
    for (name, p), q in zip(eager.named_parameters(), comp.parameters()):
        assert torch.equal(p.grad, q.grad), name
    c = counters()
    assert c["compile.gemm_epilogues"] >= 3, c            # gelu, residual add, gelu_backward
    assert c["compile.gemm_epilogues_on_blocks"] >= 3, c
    assert c["compile.gemm_epilogues_after"] == 0, c
    assert c["compile.eager_nodes"] == 0, c
    assert not torchneuron.get_fallback_ops()
    assert all(r["gemm_epilogues"] >= 1 for r in rows()), rows()


def test_row_regions_norms_and_softmax():
    """A residual add before layer norm, an activation after it, a scaled
    softmax, log-softmax and RMS norm run as row regions, chunk by chunk of
    rows, bit for bit as eager neuron."""
    x, r = rand(4, 300, 256, seed=31), rand(4, 300, 256, seed=32)
    w, b = rand(256, seed=33), rand(256, seed=34)

    def f(x, r, w, b):
        h = x + r
        y = F.layer_norm(h, (256,), w, b)
        z = F.gelu(y) * 2
        s = torch.softmax(x * 0.125, dim=-1)
        lsm = torch.log_softmax(z, dim=-1) - 1
        rn = F.rms_norm(h * 0.5, (256,), w) + 3
        return h, z, s, lsm, rn

    want = f(x, r, w, b)
    fn = compiled(f)
    for _ in range(2):
        got = fn(x, r, w, b)
    torch.neuron.synchronize()
    for g, e in zip(got, want):
        assert torch.equal(g, e)
    c = counters()
    assert c["compile.row_regions_chunked"] >= 2, c
    assert c["compile.eager_nodes"] == 0, c
    assert rows()[-1]["row_regions"] >= 1, rows()


def test_layer_norm_gelu_block_is_one_chunked_row_region():
    """benchmarks/compile.py's layer norm + GELU block: the norm and its
    GELU epilogue form one row region that runs chunk by chunk of rows
    (one pass of the thread pool, the GELU reading each chunk of the
    norm's rows right after they are written), never step after step;
    bitwise as eager neuron, no eager node."""
    x = rand(96, 1024, seed=41)
    w, b = 1 + 0.1 * rand(1024, seed=42), 0.1 * rand(1024, seed=43)

    def ln_gelu(x, w, b):
        return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))

    want = ln_gelu(x, w, b)
    fn = compiled(ln_gelu)
    with torch.no_grad():
        for calls in (1, 2, 3):
            got = fn(x, w, b)
            torch.neuron.synchronize()
            assert torch.equal(got.cpu().view(torch.int32), want.cpu().view(torch.int32))
            c = counters()
            assert c["compile.row_regions_chunked"] == calls, c
            assert c["compile.row_regions_alone"] == 0, c
    assert c["compile.eager_nodes"] == 0 and c["compile.launches"] == 3, c
    assert rows()[-1]["row_regions"] == 1, rows()


def test_training_mlp_compiled_vs_eager_vs_cpu():
    """Three SGD steps: compiled neuron, eager neuron and CPU agree.
    Tolerances: compiled against eager neuron rtol=atol=2e-5; against the
    CPU rtol=atol=1e-4 (different GEMM/reduction orders)."""
    torch.manual_seed(0)
    cpu = MLP()
    eager = copy.deepcopy(cpu).to(DEV)
    comp_model = copy.deepcopy(cpu).to(DEV)
    comp = compiled(comp_model)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(16, 32, generator=g), torch.randint(10, (16,), generator=g)) for _ in range(3)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, eager, comp_model)]
    for step, (x, y) in enumerate(data):
        losses = []
        for (model, device), opt in zip(((cpu, "cpu"), (eager, DEV), (comp, DEV)), opts):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            losses.append(loss.detach().cpu())
        torch.testing.assert_close(losses[2], losses[1], rtol=2e-5, atol=2e-5,
                                   msg=lambda m: f"step {step} loss compiled vs eager: {m}")
        torch.testing.assert_close(losses[2], losses[0], rtol=1e-4, atol=1e-4,
                                   msg=lambda m: f"step {step} loss compiled vs CPU: {m}")
        for (name, pc), pe, pn in zip(cpu.named_parameters(), eager.parameters(), comp_model.parameters()):
            assert pn.grad is not None, f"{name}: no gradient from the compiled model"
            torch.testing.assert_close(pn.grad.cpu(), pe.grad.cpu(), rtol=2e-5, atol=2e-5,
                                       msg=lambda m, name=name: f"step {step} grad {name} vs eager: {m}")
            torch.testing.assert_close(pn.grad.cpu(), pc.grad, rtol=1e-4, atol=1e-4,
                                       msg=lambda m, name=name: f"step {step} grad {name} vs CPU: {m}")
        for opt in opts:
            opt.step()
    for (name, pc), pn in zip(cpu.named_parameters(), comp_model.parameters()):
        torch.testing.assert_close(pn.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-4,
                                   msg=lambda m, name=name: f"weights {name} after 3 steps: {m}")
    c = counters()
    assert c["compile.graphs.forward"] >= 1 and c["compile.graphs.backward"] >= 1, c
    assert c["compile.launches"] > 0, c
    kinds = {r["kind"] for r in rows()}
    assert {"forward", "backward"} <= kinds, rows()


# ---- input mutation and returned views -----------------------------------------


def test_input_mutation():
    x0, y0 = rand(8, 12, seed=24), rand(8, 12, seed=25)

    def f(x, y):
        x.add_(1)
        y[:, 0].zero_()
        return x * y

    xe, ye = x0.clone(), y0.clone()
    want = f(xe, ye)
    xc, yc = x0.clone(), y0.clone()
    fn = compiled(f)
    got = fn(xc, yc)
    assert_equal_outputs((got, xc, yc), (want, xe, ye), "mutation")
    # Again: the second call mutates the already mutated inputs.
    want = f(xe, ye)
    got = fn(xc, yc)
    assert_equal_outputs((got, xc, yc), (want, xe, ye), "mutation, second call")


def test_batchnorm_running_stats():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(16).to(DEV).train()
    ref = copy.deepcopy(bn)
    cbn = compiled(bn)
    for seed in (26, 27):
        x = rand(32, 16, seed=seed)
        got, want = cbn(x), ref(x)
        assert_close_outputs(got, want, rtol=1e-5, atol=1e-5, what="batchnorm output")
        for name in ("running_mean", "running_var"):
            torch.testing.assert_close(getattr(bn, name).cpu(), getattr(ref, name).cpu(), rtol=1e-5,
                                       atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
        assert int(bn.num_batches_tracked) == int(ref.num_batches_tracked)
    assert int(bn.num_batches_tracked) == 2


def test_returned_views_alias_as_in_eager():
    x, y = rand(6, 10, seed=28), rand(5, 10, seed=29)

    def f(x, y):
        z = x * 2 + 1
        return x.t(), y[1:], z[2], z[:, 3:]

    want = f(x, y)
    got = compiled(f)(x, y)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.stride() == w.stride(), (k, g.shape, g.stride(), w.stride())
        assert g.storage_offset() == w.storage_offset(), (k, g.storage_offset(), w.storage_offset())
        assert_same(g, w.cpu())
    ptr = lambda t: t.untyped_storage().data_ptr()  # noqa: E731
    assert ptr(got[0]) == ptr(x), "x.t() does not alias x"
    assert ptr(got[1]) == ptr(y), "y[1:] does not alias y"
    assert ptr(got[2]) == ptr(got[3]), "the two views of one intermediate do not share storage"
    assert ptr(got[2]) not in (ptr(x), ptr(y))
    # Writing through one view shows in the other, as in eager.
    got[3][2, 0] = 123.0
    assert got[2][3].item() == 123.0
    x[0, 0] = -7.0
    assert got[0][0, 0].item() == -7.0


# ---- dynamic shapes ------------------------------------------------------------


def dyn_f(x, w):
    h = F.layer_norm(x, (x.shape[-1],))
    return F.gelu(h) * w + x.softmax(-1) - x.mean(dim=1, keepdim=True)


LENGTHS = (16, 24, 40)


def _run_lengths(fn, mark=False):
    w = rand(64, seed=30)
    graphs = []
    for k, t in enumerate(LENGTHS):
        x = rand(2, t, 64, seed=31 + k)
        if mark:
            torch._dynamo.mark_dynamic(x, 1)
        got = fn(x, w)
        assert_close_outputs(got, dyn_f(x, w), rtol=1e-5, atol=1e-5, what=f"T={t}")
        graphs.append(counter("compile.graphs"))
    return graphs


def _assert_compiled_rows():
    for r in rows():
        assert r["eager_nodes"] == 0 and r["segments"] >= 1, r


def test_dynamic_mark_dynamic():
    graphs = _run_lengths(compiled(dyn_f), mark=True)
    assert graphs == [1, 1, 1], graphs
    _assert_compiled_rows()


def test_dynamic_true():
    graphs = _run_lengths(compiled(dyn_f, dynamic=True))
    assert graphs == [1, 1, 1], graphs
    _assert_compiled_rows()


def test_dynamic_automatic():
    graphs = _run_lengths(compiled(dyn_f, dynamic=None))
    # The first size compiles static, the second one dynamic, the third reuses it.
    assert graphs[1] == graphs[2], graphs
    assert graphs[2] <= 2, graphs
    _assert_compiled_rows()


# ---- modes and options --------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes(mode):
    x, y = rand(16, 24, seed=32), rand(16, 24, seed=33)
    got = compiled(chain_f32, mode=mode)(x, y)
    assert_equal_outputs(got, chain_f32(x, y), mode)
    assert counter("compile.graphs") == 1


def test_unknown_option_and_mode():
    x = rand(4, 4)
    with pytest.raises(Exception) as info:
        compiled(lambda a: a + 1, options={"no_such_option": True})(x)
    text = inner_message(info.value)
    assert "no_such_option" in text, text
    for known in ("fallback_execution", "debug_dir", "fuse", "cache"):
        assert known in text, text
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        compiled(lambda a: a + 1, mode="fastest-please")(x)
    text = inner_message(info.value)
    assert "fastest-please" in text, text
    assert "max-autotune-no-cudagraphs" in text and "reduce-overhead" in text, text


def test_fuse_and_cache_options(fresh_compiler):
    x, y = rand(16, 24, seed=50), rand(16, 24, seed=51)
    want = chain_f32(x, y)
    assert_equal_outputs(compiled(chain_f32, options={"fuse": False})(x, y), want, "fuse=False")
    assert rows()[-1]["fused_groups"] == 0, rows()
    assert counter("compile.fused_kernels") == 0
    torch._dynamo.reset()
    assert_equal_outputs(compiled(chain_f32, options={"cache": False})(x, y), want, "cache=False")
    assert rows()[-1]["fused_groups"] > 0 and rows()[-1]["source"] == "compiled", rows()
    # fuse=False and fuse=True are different entries; cache=False wrote none.
    assert len(glob.glob(str(fresh_compiler / "*.plan"))) == 1
    torch._dynamo.reset()
    assert_equal_outputs(compiled(chain_f32, options={"cache": False})(x, y), want)
    assert counter("compile.cache_hits") == 0 and counter("compile.disk_cache_hits") == 0


def _check_debug_dir(d):
    fx = glob.glob(os.path.join(d, "*.fx.txt"))
    plans = glob.glob(os.path.join(d, "*.plan.txt"))
    assert fx and plans, os.listdir(d)
    fx_text = "".join(open(p).read() for p in fx)
    plan_text = "".join(open(p).read() for p in plans)
    assert "aten.mul" in fx_text, fx_text[:2000]
    assert "segment" in plan_text, plan_text[:2000]
    # The graph IR text and the program plan name the runtime ops.
    assert re.search(r"\bmul\b", plan_text) and re.search(r"\bsqrt\b", plan_text), plan_text[:3000]


def test_debug_dir_option(tmp_path):
    d = tmp_path / "debug"
    x, y = rand(8, 16, seed=34), rand(8, 16, seed=35)
    got = compiled(chain_f32, options={"debug_dir": str(d)})(x, y)
    assert_equal_outputs(got, chain_f32(x, y))
    _check_debug_dir(str(d))


def test_debug_dir_environment(tmp_path, monkeypatch):
    d = tmp_path / "debug-env"
    monkeypatch.setenv("TORCHNEURON_DEBUG_DIR", str(d))
    x, y = rand(8, 16, seed=36), rand(8, 16, seed=37)
    got = compiled(chain_f32)(x, y)
    assert_equal_outputs(got, chain_f32(x, y))
    _check_debug_dir(str(d))


# ---- fallback_execution and CompilationError ------------------------------------

INJECTED = "injected planner failure for the test"


@pytest.fixture
def failing_planner(monkeypatch):
    import torchneuron.compiler.plan as plan

    def fail(*args, **kwargs):
        raise RuntimeError(INJECTED)

    monkeypatch.setattr(plan, "build_plan", fail)


def test_fallback_execution(failing_planner):
    x, y = rand(8, 16, seed=38), rand(8, 16, seed=39)
    fn = compiled(chain_f32, options={"fallback_execution": True})
    with pytest.warns(UserWarning, match="fallback_execution") as record:
        got = fn(x, y)
    assert any(INJECTED in str(w.message) for w in record), [str(w.message) for w in record]
    assert_equal_outputs(got, chain_f32(x, y), "fallback")
    assert counter("compile.fallbacks") >= 1
    assert counter("compile.launches") == 0


def test_compilation_error_without_fallback(failing_planner):
    from torchneuron.compiler import CompilationError

    assert issubclass(CompilationError, RuntimeError)
    x, y = rand(8, 16, seed=40), rand(8, 16, seed=41)
    with pytest.raises(Exception) as info:
        compiled(chain_f32)(x, y)
    err = compile_error(info.value)
    assert err is not None, f"no CompilationError in: {inner_message(info.value)}"
    msg = str(err)
    assert re.search(r"graph (inference|forward)_\d+", msg), msg
    assert INJECTED in msg, msg
    assert counter("compile.fallbacks") == 0


# ---- caches ----------------------------------------------------------------------


def cache_f(x, y):
    return ((x * 1.5 + y).sin() * x - y).relu() + 0.5


def test_memory_cache_hit(fresh_compiler):
    x, y = rand(16, 32, seed=42), rand(16, 32, seed=43)
    want = cache_f(x, y)
    assert_equal_outputs(compiled(cache_f)(x, y), want)
    assert counter("compile.cache_hits") == 0
    torch._dynamo.reset()
    assert_equal_outputs(compiled(cache_f)(x, y), want)
    assert counter("compile.cache_hits") >= 1, counters()
    assert rows()[-1]["source"] == "memory", rows()
    assert glob.glob(str(fresh_compiler / "*.plan")), "no disk entry written"


def test_cache_dir_mode(fresh_compiler):
    assert not fresh_compiler.exists()
    x, y = rand(4, 8), rand(4, 8, seed=1)
    compiled(cache_f)(x, y)
    assert fresh_compiler.is_dir()
    mode = stat.S_IMODE(os.stat(fresh_compiler).st_mode)
    assert mode == 0o700, oct(mode)
    for p in glob.glob(str(fresh_compiler / "*")):
        assert not os.path.basename(p).startswith(".tmp-"), f"temporary file left: {p}"


CHILD = """
import hashlib, json, warnings
import torch
import torchneuron
from torchneuron import metrics

def cache_f(x, y):
    return ((x * 1.5 + y).sin() * x - y).relu() + 0.5

g = torch.Generator().manual_seed(0)
x = torch.randn(16, 32, generator=g).to("neuron")
y = torch.randn(16, 32, generator=g).to("neuron")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = torch.compile(cache_f, backend="neuron")(x, y).cpu()
want = cache_f(x, y).cpu()
print(json.dumps({
    "digest": hashlib.sha256(out.numpy().tobytes()).hexdigest(),
    "equal": bool(torch.equal(out, want)),
    "counters": {n: metrics.get_counter_value(n) for n in metrics.get_counter_names()},
    "warnings": [str(w.message) for w in caught if "torchneuron" in str(w.message)],
}))
"""


def child_result(result):
    return json.loads(check_output(result).strip().splitlines()[-1])


def test_disk_cache_across_processes(fresh_compiler):
    env = {"TORCHNEURON_CACHE_DIR": str(fresh_compiler)}
    first = child_result(run_python(CHILD, env))
    second = child_result(run_python(CHILD, env))
    assert first["equal"] and second["equal"]
    assert first["counters"]["compile.disk_cache_hits"] == 0, first
    assert second["counters"]["compile.disk_cache_hits"] > 0, second
    assert second["digest"] == first["digest"]
    assert not second["warnings"], second["warnings"]
    assert glob.glob(str(fresh_compiler / "*.plan"))


def _frame(payload):
    from torchneuron.compiler.cache import MAGIC
    return MAGIC + hashlib.sha256(payload).digest() + payload


def _corruptions(data):
    """(what, bytes) of damaged versions of a good entry."""
    from torchneuron.compiler.cache import MAGIC
    payload = data[40:]
    plan = json.loads(payload.decode())
    out = []
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    out.append(("a flipped payload byte", bytes(flipped)))
    flipped = bytearray(data)
    flipped[12] ^= 0x01
    out.append(("a flipped digest byte", bytes(flipped)))
    out.append(("truncated to half", data[: len(data) // 2]))
    out.append(("truncated to the header", data[:20]))
    out.append(("empty", b""))
    out.append(("foreign (random bytes)", os.urandom(len(data))))
    out.append(("foreign with our magic", MAGIC + os.urandom(200)))
    out.append(("valid digest, not JSON", _frame(b"\x00not json at all\xff")))
    out.append(("valid digest, JSON but not a plan", _frame(b"[1, 2, 3]")))
    other = dict(plan, version=plan.get("version", 1) + 1000)
    out.append(("valid digest, another plan version", _frame(json.dumps(other).encode())))
    # A damaged graph IR under a valid digest: the C loader must reject it.
    bad = copy.deepcopy(plan)
    for s in bad["steps"]:
        if s.get("kind") == "segment" and s.get("ir"):
            ir = bytearray(base64.b64decode(s["ir"]))
            ir[len(ir) // 2] ^= 0x10
            s["ir"] = base64.b64encode(bytes(ir)).decode()
            break
    out.append(("valid digest, damaged graph IR", _frame(json.dumps(bad).encode())))
    bad = copy.deepcopy(plan)
    for s in bad["steps"]:
        if s.get("kind") == "segment" and s.get("ir"):
            s["ir"] = base64.b64encode(base64.b64decode(s["ir"])[:-9]).decode()
            break
    out.append(("valid digest, truncated graph IR", _frame(json.dumps(bad).encode())))
    bad = copy.deepcopy(plan)
    bad["placeholders"] = ["nobody"] + list(bad.get("placeholders", []))
    out.append(("valid digest, a plan for another graph", _frame(json.dumps(bad).encode())))
    bad = copy.deepcopy(plan)
    for s in bad["steps"]:
        for e in s.get("exports", []):
            for lay in e.get("layouts", []):
                if lay:
                    lay["slot"] = 99
    out.append(("valid digest, exports from unknown buffers", _frame(json.dumps(bad).encode())))
    return out


def test_disk_cache_damaged_entries(fresh_compiler):
    from torchneuron.compiler import cache

    x, y = rand(16, 32, seed=44), rand(16, 32, seed=45)
    want = cache_f(x, y)

    def run():
        torch._dynamo.reset()
        cache.clear_memory()
        return compiled(cache_f)(x, y)

    assert_equal_outputs(run(), want)
    entries = glob.glob(str(fresh_compiler / "*.plan"))
    assert len(entries) == 1, entries
    path = entries[0]
    key = os.path.basename(path)[: -len(".plan")]
    with open(path, "rb") as f:
        good = f.read()
    # A clean reload is a disk hit.
    metrics.clear_all()
    assert_equal_outputs(run(), want)
    assert counter("compile.disk_cache_hits") == 1, counters()
    failures = []
    for what, damaged in _corruptions(good):
        with open(path, "wb") as f:
            f.write(damaged)
        metrics.clear_all()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = run()
        messages = [str(w.message) for w in caught if "torchneuron" in str(w.message)]
        if not any("recompiling" in m for m in messages):
            failures.append(f"{what}: no warning ({messages})")
        assert_equal_outputs(got, want, what)
        c = counters()
        if c["compile.disk_cache_hits"] != 0 or c["compile.graphs"] != 1:
            failures.append(f"{what}: counted as disk_cache_hits={c['compile.disk_cache_hits']}, "
                            f"graphs={c['compile.graphs']}")
        if rows()[-1]["source"] != "compiled":
            failures.append(f"{what}: row source {rows()[-1]['source']!r}, expected 'compiled'")
        # The recompilation wrote a good entry again.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if cache._load_disk(key) is None:
                failures.append(f"{what}: the entry was not rewritten")
        if caught:
            failures.append(f"{what}: reload warned {[str(w.message) for w in caught]}")
    assert not failures, "\n".join(failures)


CONCURRENT_WRITER = """
import json, time
import torch
import torchneuron
from torchneuron.compiler import cache

def cache_f(x, y):
    return ((x * 1.5 + y).sin() * x - y).relu() + 0.5

g = torch.Generator().manual_seed(0)
x = torch.randn(16, 32, generator=g).to("neuron")
y = torch.randn(16, 32, generator=g).to("neuron")
torch.compile(cache_f, backend="neuron")(x, y)
(key, (plan, programs)), = list(cache._memory.items())
# Rewrite the entry over and over for a while: the other process does the same.
deadline = time.monotonic() + 1.5
n = 0
while time.monotonic() < deadline:
    cache._store_disk(key, plan)
    n += 1
print(json.dumps({"key": key, "writes": n}))
"""


def test_disk_cache_concurrent_writers(fresh_compiler):
    from torchneuron.compiler import cache

    env = {"TORCHNEURON_CACHE_DIR": str(fresh_compiler)}
    results = run_python_many({k: (CONCURRENT_WRITER, env) for k in ("a", "b")})
    a, b = child_result(results["a"]), child_result(results["b"])
    assert a["key"] == b["key"], (a, b)
    assert a["writes"] > 0 and b["writes"] > 0
    files = os.listdir(fresh_compiler)
    assert files == [a["key"] + ".plan"], files  # no temporary files left
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entry = cache._load_disk(a["key"])
    assert entry is not None, [str(w.message) for w in caught]
    assert not [w for w in caught if "torchneuron" in str(w.message)]
    # And a third process uses it.
    third = child_result(run_python(CHILD, env))
    assert third["counters"]["compile.disk_cache_hits"] > 0 and third["equal"], third


def test_disk_cache_off(monkeypatch, fresh_compiler):
    monkeypatch.setenv("TORCHNEURON_DISK_CACHE", "0")
    x, y = rand(4, 8), rand(4, 8, seed=1)
    assert_equal_outputs(compiled(cache_f)(x, y), cache_f(x, y))
    assert not glob.glob(str(fresh_compiler / "*.plan"))


# ---- the graph IR loader from Python ---------------------------------------------


def test_loader_rejects_garbage_and_truncations(monkeypatch):
    import torchneuron.compiler.runner as runner

    handle, message = _C._graph_program_compile(b"garbage", True)
    assert handle == 0 and isinstance(message, str) and message, (handle, message)
    handle, message = _C._graph_program_compile(b"", False)
    assert handle == 0 and message
    with pytest.raises(RuntimeError):
        _C._graph_text(b"garbage")

    captured = []
    real = runner.compile_ir

    def capture(ir, fuse, op_nodes=None):
        captured.append(ir)
        return real(ir, fuse, op_nodes)

    monkeypatch.setattr(runner, "compile_ir", capture)
    x, y = rand(8, 16, seed=46), rand(8, 16, seed=47)
    compiled(chain_f32)(x, y)
    assert captured, "no graph IR was compiled"
    ir = max(captured, key=len)
    handle, message = _C._graph_program_compile(ir, True)
    assert handle != 0, message
    _C._graph_program_destroy(handle)
    assert "mul" in _C._graph_text(ir)
    for n in range(len(ir)):
        handle, message = _C._graph_program_compile(ir[:n], True)
        if handle:
            _C._graph_program_destroy(handle)
        assert handle == 0 and message, f"a truncation to {n} of {len(ir)} bytes was accepted"
    for k in range(len(ir)):
        damaged = bytearray(ir)
        damaged[k] ^= 0xFF
        handle, message = _C._graph_program_compile(bytes(damaged), True)
        if handle:
            _C._graph_program_destroy(handle)
        assert handle == 0 and message, f"byte {k} of {len(ir)} flipped was accepted"
