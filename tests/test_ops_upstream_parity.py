"""Behaviours PyTorch's own device-generic tests check and neuron got wrong
(issue 20's list): overlap checks on out= factories, the spurious one on
threshold_, the arange resize warning, bincount's error type, more index tensors than
the runtime takes (mode(out=) is in test_ops_mode.py).
Each is compared with the CPU doing the same thing."""

import warnings

import pytest
import torch

import torchneuron

OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


@pytest.fixture(autouse=True)
def _clear():
    torchneuron.clear_op_tracking()
    yield


def no_fallback():
    assert torchneuron.get_fallback_ops() == {}


def test_threshold_inplace_on_an_expanded_tensor_runs_like_cpu():
    for device in ("cpu", "neuron"):
        x = torch.zeros(1, device=device).expand(3)
        torch.nn.functional.threshold_(x, 0.5, 1.0)
        assert x.cpu().tolist() == [1.0, 1.0, 1.0]
    # Other in-place ops still refuse a self-overlapping output, as on CPU.
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=OVERLAP):
            torch.zeros(1, device=device).expand(3).add_(1)
    no_fallback()


@pytest.mark.parametrize("factory", [
    lambda out: torch.linspace(0, 1, 5, out=out),
    lambda out: torch.logspace(0, 1, 5, out=out),
    lambda out: torch.arange(0, 5, out=out),
    lambda out: torch.range(0, 4, out=out),
])
def test_out_factories_refuse_an_expanded_out(factory):
    for device in ("cpu", "neuron"):
        out = torch.empty(1, device=device).expand(5)
        with pytest.raises(RuntimeError, match=OVERLAP), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            factory(out)
    no_fallback()


def test_linspace_single_step_into_an_expanded_out_fills_like_cpu():
    outs = [torch.zeros(1, device=d).expand(1) for d in ("cpu", "neuron")]
    for out in outs:
        torch.linspace(3, 7, 1, out=out)
    assert outs[1].cpu().tolist() == outs[0].tolist() == [3.0]


def _arange_warnings(device, out_numel):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.empty(out_numel, device=device)
        torch.arange(0, 5, out=out)
        assert out.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    # Without the "(Triggered internally at <source file>)" tail.
    return [str(w.message).split(" (Triggered internally")[0] for w in caught
            if "number of elements" in str(w.message)]


@pytest.mark.parametrize("out_numel", [0, 2, 5, 9])
def test_arange_out_resize_warns_like_cpu(out_numel):
    cpu, neuron = _arange_warnings("cpu", out_numel), _arange_warnings("neuron", out_numel)
    assert neuron == cpu
    assert len(neuron) == (1 if out_numel not in (0, 5) else 0)
    no_fallback()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_bincount_of_a_non_integer_dtype_is_not_implemented_like_cpu(dtype):
    for device in ("cpu", "neuron"):
        with pytest.raises(NotImplementedError, match="not implemented for"):
            torch.bincount(torch.tensor([1, 0], device=device).to(dtype))


def test_bincount_checks_dimensions_after_the_dtype():
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="1-d non-negative integral"):
            torch.bincount(torch.zeros(2, 2, dtype=torch.long, device=device))


def test_more_index_tensors_than_the_runtime_takes_run_through_the_fallback():
    # Six index tensors (the runtime's index walk takes five): the op runs
    # through the counted CPU fallback instead of failing.
    x = torch.arange(2 ** 7, dtype=torch.float32).reshape([2] * 7)
    idx = (torch.tensor([0, 1, 1]),) * 6
    nidx = tuple(t.to("neuron") for t in idx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(x.to("neuron")[nidx].cpu(), x[idx])
        for accumulate in (False, True):
            expected = x.clone().index_put_(idx, torch.full((3, 2), 5.0), accumulate=accumulate)
            got = x.to("neuron").index_put_(nidx, torch.full((3, 2), 5.0, device="neuron"),
                                            accumulate=accumulate)
            assert torch.equal(got.cpu(), expected)
    ops = torchneuron.get_fallback_ops()
    assert ops.get("aten::index.Tensor") == 1 and ops.get("aten::_index_put_impl_") == 2
    # Five still run natively.
    torchneuron.clear_op_tracking()
    assert torch.equal(x.to("neuron")[nidx[:5]].cpu(), x[idx[:5]])
    no_fallback()


@pytest.mark.parametrize("op", [
    lambda x, out: torch._C._nn.softshrink(x, 0.5, out=out),
    lambda x, out: torch.hardshrink(x, 0.5, out=out),
])
def test_shrinks_refuse_an_expanded_out(op):
    for device in ("cpu", "neuron"):
        x = torch.randn(5, device=device)
        out = torch.empty(1, device=device).expand(5)
        with pytest.raises(RuntimeError, match=OVERLAP):
            op(x, out)
    no_fallback()


def test_sub_of_two_bool_tensors_raises_the_cpus_error():
    a, b = torch.tensor([True, False]), torch.tensor([False, False])
    with pytest.raises(RuntimeError) as cpu:
        torch.sub(a, b)
    with pytest.raises(RuntimeError) as got:
        torch.sub(a.to("neuron"), b.to("neuron"))
    assert str(got.value) == str(cpu.value)
    assert "Subtraction, the `-` operator, with two bool tensors is not supported" in str(cpu.value)
    no_fallback()
