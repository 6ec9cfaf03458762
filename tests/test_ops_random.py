"""Random ops on neuron: reproducibility, generator state, distributions.

Values differ from the CPU's (another generator), so distributions are
checked statistically on large samples with fixed seeds (the tests are
deterministic), while everything that is not random (ranges, dtypes,
shapes, errors, dropout's scaling) is compared with PyTorch CPU. Every test
asserts that no CPU fallback ran.
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import torchneuron

DEV = "neuron"
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def host(t):
    return t.cpu()


def ks_statistic(sample, cdf):
    """Kolmogorov-Smirnov distance between a sample and a CDF (float64)."""
    x = np.sort(sample.double().numpy())
    f = cdf(torch.from_numpy(x)).numpy()
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(0, n) / n))


def chi_square(counts, expected):
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return float(np.sum((counts - expected) ** 2 / expected))


def chi_square_bound(bins):
    """A bound the statistic exceeds with probability far below 1e-4."""
    df = bins - 1
    return df + 6 * math.sqrt(2 * df)


# ---- reproducibility ---------------------------------------------------------------


def test_same_seed_gives_same_numbers_and_other_seeds_differ():
    torch.manual_seed(123)
    a = host(torch.randn(1000, device=DEV))
    torch.manual_seed(123)
    b = host(torch.randn(1000, device=DEV))
    torch.manual_seed(124)
    c = host(torch.randn(1000, device=DEV))
    assert torch.equal(a, b)
    assert (a != c).sum() > 990


def test_consecutive_calls_draw_new_numbers():
    torch.manual_seed(5)
    a = host(torch.rand(10000, device=DEV))
    b = host(torch.rand(10000, device=DEV))
    assert (a == b).sum() < 10


def _thread_probe():
    """A digest of several ops' numbers on sizes that the kernels split."""
    import hashlib

    torch.manual_seed(2024)
    d = DEV
    parts = [
        torch.empty(300001, device=d).uniform_(-1, 2),
        torch.empty(300001, device=d).normal_(),
        torch.empty(1000, 301, device=d, dtype=torch.float64).t().normal_(),
        torch.empty(200001, device=d, dtype=torch.bfloat16).bernoulli_(0.3),
        torch.empty(200001, device=d, dtype=torch.int64).random_(-7, 1000),
        torch.randperm(100003, device=d),
        torch.multinomial(torch.rand(300, 500, device=d), 50),
        torch.multinomial(torch.rand(300, 500, device=d), 50, replacement=True),
        torch.ops.aten.native_dropout(torch.ones(250001, device=d), 0.4, True)[1],
        torch.empty(100001, device=d).exponential_(2.0),
    ]
    h = hashlib.sha256()
    for p in parts:
        h.update(p.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_numbers_do_not_depend_on_the_thread_count():
    """This process uses every core; a child the same probe on one thread
    (the C tests also cover 2 and 3 threads)."""
    script = ("import tests.test_ops_random as t, torchneuron; print(t._thread_probe()); "
              "assert torchneuron.get_fallback_ops() == {}")
    env = dict(os.environ, TORCHNEURON_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, check=True,
                           capture_output=True, text=True, timeout=120)
    assert child.stdout.strip().splitlines()[-1] == _thread_probe()


@pytest.mark.parametrize("dtype", FLOATS)
def test_numbers_do_not_depend_on_the_output_layout(dtype):
    """Element i (in logical order) gets the same value whatever the strides."""
    for fill in (lambda t: t.uniform_(-3, 3), lambda t: t.normal_(1, 2),
                 lambda t: t.bernoulli_(0.5), lambda t: t.random_(0, 100),
                 lambda t: t.exponential_(), lambda t: t.log_normal_(), lambda t: t.cauchy_()):
        torch.manual_seed(9)
        contiguous = host(fill(torch.empty(37, 53, device=DEV, dtype=dtype)))
        torch.manual_seed(9)
        transposed = torch.empty(53, 37, device=DEV, dtype=dtype).t()
        assert not transposed.is_contiguous()
        fill(transposed)
        torch.manual_seed(9)
        base = torch.zeros(37, 106, device=DEV, dtype=dtype)
        fill(base[:, ::2])
        assert torch.equal(host(transposed), contiguous)
        assert torch.equal(host(base)[:, ::2], contiguous)
        assert torch.all(host(base)[:, 1::2] == 0)


# ---- generator state ------------------------------------------------------------------


def test_rng_state_is_16_bytes_and_set_rng_state_repeats_the_numbers():
    torch.neuron.manual_seed(77)
    torch.randn(10, device=DEV)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,)
    a = host(torch.randn(1001, device=DEV))
    b = host(torch.empty(99, device=DEV).random_(0, 1000))
    torch.neuron.set_rng_state(state)
    assert torch.equal(host(torch.randn(1001, device=DEV)), a)
    assert torch.equal(host(torch.empty(99, device=DEV).random_(0, 1000)), b)
    assert torch.equal(torch.neuron.get_rng_state_all()[0], torch.neuron.get_rng_state())


