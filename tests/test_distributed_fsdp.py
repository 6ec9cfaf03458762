"""FSDP2 (torch.distributed.fsdp.fully_shard) on neuron with the c10d
backend "neuron", against the same training with gloo on the CPU, rank by
rank: the same seeds, data and steps, losses and full parameters compared
after every step, in float32 and with MixedPrecisionPolicy(param_dtype=
torch.bfloat16); and a sharded state dict saved and loaded with
torch.distributed.checkpoint."""

import os

import pytest
import torch

from test_distributed import WORLD, _against_gloo, _init

pytestmark = pytest.mark.timeout(400)

STEPS = 3


def _model():
    # 5 output rows do not split evenly over 2 ranks: FSDP2 pads the shard.
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))


def _shard(model, mesh, policy):
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def _fsdp(rank, store, device, backend, out_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

    _init(rank, store, backend)
    mesh = init_device_mesh(device, (WORLD,))
    policies = {
        "float32": MixedPrecisionPolicy(),
        "bfloat16": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    }
    results = {}
    for name, policy in policies.items():
        torch.manual_seed(0)
        model = _shard(_model().to(device), mesh, policy)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses, params = [], []
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own batch
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 5, generator=g)
            loss = torch.nn.functional.mse_loss(model(x.to(device)).float(), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            params.append([p.full_tensor().detach().cpu() for p in model.parameters()])
        results[name] = {"losses": losses, "params": params}

    # The last model's sharded state dict, saved and loaded into a model made
    # with other weights: every local shard comes back exactly.
    ckpt = os.path.join(out_dir, f"ckpt-{backend}")
    saved = {k: v.to_local().detach().cpu().clone() for k, v in model.state_dict().items()}
    dcp.save({"model": model.state_dict()}, checkpoint_id=ckpt)
    torch.manual_seed(1)
    fresh = _shard(_model().to(device), mesh, policies["bfloat16"])
    state = {"model": fresh.state_dict()}
    assert any(not torch.equal(state["model"][k].to_local().cpu(), v) for k, v in saved.items())
    dcp.load(state, checkpoint_id=ckpt)
    fresh.load_state_dict(state["model"])
    for k, v in fresh.state_dict().items():
        assert v.to_local().device.type == device, k
        assert torch.equal(v.to_local().detach().cpu(), saved[k]), k
    results["loaded"] = saved
    torch.save(results, os.path.join(out_dir, f"{backend}-{rank}.pt"))


def test_fsdp2_against_gloo_on_cpu(tmp_path):
    """Tolerances: float32 1e-5 relative (the kernels agree with the CPU's
    to rounding, the reduce-scatter averages alike); with bfloat16
    parameters (float32 gradients reduced, float32 master weights) one
    bfloat16 rounding step, 4e-3 relative, since a bfloat16 product may
    round the other way on either device (measured: 1e-7 on the losses)."""
    results = _against_gloo(_fsdp, tmp_path)
    tolerances = {"float32": dict(rtol=1e-5, atol=1e-6), "bfloat16": dict(rtol=4e-3, atol=1e-4)}
    for a, b in results:
        for name, tol in tolerances.items():
            assert a[name]["losses"] == pytest.approx(b[name]["losses"], rel=tol["rtol"], abs=tol["atol"]), name
            for step in range(STEPS):
                for p, q in zip(a[name]["params"][step], b[name]["params"][step]):
                    torch.testing.assert_close(p, q, **tol, msg=f"{name} step {step}")
        for k in a["loaded"]:
            torch.testing.assert_close(a["loaded"][k], b["loaded"][k], **tolerances["bfloat16"])
        # The policy took effect: bfloat16 parameters give other losses.
        assert a["bfloat16"]["losses"] != a["float32"]["losses"]
    # Both ranks see the same full parameters.
    a0, a1 = (a for a, _ in results)
    for p, q in zip(a0["float32"]["params"][-1], a1["float32"]["params"][-1]):
        assert torch.equal(p, q)
