"""The stream semantics of the c10d backend "neuron", as NCCL's: each group
runs its collectives on a stream of its own, which first waits for the
caller's current stream; Work.wait() (and async_op=False) makes the
caller's current stream wait for the collective, without blocking the host;
the caching allocator does not hand out the memory of a tensor the user
freed during a collective before the collective is done (record_stream).

Rank 1 joins each pending collective only once rank 0 has checked what it
must check while the collective waits for rank 1 (a signal through a store
of the test's own), so no check depends on timing. Results are compared
with the same collectives run with gloo on CPU tensors (a gloo subgroup in
the same run), through the segment and through gloo
(TORCHNEURON_DIST_SHM=0)."""

import datetime

import pytest
import torch
import torch.distributed as dist

from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)

HANG = datetime.timedelta(seconds=120)  # a rank waiting for a signal fails after this, instead of hanging


def _signals(store, rank):
    s = dist.FileStore(store + ".signals", 2)
    s.set_timeout(HANG)
    return s


def _streams(rank, store):
    world = _init(rank, store)
    assert world == 2
    gloo = dist.new_group(backend="gloo")
    signals = _signals(store, rank)
    dev = torch.device("neuron", 0)

    def reference(values, op=dist.ReduceOp.SUM):
        c = values.clone()
        dist.all_reduce(c, op=op, group=gloo)
        return c

    # 1. Work queued before the collective on the current stream is in it,
    # work queued after a blocking one (async_op=False) sees its result.
    base = torch.arange(4096, dtype=torch.float32) * (rank + 1)
    x = base.to(dev)
    for _ in range(3):
        x = x * 2 + 1
    dist.all_reduce(x)
    y = x * 10  # queued on the current stream after the collective
    assert torch.equal(y.cpu(), reference(base * 8 + 7) * 10)

    # 2. A pending collective blocks neither the caller's current stream nor
    # another stream: rank 0 runs kernels on both, waits for them, and sees
    # the collective still pending (rank 1 joins only after the signal);
    # then wait() makes the current stream wait for it.
    z = torch.full((1 << 16,), float(rank + 1), device=dev)
    if rank == 0:
        work = dist.all_reduce(z, async_op=True)
        a = torch.ones(256, 256, device=dev)
        b = a @ a  # current stream
        side = torch.neuron.Stream()
        side.wait_stream(torch.neuron.current_stream())  # for a, made on the current stream
        with torch.neuron.stream(side):
            c = a + 41  # another stream
        torch.neuron.current_stream().synchronize()
        side.synchronize()
        assert b[0, 0].item() == 256.0 and c[0, 0].item() == 42.0
        assert not work.is_completed()  # rank 1 has not joined yet
        signals.set("joined?", "go")
        work.wait()  # the current stream waits; the host does not
        after = z + 0
        assert after[0].item() == 3.0
    else:
        signals.wait(["joined?"])
        dist.all_reduce(z)
        assert z[0].item() == 3.0
    torch.neuron.synchronize()

    # 3. The result of an async collective reaches another stream through
    # wait() on it, and through the future (as DDP's reducer waits).
    v = torch.full((1000,), float(rank + 1), device=dev)
    work = dist.all_reduce(v, async_op=True)
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        work.get_future().wait()
        w = v * 2
    side.synchronize()
    assert w[0].item() == 6.0

    # 4. A tensor the user frees during an async collective: its memory is
    # not handed out again before the collective is done. A transposed view
    # goes through a dense copy, so its own storage is written after the
    # collective's task, by a copy on the group's stream; the Work is dropped
    # too. Rank 0 allocates tensors of the same size meanwhile and fills them.
    n = 1 << 14
    mine = (torch.arange(n, dtype=torch.float32) + rank * 1000).reshape(128, 128)
    want = reference(mine.t().contiguous())
    if rank == 0:
        t = mine.t().contiguous().to(dev).t()  # non-contiguous view over fresh storage
        assert not t.is_contiguous()
        freed = t.data_ptr()
        dist.all_reduce(t, async_op=True)  # the Work is dropped at once
        del t
        fills = [torch.full((n,), 7.0, device=dev) for _ in range(8)]
        assert all(f.data_ptr() != freed for f in fills), "a freed tensor's memory was reused too early"
        signals.set("freed?", "go")
        torch.neuron.synchronize()
        assert all(torch.equal(f.cpu(), torch.full((n,), 7.0)) for f in fills)
    else:
        signals.wait(["freed?"])
        t = mine.t().contiguous().to(dev).t()
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), want.t())  # t holds mine, want the transposed sum
    dist.barrier()

    # 5. Several collectives in flight, on two caller streams, then one wait
    # each: the results match gloo's.
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    vals = [torch.arange(n, dtype=torch.float32) * (rank + 1) + k for k in range(4)]
    wants = [reference(vk, dist.ReduceOp.MAX if k == 3 else dist.ReduceOp.SUM) for k, vk in enumerate(vals)]
    outs, works = [], []
    for k, vk in enumerate(vals):
        with torch.neuron.stream(s1 if k % 2 else s2):
            d = vk.to(dev)
            works.append(dist.all_reduce(d, op=dist.ReduceOp.MAX if k == 3 else dist.ReduceOp.SUM, async_op=True))
            outs.append(d)
    for wk in works:
        wk.wait()
    got = [o.cpu() for o in outs]
    for k in range(len(vals)):
        assert torch.equal(got[k], wants[k]), k


@pytest.mark.parametrize("shm", ["1", "0"])
def test_stream_semantics(tmp_path, monkeypatch, shm):
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_streams, tmp_path)
