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


class _IsaEnum(enum.IntEnum):
    def __repr__(self):  # as a kernel spells it (signatures in docs/nki.md)
        return f"nisa.{type(self).__name__}.{self.name}"


class reduce_cmd(_IsaEnum):
    """What an instruction does with its engine's reduce registers (one fp32
    per partition lane, kept across instructions): ``idle`` leaves them (a
    reduce_res gets this instruction's reduction alone), ``reset`` sets them
    to the reduce op's identity, ``reduce`` folds this instruction's results
    into them, ``reset_reduce`` both, ``load_reduce`` starts from a value."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(_IsaEnum):
    """Descriptor generation for DMAs: an indirect dma_copy (a gather or
    scatter with an index tile) needs software DGE (swdge, or unknown: the
    compiler picks it), whose GpSimd descriptor time the cost model adds;
    direct DMAs cost the same in every mode."""

    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class oob_mode(_IsaEnum):
    """Out-of-bounds handling of indirect DMAs: an index past the indexed
    tensor's rows fails the run (error, an NkiError of rule oob_mode) or
    skips its row (skip); direct accesses are checked at creation."""

    error = 0
    skip = 1


class matmul_perf_mode(str, enum.Enum):
    """nc_matmul's Tensor-engine mode: ``none``, or ``double_row`` (trn2 on:
    fp8 operands [K, 2, M] / [K, 2, N], each PE multiplying two pairs per
    cycle, so a 2K-term contraction at the time of a K-term one)."""

    none = "none"
    double_row = "double_row"

    def __repr__(self):
        return f"nisa.matmul_perf_mode.{self.name}"


class dma_engine(_IsaEnum):
    """Which DMA moves the data: the shared DMA queues (``dma``) or GpSimd's
    internal one (``gpsimd_dma``); the simulator costs both as the shared
    queues."""

    dma = 0
    gpsimd_dma = 1
