"""2-D parallelism on neuron: FSDP2 over one dimension of a 2 x 2
DeviceMesh("neuron", ...) and tensor parallelism (ColwiseParallel /
RowwiseParallel) over the other, on 4 ranks, against the same on
DeviceMesh("cpu", ...) with gloo, rank by rank: the same seeds, data and
steps, losses and full parameters compared after every step."""

import os

import pytest
import torch

from test_distributed import _against_gloo, _init

pytestmark = pytest.mark.timeout(400)

STEPS = 2


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


def _two_d(rank, store, device, backend, out_dir):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    _init(rank, store, backend)
    mesh = init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(_MLP().to(device), mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dp = mesh["dp"].get_local_rank()
    losses, params = [], []
    for step in range(STEPS):
        g = torch.Generator().manual_seed(100 * step + dp)  # the same batch across a TP pair
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        params.append({k: p.full_tensor().detach().cpu() for k, p in model.named_parameters()})
    torch.save({"losses": losses, "params": params}, os.path.join(out_dir, f"{backend}-{rank}.pt"))


def test_fsdp2_with_tensor_parallel_on_4_ranks_against_gloo_on_cpu(tmp_path):
    """Tolerance: 1e-5 relative (float32 kernels that agree with the CPU's
    to rounding; the same collectives)."""
    results = _against_gloo(_two_d, tmp_path, world=4)
    for a, b in results:
        assert a["losses"] == pytest.approx(b["losses"], rel=1e-5, abs=1e-6)
        for step in range(STEPS):
            for k, p in a["params"][step].items():
                torch.testing.assert_close(p, b["params"][step][k], rtol=1e-5, atol=1e-6, msg=f"step {step} {k}")
