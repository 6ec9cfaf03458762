"""Ways to hand a CPU tensor's values to neuron in another memory layout:
the layout sweeps of the convolution, pooling and resampling tests."""

import torch

DEV = "neuron"


def contiguous(t):
    return t.to(DEV)


def channels_last(t):
    """NHWC for a 4-d tensor, NDHWC for a 5-d one; any other as it is."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return t.to(DEV).contiguous(memory_format=fmt) if fmt else t.to(DEV)


def sliced(t):
    """Every other element of a twice-as-wide tensor: a strided innermost dim."""
    big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    big[..., ::2] = t
    return big.to(DEV)[..., ::2]


def _swapped(dim):
    def transposed(t):
        """t's values on neuron with dims `dim` and -1 stored swapped (fewer dims: as it is)."""
        if t.dim() < -dim:
            return t.to(DEV)
        return t.transpose(-1, dim).contiguous().to(DEV).transpose(-1, dim)

    return transposed


transposed = _swapped(-2)  # the last two dims (images, matrices)
transposed_3d = _swapped(-3)  # width and depth of a volume
