"""Memory history and snapshots, as ``torch.cuda.memory`` has them.

``_record_memory_history`` starts recording the caching allocator's events
(allocations, frees, segments taken from and given back to the device,
out-of-memory failures) with the stack of the code that caused each;
``_snapshot`` returns the allocator's segments and blocks as they are now,
with the recorded events, in the structure of
``torch.cuda.memory._snapshot()``; ``_dump_snapshot`` pickles it for
https://pytorch.org/memory_viz or ``torch.cuda._memory_viz``.
"""

import pickle
import sys

from torchneuron import _C

_ENABLED = {None: 0, "state": 1, "all": 2}
_CONTEXT = {None: 0, "state": 1, "alloc": 2, "all": 3}
_STACKS = ("python", "all")
# Bit numbers of the actions skip_actions may name (the runtime's event kinds).
_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot")


def _choice(name, value, allowed):
    if value not in allowed:
        names = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"_record_memory_history: {name}={value!r} is not one of {names}")
    return value


def _record_memory_history(
    enabled="all",
    context="all",
    stacks="all",
    max_entries: int = sys.maxsize,
    device=None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions=None,
) -> None:
    """Starts (or, with ``enabled=None``, stops) recording the allocator's
    history, with the arguments of ``torch.cuda.memory._record_memory_history``:

    * ``enabled``: ``None`` stops; ``"state"`` keeps the stacks of the live
      allocations only; ``"all"`` also keeps a history of every event.
    * ``context``: which stacks are kept: ``None``, ``"state"`` (live
      allocations), ``"alloc"`` (also allocation events), ``"all"`` (also
      frees).
    * ``stacks``: ``"python"``, or ``"all"`` for C++ frames too.
    * ``max_entries``: the history keeps the latest this many events.
    * ``clear_history``: forget the events recorded so far.
    * ``skip_actions``: action names not to record (``"alloc"``,
      ``"free_requested"``, ``"free_completed"``, ``"segment_alloc"``,
      ``"segment_free"``, ``"oom"``, ``"snapshot"``).

    Recording covers every neuron device (``device`` is accepted for
    compatibility, as CUDA records all devices too). ``enabled=True`` /
    ``False`` are read as ``"all"`` / ``None``. Stacks are the frames of the
    thread that allocated or freed; a thread Python does not know (a
    stream worker running a host task) records C++ frames only, and only
    with ``stacks="all"``.
    """
    if enabled is True:
        enabled = "all"
    elif enabled is False:
        enabled = None
    _choice("enabled", enabled, _ENABLED)
    _choice("context", context, _CONTEXT)
    _choice("stacks", stacks, _STACKS)
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"_record_memory_history: max_entries must be a positive int, got {max_entries!r}")
    if compile_context or global_record_annotations:
        raise NotImplementedError(
            "_record_memory_history: compile_context and global_record_annotations are not "
            "recorded on neuron"
        )
    skip = 0
    for action in skip_actions or ():
        skip |= 1 << _ACTIONS.index(_choice("skip_actions entry", action, _ACTIONS))
    _C._memory_record_history(
        _ENABLED[enabled], _CONTEXT[context], stacks == "all", min(max_entries, sys.maxsize),
        bool(clear_history), skip,
    )


def _snapshot(device=None, augment_with_fx_traces: bool = False) -> dict:
    """The allocator's state and recorded history, as
    ``torch.cuda.memory._snapshot()`` returns it: ``segments`` (each with
    its ``blocks``, their states and allocation stacks) and
    ``device_traces`` (the events per device). Covers every neuron device;
    ``device`` is accepted for compatibility."""
    if augment_with_fx_traces:
        raise NotImplementedError("_snapshot: augment_with_fx_traces is not supported on neuron")
    return _C._memory_snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles :func:`_snapshot` to ``filename``, for
    https://pytorch.org/memory_viz or ``python -m torch.cuda._memory_viz``."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)
