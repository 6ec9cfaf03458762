"""Native neuron ops against PyTorch CPU, driven by PyTorch's OpInfo database.

Every OpInfo whose primary ATen op has a native neuron kernel is in scope
(see tests/opinfo_support.py for how scope is decided). For each such
OpInfo and each dtype it supports on the CPU (among the ten the runtime
supports), a few deterministic, varied sample inputs run through the
function, method, in-place and out= variants on neuron and on the CPU:
results must match with dtype-appropriate tolerances (the OpInfo's own
overrides included) and no CPU fallback may run, not even through another
op the sample reaches. At float32 (else float64) the gradients of the first
samples are compared too, which runs the backward kernels. Random ops are
checked for native execution, shapes and dtypes only. The OpInfo's error
inputs must be rejected as on the CPU. Known mismatches (KNOWN_ISSUES in
opinfo_support.py) turn a case into an xfail only if they are all its
problems, and fail it once they no longer occur.

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
    return pytest.param(scope, dtype, id=f"{name}-{support.dtype_name(dtype)}")


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


def _judge(result, what, known):
    """Fails on a problem no known issue covers, or on a known issue that no
    longer occurs (strict); xfails when every problem is known."""
    unknown = [p for p in result.problems if not any(k.match in p for k in known)]
    stale = [k for k in known if not any(k.match in p for p in result.problems)]
    if unknown:
        lines = "\n".join(f"  - {p}" for p in unknown[:20])
        more = len(unknown) - 20
        pytest.fail(f"{what}: {len(unknown)} problem(s) in {result.calls} call(s)\n{lines}"
                    + (f"\n  ... and {more} more" if more > 0 else ""), pytrace=False)
    if stale:
        pytest.fail(f"{what}: known issue no longer occurs, remove it from KNOWN_ISSUES: "
                    + "; ".join(k.reason for k in stale), pytrace=False)
    if known:
        pytest.xfail("; ".join(k.reason for k in known))


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
    _judge(result, f"{result.opinfo} at {support.dtype_name(dtype)}",
           support.known_issues(result.opinfo, dtype))


@pytest.mark.parametrize("scope", [pytest.param(s, id=support.opinfo_id(s.op)) for s in SCOPES
                                   if s.op.error_inputs_func is not None])
def test_error_inputs_rejected_like_cpu(scope):
    """Invalid arguments raise the CPU's exception type on neuron, natively."""
    result = support.run_error_inputs(scope.op)
    _save(result, "errors")
    _judge(result, f"{result.opinfo} error inputs",
           support.known_issues(result.opinfo, "error_inputs"))
