"""The profiler's Trainium-time estimates of collectives: each collective's
host task carries the roofline link term (ring bytes over the device's
NeuronLink share plus a latency per step, neuronrt/roofline.h), bound
"link", on both transports, and the summary table lists it."""

import math

import pytest
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)

MIB = 1 << 20
LINK_STEP_NS = 2000.0  # the model's assumed latency per step on NeuronLink


def _expected(props, bytes_, sent_bytes, steps, reduced_elements=0):
    """(estimate in us, bound): the largest of the link term, the HBM term
    (the buffer read and written once) and the reduction's Vector work."""
    terms = {
        "link": sent_bytes / props.link_bytes_per_s * 1e9 + steps * LINK_STEP_NS,
        "memory": 2 * bytes_ / props.hbm_bytes_per_s * 1e9,
        "compute": reduced_elements / (128 * props.vector_engine_hz) * 1e9,
    }
    bound = max(terms, key=terms.get)
    return terms[bound] / 1000.0, bound


def _profiled_collectives(rank, store):
    import torchneuron.profiler as tn_profiler

    n = _init(rank, store)
    props = torch.neuron.get_device_properties(torch.neuron.current_device())
    x = torch.ones(MIB // 4, device="neuron")  # 1 MiB of float32
    out = torch.empty(n * x.numel(), device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        dist.all_reduce(x)
        dist.all_gather_into_tensor(out, x)
        dist.barrier()
        torch.neuron.synchronize()
    recs = {r["name"]: r for r in tn_profiler.records() if r["kind"] == "host task"}
    expect = {
        "neuron backend all_reduce": _expected(props, MIB, 2 * MIB * (n - 1) / n, 2 * (n - 1),
                                               MIB / 4 * (n - 1) / n),
        "neuron backend all_gather_into_tensor": _expected(props, n * MIB, n * MIB * (n - 1) / n, n - 1),
        "neuron backend barrier": _expected(props, 0, 0, math.ceil(math.log2(n))),
    }
    sent = {"neuron backend all_reduce": 2 * MIB * (n - 1) / n,  # the ring's bytes per rank
            "neuron backend all_gather_into_tensor": n * MIB * (n - 1) / n,
            "neuron backend barrier": 0}
    for name, (us, bound) in expect.items():
        assert name in recs, sorted(recs)
        r = recs[name]
        assert r["bound"] == bound, (name, r)
        assert r["link_bytes"] == pytest.approx(sent[name], rel=1e-9), (name, r)
        assert r["estimated_us"] == pytest.approx(us, rel=1e-9), (name, r)
        assert r["device_us"] > 0
    assert recs["neuron backend all_reduce"]["bound"] == "link"  # on every target, at this size
    table = tn_profiler.summary(prof)
    assert "link" in table, table
    assert any(e.bound == "link" and e.estimated_us > 0 for e in tn_profiler.estimates(prof))


@pytest.mark.parametrize("shm", ["1", "0"])
def test_collectives_carry_a_link_estimate(tmp_path, monkeypatch, shm):
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_profiled_collectives, tmp_path)


def test_hosts_are_counted_through_the_store():
    from torchneuron.distributed import _count_hosts

    store = dist.HashStore()
    assert _count_hosts(dist.PrefixStore("a", store), 0, 1) == 1
    other = dist.PrefixStore("b", store)
    other.set("1", "another-host|boot|net:[1]")
    assert _count_hosts(other, 0, 2) == 2
