"""Adaptive eager execution: the stream worker fuses the pointwise ops queued
behind the one it takes into groups run tile by tile (runtime/src/fuse/).

Fusion only takes ops that are already queued, so every program here runs
behind a closed stream gate (conftest.Gates): the whole program is in the
ring when the gate opens. Each program runs twice, with fusion on and off,
and the results must agree bit for bit (floats compared as their bits, so
NaN payloads and signed zeros count); where the ops are exactly rounded
(add, mul, relu, where, ...) they are also checked against the CPU.

- Hazards: in-place ops and aliasing views, partially overlapping writes,
  intermediates kept or freed (and their blocks handed to later ops of the
  same queue), copies and blocking reads mid-chain, two streams ordered by
  events, the commands that end a run, broadcasting, type promotion,
  16-bit, integer and bool runs, zero-size and 0-d tensors, integer
  division by zero inside a chain, 1, 2 and 3 kernel threads.
- Random programs: DAGs of pointwise ops over random dtypes, layouts and
  broadcasts, with in-place ops and deletions, compared with fusion off;
  the fused_ops counter shows that fusion kept happening.
- Controls: set_adaptive_eager, TORCHNEURON_ADAPTIVE_EAGER,
  NEURON_LAUNCH_BLOCKING and the torchneuron.metrics API.
"""

import hashlib
import json
import math
import os
import random
import re
import struct

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import torchneuron
from conftest import Gates, assert_same, check_output, run_python_many
from torchneuron import metrics

# A hang (a worker waiting on a group that never completes) fails fast.
pytestmark = pytest.mark.timeout(120)

GROUPS = "adaptive_eager.groups"
FUSED_OPS = "adaptive_eager.fused_ops"
ELIDED = "adaptive_eager.elided_writes"
COUNTERS = (GROUPS, FUSED_OPS, ELIDED)

# 131072 elements: well above the size under which runs are not fused.
SHAPE = (256, 512)
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def fusion_on():
    """Every test starts with fusion on and ends with the process's setting
    back; ops without a native kernel raise instead of falling back, since a
    fallback copies to the CPU and would wait forever behind a closed gate."""
    was = torchneuron.adaptive_eager_enabled()
    torchneuron.set_adaptive_eager(True)
    torchneuron.set_fallback_mode("error")
    yield
    torchneuron.set_adaptive_eager(was)


def counter(name):
    value = metrics.get_counter_value(name)
    return 0 if value is None else value


# ---- values and bitwise comparison ------------------------------------------

# Special values mixed into float inputs: NaNs of both signs, infinities,
# signed zeros and subnormals (a fused path that flushed them would show).
SPECIALS = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -3e-39, 65504.0, 1e30]


def make(shape, dtype=torch.float32, seed=0):
    """Deterministic CPU test values of shape and dtype."""
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    if dtype == torch.bool:
        return (torch.rand(n, generator=g) < 0.5).reshape(shape)
    if not dtype.is_floating_point:
        return torch.randint(-20, 21, (n,), generator=g).to(dtype).reshape(shape)
    x = 3 * torch.randn(n, generator=g, dtype=torch.float64)
    if n >= 4 * len(SPECIALS):
        picks = torch.randint(0, len(SPECIALS), (len(x[7::61]),), generator=g)
        x[7::61] = torch.tensor(SPECIALS, dtype=torch.float64)[picks]
    return x.to(dtype).reshape(shape)


BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
        torch.float64: torch.int64}


def as_bits(t):
    return t.view(BITS[t.dtype]) if t.dtype in BITS else t


