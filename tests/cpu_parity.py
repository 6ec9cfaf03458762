"""Checks that neuron fails where PyTorch CPU fails, and the same way."""

import pytest
import torch


def same_error(fn, *cpu_args, device="neuron"):
    """fn raises on `device` what it raises on the CPU: the same exception
    type and the same first line of the message. Tensor arguments are moved
    to `device` for the second call."""
    with pytest.raises(Exception) as cpu:
        fn(*cpu_args)
    with pytest.raises(type(cpu.value)) as ours:
        fn(*[a.to(device) if isinstance(a, torch.Tensor) else a for a in cpu_args])
    assert str(ours.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def raises_like_cpu(fn, *args, **kwargs):
    """fn raises on neuron exactly what it raises on the CPU: the same
    exception type and the whole message. Tensor arguments are moved to
    neuron for the second call."""
    with pytest.raises(Exception) as cpu:
        fn(*args, **kwargs)
    with pytest.raises(Exception) as ours:
        fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    assert type(ours.value) is type(cpu.value), (ours.value, cpu.value)
    assert str(ours.value) == str(cpu.value)
