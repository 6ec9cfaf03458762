"""The matmul tutorial's four optimisation steps (examples/nki/matmul_versions.py):
each computes lhsT.T @ rhs, and the cost model ranks them basic tiled >
hoisted loads > blocked free dimension > fully optimised in estimated time."""

import os
import sys

import pytest
import torch

import torchneuron.nki as nki

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))

from matmul_versions import (matmul_basic_tiled, matmul_blocked_free,  # noqa: E402
                             matmul_hoisted_loads, matmul_optimized)

VERSIONS = [matmul_basic_tiled, matmul_hoisted_loads, matmul_blocked_free, matmul_optimized]


def _operands(k, m, n):
    g = torch.Generator().manual_seed(18)
    return (torch.randn(k, m, generator=g).to(torch.bfloat16),
            torch.randn(k, n, generator=g).to(torch.bfloat16))


@pytest.mark.parametrize("kernel", VERSIONS, ids=lambda f: f.__name__)
def test_each_version_computes_the_product(kernel):
    lhsT, rhs = _operands(512, 256, 1024)
    out = kernel(lhsT.to("neuron"), rhs.to("neuron")).cpu()
    ref = lhsT.float().T @ rhs.float()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref.to(torch.bfloat16).float(), atol=0.25, rtol=2e-2)


def test_versions_with_one_accumulation_agree_bitwise():
    # The first three accumulate every K tile in PSUM in the same order.
    lhsT, rhs = _operands(512, 256, 1024)
    outs = [f(lhsT.to("neuron"), rhs.to("neuron")).cpu() for f in VERSIONS[:3]]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_cost_model_ranks_the_tutorial_versions():
    lhsT, rhs = _operands(1024, 1024, 2048)
    ests = [nki.benchmark(f)(lhsT, rhs) for f in VERSIONS]
    latency = [e.latency_us for e in ests]
    assert latency[0] > latency[1] > latency[2] > latency[3], latency
    # Same arithmetic in every version: the Tensor engine's work is equal.
    assert len({round(e.busy_us["Tensor"], 6) for e in ests}) == 1
    # Hoisting and blocking cut the bytes moved; the last version moves them in fewer DMAs.
    assert ests[0].dma_bytes > ests[1].dma_bytes > ests[2].dma_bytes
    assert ests[3].instructions["DMA"] < ests[2].instructions["DMA"]


def test_timeline_gives_every_instruction_and_sums_to_the_engine_totals(tmp_path):
    lhsT, rhs = _operands(256, 128, 512)
    est = nki.benchmark(matmul_basic_tiled)(lhsT, rhs)
    rows = est.timeline()
    assert [r["index"] for r in rows] == list(range(len(rows)))
    assert sum(est.instructions.values()) == len(rows)
    for engine in ("Tensor", "Vector"):
        mine = [r for r in rows if r["engine"] == engine]
        assert len(mine) == est.instructions[engine]
        assert sum(r["end_us"] - r["start_us"] for r in mine) == pytest.approx(est.busy_us[engine])
    assert all(r["lane"].startswith("DMA queue") for r in rows if r["engine"] == "DMA")
    assert max(r["end_us"] for r in rows) == pytest.approx(est.latency_us)
    assert all(r["source"].startswith(os.path.join("examples", "nki")) or "matmul_versions" in
               r["source"] for r in rows)
    # A matmul waits for both of its loads (data dependence across engines).
    first_mm = next(r for r in rows if r["name"] == "nc_matmul")
    loads = [r for r in rows[:first_mm["index"]] if r["engine"] == "DMA"]
    assert first_mm["start_us"] >= max(r["end_us"] for r in loads)