def assert_bitwise(got, want, what):
    """got and want (host tensors or Python values) are the same bits."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: {type(got)} is not a tensor"
        assert (got.dtype, got.shape) == (want.dtype, want.shape), \
            f"{what}: {got.dtype}{tuple(got.shape)} != {want.dtype}{tuple(want.shape)}"
        a, b = as_bits(got), as_bits(want)
        if not torch.equal(a, b):
            differ = a != b
            first = tuple(differ.nonzero()[0].tolist())
            raise AssertionError(
                f"{what}: {int(differ.sum())} of {want.numel()} elements differ, the first at "
                f"{first}: fused {got[first].item()!r} (bits {a[first].item():#x}), unfused "
                f"{want[first].item()!r} (bits {b[first].item():#x})")
    elif isinstance(want, float):
        assert struct.pack("<d", got) == struct.pack("<d", want), f"{what}: {got!r} != {want!r}"
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


def assert_matches_cpu(got, want, what):
    try:
        if isinstance(want, torch.Tensor):
            assert_same(got, want)
        elif isinstance(want, float):
            assert got == want or (math.isnan(got) and math.isnan(want)), f"{got!r} != {want!r}"
        else:
            assert got == want, f"{got!r} != {want!r}"
    except AssertionError as error:
        raise AssertionError(f"{what} (against the CPU): {error}") from None


# ---- running a program with fusion on and off ---------------------------------


class Queue:
    """The gates a program runs behind: it is called with one closed on the
    current stream, and may hold more streams, or let them go for a
    blocking read. On the CPU (the reference run) every call is a no-op."""

    def __init__(self, gates=None):
        self._gates = gates
        self._held = []

    def hold(self, stream=None):
        if self._gates is not None:
            self._held.append(self._gates.close(stream))

    def release(self):
        while self._held:
            self._gates.open(self._held.pop(0))

    def release_soon(self):
        """Before a blocking read (.item(), .cpu()): the gates open shortly,
        from another thread, while the read waits."""
        while self._held:
            self._gates.open_later(self._held.pop(0), 0.05)


def to_host(value):
    if isinstance(value, torch.Tensor):
        return value.cpu() if value.device.type == "neuron" else value.clone()
    return value


def run_once(gates, inputs, program, fused, fresh_cache=False):
    """program(queue, *device copies of inputs) behind a closed gate; returns
    its results on the host and the counters it moved."""
    torch.neuron.synchronize()
    torchneuron.set_adaptive_eager(fused)
    if fresh_cache:
        torch.neuron.empty_cache()
    dev = [t.to("neuron") for t in inputs]
    torch.neuron.synchronize()
    metrics.clear_all()
    queue = Queue(gates)
    queue.hold()
    try:
        out = program(queue, *dev)
    finally:
        queue.release()
    torch.neuron.synchronize()
    counters = {name: counter(name) for name in COUNTERS}
    return {k: to_host(v) for k, v in out.items()}, counters


def run_both(gates, make_inputs, program, cpu=False, what="", fresh_cache=False):
    """Runs program fused and unfused and compares the results bit for bit
    (with cpu, also against program run on CPU tensors, except for results
    whose name starts with "_": those are not exactly rounded, or not
    values; a name starting with "~" is compared with the CPU by value, -0
    equal to +0: torch.maximum of tied zeros returns the second operand in
    the CPU's vector loop and the first in its scalar tail, so the CPU's sign
    depends on where the element falls in its threads' loops). Returns the
    fused results and counters."""
    inputs = make_inputs()
    fused, counters = run_once(gates, inputs, program, True, fresh_cache)
    unfused, off_counters = run_once(gates, inputs, program, False, fresh_cache)
    torchneuron.set_adaptive_eager(True)
    assert off_counters == dict.fromkeys(COUNTERS, 0), \
        f"{what}fusion off moved counters: {off_counters}"
    assert fused.keys() == unfused.keys()
    for name in fused:
        assert_bitwise(fused[name], unfused[name], f"{what}{name}")
    if cpu:
        expected = program(Queue(), *[t.clone() for t in inputs])
        for name in fused:
            if name.startswith("~"):
                torch.testing.assert_close(fused[name], expected[name], rtol=0, atol=0,
                                           equal_nan=True, msg=lambda m: f"{what}{name}: {m}")
            elif not name.startswith("_"):
                assert_matches_cpu(fused[name], expected[name], f"{what}{name}")
    return fused, counters


def inputs_of(*specs):
    """make_inputs for run_both: (shape, dtype) pairs, seeded by position."""
    return lambda: [make(shape, dtype, seed) for seed, (shape, dtype) in enumerate(specs, 1)]


F32 = torch.float32
TWO_F32 = inputs_of((SHAPE, F32), (SHAPE, F32))


# ---- fusion happens, and what it elides -----------------------------------------


def eight_ops_program(q, x, y):
    return dict(a=x + y, b=x * y, c=x - y, d=torch.relu(x), e=torch.neg(y), f=torch.abs(x),
                **{"~g": torch.maximum(x, y)}, h=x * 0.5)


def test_eight_queued_ops_of_one_shape_form_one_group(gates):
    _, counters = run_both(gates, TWO_F32, eight_ops_program, cpu=True)
    assert counters[GROUPS] == 1 and counters[FUSED_OPS] == 8, counters


def kept_program(q, x, y):
    t = x + 1
    u = t * y
    v = u - t
    w = torch.sigmoid(v)
    return dict(t=t, u=u, v=v, _w=w)


def test_intermediates_kept_by_python_are_stored(gates):
    _, counters = run_both(gates, TWO_F32, kept_program, cpu=True)
    assert counters[GROUPS] >= 1, counters
    assert counters[ELIDED] == 0, f"tensors still alive were not written: {counters}"


def deleted_chain_program(q, x, y):
    t1 = x * 2
    t2 = t1 + y
    del t1  # freed before the group runs: no reader outside it
    t3 = torch.relu(t2)
    del t2
    out = t3 * x
    del t3
    return dict(out=out)


def overwritten_program(q, x, y):
    x.add_(1)  # each write to x but the last is overwritten within the group
    x.mul_(y)
    x.sub_(2)
    return dict(x=x)


@pytest.mark.parametrize("program", [deleted_chain_program, overwritten_program],
                         ids=["freed", "overwritten"])
def test_dead_intermediates_are_elided(gates, program):
    _, counters = run_both(gates, TWO_F32, program, cpu=True)
    assert counters[GROUPS] >= 1 and counters[ELIDED] >= 1, counters


# ---- aliasing: in-place ops, views, overlaps ------------------------------------


def views_program(q, x, y, s):
    x.add_(1)
    a = x * 2  # reads x after the in-place op: an exact alias
    x.mul_(a)
    b = x - y
    c = x[::2] + 1  # a strided view of x, another shape
    x.sub_(3)
    d = x[::2] * c
    even, odd = s[::2], s[1::2]  # interleaved rows of one storage, one shape
    even.add_(y)
    e = odd * even
    odd.copy_(e)
    f = s[::2] + s[1::2]
    s[:, ::2].mul_(-1)  # every other column, across both
    g = even - odd
    return dict(x=x, a=a, b=b, c=c, d=d, s=s, e=e, f=f, g=g)


def test_in_place_ops_and_views_of_one_storage(gates):
    make_inputs = inputs_of((SHAPE, F32), (SHAPE, F32), ((512, 512), F32))
    _, counters = run_both(gates, make_inputs, views_program, cpu=True)
    assert counters[GROUPS] >= 1, counters


def strided_planes_program(q, x, y):
    # The real and imaginary planes of complex tensors: outputs with element
    # stride 2 (not dense), a broadcast operand whose stride-0 dim comes
    # first. The run walks the outputs' rows (a walk down their columns gave
    # the same values at a cache miss per element).
    o = torch.zeros_like(x)  # the odd columns are never written
    re, ar, ai = o[:, ::2], x[:, ::2], x[:, 1::2]
    br, bi = y[0, ::2], y[0, 1::2]
    torch.mul(ar, br, out=re)
    re.sub_(ai * bi)
    re.mul_(0.5)
    return dict(o=o, re_copy=re * 1)


def test_strided_outputs_with_a_broadcast_operand(gates):
    planes = inputs_of(((256, 512), F32), ((1, 512), F32))
    _, counters = run_both(gates, planes, strided_planes_program, cpu=True)
    assert counters[GROUPS] >= 1, counters


def transposed_alias_program(q, x, y):
    x.add_(1)
    xt = x.t()
    xt.mul_(2)  # writes x through transposed strides
    a = x + y  # reads it in row order: element (i, j) came from another tile
    xt.sub_(a)
    b = x * xt  # x and its own transpose in one op
    y.t().add_(b)
    c = y - x
    return dict(x=x, a=a, b=b, y=y, c=c)


def test_transposed_aliases_of_one_square_tensor(gates):
    square = inputs_of(((256, 256), F32), ((256, 256), F32))
    run_both(gates, square, transposed_alias_program, cpu=True)


# Views that read an intermediate of the run in another order than it is
# written, or one part of it everywhere: an element of a tile depends on
# other tiles' values.
REORDERING_VIEWS = {
    "reshape_transposed": lambda a: a.reshape(a.shape[1], a.shape[0]).t(),
    "column_major": lambda a: a.as_strided(a.shape, (1, a.shape[0])),
    "first_row": lambda a: a[:1],
    "first_column": lambda a: a[:, :1],
    "last_row_expanded": lambda a: a[-1:].expand(a.shape),
    "flat_prefix": lambda a: a.view(-1)[: a.shape[1]],
    "transposed_copy": lambda a: a.t().contiguous().t(),
    "flipped": lambda a: a.flip(0),
}


def reordered_read_program(view):
    def program(q, x, y):
        a = x * 2 + y
        r = REORDERING_VIEWS[view](a)
        b = r + 1
        a.mul_(3)  # then a changes under the view
        c = r * y
        return dict(a=a, b=b, c=c)

    return program


@pytest.mark.parametrize("view", REORDERING_VIEWS)
def test_intermediates_read_through_reordering_views(gates, view):
    odd = inputs_of(((300, 257), F32), ((300, 257), F32))
    run_both(gates, odd, reordered_read_program(view), cpu=True)


OVERLAP_MESSAGE = "single memory location"


def overlap_program(q, x, buf):
    lo, hi = buf[:-1], buf[1:]  # one row or one element apart
    torch.mul(x, 2, out=hi)
    a = lo + x  # reads what the op before just wrote, shifted
    torch.add(a, 1, out=lo)  # a write overlapping hi partially
    b = hi * a
    hi.add_(b)
    c = lo - hi
    # One op's own partial overlap is refused at launch, as on the CPU.
    with pytest.raises(RuntimeError, match=OVERLAP_MESSAGE):
        hi.copy_(lo)
    with pytest.raises(RuntimeError, match=OVERLAP_MESSAGE):
        torch.add(lo, 1, out=hi)
    d = c * 2
    return dict(buf=buf, a=a, b=b, c=c, d=d)


@pytest.mark.parametrize("shift", ["row", "element"])
def test_writes_that_partially_overlap_other_operands(gates, shift):
    n = math.prod(SHAPE)
    shapes = (SHAPE, (SHAPE[0] + 1, SHAPE[1])) if shift == "row" else ((n,), (n + 1,))
    run_both(gates, inputs_of((shapes[0], F32), (shapes[1], F32)), overlap_program, cpu=True)


# More than 10 MiB: each tensor is a block of a segment of its own (the
# caching allocator), so with the cache emptied first, a freed one is the
# block the next allocation of its size gets.
BIG = (1184, 1184)
BIG_DTYPE = torch.int64


def freed_block_program(variant):
    def program(q, x, y):
        t = x * 3
        block = t.data_ptr()
        u = (t.t() if variant == "transposed" else t) + 1
        del t  # freed while the ops that write and read it are queued
        w = y.clone() if variant == "copy" else y * 2  # receives t's block
        reused = w.data_ptr() == block
        v = w + u
        w.sub_(x)
        return dict(u=u, v=v, w=w, _reused=reused)

    return program


@pytest.mark.parametrize("variant", ["pointwise", "transposed", "copy"])
def test_a_freed_block_handed_to_a_later_op_of_the_queue(gates, variant):
    """A group must not store the dead tensor's values over the live tensor
    that now owns its block."""
    big = inputs_of((BIG, BIG_DTYPE), (BIG, BIG_DTYPE))
    fused, _ = run_both(gates, big, freed_block_program(variant),
                        cpu=True, fresh_cache=True)
    assert fused["_reused"], "w did not get t's block: the test no longer covers reuse"


# ---- commands that end a run (or may): the results are right either side ------


def run_boundary_program(kind):
    def program(q, x, y, w):
        t = x * 2
        u = t + y
        t.add_(u)
        extra = {}
        r = u
        if kind == "matmul":
            r = t @ w
        elif kind == "sum":
            r = t.sum(0, keepdim=True)
        elif kind == "event_record":
            e = torch.neuron.Event()
            e.record()
        elif kind == "event_wait":
            other = torch.neuron.Stream()
            e = torch.neuron.Event()
            e.record(other)
            torch.neuron.current_stream().wait_event(e)
        elif kind == "host_function":
            q.hold()  # a second gate: a host function queued mid-chain
        elif kind == "other_shape":
            t[:100].mul_(3)  # writes part of t, over another shape
        elif kind == "dtype_copy":
            r = t.to(torch.bfloat16)
        elif kind == "device_copy":
            r = torch.empty_like(t)
            r.copy_(t)
        elif kind == "host_copy":
            extra["t_host"] = torch.empty(t.shape, pin_memory=True)
            extra["t_host"].copy_(t, non_blocking=True)
        elif kind == "integer_division":
            extra["k"] = x.to(torch.int64) // 3  # runs alone
        v = r * t
        t.mul_(v)
        z = t - u
        return dict(t=t, u=u, v=v, z=z, **extra)

    return program


BOUNDARIES = ["matmul", "sum", "event_record", "event_wait", "host_function", "other_shape",
              "dtype_copy", "device_copy", "host_copy", "integer_division"]


@pytest.mark.parametrize("kind", BOUNDARIES)
def test_commands_that_end_a_run(gates, kind):
    make_inputs = inputs_of((SHAPE, F32), (SHAPE, F32), ((512, 512), F32))
    if kind == "integer_division":  # x.to(int64) is defined for finite values in range only
        finite = make_inputs
        make_inputs = lambda: [t.nan_to_num(0.0).clamp(-1e6, 1e6) for t in finite()]
    run_both(gates, make_inputs, run_boundary_program(kind), what=f"{kind}: ")


def item_and_cpu_program(q, x, y):
    t = x * 2 + y
    u = torch.relu(t)
    q.release_soon()  # .item() and .cpu() wait for the stream
    s = u[3, 5].item()
    t_host = t.cpu()
    q.hold()
    v = u * s
    w = v + t
    w_host = torch.empty(w.shape, pin_memory=True)
    w_host.copy_(w, non_blocking=True)  # a copy queued mid-chain
    w.mul_(3)  # queued after the copy: the copy must not see it
    z = w - u
    return dict(t=t, u=u, s=s, t_host=t_host, v=v, w=w, w_host=w_host, z=z)


def test_item_cpu_and_copies_in_the_middle_of_a_chain(gates):
    _, counters = run_both(gates, TWO_F32, item_and_cpu_program, cpu=True)
    assert counters[GROUPS] >= 1, counters


def two_streams_program(q, x, y):
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    q.hold(a)
    q.hold(b)
    with torch.neuron.stream(a):
        t = x * 2
        u = t + y
        v = torch.relu(u)
        v_ready = torch.neuron.Event()
        v_ready.record()
        w = v * 3 + t  # a goes on past the record
    with torch.neuron.stream(b):
        v_ready.wait()
        p = v - 1
        r = p * x
        p.add_(r)
    a.wait_stream(b)
    with torch.neuron.stream(a):
        v.add_(100)  # only once b has read v
        s = r + v
    return dict(t=t, u=u, v=v, w=w, p=p, r=r, s=s)


def test_two_streams_ordered_by_events(gates):
    fused, counters = run_both(gates, TWO_F32, two_streams_program)
    assert counters[GROUPS] >= 1, counters
    x, y = TWO_F32()
    v = torch.relu(x * 2 + y)
    p = v - 1
    r = p * x
    assert_matches_cpu(fused["w"], v * 3 + x * 2, "w")
    assert_matches_cpu(fused["p"], p + r, "p")
    assert_matches_cpu(fused["s"], r + (v + 100), "s")


# ---- dtypes, broadcasting, promotion, sizes ---------------------------------------


def promotion_program(q, x, h, f16, i64, row, col, m, z0):
    a = x + h  # float32 + bfloat16
    b = a * row  # (1, n) broadcast
    c = b - col  # (m, 1) bfloat16 broadcast
    d = i64 + x  # int64 + float32
    e = i64 * 3
    f = torch.where(m, d, c)
    g = h * col  # bfloat16, broadcast
    k = h + f16  # bfloat16 + float16: float32
    n = e + m  # int64 + bool
    o = m & (x > 0)
    p = torch.where(o, h, f16)
    s = x * z0  # a 0-d neuron tensor
    r = i64 / 2
    hb = h + 1.5
    cv = h.float() + x.to(torch.bfloat16)  # conversions are copies
    mf = x.masked_fill(m, 0.5)
    return dict(a=a, b=b, c=c, d=d, e=e, f=f, g=g, k=k, n=n, o=o, p=p, s=s, r=r, hb=hb, cv=cv,
                mf=mf)


def test_broadcasting_and_type_promotion_inside_a_run(gates):
    make_inputs = inputs_of((SHAPE, F32), (SHAPE, torch.bfloat16), (SHAPE, torch.float16),
                            (SHAPE, torch.int64), ((1, SHAPE[1]), F32),
                            ((SHAPE[0], 1), torch.bfloat16), (SHAPE, torch.bool), ((), F32))
    _, counters = run_both(gates, make_inputs, promotion_program, cpu=True)
    assert counters[GROUPS] >= 1, counters


def float_run(q, x, y):
    a = x + y
    b = a * x
    c = torch.relu(b)
    d = torch.where(c > 1, c, y)
    e = torch.maximum(d, x)
    f = -e
    g = torch.abs(f)
    x.mul_(0.5)
    h = g - x
    # Not exactly rounded (no CPU check), but bitwise against unfused.
    s = torch.sigmoid(h)
    gl = F.gelu(s, approximate="tanh")
    ex = torch.exp(gl) / y
    return {"a": a, "b": b, "c": c, "d": d, "~e": e, "~f": f, "g": g, "x": x, "h": h, "_s": s,
            "_gl": gl, "_ex": ex}


def int_run(q, x, y):
    a = x + y
    b = a * 3
    c = b - y
    d = c & y
    e = torch.maximum(d, x)
    f = torch.where(e > 0, e, -e)
    g = f ^ x
    h = torch.clamp(g, -100, 100)
    x.add_(h)
    k = x.abs() | y
    return dict(a=a, b=b, c=c, d=d, e=e, f=f, g=g, h=h, x=x, k=k)


def bool_run(q, x, y):
    a = x & y
    b = a | ~x
    c = a ^ y
    d = torch.logical_or(c, b)
    e = torch.where(d, x, y)
    f = e == a
    g = f + x  # bool add: or
    x.logical_and_(g)
    y.bitwise_xor_(a)
    return dict(a=a, b=b, c=c, d=d, e=e, f=f, g=g, x=x, y=y)


RUN_DTYPES = {torch.float32: float_run, torch.bfloat16: float_run, torch.float16: float_run,
              torch.int64: int_run, torch.int32: int_run, torch.bool: bool_run}


@pytest.mark.parametrize("dtype", RUN_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_runs_of_one_dtype(gates, dtype):
    make_inputs = inputs_of((SHAPE, dtype), (SHAPE, dtype))
    _, counters = run_both(gates, make_inputs, RUN_DTYPES[dtype], cpu=True)
    assert counters[GROUPS] >= 1, counters


# NaNs of both signs, with payloads and signalling ones, at half the
# elements: which NaN an op passes on must not depend on whether an element
# falls in a kernel's vector loop or its scalar tail (a tile's tail is
# elsewhere than the whole tensor's), so fused and unfused agree bit for bit.
NAN_BITS = {torch.float32: [0x7FC00000, -0x400000, 0x7FC00001, 0x7F800001, -0x3FFFFF],
            torch.float16: [0x7E00, -0x200, 0x7E01, 0x7C01, -0x1FF],
            torch.bfloat16: [0x7FC0, -0x40, 0x7FC1, 0x7F81, -0x3F]}
NAN_SHAPE = (300, 257)  # rows of an odd length: tails everywhere


def nan_heavy(shape, dtype, seed):
    x = make(shape, dtype, seed)
    g = torch.Generator().manual_seed(seed)
    where = torch.rand(shape, generator=g) < 0.5
    payloads = torch.tensor(NAN_BITS[dtype], dtype=BITS[dtype])
    picks = payloads[torch.randint(0, len(payloads), shape, generator=g)]
    as_bits(x)[where] = picks[where]
    return x


NAN_UNARY = {
    "exp": torch.exp, "log1p": torch.log1p, "sqrt": torch.sqrt, "sin": torch.sin,
    "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "neg": torch.neg,
    "abs": torch.abs, "relu": torch.relu, "floor": torch.floor, "round": torch.round,
    "sign": torch.sign, "frac": torch.frac, "reciprocal": torch.reciprocal,
    "nan_to_num": torch.nan_to_num, "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu, "mish": F.mish, "softplus": F.softplus, "elu": F.elu,
    "leaky_relu": F.leaky_relu, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
}
NAN_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "atan2": torch.atan2, "hypot": torch.hypot, "maximum": torch.maximum,
    "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "remainder": torch.remainder, "fmod": torch.fmod, "copysign": torch.copysign,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "lerp": lambda a, b: torch.lerp(a, b, 0.25), "where": lambda a, b: torch.where(a > b, a, b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5),
    "addcdiv": lambda a, b: torch.addcdiv(b, a, b), "clamp": lambda a, b: torch.clamp(a, b, a),
    "lerp_tensor": lambda a, b: torch.lerp(a, b, b),
}


def nan_program(q, x, y, x2, y2):
    out = {}
    for layout, (a, b) in {"contiguous": (x, y), "strided": (x2[:, ::2], y2[:, ::2])}.items():
        for name, op in NAN_UNARY.items():
            out[f"{name}(a), {layout}"] = op(a)
        for name, op in NAN_BINARY.items():
            out[f"{name}(a, b), {layout}"] = op(a, b)
            out[f"{name}(b, a), {layout}"] = op(b, a)
    return out


@pytest.mark.parametrize("dtype", list(NAN_BITS), ids=lambda d: str(d).removeprefix("torch."))
def test_nan_signs_and_payloads_as_unfused(gates, dtype):
    m, n = NAN_SHAPE
    shapes = [(m, n), (m, n), (m, 2 * n), (m, 2 * n)]
    make_inputs = lambda: [nan_heavy(shape, dtype, seed) for seed, shape in enumerate(shapes)]
    _, counters = run_both(gates, make_inputs, nan_program)
    assert counters[GROUPS] >= 1, counters


# Values that rounding must get right in 16 bits: NaNs of both signs with
# payloads, infinities, signed zeros, subnormals of both formats, values
# whose products and sums land on or next to rounding ties.
TAPE16_SPECIALS = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -2e-39, 6e-8, -3e-5,
                   65504.0, 1.00390625, 1.01171875, 3.0, 1.5, 0.1]


def tape16_inputs(dtype):
    def make_inputs():
        out = []
        for seed in range(3):
            x = make(SHAPE, torch.float32, seed + 11)
            g = torch.Generator().manual_seed(seed)
            picks = torch.randint(0, len(TAPE16_SPECIALS), (len(x.view(-1)[3::7]),), generator=g)
            x.view(-1)[3::7] = torch.tensor(TAPE16_SPECIALS)[picks]
            x = x.to(dtype)
            if seed == 0:  # NaN payloads and signs as stored bits
                payloads = torch.tensor(NAN_BITS[dtype], dtype=BITS[dtype])
                as_bits(x).view(-1)[5::97] = payloads[torch.arange(len(x.view(-1)[5::97])) % len(payloads)]
            out.append(x)
        return out
    return make_inputs


def tape16_program(q, x, y, z):
    """Ops the tape takes in 16 bits (tape.c admits16), then an autocast-like
    float32 tail: a 16-bit op feeding float32 ops, stored back in 16 bits."""
    a = (x * 3 + y).abs()
    b = torch.maximum(torch.relu(a - z), torch.minimum(x, y)) / (z + 0.5)
    c = torch.sigmoid(b) * torch.tanh(x) + torch.sqrt(a) - F.leaky_relu(y)
    d = torch.reciprocal(F.hardtanh(c, -1.0, 2.5)) + torch.log(a) * torch.erf(z)
    e = torch.rsqrt(d.abs()).neg() + x * 1.1
    f = (e.float() * 0.3 + x.float()).to(x.dtype)
    return dict(a=a, b=b, c=c, d=d, e=e, f=f)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_16bit_runs_take_the_register_loop(gates, dtype):
    """bfloat16 runs of the tape's ops run on the tape (fuse.register_loops;
    float16 not yet: RT_TAPE_TAKES_F16 in fuse/tape.h) and give the bits of
    the ops one by one, as float16 runs do on the kernels' loops."""
    inputs = tape16_inputs(dtype)()
    fused, counters = run_once(gates, inputs, tape16_program, True)
    loops = counter("fuse.register_loops")
    unfused, _ = run_once(gates, inputs, tape16_program, False)
    torchneuron.set_adaptive_eager(True)
    assert counters[GROUPS] >= 1 and counters[FUSED_OPS] >= 20, counters
    if dtype == torch.bfloat16:
        assert loops >= 1, (loops, counters)
    for name in fused:
        assert_bitwise(fused[name], unfused[name], name)


