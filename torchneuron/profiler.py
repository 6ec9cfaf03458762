"""Summaries of a ``torch.profiler`` profile of neuron work.

``torch.profiler.profile(activities=[ProfilerActivity.CPU,
ProfilerActivity.PrivateUse1])`` records, through the neuron Kineto plugin,
every kernel the streams ran, linked to the CPU op that launched it, with a
roofline estimate of its time on the configured Trainium target
(``NEURON_PLATFORM_TARGET_OVERRIDE``). :func:`summary` turns that into a
table per op: calls, host time, measured device time, estimated device time
and whether the estimate is compute-, memory- or link-bound (collectives:
their transfers over NeuronLink, or EFA between hosts).

The estimate is a model, not a measurement: bytes moved against the
target's HBM bandwidth and work against its Tensor/Vector/Scalar engine
rates (the figures the NKI cost model uses); see docs/profiling.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.autograd import DeviceType

from torchneuron import _C

__all__ = ["OpEstimate", "device_events", "estimates", "records", "summary", "target"]


def target() -> str:
    """The Trainium target the estimates are for (``"trn1"``, ``"trn2"``, ...)."""
    return _C._roofline_target()


@dataclass
class OpEstimate:
    """One row of :func:`summary`: an op's totals over the profile."""

    op: str
    calls: int = 0
    host_us: float = 0.0
    device_us: float = 0.0
    estimated_us: float = 0.0
    memory_bound_us: float = 0.0  # the part of estimated_us that is memory-bound
    link_bound_us: float = 0.0  # the part spent in collectives' transfers

    @property
    def bound(self) -> str:
        """What most of the estimated time is bound by: "compute", "memory"
        or "link" (a collective's transfers over NeuronLink or EFA)."""
        if self.estimated_us <= 0:
            return "-"
        compute_us = self.estimated_us - self.memory_bound_us - self.link_bound_us
        parts = {"link": self.link_bound_us, "memory": self.memory_bound_us, "compute": compute_us}
        return max(parts, key=parts.get)


def records():
    """The neuron records of the trace processed last (the profile that
    stopped last, or the last ``schedule`` window): one dict per kernel,
    copy, fused group or member, program or step, NKI kernel or host task,
    with ``correlation`` (the launching CPU op's id: ``event.id`` of that
    op in ``prof.events()``), ``kind``, ``name``, ``device_us`` (measured
    on the simulator), ``estimated_us``, ``bound``, ``bytes`` (the HBM
    traffic the estimate counted) and ``link_bytes`` (a collective's bytes
    over NeuronLink or EFA, 0 for the rest)."""
    return [
        {"correlation": c, "kind": k, "name": n, "device_us": d / 1000.0,
         "estimated_us": e / 1000.0, "bound": b, "bytes": nbytes, "link_bytes": link}
        for c, k, n, d, e, b, nbytes, link in _C._profile_last_records()
    ]


def device_events(prof):
    """The neuron device events of a profile (kernels, copies, fused members,
    program steps), without the spans around them and the estimate lane."""
    return [
        e for e in prof.events()
        if e.device_type == DeviceType.PrivateUse1 and not e.is_user_annotation
    ]


# Records that are the device work itself; groups and programs are the sum
# of their members and steps, which are counted instead.
_LEAF_KINDS = ("kernel", "copy", "fused member", "program step", "NKI kernel", "host task")


def estimates(prof) -> list[OpEstimate]:
    """Per CPU op (the innermost one that launched the work), the totals of
    its calls and of the device work it launched, largest estimate first.
    prof must be the profile whose trace was processed last."""
    events = prof.events()
    # CPU ops; the launches (nrtLaunch, ...) are CPU events linked to their op.
    cpu_by_id = {e.id: e for e in events
                 if e.device_type == DeviceType.CPU and not e.is_async and not e.linked_correlation_id}
    rows: dict[str, OpEstimate] = {}
    for e in cpu_by_id.values():
        row = rows.setdefault(e.name, OpEstimate(e.name))
        row.calls += 1
        row.host_us += e.self_cpu_time_total
    recs = records()
    if recs and not any(r["correlation"] in cpu_by_id for r in recs if r["correlation"]):
        raise ValueError("torchneuron.profiler: these records belong to another profile; "
                         "summarise the profile that stopped last")
    for r in recs:
        if r["kind"] not in _LEAF_KINDS:
            continue
        owner = cpu_by_id.get(r["correlation"])
        name = owner.name if owner is not None else f"(no op) {r['name']}"
        row = rows.setdefault(name, OpEstimate(name))
        row.device_us += r["device_us"]
        row.estimated_us += r["estimated_us"]
        if r["bound"] == "memory":
            row.memory_bound_us += r["estimated_us"]
        elif r["bound"] == "link":
            row.link_bound_us += r["estimated_us"]
    return sorted(rows.values(), key=lambda r: (-r.estimated_us, -r.host_us, r.op))


def summary(prof, row_limit: int = 30) -> str:
    """A table of :func:`estimates`: op, calls, host time, measured device
    time, estimated device time on the target, bound."""
    rows = [r for r in estimates(prof) if r.estimated_us > 0 or r.device_us > 0][:row_limit]
    est_title = f"estimated {target()} (us)"
    headers = ["op", "calls", "host (us)", "device (us)", est_title, "bound"]
    body = [
        [r.op, str(r.calls), f"{r.host_us:.1f}", f"{r.device_us:.1f}", f"{r.estimated_us:.3f}", r.bound]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    total_est = sum(r.estimated_us for r in rows)
    total_dev = sum(r.device_us for r in rows)
    out.append(f"device time measured on the simulator: {total_dev:.1f} us; "
               f"estimated on {target()}: {total_est:.3f} us (a roofline model, not a measurement)")
    return "\n".join(out)