def test_each_call_reserves_64_bits_per_element_on_the_generator():
    gen = torch.neuron.default_generators[0]
    torch.neuron.manual_seed(1)
    assert gen.get_offset() == 0
    torch.empty(1001, device=DEV).uniform_()
    assert gen.get_offset() == 501
    torch.empty(10, device=DEV, dtype=torch.float64).normal_()
    assert gen.get_offset() == 506


def test_torch_manual_seed_reaches_every_neuron_device():
    torch.manual_seed(31)
    assert torch.neuron.initial_seed() == 31
    for g in torch.neuron.default_generators:
        assert g.initial_seed() == 31
    a = host(torch.rand(100, device=DEV))
    torch.neuron.manual_seed_all(31)
    assert torch.equal(host(torch.rand(100, device=DEV)), a)


def test_fork_rng_restores_the_neuron_state():
    torch.manual_seed(8)
    with torch.random.fork_rng(device_type="neuron"):
        inside = host(torch.randn(100, device=DEV))
    after = host(torch.randn(100, device=DEV))
    assert torch.equal(inside, after)


def test_explicit_generator_is_reproducible_and_leaves_the_default_alone():
    default = torch.neuron.default_generators[0]
    torch.neuron.manual_seed(3)
    before = default.get_offset()
    g = torch.Generator(device=DEV)
    g.manual_seed(1234)
    a = host(torch.randn(500, device=DEV, generator=g))
    b = host(torch.empty(500, device=DEV).uniform_(generator=g))
    assert g.get_offset() == 500
    assert default.get_offset() == before
    g.manual_seed(1234)
    assert torch.equal(host(torch.randn(500, device=DEV, generator=g)), a)
    state = g.get_state()
    c = host(torch.randperm(1000, device=DEV, generator=g))
    g.set_state(state)
    assert torch.equal(host(torch.randperm(1000, device=DEV, generator=g)), c)
    assert not torch.equal(a, b)


def test_a_cpu_generator_is_rejected():
    with pytest.raises(RuntimeError, match="generator"):
        torch.empty(4, device=DEV).uniform_(generator=torch.Generator())


# ---- uniform and normal ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_is_uniform_on_from_to(dtype):
    torch.manual_seed(10)
    x = host(torch.empty(200000, device=DEV, dtype=dtype).uniform_(-2, 3)).double()
    assert x.min() >= -2 and x.max() < 3
    assert abs(x.mean() - 0.5) < 0.02
    assert abs(x.var() - 25 / 12) < 0.03
    if dtype in (torch.float32, torch.float64):
        assert ks_statistic(x, lambda v: (v + 2) / 5) * math.sqrt(len(x)) < 1.95


