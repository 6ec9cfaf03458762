"""``torch.neuron``: device management for the neuron device, mirroring
``torch.cuda``: devices, properties, streams and events, random number
generators and memory statistics."""

import torch

from torchneuron import _C
from torchneuron.neuron.device import (
    clear_error,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    is_initialized,
    isa_levels,
    set_device,
    synchronize,
    _is_in_bad_fork,
    _lazy_init,
)
from torchneuron.neuron.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from torchneuron.neuron.random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torchneuron.neuron import amp
from torchneuron.neuron.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)


def get_amp_supported_dtype():
    """Dtypes autocast may use on neuron (the Tensor engine's low precisions)."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


__all__ = [name for name in dir() if not name.startswith("_")] + [
    "_is_in_bad_fork",
    "_lazy_init",
]
