"""torch.compile(backend="neuron") of every OpInfo op, alone, against eager neuron.

Scope: every entry of PyTorch's OpInfo database (``op_db``) whose samples
run natively on neuron in eager mode: a sample whose eager run reached the
CPU fallback (``torchneuron.get_fallback_ops()``) or raised is not compared;
an op none of whose samples ran natively is skipped as "not native". Ops
with random or uninitialised results (``opinfo_support.is_random``) are
skipped: compiled and eager draw different numbers.

Samples: the OpInfo's own ``sample_inputs`` made on device "neuron" (the
host and neuron generators seeded before each one, so the subset is
deterministic). To keep the run to a few minutes on two cores, each op
gets the first ``FLOAT32_SAMPLES`` samples at float32 (its first
supported dtype when it has no float32) and the first sample at bfloat16
and at one integer dtype (int64, else bool), where the op supports them
on the CPU (``opinfo_support.test_dtypes``). ``TORCHNEURON_COMPILE_OPINFO_SAMPLES``
changes the float32 count.

Each sample is compiled alone, with a fresh Dynamo state
(``torch._dynamo.reset()``): ``torch.compile(lambda i, a, k: op(i, *a, **k),
backend="neuron", dynamic=False)`` on copies of the sample (same sizes,
strides and offsets) that the eager run did not touch. Results must equal
eager neuron's: same structure, dtypes and shapes (a tuple or list output
compared element by element, numbers as numbers), values with
``torch.testing.assert_close`` at the eager-vs-CPU tolerances of
tests/opinfo_support.py (``tolerances``) for bfloat16, and bit for bit
(atol=rtol=0, NaN equal to NaN) for float32, integers and bool: the graph
compiler lowers an op to the kernel eager runs with the same operands, or
runs the node eagerly. Inputs the op mutates must be mutated alike.
``NOT_BITWISE`` lists the float32 ops where compiled and eager reach
different (correct) arithmetic, each with why; those use the tolerances.

A sample the neuron backend cannot compile, or whose compiled result
differs, is run again with ``backend="aot_eager"``: when that fails the same
way (a Dynamo or AOTAutograd limitation, or PyTorch's own tracing
changing the result) the sample is skipped with that reason; otherwise it
is a bug of the neuron backend and the op's test fails.

Coverage: every compiled FX graph's nodes are either lowered or run
eagerly between compiled segments (``build_plan``'s reasons, recorded by
wrapping ``torchneuron.compiler.plan.build_plan``). An op is "fully
lowered" when it compiled at least one graph and none of its graphs had an
eager node, "with eager nodes" otherwise (its ATen ops and the reasons are
listed), "no graph" when Dynamo produced no graph for it (e.g. ``item``).
``test_coverage_report`` writes the lists to ``compile_opinfo_coverage.txt``
(and ``.json``) under pytest's tmp dir (or TORCHNEURON_COMPILE_OPINFO_REPORT)
and prints the counts; it fails when the fully-lowered count falls below
``FULLY_LOWERED_FLOOR`` (measured, minus a small margin).

Every compile uses ``options={"cache": False}`` (so that each compile runs
``build_plan`` and reports its reasons) and TORCHNEURON_CACHE_DIR points
at a temporary directory.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import logging
import os
import random
import warnings
from dataclasses import dataclass, field

import numpy
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import SEED
from torch.utils._pytree import tree_flatten

import torchneuron
from torchneuron import metrics

import opinfo_support as support

FLOAT32_SAMPLES = int(os.environ.get("TORCHNEURON_COMPILE_OPINFO_SAMPLES", "3"))
OTHER_SAMPLES = 1
OPTIONS = {"cache": False}

# Fully-lowered ops measured with these samples (360 of 702 op_db entries), minus
# a margin for OpInfo changes across PyTorch updates.
FULLY_LOWERED_FLOOR = 352

_DECOMPOSED_UPSAMPLE = (
    "F.interpolate reaches upsample_*.vec, which has no neuron kernel, so the backend's "
    "decomposition table (core ATen decompositions) turns it into index + lerp arithmetic "
    "instead of the native upsample kernel eager runs: a last-bit difference with "
    "align_corners=True (within the eager-vs-CPU tolerance)")
# float32 ops whose compiled result is correct but not eager's bits, and why.
NOT_BITWISE: dict[str, str] = {
    "nn.functional.interpolate.linear": _DECOMPOSED_UPSAMPLE,
    "nn.functional.interpolate.bilinear": _DECOMPOSED_UPSAMPLE,
    "nn.functional.upsample_bilinear": _DECOMPOSED_UPSAMPLE,
}

_NORM_STATS = (
    "neuron's eager norm kernels state their statistics as the CPU does (16-bit for 16-bit "
    "inputs, empty save_mean/save_invstd in eval mode) while the compiled graph follows "
    "PyTorch's meta functions, which give every non-CPU device CUDA's (float32, "
    "[C] in eval mode); a compiled result's dtype or shape is then not eager's")
_BN_UPDATE = (
    _NORM_STATS + "; here the eager node _batch_norm_with_update_functional returns bfloat16 "
    "running statistics where the graph expects float32, and the next compiled segment reads "
    "them as float32 (the runner does not check an eager node's results against node.meta)")
# Ops whose compiled result differs from eager's for a reason outside the
# lowerings: (op id, dtype or None for every dtype) -> reason. A listed case
# is an xfail while it differs and fails once it no longer does.
KNOWN_MISMATCHES: dict[tuple[str, object], str] = {
    ("native_layer_norm", torch.bfloat16): _NORM_STATS,
    ("native_batch_norm", torch.bfloat16): _NORM_STATS,
    ("_native_batch_norm_legit", torch.float32): _NORM_STATS,
    ("_native_batch_norm_legit", torch.bfloat16): _NORM_STATS,
    ("_batch_norm_with_update", torch.bfloat16): _BN_UPDATE,
}


# ---------------------------------------------------------------- samples


def _seed_all():
    torch.default_generator.manual_seed(SEED)
    random.seed(SEED)
    numpy.random.seed(SEED)
    torch.neuron.manual_seed_all(SEED)


def neuron_samples(op, dtype, limit):
    """The first `limit` samples of op at dtype, made on neuron, seeded."""
    _seed_all()
    it = iter(op.sample_inputs_func(op, "neuron", dtype, False))
    out = []
    while len(out) < limit:
        _seed_all()
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


def case_dtypes(op) -> list[tuple[torch.dtype, int]]:
    """(dtype, number of samples): float32 (else the first supported dtype),
    bfloat16, and int64 (else bool), as the op supports them."""
    # A graph with a complex tensor runs eagerly (torchneuron/compiler/ir.py):
    # complex samples are tests/test_opinfo_conformance.py's.
    dtypes = [d for d in support.test_dtypes(op) if not d.is_complex]
    if not dtypes:
        return []
    main = torch.float32 if torch.float32 in dtypes else dtypes[-1]
    chosen = [(main, FLOAT32_SAMPLES)]
    if torch.bfloat16 in dtypes and main != torch.bfloat16:
        chosen.append((torch.bfloat16, OTHER_SAMPLES))
    integer = next((d for d in (torch.int64, torch.bool) if d in dtypes), None)
    if integer is not None and integer != main:
        chosen.append((integer, OTHER_SAMPLES))
    return chosen


def _copy(x):
    """x with every tensor copied (same device, sizes, strides, offset)."""
    if isinstance(x, torch.Tensor):
        return support.exact_copy(x, x.device)
    if isinstance(x, list):
        return [_copy(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return x


def _call(op, i, a, k):
    return op.op(i, *a, **k)


# ---------------------------------------------------------------- compiling

# build_plan's reasons of the graphs compiled since the last clear.
_PLAN_REASONS: list[dict[str, str]] = []


@contextlib.contextmanager
def record_plan_reasons():
    """Wraps build_plan (looked up on its module at each compile) to keep
    each graph's eager-node reasons."""
    from torchneuron.compiler import plan as plan_module

    original = plan_module.build_plan

    def recording(gm, name, fuse=True):
        plan, reasons = original(gm, name, fuse=fuse)
        targets = {n.name: str(n.target) for n in gm.graph.nodes}
        _PLAN_REASONS.append({targets.get(k, k): v for k, v in reasons.items()})
        return plan, reasons

    plan_module.build_plan = recording
    try:
        yield
    finally:
        plan_module.build_plan = original


