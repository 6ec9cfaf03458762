"""Complex test inputs shared by the complex test files."""
import math

import torch

CDTYPES = [torch.complex64, torch.complex128]


def complex_randn(dtype, *shape, seed=0, inf_imag=None):
    """Seeded normal samples of dtype; with inf_imag set, the first two
    elements (when there are more than two) are nan-0j and -inf+inf_imag*j,
    the values whose handling differs most between implementations."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*shape, dtype=torch.complex128, generator=g).to(dtype)
    if inf_imag is not None and z.numel() > 2:
        z.view(-1)[0] = complex(math.nan, -0.0)
        z.view(-1)[1] = complex(-math.inf, inf_imag)
    return z
