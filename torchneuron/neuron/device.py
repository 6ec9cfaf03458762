"""Devices: count, selection and properties."""

from dataclasses import dataclass

import torch

from torchneuron import _C


def is_available() -> bool:
    """True if at least one neuron device is visible."""
    return _C._device_count() > 0


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """Raises the runtime's configuration error (a malformed NEURON_* variable)."""
    _C._init()


def _is_in_bad_fork() -> bool:
    """True in a child forked after the runtime started: it cannot use neuron."""
    return _C._is_in_bad_fork()


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def _device_index(device, optional: bool = True) -> int:
    """The index of ``device`` (int, str, torch.device or None = current)."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"cannot interpret {device!r} as a neuron device")


def set_device(device) -> None:
    index = _device_index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes ``index`` the current neuron device."""

    def __init__(self, device):
        self.index = _device_index(device) if device is not None else -1
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        if self.index >= 0 and self.index != self.previous:
            _C._set_device(self.index)
        return self

    def __exit__(self, *exc):
        if self.index >= 0 and self.index != self.previous:
            _C._set_device(self.previous)
        return False


class device_of(device):
    """Context manager that makes the tensor's device current (no-op off neuron)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_neuron else None)


def synchronize(device=None) -> None:
    """Waits for all work on every stream of the device; raises errors that
    kernels reported asynchronously."""
    _C._synchronize(_device_index(device))


def clear_error(device=None) -> None:
    """Clears the sticky asynchronous errors of the device's streams.

    A kernel that fails while it runs (an index out of range, say) leaves
    its stream in an error state, as a CUDA context keeps its error: the
    work queued behind it is skipped, so its outputs hold stale data, and
    every later synchronisation, copy or launch on that stream (or on a
    stream that waited on an event recorded after the failure) raises the
    same error instead of returning those stale values. This waits for the
    queued work to drain (skipped), then lets the streams take work again;
    the tensors the skipped work should have written are not repaired.
    """
    _C._clear_errors(_device_index(device))


@dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str
    target: str
    logical_core: int
    logical_nc_config: int
    total_memory: int
    hbm_bytes_per_s: int
    sbuf_partitions: int
    sbuf_partition_bytes: int
    psum_partitions: int
    psum_partition_bytes: int
    psum_banks: int
    tensor_engine_hz: int
    vector_engine_hz: int
    scalar_engine_hz: int
    gpsimd_engine_hz: int
    dma_bytes_per_s: int
    link_bytes_per_s: int  # NeuronLink share (chip to chip)
    efa_bytes_per_s: int  # EFA share (instance to instance)

    def __repr__(self):
        gib = self.total_memory / 2**30
        return (
            f"NeuronDeviceProperties(name='{self.name}', target='{self.target}', "
            f"total_memory={gib:.0f}GiB, sbuf={self.sbuf_partitions}x"
            f"{self.sbuf_partition_bytes // 1024}KiB, psum={self.psum_partitions}x"
            f"{self.psum_partition_bytes // 1024}KiB ({self.psum_banks} banks))"
        )


def get_device_properties(device=None) -> NeuronDeviceProperties:
    return NeuronDeviceProperties(**_C._get_device_properties(_device_index(device)))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple:
    """The NeuronCore generation as (major, minor): trn1 = (2, 0), trn2 = (3, 0), trn3 = (4, 0)."""
    target = get_device_properties(device).target
    return ({"trn1": 2, "trn2": 3, "trn3": 4}[target], 0)


def isa_levels() -> dict:
    """The CPU instruction-set levels of the neuron kernels, e.g.
    ``{"active": "avx2", "supported": ["avx2", "baseline"]}``: ``active`` is
    the level the kernels run at (``TORCHNEURON_ISA``, by default the host's
    best), ``supported`` the levels this CPU can run, best first. Raises, as
    every first use does, if ``TORCHNEURON_ISA`` is malformed or names a
    level above the host's best."""
    return _C._isa_levels()
