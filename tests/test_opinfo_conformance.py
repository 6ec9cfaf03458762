"""Native neuron ops against PyTorch CPU, driven by PyTorch's OpInfo database.

Every OpInfo whose primary ATen op has a native neuron kernel is in scope
(see tests/opinfo_support.py for how scope is decided). For each such
OpInfo and each dtype it supports on the CPU (among the runtime's bool,
integer and floating dtypes; complex64 and complex128 are
tests/test_opinfo_conformance_complex.py's, with the same checks), a few deterministic, varied sample inputs run through the
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
table generator reads them; tests/opinfo_conformance.py says how the two
files share it); TORCHNEURON_CONFORMANCE_SAMPLES changes the number of
samples per case, TORCHNEURON_CONFORMANCE_DTYPES=float16,int8 limits the
cases to those dtypes.
"""

import pytest
import torch

import opinfo_conformance as conformance
import opinfo_float64_referee as float64_referee
import opinfo_support as support

SCOPES = conformance.SCOPES


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    conformance.write_report()


def test_scope_is_not_empty():
    """The suite finds native ops to test (registration lookup works)."""
    assert support.native_registrations(), "no aten op is registered for PrivateUse1"
    assert SCOPES, "no OpInfo maps to a natively registered op"


@pytest.mark.parametrize("scope,dtype", conformance.case_params(complex_dtypes=False))
def test_samples_match_cpu_without_fallback(scope, dtype):
    """Sample inputs give the CPU's results (values, shapes, dtypes, errors)
    through every variant, with no CPU fallback."""
    conformance.check_samples(scope, dtype)


@pytest.mark.parametrize("scope", [pytest.param(s, id=support.opinfo_id(s.op)) for s in SCOPES
                                   if s.op.error_inputs_func is not None])
def test_error_inputs_rejected_like_cpu(scope):
    """Invalid arguments raise the CPU's exception type on neuron, natively."""
    result = support.run_error_inputs(scope.op)
    conformance.save(result, "errors")
    conformance.judge(result, f"{result.opinfo} error inputs", support.known_issues(result.opinfo, "error_inputs"))


@pytest.mark.parametrize("dtype,variant", [(torch.float32, "grad"), (torch.bfloat16, "function")])
def test_float64_referee_rejects_a_wrong_convolution(dtype, variant):
    """The convolution referee accepts the CPU's own result and rejects one
    that is wrong by a small amount in one element."""
    op = next(o for o in support.op_db if o.name == "nn.functional.conv_transpose3d")
    name = support.opinfo_id(op)
    assert float64_referee.applies(name, variant, dtype)
    sample = next(iter(support.sample_inputs(op, dtype)))
    tol = support.tolerances(op, dtype)
    if variant == "grad":
        _, (expected,) = support._grad_variant(op, sample).call(sample.input, sample.args, sample.kwargs)
        check = lambda got: float64_referee.check_grad(op, sample, got, expected, tol, support.SEED)  # noqa: E731
        wrong = [g.clone() for g in expected]
        wrong[0].view(-1)[3] += 1e-3
    else:
        expected = op(sample.input, *sample.args, **sample.kwargs)
        check = lambda got: float64_referee.check(op, sample, got, expected, tol)  # noqa: E731
        wrong = expected.clone()
        wrong.view(-1)[3] += 0.1 + 0.05 * wrong.view(-1)[3].abs()
    assert check(expected) is None
    assert "float64 referee" in (check(wrong) or "")
