"""nki.collectives: collectives across the cores of a logical NeuronCore.

The programs of a launch grid (``kernel[2](...)``: program ids 0 and 1) are
the ranks. Each call records one collective call: consecutive COLLECTIVE
instructions of one call number, each with an optional source (staged when
every program has arrived) and an optional destination (a copy of one peer's
staged source, or a reduction over a group's). The runtime runs the grid's
programs interleaved and meets them at every call (runtime/src/nc/collective.c);
programs whose calls disagree stop with an error naming the kernel and call.
"""

from enum import Enum

from torchneuron.nki import dtypes, trace
from torchneuron.nki.ops import alu_code
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail

__all__ = ["ReplicaGroup", "all_gather", "all_gather_v", "all_reduce", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_current_processing_rank_id",
           "collective_permute_implicit_reduce", "rank_id", "reduce_scatter", "rg_partition_op"]

# The call kinds, numbered as runtime/src/nc/collective.c names them.
KINDS = {"core_barrier": 1, "sendrecv": 2, "all_reduce": 3, "all_gather": 4, "reduce_scatter": 5,
         "all_to_all": 6, "collective_permute": 7, "all_gather_v": 8, "all_to_all_v": 9,
         "collective_permute_implicit": 10, "collective_permute_implicit_reduce": 11,
         "sendrecv_compute": 12}
NONE, COPY, REDUCE, PAIR_REDUCE, GATHER_V, ALLTOALL_V = range(6)
RDISPLS, RCOUNTS = 1, 2
# Reduction masks are carried in a double: at most 52 programs in a grid with collectives.
MAX_RANKS = 52


class rg_partition_op(Enum):
    """How ReplicaGroup.from_partition_op maps a rank to its rank-list."""
    bitwise_and = "bitwise_and"
    div = "div"
    mod = "mod"


class ReplicaGroup:
    """The ranks a collective runs on, as a list of rank-lists: the collective
    runs independently within each list; a rank is in at most one list."""

    def __init__(self, groups):
        try:
            self.groups = [[int(r) for r in g] for g in groups]
        except TypeError:
            raise TypeError(f"a ReplicaGroup is a list of rank lists, got {groups!r}") from None

    @staticmethod
    def from_partition_op(world_size, op, operand):
        """Ranks [0, world_size) grouped by op(rank, operand) (bitwise_and, div, mod)."""
        op = rg_partition_op(op) if not isinstance(op, rg_partition_op) else op
        key = {rg_partition_op.bitwise_and: lambda r: r & operand,
               rg_partition_op.div: lambda r: r // operand,
               rg_partition_op.mod: lambda r: r % operand}[op]
        lists = {}
        for r in range(int(world_size)):
            lists.setdefault(key(r), []).append(r)
        return ReplicaGroup([lists[k] for k in sorted(lists)])

    def __eq__(self, other):
        return isinstance(other, ReplicaGroup) and self.groups == other.groups

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


def rank_id():
    """The rank of the current program: its program id in the launch grid
    (under nki.distributed, the group rank times the grid plus the program id)."""
    return trace.current().rank


def _my_group(replica_group, name):
    """(ranks of this program's rank-list in order, this program's position)."""
    tracer = trace.current()
    if not isinstance(replica_group, ReplicaGroup):
        replica_group = ReplicaGroup(replica_group)
    n = tracer.world
    if n > MAX_RANKS:
        fail(f"collectives run on at most {MAX_RANKS} ranks, this launch has {n}",
             "replica_group", name)
    seen = set()
    for g in replica_group.groups:
        if not g:
            fail(f"{replica_group} has an empty rank list", "replica_group", name)
        for r in g:
            if not 0 <= r < n:
                fail(f"{replica_group} names rank {r}, but the launch has ranks 0..{n - 1}",
                     "replica_group", name)
            if r in seen:
                fail(f"{replica_group} names rank {r} twice (a rank is in at most one list)",
                     "replica_group", name)
            seen.add(r)
    me = tracer.rank
    for g in replica_group.groups:
        if me in g:
            return g, g.index(me)
    fail(f"rank {me} is in no list of {replica_group}", "replica_group", name)


