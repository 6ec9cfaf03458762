"""``neuron-top``: every process using neuron devices on this machine, live.

Per process and device: memory allocated and reserved, ops per second
(kernels, each member of a fused group, copies and host tasks run),
fallbacks per second (ATen calls on the device's tensors run through the
CPU fallback; the process's total too, in the JSON),
and per stream the commands queued and how busy its worker was. Each
process publishes a page (see ``torchneuron/tools/top_page.py``); rates are
the difference of two readings over the time between their publications.

``neuron-top --once --json`` prints one snapshot for scripts, its rates
taken over ``--interval`` seconds.
"""

import argparse
import json
import os
import select
import shutil
import sys
import time

from torchneuron.tools import top_page

JSON_VERSION = 1


def _rate(now: int, before: int, seconds: float):
    return max(now - before, 0) / seconds if seconds > 0 else None


def _fraction(busy_now: int, busy_before: int, ns: int, cap=None):
    if ns <= 0:
        return None
    share = max(busy_now - busy_before, 0) / ns
    return min(share, cap) if cap else share


def _stream_row(stream, before, seconds, ns) -> dict:
    return {
        "id": stream.id,
        "priority": stream.priority,
        "queued": stream.queued,
        "submitted": stream.submitted,
        "ops": stream.ops,
        "ops_per_s": _rate(stream.ops, before.ops, seconds) if before else None,
        "busy": _fraction(stream.busy_ns, before.busy_ns, ns, cap=1.0) if before else None,
    }


def _device_row(device, before, seconds, ns) -> dict:
    old_streams = {s.id: s for s in before.streams} if before else {}
    return {
        "device": device.index,
        "name": f"neuron:{device.index}",
        "allocated_bytes": device.allocated_bytes,
        "reserved_bytes": device.reserved_bytes,
        "capacity_bytes": device.capacity_bytes,
        "ops": device.ops,
        "ops_per_s": _rate(device.ops, before.ops, seconds) if before else None,
        "fallbacks": device.fallbacks,
        "fallbacks_per_s": _rate(device.fallbacks, before.fallbacks, seconds) if before else None,
        "queued": device.queued,
        # The sum of its streams' shares: above 1 when streams overlap.
        "busy": _fraction(device.busy_ns, before.busy_ns, ns) if before else None,
        "streams_in_use": device.streams_in_use,
        "streams": [_stream_row(s, old_streams.get(s.id), seconds, ns) for s in device.streams],
    }


def snapshot(pages, notes, previous, directory, interval) -> dict:
    """The JSON-ready view of pages, with rates against previous (pages of
    an earlier reading, by key) where the process was in both."""
    processes = []
    for page in pages:
        old = previous.get(page.key)
        ns = page.published_ns - old.published_ns if old else 0
        seconds = ns / 1e9
        if old and ns <= 0:
            old = None  # not published again since: no rate yet
        processes.append({
            "pid": page.pid,
            "command": top_page.command_line(page.pid),
            "target": page.target,
            "fallbacks": page.fallbacks,
            "fallbacks_per_s": _rate(page.fallbacks, old.fallbacks, seconds) if old else None,
            "devices": [_device_row(d, old.devices[d.index] if old and d.index < len(old.devices)
                                    else None, seconds, ns)
                        for d in page.devices if d.in_use],
        })
    return {
        "version": JSON_VERSION,
        "time": time.time(),
        "directory": directory,
        "interval_s": interval,
        "processes": processes,
        "notes": list(dict.fromkeys(notes)),
    }


# ---- text --------------------------------------------------------------

