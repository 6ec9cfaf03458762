"""Counters of what the runtime did, named as AWS TorchNeuron's
``torch_neuronx.metrics`` names them.

Each counter is a process-wide total since start-up or the last
:func:`clear_all`. Counters come from the runtime's sources below; later
subsystems add theirs to the table. The runtime and dispatch counters are
relaxed atomic adds where the event happens, so they are always on.

``TORCHNEURON_METRICS_FILE=path`` writes every counter to ``path`` as CSV
(``counter,value``) when the process exits.

``ops.native`` / ``ops.fallback``
    ATen calls on neuron tensors served by a native kernel / by the CPU
    fallback (a composite op counts as the ops it decomposes into).
``ops.fused``
    ops that ran inside fused groups (the same count as
    ``adaptive_eager.fused_ops``, named here beside the other two).
``runtime.kernels_launched`` / ``runtime.host_tasks_launched``
    kernels (op descriptors) and host tasks (e.g. collectives) queued on
    neuron streams; a fused group counts as the kernels in it.
``copy.host_to_device.bytes`` / ``.copies`` (and ``device_to_host``, ``device_to_device``)
    bytes and copies queued from host memory to a device, back, and
    within or between devices (device-to-device counts the copy kernels
    too: restriding, dtype conversion, across devices; by bytes written).
``allocator.retries``
    allocations that found no room, gave the cached free segments back and
    tried again.
``allocator.ooms``
    allocations that failed with ``torch.OutOfMemoryError``.
``sync.stream`` / ``sync.device`` / ``sync.event``
    calls that waited for a stream, a whole device (``torch.neuron.synchronize``)
    or an event.
``fuse.register_loops``
    runs of fused groups (adaptive eager, compiled steps, GEMM epilogue and
    row blocks) evaluated by the register-level loop: all float32 ops of
    its vocabulary, the whole expression per block of 256 elements.
``fuse.codegen.kernels`` / ``fuse.codegen.cache_hits``
    generated kernels of compiled programs' fused groups (one C function
    per tape, see docs/compile.md) compiled by the C compiler, and loaded
    from the disk cache instead.
``fuse.codegen.runs``
    runs of fused groups by their generated code (also counted in
    ``fuse.register_loops``).
``fuse.codegen.fallbacks``
    groups left to the tape because their generated code could not be had
    (no compiler, a compile error, an unusable cache directory, a probe
    mismatch) or did not fit the run.
``fuse.codegen.background``
    generated kernels queued to the background compile worker (those
    neither this process nor the disk cache had when their graph was
    compiled; ``torchneuron.compiler.wait_for_kernels()`` waits for them).
``fuse.codegen.pending``
    not a total: the background compiles queued or running now.
``conv.blocked`` / ``conv.columns`` / ``conv.amx_columns`` / ``conv.amx_direct``
    2-d convolutions (forward, input gradient and weight gradient each
    count) by the path they ran: the blocked implicit GEMM; columns (im2col)
    into the GEMM, depthwise included; bfloat16 columns into the GEMM's AMX
    kernels (AMX hosts, 64 taps or more, not depthwise); bfloat16 directly
    on AMX tiles without columns (AMX hosts, stride 1, 16 channels or more
    per group and 64 taps; not the weight gradient of a 1x1 window).
``conv3d.fold``
    3-d convolutions (forward, input gradient and weight gradient each
    count; conv_transpose3d too) that ran as 2-d convolutions with depth
    folded into the channels (float32 and bfloat16, not depthwise); the 2-d
    calls they make count in ``conv.*`` as well.
``attention.bf16_tiles``
    bfloat16 SDPA forward launches that ran on the GEMM's bfloat16
    micro-kernel (AMX or AVX512-BF16 hosts at the avx512 level), rounding
    the softmax weights to bfloat16 for the product with v as PyTorch CPU
    does; the float32-tile path serves the rest.
``attention.bf16_backward_tiles``
    passes of the bfloat16 SDPA backward (one per key/value pass, query
    pass or one-pass-per-head launch) that ran on the same micro-kernel,
    rounding the weights and the score gradients to bfloat16 for the
    products as PyTorch CPU does.
``adaptive_eager.groups``
    fused groups the stream workers ran (adaptive eager execution).
``adaptive_eager.fused_ops``
    ops that ran inside those groups.
``adaptive_eager.elided_writes``
    outputs of fused ops that were not stored: the tensor was freed before
    its group ran, or a later op of the group overwrote it.
``compile.graphs``
    FX graphs torch.compile handed the neuron backend and it compiled
    (``compile.graphs.forward``, ``.backward`` and ``.inference`` apart).
``compile.cache_hits`` / ``compile.disk_cache_hits``
    graphs whose plan came from the in-memory / on-disk cache.
``compile.fused_kernels``
    fused groups in the programs compiled (two or more ops each).
``compile.gemm_epilogues``
    GEMMs in the programs compiled whose following pointwise nodes run as
    their epilogue, on each block of the product as it is stored.
``compile.gemm_epilogues_on_blocks`` / ``compile.gemm_epilogues_after``
    runs of those steps with the epilogue on the blocks, and runs whose
    layouts did not allow it (the group then ran after the product).
``compile.row_regions``
    row regions in the programs compiled: a norm or softmax with the
    pointwise steps around it, run chunk by chunk of rows.
``compile.row_regions_chunked`` / ``compile.row_regions_alone``
    runs of row regions (or parts of them) by chunks of rows, and runs
    whose layouts made their steps run one after another.
``compile.eager_nodes``
    nodes of compiled graphs that ran through the eager path (counted per
    run of the graph).
``compile.launches``
    launches of compiled programs (one per segment per run).
``compile.fallbacks``
    graphs that failed to compile and ran eagerly (``fallback_execution``).
"""

