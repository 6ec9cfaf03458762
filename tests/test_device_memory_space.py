"""Device memory is a separate address space: the host cannot read it."""

import signal

from conftest import run_python

DEREFERENCE = """
    import ctypes, sys, torch
    t = torch.ones(4, device="neuron")
    torch.neuron.synchronize()
    print("allocated", flush=True)
    value = ctypes.c_float.from_address(t.data_ptr()).value
    print("read", value, flush=True)
"""


def test_host_dereference_of_a_device_pointer_faults():
    result = run_python(DEREFERENCE)
    assert result.stdout.splitlines() == ["allocated"], result.stdout + result.stderr
    assert result.returncode == -signal.SIGSEGV, result.stderr
