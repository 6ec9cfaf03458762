"""nki.isa's enums, its validation error and the NeuronCore version query."""

import enum

from torchneuron.nki.errors import NkiValidationError  # noqa: F401  (nisa.NkiValidationError)


class engine(enum.IntEnum):
    """The engines, as instruction ``engine=`` arguments (the trace codes)."""

    tensor = 0
    vector = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    unknown = -1


class nc_version(enum.IntEnum):
    """NeuronCore generations: v2 (trn1 / inf2), v3 (trn2), v4 (trn3)."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


_BY_TARGET = {"trn1": nc_version.gen2, "inf2": nc_version.gen2, "trn2": nc_version.gen3,
              "trn3": nc_version.gen4}


def get_nc_version():
    """The NeuronCore version of the simulated device (the configured
    generation, NEURON_PLATFORM_TARGET_OVERRIDE)."""
    import torch

    import torchneuron  # noqa: F401  (registers torch.neuron)

    return _BY_TARGET[torch.neuron.get_device_properties(0).target]