def tame_program(q, x, y):
    return dict(gelu=F.gelu(x), silu=F.silu(x), sigmoid=torch.sigmoid(x), gelu_of_mul=F.gelu(x * y),
                silu_of_add=F.silu(x + y), sigmoid_of_sub=torch.sigmoid(x - y))


def test_tame_twins_same_bits_fused(gates):
    """GELU, SiLU and sigmoid take their tame twins per block fused (the
    tape's tame_block, the generated code) as the kernels do alone: the same
    bits, on tame blocks and on blocks holding one value out of the twin's
    domain (above 13 for GELU, 86 for SiLU and sigmoid, infinite, NaN)."""

    def make_inputs():
        g = torch.Generator().manual_seed(5)
        x, y = 3 * torch.randn(SHAPE, generator=g), torch.randn(SHAPE, generator=g)
        wild = torch.tensor([13.5, -20.0, 90.0, -87.5, float("inf"), -float("inf"), float("nan"), 1e30])
        picks = x.view(-1)[1000::9001]
        x.view(-1)[1000::9001] = wild.repeat(len(picks) // len(wild) + 1)[: len(picks)]
        return [x, y]

    _, counters = run_both(gates, make_inputs, tame_program)
    assert counters[FUSED_OPS] >= 6, counters


def empty_and_0d_program(q, x, e0, s0):
    a = x * 2
    z1 = e0 + 1  # zero-size: nothing to run
    b = a + x
    e0.mul_(3)
    s1 = s0 * 3  # 0-d: its own (tiny) shape
    c = b * s1  # a 0-d tensor broadcast into the run
    s0.add_(1)
    d = c - s0
    z2 = torch.relu(z1)
    return dict(a=a, z1=z1, b=b, e0=e0, s1=s1, c=c, s0=s0, d=d, z2=z2)


def test_zero_size_and_0d_tensors_between_fused_ops(gates):
    make_inputs = inputs_of((SHAPE, F32), ((0, SHAPE[1]), F32), ((), F32))
    _, counters = run_both(gates, make_inputs, empty_and_0d_program, cpu=True)
    assert counters[GROUPS] >= 1, counters


# ---- errors ------------------------------------------------------------------------

DIVISIONS = {
    "floor_divide": (torch.floor_divide, r"floor_divide|div_floor"),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), r"div_trunc"),
    "remainder": (torch.remainder, r"remainder"),
    "fmod": (torch.fmod, r"fmod"),
}


