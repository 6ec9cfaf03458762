"""An NKI kernel whose collectives span the ranks of a torch.distributed
group (docs/nki.md, "Across the ranks of a process group").

Each rank launches the same kernel on two cores (kernel[2]) on its own
neuron tensors: four NKI ranks in all, rank = group rank * 2 + core. The
kernel sums every NKI rank's tile with one all_reduce, then each core also
all-gathers the tiles of its column (core 0 of both ranks, core 1 of both
ranks) across the processes. Checked against torch.distributed on CPU.

    python examples/nki/allreduce_ranks.py                      # spawns 2 ranks
    torchrun --nproc-per-node 2 examples/nki/allreduce_ranks.py
"""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.language as nl


@nki.jit
def sum_and_gather(a):
    """a: [2, 128, 64], core p's tile a[p]. Returns (the sum over all four
    NKI ranks, per core; the tiles of the NKI ranks {p, 2 + p} stacked)."""
    p = nl.program_id(0)
    total = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    column = nl.ndarray((2, 2 * a.shape[1], a.shape[2]), a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a[p])
    s = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    ncc.all_reduce([t], [s], ncc.ReplicaGroup([[0, 1, 2, 3]]), nl.add)
    nl.store(total[p], s)
    ncc.all_gather([a[p]], [column[p]], ncc.ReplicaGroup.from_partition_op(4, ncc.rg_partition_op.mod, 2),
                   collective_dim=0)
    return total, column


def run(rank, world, init):
    dist.init_process_group("neuron", init_method=init, rank=rank, world_size=world)
    a = torch.stack([torch.full((128, 64), float(2 * rank + p + 1)) for p in range(2)])
    total, column = nki.distributed(sum_and_gather)[2](a.to("neuron"))
    every = [torch.empty_like(a) for _ in range(world)]
    dist.all_gather(every, a)  # CPU tensors: gloo
    every = torch.cat(every)  # [4, 128, 64] in NKI rank order
    assert torch.equal(total.cpu()[0], every.sum(0)) and torch.equal(total.cpu()[1], every.sum(0))
    for p in range(2):
        assert torch.equal(column.cpu()[p], torch.cat([every[p], every[2 + p]]))
    if rank == 0:
        print(f"rank 0: sum over 4 NKI ranks = {total[0, 0, 0].item()}, "
              f"core 1's column = {column[1, ::128, 0].tolist()}")
    dist.destroy_process_group()


def _spawned(rank, world, init):
    run(rank, world, init)


if __name__ == "__main__":
    if "RANK" in os.environ:  # under torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
    else:
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(_spawned, args=(2, f"file://{d}/store"), nprocs=2)
