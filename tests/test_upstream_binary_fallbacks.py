"""Calls that test_binary_ufuncs made through the CPU fallback, now native,
against PyTorch CPU with no fallback (issue 20)."""

import pytest
import torch
from torch.testing import make_tensor

from conftest import no_fallback

DEV = "neuron"

# test_contig_size1_large_dim's shape: make_tensor(exclude_zero=True) runs
# result[result == 0] = replacement, a boolean mask of 12 dims with a 0-d
# value that Python indexing puts on the device.
LARGE = (5, 2, 3, 1, 4, 5, 3, 2, 1, 2, 3, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool,
                                   torch.complex64])
@pytest.mark.parametrize("shape", [LARGE, (2,) * 8, (3, 4)])
def test_mask_assignment_of_a_number_runs_natively_at_any_rank(dtype, shape):
    x = torch.zeros(shape, dtype=dtype)
    x.view(-1)[::3] = 1
    value = True if dtype == torch.bool else 3
    xd = x.to(DEV)
    with no_fallback():
        xd[xd == 0] = value
        # a mask covering the leading dims only, and a 0-d device value
        xd[(xd != 0).all(-1)] = torch.tensor(value, dtype=dtype, device=DEV)
    x[x == 0] = value
    x[(x != 0).all(-1)] = torch.tensor(value, dtype=dtype)
    assert torch.equal(xd.cpu(), x)


def test_make_tensor_excluding_zero_runs_natively():
    with no_fallback():
        t = make_tensor(LARGE, dtype=torch.float32, device=DEV, exclude_zero=True)
    assert t.shape == LARGE and not (t.cpu() == 0).any()


def test_mask_assignment_of_an_element_of_self_is_refused():
    # index_put's overlap error, as on CUDA (the CPU reads the value first)
    x = torch.zeros(LARGE, device=DEV)
    with pytest.raises(RuntimeError, match="single memory location"):
        x[x == 0] = x[(0,) * len(LARGE)]