@pytest.mark.parametrize("name", DIVISIONS)
def test_integer_division_by_zero_in_a_chain_fails_as_unfused(gates, name):
    divide, op_name = DIVISIONS[name]
    x = make(SHAPE, torch.int64, 1)
    divisor = make(SHAPE, torch.int64, 2).abs() + 1
    divisor[100, 200] = 0
    seen = {}
    for fused in (True, False):
        torch.neuron.synchronize()
        torchneuron.set_adaptive_eager(fused)
        xd, dd = x.to("neuron"), divisor.to("neuron")
        skipped = torch.full(SHAPE, -7, dtype=torch.int64, device="neuron")
        torch.neuron.synchronize()
        metrics.clear_all()
        handle = gates.close()
        a = xd + 1
        b = a * 3
        c = b - xd  # a run before the division
        quotient = divide(c, dd)
        after = quotient + 1  # queued behind the failure: skipped
        torch.add(xd, 5, out=skipped)
        gates.open(handle)
        with pytest.raises(RuntimeError, match="ZeroDivisionError") as error:
            torch.neuron.synchronize()
        assert re.search(op_name, str(error.value)), str(error.value)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            c.cpu()  # sticky until cleared
        torch.neuron.clear_error()
        seen[fused] = dict(a=a.cpu(), b=b.cpu(), c=c.cpu(), skipped=skipped.cpu(),
                           groups=counter(GROUPS))
        del after
    torchneuron.set_adaptive_eager(True)
    assert seen[True].pop("groups") >= 1, "the run before the division did not fuse"
    assert seen[False].pop("groups") == 0
    for key in seen[True]:
        assert_bitwise(seen[True][key], seen[False][key], key)
    assert_matches_cpu(seen[True]["c"], (x + 1) * 3 - x, "c")
    assert torch.equal(seen[True]["skipped"], torch.full(SHAPE, -7)), "work after the failure ran"
    assert (torch.ones(4, device="neuron") * 2).cpu().tolist() == [2.0] * 4


