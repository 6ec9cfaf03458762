"""Registers the neuron device with PyTorch.

This is the ``torch.backends`` entry point that ``import torch`` calls at the
end of its own import. It must work even while ``torchneuron`` itself is
still being imported (``import torchneuron`` first imports torch, which calls
back here), so it only imports the extension and the device module. Nothing here may
raise for a bad environment variable, since that would fail ``import torch``
itself: the extension reads TORCHNEURON_FALLBACK when it loads and reports a
malformed value at the device's first use, as the runtime does with its own
variables.
"""

import atexit

import torch


def register() -> None:
    if torch._C._get_privateuse1_backend_name() == "neuron":
        return
    from torchneuron import _C  # static initialisers register guard, allocator, hooks, kernels
    from torchneuron import neuron as device_module

    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    from torchneuron import distributed

    distributed.register()  # the c10d backend "neuron"
    atexit.register(_drain_streams_at_exit)


def _drain_streams_at_exit() -> None:
    """Waits for the queued device work before the interpreter finalizes.

    Queued work may hold the last reference to a tensor whose Python object
    it keeps alive (a CPU source of a copy, say); a worker thread that drops
    it after finalization has begun must take the GIL, and Python then ends
    that thread in the middle of C++ frames (std::terminate, "terminate
    called without an active exception"). Processes that ran nothing on
    the device are left alone (draining would start the runtime). Cycles
    are collected first, so that what they hold (a DDP module's process
    group, tensors) is released while threads may still take the GIL."""
    import gc

    from torchneuron import _C

    if _C._is_in_bad_fork() or not _C._get_executed_ops():
        return
    gc.collect()
    for device in range(_C._device_count()):
        try:
            _C._synchronize(device)
        except RuntimeError:
            pass  # an unreported kernel error: the runtime reports it at exit
