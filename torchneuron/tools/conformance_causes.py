"""Why a test fails on neuron: the table torchneuron.tools.conformance groups
failures by, and the documented exceptions (tests that pass on the CPU and
are expected to fail on neuron, each with its reason).

A cause is the first rule whose pattern matches the failure message; a
message no rule knows becomes its own cause, its exception type and first
line with numbers and addresses masked so that the same failure in many
dtypes or shapes counts as one.
"""

from __future__ import annotations

import re

# (pattern on the failure message, cause). Order matters: first match wins.
CAUSES: list[tuple[str, str]] = [
    # A test file newer (or from a fork) than the installed torch: before the
    # dtype rules, since the missing name is often a dtype (torch.bcomplex32).
    (r"module 'torch(\.\w+)*' has no attribute|cannot import name '\w+' from 'torch",
     "the test uses a name this torch does not have (test file and torch versions differ)"),
    # A value comparison that failed, before the dtype rules: its message
    # prints the inputs, dtype and all (a complex128 value that differs).
    (r"(Tensor-likes|Scalars) are not (close|equal)",
     "a result differs from the expected value"),
    (r"complex(32|64|128)?|ComplexFloat|ComplexDouble|ComplexHalf",
     "complex dtypes are not supported on neuron yet"),
    (r"\buint(16|32|64)\b|UInt(16|32|64)",
     "uint16/uint32/uint64 are not supported on neuron yet"),
    (r"NRT_MAX_DIMS|more than (16|25) dim", "more than 25 dimensions"),
    (r"CPU fallback", "an op that cannot run through the CPU fallback"),
    (r"process died", "the process crashed"),
    # assertRaisesRegex words a mismatch '"<pattern>" does not match "<message>"'.
    (r"did not raise|not raised|Regex pattern did not match|Regex didn't match|\" does not match \"",
     "an error is missing or worded differently"),
    (r"warning", "a warning is missing or different"),
]

# (pattern on the test's node id, reason). A test listed here that passes on
# the CPU is counted as a documented exception, not as a failure of ours.
# The list is empty until a run of the upstream files finds a test that
# asserts something neuron cannot honestly do (CUDA-only behaviour, say);
# docs/conformance.md keeps the same list with its reasons.
DOCUMENTED_EXCEPTIONS: list[tuple[str, str]] = []

_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(\.\d+)?(e[-+]?\d+)?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def normalise(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    first = _ADDRESS.sub("0x…", first)
    first = _NUMBER.sub("N", first)
    return first[:160]


# Upstream's TestCase appends how to rerun the test, naming it: a test named
# ..._complex64 must not make every failure of it a complex one.
_REPRO = re.compile(r"\s*To execute this test, run the following")


def cause_of(outcome: str, message: str) -> str:
    message = _REPRO.split(message, maxsplit=1)[0]
    for pattern, cause in CAUSES:
        if re.search(pattern, message):
            return cause
    if outcome == "xpassed":
        return "passed unexpectedly (an upstream expectedFailure for this device)"
    return normalise(message)


def documented_exception(nodeid: str, message: str) -> str | None:
    for pattern, reason in DOCUMENTED_EXCEPTIONS:
        if re.search(pattern, nodeid):
            return reason
    return None