# ---- random programs ------------------------------------------------------------

RANDOM_SHAPES = [(256, 512), (300, 257), (256, 256), (128, 1024), (520, 130)]
RANDOM_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64,
                 torch.bool]
# name: (base shape for an (m, n) program, the view of the base it reads,
# weight). Full-shape layouts may be written in place; the others broadcast.
LAYOUTS = {
    "contiguous": (lambda m, n: (m, n), "{}", 6),
    "transposed": (lambda m, n: (n, m), "{}.t()", 1),
    "rows_step2": (lambda m, n: (2 * m, n), "{}[::2]", 1),
    "cols_step2": (lambda m, n: (m, 2 * n), "{}[:, ::2]", 1),
    "row": (lambda m, n: (1, n), "{}", 1),
    "column": (lambda m, n: (m, 1), "{}", 1),
    "0-d": (lambda m, n: (), "{}", 1),
}
FULL_LAYOUTS = {"contiguous", "transposed", "rows_step2", "cols_step2"}

# {a}: a full-shape value; {b}, {b2}: any value or a Python number; {c}: a
# bool value. FLOAT_ONLY ops are integer division: kept only where the
# result is floating (an integer zero divisor would fail the program).
NEW_OPS = [
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "torch.add({a}, {b}, alpha=2)",
    "torch.maximum({a}, {b})", "torch.minimum({a}, {b})", "torch.fmax({a}, {b})",
    "{a} > {b}", "{a} == {b}", "{a} <= {b}", "torch.logical_and({a}, {b})",
    "{a} & {b}", "{a} | {b}", "{a} ^ {b}", "torch.atan2({a}, {b})", "torch.hypot({a}, {b})",
    "torch.copysign({a}, {b})", "torch.pow({a}, 2)", "torch.lerp({a}, {b}, 0.25)",
    "torch.exp({a})", "torch.sigmoid({a})", "torch.tanh({a})", "torch.sin({a})",
    "torch.sqrt({a})", "torch.log1p({a})", "torch.abs({a})", "torch.neg({a})",
    "torch.relu({a})", "F.gelu({a})", "F.silu({a})", "torch.floor({a})", "torch.round({a})",
    "torch.sign({a})", "torch.isnan({a})", "torch.logical_not({a})", "torch.bitwise_not({a})",
    "torch.clamp({a}, -2, 2)", "F.leaky_relu({a}, 0.1)", "torch.nan_to_num({a})",
    "torch.reciprocal({a})", "torch.erf({a})",
    "torch.where({c}, {a}, {b})", "torch.addcmul({a}, {b}, {b2}, value=0.5)",
    "torch.clamp({a}, {b}, {b2})", "{a}.masked_fill({c}, 1)",
    "{a}.float()", "{a}.to(torch.bfloat16)", "{a}.to(torch.float16)",
]
FLOAT_ONLY = [
    "torch.div({a}, {b}, rounding_mode='floor')", "torch.div({a}, {b}, rounding_mode='trunc')",
    "torch.remainder({a}, {b})", "torch.fmod({a}, {b})",
]
IN_PLACE_OPS = [
    "{t}.add_({b})", "{t}.mul_({b})", "{t}.sub_({b})", "{t}.clamp_(-1, 1)", "{t}.relu_()",
    "{t}.neg_()", "{t}.sigmoid_()", "{t}.copy_({b})", "{t}.masked_fill_({c}, 1)",
    "torch.mul({a}, {b}, out={t})", "torch.add({t}, {a}, out={t})",
    "{t}.addcmul_({a}, {b})", "torch.where({c}, {a}, {b}, out={t})",
]
NUMBERS = ["2", "-1", "0.5", "1.5", "3"]
RANDOM_GLOBALS = {"torch": torch, "F": F}