def run_compiled(op, inputs, backend):
    torch._dynamo.reset()
    fn = torch.compile(lambda i, a, k: _call(op, i, a, k), backend=backend, dynamic=False,
                       **({"options": OPTIONS} if backend == "neuron" else {}))
    out = fn(*inputs)
    torch.neuron.synchronize()
    return out


def _short(exc: BaseException) -> str:
    parts, seen, e = [], set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e).strip().splitlines()
        parts.append(f"{type(e).__name__}: {text[0] if text else ''}"[:300])
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return " <- ".join(parts[:3])


# ---------------------------------------------------------------- comparing


def _leaves(x):
    return tree_flatten(x)[0]


def compare(actual, expected, tol) -> str | None:
    """None when actual (compiled) equals expected (eager); tol=(atol, rtol)
    for floating tensors, None for exact."""
    a, e = _leaves(actual), _leaves(expected)
    if len(a) != len(e):
        return f"{len(a)} results, eager {len(e)}"
    for k, (x, y) in enumerate(zip(a, e)):
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor):
                return f"result {k}: {type(x).__name__}, eager a tensor"
            if x.dtype != y.dtype or x.shape != y.shape:
                return f"result {k}: {x.dtype}{list(x.shape)}, eager {y.dtype}{list(y.shape)}"
            if x.device != y.device:
                return f"result {k}: on {x.device}, eager on {y.device}"
            x, y = x.detach().cpu(), y.detach().cpu()
            if y.dtype == torch.chalf:  # the CPU has no equal or isclose for complex32
                x, y = (torch.view_as_real(t.resolve_conj().resolve_neg()) for t in (x, y))
            if torch.equal(x, y):
                continue
            atol, rtol = (0, 0) if tol is None or not y.dtype.is_floating_point else tol
            try:
                torch.testing.assert_close(x, y, atol=atol, rtol=rtol, equal_nan=True)
            except AssertionError as exc:
                return f"result {k}: " + " ".join(str(exc).split())[:400]
        elif isinstance(x, torch.Tensor):
            return f"result {k}: a tensor, eager {type(y).__name__}"
        elif not (x == y or (isinstance(x, float) and x != x and y != y)):
            return f"result {k}: {x!r}, eager {y!r}"
    return None


