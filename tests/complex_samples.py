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


def tol(dtype):
    """The tolerances of a complex result computed on the planes: a few
    float32 roundings for complex64, a few float64 ones for complex128."""
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == torch.complex64 else {"rtol": 1e-12, "atol": 1e-12}


def assert_close_to_cpu(got, want, dtype=None):
    """got (on the device) is want's dtype and shape; a complex result within
    tol(dtype or want's), any other one exactly, NaN where want has NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if want.is_complex():
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol(dtype or want.dtype))
    else:
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def assert_same(got, want):
    """got (on the device) is want bit for bit (NaN where want has NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


def layouts(dtype, values=complex_randn):
    """(name, tensor) of one dtype in the layouts a native path must handle:
    contiguous, transposed, sliced, conjugate and negative bits, zero-size
    and 0-d; values(dtype, *shape, seed=) makes the samples."""
    z = values(dtype, 4, 6)
    yield "contiguous", z
    yield "transposed", values(dtype, 6, 4).t()
    yield "sliced", values(dtype, 8, 12)[::2, 1::2]
    yield "conj", z.conj()
    yield "neg", torch._neg_view(z)
    yield "zero_size", z[:0]
    yield "zero_dim", z[0, 1].clone()
