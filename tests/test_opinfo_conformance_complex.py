"""The OpInfo conformance suite (tests/test_opinfo_conformance.py) at
complex64 and complex128: every in-scope OpInfo the CPU supports in a
complex dtype, its samples through every variant against the CPU with no
fallback, and its gradients (Wirtinger calculus, as PyTorch defines it) at
complex64, else complex128, where the op has a complex backward. Complex
ops that still reach the CPU fallback are KNOWN_ISSUES entries
(opinfo_support.COMPLEX_LINALG_FALLBACKS), strict like
every entry: making one native fails its case until the entry goes."""

import pytest

import opinfo_conformance as conformance


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    conformance.write_report()


@pytest.mark.parametrize("scope,dtype", conformance.case_params(complex_dtypes=True))
def test_complex_samples_match_cpu_without_fallback(scope, dtype):
    conformance.check_samples(scope, dtype)