def _tensors(values, what, name):
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        fail(f"{what} is empty", "operand", name)
    for v in values:
        if not isinstance(v, NkiTensor):
            fail(f"{what} must hold tensors (NkiTensor), got {type(v).__name__}", "operand", name)
    return values


def _pairs(srcs, dsts, name, hbm_only=False):
    srcs, dsts = _tensors(srcs, "srcs", name), _tensors(dsts, "dsts", name)
    if len(srcs) != len(dsts):
        fail(f"srcs has {len(srcs)} tensors, dsts {len(dsts)}", "operand", name)
    places = {t.on_chip for t in srcs + dsts}
    if len(places) > 1:
        fail("tensors are all in HBM or all in SBUF, not a mix", "collective_memory", name)
    on_chip = places.pop()
    if on_chip and (hbm_only or len(srcs) > 1):
        what = "this collective" if hbm_only else "coalesced collectives (several tensors)"
        fail(f"{what} takes HBM tensors only", "collective_memory", name)
    for t in srcs + dsts:
        if t.on_chip and t.storage.buffer != trace.SBUF:
            fail("collective tensors are in HBM or SBUF (not PSUM)", "collective_memory", name)
    for s, d in zip(srcs, dsts):
        if s.dtype != d.dtype:
            fail(f"src is {s.dtype} but dst is {d.dtype}: collectives do not convert",
                 "dtype_mismatch", name)
    return srcs, dsts


def _reduce_op(op, name):
    try:
        code = alu_code(op)
    except (KeyError, TypeError):
        code = None
    if code in (alu_code("add"), alu_code("minimum"), alu_code("maximum")):
        return code
    fail(f"op must be nl.add, nl.minimum or nl.maximum, got {op!r}", "collective_op", name)


def _check_dim(t, dim, name):
    if not isinstance(dim, int) or not 0 <= dim < t.ndim:
        fail(f"collective_dim {dim} is out of range for a {t.ndim}-d tensor", "collective_dim", name)


def _chunk(t, dim, k, n, name):
    """Chunk k of n of t along dim."""
    _check_dim(t, dim, name)
    if t.shape[dim] % n:
        fail(f"dim {dim} of {t.shape} does not split into {n} equal chunks", "shape_mismatch", name)
    c = t.shape[dim] // n
    index = [slice(None)] * t.ndim
    index[dim] = slice(k * c, (k + 1) * c)
    return t[tuple(index)]


def _rec(t, name):
    return trace.NO_AP if t is None else t.record(name=name)[0]


def emit_call(kind, entries, name):
    """Records one collective call: entries of (action, dst, src, peer, slot,
    mask, op[, flags]) (runtime/include/neuronrt/nc.h, nrt_nc_collective_action)."""
    tracer = trace.current()
    call = len(tracer.collective_calls)
    tracer.collective_calls.append((kind, trace.caller_location()))
    if not entries:
        entries = [(NONE, None, None, 0, 0, 0, 0)]
    for action, dst, src, peer, slot, mask, op, *flags in entries:
        tracer.emit(name, trace.COLLECTIVE, trace.DMA_ENGINE, [_rec(dst, name), _rec(src, name)],
                    func=(action, op, KINDS[kind]), flags=flags[0] if flags else 0,
                    imm=(mask, peer, slot, call),
                    remote=_remote(tracer, action, dst, peer, mask))


REMOTE_EFA = 0x10000  # runtime/include/neuronrt/nc.h, NRT_NC_REMOTE_EFA