def test_uniform_stays_below_to_after_rounding():
    torch.manual_seed(0)
    x = host(torch.empty(100000, device=DEV, dtype=torch.float16).uniform_(1000, 1000.5))
    assert torch.all(x == 1000)
    y = host(torch.empty(100000, device=DEV, dtype=torch.bfloat16).uniform_(0, 1))
    assert y.max() < 1
    z = host(torch.empty(1000, device=DEV).uniform_(4, 4))
    assert torch.all(z == 4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_has_the_right_moments_and_shape(dtype):
    torch.manual_seed(11)
    x = host(torch.empty(400001, device=DEV, dtype=dtype).normal_(1.5, 2.0)).double()
    assert abs(x.mean() - 1.5) < 0.02
    assert abs(x.std() - 2.0) < 0.02
    z = (x - 1.5) / 2
    assert abs((z ** 3).mean()) < 0.03  # skewness
    assert abs((z ** 4).mean() - 3) < 0.06  # kurtosis
    if dtype in (torch.float32, torch.float64):
        assert ks_statistic(z, torch.special.ndtr) * math.sqrt(len(z)) < 1.95
        assert z.abs().max() > 4  # tails are there


def test_randn_rand_and_their_like_forms_run_natively():
    torch.manual_seed(12)
    a = torch.randn(3, 4, device=DEV)
    b = torch.rand(3, 4, device=DEV, dtype=torch.float64)
    c = torch.randn_like(b)
    d = torch.rand_like(a, dtype=torch.bfloat16)
    assert a.shape == c.shape == (3, 4) and a.device.type == DEV
    assert c.dtype == torch.float64 and d.dtype == torch.bfloat16
    assert 0 <= host(b).min() and host(b).max() < 1
    assert torch.normal(0.0, 1.0, size=(5,), device=DEV).shape == (5,)


def test_normal_with_tensor_mean_and_std_broadcasts_like_cpu():
    torch.manual_seed(13)
    mean = torch.arange(4, dtype=torch.float32).mul(100).to(DEV)
    std = torch.tensor([[0.5], [1.0], [2.0]], device=DEV)
    both = host(torch.normal(mean.expand(20000, 4).contiguous(), 2.0))
    assert both.shape == (20000, 4)
    assert torch.allclose(both.mean(0), torch.arange(4.0) * 100, atol=0.1)
    assert torch.allclose(both.std(0), torch.full((4,), 2.0), atol=0.05)
    assert torch.normal(mean, std).shape == torch.normal(mean.cpu(), std.cpu()).shape == (3, 4)
    s = host(torch.normal(3.0, std.expand(3, 30000)))
    assert torch.allclose(s.std(1), torch.tensor([0.5, 1.0, 2.0]), rtol=0.03)
    for args, size, shape in (((mean, 1.0), 4, (4,)), ((1.0, mean), 0, (4,)),
                              ((mean, std), 0, (3, 4))):
        out = torch.empty(size, device=DEV)
        torch.normal(*args, out=out)
        assert out.shape == shape
    with pytest.raises(RuntimeError) as cpu_error:
        torch.normal(mean.cpu(), 1.0, out=torch.empty(0))
    with pytest.raises(RuntimeError) as neuron_error:
        torch.normal(mean, 1.0, out=torch.empty(0, device=DEV))
    assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def test_normal_rejects_a_negative_std():
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device=DEV).normal_(0, -1)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(torch.zeros(3, device=DEV), -1.0)
    # a std tensor is checked at the call, as the CPU (and CUDA) check it
    for std in (torch.tensor([1.0, -1.0]), torch.tensor(-2.0)):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.normal(0.0, std)
        with pytest.raises(RuntimeError) as neuron_error:
            torch.normal(0.0, std.to(DEV))
        assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]
        with pytest.raises(RuntimeError, match="std >= 0.0"):
            torch.normal(torch.zeros(2, device=DEV), std.to(DEV))


# ---- bernoulli, dropout ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bool] + INTS + FLOATS)
def test_bernoulli_frequencies_for_every_dtype(dtype):
    torch.manual_seed(14)
    for p in (0.0, 0.2, 0.5, 1.0):
        x = host(torch.empty(100000, device=DEV, dtype=dtype).bernoulli_(p))
        assert x.dtype == dtype
        assert ((x == 0) | (x == 1)).all()
        assert abs(x.double().mean() - p) < 0.006


def test_bernoulli_with_a_probability_tensor():
    torch.manual_seed(15)
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], device=DEV)
    draws = host(torch.empty(40000, 5, device=DEV, dtype=torch.uint8).bernoulli_(p))
    assert torch.allclose(draws.double().mean(0), p.cpu().double(), atol=0.01)
    assert draws[:, 0].sum() == 0 and draws[:, 4].sum() == 40000
    probs = torch.rand(50000, device=DEV, dtype=torch.float64)
    out = torch.bernoulli(probs)
    assert out.dtype == torch.float64
    assert abs(host(out).mean() - host(probs).mean()) < 0.01
    half = torch.bernoulli(torch.full((1000,), 0.5, device=DEV, dtype=torch.float16))
    assert half.dtype == torch.float16
    assert torch.bernoulli(torch.zeros(3, device=DEV), p=0.5).shape == (3,)


def test_bernoulli_rejects_bad_probabilities():
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        torch.empty(3, device=DEV).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"bernoulli.*\[0, 1\].*p\[2\]"):
        torch.empty(4, device=DEV).bernoulli_(torch.tensor([0.1, 0.2, 1.5, 0.3], device=DEV))
        torch.neuron.synchronize()


