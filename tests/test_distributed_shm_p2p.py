"""Sends and receives of the c10d backend "neuron" through the shared
segment of a one-host group (distributed_shm_p2p.cpp): every dtype, sizes
from 0 to several mailbox slots, non-contiguous tensors, batches both ways
and around a ring of 3 ranks, checked against the same messages sent with
gloo on CPU tensors (a gloo subgroup of the same ranks, in the same run);
messages that do not fit (size, dtype, tag) refused before any byte lands,
the pair still in step; a peer that died or hangs is an error within the
group's timeout. The counter says the messages went through the segment,
and with TORCHNEURON_DIST_SHM=0 that they did not."""

import datetime
import os
import time

import pytest
import torch
import torch.distributed as dist

from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool)
SLOT = (256 << 10) - 64  # payload bytes of a mailbox slot (distributed_shm_segment.cpp, distributed_shm_p2p.cpp)


def _message(n, src, dst, dtype, salt=0):
    """The message from src to dst: distinct values in every dtype."""
    v = (torch.arange(n, dtype=torch.int64) * 31 + 7 * src + 3 * dst + salt) % 97
    if dtype == torch.bool:
        return v % 2 == 1
    return v.to(dtype)


def _exchange(ops_of, device, gloo):
    """Runs batch_isend_irecv on the ops ops_of(device) builds (on the
    neuron group, or on the gloo subgroup for CPU tensors); returns the
    received tensors, on the CPU."""
    ops, received = ops_of(device)
    works = dist.batch_isend_irecv([dist.P2POp(f, t, p, group=None if device != "cpu" else gloo, tag=tag)
                                    for f, t, p, tag in ops])
    for w in works:
        w.wait()
    return [t.cpu() for t in received]


