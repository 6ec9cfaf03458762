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
