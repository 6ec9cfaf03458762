"""Inputs shared by the linear-algebra test files: seeded matrices and the
layouts every kernel must take (as is, column-major, strided)."""

import torch


def rand(*shape, dtype=torch.float64, seed=0):
    """Standard normal entries drawn in float64 (the same values for every
    dtype), then converted."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def layouts(a):
    """(CPU, neuron) pairs of a as it is, column-major and strided (every
    other element of a wider matrix), the neuron one laid out the same."""
    yield a, a.to("neuron")
    yield a.mT.contiguous().mT, a.mT.contiguous().to("neuron").mT
    wide = torch.zeros(*a.shape[:-1], a.shape[-1] * 2, dtype=a.dtype)
    wide[..., ::2] = a
    yield wide[..., ::2], wide.to("neuron")[..., ::2]
