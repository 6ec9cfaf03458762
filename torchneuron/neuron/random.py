"""Random number generators: one default generator per neuron device.

State is Philox-style (seed, offset): ``get_rng_state`` returns 16 bytes that
``set_rng_state`` restores exactly. ``torch.manual_seed`` reaches these
generators through ``manual_seed_all``. The offset counts Philox4x32-10
blocks: each random op advances it, when it is launched, by one block per two
elements of its output (``neuronrt/ops/random.h`` says which counters each
element reads), so the numbers do not depend on threads or tensor layout.
"""

import torch

from torchneuron import _C
from torchneuron.neuron.device import _device_index, device_count


class _DefaultGenerators:
    """Sequence of the per-device default generators, created on first access."""

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"neuron device {index} does not exist")
        return _C._default_generator(index)

    def __len__(self):
        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device) -> torch.Generator:
    return default_generators[_device_index(device)]


def get_rng_state(device="neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list:
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device="neuron") -> None:
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    random_seed = _generator(None).seed()
    for g in default_generators:
        g.manual_seed(random_seed)


def initial_seed() -> int:
    return _generator(None).initial_seed()
