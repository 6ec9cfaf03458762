"""torch.distributed on neuron: the c10d backend ``"neuron"``.

``torch.distributed.init_process_group("neuron")`` (any init method:
``env://`` under torchrun, ``tcp://``, ``file://``) gives each rank a group
whose collectives on neuron tensors are ordered on the tensors' current
neuron stream, as NCCL's are on a CUDA stream, and whose CPU tensors go
through gloo. ``init_process_group()`` without a backend picks ``"neuron"``
for neuron tensors and gloo for CPU ones. A rank whose current device is
still the default uses device ``LOCAL_RANK`` (modulo the visible devices)
when the launcher sets it; ``init_process_group(device_id=...)`` or
``torch.neuron.set_device`` before it choose otherwise. Each group runs
its collectives on a neuron stream of its own, which first waits for the
caller's current stream; a Work's ``wait()`` makes the caller's current
stream wait for it. When all ranks run on this host, the bytes of the main
collectives go through a private shared-memory segment
(``TORCHNEURON_DIST_SHM=0`` turns it off); otherwise through gloo (TCP),
reductions as rings whose chunks are reduced by the runtime's kernels, and
all_reduce hierarchically when a host has several ranks (a segment per
host, gloo between the hosts' leaders; ``TORCHNEURON_DIST_HIER=0`` turns it
off). The C++ side is ``torchneuron/csrc/distributed.cpp``.
"""

import datetime
import os
import socket

import torch
import torch.distributed as dist

BACKEND = "neuron"

__all__ = ["BACKEND", "register"]


def _pick_device():
    local = os.environ.get("LOCAL_RANK")
    if local is None or not local.isdigit():
        return
    count = torch.neuron.device_count()
    if count and torch.neuron.current_device() == 0:
        torch.neuron.set_device(int(local) % count)


def _create(store, rank, size, timeout):
    from torchneuron import _C

    _pick_device()
    # Three gloo groups: one carries the neuron collectives gloo runs (from
    # the stream workers), one the rings of our reductions (their sends and
    # receives), one the CPU tensors' collectives (from the calling thread),
    # so that none interleaves with another on one connection.
    def gloo(name):
        return dist.ProcessGroupGloo(dist.PrefixStore(f"neuron/{name}", store), rank, size, timeout)

    # Ranks all on this host move the bytes through a shared-memory segment
    # (unless TORCHNEURON_DIST_SHM=0); the gloo groups carry the rest.
    shm_text = os.environ.get("TORCHNEURON_DIST_SHM", "1")
    if shm_text not in ("0", "1"):
        raise ValueError(f"TORCHNEURON_DIST_SHM={shm_text!r} must be 0 or 1")
    shm = shm_text == "1"
    hier_text = os.environ.get("TORCHNEURON_DIST_HIER", "1")
    if hier_text not in ("0", "1"):
        raise ValueError(f"TORCHNEURON_DIST_HIER={hier_text!r} must be 0 or 1")
    ids = _host_ids(dist.PrefixStore("neuron/hosts", store), rank, size)
    hosts = len(set(ids))
    # A group that spans hosts with several ranks on a host reduces
    # hierarchically: a segment among each host's ranks, a gloo group among
    # the hosts' leaders (each host's lowest rank), then the segment again.
    local = [r for r in range(size) if ids[r] == ids[rank]]
    crowded = any(ids.count(i) > 1 for i in set(ids))
    hier = shm and hier_text == "1" and hosts > 1 and crowded
    leaders = None
    if hier and rank == local[0]:
        firsts = sorted({min(r for r in range(size) if ids[r] == i) for i in set(ids)})
        leaders = dist.ProcessGroupGloo(dist.PrefixStore("neuron/leaders", store), firsts.index(rank), hosts, timeout)
    host_index = min(local)
    return _C._neuron_c10d_backend(gloo("device"), gloo("ring"), gloo("cpu"), rank, size,
                                   dist.PrefixStore("neuron/shm", store), shm,
                                   int(timeout.total_seconds() * 1000), hosts,
                                   dist.PrefixStore(f"neuron/shm/host{host_index}", store),
                                   dist.PrefixStore("neuron/hier", store), local.index(rank),
                                   len(local) if hier else 0, leaders)


def _host_ids(store, rank, size):
    """Each rank's host (the profiler's collective estimates cross EFA when
    there are several, and groups that span hosts reduce hierarchically): a
    host is a kernel boot and a network namespace (the multi-host tests'
    hosts are namespaces)."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        me = f"{socket.gethostname()}|{f.read().strip()}|{os.readlink('/proc/self/ns/net')}"
    store.set(str(rank), me)
    return [store.get(str(r)).decode() for r in range(size)]


def _count_hosts(store, rank, size):
    """The hosts the group's ranks run on."""
    return len(set(_host_ids(store, rank, size)))


def _monitored_barrier(torch_monitored_barrier):
    """torch.distributed.monitored_barrier, letting groups with the neuron
    backend through: torch lets gloo groups alone through, though it is the
    group's CPU backend (ours, which runs gloo's on its CPU group after the
    current stream's work) that the barrier reaches."""

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        c10d = dist.distributed_c10d
        if c10d._rank_not_in_group(group) or BACKEND not in str(dist.get_backend(group)):
            return torch_monitored_barrier(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = c10d._get_default_timeout(dist.Backend.GLOO)
        elif not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=timeout)
        pg = c10d._get_default_group() if group is None else group
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__doc__ = torch_monitored_barrier.__doc__
    return monitored_barrier


def register():
    """Registers the backend with torch.distributed (done when torchneuron
    loads)."""
    if not dist.is_available() or hasattr(dist.Backend, BACKEND.upper()):
        return
    dist.Backend.register_backend(BACKEND, _create, devices=["neuron", "cpu"])
    barrier = _monitored_barrier(dist.distributed_c10d.monitored_barrier)
    dist.monitored_barrier = dist.distributed_c10d.monitored_barrier = barrier
