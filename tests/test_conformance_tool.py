"""torchneuron.tools.conformance on a device-generic test file written in the
style of PyTorch's own (instantiate_device_type_tests), run for real on
neuron and on the CPU: pairing of twins, the neuron-only failures, failures
the CPU shares, a crash that the runner resumes after, skips, collection
errors and the fallback report."""

import json
import textwrap

import torch
import torchneuron

from torchneuron.tools import conformance
from torchneuron.tools.conformance_causes import cause_of, normalise

GENERIC = textwrap.dedent('''
    import os
    import warnings
    import torch
    from torch.testing._internal.common_utils import TestCase
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests

    def on_neuron(device):
        return torch.device(device).type != "cpu"

    class TestGeneric(TestCase):
        @dtypes(torch.float32, torch.int64)
        def test_a_add(self, device, dtype):
            x = torch.arange(6, device=device).to(dtype)
            self.assertEqual((x + x).cpu(), torch.arange(6).to(dtype) * 2)

        def test_b_fails_everywhere(self, device):
            self.assertEqual(torch.tensor([1.0], device=device), torch.tensor([2.0], device=device))

        def test_c_result_differs_on_neuron(self, device):
            # Stands in for a kernel bug: only the neuron twin sees a wrong value.
            expected = 3.0 if on_neuron(device) else 2.0
            self.assertEqual(torch.tensor([1.0], device=device) * 2, torch.tensor([expected], device=device))

        def test_d_crashes_on_neuron(self, device):
            if on_neuron(device):
                os.abort()

        def test_e_skipped(self, device):
            self.skipTest("nothing to see")

        def test_f_after_the_crash(self, device):
            # Runs on neuron only if the runner resumed after test_d.
            self.assertEqual(torch.ones(3, device=device).sum().item(), 3.0)

        def test_g_fallback(self, device):
            # An op without a neuron kernel still passes, through the fallback.
            x = torch.tensor([3.0, 4.0], device=device)
            self.assertEqual(torch.special.i1e(x).cpu(), torch.special.i1e(x.cpu()))

        def test_h_async_error_on_neuron(self, device):
            # neuron, like CUDA, finds this index out of range while the
            # kernel runs: the test ends before the error surfaces.
            x = torch.zeros(4, device=device)
            if on_neuron(device):
                x[torch.tensor([9], device=device)]

    class TestLater(TestCase):
        def test_i_after_the_async_error(self, device):
            # Passes on neuron only if the error of test_h was cleared.
            self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)

        def test_j_counts_warnings(self, device):
            # As test_indexing.py's byte-mask tests do: no filter may hide it.
            with warnings.catch_warnings(record=True) as w:
                torch.ones(2, device=device)[torch.tensor([1, 0], dtype=torch.uint8, device=device)]
                self.assertEqual(len(w), 1)

    instantiate_device_type_tests(TestGeneric, globals())
    # Upstream names this class TestLaterNEURON, not TestLaterPRIVATEUSE1.
    instantiate_device_type_tests(TestLater, globals())
''')


def test_report_of_a_generic_file(tmp_path, capsys):
    (tmp_path / "test_generic.py").write_text(GENERIC)
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    out = tmp_path / "report.json"
    rc = conformance.main(["--pytorch-tests", str(tmp_path), "--files", "test_generic.py",
                           "test_broken.py", "--json", str(out), "--timeout", "120"])
    assert rc == 0
    printed = capsys.readouterr().out
    generic, broken = json.loads(out.read_text())

    counts = generic["counts"]
    # test_a x2 dtypes, test_f (resumed after the crash), test_g, test_i, test_j.
    assert counts["passed"] == 6, counts
    assert counts["failed on CPU too"] == 1
    [both] = generic["failed_on_cpu_too"]
    assert both["test"].endswith("test_b_fails_everywhere_neuron") and both["cpu"] == "failed"
    assert both["message"] and both["cpu_message"]
    assert both["cause"] == "a result differs from the expected value"  # the CPU's failure, classified
    assert counts["skipped"] == 1
    assert counts["failed (ours)"] == 3
    assert "failed (no CPU twin)" not in counts
    by_test = {f["test"].split("::")[-1]: f for f in generic["failures"]}
    assert set(by_test) == {"test_c_result_differs_on_neuron_neuron",
                            "test_d_crashes_on_neuron_neuron",
                            "test_h_async_error_on_neuron_neuron"}
    assert "asynchronous device error" in by_test["test_h_async_error_on_neuron_neuron"]["message"]
    assert "IndexOutOfRangeError" in by_test["test_h_async_error_on_neuron_neuron"]["message"]
    assert by_test["test_c_result_differs_on_neuron_neuron"]["cpu"] == "passed"
    assert by_test["test_c_result_differs_on_neuron_neuron"]["cause"] == \
        "a result differs from the expected value"
    assert by_test["test_d_crashes_on_neuron_neuron"]["cause"] == "the process crashed"
    assert any("died in" in n and "test_d_crashes_on_neuron_neuron" in n for n in generic["notes"])
    # Whatever test_g's op does in this process (fallback or, one day, a
    # native kernel), the subprocess reports the same.
    torchneuron.clear_op_tracking()
    torch.special.i1e(torch.tensor([3.0, 4.0], device="neuron")).cpu()
    assert set(torchneuron.get_fallback_ops()) <= set(generic["fallback_ops"])
    assert any("did not run" in n for n in broken["notes"])
    assert "total" in printed and "the process crashed" in printed


