"""Dynamo's DeviceInterface for ``neuron``: streams, events and device
guards inside compiled regions (torch.neuron.stream(...), events,
torch.neuron.set_device) are traced like CUDA's."""

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device


class NeuronInterface(DeviceInterface):
    # Dynamo needs subclasses of torch.Stream / torch.Event: torch.neuron's
    # Stream is one, and its Event is a factory of torch.Event.
    Stream = torch.neuron.Stream
    Event = torch.Event

    class device:  # noqa: N801  (Dynamo reads this name)
        def __new__(cls, device):
            return torch.neuron.device(device)

    class Worker:
        @staticmethod
        def set_device(device):
            torch.neuron.set_device(device)

        @staticmethod
        def current_device():
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.neuron.get_device_properties(device)

    current_device = staticmethod(torch.neuron.current_device)
    set_device = staticmethod(torch.neuron.set_device)
    device_count = staticmethod(torch.neuron.device_count)
    is_available = staticmethod(torch.neuron.is_available)
    stream = staticmethod(torch.neuron.stream)
    current_stream = staticmethod(torch.neuron.current_stream)
    set_stream = staticmethod(torch.neuron.set_stream)
    synchronize = staticmethod(torch.neuron.synchronize)
    get_device_properties = staticmethod(torch.neuron.get_device_properties)

    @staticmethod
    def get_raw_stream(device_index):
        return torch.neuron.current_stream(device_index).stream_id

    @staticmethod
    def _set_stream_by_id(stream_id, device_index, device_type):
        torch.neuron.set_stream(torch.neuron.Stream(stream_id=stream_id, device_index=device_index,
                                                    device_type=device_type))

    @staticmethod
    def get_compute_capability(device=None):
        return torch.neuron.get_device_properties(device)["target"]

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False):
        return True

    @staticmethod
    def memory_allocated(device=None):
        return torch.neuron.memory_allocated(device)


def register():
    register_interface_for_device("neuron", NeuronInterface)
