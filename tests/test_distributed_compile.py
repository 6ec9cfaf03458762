"""A model compiled with torch.compile(backend="neuron") under DDP and under
FSDP2 on two ranks: the compiled graphs run (counted, no eager fallback)
with the backend's collectives ordered around them on the streams, and
every step's loss and the final parameters equal eager's bit for bit
(float32 graphs reproduce eager neuron exactly)."""

import pytest
import torch

from test_distributed import WORLD, _init, _run

pytestmark = pytest.mark.timeout(300)


class _MLP(torch.nn.Module):
    # A module of the test's own: Dynamo compiles its forward as a frame of
    # its own under DDP's (torch.nn's Sequential.forward it would skip).
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def _train(model, run, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own batch
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        loss = torch.nn.functional.mse_loss(run(x.to("neuron")), y.to("neuron"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _compiled(rank, store):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torchneuron import metrics

    _init(rank, store)
    mesh = init_device_mesh("neuron", (WORLD,))

    def ddp(module):
        return torch.nn.parallel.DistributedDataParallel(module)

    def fsdp(module):
        fully_shard(module.fc1, mesh=mesh)
        fully_shard(module.fc2, mesh=mesh)
        return fully_shard(module, mesh=mesh)

    for name, wrap in (("DDP", ddp), ("FSDP2", fsdp)):
        runs = {}
        for compiled in (False, True):
            torch.manual_seed(0)
            model = wrap(_MLP().to("neuron"))
            metrics.clear_all()
            run = torch.compile(model, backend="neuron") if compiled else model
            losses = _train(model, run, rank)
            params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
            runs[compiled] = losses, [p.detach().cpu().clone() for p in params]
            if compiled:
                assert metrics.get_counter_value("compile.graphs") > 0, name
                assert metrics.get_counter_value("compile.launches") > 0, name
                assert metrics.get_counter_value("compile.fallbacks") == 0, name
        assert runs[True][0] == runs[False][0], (name, runs)
        for p, q in zip(runs[True][1], runs[False][1]):
            assert torch.equal(p, q), name
        torch._dynamo.reset()


def test_compiled_model_under_ddp_and_fsdp2_equals_eager(tmp_path):
    _run(_compiled, tmp_path)