def test_twins_pair_by_device_neutral_name():
    neuron = "test_x.py::TestFooPRIVATEUSE1::test_cpu_kernel_neuron_float32"
    cpu = "test_x.py::TestFooCPU::test_cpu_kernel_cpu_float32"
    assert conformance.pair_key(neuron) == conformance.pair_key(cpu)
    # A "cpu" inside the test's own name is not the device suffix.
    assert "cpu_kernel" in conformance.pair_key(neuron)
    assert conformance.pair_key("t.py::TestFooCPU::test_a_cpu") != \
        conformance.pair_key("t.py::TestFooCPU::test_b_cpu")
    # A file's second device-generic class is named after the backend
    # (upstream leaves PrivateUse1TestBase.device_type at "neuron").
    assert conformance.pair_key("t.py::TestBarNEURON::test_ravel_neuron") == \
        conformance.pair_key("t.py::TestBarCPU::test_ravel_cpu")


def test_causes_group_across_dtypes_and_shapes():
    a = cause_of("failed", "RuntimeError: index 17 is out of bounds for dimension 0 with size 4")
    b = cause_of("failed", "RuntimeError: index 3 is out of bounds for dimension 1 with size 2")
    assert a == b == normalise("RuntimeError: index N is out of bounds for dimension N with size N")
    assert cause_of("failed", "TypeError: complex64 is not supported") == \
        "complex dtypes are not supported on neuron yet"
    assert cause_of("xpassed", "") .startswith("passed unexpectedly")
    # The rerun hint upstream appends names the test; its dtype is not the cause.
    repro = ("\n\nTo execute this test, run the following from the base repo dir:\n"
             "    python test/test_x.py TestXPRIVATEUSE1.test_y_neuron_complex64")
    assert cause_of("failed", "AssertionError: RuntimeError not raised" + repro) == \
        "an error is missing or worded differently"
    # assertRaisesRegex's own wording when the error comes with other words
    assert cause_of("failed", 'AssertionError: "max must be larger than min" does not match '
                              '"\\"histogram_cpu\\" not implemented for \'Int\'"' + repro) == \
        "an error is missing or worded differently"
    # a complex value that differs is a value difference (the message prints
    # the input, dtype=torch.complex128)
    assert cause_of("failed", "AssertionError: Tensor-likes are not close!\n\nMismatched elements: 4 / 81\n"
                              "Input lhs tensor was tensor([inf+infj], dtype=torch.complex128)" + repro) == \
        "a result differs from the expected value"
    # a test file from a newer torch (or a fork) names a dtype this torch lacks:
    # a version difference, not a complex failure
    assert cause_of("failed", "AttributeError: module 'torch' has no attribute 'bcomplex32'" + repro) == \
        cause_of("failed", "ImportError: cannot import name 'foo' from 'torch.testing._creation'") == \
        "the test uses a name this torch does not have (test file and torch versions differ)"
    # what failed on both sides with this torch 2.13 and NumPy 2: np.msort,
    # logsumexp(dim=None), quantile(interpolation=)
    assert "NumPy versions differ" in cause_of("failed", "AttributeError: module 'numpy' has no attribute 'msort'")
    for message in ["TypeError: quantile() got an unexpected keyword argument 'interpolation'",
                    "TypeError: logsumexp(): argument 'dim' must be tuple of ints, but found element of type NoneType",
                    "TypeError: concat(): argument 'dim' must be int, not str"]:
        assert "torch versions differ" in cause_of("failed", message), message


EXCEPT_CPU = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_utils import TestCase
    from torch.testing._internal.common_device_type import instantiate_device_type_tests

    class TestAccelerators(TestCase):
        def test_a_same_everywhere(self, device):
            self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)

        def test_b_differs_on_neuron(self, device):
            expected = 3.0 if torch.device(device).type != "cpu" else 2.0
            self.assertEqual((torch.ones(1, device=device) * 2).item(), expected)

    # as test_binary_ufuncs.py's TestBinaryUfuncsDevice
    instantiate_device_type_tests(TestAccelerators, globals(), except_for="cpu")
''')


def test_a_class_excluding_the_cpu_still_gets_cpu_twins(tmp_path):
    (tmp_path / "test_except_cpu.py").write_text(EXCEPT_CPU)
    out = tmp_path / "report.json"
    assert conformance.main(["--pytorch-tests", str(tmp_path), "--files", "test_except_cpu.py",
                             "--json", str(out), "--timeout", "120"]) == 0
    [report] = json.loads(out.read_text())
    assert report["counts"] == {"passed": 1, "failed (ours)": 1}, report["counts"]
    [failure] = report["failures"]
    assert failure["test"].endswith("TestAcceleratorsPRIVATEUSE1::test_b_differs_on_neuron_neuron")
    assert failure["cpu"] == "passed"