def _strides(x):
    return [tuple(t.stride()) if isinstance(t, torch.Tensor) else None for t in _leaves(x)]


# ---------------------------------------------------------------- one op


@dataclass
class OpResult:
    name: str
    compared: int = 0                       # samples compared
    graphs: int = 0                         # FX graphs compiled
    eager_nodes: dict = field(default_factory=dict)  # ATen op -> reason
    skipped: list = field(default_factory=list)      # (dtype, why) of samples not compared
    not_native: list = field(default_factory=list)   # (dtype, fallback ops)
    bugs: list = field(default_factory=list)         # (dtype, what)
    outside: list = field(default_factory=list)      # (dtype, what): also with aot_eager
    not_bitwise: list = field(default_factory=list)  # (dtype, what) within tolerance
    stride_diffs: list = field(default_factory=list)
    skip_all: str | None = None

    @property
    def status(self) -> str:
        if self.skip_all:
            return "skipped"
        if self.compared == 0:
            if self.not_native and not self.outside:
                return "not native"
            return "skipped"
        if self.graphs == 0:
            return "no graph"
        return "eager nodes" if self.eager_nodes else "fully lowered"


def run_sample(op, dtype, sample, result: OpResult):
    name = result.name
    inputs = (sample.input, sample.args, sample.kwargs)
    try:
        eager_in, compiled_in, aot_in = _copy(inputs), _copy(inputs), _copy(inputs)
    except Exception as exc:  # noqa: BLE001 - e.g. a sparse sample
        result.skipped.append((dtype, f"inputs not copyable: {_short(exc)}"))
        return
    torchneuron.clear_op_tracking()
    try:
        _seed_all()
        expected = _call(op, *eager_in)
        torch.neuron.synchronize()
    except Exception as exc:  # noqa: BLE001 - an invalid sample here: nothing to compare
        result.skipped.append((dtype, f"eager raised {_short(exc)}"))
        return
    fallbacks = torchneuron.get_fallback_ops()
    if fallbacks:
        result.not_native.append((dtype, sorted(fallbacks)))
        return
    exact = dtype == torch.float32 and name not in NOT_BITWISE
    tol = support.tolerances(op, dtype)
    metrics.clear_all()
    _PLAN_REASONS.clear()
    within = raised = False
    try:
        _seed_all()
        actual = run_compiled(op, compiled_in, "neuron")
        problem = compare((actual, compiled_in), (expected, eager_in), None)
        if problem is not None and tol is not None:
            within = compare((actual, compiled_in), (expected, eager_in), tol) is None
            if within and not exact:
                result.not_bitwise.append((dtype, problem))
                problem = None
            elif within:
                problem = "not bitwise equal (within the eager-vs-CPU tolerance): " + problem
    except Exception as exc:  # noqa: BLE001 - judged against aot_eager below
        problem = f"compiling or running raised {_short(exc)}"
        raised = True
    rows = metrics.get_compilation_metrics()
    reasons = {k: v for r in _PLAN_REASONS for k, v in r.items()}
    if problem is not None:
        # The same failure without our backend (Dynamo and AOTAutograd, the
        # graph run by eager neuron) is not ours: an error for an error, a
        # result as far from eager's for a wrong result.
        try:
            _seed_all()
            aot = run_compiled(op, aot_in, "aot_eager")
            level = None if within or tol is None else tol
            aot_problem = None if raised else compare((aot, aot_in), (expected, eager_in), level)
        except Exception as exc:  # noqa: BLE001
            aot_problem = f"raised {_short(exc)}"
        if aot_problem is not None:
            result.outside.append((dtype, f"{problem} (aot_eager: {aot_problem})"))
            return
        result.bugs.append((dtype, f"{problem}; {support.describe(sample)}; eager nodes "
                                   f"{sorted(reasons)}; graphs {len(rows)}"))
        result.compared += 1
        return
    result.compared += 1
    result.graphs += len(rows)
    result.eager_nodes.update(reasons)
    if _strides(actual) != _strides(expected):
        result.stride_diffs.append((dtype, f"{_strides(actual)} vs eager {_strides(expected)}"))


