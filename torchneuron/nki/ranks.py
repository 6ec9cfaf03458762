"""nki.distributed: kernels whose collectives span the ranks of a
torch.distributed process group.

``nki.distributed(kernel, group=None)[grid](...)`` is called by every rank
of ``group`` (the default group if None), each on its own tensors (neuron
tensors, or CPU tensors / NumPy arrays for the host simulator). Each rank
runs ``grid`` programs; the collectives see ``size * grid`` ranks, rank
``group_rank * grid + program_id`` being program ``program_id`` of the
group's rank ``group_rank`` (``nki.collectives.rank_id()``). Replica groups
and ``collective_permute`` pairs name these ranks; ``nl.program_id`` and
``nl.num_programs`` stay the local grid's, as do ``nisa.sendrecv`` peers
and ``nisa.core_barrier`` cores (the cores of one logical NeuronCore).

Before anything runs, the ranks exchange what they are about to do (the
kernel, the grid and each program's collective calls) and refuse a
mismatch on every rank (rule ``collective_mismatch``) instead of hanging.
While the kernel runs, each collective call is one exchange of messages
between the ranks (the runtime's nrt_nc_exchange: where each rank's
programs are, their call's records and staged sources) through a gloo
backend of NKI's own on the group's store; every rank checks the same
facts, so sizes that disagree stop every rank with the same error (rule
``collective``).

A rank that never calls the kernel (its Python code took another branch)
is found at the launch: the ranks first meet on the group's store, and a
rank that waited ``arrival_timeout`` seconds (default
``TORCHNEURON_NKI_ARRIVAL_TIMEOUT``, else 300 s, never longer than the
group's timeout) for the others stops every rank that arrived (and the late
one, when it arrives) with NkiError naming the ranks that did not arrive and
the kernel (rule ``collective_arrival``). The runs' own messages wait up to
the group's timeout (30 minutes by default, or ``timeout=``).
"""

import atexit
import datetime
import hashlib
import os
import pickle

import torch
import torch.distributed as dist

from torchneuron.nki.errors import NkiError

__all__ = ["distributed"]

_contexts = {}


class _Ranks:
    """NKI's gloo backends for one process group: one checks launches on
    the calling thread, one carries the runs' messages (from the stream's
    worker for neuron tensors), so that the two never interleave."""

    def __init__(self, group, timeout):
        c10d = dist.distributed_c10d
        pg = group
        self.rank = dist.get_rank(pg)
        self.size = dist.get_world_size(pg)
        if self.rank < 0:
            raise ValueError("nki.distributed: this process is not a rank of the group")
        store = c10d._world.pg_map[pg][1]
        serial = len(_contexts)
        prefix = f"torchneuron/nki/{serial}"
        self.check_backend = dist.ProcessGroupGloo(dist.PrefixStore(prefix + "/check", store),
                                                   self.rank, self.size, timeout)
        self.run_backend = dist.ProcessGroupGloo(dist.PrefixStore(prefix + "/run", store),
                                                 self.rank, self.size, timeout)
        self.timeout = timeout.total_seconds()
        self.arrivals = dist.PrefixStore(prefix + "/arrive", store)
        self.launches = 0

    def arrive(self, kernel, grid, arrival_timeout):
        """Every rank arrives at this launch (the group's next) within
        arrival_timeout seconds, else NkiError on every rank that did (rule
        collective_arrival), naming the ranks that did not. Launch n's
        outcome is decided once, on the store: the last rank to arrive sets
        it to "go", a rank that waited too long to what it waited for (a
        compare-and-set: whichever comes first holds, so every rank, a late
        one too, reads the same)."""
        label = f"{kernel.fn.__qualname__}[{grid}]"
        n = self.launches
        self.launches += 1
        key = f"{n}/"
        self.arrivals.set(key + f"rank{self.rank}", label)
        if self.arrivals.add(key + "count", 1) == self.size:
            verdict = self.arrivals.compare_set(key + "status", "", "go")
        else:
            try:
                self.arrivals.wait([key + "status"], datetime.timedelta(seconds=arrival_timeout))
                verdict = self.arrivals.get(key + "status")
            except RuntimeError:  # the wait timed out (DistStoreError)
                missing = [r for r in range(self.size)
                           if not self.arrivals.check([key + f"rank{r}"])]
                who = ", ".join(str(r) for r in missing) or "?"
                text = (f"rank{'s' if len(missing) > 1 else ''} {who} of {self.size} did not "
                        f"arrive at {label} (launch {n} of the group's NKI kernels) within "
                        f"{arrival_timeout:g} s; rank {self.rank} waited")
                verdict = self.arrivals.compare_set(key + "status", "", text)
        verdict = verdict.decode() if isinstance(verdict, bytes) else str(verdict)
        if verdict != "go":
            raise NkiError(f"{kernel.label}: nki.distributed: {verdict}",
                           rule="collective_arrival")
        if self.rank == 0 and n > 0:  # every rank has read launch n - 1's outcome
            previous = f"{n - 1}/"
            try:
                for name in ["count", "status"] + [f"rank{r}" for r in range(self.size)]:
                    self.arrivals.delete_key(previous + name)
            except (RuntimeError, NotImplementedError):
                pass

    def gather(self, value):
        """Every rank's value (pickled), in rank order."""
        data = torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8)
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(self.size)]
        self.check_backend.allgather([lengths], [torch.tensor([data.numel()])]).wait()
        longest = max(int(t) for t in lengths)
        mine = torch.zeros(longest, dtype=torch.uint8)
        mine[:data.numel()] = data
        everyone = [torch.empty(longest, dtype=torch.uint8) for _ in range(self.size)]
        self.check_backend.allgather([everyone], [mine]).wait()
        return [pickle.loads(t[:int(n)].numpy().tobytes()) for t, n in zip(everyone, lengths)]

    def same_everywhere(self, value):
        """Whether every rank has the same (pickled) value: one all-gather of
        a 32-byte digest, the common case's whole cost."""
        digest = hashlib.sha256(pickle.dumps(value)).digest()
        mine = torch.frombuffer(bytearray(digest), dtype=torch.uint8)
        everyone = [torch.empty(32, dtype=torch.uint8) for _ in range(self.size)]
        self.check_backend.allgather([everyone], [mine]).wait()
        return all(torch.equal(t, mine) for t in everyone)

    def agree(self, kernel, grid, programs, failure=None):
        """The ranks launch the same kernel on the same grid and their
        programs make the same collective calls, else NkiError (rule
        collective_mismatch) on every rank. A rank whose tracing failed
        (failure; it re-raises its own error afterwards) says so, and the
        others stop too (rule collective)."""
        from torchneuron.nki.jit import _check_calls

        name = kernel.fn.__qualname__
        if failure is not None:
            mine = (name, grid, None, f"{type(failure).__name__}: {failure}")
        else:
            mine = (name, grid, [p.tracer.collective_calls for p in programs], None)
        if self.same_everywhere(mine):
            return
        every = self.gather(mine)
        for rank, (their_name, their_grid, _calls, _text) in enumerate(every):
            if their_name != name or their_grid != grid:
                raise NkiError(f"{kernel.label}: nki.distributed: rank {self.rank} launches "
                               f"{name}[{grid}] but rank {rank} launches "
                               f"{their_name}[{their_grid}]: on hardware this would deadlock",
                               rule="collective_mismatch")
        if failure is not None:
            return
        for rank, (_name, _grid, _calls, text) in enumerate(every):
            if text is not None:
                raise NkiError(f"{kernel.label}: nki.distributed: rank {rank} stopped before "
                               f"the launch: {text}", rule="collective")
        calls = [c for _name, _grid, per_rank, _text in every for c in per_rank]
        _check_calls(kernel, programs, calls, who="rank")


