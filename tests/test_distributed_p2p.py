"""The c10d backend "neuron" beyond the plain collectives, on two ranks:
batch_isend_irecv (exchanges both ways, which a send that waits for its
receive would deadlock one op at a time), isend/irecv, messages that do
not fit the receiving tensor, monitored_barrier,
and the functional collectives DTensor and FSDP2 call
(torch.distributed._functional_collectives and the _c10d_functional ops),
all against values computed exactly on each rank."""

import os
import time

import pytest
import torch
import torch.distributed as dist

from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)


def _p2p(rank, store):
    size = _init(rank, store)
    dev = torch.device("neuron", 0)
    peer = 1 - rank
    # Both ways at once, 4 MiB each way: a gloo send waits for its receive,
    # so the batch must post every op before waiting for any.
    big = torch.arange(1 << 20, dtype=torch.float32, device=dev) + rank
    got = torch.empty(1 << 20, device=dev)
    # Two messages to the same peer with the same tag arrive in order; one
    # lands in a non-contiguous view; bfloat16 alongside float32.
    small = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.bfloat16, device=dev) * (rank + 1)
    strided = torch.zeros(2, 2, dtype=torch.bfloat16, device=dev).t()
    second = torch.empty(3, device=dev)
    ops = [
        dist.P2POp(dist.isend, big, peer),
        dist.P2POp(dist.isend, small, peer),
        dist.P2POp(dist.isend, torch.full((3,), 7.0 + rank, device=dev), peer),
        dist.P2POp(dist.irecv, got, peer),
        dist.P2POp(dist.irecv, strided, peer),
        dist.P2POp(dist.irecv, second, peer),
    ]
    if rank == 1:
        ops = ops[3:] + ops[:3]  # the order within a batch does not matter
    works = dist.batch_isend_irecv(ops)  # on the group's stream, as NCCL's
    for w in works:
        w.wait()  # the current stream waits for the batch
    after = got + 0  # queued behind the batch on the current stream
    assert torch.equal(after.cpu(), torch.arange(1 << 20, dtype=torch.float32) + peer)
    want = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.bfloat16) * (peer + 1)
    assert torch.equal(strided.cpu(), want)
    assert second.cpu().tolist() == [7.0 + peer] * 3
    # A ring exchange (each rank sends right, receives from the left) and CPU
    # tensors in a batch of their own.
    right, left = (rank + 1) % size, (rank - 1) % size
    x = torch.full((5,), float(rank), dtype=torch.int64, device=dev)
    y = torch.empty(5, dtype=torch.int64, device=dev)
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, right), dist.P2POp(dist.irecv, y, left)]):
        w.wait()
    assert y.cpu().tolist() == [left] * 5
    cx, cy = torch.full((4,), rank + 0.5), torch.empty(4)
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, cx, peer), dist.P2POp(dist.irecv, cy, peer)]):
        w.wait()
    assert cy.tolist() == [peer + 0.5] * 4
    # isend / irecv one way, async: the receiver's stream waits in wait().
    if rank == 0:
        dist.isend(torch.arange(6, dtype=torch.float64, device=dev), 1).wait()
    else:
        r = torch.zeros(6, dtype=torch.float64, device=dev)
        dist.irecv(r, 0).wait()
        assert r.cpu().tolist() == [float(i) for i in range(6)]
    # A batch naming a peer outside the group is refused at the call.
    with pytest.raises(RuntimeError, match="neuron backend: send: peer 2 is not another rank of a group of 2"):
        dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 2)])
    dist.distributed_c10d._world.pg_coalesce_state.clear()  # torch's manager leaves its block open
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x + 1, peer), dist.P2POp(dist.irecv, y, peer)]):
        w.wait()  # a later batch works
    assert y.cpu().tolist() == [peer + 1] * 5

    # A message that does not fit the receiving tensor: an error naming
    # both on the receiver, nothing written, the connection still in step.
    if rank == 0:
        dist.send(torch.arange(10.0, device=dev), 1)
        dist.send(torch.ones(4, dtype=torch.int64, device=dev), 1)
    else:
        short = torch.full((8,), -1.0, device=dev)
        with pytest.raises(RuntimeError, match="neuron backend recv: recv from rank 0: the message has 10 "
                                               "elements of Float, the tensor 8 elements of Float"):
            dist.recv(short, 0)
            torch.neuron.synchronize()
        torch.neuron.clear_error()
        assert short.cpu().tolist() == [-1.0] * 8
        wrong = torch.zeros(4, device=dev)
        with pytest.raises(RuntimeError, match="batch_isend_irecv: recv from rank 0: the message has 4 elements "
                                               "of Long, the tensor 4 elements of Float"):
            for w in dist.batch_isend_irecv([dist.P2POp(dist.irecv, wrong, 0)]):
                w.wait()
            torch.neuron.synchronize()
        torch.neuron.clear_error()
    if rank == 0:
        dist.send(torch.tensor([5.0, 6.0], device=dev), 1)
    else:
        ok = torch.zeros(2, device=dev)
        dist.recv(ok, 0)
        assert ok.cpu().tolist() == [5.0, 6.0]

    # monitored_barrier: passes when every rank comes; names the rank that
    # does not (gloo's monitored barrier, after the stream's work).
    import datetime

    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    dist.monitored_barrier(wait_all_ranks=True)
    if rank == 1:
        time.sleep(4)  # absent from the second barrier
        os._exit(0)
    with pytest.raises(RuntimeError, match="Ranks? 1 failed to pass monitoredBarrier"):
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2), wait_all_ranks=True)
    os._exit(0)  # the peer is gone: skip the group's teardown


