"""nki.isa.core_barrier and nki.isa.sendrecv: synchronisation and
point-to-point exchange between the cores of a logical NeuronCore (the
programs of a ``kernel[2]`` grid), recorded as collective calls
(torchneuron/nki/collectives.py)."""

from torchneuron.nki import collectives, trace
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


def core_barrier(data, cores=(0, 1), engine=None, **_):
    """Every core in ``cores`` waits here until all of them arrive, so writes
    before the barrier (for example each core's half of a shared HBM ``data``)
    are visible to every core after it."""
    name = "nki.isa.core_barrier"
    if not isinstance(data, NkiTensor):
        fail(f"data must be a tensor (NkiTensor), got {type(data).__name__}", "operand", name)
    tracer = trace.current()
    ranks = sorted(int(c) for c in cores)
    if ranks != list(range(tracer.num_programs)):
        fail(f"cores={tuple(cores)} must name every core of the launch grid "
             f"(0..{tracer.num_programs - 1})", "replica_group", name)
    collectives.emit_call("core_barrier", [], name)
    return data


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id=0, dma_engine=None, **_):
    """Sends this core's SBUF ``src`` to core ``send_to_rank`` while receiving
    core ``recv_from_rank``'s ``src`` into ``dst`` (same shape and dtype);
    the Nth sendrecv of one core pairs with the Nth of its peer."""
    name = "nki.isa.sendrecv"
    for t, what in ((src, "src"), (dst, "dst")):
        if not isinstance(t, NkiTensor):
            fail(f"{what} must be a tensor (NkiTensor), got {type(t).__name__}", "operand", name)
        if t.storage.buffer != trace.SBUF:
            fail(f"{what} must be in SBUF", "collective_memory", name)
    if src.shape != dst.shape:
        fail(f"src {src.shape} and dst {dst.shape} differ", "shape_mismatch", name)
    if src.dtype != dst.dtype:
        fail(f"src is {src.dtype} but dst is {dst.dtype}", "dtype_mismatch", name)
    n = trace.current().num_programs
    for rank, what in ((send_to_rank, "send_to_rank"), (recv_from_rank, "recv_from_rank")):
        if not 0 <= int(rank) < n:
            fail(f"{what}={rank} is not a core of the launch grid (0..{n - 1})",
                 "replica_group", name)
    collectives.emit_call("sendrecv", [
        (collectives.NONE, None, src, 0, 0, 0, 0),
        (collectives.COPY, dst, None, trace.current().rank_base + int(recv_from_rank), 0, 0, 0)],
        name)
    return dst
