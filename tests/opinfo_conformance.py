"""What the two OpInfo conformance files share: test_opinfo_conformance.py
holds the real, integer and bool dtypes and the error inputs,
test_opinfo_conformance_complex.py complex64 and complex128, in a file of
its own so that `--dist loadfile` gives the halves to different workers.

Here: the cases, the check of one case, the judgement of its problems
against KNOWN_ISSUES, and the JSON report. The report
(TORCHNEURON_CONFORMANCE_REPORT=path.json) collects the cases of every
conformance file the process ran and is rewritten as each file ends, so a
single-process run of both files (what torchneuron.tools.gen_ops_table
does) leaves all of them in it."""

import json
import os

import pytest

import opinfo_support as support

SCOPES = support.in_scope_opinfos()
REPORT: dict = {"cases": [], "errors": [], "scope": []}


def case_params(complex_dtypes: bool) -> list:
    """pytest params (scope, dtype) of the complex cases, or of the others."""
    return [pytest.param(s, d, id=f"{support.opinfo_id(s.op)}-{support.dtype_name(d)}")
            for s, d in support.all_cases(SCOPES) if d.is_complex == complex_dtypes]


def write_report() -> None:
    path = os.environ.get("TORCHNEURON_CONFORMANCE_REPORT")
    if not path:
        return
    REPORT["scope"] = [{"opinfo": support.opinfo_id(s.op), "primary": s.primary, "how": s.how,
                        "dtypes": [support.dtype_name(d) for d in support.test_dtypes(s.op)]}
                       for s in SCOPES]
    with open(path, "w") as f:
        json.dump(REPORT, f, indent=1, sort_keys=True)


def save(result, key) -> None:
    REPORT[key].append({
        "opinfo": result.opinfo,
        "dtype": support.dtype_name(result.dtype) if result.dtype is not None else None,
        "samples": result.samples, "calls": result.calls, "problems": result.problems,
        "native_ops": sorted(result.native_ops),
    })


def judge(result, what, known) -> None:
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


def check_samples(scope, dtype) -> None:
    result = support.run_case(scope.op, dtype)
    save(result, "cases")
    assert result.calls > 0 or result.problems, "no sample ran"
    judge(result, f"{result.opinfo} at {support.dtype_name(dtype)}", support.known_issues(result.opinfo, dtype))