@pytest.mark.parametrize("shm", ["1", "0"])
def test_batch_isend_irecv_isend_irecv_and_monitored_barrier(tmp_path, monkeypatch, shm):
    """Through the shared segment (one host) and, with
    TORCHNEURON_DIST_SHM=0, through gloo (what groups across hosts use)."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_p2p, tmp_path)


def _functional(rank, store):
    import torch.distributed._functional_collectives as funcol

    size = _init(rank, store)
    dev = torch.device("neuron", 0)
    name = dist.group.WORLD.group_name
    c10d = torch.ops._c10d_functional
    # Values exact in every dtype: sums stay below 128 (int8).
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
                  torch.int8, torch.uint8):
        base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
        every = [((base + 1) * (r + 1)).to(dtype) for r in range(size)]
        mine = every[rank].to(dev)
        total = sum(e.double() for e in every)
        # all_reduce: a new tensor; the input is left alone
        out = c10d.wait_tensor(c10d.all_reduce(mine, "sum", name))
        assert torch.equal(out.cpu().double(), total) and torch.equal(mine.cpu(), every[rank])
        out = c10d.wait_tensor(c10d.all_reduce(mine, "max", name))
        assert torch.equal(out.cpu(), every[-1])
        # all_gather_into_tensor: along dim 0
        out = c10d.wait_tensor(c10d.all_gather_into_tensor(mine, size, name))
        assert torch.equal(out.cpu(), torch.cat(every))
        # reduce_scatter_tensor: rank r gets row block r of the sum
        big = torch.cat([every[rank] * (s + 1) for s in range(size)]).to(dev)
        out = c10d.wait_tensor(c10d.reduce_scatter_tensor(big, "sum", size, name))
        assert torch.equal(out.cpu().double(), total * (rank + 1))
        # all_to_all_single with uneven splits: rank r sends s+1 rows to rank s
        rows = torch.cat([torch.full((s + 1, 2), 10 * rank + s) for s in range(size)]).to(dtype).to(dev)
        out = c10d.wait_tensor(c10d.all_to_all_single(rows, [rank + 1] * size, [s + 1 for s in range(size)], name))
        want = torch.cat([torch.full((rank + 1, 2), 10 * r + rank) for r in range(size)]).to(dtype)
        assert torch.equal(out.cpu(), want)
    # The Python wrappers: results that wait when first used, "avg",
    # non-contiguous inputs, and the wait ordered on the current stream.
    x = (torch.arange(6.0).reshape(2, 3) * (rank + 1)).to(dev).t()
    r = funcol.all_reduce(x, "avg", dist.group.WORLD)
    y = r * 2  # waits for the collective
    mean = torch.arange(6.0).reshape(2, 3).t() * sum(range(1, size + 1)) / size
    torch.testing.assert_close(y.cpu(), mean * 2, rtol=0, atol=0)
    g = funcol.all_gather_tensor(torch.full((2, 2), float(rank), device=dev), 1, dist.group.WORLD)
    assert torch.equal(g.cpu(), torch.cat([torch.full((2, 2), float(s)) for s in range(size)], dim=1))
    rs = funcol.reduce_scatter_tensor(torch.ones(2 * size, 3, device=dev), "sum", 0, dist.group.WORLD)
    assert torch.equal(rs.cpu(), torch.full((2, 3), float(size)))
    s = torch.neuron.Stream()
    z = funcol.all_reduce(torch.full((1000,), float(rank + 1), device=dev), "sum", dist.group.WORLD)
    with torch.neuron.stream(s):
        w = funcol.wait_tensor(z) + 0  # on s, after the collective
    s.synchronize()
    assert w.cpu()[0].item() == sum(range(1, size + 1))


def test_functional_collectives(tmp_path):
    """The _c10d_functional ops (all_reduce, all_gather_into_tensor,
    reduce_scatter_tensor, all_to_all_single, wait_tensor) on neuron tensors
    in float32, bfloat16, float16, float64 and the integer dtypes, and the
    Python wrappers DTensor uses."""
    _run(_functional, tmp_path)
