"""Generate docs/ops.md: every ATen op with a native neuron kernel, its
verified dtypes and the family that implements it.

    python -m torchneuron.tools.gen_ops_table               # runs the suite
    python -m torchneuron.tools.gen_ops_table --report r.json

The op list comes from the dispatcher (kernels registered for PrivateUse1);
the family from the source file of each registration. The dtypes are what
the OpInfo conformance suite (tests/test_opinfo_conformance.py) verified: a
dtype is ticked for an op when the op ran natively inside a sample of that
dtype whose results matched the CPU with no fallback. Without --report the
suite runs first (a few minutes), from a source checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]
SHORT = {"bool": "b8", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32",
         "int64": "i64", "float16": "f16", "bfloat16": "bf16", "float32": "f32",
         "float64": "f64", "complex64": "c64", "complex128": "c128"}
# Registration source file (stem prefix) -> family.
FAMILIES = [("pointwise", "pointwise"), ("reduce", "reduce"), ("index", "index"),
            ("nonzero", "index"), ("shape", "shape"), ("sort", "shape"), ("random", "random"),
            ("copy", "core"), ("tensor_ops", "core"), ("allocator", "core"),
            ("composite", "index"), ("gemm", "gemm"), ("nn_", "nn"), ("attention", "attention"),
            ("optim", "optim"), ("conv", "vision"), ("pool", "vision"), ("upsample", "vision"),
            ("pad", "vision"), ("im2col", "vision"), ("embedding_bag", "nn"), ("renorm", "nn"),
            ("histc", "reduce")]


def run_suite(report: str) -> int:
    env = dict(os.environ, TORCHNEURON_CONFORMANCE_REPORT=report)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
           str(REPO / "tests" / "test_opinfo_conformance.py"),
           str(REPO / "tests" / "test_opinfo_conformance_complex.py")]
    print("running:", " ".join(cmd), file=sys.stderr)
    return subprocess.call(cmd, env=env, cwd=REPO, stdout=sys.stderr)


def registrations() -> dict[str, str]:
    """{"aten::add.Tensor": family} for every native aten registration."""
    import re

    import torch
    import torchneuron  # noqa: F401 - registers the kernels

    out = {}
    for name in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        if not name.startswith("aten::"):
            continue
        dump = torch._C._dispatch_dump(name)
        m = re.search(r"^PrivateUse1: registered at (\S+?):\d+", dump, re.MULTILINE)
        stem = Path(m.group(1)).stem if m else "?"
        family = next((fam for prefix, fam in FAMILIES if stem.startswith(prefix)), stem)
        out[name] = family if stem == family else f"{family} ({stem}.cpp)"
    return out


# ------------------------------------------------------------------ probing

class _Unprobeable(Exception):
    pass


UNTRACKED: set[str] = set()  # registered kernels that ran without counting themselves


def _probe_tensor(dtype, device, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.randint(0, 2, (4, 4), generator=g).bool()
    elif dtype.is_floating_point:
        t = (torch.randn(4, 4, generator=g) * 2).to(dtype)
    elif dtype.is_complex:
        t = torch.randn(4, 4, generator=g, dtype=dtype) * 2
    else:  # small non-negative integers: valid shifts, counts and classes
        t = torch.randint(0, 4, (4, 4), generator=g).to(dtype)
    return t.to(device)


def _probe_args(schema, dtype, device):
    """Positional and keyword arguments for a generic call: (4, 4) tensors
    of `dtype`, 1 for numbers and ints, False for bools, defaults elsewhere;
    out= tensors are empty (resized by the op) of `dtype`."""
    import torch

    args, kwargs = [], {}
    for index, arg in enumerate(schema.arguments):
        kind = str(arg.type)
        if arg.is_out:
            value = torch.empty(0, dtype=dtype, device=device)
        elif kind == "Optional[number]" and arg.default_value is None:
            value = 1  # e.g. clamp's min and max: one of them is needed
        elif arg.has_default_value():
            continue
        elif kind == "Tensor":
            value = _probe_tensor(dtype, device, index)
        elif kind in ("number", "int", "SymInt", "float"):
            value = 1
        elif kind == "bool":
            value = False
        elif kind.startswith("Optional["):
            value = None
        else:
            raise _Unprobeable(kind)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs


# Overloads whose CPU kernel crashes the process on the generic inputs (a
# PyTorch bug: batch norm with training=False and no running statistics
# reads the statistics it was not given). Not probed; OpInfo covers them.
def cpu_crashes_on_probe(qualified: str) -> bool:
    return "batch_norm" in qualified


def probe(qualified: str, dtype, random_values: bool) -> bool:
    """Calls one overload on generic inputs on the CPU and on neuron: True if
    the CPU accepts them, neuron runs this overload natively with no
    fallback, and the results agree (shapes and dtypes only for random ops)."""
    import torch
    import torchneuron

    if cpu_crashes_on_probe(qualified):
        return False
    torchneuron.clear_op_tracking()
    name, _, overload = qualified[len("aten::"):].partition(".")
    op = getattr(getattr(torch.ops.aten, name), overload or "default")
    try:
        cpu_args, cpu_kwargs = _probe_args(op._schema, dtype, "cpu")
        neuron_args, neuron_kwargs = _probe_args(op._schema, dtype, "neuron")
    except _Unprobeable:
        return False
    try:
        expected = op(*cpu_args, **cpu_kwargs)
    except Exception:  # noqa: BLE001 - no generic input for this op/dtype
        return False
    torchneuron.clear_op_tracking()
    try:
        actual = op(*neuron_args, **neuron_kwargs)
        torch.neuron.synchronize()  # a kernel error must not leak into the next probe
    except Exception:  # noqa: BLE001 - counts as unverified
        return False
    if torchneuron.get_fallback_ops():
        return False
    if not counted(qualified, torchneuron.get_executed_ops()):
        UNTRACKED.add(qualified)  # its kernel ran (it is registered) but does not count itself
    to_cpu = torch.utils._pytree.tree_map(
        lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, actual)
    try:
        if random_values:
            shape = torch.utils._pytree.tree_map(
                lambda t: (t.shape, t.dtype) if isinstance(t, torch.Tensor) else t, to_cpu)
            want = torch.utils._pytree.tree_map(
                lambda t: (t.shape, t.dtype) if isinstance(t, torch.Tensor) else t, expected)
            return shape == want
        torch.testing.assert_close(to_cpu, expected, equal_nan=True, check_stride=False)
    except AssertionError:
        return False
    return True


def counted(qualified: str, executed) -> bool:
    """Did the overload count itself? Native complex paths count under the
    op's base name ("aten::lerp(complex)" for lerp_.Tensor, lerp.Tensor_out)."""
    if qualified in executed:
        return True
    name = qualified[len("aten::"):].partition(".")[0]
    full = qualified[len("aten::"):]
    return any(k in executed for k in (f"aten::{name}(complex)", f"aten::{name.rstrip('_')}(complex)",
                                       f"aten::{full}(complex)"))


