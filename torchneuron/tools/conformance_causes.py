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
    # Layouts neuron has no kernels for: their dispatch keys are named in
    # the message ("... from the 'Sparseneuron' backend").
    (r"the 'Sparse\w*' backend", "sparse tensors are not supported on neuron"),
    (r"the 'Quantized\w*' backend", "quantized tensors are not supported on neuron"),
    (r"the 'NestedTensor\w*' backend", "nested tensors are not supported on neuron"),
    # A test file newer (or from a fork) than the installed torch: before the
    # dtype rules, since the missing name is often a dtype (torch.bcomplex32).
    (r"module 'torch(\.\w+)*' has no attribute|cannot import name '\w+' from 'torch",
     "the test uses a name this torch does not have (test file and torch versions differ)"),
    (r"module 'numpy' has no attribute",
     "the test uses a name this NumPy does not have (test file and NumPy versions differ)"),
    # an argument this torch's signature lacks or types otherwise
    (r"got an unexpected keyword argument|\(\): argument '\w+' must be [\w ]+, (not|but found)",
     "the test calls a signature this torch does not have (test file and torch versions differ)"),
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

# (pattern on the test's node id, pattern on its failure message, reason):
# tests that pass on the CPU and are expected to fail on neuron. Both
# patterns must match, so another failure of the same test still counts as
# ours. docs/conformance.md keeps the same list with its reasons.
_ASYNC_INDEX = ("an out-of-range index tensor is found by the device kernel and raised at the next "
                "synchronisation, as CUDA's device-side assert is (upstream skips this check on CUDA); "
                "the error is torchneuron.IndexOutOfRangeError, an IndexError, but not raised by the "
                "indexing call itself")
_UINT8_RESAMPLE = ("neuron has the CPU's uint8 bilinear and bicubic kernels (bit for bit); the test allows "
                   "uint8 on the 'cpu' device only, while its sibling test_upsamplingBiMode2d_consistency "
                   "requires uint8 on every device but CUDA")
_ENCODER_FAST_PATH = ("torch.nn.TransformerEncoderLayer takes its fast path on the PrivateUse1 device as on "
                      "cpu and cuda; neuron's native _transformer_encoder_layer_fwd gives the CPU and CUDA fast "
                      "path's result (NaN for a fully masked row), while the test expects the fast path on cpu "
                      "and cuda only (fast_path_device = is_cuda or is_cpu) and the slow path's zeros elsewhere")
_SPARSE = ("sparse layouts are outside issue 20's scope (\"except sparse and quantized layouts\"): neuron "
           "registers no SparsePrivateUse1 kernels, and the test is about sparse tensors")
_QUANTIZED = ("quantized tensors are outside issue 20's scope: neuron registers no QuantizedPrivateUse1 kernels; "
              "the test's dense part passes on neuron (checked with its quantized tensors taken out)")
_FLOAT8 = ("float8 dtypes are not neuron dtypes (issue 20 asks for complex, uint16/32/64 and uint8 resampling, "
           "not float8): neuron refuses them at allocation; the test's other dtypes pass on neuron (checked with "
           "its float8 dtypes taken out)")
_ASYNC_DIVISION = ("an integer division by a zero on the device is found by the kernel and raised at the next "
                   "synchronisation (NEURON_LAUNCH_BLOCKING=1: at the call), as a device error; the test's CPU "
                   "branch expects that error at the call, its branch for other devices CUDA's bit patterns with "
                   "no error, which neuron does not copy")
_COMPLEX_HALF_POW = ("pow of a float16 tensor and a complex number computes in complex32, for which the CPU, and "
                     "neuron with it, has no pow kernel (\"not implemented for 'ComplexHalf'\"); the test expects "
                     "that error on the CPU only and CUDA's complex32 pow on every other device")
DOCUMENTED_EXCEPTIONS: list[tuple[str, str, str]] = [
    (r"test_binary_ufuncs\.py::TestBinaryUfuncsDevice\w*::test_fmod_remainder_by_zero_integral_neuron_",
     r"ZeroDivisionError", _ASYNC_DIVISION),
    (r"test_binary_ufuncs\.py::TestBinaryUfuncsDevice\w*::test_(complex_scalar_pow_tensor|pow)_neuron_float16$",
     r"not implemented for 'ComplexHalf'", _COMPLEX_HALF_POW),
    (r"test_tensor_creation_ops\.py::TestTensorCreation\w*::test_(cat|fill)_all_dtypes_and_devices_neuron$",
     r"dtype Float8_\w+ is not supported on the neuron device", _FLOAT8),
    (r"test_type_promotion\.py::TestTypePromotion\w*::test_sparse_", r"the 'Sparse\w*' backend", _SPARSE),
    (r"test_tensor_creation_ops\.py::TestTensorCreation\w*::test_tensor_ctor_device_inference_neuron",
     r"the 'Sparse\w*' backend", _SPARSE),
    (r"test_shape_ops\.py::TestShapeOps\w*::test_flip_neuron_float32$", r"the 'Quantized\w*' backend", _QUANTIZED),
    (r"test_view_ops\.py::TestOldViewOps\w*::test_(flatten|ravel)_neuron$", r"the 'Quantized\w*' backend",
     _QUANTIZED),
    (r"test_indexing\.py::TestIndexing\w*::test_advancedindex_neuron_", r"IndexError not raised", _ASYNC_INDEX),
    (r"test_indexing\.py::NumpyTests\w*::test_trivial_fancy_out_of_bounds_neuron", r"IndexError not raised",
     _ASYNC_INDEX),
    (r"test_nn\.py::TestNNDeviceType\w*::test_upsamplingBiMode2d_nonsupported_dtypes_\w*_mode_bi(linear|cubic)_"
     r"uint8_neuron_uint8$", r"RuntimeError not raised", _UINT8_RESAMPLE),
    (r"test_nn\.py::TestNNDeviceType\w*::test_transformerencoderlayer_neuron_", r"^AssertionError: False is not true",
     _ENCODER_FAST_PATH),
]

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
    for node_pattern, message_pattern, reason in DOCUMENTED_EXCEPTIONS:
        if re.search(node_pattern, nodeid) and re.search(message_pattern, message):
            return reason
    return None
