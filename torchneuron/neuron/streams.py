"""Streams and events: ``torch.Stream`` / ``torch.Event`` on neuron with the
``torch.cuda``-style names users expect."""

import torch

from torchneuron import _C
from torchneuron.neuron.device import _device_index


def _neuron_device(device) -> torch.device:
    return torch.device("neuron", _device_index(device))


class Stream(torch.Stream):
    """An in-order queue of work on a neuron device. Priority -1 is high, 0 normal."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuilding from (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_neuron_device(device), priority=priority)

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.device_index, self.stream_id)

    def __repr__(self):
        return f"<torch.neuron.Stream device={self.device} stream_id={self.stream_id}>"


class _EventMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_EventMeta):
    """A marker in a stream; with ``enable_timing`` it measures elapsed time.

    Builds a ``torch.Event`` on the current neuron device (PyTorch's event
    methods reject subclasses as arguments, so this is a factory whose
    instances are plain ``torch.Event`` objects; ``isinstance`` still works).
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("interprocess neuron events are not supported")
        return torch.Event(_neuron_device(None), enable_timing=enable_timing, blocking=blocking)


def _as_neuron_stream(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    return _as_neuron_stream(torch.accelerator.current_stream(_device_index(device)))


def default_stream(device=None) -> Stream:
    index = _device_index(device)
    return Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes ``stream`` current (on its device, which also becomes current)."""

    def __init__(self, stream):
        self.stream = stream
        self.previous_stream = None
        self.previous_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        from torchneuron.neuron.device import current_device, set_device

        self.previous_device = current_device()
        set_device(self.stream.device_index)
        self.previous_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        from torchneuron.neuron.device import set_device

        torch.accelerator.set_stream(self.previous_stream)
        set_device(self.previous_device)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
