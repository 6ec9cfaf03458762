"""NKI kernels as torch custom ops: eager, autograd training, torch.compile."""

import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def scaled_square(x: torch.Tensor, alpha: float) -> torch.Tensor:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    sq = nl.ndarray(t.shape, nl.float32)
    nisa.activation(sq, nl.square, t)
    res = nl.ndarray(t.shape, x.dtype)
    nisa.tensor_scalar(res, sq, nl.multiply, alpha)
    nl.store(out, res)
    return out


@nki.jit
def scaled_mul(x: torch.Tensor, g: torch.Tensor, alpha: float) -> torch.Tensor:
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    prod = nl.multiply(nl.load(x), nl.load(g))
    res = nl.ndarray(prod.shape, x.dtype)
    nisa.tensor_scalar(res, prod, nl.multiply, 2.0 * alpha)
    nl.store(out, res)
    return out


square_op = torchneuron.nki_op("nki_test::scaled_square")(scaled_square)
grad_op = torchneuron.nki_op("nki_test::scaled_square_grad")(scaled_mul)


def _setup(ctx, inputs, output):
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.alpha = alpha


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad_op(x, grad.contiguous(), ctx.alpha), None


square_op.register_autograd(_backward, setup_context=_setup)


def test_custom_op_runs_eagerly_on_neuron():
    x = torch.randn(40, 70)
    out = square_op(x.to("neuron"), 3.0)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), 3.0 * x * x)


def test_custom_op_trains_with_register_autograd():
    torch.manual_seed(0)
    w_cpu = torch.randn(16, 32, requires_grad=True)
    w = w_cpu.detach().to("neuron").requires_grad_()
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = square_op(w, 0.5).sum()
        loss.backward()
        opt.step()
    ref = w_cpu.detach().clone()
    for _ in range(3):
        ref -= 0.1 * ref  # d/dw sum(0.5 w^2) = w
    torch.testing.assert_close(w.detach().cpu(), ref)


def test_custom_op_runs_on_cpu_tensors_through_the_simulator():
    x = torch.randn(5, 6)
    torch.testing.assert_close(square_op(x, 2.0), 2 * x * x)


def test_wrap_nki_traces_under_torch_compile():
    wrapped = torchneuron.wrap_nki(scaled_square)

    def f(x):
        return wrapped(x + 1, 2.0) - 1

    compiled = torch.compile(f, backend="eager", fullgraph=True)
    x = torch.randn(8, 8)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), 2 * (x + 1) ** 2 - 1)


def test_mutating_op_writes_its_input():
    @nki.jit
    def fill_ones(out: torch.Tensor) -> None:
        t = nl.ones(out.shape, out.dtype)
        nl.store(out, t)

    op = torchneuron.nki_op("nki_test::fill_ones", mutates_args=("out",))(fill_ones)
    x = torch.zeros(4, 4, device="neuron")
    op(x)
    assert torch.equal(x.cpu(), torch.ones(4, 4))


def test_a_kernel_writing_a_non_contiguous_argument_updates_it():
    @nki.jit
    def double_in_place(x):
        nl.store(x, nl.multiply(nl.load(x), 2.0))

    base = torch.randn(6, 4)
    x = base.to("neuron").T  # non-contiguous
    double_in_place(x)
    assert torch.equal(x.cpu(), base.T * 2)


def test_unannotated_kernels_get_a_schema_from_their_defaults():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))
    from rmsnorm import rmsnorm

    op = torchneuron.nki_op("nki_test::rmsnorm")(rmsnorm)
    x, w = torch.randn(10, 16), torch.randn(16)
    ref = x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-3) * w
    out = op(x.to("neuron"), w.to("neuron"), 1e-3)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-5)
