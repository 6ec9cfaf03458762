"""nki.lnc: exchange, reduction and synchronisation between the physical
cores of a logical NeuronCore (the programs of a ``kernel[2]`` grid, which
share their ``shared_hbm`` tensors), recorded as collective calls
(torchneuron/nki/collectives.py) that the runtime runs when both programs
arrive (runtime/src/nc/collective.c).

``core_barrier`` and ``sendrecv`` are the calls of the same names in
``nki.isa`` (which keeps them for existing kernels); ``sendrecv`` here has no
``pipe_id``. ``sendrecv_compute`` exchanges tiles and writes
``reduce_op(src, peer's src)`` (``nl.add`` / ``maximum`` / ``minimum``, in
fp32, rounded once into dst's dtype). ``priority`` is accepted and ignored.
"""

from torchneuron.nki import collectives, isa_cores, trace
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail

__all__ = ["core_barrier", "sendrecv", "sendrecv_compute"]


def core_barrier(data, cores=(0, 1), engine=None, name=None, **_):
    """Every core of ``cores`` (the whole grid) waits here until all arrive,
    so writes before it (each core's part of a shared HBM ``data``) are
    visible to every core after it."""
    return isa_cores.core_barrier(data, cores, engine)


def sendrecv(src, dst, send_to_rank, recv_from_rank, dma_engine=None, name=None, priority=None,
             **_):
    """Sends this core's SBUF ``src`` to core ``send_to_rank`` while receiving
    core ``recv_from_rank``'s ``src`` into ``dst`` (same shape and dtype);
    the Nth sendrecv of one core pairs with the Nth of its peer."""
    return isa_cores.sendrecv(src, dst, send_to_rank, recv_from_rank, 0, dma_engine)


def sendrecv_compute(src, dst, send_to_rank, recv_from_rank, reduce_op, name=None, priority=None,
                     **_):
    """Sends ``src`` to core ``send_to_rank`` while receiving core
    ``recv_from_rank``'s, and writes ``reduce_op(src, received)`` (nl.add,
    nl.maximum or nl.minimum, in fp32) to ``dst``: src and dst both in SBUF or
    both in HBM, same shape and dtype, on a grid of two cores."""
    what = "nki.lnc.sendrecv_compute"
    for t, label in ((src, "src"), (dst, "dst")):
        if not isinstance(t, NkiTensor):
            fail(f"{label} must be a tensor (NkiTensor), got {type(t).__name__}", "operand", what)
        if t.on_chip and t.storage.buffer != trace.SBUF:
            fail(f"{label} must be in SBUF or HBM, not PSUM", "collective_memory", what)
    if src.on_chip != dst.on_chip:
        fail("src and dst are both in SBUF or both in HBM, not a mix", "collective_memory", what)
    if src.shape != dst.shape:
        fail(f"src {src.shape} and dst {dst.shape} differ", "shape_mismatch", what)
    if src.dtype != dst.dtype:
        fail(f"src is {src.dtype} but dst is {dst.dtype}", "dtype_mismatch", what)
    code = collectives._reduce_op(reduce_op, what)
    tracer = trace.current()
    if tracer.num_programs != 2:
        fail(f"sendrecv_compute runs on a logical NeuronCore of two cores (kernel[2]), this "
             f"launch has {tracer.num_programs}", "lnc_degree", what)
    for rank, label in ((send_to_rank, "send_to_rank"), (recv_from_rank, "recv_from_rank")):
        if int(rank) not in (0, 1) or int(rank) == tracer.program_id:
            fail(f"{label}={rank} must be the other core of the pair (0 or 1, not "
                 f"{tracer.program_id})", "replica_group", what)
    me, peer = tracer.rank, tracer.rank_base + int(recv_from_rank)
    collectives.emit_call("sendrecv_compute", [
        (collectives.NONE, None, src, 0, 0, 0, 0),
        (collectives.REDUCE, dst, None, 0, 0, collectives._mask([me, peer]), code)], what)
    return dst
