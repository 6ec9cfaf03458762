"""The gradient scaler on neuron (torch.amp.GradScaler("neuron")) against the CPU.

Its two ops are native (runtime AMP_UNSCALE and AMP_UPDATE_SCALE):
_amp_foreach_non_finite_check_and_unscale_ must give the CPU's gradients
bit for bit and the same found_inf, for every floating dtype and layout;
_amp_update_scale_ the same scale and growth tracker through backoff,
counting and growth. End to end, float16-autocast training steps with a
GradScaler on neuron and on CPU (same weights and data) must agree: the
same steps are skipped (an overflowing initial scale, and an injected
infinite loss), the same scales follow, and the parameters stay close
(float16 matmuls: 1e-3). No op may fall back to the CPU.
"""

import copy

import pytest
import torch

import torchneuron
from conftest import assert_same, dtype_id, no_fallback

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def grads_with(dtype, special, device):
    """A contiguous, a transposed, a sliced and an empty gradient on device;
    special (a value or None) is planted in the sliced one."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(40, 30, generator=g) * 100).to(dtype)
    b = (torch.randn(50, 20, generator=g) * 100).to(dtype)
    c = (torch.randn(64, 6, generator=g) * 100).to(dtype)
    if special is not None:
        c[17, 2] = special
    a, b, c = a.to(device), b.to(device), c.to(device)
    return [a, b.t(), c[:, ::2], torch.empty(0, dtype=dtype, device=device)]


def unscale(grads, found, inv_scale):
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale)
    return grads, found


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("special", [None, float("inf"), -float("inf"), float("nan")],
                         ids=["finite", "inf", "-inf", "nan"])
@pytest.mark.parametrize("inv_scale", [0.125, 1 / 3, 1.0])
def test_unscale_matches_cpu(dtype, special, inv_scale):
    expected, found_cpu = unscale(grads_with(dtype, special, "cpu"), torch.zeros(()),
                                  torch.full((), inv_scale))
    with no_fallback():
        actual, found = unscale(grads_with(dtype, special, "neuron"),
                                torch.zeros((), device="neuron"),
                                torch.full((), inv_scale, device="neuron"))
    for a, e in zip(actual, expected):
        assert_same(a, e)
    assert_same(found, found_cpu)
    assert found.item() == (0.0 if special is None else 1.0)


def test_unscale_keeps_found_inf_set_and_works_on_views_in_place():
    base = torch.arange(24.0).reshape(4, 6)
    with no_fallback():
        dev = base.to("neuron")
        view = dev[:, ::2]  # unscales the view's elements only
        found = torch.ones((), device="neuron")
        torch._amp_foreach_non_finite_check_and_unscale_([view], found, torch.full((), 0.5, device="neuron"))
    expected = base.clone()
    expected[:, ::2] *= 0.5
    assert_same(dev, expected)
    assert found.item() == 1.0


def test_unscale_rejects_what_cpu_rejects():
    g = [torch.ones(3, device="neuron")]
    with pytest.raises(RuntimeError, match="inv_scale must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros((), device="neuron"),
                                                         torch.ones(2, device="neuron"))
    with pytest.raises(RuntimeError, match="found_inf must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            g, torch.zeros((), device="neuron", dtype=torch.float64), torch.ones((), device="neuron"))


def test_unscale_rejects_an_expanded_gradient_as_cpu_does():
    for device in ("cpu", "neuron"):
        g = torch.ones(1, device=device).expand(4)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch._amp_foreach_non_finite_check_and_unscale_(
                [g], torch.zeros((), device=device), torch.full((), 0.5, device=device))


def test_functional_variants_run_natively():
    with no_fallback():
        grads = [torch.full((3,), 4.0, device="neuron")]
        found, inv = torch.zeros((), device="neuron"), torch.full((), 0.5, device="neuron")
        new_grads, new_found = torch.ops.aten._amp_foreach_non_finite_check_and_unscale(grads, found, inv)
        scale, tracker = torch.ops.aten._amp_update_scale(
            torch.ones((), device="neuron"), torch.zeros((), dtype=torch.int32, device="neuron"),
            found, 2.0, 0.5, 1)
    assert new_grads[0].tolist() == [2.0, 2.0, 2.0] and grads[0].tolist() == [4.0, 4.0, 4.0]
    assert new_found.item() == 0.0 and scale.item() == 2.0 and tracker.item() == 0


def update_sequence(device, found_infs, growth=2.0, backoff=0.5, interval=3, scale=1024.0):
    s = torch.full((), scale, device=device)
    tracker = torch.zeros((), dtype=torch.int32, device=device)
    history = []
    for f in found_infs:
        found = torch.full((), f, dtype=torch.float32, device=device)
        torch._amp_update_scale_(s, tracker, found, growth, backoff, interval)
        history.append((s.item(), tracker.item()))
    return history


@pytest.mark.parametrize("growth,backoff,interval,scale", [
    (2.0, 0.5, 3, 1024.0), (1.5, 0.3, 1, 1.0), (2.0, 0.5, 1, 3e38)])
def test_update_scale_matches_cpu(growth, backoff, interval, scale):
    found_infs = [0, 0, 1, 0, 0, 0, 0, float("nan"), 0, 0, 0, 0]
    expected = update_sequence("cpu", found_infs, growth, backoff, interval, scale)
    with no_fallback():
        actual = update_sequence("neuron", found_infs, growth, backoff, interval, scale)
    assert actual == expected


# ---- float16-autocast training with a GradScaler ----------------------------

def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def train(device, opt_factory, steps, inf_step):
    model = make_model().to(device)
    opt = opt_factory(model.parameters())
    scaler = torch.amp.GradScaler(device, init_scale=2.0**24, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    record = []
    for step in range(steps):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randn(8, 4, generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        if step == inf_step:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        skipped = all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
        record.append((scaler.get_scale(), skipped))
    return record, [p.detach().cpu() for p in model.parameters()]


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw_fused": lambda params: torch.optim.AdamW(params, lr=1e-2, fused=True),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_float16_autocast_training_with_grad_scaler_matches_cpu(opt):
    expected, expected_params = train("cpu", OPTIMIZERS[opt], steps=14, inf_step=11)
    with no_fallback():
        actual, params = train("neuron", OPTIMIZERS[opt], steps=14, inf_step=11)
    # 2**24 overflows float16 at first: the scaler backs off and skips steps,
    # then grows every two good steps; step 11's infinite loss is skipped.
    assert [s for _, s in expected[:3]] == [True, True, True]
    assert expected[11][1] and not expected[10][1] and not expected[12][1]
    assert actual == expected
    for a, e in zip(params, expected_params):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-3)