def _remote(tracer, action, dst, peer, mask):
    """The cost model's count of an instruction's contributions from other
    processes' ranks (nrt_nc_inst.remote), with the link they cross."""
    if dst is None or action == NONE:
        return 0
    if action == REDUCE:
        m = int(mask)
        n = sum(1 for r in range(tracer.world) if (m >> r) & 1 and tracer.is_remote(r))
    else:
        n = (2 if action == PAIR_REDUCE else 1) if tracer.is_remote(int(peer)) else 0
    return n | (REMOTE_EFA if n and tracer.link == "efa" else 0)


def _mask(ranks):
    return float(sum(1 << r for r in ranks))


def all_reduce(srcs, dsts, replica_group, op, **_):
    """dsts[i] on every rank of a rank-list = op (nl.add / minimum / maximum, in
    fp32, lowest rank first) over the list's srcs[i]."""
    name = "nki.collectives.all_reduce"
    srcs, dsts = _pairs(srcs, dsts, name)
    ranks, _pos = _my_group(replica_group, name)
    code = _reduce_op(op, name)
    for s, d in zip(srcs, dsts):
        if s.shape != d.shape:
            fail(f"src {s.shape} and dst {d.shape} differ", "shape_mismatch", name)
    emit_call("all_reduce", [(REDUCE, d, s, 0, i, _mask(ranks), code)
                             for i, (s, d) in enumerate(zip(srcs, dsts))], name)


def all_gather(srcs, dsts, replica_group, collective_dim, **_):
    """dsts[i] = the rank-list's srcs[i] concatenated along collective_dim, in
    rank-list order."""
    name = "nki.collectives.all_gather"
    srcs, dsts = _pairs(srcs, dsts, name)
    ranks, _pos = _my_group(replica_group, name)
    n = len(ranks)
    entries = [(NONE, None, s, 0, 0, 0, 0) for s in srcs]
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        _check_dim(s, collective_dim, name)
        want = list(s.shape)
        if 0 <= collective_dim < len(want):
            want[collective_dim] *= n
        if tuple(want) != d.shape:
            fail(f"dst {d.shape} must be src {s.shape} with dim {collective_dim} times {n}",
                 "shape_mismatch", name)
        entries += [(COPY, _chunk(d, collective_dim, k, n, name), None, ranks[k], i, 0, 0)
                    for k in range(n)]
    emit_call("all_gather", entries, name)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, **_):
    """dsts[i] on the rank at position j of its rank-list = op over the list of
    chunk j of srcs[i] split into equal chunks along collective_dim."""
    name = "nki.collectives.reduce_scatter"
    srcs, dsts = _pairs(srcs, dsts, name)
    ranks, pos = _my_group(replica_group, name)
    code = _reduce_op(op, name)
    n = len(ranks)
    entries = []
    for s, d in zip(srcs, dsts):
        if _chunk(s, collective_dim, 0, n, name).shape != d.shape:
            fail(f"dst {d.shape} must be src {s.shape} split in {n} along dim {collective_dim}",
                 "shape_mismatch", name)
        entries += [(NONE, None, _chunk(s, collective_dim, k, n, name), 0, 0, 0, 0)
                    for k in range(n)]
    entries += [(REDUCE, d, None, 0, i * n + pos, _mask(ranks), code) for i, d in enumerate(dsts)]
    emit_call("reduce_scatter", entries, name)


def all_to_all(srcs, dsts, replica_group, collective_dim, **_):
    """Chunk k (along collective_dim) of dsts[i] on the rank at position j =
    chunk j of srcs[i] on the rank at position k of the rank-list."""
    name = "nki.collectives.all_to_all"
    srcs, dsts = _pairs(srcs, dsts, name)
    ranks, pos = _my_group(replica_group, name)
    n = len(ranks)
    entries, receives = [], []
    for i, (s, d) in enumerate(zip(srcs, dsts)):
        if s.shape != d.shape:
            fail(f"src {s.shape} and dst {d.shape} differ", "shape_mismatch", name)
        entries += [(NONE, None, _chunk(s, collective_dim, k, n, name), 0, 0, 0, 0)
                    for k in range(n)]
        receives += [(COPY, _chunk(d, collective_dim, k, n, name), None, ranks[k], i * n + pos,
                      0, 0) for k in range(n)]
    emit_call("all_to_all", entries + receives, name)