class HostReads(TorchDispatchMode):
    """Sees a statement read a tensor's value on the host (a 0-d tensor
    passed where a number is expected): behind a closed gate that read
    would wait forever."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen |= func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


class RandomProgram:
    """A random DAG of 4-20 pointwise ops, as Python source. Each statement is
    first run on tiny CPU twins of the values (same dtypes, views and
    aliasing), and kept only if the CPU accepts it."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        m, n = rng.choice(RANDOM_SHAPES)
        tiny = (3, 3) if m == n else (2, 3)
        self.inputs = []  # (base shape, dtype, seed)
        self.lines = []
        env = {}  # name -> tiny CPU twin
        live, full = [], []

        for i in range(rng.randint(2, 5)):
            names = list(LAYOUTS)
            layout = "contiguous" if i == 0 else rng.choices(
                names, weights=[LAYOUTS[k][2] for k in names])[0]
            base, view, _ = LAYOUTS[layout]
            dtype = rng.choice(RANDOM_DTYPES)
            self.inputs.append((base(m, n), dtype, seed * 100 + i))
            env[f"b{i}"] = make(base(*tiny), dtype, i)
            line = f"v{i} = " + view.format(f"b{i}")
            exec(line, RANDOM_GLOBALS, env)
            self.lines.append(line)
            live.append(f"v{i}")
            if layout in FULL_LAYOUTS:
                full.append(f"v{i}")
        next_name = len(self.inputs)

        def pick_full():
            return rng.choice(full[-3:] if rng.random() < 0.6 else full)

        def pick_any():
            if rng.random() < 0.25:
                return rng.choice(NUMBERS)
            return rng.choice(live) if rng.random() < 0.4 else pick_full()

        def fill(template):
            bools = [v for v in live if env[v].dtype == torch.bool]
            if "{c}" in template and not bools:
                return None
            t = pick_full()
            b = pick_any()
            if "copy_" in template and (b in NUMBERS or (
                    env[b].dtype.is_floating_point and not env[t].dtype.is_floating_point)):
                return None  # float -> integer conversion of NaN/inf is not defined
            return template.format(a=pick_full(), b=b, b2=pick_any(), t=t,
                                   c=rng.choice(bools) if bools else None)

        self.num_ops = 0
        target = rng.randint(4, 20)
        for _ in range(40 * target):
            if self.num_ops >= target:
                break
            kind = rng.choices(["new", "in_place", "view", "del"], weights=[10, 4, 1, 2])[0]
            float_only = False
            if kind == "del":
                victims = [v for v in live if v not in full or len(full) > 2]
                if len(live) > 2 and victims:
                    victim = rng.choice(victims)
                    self.lines.append(f"del {victim}")
                    del env[victim]
                    live.remove(victim)
                    if victim in full:
                        full.remove(victim)
                continue
            if kind == "view":  # views that read a value in another order, or part of it
                views = ["{}[:1]", "{}[:, :1]", "{0}.reshape({0}.shape[1], {0}.shape[0]).t()"]
                views += ["{}.t()"] if m == n else []
                name, expr = f"v{next_name}", rng.choice(views).format(pick_full())
            elif kind == "new":
                float_only = rng.random() < 0.1
                expr = fill(rng.choice(FLOAT_ONLY if float_only else NEW_OPS))
                name = f"v{next_name}"
            else:
                expr = fill(rng.choice(IN_PLACE_OPS))
                name = None
            if expr is None:
                continue
            line = f"{name} = {expr}" if name else expr
            try:
                with HostReads() as reads:
                    exec(line, RANDOM_GLOBALS, env)
            except Exception:  # the CPU refuses it: dtype, aliasing or argument rules
                env.pop(name, None)
                continue
            if reads.seen:
                env.pop(name, None)
                continue
            if name:
                result = env[name]
                if (kind != "view" and result.shape != tiny) or (
                        float_only and not result.dtype.is_floating_point):
                    del env[name]
                    continue
                live.append(name)
                if result.shape == tiny:
                    full.append(name)
                next_name += 1
            self.lines.append(line)
            if kind != "view":
                self.num_ops += 1

        params = ", ".join(f"b{i}" for i in range(len(self.inputs)))
        body = "".join(f"    {line}\n" for line in self.lines)
        results = ", ".join(f"{v!r}: {v}" for v in live)
        self.source = f"def program(q, {params}):\n{body}    return {{{results}}}\n"
        namespace = dict(RANDOM_GLOBALS)
        exec(self.source, namespace)
        self.program = namespace["program"]

    def make_inputs(self):
        return [make(shape, dtype, seed) for shape, dtype, seed in self.inputs]

    def describe(self):
        inputs = ", ".join(f"b{i}: make({shape}, {dtype}, {seed})"
                           for i, (shape, dtype, seed) in enumerate(self.inputs))
        return f"random program {self.seed} (inputs {inputs}):\n{self.source}\n"


