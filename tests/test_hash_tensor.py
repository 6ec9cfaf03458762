"""torch.hash_tensor on neuron: each element widened to its 64-bit float or
integer form, the bits XORed over the reduced dims (a tree of native
bitwise_xor passes), bitwise equal to the CPU for every dtype the CPU
hashes, with the CPU's errors for the rest."""

import pytest
import torch

import torchneuron
from conftest import no_fallback

DEV = "neuron"
HASHED = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool]
REDUCTIONS = [dict(), dict(dim=1), dict(dim=(0, 2)), dict(dim=-1, keepdim=True), dict(dim=[]),
              dict(dim=(0, 1, 2), keepdim=True)]


def _values(dtype, *shape):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(*shape, generator=g) * 300
    if dtype.is_floating_point:
        x.view(-1)[:3] = torch.tensor([float("nan"), -0.0, float("inf")])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", HASHED)
@pytest.mark.parametrize("kw", REDUCTIONS, ids=str)
def test_matches_cpu_bitwise(dtype, kw):
    x = _values(dtype, 5, 7, 3)
    with no_fallback():
        got = torch.hash_tensor(x.to(DEV), **kw)
        strided = torch.hash_tensor(x.to(DEV).transpose(0, 2), dim=1)
    assert got.dtype == torch.uint64
    assert torch.equal(got.cpu(), torch.hash_tensor(x, **kw))
    assert torch.equal(strided.cpu(), torch.hash_tensor(x.transpose(0, 2), dim=1))


@pytest.mark.parametrize("n", [1, 2, 3, 31, 1000, 1023, 1025])
def test_every_length_folds_every_element(n):
    # odd lengths at every level of the tree keep their last element
    x = _values(torch.float32, 4, n)
    with no_fallback():
        got = torch.hash_tensor(x.to(DEV), 1)
    assert torch.equal(got.cpu(), torch.hash_tensor(x, 1))
    assert torchneuron.get_executed_ops().get("aten::hash_tensor", 0) == 1


def test_out_scalar_and_empty():
    x = _values(torch.float64, 2, 3)
    with no_fallback():
        out = torch.empty(0, dtype=torch.uint64, device=DEV)
        torch.hash_tensor(x.to(DEV), 1, out=out)
        scalar = torch.hash_tensor(torch.tensor(2.5, device=DEV))
        no_rows = torch.hash_tensor(torch.empty(0, 3, device=DEV), dim=1)
    assert torch.equal(out.cpu(), torch.hash_tensor(x, 1))
    assert torch.equal(scalar.cpu(), torch.hash_tensor(torch.tensor(2.5)))
    assert no_rows.shape == (0,) and no_rows.dtype == torch.uint64


def _error(fn):
    try:
        fn()
    except (RuntimeError, NotImplementedError, IndexError) as e:
        return type(e), str(e)
    return None


@pytest.mark.parametrize("case", ["mode", "empty_no_dim", "empty_dim", "out_dtype", "complex"])
def test_errors_match_cpu(case):
    def call(dev):
        if case == "mode":
            return torch.hash_tensor(torch.ones(3, device=dev), mode=1)
        if case == "empty_no_dim":
            return torch.hash_tensor(torch.empty(0, 3, device=dev))
        if case == "empty_dim":
            return torch.hash_tensor(torch.empty(0, 3, device=dev), dim=0)
        if case == "out_dtype":
            return torch.hash_tensor(torch.ones(3, device=dev), 0, out=torch.empty(0, dtype=torch.int64, device=dev))
        return torch.hash_tensor(torch.ones(3, dtype=torch.complex64, device=dev))

    expected = _error(lambda: call("cpu"))
    assert expected is not None
    assert _error(lambda: call(DEV)) == expected