def collective_permute(srcs, dsts, source_target_pairs, **_):
    """For each (source, target) pair, the target's dst = the source's src; a
    rank that is no target keeps its dst. HBM tensors, one each."""
    name = "nki.collectives.collective_permute"
    srcs, dsts = _pairs(srcs, dsts, name, hbm_only=True)
    if len(srcs) != 1:
        fail("collective_permute takes exactly one src and one dst", "operand", name)
    s, d = srcs[0], dsts[0]
    if s.shape != d.shape:
        fail(f"src {s.shape} and dst {d.shape} differ", "shape_mismatch", name)
    tracer = trace.current()
    n = tracer.world
    sources, targets = set(), set()
    for pair in source_target_pairs:
        a, b = (int(x) for x in pair)
        if not (0 <= a < n and 0 <= b < n):
            fail(f"pair {pair} names a rank outside 0..{n - 1}", "replica_group", name)
        if a in sources or b in targets:
            fail(f"source_target_pairs {list(source_target_pairs)}: a rank sends and receives "
                 "at most once", "replica_group", name)
        sources.add(a)
        targets.add(b)
    entries = [(NONE, None, s, 0, 0, 0, 0)]
    me = tracer.rank
    entries += [(COPY, d, None, int(a), 0, 0, 0) for a, b in source_target_pairs if int(b) == me]
    emit_call("collective_permute", entries, name)


# ---- variable-length forms (counts read while the kernel runs) ------------------


def _v_operands(srcs, dsts, metadata_tensor, recv_counts_known, has_rdispls, name):
    srcs, dsts = _pairs(srcs, dsts, name, hbm_only=True)
    if len(srcs) != 1:
        fail("the _v collectives take exactly one src and one dst", "operand", name)
    m = metadata_tensor
    n = trace.current().world
    rows = 4 if has_rdispls else (3 if recv_counts_known else 2)
    if not isinstance(m, NkiTensor) or m.on_chip or m.dtype != dtypes.uint32 or m.ndim != 2 \
            or m.shape[1] != n or m.shape[0] < rows:
        fail(f"metadata_tensor must be a uint32 HBM tensor of shape ({rows}, {n}) (rows: send "
             "counts, send displacements, receive counts, receive displacements; one column "
             "per rank)", "collective_metadata", name)
    flags = (RDISPLS if has_rdispls else 0) | (RCOUNTS if recv_counts_known else 0)
    return srcs[0], dsts[0], m, flags


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, **_):
    """Flat buffers: each rank sends src[displ : displ + count] (metadata rows 0
    and 1, column 0, read while the kernel runs) to every rank of its list,
    where it lands at slot j (the sender's position) of dst split into equal
    slots, or at the receiver's row-3 displacement with ``has_rdispls``."""
    name = "nki.collectives.all_gather_v"
    src, dst, meta, flags = _v_operands(srcs, dsts, metadata_tensor, recv_counts_known,
                                        has_rdispls, name)
    ranks, _pos = _my_group(replica_group, name)
    entries = [(NONE, None, src, 0, 0, 0, 0), (NONE, None, meta, 0, 0, 0, 0)]
    entries += [(GATHER_V, dst, None, peer, 0, len(ranks), k, flags)
                for k, peer in enumerate(ranks)]
    emit_call("all_gather_v", entries, name)


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, **_):
    """Flat buffers: rank s sends src[displ[r] : displ[r] + count[r]] (its
    metadata rows 0 and 1, column r, read while the kernel runs) to rank r,
    which packs what it receives in rank-list order (or at its row-3
    displacements with ``has_rdispls``; row 2 checks the counts)."""
    name = "nki.collectives.all_to_all_v"
    src, dst, meta, flags = _v_operands(srcs, dsts, metadata_tensor, recv_counts_known,
                                        has_rdispls, name)
    ranks, _pos = _my_group(replica_group, name)
    entries = [(NONE, None, src, 0, 0, 0, 0), (NONE, None, meta, 0, 0, 0, 0)]
    entries += [(ALLTOALL_V, dst, None, peer, 0, len(ranks), 0, flags) for peer in ranks]
    emit_call("all_to_all_v", entries, name)


