"""Negative-test helpers shared by the tests/test_nki_*.py files.

Every NkiError names the rule it enforces (``error.rule``). A negative test
asserts that name, so it fails both when the kernel runs and when it stops at
some other rule than the one under test.
"""

import pytest

import torchneuron.nki as nki
from torchneuron.nki import NkiError


def nki_error(run, *args, match=None, **kwargs):
    """The NkiError raised by run(*args, **kwargs); the test fails if none is.
    match: a regular expression the message must contain."""
    with pytest.raises(NkiError, match=match) as info:
        run(*args, **kwargs)
    return info.value


def expect_rule(rule, run, *args, match=None, **kwargs):
    """Asserts that run(*args, **kwargs) breaks `rule`; returns the NkiError."""
    error = nki_error(run, *args, match=match, **kwargs)
    assert error.rule == rule, error
    return error


def rule_of(kernel, *args, match=None):
    """The rule `kernel` (a plain function or an nki.jit kernel) breaks when
    simulated on args."""
    return nki_error(nki.simulate(kernel), *args, match=match).rule


def rule_of_body(body, *args, match=None):
    """As rule_of, for a kernel that calls body(*args) and returns nothing:
    body is often a lambda, whose value (a tile) is no kernel result."""
    def kernel(*tensors):
        body(*tensors)

    return rule_of(kernel, *args, match=match)