@pytest.mark.parametrize("dtype", FLOATS)
def test_native_dropout_masks_and_scales_like_cpu(dtype):
    torch.manual_seed(16)
    x = torch.randn(300, 301, device=DEV, dtype=dtype).t()  # non-contiguous input
    out, mask = torch.ops.aten.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and out.dtype == dtype and out.shape == x.shape
    m = host(mask)
    assert abs(m.double().mean() - 0.7) < 0.005
    expect = x.cpu().mul(m).mul_(1 / 0.7)
    assert torch.equal(host(out), expect)
    grad = torch.randn(301, 300, device=DEV, dtype=dtype)
    back = torch.ops.aten.native_dropout_backward(grad, mask, 1 / 0.7)
    assert torch.equal(host(back), torch.ops.aten.native_dropout_backward(grad.cpu(), m, 1 / 0.7))


def test_native_dropout_in_eval_and_edge_probabilities_match_cpu():
    x = torch.randn(50, device=DEV)
    out, mask = torch.ops.aten.native_dropout(x, 0.5, False)
    cpu_out, cpu_mask = torch.ops.aten.native_dropout(x.cpu(), 0.5, False)
    assert torch.equal(host(out), cpu_out) and torch.equal(host(mask), cpu_mask)
    out, mask = torch.ops.aten.native_dropout(x, 1.0, True)
    assert not host(mask).any() and torch.all(host(out) == 0)
    out, mask = torch.ops.aten.native_dropout(x, 0.0, True)
    assert host(mask).all() and torch.equal(host(out), x.cpu())
    empty, empty_mask = torch.ops.aten.native_dropout(torch.empty(0, device=DEV), 0.5, True)
    assert empty.shape == empty_mask.shape == (0,)


def test_dropout_module_and_its_gradient_run_natively():
    torch.manual_seed(17)
    x = torch.randn(1000, device=DEV, requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25, training=True)
    y.backward(torch.ones(1000, device=DEV))
    kept = host(y) != 0
    assert torch.equal(host(x.grad), kept.float() / 0.75)
    assert torch.equal(host(torch.nn.functional.dropout(x, 0.25, training=False)), host(x).detach())
    layer = torch.nn.Dropout(0.5).to(DEV)
    assert 0.4 < (host(layer(torch.ones(10000, device=DEV))) == 0).double().mean() < 0.6


# ---- integers ------------------------------------------------------------------------------


def dtype_max(dtype):
    return 1 if dtype == torch.bool else torch.iinfo(dtype).max


@pytest.mark.parametrize("dtype", [torch.bool] + INTS + FLOATS)
def test_random_without_bounds_covers_the_dtype_range_like_cpu(dtype):
    torch.manual_seed(18)
    x = host(torch.empty(200000, device=DEV, dtype=dtype).random_()).double()
    if dtype.is_floating_point:
        digits = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}
        top = 2 ** digits[dtype]  # every integer up to it is exact
        assert x.min() >= 0 and x.max() <= top and torch.all(x == x.round())
        assert abs(x.mean() / top - 0.5) < 0.01
    else:
        top = dtype_max(dtype)
        assert x.min() >= 0 and x.max() <= top
        assert abs(x.mean() / top - 0.5) < 0.01


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_random_from_to_is_uniform_over_the_range(dtype):
    torch.manual_seed(19)
    low = 0 if dtype == torch.uint8 else -5
    x = host(torch.empty(100000, device=DEV, dtype=dtype).random_(low, low + 10))
    counts = torch.bincount((x.long() - low).flatten(), minlength=10)
    assert counts.numel() == 10
    assert chi_square(counts, [10000] * 10) < chi_square_bound(10)
    y = host(torch.empty(1000, device=DEV, dtype=dtype).random_(7))
    assert y.min() >= 0 and y.max() < 7


@pytest.mark.parametrize("dtype", INTS)
def test_random_from_without_to_reaches_the_dtype_maximum(dtype):
    torch.manual_seed(20)
    low = 3
    x = host(torch.empty(200000, device=DEV, dtype=dtype).random_(low, None)).double()
    assert x.min() >= low and x.max() <= dtype_max(dtype)
    assert abs(x.mean() - (low + dtype_max(dtype)) / 2) < 0.01 * dtype_max(dtype)


