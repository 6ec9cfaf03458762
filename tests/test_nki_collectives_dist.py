"""nki.collectives across the ranks of a torch.distributed group
(nki.distributed, torchneuron/nki/ranks.py): two spawned ranks (the helpers
of tests/test_distributed.py) each launch the same kernel on their own
tensors; every collective against torch.distributed's own result on CPU
tensors (gloo), exactly (values are small integers and halves, so every
reduction order gives the same bits); the (rank, core) numbering on grids of
two programs per rank; and the rules: ranks that disagree are refused on
every rank before anything runs, sizes that disagree stop every rank when
they meet, a rank that fails to trace stops the others, a rank that never
launches is named after arrival_timeout, and a rank whose stream skips the
kernel stops the others at its first call (no hang)."""

import pytest
import torch
import torch.distributed as dist

import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki.errors import NkiError
from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)

PAIR = ncc.ReplicaGroup([[0, 1]])
ALL4 = ncc.ReplicaGroup([[0, 1, 2, 3]])


def _values(rank, shape=(128, 64), dtype=torch.float32):
    """Rank `rank`'s exact values: integers and halves in 1 .. 34."""
    base = torch.arange(shape[0] * shape[1], dtype=torch.float64).reshape(shape)
    return ((base * (rank + 3) % 17 + 1) * (rank + 1) / 2).to(dtype)


def _nofallback():
    import torchneuron

    torchneuron.clear_op_tracking()
    return torchneuron


# ---- kernels (grid 1 per rank: the NKI ranks are the group's ranks) --------------


@nki.jit
def k_all_reduce(a, op):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    ncc.all_reduce([t], [s], PAIR, op)
    nl.store(out, s)
    return out


