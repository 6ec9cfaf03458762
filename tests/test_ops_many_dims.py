"""Tensors of 17 to 25 dimensions (the runtime's NRT_MAX_DIMS is 25, as
CUDA's kernels take): a sample of ops on contiguous and permuted
(non-contiguous) inputs against PyTorch CPU, run natively."""

import pytest
import torch

import torchneuron

DEV = "neuron"


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def many_dims(ndim, seed=0):
    """An ndim tensor of small integers, sizes 2 or 3 in six dims, 1 elsewhere."""
    g = torch.Generator().manual_seed(seed)
    sizes = [1] * ndim
    for k, d in enumerate(torch.randperm(ndim, generator=g)[:6].tolist()):
        sizes[d] = 2 + k % 2
    return torch.randint(-5, 6, sizes, generator=g).float()


def check_matches_cpu(fn, ndim):
    """fn on a many_dims tensor and on its permutation, neuron against CPU."""
    x = many_dims(ndim, seed=ndim)
    for make in (lambda t: t, permuted):
        expected = fn(make(x))
        got = fn(make(x.to(DEV)))
        assert got.shape == expected.shape and got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)


def permuted(t, seed=1):
    perm = torch.randperm(t.dim(), generator=torch.Generator().manual_seed(seed)).tolist()
    return t.permute(perm)


OPS = {
    "fill_": lambda t: t.clone().fill_(2.5),
    "zero_": lambda t: t.clone().zero_(),
    "add": lambda t: t + t * 2,
    "add_broadcast": lambda t: t + t.sum(dim=0, keepdim=True),
    "where": lambda t: torch.where(t > 0, t, -t),
    "exp": lambda t: torch.exp(t / 8),
    "sum_dim": lambda t: t.sum(dim=(1, 5, -1)),
    "sum_all": lambda t: t.sum(),
    "amax": lambda t: t.amax(dim=3, keepdim=True),
    "argmax": lambda t: t.argmax(dim=-2),
    "mean": lambda t: t.mean(dim=0),
    "cumsum": lambda t: t.cumsum(dim=t.dim() // 2),
    "softmax": lambda t: torch.softmax(t, dim=2),
    "contiguous": lambda t: t.contiguous(),
    "clone": lambda t: t.clone(),
    "to_double": lambda t: t.double(),
    "cat": lambda t: torch.cat([t, t * 3], dim=4),
    "flip": lambda t: t.flip(0, 7),
    "masked_fill": lambda t: t.masked_fill(t > 1, -7.0),
    "clamp": lambda t: t.clamp(-2, 3),
    "sort": lambda t: t.sort(dim=-1)[0],
    "index_select": lambda t: t.index_select(1, torch.zeros(2, dtype=torch.long, device=t.device)),
    "eq": lambda t: t == t.flip(2),
}


@pytest.mark.parametrize("ndim", [17, 20, 25])
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_on_many_dims_matches_cpu(ndim, name):
    check_matches_cpu(OPS[name], ndim)


COPIES = {
    "clone": lambda t: t.clone(),
    "contiguous": lambda t: t.contiguous(),
    "to_double": lambda t: t.double(),
    "fill_": lambda t: t.clone().fill_(2.5),
    "zeros_like": lambda t: torch.zeros_like(t),
    "expand_copy": lambda t: t.expand(*t.shape).clone(),
    "broadcast_copy": lambda t: torch.empty_like(t).copy_(t.narrow(0, 0, 1)),
}


@pytest.mark.parametrize("ndim", [26, 32, 40])
@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_and_fills_beyond_the_runtime_dims(ndim, name):
    # Past NRT_MAX_DIMS, copies and fills still run natively: their size-1
    # dims drop and the dims both sides step through alike merge.
    check_matches_cpu(COPIES[name], ndim)