def test_random_full_int64_range_and_large_ranges():
    torch.manual_seed(21)
    x = host(torch.empty(100000, device=DEV, dtype=torch.int64).random_(-2 ** 63, None))
    assert (x < 0).double().mean().item() == pytest.approx(0.5, abs=0.01)
    assert x.max() > 2 ** 62 and x.min() < -2 ** 62
    big = host(torch.empty(100000, device=DEV, dtype=torch.int64).random_(0, 2 ** 40))
    assert big.min() >= 0 and big.max() < 2 ** 40 and big.max() > 2 ** 39


def test_random_checks_its_bounds_like_cpu():
    for args in ((5, 3), (0, 300)):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.empty(3, dtype=torch.uint8).random_(*args)
        with pytest.raises(RuntimeError) as neuron_error:
            torch.empty(3, dtype=torch.uint8, device=DEV).random_(*args)
        assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


@pytest.mark.parametrize("dtype", INTS)
def test_randint_is_uniform_for_integer_dtypes(dtype):
    torch.manual_seed(22)
    x = host(torch.randint(0, 6, (60000,), device=DEV, dtype=dtype))
    assert x.dtype == dtype
    counts = torch.bincount(x.long(), minlength=6)
    assert chi_square(counts, [10000] * 6) < chi_square_bound(6)
    assert torch.randint(10, (3, 3), device=DEV).dtype == torch.int64
    assert torch.randint_like(torch.empty(4, device=DEV), 3, 9).shape == (4,)


# ---- other distributions ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_exponential_log_normal_and_cauchy_have_the_right_laws(dtype):
    torch.manual_seed(23)
    n = 200000
    e = host(torch.empty(n, device=DEV, dtype=dtype).exponential_(2.0)).double()
    assert e.min() > 0 and abs(e.mean() - 0.5) < 0.01 and abs(e.std() - 0.5) < 0.01
    ln = host(torch.empty(n, device=DEV, dtype=dtype).log_normal_(0.5, 0.25)).double().log()
    assert abs(ln.mean() - 0.5) < 0.01 and abs(ln.std() - 0.25) < 0.01
    c = host(torch.empty(n, device=DEV, dtype=dtype).cauchy_(1.0, 2.0)).double()
    quartiles = torch.quantile(c[:100000], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    assert torch.allclose(quartiles, torch.tensor([-1.0, 1.0, 3.0], dtype=torch.float64), atol=0.06)
    if dtype == torch.float64:
        assert ks_statistic(e, lambda v: 1 - torch.exp(-2 * v)) * math.sqrt(n) < 1.95


@pytest.mark.parametrize("dtype", INTS[1:] + FLOATS)
def test_geometric_counts_trials_to_the_first_success(dtype):
    torch.manual_seed(24)
    g = host(torch.empty(200000, device=DEV, dtype=dtype).geometric_(0.25)).double()
    assert g.min() >= 1 and torch.all(g == g.round())
    assert abs(g.mean() - 4) < 0.05
    freq_one = (g == 1).double().mean()
    assert abs(freq_one - 0.25) < 0.005


def test_distribution_parameters_are_checked_like_cpu():
    cases = [
        lambda t: t.uniform_(2, 1),
        lambda t: t.exponential_(0),
        lambda t: t.geometric_(1.5),
        lambda t: t.log_normal_(0, 0),
        lambda t: t.cauchy_(0, -1),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as cpu_error:
            case(torch.empty(3))
        with pytest.raises(RuntimeError) as neuron_error:
            case(torch.empty(3, device=DEV))
        assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


@pytest.mark.parametrize("op", ["uniform_", "normal_", "exponential_", "log_normal_", "cauchy_"])
def test_continuous_distributions_reject_integer_tensors(op):
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(torch.empty(3, dtype=torch.int64), op)()
    with pytest.raises((RuntimeError, NotImplementedError), match="Long|long"):
        getattr(torch.empty(3, dtype=torch.int64, device=DEV), op)()


def test_zero_size_and_zero_dim_tensors():
    torch.manual_seed(25)
    for fill in (lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.bernoulli_(0.5),
                 lambda t: t.random_(0, 5), lambda t: t.exponential_()):
        assert fill(torch.empty(0, 3, device=DEV)).shape == (0, 3)
        scalar = fill(torch.empty((), device=DEV))
        assert scalar.shape == () and math.isfinite(scalar.item())
    assert torch.randperm(0, device=DEV).shape == (0,)


# ---- randperm, multinomial ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.float32,
                                   torch.float64, torch.float16, torch.bfloat16, torch.uint8])
