"""The compiler's counters and its row per compiled graph, read through
``torchneuron.metrics`` (see there for the names)."""

import threading

_lock = threading.Lock()
_counters = {
    "compile.graphs": 0,
    "compile.graphs.forward": 0,
    "compile.graphs.backward": 0,
    "compile.graphs.inference": 0,
    "compile.cache_hits": 0,
    "compile.disk_cache_hits": 0,
    "compile.fused_kernels": 0,
    "compile.gemm_epilogues": 0,
    "compile.row_regions": 0,
    "compile.eager_nodes": 0,
    "compile.launches": 0,
    "compile.fallbacks": 0,
}
_rows = []


def count(name, n=1):
    with _lock:
        _counters[name] = _counters.get(name, 0) + n


def counters():
    with _lock:
        return dict(_counters)


def clear():
    with _lock:
        for k in _counters:
            _counters[k] = 0
        _rows.clear()


def add_row(row):
    """Adds a row; returns it (its owner may update it later)."""
    row = dict(row)
    with _lock:
        _rows.append(row)
    return row


def rows():
    with _lock:
        return [dict(r) for r in _rows]