# ---- rings (the implicit forms) --------------------------------------------------


def _channels(by_channel, what, name):
    lists = list(by_channel)
    if not lists:
        fail(f"{what} has no channel", "operand", name)
    out = []
    for inner in lists:
        inner = _tensors(inner, what, name)
        if len(inner) != 1:
            fail(f"each channel of {what} holds exactly one tensor", "operand", name)
        out.append(inner[0])
    return out


def _ring_predecessor(replica_group, name):
    ranks, pos = _my_group(replica_group, name)
    return ranks[(pos - 1) % len(ranks)]


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group,
                                channel_ids=(0,), **_):
    """A ring in rank-list order: each rank sends its src of every channel to
    its successor and receives its predecessor's into dst."""
    name = "nki.collectives.collective_permute_implicit"
    srcs = _channels(srcs_by_channel, "srcs_by_channel", name)
    dsts = _channels(dsts_by_channel, "dsts_by_channel", name)
    srcs, dsts = _pairs(srcs, dsts, name)
    for s, d in zip(srcs, dsts):
        if s.shape != d.shape:
            fail(f"src {s.shape} and dst {d.shape} differ", "shape_mismatch", name)
    pred = _ring_predecessor(replica_group, name)
    entries = [(NONE, None, s, 0, 0, 0, 0) for s in srcs]
    entries += [(COPY, d, None, pred, c, 0, 0) for c, d in enumerate(dsts)]
    emit_call("collective_permute_implicit", entries, name)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel,
                                       replica_group, op, channel_ids=(0,), **_):
    """A ring in rank-list order: each rank's dst = op(srcs0, srcs1) of its
    predecessor (op nl.add / minimum / maximum, in fp32)."""
    name = "nki.collectives.collective_permute_implicit_reduce"
    srcs0 = _channels(srcs0_by_channel, "srcs0_by_channel", name)
    srcs1 = _channels(srcs1_by_channel, "srcs1_by_channel", name)
    dsts = _channels(dsts_by_channel, "dsts_by_channel", name)
    if not len(srcs0) == len(srcs1) == len(dsts):
        fail("srcs0, srcs1 and dsts need the same number of channels", "operand", name)
    code = _reduce_op(op, name)
    _pairs(srcs0, dsts, name)
    _pairs(srcs1, dsts, name)
    for a, b, d in zip(srcs0, srcs1, dsts):
        if not a.shape == b.shape == d.shape:
            fail(f"srcs0 {a.shape}, srcs1 {b.shape} and dst {d.shape} differ", "shape_mismatch",
                 name)
    pred = _ring_predecessor(replica_group, name)
    entries = []
    for a, b in zip(srcs0, srcs1):
        entries += [(NONE, None, a, 0, 0, 0, 0), (NONE, None, b, 0, 0, 0, 0)]
    entries += [(PAIR_REDUCE, d, None, pred, 2 * c, 0, code) for c, d in enumerate(dsts)]
    emit_call("collective_permute_implicit_reduce", entries, name)


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group,
                                                           channel_id=0, num_channels=1, **_):
    """The rank whose data a ring step works on: this rank at iteration 0,
    then its predecessors in turn. A trace-time int (the ring is fixed)."""
    name = "nki.collectives.collective_permute_implicit_current_processing_rank_id"
    ranks, pos = _my_group(replica_group, name)
    return ranks[(pos - int(iteration_id)) % len(ranks)]
