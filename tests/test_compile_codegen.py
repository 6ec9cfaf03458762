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


def run_compiled(fn, *args, codegen=True, monkeypatch=None):
    """fn compiled afresh (Dynamo and the plan caches reset), called once."""
    from torchneuron.compiler import cache

    torch._dynamo.reset()
    cache.clear_memory()
    if not codegen:
        monkeypatch.setenv("TORCHNEURON_CODEGEN", "0")
    try:
        with torch.no_grad():
            out = torch.compile(fn, backend="neuron")(*args)
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
    got = run_compiled(update_in_place, dx, y.to(DEV))
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
def f(x, w):
    y = x * 1.5 + w
    y = torch.sigmoid(y) * y
    return torch.tanh(y - 0.5) + F.gelu(y)
g = torch.Generator().manual_seed(0)
x = torch.randn(1024, 1000, generator=g).to("neuron")
w = torch.randn(1000, generator=g).to("neuron")
with torch.no_grad():
    out = torch.compile(f, backend="neuron")(x, w).cpu()
    eager = f(x, w).cpu()
assert torch.equal(out.view(torch.int32), eager.view(torch.int32)), "differs from eager"
print("digest", hashlib.sha256(out.numpy().tobytes()).hexdigest())
for name in ("kernels", "cache_hits", "runs", "fallbacks"):
    print(name, metrics.get_counter_value("fuse.codegen." + name))
"""


def child(env):
    out = check_output(run_python(CHILD, env=env, timeout=240))
    values = dict(line.split(" ", 1) for line in out.strip().splitlines())
    return {k: (v if k == "digest" else int(v)) for k, v in values.items()}


def test_disk_cache_across_processes_and_damaged_entries(fresh):
    env = {"TORCHNEURON_CACHE_DIR": str(fresh)}
    first = child(env)
    assert first["kernels"] >= 1 and first["runs"] >= 1 and first["fallbacks"] == 0
    entries = glob.glob(str(fresh / "kernels" / "*.so"))
    assert len(entries) == first["kernels"]
    assert (os.stat(fresh / "kernels").st_mode & 0o777) == 0o700
    second = child(env)
    assert second["kernels"] == 0 and second["cache_hits"] == first["kernels"]
    assert second["digest"] == first["digest"]
    for damage in ("garble", "truncate", "empty"):
        for path in entries:
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                if damage == "garble":
                    f.seek(size // 3)
                    f.write(os.urandom(256))
                elif damage == "truncate":
                    f.truncate(size // 2)
                else:
                    f.truncate(0)
        again = child(env)
        assert again["kernels"] == first["kernels"] and again["cache_hits"] == 0, damage
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
