"""DTensor tensor parallelism on neuron: parallelize_module with
ColwiseParallel / RowwiseParallel, and SequenceParallel around a layer
norm, on DeviceMesh("neuron", ...) of two ranks, against the same training
on DeviceMesh("cpu", ...) with gloo, rank by rank: the same seeds, data and
steps, losses and full parameters compared after every step."""

import os

import pytest
import torch

from test_distributed import WORLD, _against_gloo, _init

pytestmark = pytest.mark.timeout(300)

STEPS = 3


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _full(p):
    """A parameter's whole value on the CPU (the norm's stays a plain
    tensor in the first plan)."""
    from torch.distributed.tensor import DTensor

    return (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().clone()  # not an alias on the CPU


def _tp(rank, store, device, backend, out_dir):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    _init(rank, store, backend)
    mesh = init_device_mesh(device, (WORLD,))
    assert mesh.device_type == device
    plans = {
        # Replicated activations in and out; the hidden layer split by columns.
        "tensor": {"up": ColwiseParallel(), "down": RowwiseParallel()},
        # Activations split along the sequence (dim 1) around the norm.
        "sequence": {
            "norm": SequenceParallel(),
            "up": ColwiseParallel(input_layouts=Shard(1)),
            "down": RowwiseParallel(output_layouts=Shard(1)),
        },
    }
    results = {}
    for name, plan in plans.items():
        torch.manual_seed(0)
        model = parallelize_module(_Block().to(device), mesh, plan)
        # foreach=False: the plain norm parameters of the first plan and the
        # DTensor ones do not mix in one foreach kernel.
        opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
        losses, params = [], []
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 + step)  # the same batch on every rank
            x, y = torch.randn(4, 6, 16, generator=g), torch.randn(4, 6, 16, generator=g)
            if name == "sequence":  # each rank its part of the sequence
                x, y = x.chunk(WORLD, dim=1)[rank], y.chunk(WORLD, dim=1)[rank]
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            params.append({k: _full(p) for k, p in model.named_parameters()})
        results[name] = {"losses": losses, "params": params}
    torch.save(results, os.path.join(out_dir, f"{backend}-{rank}.pt"))


def test_tensor_and_sequence_parallel_against_gloo_on_cpu(tmp_path):
    """Tolerance: 1e-5 relative on losses and parameters (float32 kernels
    that agree with the CPU's to rounding; the same collectives)."""
    results = _against_gloo(_tp, tmp_path)
    for a, b in results:
        for name in ("tensor", "sequence"):
            assert a[name]["losses"] == pytest.approx(b[name]["losses"], rel=1e-5, abs=1e-6), name
            for step in range(STEPS):
                for k, p in a[name]["params"][step].items():
                    torch.testing.assert_close(p, b[name]["params"][step][k], rtol=1e-5, atol=1e-6,
                                               msg=f"{name} step {step} {k}")
