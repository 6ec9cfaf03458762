"""The c10d backend "neuron" (torchneuron/distributed), two ranks on this
host: every collective it has against values computed exactly on each rank
(integers and halves, so that every reduction order gives the same bits),
float32, bfloat16, float64 and int64, contiguous and not; async work ordered
on the stream; CPU tensors in the same group; the backend chosen by
default for neuron tensors; and DDP training on neuron against DDP on CPU
with gloo, step by step.

Each test spawns its ranks (torch.multiprocessing, a file:// store in the
test's directory); a rank's failure is reported with its traceback."""

import gc
import os
import socket
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.timeout(300)

WORLD = 2


def _run(fn, tmp_path, *args, world=WORLD):
    """Runs fn(rank, store, *args) on `world` spawned ranks; raises with the
    first failing rank's traceback."""
    errors = mp.get_context("spawn").Manager().dict()
    store = str(tmp_path / "store")
    mp.spawn(_entry, args=(fn, store, errors, args, world), nprocs=world, join=True)
    if errors:
        rank = min(errors)
        pytest.fail(f"rank {rank} failed:\n{errors[rank]}")


def _against_gloo(fn, tmp_path, world=WORLD):
    """Runs fn(rank, store, device, backend, out_dir) on neuron (backend
    "neuron") and then on the CPU (gloo), in the same spawned ranks (a
    process group each, the first destroyed before the second is made: one
    start-up of `world` interpreters instead of two); fn saves each rank's
    results to out_dir/<backend>-<rank>.pt. Returns (neuron, gloo) results
    per rank."""
    _run(_neuron_then_gloo, tmp_path, fn, str(tmp_path), world=world)
    return [(torch.load(tmp_path / f"neuron-{r}.pt"), torch.load(tmp_path / f"gloo-{r}.pt")) for r in range(world)]


def _neuron_then_gloo(rank, store, fn, out_dir):
    for device, backend in (("neuron", "neuron"), ("cpu", "gloo")):
        fn(rank, f"{store}-{backend}", device, backend, out_dir)
        gc.collect()  # DDP's and FSDP's cycles may hold the group (see _entry)
        dist.destroy_process_group()


def _entry(rank, fn, store, errors, args, world):
    try:
        import torchneuron  # noqa: F401

        os.environ["TEST_WORLD"] = str(world)
        fn(rank, store, *args)
    except Exception:  # noqa: BLE001 - reported to the parent
        errors[rank] = traceback.format_exc()
    finally:
        # Objects in reference cycles (a DDP module and its reducer) may hold
        # the last reference to a process group: collected only while the
        # interpreter finalizes, the group's gloo threads would then run
        # Python callbacks after finalization began, which aborts the rank
        # ("terminate called without an active exception"). Collect them now.
        gc.collect()
        if dist.is_initialized():
            dist.destroy_process_group()


def _init(rank, store, backend="neuron"):
    kwargs = {} if backend is None else {"backend": backend}
    world = int(os.environ.get("TEST_WORLD", WORLD))
    dist.init_process_group(init_method=f"file://{store}", rank=rank, world_size=world, **kwargs)
    return world


# ---- collectives -------------------------------------------------------------------


