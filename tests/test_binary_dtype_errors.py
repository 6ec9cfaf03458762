"""A pointwise op refused for a dtype says so in the CPU's form, with the
device's suffix where the CPU has "_cpu": "logaddexp_neuron" not implemented
for 'Int', next to the CPU's "logaddexp_cpu" not implemented for 'Int'. Users
and PyTorch's tests match on the kernel and dtype names."""

import pytest
import torch

import torchneuron

DEV = "neuron"
i32 = torch.tensor([1, 2, 3], dtype=torch.int32)
f32 = torch.tensor([1.0, 2.0, 3.0])

CASES = [  # (call, inputs)
    (torch.logaddexp, (i32, i32)), (torch.logaddexp2, (i32, i32)), (torch.hypot, (i32, i32)),
    (torch.nextafter, (i32, i32)), (torch.igamma, (i32, i32)), (torch.igammac, (i32, i32)),
    (torch.logaddexp, (i32 > 1, i32 > 2)), (torch.hypot, (i32.to(torch.int8), i32.to(torch.int8))),
    (torch.bitwise_and, (f32, f32)), (torch.bitwise_or, (f32, f32)), (torch.bitwise_xor, (f32, f32)),
    (torch.bitwise_not, (f32,)), (torch.gcd, (f32, f32)), (torch.lcm, (f32, f32)),
    (torch.bitwise_left_shift, (f32, f32)), (torch.bitwise_right_shift, (f32, f32)),
    (lambda a, b: a.bitwise_and_(b), (f32, f32)), (lambda a, b: a.__ilshift__(b), (f32, f32)),
    (lambda a: torch.bitwise_or(a, 2.5), (f32,)), (lambda a, b: torch.gcd(a, b, out=torch.empty_like(a)), (f32, f32)),
]


def _message(fn, args, device):
    with pytest.raises(NotImplementedError) as info:
        fn(*[a.to(device).clone() for a in args])
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("fn,args", CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_dtype_error_has_the_cpus_form(fn, args):
    want = _message(fn, args, "cpu")
    torchneuron.clear_op_tracking()
    got = _message(fn, args, DEV)
    assert torchneuron.get_fallback_ops() == {}
    assert got == want.replace("_cpu\"", "_neuron\""), (got, want)