def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _num(value, fmt="{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


_COLUMNS = "{:>8}  {:<14}{:>11}{:>11}{:>10}{:>12}{:>7}{:>7}{:>12}  {}"


def render(snap: dict, width: int = 200) -> list:
    """The snapshot as lines of text (a header, a row per device in use and
    one per stream under it, then the notes)."""
    n = len(snap["processes"])
    lines = [f"neuron-top  {time.strftime('%H:%M:%S', time.localtime(snap['time']))}  "
             f"{n} process{'es' if n != 1 else ''}  (every {snap['interval_s']:g} s)  "
             f"{snap['directory']}",
             _COLUMNS.format("PID", "DEVICE", "ALLOCATED", "RESERVED", "OPS/S", "FALLBACKS/S",
                             "QUEUE", "BUSY", "OPS", "COMMAND")]
    for proc in snap["processes"]:
        first = True
        for dev in proc["devices"] or [None]:
            pid = str(proc["pid"]) if first else ""
            command = proc["command"] if first else ""
            if dev is None:
                lines.append(_COLUMNS.format(pid, "-", "", "", "", _num(proc["fallbacks_per_s"]), "", "", "",
                                             command))
                break
            lines.append(_COLUMNS.format(
                pid, dev["name"], _size(dev["allocated_bytes"]), _size(dev["reserved_bytes"]),
                _num(dev["ops_per_s"]), _num(dev["fallbacks_per_s"]), dev["queued"], _pct(dev["busy"]),
                dev["ops"], command))
            for s in dev["streams"]:
                label = f"stream {s['id']}" + (" (high)" if s["priority"] < 0 else "")
                lines.append(_COLUMNS.format("", "  " + label, "", "", _num(s["ops_per_s"]), "",
                                             s["queued"], _pct(s["busy"]), s["ops"], ""))
            if dev["streams_in_use"] > len(dev["streams"]):
                lines.append(f"{'':10}  ... {dev['streams_in_use'] - len(dev['streams'])} more streams "
                             "(counted in the device's row)")
            first = False
    if not snap["processes"]:
        lines.append("no process is using a neuron device")
    lines += [f"note: {note}" for note in snap["notes"]]
    return [line[:width] for line in lines]


# ---- the commands ------------------------------------------------------

def take(directory: str, interval: float) -> dict:
    """One snapshot; with interval > 0, two readings that far apart, so that
    it has rates."""
    previous, notes = {}, []
    if interval > 0:
        pages, notes = top_page.scan(directory)
        previous = {p.key: p for p in pages}
        time.sleep(interval)
    pages, more = top_page.scan(directory)
    return snapshot(pages, notes + more, previous, directory, interval)


def _screen_size():
    """The terminal's size now (it may have been resized); COLUMNS and
    LINES only when stdout is not a terminal."""
    try:
        return os.get_terminal_size(sys.stdout.fileno())
    except (OSError, ValueError):
        return shutil.get_terminal_size()


def _live(directory: str, interval: float) -> None:
    """Redraws every interval until q or Ctrl-C (plain ANSI: home, clear)."""
    keys = sys.stdin.isatty()
    saved = None
    if keys:
        import termios
        import tty
        saved = termios.tcgetattr(sys.stdin)
        tty.setcbreak(sys.stdin)
    out = sys.stdout
    out.write("\x1b[?1049h\x1b[?25l")  # the alternate screen, no cursor
    previous = {}
    try:
        while True:
            pages, notes = top_page.scan(directory)
            snap = snapshot(pages, notes, previous, directory, interval)
            previous = {p.key: p for p in pages}
            size = _screen_size()
            lines = render(snap, size.columns)[:size.lines - 1]
            lines.append("q quits")
            out.write("\x1b[H\x1b[2J" + "\n".join(lines))
            out.flush()
            if keys:
                ready, _, _ = select.select([sys.stdin], [], [], interval)
                if ready and sys.stdin.read(1) in ("q", "Q"):
                    return
            else:
                time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        out.write("\x1b[?25h\x1b[?1049l")
        out.flush()
        if saved is not None:
            import termios
            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="neuron-top", description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="print one snapshot and exit")
    parser.add_argument("--json", action="store_true", help="with --once: print it as JSON")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between readings (default 1; with --once, 0 takes a "
                             "single reading, without rates)")
    parser.add_argument("--dir", default=None,
                        help="where processes publish (default: TORCHNEURON_TOP_DIR or "
                             "/dev/shm/torchneuron-<uid>)")
    args = parser.parse_args(argv)
    if args.interval < 0 or (not args.once and args.interval <= 0):
        parser.error("--interval must be positive (0 only with --once)")
    if args.json and not args.once:
        parser.error("--json needs --once")
    directory = args.dir or top_page.default_directory()
    if not args.once:
        _live(directory, args.interval)
        return 0
    snap = take(directory, args.interval)
    if args.json:
        print(json.dumps(snap, indent=2))
    else:
        print("\n".join(render(snap, shutil.get_terminal_size().columns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