def _collectives(rank, store):
    WORLD = _init(rank, store)
    dev = torch.device("neuron", 0)
    for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int64):
        base = torch.arange(12, dtype=torch.float64).reshape(3, 4)

        def mine(r, t=base, dtype=dtype):  # rank r's values: exact in every dtype
            return ((t + 1) * (r + 1) / (1 if dtype == torch.int64 else 2)).to(dtype)

        every = [mine(r) for r in range(WORLD)]
        ops = {
            dist.ReduceOp.SUM: sum(e.double() for e in every),
            dist.ReduceOp.MAX: torch.stack(every).max(0).values.double(),
            dist.ReduceOp.MIN: torch.stack(every).min(0).values.double(),
        }
        # products of small values (exact in bfloat16 too: at most 6 ** 3)
        small = [((base % 3 + 1) * (r % 2 + 1)).to(dtype) for r in range(WORLD)]
        x = small[rank].to(dev)
        dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
        assert torch.equal(x.cpu().double(), torch.stack([e.double() for e in small]).prod(0)), dtype
        if dtype != torch.int64:
            ops[dist.ReduceOp.AVG] = ops[dist.ReduceOp.SUM] / WORLD
            ops[dist._make_nccl_premul_sum(0.5)] = ops[dist.ReduceOp.SUM] / 2
        for op, want in ops.items():
            for transposed in (False, True):
                x = mine(rank).to(dev)
                x = x.t().contiguous().t() if transposed else x  # non-contiguous strides, same values
                dist.all_reduce(x, op=op)
                torch.testing.assert_close(x.cpu().double(), want, rtol=0, atol=0, msg=f"{dtype} {op} {transposed}")
        if dtype == torch.int64:
            for op, f in ((dist.ReduceOp.BAND, lambda a, b: a & b), (dist.ReduceOp.BOR, lambda a, b: a | b),
                          (dist.ReduceOp.BXOR, lambda a, b: a ^ b)):
                x = mine(rank).to(dev)
                dist.all_reduce(x, op=op)
                want = every[0]
                for e in every[1:]:
                    want = f(want, e)
                assert torch.equal(x.cpu(), want), op
            with pytest.raises(RuntimeError, match="all_reduce: ReduceOp.AVG needs a floating dtype"):
                dist.all_reduce(mine(rank).to(dev), op=dist.ReduceOp.AVG)
        # broadcast from each rank
        for src in range(WORLD):
            x = mine(rank).to(dev)
            dist.broadcast(x, src=src)
            assert torch.equal(x.cpu(), every[src])
        # reduce to rank 1: the others' tensors are left as they were
        x = mine(rank).to(dev)
        dist.reduce(x, dst=1)
        assert torch.equal(x.cpu().double(), ops[dist.ReduceOp.SUM] if rank == 1 else every[rank].double())
        # all_gather (list) and into one tensor
        outs = [torch.empty(3, 4, dtype=dtype, device=dev) for _ in range(WORLD)]
        dist.all_gather(outs, mine(rank).to(dev))
        for r in range(WORLD):
            assert torch.equal(outs[r].cpu(), every[r])
        flat = torch.empty(WORLD * 3, 4, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(flat, mine(rank).to(dev))
        assert torch.equal(flat.cpu(), torch.cat(every))
        # reduce_scatter_tensor: rank r gets row block r of the sum
        big = torch.cat([mine(rank, base + 10 * r) for r in range(WORLD)]).to(dev)
        part = torch.empty(3, 4, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(part, big)
        want = sum(mine(r, base + 10 * rank).double() for r in range(WORLD))
        assert torch.equal(part.cpu().double(), want)
        part2 = torch.empty(3, 4, dtype=dtype, device=dev)
        dist.reduce_scatter(part2, [mine(rank, base + 10 * r).to(dev) for r in range(WORLD)])
        assert torch.equal(part2.cpu().double(), want)
    # send / recv around the ring, and a zero-size tensor
    for src in range(WORLD):
        dst = (src + 1) % WORLD
        if rank == src:
            dist.send(torch.tensor([src + 0.5, 7.0], device=dev), dst)
        elif rank == dst:
            got = torch.zeros(2, device=dev)
            dist.recv(got, src)
            assert got.cpu().tolist() == [src + 0.5, 7.0]
    empty = torch.empty(0, device=dev)
    dist.all_reduce(empty)
    dist.barrier()


@pytest.mark.parametrize("world,shm", [(2, "1"), (3, "1"), (2, "0")])
def test_collectives(tmp_path, monkeypatch, world, shm):
    """On the shared-memory path (ranks of one host) and, with
    TORCHNEURON_DIST_SHM=0, on gloo alone."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_collectives, tmp_path, world=world)


# ---- stream order, async work, CPU tensors, default backend ---------------------------


def _ordering(rank, store):
    _init(rank, store)
    dev = torch.device("neuron", 0)
    # Work queued before the collective is in it; work after sees its result.
    x = torch.ones(1 << 16, device=dev)
    for _ in range(5):
        x = x * 2 + 1  # 63 after five steps
    work = dist.all_reduce(x, async_op=True)  # on the group's stream, as NCCL's
    work.wait()  # the current stream waits; the host does not
    y = x * 10  # queued behind the collective on the current stream
    assert y[0].item() == 63 * WORLD * 10
    assert work.is_completed() and work.is_success()
    # Another stream waits through wait().
    s = torch.neuron.Stream()
    z = torch.full((1000,), float(rank + 1), device=dev)
    work = dist.all_reduce(z, async_op=True)
    with torch.neuron.stream(s):
        work.wait()
        w = z + 0  # on s, after the collective
    s.synchronize()
    assert w[0].item() == sum(r + 1 for r in range(WORLD))
    # Collectives on two streams reach gloo in the order the host issued
    # them, on every rank, however the streams run: rank 0 holds the first
    # stream (a gate) while its second stream's later collective is ready.
    import time

    from torchneuron import _C

    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    held = _C._close_stream_gate(a.device_index, a.stream_id) if rank == 0 else None
    p, q = torch.full((7,), float(rank + 1), device=dev), torch.full((3,), float(rank), device=dev)
    gathered = torch.empty(3 * WORLD, device=dev)
    for t in (a, b):
        t.wait_stream(torch.neuron.current_stream())  # the fills above
    with torch.neuron.stream(a):
        dist.all_reduce(p)
    with torch.neuron.stream(b):
        dist.all_gather_into_tensor(gathered, q)
    if held is not None:
        time.sleep(0.3)  # the second stream's worker is free meanwhile
        _C._open_stream_gate(held)
    a.synchronize()
    b.synchronize()
    assert p.cpu().tolist() == [float(sum(range(1, WORLD + 1)))] * 7
    assert gathered.cpu().tolist() == sum([[float(r)] * 3 for r in range(WORLD)], [])
    # CPU tensors in the same group go through gloo.
    c = torch.full((5,), float(rank))
    dist.all_reduce(c)
    assert c.tolist() == [float(sum(range(WORLD)))] * 5
    g = [torch.empty(2) for _ in range(WORLD)]
    dist.all_gather(g, torch.full((2,), float(rank)))
    assert [t.tolist() for t in g] == [[float(r)] * 2 for r in range(WORLD)]


def test_stream_order_async_and_cpu_tensors(tmp_path):
    _run(_ordering, tmp_path)


def _default_backend(rank, store, backend):
    _init(rank, store, backend=backend)
    assert "neuron:neuron" in dist.get_backend_config(), dist.get_backend_config()
    x = torch.full((3,), float(rank + 1), device="neuron")
    dist.all_reduce(x)
    assert x.cpu().tolist() == [3.0, 3.0, 3.0]
    if backend is not None:  # with no backend, as with CUDA's, only the accelerator's is made
        c = torch.full((3,), float(rank + 1))
        dist.all_reduce(c)  # gloo
        assert c.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("backend", [None, "cpu:gloo,neuron:neuron"])
def test_default_backend_for_neuron_tensors(tmp_path, backend):
    """init_process_group() without a backend picks "neuron" for neuron
    tensors; a "cpu:gloo,neuron:neuron" group sends each kind its way."""
    _run(_default_backend, tmp_path, backend)


def _tcp_and_device_id(rank, store, port):
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            device_id=torch.device("neuron", 0))
    x = torch.full((4,), float(rank + 1), device="neuron")
    dist.all_reduce(x)
    assert x.cpu().tolist() == [3.0] * 4
    dist.barrier()


def test_tcp_init_method_and_device_id(tmp_path):
    """init_process_group with a tcp:// rendezvous (torch's TCPStore, the
    only listening socket) and a device_id binding the group to a neuron
    device."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _run(_tcp_and_device_id, tmp_path, port)


# ---- DDP ------------------------------------------------------------------------------------


class _DDPNet(torch.nn.Module):
    def __init__(self, spare):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
        self.spare = torch.nn.Linear(32, 4) if spare else None  # used on even steps only

    def forward(self, x, spare=False):
        h = torch.nn.functional.gelu(self.fc1(x))
        return self.fc2(h) + (self.spare(h) if spare else 0)


# DDP's variants: name -> (DDP keyword arguments, the spare branch on even
# steps, no_sync on even steps, bfloat16 autocast)
_DDP_VARIANTS = {
    "buckets": (dict(bucket_cap_mb=0.001), False, False, False),  # several buckets
    "no_sync": (dict(), False, True, False),  # gradients accumulated over two steps
    "find_unused": (dict(find_unused_parameters=True), True, False, False),
    "static_graph": (dict(static_graph=True), False, False, False),
    "autocast": (dict(), False, False, True),  # bfloat16 autocast forward
}


def _ddp(rank, store, device, backend, out_dir):
    import contextlib

    _init(rank, store, backend)
    results = {}
    for name, (kwargs, spare, no_sync, autocast) in _DDP_VARIANTS.items():
        torch.manual_seed(0)
        model = _DDPNet(spare).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        losses = []
        for step in range(4):
            g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own batch
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
            accumulate = no_sync and step % 2 == 0
            with ddp.no_sync() if accumulate else contextlib.nullcontext():
                with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                    out = ddp(x.to(device), spare=spare and step % 2 == 0)
                loss = torch.nn.functional.mse_loss(out.float(), y.to(device))
                loss.backward()
            if not accumulate:
                opt.step()
                opt.zero_grad()
            losses.append(loss.item())
        results[name] = {"losses": losses, "params": [p.detach().cpu().clone() for p in model.parameters()]}
    torch.save(results, os.path.join(out_dir, f"{backend}-{rank}.pt"))


def test_ddp_against_gloo_on_cpu(tmp_path):
    """The same seeds, data and steps on neuron (backend "neuron") and on
    CPU (gloo), for several buckets, no_sync, find_unused_parameters,
    static_graph and a bfloat16-autocast forward: losses and parameters
    agree at every rank to 1e-5 in float32 (the kernels agree with the
    CPU's to rounding; the gradients are averaged the same way), to one
    bfloat16 rounding step (4e-3) under autocast."""
    results = _against_gloo(_ddp, tmp_path)
    for a, b in results:
        for name in _DDP_VARIANTS:
            tol = dict(rtol=4e-3, atol=1e-4) if name == "autocast" else dict(rtol=1e-5, atol=1e-6)
            assert a[name]["losses"] == pytest.approx(b[name]["losses"], rel=tol["rtol"], abs=tol["atol"]), name
            for p, q in zip(a[name]["params"], b[name]["params"]):
                torch.testing.assert_close(p, q, **tol, msg=name)
    # The ranks' replicas agree with each other exactly.
    a0, a1 = (a for a, _ in results)
    for name in _DDP_VARIANTS:
        for p, q in zip(a0[name]["params"], a1[name]["params"]):
            assert torch.equal(p, q), name
    # The variants that change the arithmetic did change it.
    for name in ("no_sync", "find_unused", "autocast"):
        assert a0[name]["losses"] != a0["buckets"]["losses"], name


# ---- all_to_all, gather, scatter, coalescing --------------------------------------------------


def _more_collectives(rank, store):
    size = _init(rank, store)
    dev = torch.device("neuron", 0)
    # uneven all_to_all_single: rank r sends (s+1) rows of value 10r+s to rank s
    in_splits = [s + 1 for s in range(size)]
    inp = torch.cat([torch.full((s + 1, 2), float(10 * rank + s)) for s in range(size)]).to(dev)
    out_splits = [rank + 1] * size
    out = torch.empty(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(10 * r + rank)) for r in range(size)])
    assert torch.equal(out.cpu(), want), (out.cpu(), want)
    outs = [torch.empty(3, device=dev) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((3,), float(10 * rank + s), device=dev) for s in range(size)])
    assert [o.cpu().tolist() for o in outs] == [[float(10 * r + rank)] * 3 for r in range(size)]
    g = [torch.empty(2, device=dev) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank), device=dev), g, dst=0)
    if rank == 0: assert [t.cpu().tolist() for t in g] == [[float(r)] * 2 for r in range(size)]
    sc = torch.empty(2, device=dev)
    dist.scatter(sc, [torch.full((2,), float(r + 5), device=dev) for r in range(size)] if rank == 1 else None, src=1)
    assert sc.cpu().tolist() == [float(rank + 5)] * 2
    a, b = torch.empty(2 * size, device=dev), torch.empty(3 * size, device=dev)
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.all_gather_into_tensor(a, torch.full((2,), float(rank), device=dev))
        dist.all_gather_into_tensor(b, torch.full((3,), float(rank + 1), device=dev))
    cm.wait()
    assert a.cpu().tolist() == sum([[float(r)] * 2 for r in range(size)], [])
    assert b.cpu().tolist() == sum([[float(r + 1)] * 3 for r in range(size)], [])
    ra, rb = torch.empty(2, device=dev), torch.empty(1, device=dev)
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.reduce_scatter_tensor(ra, torch.ones(2 * size, device=dev))
        dist.reduce_scatter_tensor(rb, torch.ones(size, device=dev) * 2)
    cm.wait()
    assert ra.cpu().tolist() == [float(size)] * 2 and rb.cpu().tolist() == [2.0 * size]
    # splits that disagree: an error naming the collective, on every rank
    with pytest.raises(RuntimeError, match="neuron backend all_to_all_single: splits disagree"):
        bad = torch.empty(5 if rank == 0 else 3, 2, device=dev)
        dist.all_to_all_single(bad, inp, [2, 3] if rank == 0 else [1, 2], in_splits)
        torch.neuron.synchronize()
    torch.neuron.clear_error()


