"""Generated code per fused group (runtime/src/fuse/codegen.c, jit.c) under
torch.compile(backend="neuron").

- Every op of the register-level tape's vocabulary, float32, compiled in a
  chain: the generated code's results bitwise equal to the tape's (the same
  graph compiled with TORCHNEURON_CODEGEN=0), to eager neuron (the ops one
  by one) and close to PyTorch on the CPU; the counters show the kernel was
  generated and ran.
- Layouts: contiguous, strided, transposed, broadcast rows and columns,
  an in-place update of an argument, zero-size; 1 and 3 kernel threads
  (separate processes) give the same bits.
- The disk cache: a second process loads the kernels instead of compiling;
  garbled and truncated entries are recompiled without a crash.
- Failures fall back to the tape, counted: TORCHNEURON_CC=/bin/false, a
  compiler that does not exist, a cache directory another user owns (or a
  read-only one when not root).
- The background compile (codegen_async.c): a group runs its tape until
  its kernel is ready, then the kernel, with the same bits; a process that
  exits while a compile runs stops the compiler and leaves no files; a
  forked child finishes the parent's queue; TORCHNEURON_CODEGEN=sync
  compiles with the graph.

Kernels are compiled in the background, so the tests that assert runs of
generated code call the compiled function once, wait for the kernels
(torchneuron.compiler.wait_for_kernels) and call it again.

Every test runs with TORCHNEURON_CACHE_DIR in a fresh temporary directory
(nothing is written under ~/.cache).
"""

import glob
import os

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, check_output, run_python
from torchneuron import metrics

pytestmark = pytest.mark.timeout(300)

DEV = "neuron"


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    from torchneuron.compiler import cache

    cache_dir = tmp_path / "tn-cache"
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(cache_dir))
    for name in ("TORCHNEURON_CC", "TORCHNEURON_CODEGEN", "TORCHNEURON_DISK_CACHE", "TORCHNEURON_DEBUG_DIR"):
        monkeypatch.delenv(name, raising=False)
    torch._dynamo.reset()
    cache.clear_memory()
    metrics.clear_all()
    yield cache_dir
    torch._dynamo.reset()
    cache.clear_memory()


def counter(name):
    value = metrics.get_counter_value(name)
    assert value is not None, name
    return value


def rand(*shape, seed=0, low=-4.0, high=4.0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low
    t = t.float()
    flat = t.view(-1)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40, 95.0, -95.0])
    flat[: min(len(specials), flat.numel())] = specials[: flat.numel()]
    return t


def bits(t):
    t = t.detach().cpu().contiguous()
    # NaN payloads may differ between CPU paths; compare NaN as NaN.
    return torch.where(torch.isnan(t), torch.full_like(t, float("nan")), t).view(torch.int32)


def same_bits(a, b):
    a, b = a.detach().cpu(), b.detach().cpu()
    assert a.shape == b.shape
    nan = torch.isnan(a) & torch.isnan(b)
    assert torch.equal(a.view(torch.int32)[~nan], b.view(torch.int32)[~nan])


def run_compiled(fn, *args, codegen=True, monkeypatch=None, warm_args=None):
    """fn compiled afresh (Dynamo and the plan caches reset); with codegen,
    called once (on warm_args if given: a function that updates its
    arguments), then again on args once its kernels are ready."""
    from torchneuron.compiler import cache, wait_for_kernels

    torch._dynamo.reset()
    cache.clear_memory()
    if not codegen:
        monkeypatch.setenv("TORCHNEURON_CODEGEN", "0")
    try:
        with torch.no_grad():
            compiled = torch.compile(fn, backend="neuron")
            if codegen:
                compiled(*(args if warm_args is None else warm_args))
                torch.neuron.synchronize()
                assert wait_for_kernels(timeout=240) == 0
            out = compiled(*args)
        torch.neuron.synchronize()
    finally:
        if not codegen:
            monkeypatch.delenv("TORCHNEURON_CODEGEN")
    return out


aten = torch.ops.aten

# Each op of the tape's vocabulary, inside a chain of pointwise ops so that
# it fuses: (name, function of x, y).
UNARY = {
    "neg": lambda x: -x,
    "abs": torch.abs,
    "relu": torch.relu,
    "hardtanh": lambda x: F.hardtanh(x, -1.0, 2.5),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.03),
    "exp": torch.exp,
    "log": torch.log,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "sigmoid": torch.sigmoid,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}