def overload_exists(qualified: str) -> bool:
    import torch

    name, _, overload = qualified[len("aten::"):].partition(".")
    packet = getattr(torch.ops.aten, name, None)
    return packet is not None and (overload or "default") in packet.overloads()


# Written by hand, kept here so that regenerating the table keeps it.
DIFFERENCES_FROM_CPU = """
## Where we deliberately differ from PyTorch CPU

PyTorch CPU is the reference for semantics (shapes, dtypes, promotion, which
calls are errors, the special values the math defines). Where our result is
defined more exactly than the CPU's, or the CPU's answer depends on the host
CPU's ISA, we keep ours, and the tests check it against an exact reference
(`tests/exact_oracle.py`: float64 math rounded once), not against the CPU:

- **GELU(+inf) = +inf** (both forms; SiLU too), as x Φ(x) is. PyTorch CPU's
  answer depends on its kernel path: NaN for float16 on an AVX512-FP16
  Xeon, +inf on an AVX2 EPYC. GELU(-inf) is NaN on both devices, from the
  formula's -inf · 0.
- **float16/bfloat16 exp, GELU (exact and tanh forms) and SiLU are correctly
  rounded**: each is a table of the 2^16 results computed in float64 and
  rounded once to the type (`RT_DEFINE_TABLE16`; the rounding goes through a
  round-to-odd float so that it rounds once). PyTorch CPU computes in
  float32 and rounds again, or natively in float16 on AVX512-FP16 hosts, so
  some results differ by one ulp (577 of the 65,536 float16 GELU inputs on
  an AVX512-FP16 Xeon), and which ones depends on the host.
- **float32 exp, log, tanh, sigmoid, erf, GELU, GELU-tanh and SiLU** are our
  vectorisable functions (`runtime/src/ops/vmath.h`) with a stated bound
  against the exact result: 1, 1, 2, 2, 2, 6.5, 1 and 3.5 ulp. Every ISA
  clone (AVX-512, AVX2, baseline) gives the same bits. PyTorch CPU's
  results differ by a few ulp and from one ISA path to another; for
  x < -4 its GELU, 0.5 x (1 + erf(x / √2)), cancels and keeps few correct
  digits, where ours (from erfc) keeps its bound.
- **float16/bfloat16 add and sub with alpha ≠ 1** compute a + alpha·b in
  float32 and round once (alpha rounded to the type first, as the CPU
  does). The CPU's scalar path (small or strided tensors) rounds alpha·b to
  the 16-bit type before adding; its vectorised path does not, like ours.
- **16-bit (bi)linear upsampling** computes in float32 and rounds once; the
  CPU rounds its weights and every step to the 16-bit type. So does 16-bit
  **grid_sample**, whose CPU float16 result on a large image holds NaN.
- **grid_sample with non-finite grid values** follows PyTorch's CUDA kernel:
  NaN clips to 0 under border and reflection padding, and under zeros
  padding such a point reads nothing (0); the CPU's vectorised 2-d kernel
  gives NaN there.
- **segment_reduce's max/min backward** shares a tied extreme's gradient
  equally among the ties whatever its sign; the CPU divides only positive
  gradients (it finds the ties by testing the gradient's sign).
- **int32/int64 INT_MIN / -1** (division, floor division, remainder, fmod)
  wraps to INT_MIN with remainder 0, as the narrower integer types do on the
  CPU; the CPU's own int32/int64 kernels trap (SIGFPE) and kill the process.
- **An index out of range** raises `torchneuron.IndexOutOfRangeError`, both
  an `IndexError` and a `RuntimeError`: the CPU raises one or the other
  depending on the op (and for index_select even on the path), and our
  kernels find the bad index asynchronously, so the error usually surfaces
  at the next synchronisation (`.cpu()`, `.item()`,
  `torch.neuron.synchronize()`), as CUDA's device-side asserts do. Either
  `except` clause written for the CPU catches it.
- **The special functions** (lgamma, digamma, polygamma, zeta, igamma,
  igammac, i0/i0e/i1/i1e, the modified Bessel K0/K1 and their scaled forms,
  J0/J1/Y0/Y1, the spherical j0, Airy Ai, erfcx, ndtri, log_ndtr and the
  orthogonal polynomials; `runtime/src/ops/special/`) are computed in
  double and rounded once, float32 included (the CPU computes float32 in
  float arithmetic, off by several ulp for erfcx, digamma near its poles and
  the high-degree polynomials). Measured against mpmath, our float64 results
  are within about 1e-15 relative (Airy Ai 1e-13 absolute where its series
  meets its asymptotic form; igamma/igammac about a |log x| eps for large
  a), where the CPU's J0/J1/Y0/Y1 and Ai are off by up to 4e-7 and 1.6e-4
  absolute and its trigamma by 5e-10. Special values follow the CPU except
  where its value is an artifact of its formula: trigamma (polygamma(1)) is
  +inf at its poles 0, -1, -2, ... (the CPU returns sin(πx)'s rounding
  error, 6.6e32); the orthogonal polynomials of a NaN are NaN (the CPU
  returns an uninitialised value for some degrees); J and Y of huge
  arguments (1e17) are the C library's correctly reduced values (the CPU's
  have lost every digit). The OpInfo conformance check therefore compares
  elements where the two devices disagree with mpmath's value
  (`tests/opinfo_exact_special.py`).
"""


