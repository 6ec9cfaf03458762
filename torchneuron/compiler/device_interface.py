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


# torch.neuron's stream functions that Dynamo should treat as CUDA's: put in
# the graph (stream, current_stream, set_stream, synchronize), the first
# three then handled by Dynamo's stream variables.
_IN_GRAPH = ("stream", "current_stream", "set_stream", "synchronize")
# Dynamo's special handling is keyed on the function objects of CUDA's and
# torch.accelerator's versions; ours take the same handler.
_SAME_HANDLER = {"current_stream": torch.accelerator.current_stream,
                 "synchronize": torch.accelerator.synchronize}


def _teach_dynamo_streams():
    """Lets Dynamo trace torch.neuron.stream(...) regions, current_stream()
    and synchronize() inside a graph (fullgraph=True included), as it does
    torch.cuda's. torch 2.13 lists those by name in its trace rules and keys
    its handlers on CUDA's functions; torch.neuron lives outside torch, so
    without this Dynamo inlines our Python functions and breaks the graph at
    the first C call. Both tables are private to Dynamo: torch is pinned to
    one release, and tests/test_compile.py traces a stream region with
    fullgraph=True, so a change in them fails a test instead of silently
    breaking graphs."""
    from torch._dynamo import trace_rules
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    for name in _IN_GRAPH:
        trace_rules.manual_torch_name_rule_map[f"torch.neuron.{name}"] = TorchInGraphFunctionVariable
    trace_rules.get_torch_obj_rule_map.cache_clear()
    handlers = TorchInGraphFunctionVariable._get_handlers()
    # The handler of the stream context is registered for each registered
    # interface's .stream when the table is first built; the table may have
    # been built before this interface existed.
    stream_handler = handlers.get(torch.cuda.stream)
    if stream_handler is not None:
        handlers.setdefault(torch.neuron.stream, stream_handler)
    for name, theirs in _SAME_HANDLER.items():
        if theirs in handlers:
            handlers.setdefault(getattr(torch.neuron, name), handlers[theirs])


def register():
    register_interface_for_device("neuron", NeuronInterface)
    _teach_dynamo_streams()