BINARY = {
    "add_alpha": lambda x, y: torch.add(x, y, alpha=0.75),
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "sigmoid_backward": lambda x, y: aten.sigmoid_backward(x, torch.sigmoid(y)),
    "tanh_backward": lambda x, y: aten.tanh_backward(x, torch.tanh(y)),
    "threshold_backward": lambda x, y: aten.threshold_backward(x, y, 0.25),
    "silu_backward": lambda x, y: aten.silu_backward(x, y),
    "gelu_backward": lambda x, y: aten.gelu_backward(x, y),
}


def chain_of(op, binary):
    if binary:
        return lambda x, y: op(x * 1.5, y - 0.25) * 0.5
    return lambda x, y: op(x * 1.5 + y) * 0.5


@pytest.mark.parametrize("name", list(UNARY) + list(BINARY))
def test_every_tape_op_bitwise(name, monkeypatch):
    binary = name in BINARY
    fn = chain_of((BINARY if binary else UNARY)[name], binary)
    x, y = rand(37, 300, seed=1), rand(37, 300, seed=2)
    dx, dy = x.to(DEV), y.to(DEV)
    tape = run_compiled(fn, dx, dy, codegen=False, monkeypatch=monkeypatch)
    assert counter("fuse.codegen.runs") == 0
    made = counter("fuse.codegen.kernels") + counter("fuse.codegen.cache_hits")
    runs = counter("fuse.codegen.runs")
    got = run_compiled(fn, dx, dy)
    assert counter("fuse.codegen.kernels") + counter("fuse.codegen.cache_hits") > made
    assert counter("fuse.codegen.runs") > runs
    assert counter("fuse.codegen.fallbacks") == 0
    with torch.no_grad():
        eager = fn(dx, dy)
        cpu = fn(x, y)
    same_bits(got, tape)
    same_bits(got, eager)
    # Row 0 holds the special values, where eager neuron's own conventions
    # may differ from the CPU's (e.g. GELU of inf): the bitwise checks above
    # cover it.
    torch.testing.assert_close(got[1:].cpu(), cpu[1:], rtol=2e-5, atol=2e-5, equal_nan=True)


def benchmark_chain(x):
    """benchmarks/compile.py's 8-op chain, and a sigmoid of an input."""
    y = torch.relu(x * 1.5 + 0.25)
    y = torch.sigmoid(y * y - 0.5) * 3
    return y.clamp(0, 2), torch.sigmoid(x).clamp(0.1, 0.9) + torch.relu(x)


def test_tame_sigmoid_blocks_and_selects_bitwise(native_only):
    """Blocks whose sigmoid inputs all have |x| <= 86 run the tame twin
    (codegen.c), the others the general sigmoid; relu and clamp are emitted
    as bit-mask selects: bitwise eager either way."""
    x = rand(64, 530, seed=11)  # chain values within 86 but for the specials of row 0
    flat = x.view(-1)
    flat[3000] = 6.5  # the chain gives 99.5 in this block
    flat[9000] = 90.0  # a sigmoid of an input beyond 86 (and the chain's)
    flat[20000] = -87.0
    flat[25000] = float("nan")
    dx = x.to(DEV)
    runs = counter("fuse.codegen.runs")
    got = run_compiled(benchmark_chain, dx)
    assert counter("fuse.codegen.runs") > runs
    assert counter("fuse.codegen.fallbacks") == 0
    with torch.no_grad():
        eager = benchmark_chain(dx)
        cpu = benchmark_chain(x)
    for g, e, c in zip(got, eager, cpu):
        same_bits(g, e)  # eager neuron is the tape's bits (the fusion contract)
        torch.testing.assert_close(g.cpu(), c, rtol=2e-5, atol=2e-5, equal_nan=True)


def pointwise(x, w, c):
    y = x * 1.5 + w
    y = torch.sigmoid(y) * y
    return torch.tanh(y - c), F.gelu(y)