def run_op(op) -> OpResult:
    name = support.opinfo_id(op)
    result = OpResult(name)
    if support.is_random(op):
        result.skip_all = "random or uninitialised results"
        return result
    dtypes = case_dtypes(op)
    if not dtypes:
        result.skip_all = "no dtype the neuron runtime supports"
        return result
    mode = torchneuron.get_fallback_mode()
    torchneuron.set_fallback_mode("silent")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for dtype, limit in dtypes:
                try:
                    samples = neuron_samples(op, dtype, limit)
                except Exception as exc:  # noqa: BLE001
                    result.skipped.append((dtype, f"sample generation on neuron failed: {_short(exc)}"))
                    continue
                for sample in samples:
                    run_sample(op, dtype, sample, result)
    finally:
        torchneuron.set_fallback_mode(mode)
        torch._dynamo.reset()
        torchneuron.clear_op_tracking()
    if result.compared == 0 and result.skip_all is None and not result.not_native:
        result.skip_all = "; ".join(sorted({w for _, w in result.skipped + result.outside}))[:500] or "no sample"
    return result


# ---------------------------------------------------------------- tests

RESULTS: dict[str, OpResult] = {}
OPS = {support.opinfo_id(op): op for op in op_db}


def result_of(name) -> OpResult:
    if name not in RESULTS:
        with record_plan_reasons():
            RESULTS[name] = run_op(OPS[name])
    return RESULTS[name]


@pytest.fixture(autouse=True)
def _fresh_compiler(monkeypatch, tmp_path_factory, caplog):
    # Dynamo's trace logger logs at DEBUG: a failure's report would list every line.
    caplog.set_level(logging.WARNING, logger="torch.__trace")
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(tmp_path_factory.mktemp("tn-cache")))
    monkeypatch.delenv("TORCHNEURON_DEBUG_DIR", raising=False)
    yield
    torch._dynamo.reset()


def _dt(d):
    return support.dtype_name(d) if isinstance(d, torch.dtype) else str(d)