@nki.jit
def k_all_gather(a):
    out = nl.ndarray((2 * a.shape[0], a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([a], [out], PAIR, collective_dim=0)
    return out


@nki.jit
def k_reduce_scatter(a):
    out = nl.ndarray((a.shape[0] // 2, a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    ncc.reduce_scatter([a], [out], PAIR, collective_dim=0, op=nl.add)
    return out


@nki.jit
def k_all_to_all(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all([a], [out], PAIR, collective_dim=0)
    return out


@nki.jit
def k_permute(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute([a], [out], [(0, 1), (1, 0)])
    return out


# ---- kernels (grid 2 per rank: NKI rank = group rank * 2 + program id) ----------


@nki.jit
def k_grid_gather(a):
    """a[p] is program p's tile; every program gathers all four along dim 0."""
    p = nl.program_id(0)
    out = nl.ndarray((2, 4 * a.shape[1], a.shape[2]), a.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([a[p]], [out[p]], ALL4, collective_dim=0)
    return out


@nki.jit
def k_grid_reduce(a, groups):
    p = nl.program_id(0)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a[p])
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    ncc.all_reduce([t], [s], ncc.ReplicaGroup(groups), nl.maximum)
    nl.store(out[p], s)
    return out


@nki.jit
def k_grid_ring(a):
    """collective_permute_implicit around the four ranks, then a sendrecv
    swap between the two cores of each rank."""
    p = nl.program_id(0)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    swapped = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit([[a[p]]], [[out[p]]], ALL4)
    t = nl.load(a[p])
    got = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.sendrecv(t, got, send_to_rank=1 - p, recv_from_rank=1 - p)
    nl.store(swapped[p], got)
    return out, swapped


@nki.jit
def k_rank_ids(a):
    """Program p writes 1.0 at row rank_id() of its tile (a trace-time int)."""
    p = nl.program_id(0)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a[p])
    nl.store(out[p], t)
    row = nl.full((1, a.shape[2]), 1.0, a.dtype, buffer=nl.sbuf)
    nl.store(out[p, ncc.rank_id():ncc.rank_id() + 1, :], row)
    return out


@nki.jit
def k_all_to_all_v(a, meta):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), 0.0))
    ncc.all_to_all_v([a], [out], PAIR, meta, recv_counts_known=True)
    return out


def _every(x):
    """Every rank's CPU tensor x, by torch.distributed (gloo)."""
    got = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(got, x)
    return got


def _collectives(rank, store, device):
    _init(rank, store)
    tn = _nofallback()
    dev = torch.device(device)
    x = _values(rank)
    for op, rop in ((nl.add, dist.ReduceOp.SUM), (nl.maximum, dist.ReduceOp.MAX),
                    (nl.minimum, dist.ReduceOp.MIN)):
        want = x.clone()
        dist.all_reduce(want, op=rop)
        got = nki.distributed(k_all_reduce)(x.to(dev), op)
        assert torch.equal(got.cpu(), want), (device, op)
    xb = _values(rank, dtype=torch.bfloat16)
    want = xb.float()  # the sums are exact in bfloat16 too
    dist.all_reduce(want)
    want = want.bfloat16()
    got = nki.distributed(k_all_reduce)[1](xb.to(dev), nl.add)
    assert got.dtype == torch.bfloat16 and torch.equal(got.cpu(), want)

    want = torch.empty(256, 64)
    dist.all_gather_into_tensor(want, x)
    assert torch.equal(nki.distributed(k_all_gather)(x.to(dev)).cpu(), want)

    want = torch.empty(64, 64)
    try:
        dist.reduce_scatter_tensor(want, x.clone())
    except (RuntimeError, NotImplementedError):  # gloo without reduce_scatter: chunk of the sum
        total = x.clone()
        dist.all_reduce(total)
        want = total[64 * rank:64 * (rank + 1)]
    assert torch.equal(nki.distributed(k_reduce_scatter)(x.to(dev)).cpu(), want)

    want = torch.empty_like(x)
    dist.all_to_all_single(want, x.clone())
    assert torch.equal(nki.distributed(k_all_to_all)(x.to(dev)).cpu(), want)

    want = torch.empty_like(x)
    peer = 1 - rank
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x.clone(), peer),
                                     dist.P2POp(dist.irecv, want, peer)]):
        w.wait()
    assert torch.equal(nki.distributed(k_permute)(x.to(dev)).cpu(), want)

    # Grids of two programs per rank: NKI rank = 2 * group rank + program id.
    a = torch.stack([_values(2 * rank + p, (32, 16)) for p in range(2)])
    everyone = torch.cat(_every(a))  # [4, 32, 16], in NKI rank order
    got = nki.distributed(k_grid_gather)[2](a.to(dev)).cpu()
    for p in range(2):
        assert torch.equal(got[p], everyone.reshape(128, 16))
    got = nki.distributed(k_grid_reduce)[2](a.to(dev), [[0, 2], [1, 3]]).cpu()
    for p in range(2):  # program p of each rank: NKI ranks p and 2 + p
        assert torch.equal(got[p], torch.maximum(everyone[p], everyone[2 + p]))
    got = nki.distributed(k_grid_reduce)[2](a.to(dev), [[0, 1, 2, 3]]).cpu()
    for p in range(2):
        assert torch.equal(got[p], everyone.max(0).values)
    out, swapped = nki.distributed(k_grid_ring)[2](a.to(dev))
    me = [2 * rank, 2 * rank + 1]
    for p in range(2):
        assert torch.equal(out.cpu()[p], everyone[(me[p] - 1) % 4])  # the ring's predecessor
        assert torch.equal(swapped.cpu()[p], a[1 - p])  # the other core of this rank
    got = nki.distributed(k_rank_ids)[2](a.to(dev)).cpu()
    for p in range(2):
        want = a[p].clone()
        want[2 * rank + p] = 1.0
        assert torch.equal(got[p], want)
    assert not tn.get_fallback_ops(), tn.get_fallback_ops()

    # all_to_all_v (host: the metadata is uint32, which torch tensors here are
    # not): run-time counts, against all_to_all_single with the same splits.
    import numpy as np

    sends = [[2, 5], [3, 1]]  # rank r sends sends[r][d] elements to rank d
    mine = np.arange(16, dtype=np.float32).reshape(1, 16) * (rank + 1) + 0.5
    meta = np.zeros((3, 2), np.uint32)
    meta[0] = sends[rank]
    meta[1] = [0, sends[rank][0]]  # displacements: consecutive, as torch's splits
    meta[2] = [sends[0][rank], sends[1][rank]]
    got = nki.distributed(k_all_to_all_v)(mine, meta)
    n_in, n_out = sum(sends[rank]), sends[0][rank] + sends[1][rank]
    want = torch.zeros(n_out)
    dist.all_to_all_single(want, torch.from_numpy(mine[0, :n_in]).clone(),
                           output_split_sizes=[sends[0][rank], sends[1][rank]],
                           input_split_sizes=sends[rank])
    assert np.array_equal(got[0, :n_out], want.numpy()) and (got[0, n_out:] == 0).all()


@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_collectives_across_ranks_match_torch_distributed(device, tmp_path):
    _run(_collectives, tmp_path, device)


# ---- rules ----------------------------------------------------------------------


