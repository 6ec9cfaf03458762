"""The module the ``torch_dynamo_backends`` entry point names: Dynamo
imports it when ``backend="neuron"`` is looked up, before it traces, which
is when the neuron DeviceInterface must be registered."""

from torchneuron.compiler.backend import neuron_backend
from torchneuron.compiler.device_interface import register as _register_device_interface

__all__ = ["neuron_backend"]

_register_device_interface()
