"""The shared-memory path of the c10d backend "neuron" (ranks of one host
move the bytes through a segment, distributed_shm.cpp): all_reduce with
every op, reduce_scatter, all_gather, broadcast, all_to_all, gather and
scatter against exact values
computed on each rank, every dtype, non-contiguous tensors, sizes that are
no multiple of anything (and longer than one buffer of the segment),
zero-size tensors, 2 and 3 ranks; mismatches rejected before any byte
lands. Each test asserts that the collectives went through the segment
(the counter), and TORCHNEURON_DIST_SHM=0 that they did not."""

import pytest
import torch
import torch.distributed as dist

from conftest import check_output, run_python
from test_distributed import _init, _run

pytestmark = pytest.mark.timeout(300)

FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
BUFFER = 4 << 20  # bytes of a segment buffer (distributed_shm_segment.cpp)


def _values(n, rank, dtype, salt=0):
    """Rank `rank`'s values: small integers, exact in every dtype and in
    every sum, product, min and max of up to 3 ranks."""
    base = (torch.arange(n, dtype=torch.int64) * 7 + salt) % 5 + 1
    return (base * (rank + 1) % 7).to(dtype)


def _exact(rank, store):
    from torchneuron import _C

    world = _init(rank, store)
    before = _C._neuron_c10d_shm_collectives()
    dev = torch.device("neuron", 0)
    ran = 0
    for dtype in FLOATS + INTS:
        floating = dtype.is_floating_point
        # odd sizes; float32 also past one buffer of the segment
        sizes = [0, 1, 13, 4099] + ([BUFFER // 4 + 77] if dtype == torch.float32 else [])
        for n in sizes:
            every = [_values(n, r, dtype) for r in range(world)]
            ops = {dist.ReduceOp.SUM: lambda a, b: a + b, dist.ReduceOp.MIN: torch.minimum,
                   dist.ReduceOp.MAX: torch.maximum}
            if n < 50:  # products of up to 3 values of at most 6 stay exact
                ops[dist.ReduceOp.PRODUCT] = lambda a, b: a * b
            if not floating and dtype != torch.uint8:
                ops.update({dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
                            dist.ReduceOp.BXOR: torch.bitwise_xor})
            if dtype == torch.uint8 and n < 50:
                ops = {dist.ReduceOp.MAX: torch.maximum, dist.ReduceOp.BOR: torch.bitwise_or}
            for op, f in ops.items():
                want = every[0].double() if floating else every[0]
                for e in every[1:]:
                    want = f(want, e.double() if floating else e)
                x = every[rank].to(dev)
                dist.all_reduce(x, op=op)
                ran += 1
                assert torch.equal(x.cpu(), want.to(dtype)), (dtype, n, op)
            if floating:
                x = every[rank].to(dev)
                dist.all_reduce(x, op=dist.ReduceOp.AVG)
                ran += 1
                want = sum(e.double() for e in every) / world
                torch.testing.assert_close(x.cpu().double(), want.to(dtype).double(), rtol=0, atol=0)
        # non-contiguous: a transposed view, reduced in place
        m = _values(6 * 5, rank, dtype).reshape(6, 5).t()
        x = torch.empty(6, 5, dtype=dtype, device=dev).t().copy_(m)
        assert not x.is_contiguous()
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        ran += 1
        want = torch.stack([_values(30, r, dtype).reshape(6, 5).t() for r in range(world)]).max(0).values
        assert torch.equal(x.cpu(), want), dtype
        # reduce_scatter_tensor, blocks of an odd size (float32: longer than a buffer / world)
        block = BUFFER // 4 // world + 5 if dtype == torch.float32 else 11
        big = torch.cat([_values(block, rank, dtype, salt=q) for q in range(world)]).to(dev)
        part = torch.empty(block, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(part, big, op=dist.ReduceOp.MAX)
        ran += 1
        want = torch.stack([_values(block, r, dtype, salt=rank) for r in range(world)]).max(0).values
        assert torch.equal(part.cpu(), want), dtype
        # all_gather_into_tensor into a non-contiguous output, all_gather of a list
        inp = _values(9, rank, dtype).to(dev)
        out = torch.empty(9, world, dtype=dtype, device=dev).t()
        dist.all_gather_into_tensor(out, inp)
        outs = [torch.empty(9, dtype=dtype, device=dev) for _ in range(world)]
        dist.all_gather(outs, inp)
        ran += 2
        for r in range(world):
            assert torch.equal(out[r].cpu(), _values(9, r, dtype)), dtype
            assert torch.equal(outs[r].cpu(), _values(9, r, dtype)), dtype
        # broadcast from the last rank, a non-contiguous tensor
        y = torch.empty(4, 3, dtype=dtype, device=dev).t().copy_(_values(12, rank, dtype).reshape(3, 4))
        dist.broadcast(y, src=world - 1)
        ran += 1
        assert torch.equal(y.cpu(), _values(12, world - 1, dtype).reshape(3, 4)), dtype
    # reduce to rank 0 and the zero-size forms of the others
    x = _values(5, rank, torch.float32).to(dev)
    dist.reduce(x, dst=0)
    ran += 1
    if rank == 0:
        assert torch.equal(x.cpu(), sum(_values(5, r, torch.float32) for r in range(world)))
    empty = torch.empty(0, device=dev)
    dist.broadcast(empty, src=0)
    dist.all_gather_into_tensor(torch.empty(0, device=dev), empty)
    dist.reduce_scatter_tensor(torch.empty(0, device=dev), empty)
    ran += 3
    torch.neuron.synchronize()
    assert _C._neuron_c10d_shm_collectives() - before >= ran  # every one through the segment


@pytest.mark.parametrize("world", [2, 3])
def test_shm_collectives_exact(tmp_path, world):
    _run(_exact, tmp_path, world=world)


def _mismatch_and_switch(rank, store, expect_shm):
    from torchneuron import _C

    world = _init(rank, store)
    before = _C._neuron_c10d_shm_collectives()
    dev = torch.device("neuron", 0)
    # a size mismatch: the same error on every rank, the tensor untouched
    x = torch.full((100 + 20 * rank,), float(rank + 1), device=dev)
    with pytest.raises(dist.DistBackendError, match=r"all_reduce: ranks disagree: rank \d passes 1 tensor\(s\)"):
        dist.all_reduce(x)
        torch.neuron.synchronize()
    torch.neuron.clear_error()
    assert x.cpu().eq(rank + 1).all()
    # a dtype mismatch
    y = torch.ones(8, device=dev, dtype=torch.float32 if rank == 0 else torch.float64)
    with pytest.raises(dist.DistBackendError, match=r"ranks disagree: .* elements of (Float|Double)"):
        dist.broadcast(y, src=0)
        torch.neuron.synchronize()
    torch.neuron.clear_error()
    assert y.cpu().eq(1).all()
    z = torch.full((4,), float(rank), device=dev)  # the group still works
    dist.all_reduce(z)
    assert z.cpu().tolist() == [float(sum(range(world)))] * 4
    used = _C._neuron_c10d_shm_collectives() - before
    assert (used == 3) if expect_shm else (used == 0), used


@pytest.mark.parametrize("shm", ["1", "0"])
def test_shm_mismatch_and_switch(tmp_path, monkeypatch, shm):
    """Mismatches are refused before data moves, on either path;
    TORCHNEURON_DIST_SHM=0 keeps every collective on gloo."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_mismatch_and_switch, tmp_path, shm == "1")


def test_malformed_switch_names_the_variable(tmp_path):
    script = f"""
import torch, torch.distributed as dist
try:
    dist.init_process_group("neuron", init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
except ValueError as e:
    print("raised:", e)
"""
    out = check_output(run_python(script, env={"TORCHNEURON_DIST_SHM": "yes"}))
    assert "raised: TORCHNEURON_DIST_SHM='yes' must be 0 or 1" in out, out


# ---- all_to_all, gather, scatter ---------------------------------------------------------------


def _piece(q, s, rows, dtype):
    """What rank q sends to rank s in all_to_all_single: rows of 3."""
    return _values(rows * 3, q, dtype, salt=s).reshape(rows, 3)


def _routing(rank, store, expect_shm):
    from torchneuron import _C

    world = _init(rank, store)
    before = _C._neuron_c10d_shm_collectives()
    dev = torch.device("neuron", 0)
    ran = 0
    for dtype in FLOATS + INTS:
        # uneven splits with zeros; float32's pair 0 -> 1 longer than a slot (a buffer / world)
        big = BUFFER // 4 // world // 3 + 5 if dtype == torch.float32 else 0

        def rows(q, s):
            return big if (q, s) == (0, 1) and big else (q + 2 * s) % 3

        inp = torch.cat([_piece(rank, s, rows(rank, s), dtype) for s in range(world)]).to(dev)
        n_out = sum(rows(q, rank) for q in range(world))
        out = torch.empty(3, n_out, dtype=dtype, device=dev).t()  # non-contiguous
        dist.all_to_all_single(out, inp, [rows(q, rank) for q in range(world)],
                               [rows(rank, s) for s in range(world)])
        want = torch.cat([_piece(q, rank, rows(q, rank), dtype) for q in range(world)])
        assert torch.equal(out.cpu(), want), dtype
        # even splits (none given), the list form
        even = torch.cat([_piece(rank, s, 2, dtype) for s in range(world)]).to(dev)
        got = torch.empty_like(even)
        dist.all_to_all_single(got, even)
        assert torch.equal(got.cpu(), torch.cat([_piece(q, rank, 2, dtype) for q in range(world)])), dtype
        outs = [torch.empty(4, dtype=dtype, device=dev) for _ in range(world)]
        dist.all_to_all(outs, [_values(4, rank, dtype, salt=s).to(dev) for s in range(world)])
        assert all(torch.equal(outs[q].cpu(), _values(4, q, dtype, salt=rank)) for q in range(world)), dtype
        ran += 3
        # gather to the last rank (float32: longer than a buffer), a non-contiguous input
        n = BUFFER // 4 + 7 if dtype == torch.float32 else 6
        x = torch.empty(n, 1, dtype=dtype, device=dev).t().copy_(_values(n, rank, dtype).reshape(1, n))
        root = world - 1
        g = [torch.empty(1, n, dtype=dtype, device=dev) for _ in range(world)] if rank == root else None
        dist.gather(x, g, dst=root)
        ran += 1
        if rank == root:
            assert all(torch.equal(g[q].cpu().view(-1), _values(n, q, dtype)) for q in range(world)), dtype
        # scatter from rank 1 (float32: longer than a slot), into a non-contiguous output
        n = BUFFER // 4 // world + 3 if dtype == torch.float32 else 5
        y = torch.empty(n, 1, dtype=dtype, device=dev).t()
        src = [_values(n, q, dtype, salt=1).reshape(1, n).to(dev) for q in range(world)] if rank == 1 else None
        dist.scatter(y, src, src=1)
        ran += 1
        assert torch.equal(y.cpu().view(-1), _values(n, rank, dtype, salt=1)), dtype
    # zero sizes
    e = torch.empty(0, 3, device=dev)
    dist.all_to_all_single(torch.empty(0, 3, device=dev), e, [0] * world, [0] * world)
    dist.gather(torch.empty(0, device=dev), [torch.empty(0, device=dev) for _ in range(world)] if rank == 0 else None)
    dist.scatter(torch.empty(0, device=dev), [torch.empty(0, device=dev) for _ in range(world)] if rank == 0 else None)
    ran += 3
    torch.neuron.synchronize()
    used = _C._neuron_c10d_shm_collectives() - before
    assert (used >= ran) if expect_shm else (used == 0), (used, ran)


@pytest.mark.parametrize("shm,world", [("1", 3), ("0", 2)])
def test_all_to_all_gather_scatter_exact(tmp_path, monkeypatch, shm, world):
    """all_to_all_single (uneven splits with zeros, even, list form),
    gather and scatter: every dtype, exact values, pieces longer than a
    buffer; through the segment (the counter) or, with
    TORCHNEURON_DIST_SHM=0, gloo alone."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_routing, tmp_path, shm == "1", world=world)


def _routing_mismatches(rank, store, expect_shm):
    from torchneuron import _C

    world = _init(rank, store)
    before = _C._neuron_c10d_shm_collectives()
    dev = torch.device("neuron", 0)

    def refused(pattern, fn):
        with pytest.raises(dist.DistBackendError, match=pattern):
            fn()
            torch.neuron.synchronize()
        torch.neuron.clear_error()

    # splits that disagree (rank 1 expects 3 rows from rank 0, which sends 2)
    inp = torch.ones(4, 2, device=dev)
    out = torch.full((4, 2), -1.0, device=dev)
    refused(r"all_to_all_single: splits disagree: rank 0 sends 2 rows to rank 1, which expects 3",
            lambda: dist.all_to_all_single(out, inp, [2, 2] if rank == 0 else [3, 1], [2, 2]))
    # rows of different sizes
    w = 3 if rank == 0 else 2
    refused(r"all_to_all_single: ranks disagree: rank \d passes .*(3|2) elements",
            lambda: dist.all_to_all_single(torch.empty(2, w, device=dev), torch.ones(2, w, device=dev)))
    # gather of different sizes; scatter of different dtypes
    g = [torch.full((3,), -1.0, device=dev) for _ in range(world)] if rank == 0 else None
    refused(r"gather: ranks disagree: rank \d passes 1 tensor\(s\) of \d elements",
            lambda: dist.gather(torch.ones(3 + rank, device=dev), g if rank == 0 else None, dst=0))
    dt = torch.float32 if rank == 0 else torch.float64
    s = [torch.ones(3, device=dev) for _ in range(world)] if rank == 0 else None
    refused(r"scatter: ranks disagree: .* elements of (Float|Double)",
            lambda: dist.scatter(torch.zeros(3, device=dev, dtype=dt), s, src=0))
    # nothing landed: the outputs are as they were
    assert out.cpu().eq(-1).all()
    if rank == 0:
        assert all(t.cpu().eq(-1).all() for t in g)
    # local mistakes, raised at the call
    with pytest.raises(RuntimeError, match=r"all_to_all_single: the input splits add up to 5 rows, not the tensor's 4"):
        dist.all_to_all_single(out, inp, [2, 2], [3, 2])
    # the group still works
    dist.gather(torch.full((3,), float(rank), device=dev), g, dst=0)
    if rank == 0:
        assert [t.cpu().tolist() for t in g] == [[float(q)] * 3 for q in range(world)]
    torch.neuron.synchronize()
    used = _C._neuron_c10d_shm_collectives() - before
    assert (used == 5) if expect_shm else (used == 0), used


@pytest.mark.parametrize("shm", ["1", "0"])
def test_all_to_all_gather_scatter_mismatches(tmp_path, monkeypatch, shm):
    """Mismatched splits, rows, sizes and dtypes are the same clear error on
    every rank before any byte lands, on either path; the group goes on."""
    monkeypatch.setenv("TORCHNEURON_DIST_SHM", shm)
    _run(_routing_mismatches, tmp_path, shm == "1")
