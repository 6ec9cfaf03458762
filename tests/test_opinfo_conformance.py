"""Native neuron ops against PyTorch CPU, driven by PyTorch's OpInfo database.

Every OpInfo whose primary ATen op has a native neuron kernel is in scope
(see tests/opinfo_support.py for how scope is decided). For each such
OpInfo and each dtype it supports on the CPU (among the ten the runtime
supports), a few deterministic, varied sample inputs run through the
function, method, in-place and out= variants on neuron and on the CPU:
results must match with dtype-appropriate tolerances (the OpInfo's own
overrides included) and no CPU fallback may run, not even through another
op the sample reaches. Random ops are checked for native execution, shapes
and dtypes only. The OpInfo's error inputs must be rejected as on the CPU.

Set TORCHNEURON_CONFORMANCE_REPORT=path.json to save the results (the ops
table generator reads them); TORCHNEURON_CONFORMANCE_SAMPLES changes the
number of samples per case.
"""

import json
import os

import pytest

import opinfo_support as support

SCOPES = support.in_scope_opinfos()
CASES = support.all_cases(SCOPES)
REPORT: dict = {"cases": [], "errors": [], "scope": []}


def _param(scope, dtype):
    name = support.opinfo_id(scope.op)
    marks = []
    reason = support.KNOWN_ISSUES.get((name, dtype)) or support.KNOWN_ISSUES.get((name, None))
    if reason:
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(scope, dtype, id=f"{name}-{support.dtype_name(dtype)}", marks=marks)


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    path = os.environ.get("TORCHNEURON_CONFORMANCE_REPORT")
    if not path:
        return
    REPORT["scope"] = [{"opinfo": support.opinfo_id(s.op), "primary": s.primary, "how": s.how,
                        "dtypes": [support.dtype_name(d) for d in support.test_dtypes(s.op)]}
                       for s in SCOPES]
    with open(path, "w") as f:
        json.dump(REPORT, f, indent=1, sort_keys=True)


def _save(result, key):
    REPORT[key].append({
        "opinfo": result.opinfo,
        "dtype": support.dtype_name(result.dtype) if result.dtype is not None else None,
        "samples": result.samples, "calls": result.calls, "problems": result.problems,
        "native_ops": sorted(result.native_ops),
    })


def _fail_with(result, what):
    lines = "\n".join(f"  - {p}" for p in result.problems[:20])
    more = len(result.problems) - 20
    pytest.fail(f"{what}: {len(result.problems)} problem(s) in {result.calls} call(s)\n{lines}"
                + (f"\n  ... and {more} more" if more > 0 else ""), pytrace=False)


def test_scope_is_not_empty():
    """The suite finds native ops to test (registration lookup works)."""
    assert support.native_registrations(), "no aten op is registered for PrivateUse1"
    assert SCOPES, "no OpInfo maps to a natively registered op"


@pytest.mark.parametrize("scope,dtype", [_param(s, d) for s, d in CASES])
def test_samples_match_cpu_without_fallback(scope, dtype):
    """Sample inputs give the CPU's results (values, shapes, dtypes, errors)
    through every variant, with no CPU fallback."""
    result = support.run_case(scope.op, dtype)
    _save(result, "cases")
    assert result.calls > 0 or result.problems, "no sample ran"
    if result.problems:
        _fail_with(result, f"{result.opinfo} at {support.dtype_name(dtype)}")


def _error_param(scope):
    reason = support.KNOWN_ISSUES.get((support.opinfo_id(scope.op), "error_inputs"))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(scope, id=support.opinfo_id(scope.op), marks=marks)


@pytest.mark.parametrize("scope", [_error_param(s) for s in SCOPES
                                   if s.op.error_inputs_func is not None])
def test_error_inputs_rejected_like_cpu(scope):
    """Invalid arguments raise the CPU's exception type on neuron, natively."""
    result = support.run_error_inputs(scope.op)
    _save(result, "errors")
    if result.problems:
        _fail_with(result, f"{result.opinfo} error inputs")