def test_randperm_is_a_permutation(dtype):
    torch.manual_seed(26)
    n = 200 if dtype in (torch.uint8, torch.bfloat16) else 2000
    p = host(torch.randperm(n, device=DEV, dtype=dtype))
    assert p.dtype == dtype
    assert torch.equal(p.long().sort().values, torch.arange(n))


def test_randperm_positions_are_uniform():
    torch.manual_seed(27)
    counts = torch.zeros(5, 5)
    for _ in range(400):
        p = host(torch.randperm(5, device=DEV))
        counts[torch.arange(5), p] += 1
    assert chi_square(counts.flatten(), [80] * 25) < chi_square_bound(25)


def test_randperm_beyond_2_24_with_int64():
    torch.manual_seed(28)
    n = (1 << 24) + 17
    p = host(torch.randperm(n, device=DEV)).numpy()
    seen = np.zeros(n, dtype=bool)
    seen[p] = True
    assert seen.all()
    assert (p[:1000] != np.arange(1000)).sum() > 990


def test_randperm_checks_dtype_capacity_like_cpu():
    with pytest.raises(RuntimeError, match="2\\^24\\+1|16777217"):
        torch.randperm((1 << 24) + 2, device=DEV, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="too large"):
        torch.randperm(300, device=DEV, dtype=torch.int8)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.randperm(-1)
    with pytest.raises(RuntimeError) as neuron_error:
        torch.randperm(-1, device=DEV)
    assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]
    out = torch.empty(5, device=DEV, dtype=torch.int64)
    torch.randperm(5, out=out)
    assert torch.equal(host(out).sort().values, torch.arange(5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_multinomial_with_replacement_follows_the_probabilities(dtype):
    torch.manual_seed(29)
    probs = torch.tensor([0.1, 0.0, 0.4, 0.2, 0.3], device=DEV, dtype=dtype)
    s = host(torch.multinomial(probs, 50000, replacement=True))
    assert s.dtype == torch.int64 and s.shape == (50000,)
    counts = torch.bincount(s, minlength=5)
    assert counts[1] == 0
    nonzero = [0, 2, 3, 4]
    assert chi_square(counts[nonzero], [5000, 20000, 10000, 15000]) < chi_square_bound(4)


def test_multinomial_without_replacement_never_repeats_and_follows_sequential_draws():
    torch.manual_seed(30)
    weights = torch.tensor([1.0, 2.0, 3.0, 0.0, 4.0], device=DEV)
    rows = weights.expand(20000, 5).contiguous()
    s = host(torch.multinomial(rows, 3))
    assert s.shape == (20000, 3)
    for r in s[:2000]:
        assert len(set(r.tolist())) == 3
    assert not (s == 3).any()
    first = torch.bincount(s[:, 0], minlength=5)
    assert chi_square(first[[0, 1, 2, 4]], [2000, 4000, 6000, 8000]) < chi_square_bound(4)
    # P(second = 0 | first = 4) = 1 / (1 + 2 + 3)
    second = s[s[:, 0] == 4][:, 1]
    assert abs((second == 0).double().mean() - 1 / 6) < 0.02
    full = host(torch.multinomial(torch.rand(7, 40, device=DEV) + 0.01, 40))
    assert torch.equal(full.sort(1).values, torch.arange(40).expand(7, 40))


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(3, device=DEV), 4)
    with pytest.raises(RuntimeError, match="n_sample <= 0"):
        torch.multinomial(torch.ones(3, device=DEV), 0)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        torch.multinomial(torch.ones(2, 2, 2, device=DEV), 1)
    with pytest.raises(RuntimeError, match="multinomial.*inf, nan or element < 0.*row 1"):
        torch.multinomial(torch.tensor([[1.0, 1.0], [1.0, -1.0]], device=DEV), 1)
        torch.neuron.synchronize()
    torch.neuron.clear_error()  # kernel errors are sticky until cleared
    with pytest.raises(RuntimeError, match="multinomial.*sum of probabilities"):
        torch.multinomial(torch.zeros(2, device=DEV), 1, replacement=True)
        torch.neuron.synchronize()
    torch.neuron.clear_error()
    with pytest.raises(RuntimeError, match="multinomial.*not enough non-zero categories"):
        torch.multinomial(torch.tensor([1.0, 0.0, 0.0], device=DEV), 2)
        torch.neuron.synchronize()
    torch.neuron.clear_error()
