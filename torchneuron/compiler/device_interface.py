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


def _neuron_roofline(original):
    """AOTAutograd orders the frees of a backward graph with stream regions
    by a timeline of estimated node times, from a roofline that reads a GPU's
    bandwidth through Triton (absent here: the import fails). For nodes on
    neuron the estimate is the bytes the node reads and writes over the
    device's HBM bandwidth (milliseconds, as the original returns); it
    orders synchronisations only, nothing reports it."""
    from torch.utils._runtime_estimation import get_num_bytes
    from torch.utils._pytree import tree_flatten

    def estimate(node):
        def value(x):
            return x.meta.get("val", x.meta.get("value")) if isinstance(x, torch.fx.Node) else x
        tensors = [t for t in tree_flatten((torch.fx.map_arg((node.args, node.kwargs), value),
                                            value(node)))[0] if isinstance(t, torch.Tensor)]
        neuron = [t for t in tensors if t.device.type == "neuron"]
        if not tensors:
            return 0.0  # an ordering op: moves nothing
        if not neuron:
            return original(node)
        bandwidth = torch.neuron.get_device_properties(neuron[0].device).hbm_bytes_per_s
        return sum(get_num_bytes(t) for t in tensors) / bandwidth * 1e3

    estimate.__wrapped__ = original
    return estimate


def register():
    register_interface_for_device("neuron", NeuronInterface)
    _teach_dynamo_streams()
    from torch._functorch._aot_autograd import streams as aot_streams
    if not hasattr(aot_streams.get_roofline_estimate, "__wrapped__"):
        aot_streams.get_roofline_estimate = _neuron_roofline(aot_streams.get_roofline_estimate)