import atexit
import csv
import os
import sys

from torchneuron import _C

from torchneuron.compiler import metrics as _compile_metrics

__all__ = [
    "clear_all",
    "get_compilation_metrics",
    "get_counter_names",
    "get_counter_value",
    "report",
    "write_csv",
]

# (read: () -> {name: value}, clear: () -> None), one per subsystem.
_SOURCES = [
    (_C._runtime_counters, _C._clear_runtime_counters),
    (lambda: {"ops.fused": _C._adaptive_eager_counters()["adaptive_eager.fused_ops"]}, lambda: None),
    (_C._adaptive_eager_counters, _C._clear_adaptive_eager_counters),
    (_compile_metrics.counters, _compile_metrics.clear),
    (_C._graph_counters, _C._clear_graph_counters),
]


def get_compilation_metrics() -> list:
    """A row per graph the neuron backend compiled since the last clear:
    name, kind (forward, backward, inference), nodes, segments, fused
    groups, eager nodes, arena bytes (the largest arena of its runs so far),
    compile milliseconds, and where the plan came from (compiled, memory or
    disk cache)."""
    return _compile_metrics.rows()


def _counters() -> dict:
    values = {}
    for read, _ in _SOURCES:
        values.update(read())
    return values


def get_counter_names() -> list:
    """The names of every counter, sorted."""
    return sorted(_counters())


def get_counter_value(name: str):
    """The counter's value (0 if it never moved), or None for a name that is
    not a counter."""
    return _counters().get(name)


def clear_all() -> None:
    """Sets every counter to 0."""
    for _, clear in _SOURCES:
        clear()


def report() -> str:
    """A table of every counter and its value, as text to print."""
    values = _counters()
    width = max(len("counter"), *(len(name) for name in values))
    lines = [f"{'counter':<{width}}  value", f"{'-' * width}  -----"]
    lines += [f"{name:<{width}}  {values[name]}" for name in sorted(values)]
    return "\n".join(lines)


def write_csv(path) -> None:
    """Writes every counter to ``path`` as CSV: a ``counter,value`` header,
    then a row per counter, sorted by name."""
    values = _counters()
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["counter", "value"])
        for name in sorted(values):
            writer.writerow([name, values[name]])


def _write_csv_at_exit(path) -> None:
    # At exit an exception would only print a traceback after the user's
    # output; one line says the same.
    try:
        write_csv(path)
    except Exception as error:  # noqa: BLE001 - any failure is reported, none raised
        print(f"torchneuron: could not write TORCHNEURON_METRICS_FILE={path!r}: {error}", file=sys.stderr)


if os.environ.get("TORCHNEURON_METRICS_FILE"):
    atexit.register(_write_csv_at_exit, os.environ["TORCHNEURON_METRICS_FILE"])
