"""torch.mode natively on neuron: values and indices against the CPU (the
most frequent value, the smallest of a tie, its last index), every dtype,
non-contiguous, keepdim, 0-d, zero-size, out=, and the documented NaN rule."""

import pytest
import torch


DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]


pytestmark = pytest.mark.usefixtures("native_only")


def sample(shape, dtype, seed, high=5):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high if dtype != torch.bool else 2, shape, generator=g).to(dtype)


def same_mode(x, dim=-1, keepdim=False):
    cv, ci = torch.mode(x, dim, keepdim)
    nv, ni = torch.mode(x.to("neuron"), dim, keepdim)
    assert nv.dtype == cv.dtype and ni.dtype == torch.int64
    assert torch.equal(nv.cpu(), cv), (x, nv, cv)
    assert torch.equal(ni.cpu(), ci), (x, ni, ci)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mode_matches_cpu_per_dtype(dtype):
    for seed in range(3):
        same_mode(sample((6, 9), dtype, seed))
        same_mode(sample((6, 9), dtype, seed), dim=0, keepdim=True)


def test_mode_on_long_slices_and_many_ties():
    # Long rows where many values tie: the smallest wins, as on the CPU. The
    # CPU's index is then any occurrence (its sort is not stable past a few
    # elements); ours is the last, always.
    for seed in range(4):
        for dtype, high in ((torch.int32, 40), (torch.float32, 7)):
            x = sample((3, 4000), dtype, seed, high=high)
            cv, _ = torch.mode(x, 1)
            nv, ni = torch.mode(x.to("neuron"), 1)
            assert torch.equal(nv.cpu(), cv)
            for r in range(3):
                assert ni[r].item() == (x[r] == cv[r]).nonzero().max().item()


def test_mode_of_non_contiguous_and_broadcast_views():
    x = sample((5, 8, 6), torch.float32, 7)
    same_mode(x.transpose(0, 2), dim=1)
    same_mode(x[:, ::2, 1:], dim=-1)
    same_mode(torch.tensor([3.0, 1.0]).expand(4, 2), dim=0)


def test_mode_signed_zeros_count_as_one_value():
    x = torch.tensor([[0.0, -0.0, 1.0, 1.0, -0.0]])
    same_mode(x)


def test_mode_of_0d_single_and_empty():
    same_mode(torch.tensor(4.5), dim=0)
    same_mode(torch.tensor([[2], [7]]), dim=1)
    v, i = torch.mode(torch.empty(0, 3, device="neuron"), dim=1)
    assert v.shape == (0,) and i.shape == (0,)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        torch.mode(torch.empty(3, 0, device="neuron"), dim=1)


def test_each_nan_is_a_run_of_its_own():
    # NaN equals nothing: two NaNs do not outvote a single 1 (the longest
    # runs are all of length 1, and the numbers sort before NaN).
    v, i = torch.mode(torch.tensor([float("nan"), float("nan"), 1.0], device="neuron"))
    assert v.item() == 1.0 and i.item() == 2
    v, i = torch.mode(torch.tensor([float("nan"), 2.0, float("nan"), 2.0], device="neuron"))
    assert v.item() == 2.0 and i.item() == 3


@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_out(keepdim):
    x = sample((4, 7), torch.int64, 11)
    values, indices = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    torch.mode(x, 1, keepdim, out=(values, indices))
    nv = torch.empty(0, dtype=torch.long, device="neuron")
    ni = torch.empty(0, dtype=torch.long, device="neuron")
    result = torch.mode(x.to("neuron"), 1, keepdim, out=(nv, ni))
    assert result.values is nv and result.indices is ni
    assert torch.equal(nv.cpu(), values) and torch.equal(ni.cpu(), indices)
    with pytest.raises(RuntimeError, match="expected scalar type .Long. but got .Float. for values output"):
        torch.mode(x.to("neuron"), out=(torch.empty(0, device="neuron"), ni))
    with pytest.raises(RuntimeError, match="expected scalar type .Long. but got .Int. for indices output"):
        torch.mode(x.to("neuron"), out=(nv, torch.empty(0, dtype=torch.int32, device="neuron")))