@pytest.mark.parametrize("name", sorted(OPS))
def test_compiled_matches_eager(name):
    result = result_of(name)
    known = {d: reason for (n, d), reason in KNOWN_MISMATCHES.items() if n == name}
    unknown = [(d, w) for d, w in result.bugs if d not in known and None not in known]
    stale = [d for d in known if not any(d is None or b == d for b, _ in result.bugs)]
    if unknown:
        lines = "\n".join(f"  - {_dt(d)}: {w}" for d, w in unknown)
        pytest.fail(f"{name}: compiled differs from eager neuron\n{lines}", pytrace=False)
    if stale:
        pytest.fail(f"{name}: the known mismatch at {[_dt(d) for d in stale]} no longer occurs, "
                    "remove it from KNOWN_MISMATCHES", pytrace=False)
    if known:
        pytest.xfail("; ".join(sorted(set(known.values()))))
    if result.status == "skipped":
        pytest.skip(result.skip_all or "; ".join(f"{_dt(d)}: {w}" for d, w in result.outside)[:500])
    if result.status == "not native":
        pytest.skip("eager neuron falls back to the CPU: "
                    + "; ".join(f"{_dt(d)}: {ops}" for d, ops in result.not_native)[:300])


def coverage(results: dict[str, OpResult]) -> dict:
    by = collections.defaultdict(list)
    for name, r in sorted(results.items()):
        by[r.status].append(name)
    # A getitem of an eager node's result runs eagerly too: listed only when
    # it is all there is.
    eager = {}
    for name in by["eager nodes"]:
        reasons = results[name].eager_nodes
        own = {k: v for k, v in reasons.items() if "getitem of a value from outside" not in v}
        eager[name] = own or reasons
    return {
        "counts": {k: len(v) for k, v in sorted(by.items())},
        "fully lowered": by["fully lowered"],
        "eager nodes": eager,
        "no graph": by["no graph"],
        "not native": by["not native"],
        "skipped": {n: results[n].skip_all or "; ".join(w for _, w in results[n].outside)
                    for n in by["skipped"]},
        "partly outside": {n: [f"{_dt(d)}: {w}" for d, w in r.outside]
                           for n, r in results.items() if r.outside and r.status != "skipped"},
        "bugs": {n: [f"{_dt(d)}: {w}" for d, w in r.bugs] for n, r in results.items() if r.bugs},
        "not bitwise": {n: [f"{_dt(d)}: {w}" for d, w in r.not_bitwise]
                        for n, r in results.items() if r.not_bitwise},
        "stride differences": {n: [f"{_dt(d)}: {w}" for d, w in r.stride_diffs]
                               for n, r in results.items() if r.stride_diffs},
    }


def format_coverage(cov: dict) -> str:
    lines = ["compile-vs-eager OpInfo coverage: " + ", ".join(f"{k}: {v}" for k, v in cov["counts"].items())]
    lines.append(f"\n== fully lowered ({len(cov['fully lowered'])})")
    lines += [f"  {n}" for n in cov["fully lowered"]]
    lines.append(f"\n== with eager nodes ({len(cov['eager nodes'])})")
    for n, reasons in cov["eager nodes"].items():
        lines.append(f"  {n}")
        lines += [f"      {why}" for why in sorted(set(reasons.values()))]
    for key in ("no graph", "not native"):
        lines.append(f"\n== {key} ({len(cov[key])})")
        lines += [f"  {n}" for n in cov[key]]
    for key in ("skipped", "partly outside", "bugs", "not bitwise", "stride differences"):
        lines.append(f"\n== {key} ({len(cov[key])})")
        for n, what in cov[key].items():
            lines.append(f"  {n}: {what}")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(1200)
def test_coverage_report(tmp_path_factory):
    """Writes the coverage lists; the fully-lowered count must not regress."""
    results = {name: result_of(name) for name in sorted(OPS)}
    cov = coverage(results)
    path = os.environ.get("TORCHNEURON_COMPILE_OPINFO_REPORT")
    base = path or str(tmp_path_factory.mktemp("compile_opinfo") / "compile_opinfo_coverage")
    base = base.removesuffix(".txt").removesuffix(".json")
    text = format_coverage(cov)
    with open(base + ".txt", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump(cov, f, indent=1, sort_keys=True, default=str)
    print(text.split("\n", 1)[0] + f"\n(lists in {base}.txt)")
    lowered = cov["counts"].get("fully lowered", 0)
    assert lowered >= FULLY_LOWERED_FLOOR, (
        f"only {lowered} OpInfo ops compile fully lowered, the floor is {FULLY_LOWERED_FLOOR} "
        f"(see {base}.txt)")