RANDOM_BLOCKS, SEEDS_PER_BLOCK = 6, 8


@pytest.mark.parametrize("block", range(RANDOM_BLOCKS))
def test_random_programs_match_unfused(gates, block):
    ops = fused = 0
    for seed in range(block * SEEDS_PER_BLOCK, (block + 1) * SEEDS_PER_BLOCK):
        p = RandomProgram(seed)
        _, counters = run_both(gates, p.make_inputs, p.program, what=p.describe())
        ops += p.num_ops
        fused += counters[FUSED_OPS]
    # Copies, views of other strides and group caps end runs; most ops fuse.
    assert fused >= 0.7 * ops, f"only {fused} of {ops} ops ran fused"


# ---- kernel thread counts -----------------------------------------------------------


def thread_probe():
    """Run in a child per kernel thread count: random programs and the
    hazard programs fused and unfused (asserting they agree); returns a
    digest of the fused results and the fused op count."""
    gates = Gates()
    digest = hashlib.sha256()
    fused_ops = 0
    programs = [(p.make_inputs, p.program) for p in map(RandomProgram, range(6))]
    programs += [(TWO_F32, deleted_chain_program), (TWO_F32, item_and_cpu_program),
                 (inputs_of(((256, 256), F32), ((256, 256), F32)), transposed_alias_program),
                 (inputs_of((SHAPE, F32), ((SHAPE[0] + 1, SHAPE[1]), F32)), overlap_program)]
    try:
        for make_inputs, program in programs:
            results, counters = run_both(gates, make_inputs, program)
            fused_ops += counters[FUSED_OPS]
            for name in sorted(results):
                value = results[name]
                data = (as_bits(value).contiguous().numpy().tobytes()
                        if isinstance(value, torch.Tensor) else repr(value).encode())
                digest.update(name.encode() + data)
    finally:
        gates.open_all()
        torch.neuron.synchronize()
    return f"{digest.hexdigest()} {fused_ops}"


