"""Estimated Trainium timing of a kernel from the simulator's cost model.

``nki.benchmark(kernel)(*args)`` traces the kernel for these arguments
(nothing runs) and returns an Estimate: the kernel's estimated latency on
the configured generation, each engine's busy time, and the per-instruction
timeline, which ``save_trace`` writes as a Chrome/Perfetto trace. These are
estimates from published per-instruction costs, engine clocks and DMA
bandwidths, not measurements of hardware.

A kernel whose collectives span processes (``nki.benchmark(nki.distributed(
kernel))``, or ``nki.benchmark(kernel, ranks=N)`` without a process group)
is estimated as one rank of the group: the bytes its collectives receive
from other ranks cross the link (NeuronLink, or EFA with ``link="efa"``),
shown as ``link_us`` / ``link_bytes`` and on a "link" lane of the trace.
"""

import json

import torch

from torchneuron.nki import trace
from torchneuron.nki.jit import Kernel

_DMA_QUEUE = trace.DMA_ENGINE
_LINK_QUEUE = trace.DMA_ENGINE + 16  # NRT_NC_LINK_QUEUE
_LINKS = {"neuronlink": "NeuronLink", "efa": "EFA"}


def _lane(queue, link):
    if queue == _LINK_QUEUE:
        return f"link ({_LINKS[link]})"
    if queue < _DMA_QUEUE:
        return trace.ENGINE_NAMES[queue]
    return f"DMA queue {queue - _DMA_QUEUE}"


class Estimate:
    """Estimated device time of one launch (all programs of a grid run on
    their own cores in parallel: the latency is the slowest one's)."""

    def __init__(self, target, programs, link="neuronlink"):
        self.target = target
        self.link = link
        self._programs = programs  # list of (Program, estimate dict)
        self.latency_us = max(e["total_ns"] for _, e in programs) / 1e3
        self.busy_us = {}
        self.instructions = {}
        for i, name in enumerate(trace.ENGINE_NAMES):
            self.busy_us[name] = max(e["busy_ns"][i] for _, e in programs) / 1e3
            self.instructions[name] = max(e["instructions"][i] for _, e in programs)
        self.dma_bytes = max(e["dma_bytes"] for _, e in programs)
        # Collectives across processes: bytes received from other ranks and
        # the link's busy time for them (0 within one process).
        self.link_bytes = max(e["link_bytes"] for _, e in programs)
        self.link_us = max(e["link_ns"] for _, e in programs) / 1e3

    @property
    def utilization(self):
        """Busy fraction of each engine over the estimated latency."""
        total = self.latency_us or 1.0
        return {k: v / total for k, v in self.busy_us.items()}

    def __repr__(self):
        busy = ", ".join(f"{k} {v:.2f}" for k, v in self.busy_us.items())
        return (f"Estimate({self.target}: latency {self.latency_us:.2f} us (estimated); "
                f"busy us: {busy})")

    def timeline(self, program=0):
        """Per-instruction estimate of one program (grid index): a list in
        program order of dicts with the instruction's name, engine, lane
        (the engine, or "DMA queue q"), start_us, end_us and source line."""
        prog, est = self._programs[program]
        rows = []
        for i, inst in enumerate(prog.tracer.instructions):
            queue = est["queue"][i]
            filename, line = inst.location
            rows.append({
                "index": i, "name": inst.name.rsplit(".", 1)[-1],
                "engine": trace.ENGINE_NAMES[min(queue, _DMA_QUEUE)],
                "lane": _lane(queue, self.link),
                "start_us": est["start_ns"][i] / 1e3, "end_us": est["end_ns"][i] / 1e3,
                "source": f"{filename}:{line}",
            })
        return rows

    def trace_events(self):
        """Chrome trace events: one process per program, one thread per
        engine (DMA queues numbered after the engines)."""
        events = []
        for pid, (program, est) in enumerate(self._programs):
            lanes = sorted(set(est["queue"]))
            for queue in lanes:
                lane = _lane(queue, self.link)
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": queue,
                               "args": {"name": lane}})
            for i, inst in enumerate(program.tracer.instructions):
                filename, line = inst.location
                events.append({
                    "name": inst.name.rsplit(".", 1)[-1], "ph": "X", "pid": pid,
                    "tid": est["queue"][i],
                    "ts": est["start_ns"][i] / 1e3,
                    "dur": (est["end_ns"][i] - est["start_ns"][i]) / 1e3,
                    "args": {"source": f"{filename}:{line}", "index": i},
                })
        return events

    def save_trace(self, path):
        """Writes the estimated engine timeline as Chrome trace JSON."""
        with open(path, "w") as f:
            json.dump({"traceEvents": self.trace_events(), "displayTimeUnit": "ns",
                       "otherData": {"note": "estimated timeline (cost model), not measured",
                                     "target": self.target}}, f)
        return path


def benchmark(kernel, save_trace=None, ranks=None, rank=0, link="neuronlink", **_):
    """Returns f(*args) -> Estimate for the kernel with those arguments.

    For collectives across processes: ``kernel`` an ``nki.distributed``
    kernel (estimated as this process's rank of its group, when
    torch.distributed is initialised), or ``ranks=N`` (N processes, this
    one being ``rank``); ``link`` is what joins them: "neuronlink" (chips
    of one instance) or "efa" (instances)."""
    from torchneuron.nki.ranks import DistributedKernel

    if link not in _LINKS:
        raise ValueError(f"nki.benchmark: link is 'neuronlink' or 'efa', got {link!r}")
    if isinstance(kernel, DistributedKernel):
        if ranks is None:
            import torch.distributed as dist

            if dist.is_initialized():
                ranks, rank = dist.get_world_size(kernel.group), dist.get_rank(kernel.group)
        kernel = kernel.kernel
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    processes = 1 if ranks is None else int(ranks)
    if processes < 1 or not 0 <= int(rank) < processes:
        raise ValueError(f"nki.benchmark: rank {rank} of {processes} processes")

    def estimate(*args, grid=1, **kwargs):
        device = 0
        for v in list(args) + list(kwargs.values()):
            if isinstance(v, torch.Tensor) and v.device.type == "neuron":
                device = v.device.index or 0
        where = (0, None) if ranks is None else (int(rank) * grid, processes * grid, link)
        programs = []
        for pid in range(grid):
            program = kernel.specialise(args, kwargs, pid, grid, device, where)
            programs.append((program, program.estimate()))
        target = torch.neuron.get_device_properties(device).target
        result = Estimate(target, programs, link)
        if save_trace:
            result.save_trace(save_trace)
        return result

    return estimate
