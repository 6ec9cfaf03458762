"""Memory statistics of the caching allocator, as ``torch.cuda`` reports them.

The numbers come from the runtime's caching allocator through
``torch.accelerator.memory``; this module adds the ``torch.cuda``-style names
and a readable summary.
"""

import torch

from torchneuron import _C
from torchneuron.neuron.device import _device_index
from torchneuron.neuron.memory_history import _dump_snapshot, _record_memory_history, _snapshot  # noqa: F401


def memory_stats(device=None) -> dict:
    return dict(torch.accelerator.memory_stats(_device_index(device)))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_device_index(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_device_index(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_device_index(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_device_index(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_device_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_device_index(device))


def empty_cache() -> None:
    """Returns every cached, unused segment of every device to the runtime."""
    torch.accelerator.empty_cache()


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes of the device's memory, as the runtime sees it."""
    return tuple(_C._mem_get_info(_device_index(device)))


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics for one device."""
    index = _device_index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    pools = ["all"] if abbreviated else ["all", "small_pool", "large_pool"]
    width = 80
    lines = ["=" * width, f" neuron:{index} memory summary".ljust(width), "-" * width,
             f"{'Metric':<28}{'Cur Usage':>13}{'Peak Usage':>13}{'Tot Alloc':>13}{'Tot Freed':>13}",
             "-" * width]
    for title, key, is_bytes in rows:
        for pool in pools:
            fmt = _format_bytes if is_bytes else str
            values = [stats.get(f"{key}.{pool}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            lines.append(f"{label:<28}" + "".join(f"{fmt(v):>13}" for v in values))
    lines += ["-" * width,
              f"Device capacity {_format_bytes(total)}, free {_format_bytes(free)}; "
              f"allocation retries {stats.get('num_alloc_retries', 0)}, OOMs {stats.get('num_ooms', 0)}",
              "=" * width]
    return "\n".join(lines)