class DistributedKernel:
    """A kernel launched on every rank of a process group (see the module
    docstring): ``nki.distributed(kernel)[grid](...)``."""

    def __init__(self, kernel, group=None, timeout=None, arrival_timeout=None):
        from torchneuron.nki.jit import Kernel

        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.group = group
        self.timeout = timeout
        self.arrival_timeout = arrival_timeout

    def _arrival_timeout(self, ranks):
        t = self.arrival_timeout
        if t is None:
            text = os.environ.get("TORCHNEURON_NKI_ARRIVAL_TIMEOUT", "")
            try:
                t = float(text) if text else 300.0
            except ValueError:
                raise ValueError("TORCHNEURON_NKI_ARRIVAL_TIMEOUT must be a number of seconds, "
                                 f"got {text!r}") from None
        if isinstance(t, datetime.timedelta):
            t = t.total_seconds()
        if not t > 0:
            raise ValueError(f"nki.distributed: arrival_timeout must be positive, got {t}")
        return min(float(t), ranks.timeout)

    def _ranks(self):
        if not dist.is_initialized():
            raise RuntimeError("nki.distributed: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first)")
        c10d = dist.distributed_c10d
        pg = self.group if self.group is not None else c10d._get_default_group()
        for stale in [k for k, (g, _) in _contexts.items() if g not in c10d._world.pg_map]:
            del _contexts[stale]  # its group was destroyed
        key = id(pg)
        ctx = _contexts.get(key)
        if ctx is None or ctx[0] is not pg:
            timeout = self.timeout or dist.default_pg_timeout
            if not isinstance(timeout, datetime.timedelta):
                timeout = datetime.timedelta(seconds=timeout)
            ctx = (pg, _Ranks(pg, timeout))
            _contexts[key] = ctx
        return ctx[1]

    def __getitem__(self, grid):
        grid = grid if isinstance(grid, tuple) else (grid,)
        if len(grid) != 1 or int(grid[0]) < 1:
            raise ValueError(f"NKI kernels launch on a 1-D grid of programs, got {grid}")
        def launch(*args, **kwargs):
            ranks = self._ranks()
            ranks.arrive(self.kernel, int(grid[0]), self._arrival_timeout(ranks))
            return self.kernel._launch(int(grid[0]), *args, _ranks=ranks, **kwargs)

        return launch

    def __call__(self, *args, **kwargs):
        return self[1](*args, **kwargs)


def distributed(kernel, group=None, timeout=None, arrival_timeout=None):
    """The kernel launched by every rank of ``group`` (default: the default
    process group), its collectives spanning the ranks: rank
    ``group_rank * grid + program_id`` (see torchneuron/nki/ranks.py).
    timeout: seconds the runs' messages wait (the group's by default);
    arrival_timeout: seconds a rank waits at the launch for the others
    (TORCHNEURON_NKI_ARRIVAL_TIMEOUT, else 300, at most timeout)."""
    return DistributedKernel(kernel, group, timeout, arrival_timeout)


def forget():
    """Drops NKI's gloo backends. Done at exit, while the interpreter is
    whole: left to its final teardown, a backend's threads could outlive
    what they need and abort the process."""
    _contexts.clear()


atexit.register(forget)