THREAD_PROBE = f"""
import sys
sys.path.insert(0, {TESTS_DIR!r})
import torchneuron
import test_adaptive_eager
print(torchneuron.adaptive_eager_enabled(), test_adaptive_eager.thread_probe())
"""


def test_results_do_not_depend_on_the_kernel_thread_count():
    # TORCHNEURON_ADAPTIVE_EAGER=1 here saves a child in the test below.
    env = {"TORCHNEURON_FALLBACK": "error", "TORCHNEURON_ADAPTIVE_EAGER": "1"}
    results = run_python_many({
        threads: (THREAD_PROBE, dict(env, TORCHNEURON_NUM_THREADS=threads))
        for threads in ("1", "2", "3")})
    lines = {threads: check_output(r).split()[-3:] for threads, r in results.items()}
    assert all(enabled == "True" for enabled, _, _ in lines.values()), lines
    assert all(int(fused) > 0 for _, _, fused in lines.values()), f"nothing fused: {lines}"
    assert len({digest for _, digest, _ in lines.values()}) == 1, lines


# ---- controls -------------------------------------------------------------------------


def test_set_adaptive_eager_false_turns_fusion_off(gates):
    torchneuron.set_adaptive_eager(False)
    assert torchneuron.adaptive_eager_enabled() is False
    off, counters = run_once(gates, TWO_F32(), eight_ops_program, fused=False)
    assert counters == dict.fromkeys(COUNTERS, 0), counters
    torchneuron.set_adaptive_eager(True)
    assert torchneuron.adaptive_eager_enabled() is True
    on, counters = run_once(gates, TWO_F32(), eight_ops_program, fused=True)
    assert counters[GROUPS] >= 1, counters
    for name in on:
        assert_bitwise(on[name], off[name], name)


# A child: whether fusion is on, before and after set_adaptive_eager(True),
# and what a gated 4-op run fused (not under NEURON_LAUNCH_BLOCKING, where
# a launch behind a closed gate would wait forever).
ENV_PROBE = """
    import json, os
    import torch, torchneuron
    from torchneuron import _C, metrics

    def gated_run():
        x = torch.randn(256, 512, device="neuron")
        torch.neuron.synchronize()
        metrics.clear_all()
        s = torch.accelerator.current_stream()
        gate = _C._close_stream_gate(s.device_index, s.stream_id)
        out = [x + 1, x * 2, x - 3, torch.relu(x)]
        _C._open_stream_gate(gate)
        torch.neuron.synchronize()
        return metrics.get_counter_value("adaptive_eager.fused_ops") or 0

    blocking = os.environ.get("NEURON_LAUNCH_BLOCKING") == "1"
    report = {"enabled": torchneuron.adaptive_eager_enabled()}
    if not blocking:
        report["fused"] = gated_run()
    torchneuron.set_adaptive_eager(True)
    report["enabled_after_set"] = torchneuron.adaptive_eager_enabled()
    if not blocking:
        report["fused_after_set"] = gated_run()
    print(json.dumps(report))
"""


def test_environment_variables_set_the_default():
    results = run_python_many({
        "default": (ENV_PROBE, {}),  # =1: test_results_do_not_depend_on_the_kernel_thread_count
        "off": (ENV_PROBE, {"TORCHNEURON_ADAPTIVE_EAGER": "0"}),
        "blocking": (ENV_PROBE, {"NEURON_LAUNCH_BLOCKING": "1"}),
    })
    seen = {key: json.loads(check_output(r).splitlines()[-1]) for key, r in results.items()}
    assert seen["default"]["enabled"] is True and seen["default"]["fused"] > 0, seen["default"]
    assert seen["off"]["enabled"] is False and seen["off"]["fused"] == 0, seen["off"]
    # The environment sets the default; set_adaptive_eager overrides it...
    off = seen["off"]
    assert off["enabled_after_set"] is True and off["fused_after_set"] > 0, off
    # ...except under launch blocking, where nothing ever queues.
    assert seen["blocking"] == {"enabled": False, "enabled_after_set": False}, seen["blocking"]


def test_metrics_api(gates):
    run_once(gates, TWO_F32(), eight_ops_program, fused=True)
    names = metrics.get_counter_names()
    assert isinstance(names, list) and all(isinstance(n, str) for n in names)
    assert set(COUNTERS) <= set(names), names
    values = {name: metrics.get_counter_value(name) for name in COUNTERS}
    assert all(isinstance(v, int) for v in values.values()), values
    assert values[GROUPS] >= 1 and values[FUSED_OPS] >= values[GROUPS], values
    assert metrics.get_counter_value("adaptive_eager.no_such_counter") is None
    report = metrics.report()
    assert isinstance(report, str) and all(name in report for name in COUNTERS), report
    metrics.clear_all()
    assert [metrics.get_counter_value(name) for name in COUNTERS] == [0, 0, 0]
