"""Registers the neuron device with PyTorch.

This is the ``torch.backends`` entry point that ``import torch`` calls at the
end of its own import. It must work even while ``torchneuron`` itself is
still being imported (``import torchneuron`` first imports torch, which calls
back here), so it only imports the extension and the device module.
"""

import os

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
    _C._set_fallback_mode(os.environ.get("TORCHNEURON_FALLBACK", "warn") or "warn")
