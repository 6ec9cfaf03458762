"""ldexp of float16, bfloat16 and float32 by integer exponents against
PyTorch CPU (std::ldexp per element: one rounding of x * 2^e, so results
overflow to inf and underflow through the subnormals to zero as the CPU's
do), natively; other dtype pairs keep ATen's composite."""

import pytest
import torch

from conftest import assert_same, no_fallback

DEV = "neuron"


def _every_finite(dtype):
    """Every finite value of a 16-bit dtype (its bit patterns), or a spread
    of float32 values with subnormals and the extremes."""
    if dtype == torch.float32:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(4096, generator=g) * torch.pow(2.0, torch.randint(-140, 120, (4096,), generator=g))
        return torch.cat([x, torch.tensor([torch.finfo(dtype).max, torch.finfo(dtype).tiny, 2.0**-149, -0.0])])
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return bits[torch.isfinite(bits)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_ldexp_at_the_bounds_matches_cpu(dtype):
    x = _every_finite(dtype)
    d = x.to(DEV)
    with no_fallback():
        for e in range(-30, 31, 3):
            exps = torch.full_like(x, e, dtype=torch.int64)
            assert_same(torch.ldexp(d, exps.to(DEV)).cpu(), torch.ldexp(x, exps))
        # one exponent per element, int32 exponents, exponents far out
        exps = torch.randint(-200, 200, x.shape, generator=torch.Generator().manual_seed(1), dtype=torch.int32)
        assert_same(torch.ldexp(d, exps.to(DEV)).cpu(), torch.ldexp(x, exps))
        far = torch.tensor([2**32 + 1, -(2**31), 5000, -5000, 2**40], dtype=torch.int64)
        y = x[:5]
        assert_same(torch.ldexp(y.to(DEV), far.to(DEV)).cpu(), torch.ldexp(y, far))


def test_ldexp_layouts_out_and_inplace():
    x = torch.tensor([[-2.0, 2.0**-10, 1.5], [0.0, -0.0, 65504.0]], dtype=torch.float16)
    e = torch.tensor([-25, 20, 3], dtype=torch.int64)
    special = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=torch.float16)
    d, de = x.to(DEV), e.to(DEV)
    with no_fallback():
        assert_same(torch.ldexp(d, de).cpu(), torch.ldexp(x, e))  # broadcast
        assert_same(torch.ldexp(d.t(), de[:2]).cpu(), torch.ldexp(x.t(), e[:2]))  # strided
        assert_same(torch.ldexp(d[:0], de).cpu(), torch.ldexp(x[:0], e))  # zero-size
        assert_same(torch.ldexp(d[0, 0], de[0]).cpu(), torch.ldexp(x[0, 0], e[0]))  # 0-d
        assert_same(torch.ldexp(special.to(DEV), de).cpu(), torch.ldexp(special, e))
        out = torch.empty(0, dtype=torch.float16, device=DEV)
        assert torch.ldexp(d, de, out=out) is out
        assert_same(out.cpu(), torch.ldexp(x, e))
        dc = d.clone()
        assert dc.ldexp_(de) is dc
        assert_same(dc.cpu(), x.clone().ldexp_(e))
    # a float exponent, an integer input: ATen's composite, the CPU's values
    for a, b in ((x, e.to(torch.float16)), (e, e), (x.double(), e)):
        torch.testing.assert_close(torch.ldexp(a.to(DEV), b.to(DEV)).cpu(), torch.ldexp(a, b), equal_nan=True)
    with pytest.raises(NotImplementedError) as cpu_err:
        torch.ldexp(x, torch.tensor(True))
    with pytest.raises(NotImplementedError) as dev_err:
        torch.ldexp(d, torch.tensor(True, device=DEV))
    assert str(dev_err.value) == str(cpu_err.value)
    # in place, a broadcast shape larger than self: the CPU's error at every dtype
    for a, b in ((x[:, :1], e), (x.to(torch.complex64)[:, :1], e.to(torch.complex64)), (x.double()[:1], e[:, None])):
        with pytest.raises(RuntimeError) as cpu_err:
            a.clone().ldexp_(b)
        with pytest.raises(RuntimeError) as dev_err:
            a.to(DEV).ldexp_(b.to(DEV))
        assert str(dev_err.value) == str(cpu_err.value)