@nki.jit
def k_reduce_or_gather(a, gather):
    out = nl.ndarray((2 * a.shape[0], a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    if gather:
        ncc.all_gather([a], [out], PAIR, collective_dim=0)
    else:
        ncc.all_reduce([a], [out[0:a.shape[0]]], PAIR, nl.add)
    return out


@nki.jit
def k_other(a):
    out = nl.ndarray((2 * a.shape[0], a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([a], [out], PAIR, collective_dim=0)
    return out


@nki.jit
def k_bad_group(a, groups):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce([a], [out], ncc.ReplicaGroup(groups), nl.add)
    return out


@nki.jit
def k_alone(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def _rules(rank, store, device):
    _init(rank, store)
    dev = torch.device(device)
    x = _values(rank).to(dev)
    # Different calls on the two ranks: refused on both, before anything runs.
    with pytest.raises(NkiError, match=r"ranks of the launch disagree at collective call 0 "
                       r"\(rank 0 is at all_reduce .*rank 1 is at all_gather") as e:
        nki.distributed(k_reduce_or_gather)(x, rank == 1)
    assert e.value.rule == "collective_mismatch"
    # Different grids, or different kernels.
    with pytest.raises(NkiError, match=r"rank \d launches k_reduce_or_gather\[\d\] but rank \d "
                       r"launches k_reduce_or_gather\[\d\]") as e:
        nki.distributed(k_reduce_or_gather)[1 + rank](x, True)
    assert e.value.rule == "collective_mismatch"
    with pytest.raises(NkiError, match="launches k_other") as e:
        nki.distributed(k_other if rank else k_reduce_or_gather)(x, *(() if rank else (True,)))
    assert e.value.rule == "collective_mismatch"
    # A rank that fails to trace stops the other.
    with pytest.raises(NkiError) as e:
        nki.distributed(k_bad_group)(x, [[0, 1]] if rank == 0 else [[0, 2]])
    if rank == 1:
        assert e.value.rule == "replica_group"
    else:
        assert e.value.rule == "collective" and "rank 1 stopped" in str(e.value)
    # The same calls on tensors whose sizes differ: every rank stops when they meet.
    y = _values(rank, (128, 64 - 32 * rank)).to(dev)
    if device == "cpu":
        with pytest.raises(NkiError, match="collective call 0 \\(all_gather\\)") as e:
            nki.distributed(k_other)(y)
        assert e.value.rule == "collective"
    else:
        with pytest.raises((RuntimeError, ValueError), match="collective call 0 \\(all_gather\\)"):
            nki.distributed(k_other)(y).cpu()
        torch.neuron.clear_error()  # the stream's sticky error, reported once
    if device == "cpu":
        # A rank that never launches: the other stops after arrival_timeout,
        # naming it and the kernel; arriving later, it hears so at once.
        if rank == 0:
            with pytest.raises(NkiError, match=r"rank 1 of 2 did not arrive at k_other\[1\] "
                               r"\(launch \d+ of the group's NKI kernels\) within 0.5 s") as e:
                nki.distributed(k_other, arrival_timeout=0.5)(x)
            assert e.value.rule == "collective_arrival"
        dist.barrier()
        if rank == 1:
            with pytest.raises(NkiError, match="rank 1 of 2 did not arrive at k_other") as e:
                nki.distributed(k_other)(x)
            assert e.value.rule == "collective_arrival"
        dist.barrier()
    else:
        # A rank whose stream skips the kernel after an earlier error: the
        # other stops at the kernel's first call, naming it (not a hang).
        if rank == 1:
            from torchneuron import _C

            _C._nki_inject_run_failures(1)
            k_alone(x)  # fails on the stream: the stream's error is sticky
        with pytest.raises((RuntimeError, ValueError)) as e:
            nki.distributed(k_other)(x).cpu()
        if rank == 0:
            assert "process 1 stopped: did not run the NKI kernel" in str(e.value), e.value
        torch.neuron.clear_error()
    # Still in step afterwards.
    want = torch.empty(256, 64)
    dist.all_gather_into_tensor(want, _values(rank))
    assert torch.equal(nki.distributed(k_other)(x).cpu(), want)


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_ranks_that_disagree_fail_on_every_rank(device, tmp_path):
    _run(_rules, tmp_path, device)


def test_the_example_runs():
    """examples/nki/allreduce_ranks.py (it spawns its own two ranks and
    checks its results against torch.distributed)."""
    import os
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "examples", "nki", "allreduce_ranks.py")
    done = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum over 4 NKI ranks = 10.0" in done.stdout


# ---- the estimate (one process: nki.benchmark with ranks=) ----------------------


def test_benchmark_costs_the_link_between_processes(tmp_path):
    """An all_reduce over two ranks: within one process (grid 2) nothing
    crosses a link; as rank 0 of two processes the peer's 32 KiB cross
    NeuronLink (or EFA, slower), shown in the result and on the trace's
    link lane."""
    import json

    import numpy as np

    x = np.ones((128, 64), np.float32)
    both = np.ones((2, 128, 64), np.float32)
    local = nki.benchmark(k_grid_reduce)(both, [[0, 1]], grid=2)
    assert local.link_bytes == 0 and local.link_us == 0
    ranked = {}
    for link in ("neuronlink", "efa"):
        est = nki.benchmark(k_all_reduce, ranks=2, link=link,
                            save_trace=str(tmp_path / f"{link}.json"))(x, nl.add)
        assert est.link_bytes == 128 * 64 * 4, link
        assert est.dma_bytes == 2 * 128 * 64 * 4 + 128 * 64 * 4  # load, store, own share
        lanes = {row["lane"] for row in est.timeline()}
        name = {"neuronlink": "link (NeuronLink)", "efa": "link (EFA)"}[link]
        assert name in lanes
        events = json.load(open(tmp_path / f"{link}.json"))["traceEvents"]
        assert any(e.get("args", {}).get("name") == name for e in events)
        ranked[link] = est
    # Rank 1's view moves the same bytes; EFA is slower than NeuronLink,
    # and both are slower than the same reduction between the cores of one
    # process.
    assert nki.benchmark(k_all_reduce, ranks=2, rank=1)(x, nl.add).link_bytes == 128 * 64 * 4
    assert ranked["efa"].link_us > ranked["neuronlink"].link_us > 0
    assert ranked["efa"].latency_us > ranked["neuronlink"].latency_us > local.latency_us
    with pytest.raises(ValueError, match="link"):
        nki.benchmark(k_all_reduce, ranks=2, link="ethernet")


def test_arrival_timeout_is_checked(monkeypatch):
    """The launch-time wait: the argument or the variable, at most the
    group's timeout; a bad value is an error naming it."""
    from types import SimpleNamespace

    from torchneuron.nki.ranks import DistributedKernel

    group = SimpleNamespace(timeout=60.0)
    k = lambda x: x  # noqa: E731  never traced: only the timeout is read
    monkeypatch.delenv("TORCHNEURON_NKI_ARRIVAL_TIMEOUT", raising=False)
    assert DistributedKernel(k)._arrival_timeout(group) == 60.0  # 300 s capped
    assert DistributedKernel(k, arrival_timeout=2)._arrival_timeout(group) == 2.0
    monkeypatch.setenv("TORCHNEURON_NKI_ARRIVAL_TIMEOUT", "5")
    assert DistributedKernel(k)._arrival_timeout(group) == 5.0
    monkeypatch.setenv("TORCHNEURON_NKI_ARRIVAL_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="TORCHNEURON_NKI_ARRIVAL_TIMEOUT must be a number"):
        DistributedKernel(k)._arrival_timeout(group)
    with pytest.raises(ValueError, match="arrival_timeout must be positive"):
        DistributedKernel(k, arrival_timeout=0)._arrival_timeout(group)


def _profiled_link(rank, store):
    """An all_gather between the two processes under torch.profiler: the
    peer's half crosses NeuronLink, slower than this rank's own half moves
    by DMA, so the NKI kernel's record is link-bound, as nki.benchmark's
    link_us says."""
    from torch.profiler import ProfilerActivity, profile

    from torchneuron import profiler as tn_profiler

    _init(rank, store)
    x = _values(rank).to("neuron")
    est = nki.benchmark(k_all_gather, ranks=2, rank=rank)(x)
    assert est.link_us > max(est.busy_us.values()), est  # the link term dominates
    nki.distributed(k_all_gather)(x)  # warm-up: trace and agree
    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        got = nki.distributed(k_all_gather)(x)
        torch.neuron.synchronize()
    records = [r for r in tn_profiler.records() if r["kind"] == "NKI kernel"]
    assert records and records[-1]["bound"] == "link", records
    assert records[-1]["estimated_us"] == pytest.approx(est.latency_us, rel=1e-3)
    assert records[-1]["link_bytes"] == est.link_bytes == 128 * 64 * 4  # the peer's half
    want = torch.empty(256, 64)
    dist.all_gather_into_tensor(want, x.cpu())
    assert torch.equal(got.cpu(), want)


def test_the_profiler_roofline_shows_the_link_of_nki_collectives(tmp_path):
    _run(_profiled_link, tmp_path)
