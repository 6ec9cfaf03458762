"""nki.collectives, nisa.core_barrier and nisa.sendrecv across the programs
of a launch grid (the cores of a logical NeuronCore): the grid's programs run
interleaved and meet at every call. Each collective against torch, and one
negative test per rule."""

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki.errors import NkiError

PAIR = ncc.ReplicaGroup([[0, 1]])


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


@nki.jit
def all_reduce_sbuf(a, op):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = ncc.rank_id()
    src = nl.load(a[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    ncc.all_reduce([src], [dst], PAIR, op)
    nl.store(out[r], dst)
    return out


@pytest.mark.parametrize("op, ref", [(nl.add, torch.add), (nl.maximum, torch.maximum),
                                     (nl.minimum, torch.minimum)])
def test_all_reduce_sbuf(op, ref):
    a = _rand(2, 128, 64)
    out = all_reduce_sbuf[2](a, op)
    want = ref(a[0], a[1])
    assert torch.equal(out[0], want) and torch.equal(out[1], want)


def test_all_reduce_bfloat16_rounds_once():
    a = _rand(2, 128, 64, dtype=torch.bfloat16)
    out = all_reduce_sbuf[2](a, nl.add)
    want = (a[0].float() + a[1].float()).bfloat16()
    assert out.dtype == torch.bfloat16 and torch.equal(out[0], want) and torch.equal(out[1], want)


@nki.jit
def all_reduce_hbm_coalesced(a, b):
    out_a = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    out_b = nl.ndarray(b.shape, b.dtype, buffer=nl.shared_hbm)
    r = ncc.rank_id()
    ncc.all_reduce([a[r], b[r]], [out_a[r], out_b[r]], PAIR, nl.add)
    return out_a, out_b


def test_all_reduce_hbm_coalesced():
    a, b = _rand(2, 16, 8), _rand(2, 4, 32)
    oa, ob = all_reduce_hbm_coalesced[2](a, b)
    for r in range(2):
        assert torch.equal(oa[r], a[0] + a[1]) and torch.equal(ob[r], b[0] + b[1])


def test_all_reduce_on_neuron_tensors():
    a = _rand(2, 128, 64)
    out = all_reduce_sbuf[2](a.to("neuron"), nl.add).cpu()
    assert torch.equal(out[0], a[0] + a[1]) and torch.equal(out[1], a[0] + a[1])


@nki.jit
def all_reduce_subgroups(a, groups):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = ncc.rank_id()
    ncc.all_reduce([a[r]], [out[r]], ncc.ReplicaGroup(groups), nl.add)
    return out


@pytest.mark.parametrize("groups", [[[0, 1], [2, 3]], [[0, 2], [1, 3]], [[3, 2, 1, 0]]])
def test_all_reduce_in_rank_lists_of_a_grid_of_four(groups):
    a = _rand(4, 8, 16)
    out = all_reduce_subgroups[4](a, groups)
    for g in groups:
        want = sum(a[r] for r in sorted(g))
        for r in g:
            torch.testing.assert_close(out[r], want, rtol=0, atol=1e-6)


def test_replica_group_from_partition_op():
    op = ncc.rg_partition_op
    assert ncc.ReplicaGroup.from_partition_op(8, op.div, 4).groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert ncc.ReplicaGroup.from_partition_op(8, op.mod, 4).groups == [[0, 4], [1, 5], [2, 6],
                                                                       [3, 7]]
    assert ncc.ReplicaGroup.from_partition_op(4, op.bitwise_and, 0).groups == [[0, 1, 2, 3]]


@nki.jit
def all_gather(a, dim):
    r = ncc.rank_id()
    shape = list(a.shape[1:])
    shape[dim] *= 2
    out = nl.ndarray((2, *shape), a.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([a[r]], [out[r]], PAIR, collective_dim=dim)
    return out


@pytest.mark.parametrize("dim", [0, 1])
def test_all_gather(dim):
    a = _rand(2, 64, 32)
    out = all_gather[2](a, dim)
    want = torch.cat([a[0], a[1]], dim=dim)
    assert torch.equal(out[0], want) and torch.equal(out[1], want)


@nki.jit
def all_gather_reordered(a):
    r = ncc.rank_id()
    out = nl.ndarray((2, 2 * a.shape[1], a.shape[2]), a.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([a[r]], [out[r]], ncc.ReplicaGroup([[1, 0]]), collective_dim=0)
    return out


def test_all_gather_follows_the_rank_list_order():
    a = _rand(2, 8, 4)
    out = all_gather_reordered[2](a)
    assert torch.equal(out[0], torch.cat([a[1], a[0]]))


@nki.jit
def reduce_scatter(a):
    r = ncc.rank_id()
    out = nl.ndarray((2, a.shape[1] // 2, a.shape[2]), a.dtype, buffer=nl.shared_hbm)
    src = nl.load(a[r])
    dst = nl.ndarray((a.shape[1] // 2, a.shape[2]), a.dtype, buffer=nl.sbuf)
    ncc.reduce_scatter([src], [dst], PAIR, collective_dim=0, op=nl.add)
    nl.store(out[r], dst)
    return out


def test_reduce_scatter():
    a = _rand(2, 128, 32)
    out = reduce_scatter[2](a)
    total = a[0] + a[1]
    assert torch.equal(out[0], total[:64]) and torch.equal(out[1], total[64:])


@nki.jit
def all_to_all(a, dim):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all([a[r]], [out[r]], PAIR, collective_dim=dim)
    return out


@pytest.mark.parametrize("dim", [0, 1])
def test_all_to_all(dim):
    a = _rand(2, 64, 32)
    out = all_to_all[2](a, dim)
    for j in range(2):
        for k in range(2):
            assert torch.equal(out[j].chunk(2, dim)[k], a[k].chunk(2, dim)[j])


@nki.jit
def permute(a, pairs):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out[r], nl.multiply(nl.load(a[r]), -1.0))
    ncc.collective_permute([a[r]], [out[r]], pairs)
    return out


def test_collective_permute_swap_and_one_way():
    a = _rand(2, 16, 8)
    out = permute[2](a, ((0, 1), (1, 0)))
    assert torch.equal(out[0], a[1]) and torch.equal(out[1], a[0])
    out = permute[2](a, ((0, 1),))
    assert torch.equal(out[1], a[0]) and torch.equal(out[0], -a[0])  # rank 0 keeps its dst


@nki.jit
def swap_tiles(a):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    src = nl.load(a[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src, dst, send_to_rank=1 - r, recv_from_rank=1 - r, pipe_id=0)
    nl.store(out[r], dst)
    return out


def test_sendrecv_swaps_tiles():
    a = _rand(2, 128, 16)
    out = swap_tiles[2](a)
    assert torch.equal(out[0], a[1]) and torch.equal(out[1], a[0])


@nki.jit
def exchange_halves(a):
    # Each core writes its half of a shared tensor, waits, then reads the
    # other core's half: without the barrier program 0 would read nothing.
    r = ncc.rank_id()
    half = a.shape[0] // 2
    shared = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(shared[r * half:(r + 1) * half], nl.multiply(nl.load(a[r * half:(r + 1) * half]), 2.0))
    nisa.core_barrier(shared, (0, 1))
    other = (1 - r) * half
    nl.store(out[other:other + half], nl.load(shared[other:other + half]))
    return out


def test_core_barrier_orders_writes_across_cores():
    a = _rand(128, 32)
    out = exchange_halves[2](a)
    assert torch.equal(out, a * 2)


def test_collective_estimate_counts_bytes_and_a_barrier():
    a = np.zeros((2, 128, 64), np.float32)
    est = all_reduce_sbuf.specialise((a, nl.add), {}, 0, 2).estimate()
    tile = 128 * 64 * 4
    assert est["dma_bytes"] == tile + 2 * tile + tile  # load, both contributions, store
    # load, then the call (a barrier with its handshake), then the store: in sequence
    assert est["total_ns"] > 4 * 1300
    start, end = est["start_ns"], est["end_ns"]
    assert start[1] >= end[0] and start[2] >= end[1]


# ---- rules ---------------------------------------------------------------------


@pytest.mark.parametrize("groups, message", [
    ([[0, 2]], "names rank 2"), ([[0, 1], [1]], "twice"), ([[1]], "rank 0 is in no list"),
    ([[0, 1], []], "empty")])
def test_bad_replica_group(groups, message):
    with pytest.raises(NkiError, match=message) as e:
        all_reduce_subgroups[2](np.zeros((2, 4, 4), np.float32), groups)
    assert e.value.rule == "replica_group"


def test_bad_reduce_op():
    with pytest.raises(NkiError) as e:
        all_reduce_sbuf[2](np.zeros((2, 4, 4), np.float32), nl.multiply)
    assert e.value.rule == "collective_op"


@nki.jit
def bad_all_reduce(a, what):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype if what != "dtype" else nl.bfloat16, buffer=nl.shared_hbm)
    src = a[r] if what != "shape" else a[r][:2]
    if what == "mix":
        src = nl.load(a[r])
    ncc.all_reduce([src], [out[r]], PAIR, nl.add)
    return out


@pytest.mark.parametrize("what, rule", [("shape", "shape_mismatch"), ("dtype", "dtype_mismatch"),
                                        ("mix", "collective_memory")])
def test_operand_rules(what, rule):
    with pytest.raises(NkiError) as e:
        bad_all_reduce[2](np.zeros((2, 4, 4), np.float32), what)
    assert e.value.rule == rule


def test_all_gather_needs_a_destination_of_the_gathered_size():
    @nki.jit
    def k(a):
        r = ncc.rank_id()
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([a[r]], [out[r]], PAIR, collective_dim=0)
        return out

    with pytest.raises(NkiError) as e:
        k[2](np.zeros((2, 4, 4), np.float32))
    assert e.value.rule == "shape_mismatch"


def test_collective_dim_out_of_range():
    @nki.jit
    def gather_dim(a, dim):
        r = ncc.rank_id()
        out = nl.ndarray((2, 8, 4), a.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([a[r]], [out[r]], PAIR, collective_dim=dim)
        return out

    for kernel in (gather_dim, all_to_all):
        with pytest.raises(NkiError) as e:
            kernel[2](np.zeros((2, 4, 4), np.float32), 2)
        assert e.value.rule == "collective_dim"


def test_ranks_that_disagree_on_sizes_fail_when_they_meet():
    @nki.jit
    def k(a):
        r = ncc.rank_id()
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        rows = 4 if r == 0 else 2
        ncc.all_reduce([a[r][:rows]], [out[r][:rows]], PAIR, nl.add)
        return out

    with pytest.raises(NkiError, match="contributes no source of that size"):
        k[2](np.zeros((2, 4, 4), np.float32))


@nki.jit
def mismatched(a, case):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out[r], nl.load(a[r]))
    if case == "missing" and r == 0:
        nisa.core_barrier(out, (0, 1))
    if case == "kind":
        if r == 0:
            nisa.core_barrier(out, (0, 1))
        else:
            ncc.all_reduce([a[r]], [out[r]], PAIR, nl.add)
    return out


@pytest.mark.parametrize("case, message", [
    ("missing", "program 0 is at core_barrier .*program 1 ends without it"),
    ("kind", "program 0 is at core_barrier .*program 1 is at all_reduce")])
def test_mismatched_barriers_are_refused(case, message):
    with pytest.raises(NkiError, match=message) as e:
        mismatched[2](np.zeros((2, 4, 4), np.float32), case)
    assert e.value.rule == "collective_mismatch" and "mismatched" in str(e.value)


def test_sendrecv_rules():
    @nki.jit
    def k(a, where):
        r = ncc.rank_id()
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        src = nl.load(a[r])
        dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
        nisa.sendrecv(a[r] if where == "hbm" else src, dst, 1 - r, 5 if where == "rank" else 1 - r)
        nl.store(out[r], dst)
        return out

    for where, rule in (("hbm", "collective_memory"), ("rank", "replica_group")):
        with pytest.raises(NkiError) as e:
            k[2](np.zeros((2, 4, 4), np.float32), where)
        assert e.value.rule == rule


def test_core_barrier_names_every_core():
    @nki.jit
    def k(a):
        nisa.core_barrier(a, (0,))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    with pytest.raises(NkiError) as e:
        k[2](np.zeros((4, 4), np.float32))
    assert e.value.rule == "replica_group"


def test_collective_permute_rules():
    a = np.zeros((2, 4, 4), np.float32)
    with pytest.raises(NkiError) as e:
        permute[2](a, ((0, 1), (0, 1)))
    assert e.value.rule == "replica_group"
    with pytest.raises(NkiError) as e:
        permute[2](a, ((0, 3),))
    assert e.value.rule == "replica_group"


# ---- variable-length forms and rings ----------------------------------------------


@nki.jit
def gather_v(a, meta, rdispls):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out[r], nl.multiply(nl.load(a[r]), 0.0))
    ncc.all_gather_v([a[r]], [out[r]], PAIR, meta[r], has_rdispls=rdispls)
    return out


def test_all_gather_v_lands_run_time_chunks_in_slots():
    a = np.random.rand(2, 1, 16).astype(np.float32)
    meta = np.zeros((2, 4, 2), np.uint32)
    meta[0, 0, 0], meta[0, 1, 0] = 3, 5  # rank 0 sends a[0][5:8]
    meta[1, 0, 0], meta[1, 1, 0] = 8, 0  # rank 1 sends a[1][0:8]
    out = gather_v[2](a, meta, False)
    for r in range(2):
        want = np.zeros(16, np.float32)
        want[0:3], want[8:16] = a[0, 0, 5:8], a[1, 0, 0:8]
        np.testing.assert_array_equal(out[r, 0], want)
    meta[:, 3, :] = [[10, 1], [13, 2]]  # row 3: where each sender's chunk lands
    out = gather_v[2](a, meta, True)
    assert (out[0, 0, 10:13] == a[0, 0, 5:8]).all() and (out[0, 0, 1:9] == a[1, 0, 0:8]).all()
    assert (out[1, 0, 13:16] == a[0, 0, 5:8]).all() and (out[1, 0, 2:10] == a[1, 0, 0:8]).all()


@nki.jit
def to_all_v(a, meta, counts_known, rdispls):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out[r], nl.multiply(nl.load(a[r]), 0.0))
    ncc.all_to_all_v([a[r]], [out[r]], PAIR, meta[r], recv_counts_known=counts_known,
                     has_rdispls=rdispls)
    return out


def _a2a_meta():
    meta = np.zeros((2, 4, 2), np.uint32)
    meta[0, 0], meta[0, 1] = [2, 5], [0, 4]  # rank 0: a[0][0:2] to 0, a[0][4:9] to 1
    meta[1, 0], meta[1, 1] = [3, 1], [10, 1]  # rank 1: a[1][10:13] to 0, a[1][1:2] to 1
    meta[0, 2], meta[1, 2] = [2, 3], [5, 1]  # receive counts, from rank 0 and rank 1
    return meta


def test_all_to_all_v_packs_in_rank_order():
    a = np.random.rand(2, 1, 16).astype(np.float32)
    out = to_all_v[2](a, _a2a_meta(), True, False)
    np.testing.assert_array_equal(out[0, 0, :5], np.concatenate([a[0, 0, 0:2], a[1, 0, 10:13]]))
    np.testing.assert_array_equal(out[1, 0, :6], np.concatenate([a[0, 0, 4:9], a[1, 0, 1:2]]))
    assert (out[0, 0, 5:] == 0).all() and (out[1, 0, 6:] == 0).all()


def test_all_to_all_v_with_receive_displacements():
    a = np.random.rand(2, 1, 16).astype(np.float32)
    meta = _a2a_meta()
    meta[0, 3], meta[1, 3] = [8, 0], [0, 9]
    out = to_all_v[2](a, meta, False, True)
    assert (out[0, 0, 8:10] == a[0, 0, 0:2]).all() and (out[0, 0, 0:3] == a[1, 0, 10:13]).all()
    assert (out[1, 0, 0:5] == a[0, 0, 4:9]).all() and (out[1, 0, 9:10] == a[1, 0, 1:2]).all()


def test_v_rules():
    a = np.zeros((2, 1, 16), np.float32)
    meta = _a2a_meta()
    meta[0, 2, 1] = 4  # rank 0 expects 4 elements from rank 1, which sends 3
    with pytest.raises(NkiError, match="expects 4 elements") as e:
        to_all_v[2](a, meta, True, False)
    assert e.value.rule == "collective"
    meta = _a2a_meta()
    meta[0, 0, 1] = 20  # more than the source holds
    with pytest.raises(NkiError, match="out of bounds"):
        to_all_v[2](a, meta, False, False)
    with pytest.raises(NkiError) as e:
        to_all_v[2](a, _a2a_meta().astype(np.int32), False, False)
    assert e.value.rule == "collective_metadata"


RING = ncc.ReplicaGroup([[0, 1, 2, 3]])


@nki.jit
def ring_step(a, b, reduce):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    if reduce:
        ncc.collective_permute_implicit_reduce([[a[r]]], [[b[r]]], [[out[r]]], RING, nl.add)
    else:
        ncc.collective_permute_implicit([[a[r]]], [[out[r]]], RING)
    return out


def test_collective_permute_implicit_ring():
    a, b = _rand(4, 8, 8), _rand(4, 8, 8)
    out = ring_step[4](a, b, False)
    out_sum = ring_step[4](a, b, True)
    for r in range(4):
        assert torch.equal(out[r], a[(r - 1) % 4]) and torch.equal(out_sum[r], a[(r - 1) % 4] + b[(r - 1) % 4])


@nki.jit
def processing_rank(a, iteration):
    r = ncc.rank_id()
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    src = ncc.collective_permute_implicit_current_processing_rank_id(iteration, RING)
    nl.store(out[r], nl.load(a[src]))
    return out


@pytest.mark.parametrize("iteration", [0, 1, 3])
def test_current_processing_rank_walks_the_ring_backwards(iteration):
    a = _rand(4, 2, 4)
    out = processing_rank[4](a, iteration)
    for r in range(4):
        assert torch.equal(out[r], a[(r - iteration) % 4])