def test_all_to_all_gather_scatter_and_coalescing(tmp_path):
    """all_to_all_single with uneven splits, all_to_all of lists, gather,
    scatter, and all_gather_into_tensor / reduce_scatter_tensor inside
    torch.distributed's coalescing manager (as FSDP2 issues them)."""
    _run(_more_collectives, tmp_path)


# ---- failures -------------------------------------------------------------------------------


def _mismatch(rank, store):
    _init(rank, store)
    x = torch.ones(100 + 20 * rank, device="neuron")  # ranks disagree on the size
    # The error is the stream's: raised by the next synchronising call.
    # DistBackendError (a RuntimeError), as NCCL's failures are.
    with pytest.raises(dist.DistBackendError, match=r"neuron backend all_reduce: ranks disagree: rank \d passes 1 tensor\(s\) of 1[02]0 elements"):
        dist.all_reduce(x)
        torch.neuron.synchronize()
    torch.neuron.clear_error()
    y = torch.full((4,), float(rank), device="neuron")  # the group still works
    dist.all_reduce(y)
    assert y.cpu().tolist() == [1.0] * 4


def test_mismatched_sizes_raise_on_every_rank(tmp_path):
    _run(_mismatch, tmp_path)


def _dead_peer(rank, store):
    import datetime
    import time

    dist.init_process_group("neuron", init_method=f"file://{store}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=20))
    x = torch.ones(1000, device="neuron")
    dist.all_reduce(x)
    torch.neuron.synchronize()
    if rank == 1:
        os._exit(0)  # dies without a word
    time.sleep(0.5)
    start = time.monotonic()
    with pytest.raises(dist.DistBackendError, match="neuron backend all_reduce: .*(closed|reset|Timed out|timed out)"):
        dist.all_reduce(x)
        torch.neuron.synchronize()
    assert time.monotonic() - start < 20 + 5
    os._exit(0)  # the group's peer is gone: skip its teardown


@pytest.mark.parametrize("shm", ["1", "0"])
def test_dead_peer_raises_within_the_timeout(tmp_path, monkeypatch, shm):
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_dead_peer, tmp_path)


# ---- the example under torchrun ---------------------------------------------------------------


def test_ddp_example_under_torchrun_matches_gloo_on_cpu():
    """examples/ddp_train.py with torchrun --nproc-per-node 2, on neuron and
    on the CPU with gloo: the same losses, rank by rank, at the printed
    precision."""
    import re
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = {}
    for extra in ([], ["--device", "cpu", "--backend", "gloo"]):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               os.path.join(root, "examples", "ddp_train.py"), "--steps", "3"] + extra
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=root)
        if extra and out.returncode != 0 and "terminate called" in out.stderr:
            # The reference is PyTorch's own gloo on the CPU, whose teardown
            # has aborted at exit once in CI (not reproducible in 27 runs
            # here, loaded or not); give the oracle one more try. The neuron
            # run gets none.
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=root)
        assert out.returncode == 0, out.stdout + out.stderr
        runs[bool(extra)] = sorted(re.findall(r"rank (\d)/2 step +(\d+) loss ([0-9.]+)", out.stdout))
    assert len(runs[False]) == 4 and runs[False] == runs[True], runs