def render(report: dict, regs: dict[str, str]) -> str:
    verified: dict[str, set[str]] = defaultdict(set)
    users: dict[str, set[str]] = defaultdict(set)
    for case in report["cases"]:
        for op in case["native_ops"]:
            verified[op].add(case["dtype"])
            users[op].add(case["opinfo"])
    probed: dict[str, set[str]] = defaultdict(set)
    import torch

    for n in regs:
        if verified.get(n) or not overload_exists(n):
            continue
        for d in DTYPES:
            if probe(n, getattr(torch, d), regs[n].startswith("random")):
                probed[n].add(d)
    failed: dict[str, set[str]] = defaultdict(set)  # primary op -> dtypes with a failing case
    primary = {s["opinfo"]: s["primary"] for s in report["scope"]}
    by_opinfo: dict[str, dict[str, bool]] = defaultdict(dict)
    for case in report["cases"]:
        ok = not case["problems"]
        by_opinfo[case["opinfo"]][case["dtype"]] = ok
        if not ok:
            for op in primary.get(case["opinfo"], []):
                failed[op].add(case["dtype"])

    # Ops whose overload does not exist (a registration under a wrong name)
    # still show: they are what the dispatcher holds.
    names = sorted(regs, key=lambda n: (regs[n], n))
    per_family: dict[str, int] = defaultdict(int)
    for n in names:
        per_family[regs[n].split(" ")[0]] += 1
    n_verified = sum(1 for n in names if verified.get(n))
    n_probed = sum(1 for n in names if probed.get(n))
    cases = report["cases"]
    n_pass = sum(1 for c in cases if not c["problems"])
    errors = report.get("errors", [])
    e_pass = sum(1 for c in errors if not c["problems"])

    lines = [
        "# Native neuron ops",
        "",
        "<!-- Generated by `python -m torchneuron.tools.gen_ops_table`; do not edit. -->",
        "",
        "Every ATen operator overload with a native `neuron` kernel (registered for the",
        "PrivateUse1 dispatch key), the family that implements it, and the dtypes the OpInfo",
        "conformance suite (`tests/test_opinfo_conformance.py`) verified: ✓ the op ran natively",
        "in a sample of that dtype whose results matched PyTorch CPU with no fallback;",
        "p: no OpInfo sample reached it, but a generic probe ((4, 4) tensors of the dtype,",
        "scalars 1) ran it natively and matched the CPU (shapes and dtypes for random ops);",
        "✗ an OpInfo whose primary op this is failed at that dtype; blank: not verified.",
        "Ops that anything not in this table reaches run through the CPU fallback",
        "(`torchneuron.get_fallback_ops()`).",
        "",
        f"- {len(names)} native ATen overloads ("
        + ", ".join(f"{fam}: {k}" for fam, k in sorted(per_family.items())) + f"); "
        f"{n_verified} verified by OpInfo samples in at least one dtype, {n_probed} more "
        f"by a generic probe, {len(names) - n_verified - n_probed} not verified.",
        f"- OpInfo conformance: {len(report['scope'])} OpInfos in scope, "
        f"{n_pass}/{len(cases)} (OpInfo, dtype) cases pass, "
        f"{e_pass}/{len(errors)} error-input checks pass.",
    ]
    if UNTRACKED:
        lines.append("- Kernels that ran without counting themselves in "
                     "`torchneuron.get_executed_ops()`: "
                     + ", ".join(f"`{n[6:]}`" for n in sorted(UNTRACKED)) + ".")
    lines += [
        "",
        "| ATen op | family | " + " | ".join(SHORT[d] for d in DTYPES) + " | exercised by |",
        "|---|---|" + "---|" * len(DTYPES) + "---|",
    ]
    for n in names:
        marks = []
        for d in DTYPES:
            marks.append("✓" if d in verified.get(n, ()) else "p" if d in probed.get(n, ())
                         else "✗" if d in failed.get(n, ()) else "")
        who = ", ".join(sorted(users.get(n, ())))
        if not overload_exists(n):
            who = "**no such ATen overload: the registration is dead**"
        if len(who) > 60:
            who = who[:57] + "..."
        lines.append(f"| `{n[6:]}` | {regs[n]} | " + " | ".join(marks) + f" | {who} |")

    lines += [
        "",
        "## OpInfo conformance by OpInfo",
        "",
        "Each OpInfo in scope (its primary ATen op is native), with the dtypes whose cases",
        "pass and fail.",
        "",
        "| OpInfo | primary op | pass | fail |",
        "|---|---|---|---|",
    ]
    for s in sorted(report["scope"], key=lambda s: s["opinfo"]):
        res = by_opinfo.get(s["opinfo"], {})
        ok = " ".join(SHORT[d] for d in DTYPES if res.get(d) is True)
        bad = " ".join(SHORT[d] for d in DTYPES if res.get(d) is False)
        prim = ", ".join(sorted({p[6:].split(".")[0] for p in s["primary"]}))
        lines.append(f"| `{s['opinfo']}` | {prim} | {ok} | {bad} |")
    return "\n".join(lines) + "\n" + DIFFERENCES_FROM_CPU


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", help="JSON written by the conformance suite "
                        "(TORCHNEURON_CONFORMANCE_REPORT); default: run the suite now")
    parser.add_argument("--output", default=str(REPO / "docs" / "ops.md"))
    args = parser.parse_args(argv)
    report_path = args.report
    if report_path is None:
        fd, report_path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        run_suite(report_path)  # failures are expected while ops are missing
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {}
    finally:
        if args.report is None:
            os.unlink(report_path)
    if not report.get("cases"):
        print(f"{report_path}: no conformance results", file=sys.stderr)
        return 1
    text = render(report, registrations())
    Path(args.output).write_text(text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