def _exact(rank, store, expect_shm):
    from torchneuron import _C

    world = _init(rank, store)
    gloo = dist.new_group(backend="gloo")
    before = _C._neuron_c10d_shm_messages()
    dev = torch.device("neuron", 0)
    sent = 0
    right, left = (rank + 1) % world, (rank - 1) % world
    for dtype in DTYPES:
        elem = torch.empty(0, dtype=dtype).element_size()
        # sizes: nothing, one, odd; float32 and int8 several slots (both ways at once)
        sizes = [0, 1, 13] + ([3 * SLOT // elem + 5] if dtype in (torch.float32, torch.int8) else [])
        for n in sizes:
            def ring(device, n=n):
                # send right and receive from the left, the receive posted first on odd ranks;
                # the received tensor non-contiguous when it has rows to transpose
                recv = torch.full((n,), 0, dtype=dtype, device=device)
                if n == 13:
                    recv = torch.zeros(1, 13, dtype=dtype, device=device).t()
                ops = [(dist.isend, _message(n, rank, right, dtype).reshape(recv.shape).to(device), right, 0),
                       (dist.irecv, recv, left, 0)]
                return (ops[::-1] if rank % 2 else ops), [recv]

            got = _exchange(ring, dev, gloo)
            want = _exchange(ring, "cpu", gloo)
            assert torch.equal(got[0], want[0]) and torch.equal(got[0].view(-1), _message(n, left, rank, dtype)), \
                (dtype, n)
            sent += 2
        # send / recv one way, 0 -> 1, from a non-contiguous view, two messages in order
        src = _message(12, 0, 1, dtype).reshape(3, 4)
        if rank == 0:
            dist.send(src.to(dev).t(), 1)
            dist.isend(src.to(dev)[:, 1], 1, tag=5).wait()
            sent += 2
        elif rank == 1:
            a = torch.empty(4, 3, dtype=dtype, device=dev)
            b = torch.empty(3, dtype=dtype, device=dev)
            dist.recv(a, 0)
            dist.irecv(b, 0, tag=5).wait()
            assert torch.equal(a.cpu(), src.t()) and torch.equal(b.cpu(), src[:, 1]), dtype
            sent += 2
    # Several messages to one peer in one batch land in order; sends to and
    # receives from every other rank.
    ops = []
    outs = {}
    for q in range(world):
        if q == rank:
            continue
        for k in range(3):
            ops.append(dist.P2POp(dist.isend, _message(5 + k, rank, q, torch.float32, salt=k).to(dev), q))
            outs[q, k] = torch.empty(5 + k, device=dev)
            ops.append(dist.P2POp(dist.irecv, outs[q, k], q))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    sent += len(ops)
    for (q, k), t in outs.items():
        assert torch.equal(t.cpu(), _message(5 + k, q, rank, torch.float32, salt=k)), (q, k)
    torch.neuron.synchronize()
    used = _C._neuron_c10d_shm_messages() - before
    assert (used == sent) if expect_shm else (used == 0), (used, sent)


@pytest.mark.parametrize("shm,world", [("1", 3), ("0", 2)])
def test_send_recv_against_gloo(tmp_path, monkeypatch, shm, world):
    """Every dtype, sizes up to several slots, non-contiguous tensors,
    exchanges both ways, a ring of 3: the same as gloo on the CPU; through
    the segment (the counter) or, with TORCHNEURON_DIST_SHM=0, gloo alone."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_exact, tmp_path, shm == "1", world=world)


def _mismatches(rank, store):
    from torchneuron import _C

    _init(rank, store)
    dev = torch.device("neuron", 0)
    before = _C._neuron_c10d_shm_messages()

    def refused(pattern, fn):
        with pytest.raises(RuntimeError, match=pattern):
            fn()
            torch.neuron.synchronize()
        torch.neuron.clear_error()

    if rank == 0:
        dist.send(torch.arange(3 * SLOT // 4 + 9, dtype=torch.float32, device=dev), 1)  # longer than the tensor
        dist.send(torch.ones(4, dtype=torch.int64, device=dev), 1)  # another dtype
        dist.send(torch.ones(4, device=dev), 1, tag=3)  # another tag
        dist.send(torch.arange(4.0, device=dev), 1)  # fits
    else:
        short = torch.full((8,), -1.0, device=dev)
        refused(rf"neuron backend recv: recv from rank 0: the message has {3 * SLOT // 4 + 9} elements of Float, "
                r"the tensor 8 elements of Float; nothing was written into it", lambda: dist.recv(short, 0))
        assert short.cpu().tolist() == [-1.0] * 8
        wrong = torch.full((2, 4), -1.0, device=dev).t()  # non-contiguous: left as it was too
        refused(r"recv from rank 0: the message has 4 elements of Long, the tensor 8 elements of Float",
                lambda: dist.recv(wrong, 0))
        assert wrong.cpu().eq(-1).all()
        refused(r"recv from rank 0: the message has tag 3, the receive tag 0",
                lambda: dist.recv(torch.zeros(4, device=dev), 0))
        ok = torch.zeros(4, device=dev)
        dist.recv(ok, 0)  # the pair is still in step
        assert ok.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    torch.neuron.synchronize()
    assert _C._neuron_c10d_shm_messages() - before == 4


def test_mismatched_messages_are_refused(tmp_path):
    """Size, dtype and tag mismatches: a clear error on the receiver,
    nothing written into its tensor, the next message received."""
    _run(_mismatches, tmp_path)


def _peer_gone(rank, store, how):
    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=3))
    dev = torch.device("neuron", 0)
    x = torch.ones(1000, device=dev)
    dist.all_reduce(x)
    torch.neuron.synchronize()
    if rank == 1:
        if how == "hangs":
            time.sleep(6)
        os._exit(0)  # dies without a word
    time.sleep(0.3)
    start = time.monotonic()
    pattern = "exited; the shared-memory channel is closed" if how == "dies" else "timed out after 3000 ms"
    # a receive waits for nothing; a send longer than the mailbox waits for a taker
    with pytest.raises(dist.DistBackendError, match="neuron backend recv: .*" + pattern):
        dist.recv(x, 1)
        torch.neuron.synchronize()
    assert time.monotonic() - start < 3 + 3
    torch.neuron.clear_error()
    with pytest.raises(dist.DistBackendError, match="neuron backend send: .*(failed earlier|" + pattern + ")"):
        dist.send(torch.ones(4 * SLOT, dtype=torch.uint8, device=dev), 1)
        torch.neuron.synchronize()
    os._exit(0)  # the group's peer is gone: skip its teardown


@pytest.mark.parametrize("how", ["dies", "hangs"])
def test_dead_or_hung_peer_raises_within_the_timeout(tmp_path, monkeypatch, how):
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", "1")
    _run(_peer_gone, tmp_path, how)