LAYOUTS = {
    "contiguous": lambda x: (x, x[0].clone(), x[:, :1].clone()),
    "strided": lambda x: (x[:, ::2], x[0, ::2].clone(), x[:, 1:2]),
    "transposed": lambda x: (x.t(), x[:, 0].clone(), x[0, :, None].clone()),
    "broadcast rows and columns": lambda x: (x, x[3], x[:, 5:6]),
    "zero size": lambda x: (x[:0], x[0], x[:0, :1]),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts_bitwise(layout, monkeypatch):
    base = rand(64, 530, seed=5).to(DEV)
    args = LAYOUTS[layout](base)
    tape = run_compiled(pointwise, *args, codegen=False, monkeypatch=monkeypatch)
    runs = counter("fuse.codegen.runs")
    got = run_compiled(pointwise, *args)
    if layout != "zero size":
        assert counter("fuse.codegen.runs") > runs
    with torch.no_grad():
        eager = pointwise(*args)
        cpu = pointwise(*(a.cpu() for a in args))
    for g, t, e, c in zip(got, tape, eager, cpu):
        assert g.shape == c.shape
        same_bits(g, t)
        same_bits(g, e)
        # Where the CPU's result is finite (eager neuron's conventions for
        # infinities may differ from the CPU's; the bitwise checks cover them).
        finite = torch.isfinite(c)
        torch.testing.assert_close(g.cpu()[finite], c[finite], rtol=2e-5, atol=2e-5)


def update_in_place(x, y):
    x.mul_(1.5).add_(y).sigmoid_()
    return x * 2


def test_in_place_update_of_an_argument(monkeypatch):
    x, y = rand(48, 700, seed=7), rand(700, seed=8)
    want_x = x.clone()
    with torch.no_grad():
        want_out = update_in_place(want_x, y)
    runs = counter("fuse.codegen.runs")
    dx = x.to(DEV)
    got = run_compiled(update_in_place, dx, y.to(DEV), warm_args=(x.to(DEV), y.to(DEV)))
    assert counter("fuse.codegen.runs") > runs
    torch.testing.assert_close(dx.cpu(), want_x, rtol=2e-5, atol=2e-5, equal_nan=True)
    torch.testing.assert_close(got.cpu(), want_out, rtol=2e-5, atol=2e-5, equal_nan=True)
    # against eager neuron, bitwise
    ex = x.to(DEV)
    with torch.no_grad():
        eout = update_in_place(ex, y.to(DEV))
    same_bits(dx, ex)
    same_bits(got, eout)


CHILD = """
import hashlib, torch, torchneuron
import torch.nn.functional as F
from torchneuron import metrics
from torchneuron.compiler import wait_for_kernels
def graph(act):  # one fused group, so one kernel, per activation
    def f(x, w):
        y = x * 1.5 + w
        y = act(y) * y
        return torch.tanh(y - 0.5) + F.gelu(y)
    return f
g = torch.Generator().manual_seed(0)
x = torch.randn(1024, 1000, generator=g).to("neuron")
w = torch.randn(1000, generator=g).to("neuron")
digest = hashlib.sha256()
with torch.no_grad():
    for act in (torch.sigmoid, torch.exp, torch.relu):
        f = graph(act)
        compiled = torch.compile(f, backend="neuron")
        first = compiled(x, w).cpu()  # on the tape while the kernels compile
        assert wait_for_kernels(240) == 0
        out = compiled(x, w).cpu()
        eager = f(x, w).cpu()
        assert torch.equal(first.view(torch.int32), out.view(torch.int32)), "tape and kernel differ"
        assert torch.equal(out.view(torch.int32), eager.view(torch.int32)), "differs from eager"
        digest.update(out.numpy().tobytes())
print("digest", digest.hexdigest())
for name in ("kernels", "cache_hits", "runs", "fallbacks", "background"):
    print(name, metrics.get_counter_value("fuse.codegen." + name))
"""


def child(env):
    out = check_output(run_python(CHILD, env=env, timeout=240))
    values = dict(line.split(" ", 1) for line in out.strip().splitlines())
    return {k: (v if k == "digest" else int(v)) for k, v in values.items()}


def test_disk_cache_across_processes_and_damaged_entries(fresh):
    env = {"TORCHNEURON_CACHE_DIR": str(fresh)}
    first = child(env)
    assert first["kernels"] >= 3 and first["runs"] >= 3 and first["fallbacks"] == 0
    entries = glob.glob(str(fresh / "kernels" / "*.so"))
    assert len(entries) == first["kernels"]
    assert (os.stat(fresh / "kernels").st_mode & 0o777) == 0o700
    assert first["background"] == first["kernels"]
    second = child(env)
    # Cache hits load while the graph compiles: nothing goes to the worker.
    assert second["kernels"] == 0 and second["cache_hits"] == first["kernels"] and second["background"] == 0
    assert second["digest"] == first["digest"]
    # Each entry damaged a different way (one process sees all three kinds;
    # more processes only if there were fewer entries than kinds).
    damages = ["garble", "truncate", "empty"]
    while damages:
        for path, damage in zip(sorted(entries), damages):
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                if damage == "garble":
                    f.seek(size // 3)
                    f.write(os.urandom(256))
                elif damage == "truncate":
                    f.truncate(size // 2)
                else:
                    f.truncate(0)
        tried, damages = damages[: len(entries)], damages[len(entries):]
        again = child(env)
        # every damaged entry is recompiled, every intact one still hits
        assert again["kernels"] == len(tried), tried
        assert again["cache_hits"] == first["kernels"] - len(tried), tried
        assert again["fallbacks"] == 0 and again["digest"] == first["digest"]


def test_thread_counts_agree(fresh):
    digests = set()
    for threads in ("1", "3"):
        r = child({"TORCHNEURON_CACHE_DIR": str(fresh), "TORCHNEURON_NUM_THREADS": threads})
        assert r["runs"] >= 1
        digests.add(r["digest"])
    assert len(digests) == 1


def test_disk_cache_off_leaves_nothing(fresh):
    r = child({"TORCHNEURON_CACHE_DIR": str(fresh), "TORCHNEURON_DISK_CACHE": "0"})
    assert r["kernels"] >= 1 and r["runs"] >= 1
    assert not glob.glob(str(fresh / "kernels" / "*"))


def fallback_case(seed):
    """A chain whose tape no earlier test made (its own immediates)."""
    k = 1.0 + seed / 64

    def f(x, y):
        return torch.sigmoid(x * k + y) - k

    return f


@pytest.mark.parametrize("cc", ["/bin/false", "/nonexistent/cc"])
def test_no_working_compiler_falls_back_to_the_tape(cc, monkeypatch, fresh):
    fn = fallback_case(3 if cc == "/bin/false" else 4)
    x, y = rand(40, 300, seed=9).to(DEV), rand(40, 300, seed=10).to(DEV)
    monkeypatch.setenv("TORCHNEURON_CC", cc)
    got = run_compiled(fn, x, y)
    assert counter("fuse.codegen.fallbacks") >= 1
    assert counter("fuse.codegen.runs") == 0 and counter("fuse.codegen.kernels") == 0
    assert counter("fuse.register_loops") >= 1  # the tape ran
    # /bin/false fails in the background worker; a missing compiler at once.
    assert counter("fuse.codegen.background") == (1 if cc == "/bin/false" else 0)
    assert counter("fuse.codegen.pending") == 0
    with torch.no_grad():
        same_bits(got, fn(x, y))
    assert not glob.glob(str(fresh / "kernels" / "*.so"))


def test_unusable_cache_directory_falls_back(monkeypatch, fresh):
    kernels = fresh / "kernels"
    kernels.mkdir(parents=True, mode=0o700)
    if os.geteuid() == 0:
        os.chown(kernels, 65534, 65534)  # root writes anywhere: another user's directory instead
    else:
        kernels.chmod(0o500)
    try:
        fn = fallback_case(5)
        x, y = rand(40, 300, seed=11).to(DEV), rand(40, 300, seed=12).to(DEV)
        got = run_compiled(fn, x, y)
        assert counter("fuse.codegen.fallbacks") >= 1 and counter("fuse.codegen.runs") == 0
        with torch.no_grad():
            same_bits(got, fn(x, y))
    finally:
        if os.geteuid() == 0:
            os.chown(kernels, 0, 0)
        kernels.chmod(0o700)


# ---- the background compile --------------------------------------------------

def compiler_script(path, body):
    """An executable shell script standing for the C compiler (its own path,
    so its kernels are keyed apart from every other test's)."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_tape_until_the_kernel_is_ready_then_the_kernel(monkeypatch, fresh, tmp_path):
    from torchneuron.compiler import cache, wait_for_kernels

    gate = tmp_path / "gate"
    cc = compiler_script(tmp_path / "gated-cc", f'while [ ! -e "{gate}" ]; do sleep 0.05; done\nexec cc "$@"\n')
    monkeypatch.setenv("TORCHNEURON_CC", cc)
    fn = fallback_case(6)
    x, y = rand(33, 410, seed=13).to(DEV), rand(33, 410, seed=14).to(DEV)
    torch._dynamo.reset()
    cache.clear_memory()
    compiled = torch.compile(fn, backend="neuron")
    with torch.no_grad():
        before = compiled(x, y)
        torch.neuron.synchronize()
        # The compiler waits for the gate: the group ran its tape.
        assert counter("fuse.codegen.pending") == 1 and counter("fuse.codegen.background") == 1
        assert counter("fuse.codegen.runs") == 0 and counter("fuse.register_loops") >= 1
        assert wait_for_kernels(timeout=0.05) == 1
        gate.touch()
        assert wait_for_kernels(timeout=240) == 0
        assert counter("fuse.codegen.kernels") == 1 and counter("fuse.codegen.fallbacks") == 0
        after = compiled(x, y)
        torch.neuron.synchronize()
        eager = fn(x, y)
    assert counter("fuse.codegen.runs") >= 1
    same_bits(before, after)
    same_bits(after, eager)


def test_sync_mode_compiles_with_the_graph(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_CODEGEN", "sync")
    from torchneuron.compiler import cache

    torch._dynamo.reset()
    cache.clear_memory()
    fn = fallback_case(7)
    x, y = rand(20, 300, seed=15).to(DEV), rand(20, 300, seed=16).to(DEV)
    with torch.no_grad():
        got = torch.compile(fn, backend="neuron")(x, y)
        torch.neuron.synchronize()
        eager = fn(x, y)
    assert counter("fuse.codegen.runs") >= 1 and counter("fuse.codegen.background") == 0
    assert counter("fuse.codegen.pending") == 0
    same_bits(got, eager)


SLOW_CHILD = """
import os, torch, torchneuron
from torchneuron import metrics
def f(x, y):
    return torch.sigmoid(x * 1.25 + y) * 0.5 - y
x = torch.randn(64, 300).to("neuron")
y = torch.randn(64, 300).to("neuron")
with torch.no_grad():
    out = torch.compile(f, backend="neuron")(x, y)
    torch.neuron.synchronize()
    eager = f(x, y)
assert torch.equal(out.cpu().view(torch.int32), eager.cpu().view(torch.int32))
for _ in range(400):  # until the compiler runs
    if os.path.exists(os.environ["PID_FILE"]):
        break
    import time; time.sleep(0.05)
print("pending", metrics.get_counter_value("fuse.codegen.pending"))
print("runs", metrics.get_counter_value("fuse.codegen.runs"))
"""


def test_exit_while_compiling_stops_the_compiler(fresh, tmp_path):
    pid_file = tmp_path / "compiler.pid"
    # A compiler that never finishes (its child, sleep, is in its process group).
    cc = compiler_script(tmp_path / "slow-cc", f'echo $$ > "{pid_file}"\nsleep 600\n')
    env = {"TORCHNEURON_CACHE_DIR": str(fresh), "TORCHNEURON_CC": cc, "PID_FILE": str(pid_file)}
    result = run_python(SLOW_CHILD, env=env, timeout=120)  # a hang fails by the timeout
    out = check_output(result)
    assert "pending 1" in out and "runs 0" in out
    assert "unavailable" not in result.stderr  # stopping it is not a failure to report
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # Nothing left in the cache directory: no source, object or log.
    assert os.listdir(fresh / "kernels") == []


FORK_CHILD = """
import os, sys, torch, torchneuron
from torchneuron import metrics
from torchneuron.compiler import wait_for_kernels
def f(x, y):
    return torch.sigmoid(x * 1.75 + y) * 0.25 - y
x = torch.randn(16, 300).to("neuron")
y = torch.randn(16, 300).to("neuron")
with torch.no_grad():
    torch.compile(f, backend="neuron")(x, y)
    torch.neuron.synchronize()
assert metrics.get_counter_value("fuse.codegen.pending") == 1
pid = os.fork()
if pid == 0:
    # The parent's worker is not here: the child's own finishes the queue.
    left = wait_for_kernels(240)
    ok = left == 0 and metrics.get_counter_value("fuse.codegen.kernels") == 1
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
print("parent", wait_for_kernels(240), metrics.get_counter_value("fuse.codegen.kernels"))
"""


def test_fork_while_compiling(fresh, tmp_path):
    cc = compiler_script(tmp_path / "slowish-cc", 'sleep 1\nexec cc "$@"\n')
    env = {"TORCHNEURON_CACHE_DIR": str(fresh), "TORCHNEURON_CC": cc}
    out = check_output(run_python(FORK_CHILD, env=env, timeout=240))
    assert "child 0" in out and "parent 0 1" in out
