"""Reading the pages processes publish for ``neuron-top`` (the layout is
``runtime/include/neuronrt/top.h``, version 1).

A page is untrusted input: anything that does not hold together (a short
file, a bad magic or version, sizes that disagree, another owner, loose
permissions, a symbolic link, a FIFO) raises :class:`PageError` with the
reason, and :func:`scan` turns that into a note and skips the page. A page
whose process has gone (its pid no longer runs, or runs a process that
started at another time) is stale: hidden, and removed when it is ours.
"""

import os
import stat
import struct
import time
from dataclasses import dataclass, field

VERSION = 2
MAGIC = b"NRTTOP\0\0"
BYTE_ORDER = 0x01020304
MAX_STREAMS = 16
MAX_DEVICES = 64
MAX_PAGE_BYTES = 1 << 20
# Tries at a consistent copy before a page is skipped for this round.
READ_TRIES = 5

# Native byte order, no padding: the C structs have none (every field is
# aligned to its size), so these sizes are theirs.
_HEADER = struct.Struct("=8s8IQqQQ8sQQQQ")
_SEQ_OFFSET = 88
_STREAM = struct.Struct("=qqQQQQ")
_DEVICE = struct.Struct("=7Q2I")
DEVICE_BYTES = _DEVICE.size + MAX_STREAMS * _STREAM.size


class PageError(Exception):
    """A page that cannot be used, with the reason."""


@dataclass
class Stream:
    id: int
    priority: int
    queued: int
    submitted: int
    ops: int
    busy_ns: int


@dataclass
class Device:
    index: int
    allocated_bytes: int
    reserved_bytes: int
    capacity_bytes: int
    ops: int
    queued: int
    busy_ns: int
    fallbacks: int
    streams_in_use: int
    streams: list = field(default_factory=list)

    @property
    def in_use(self) -> bool:
        return self.streams_in_use > 0 or self.reserved_bytes > 0


@dataclass
class Page:
    pid: int
    start_ticks: int
    uid: int
    interval_ns: int
    target: str
    pid_namespace: int
    seq: int
    published_ns: int
    fallbacks: int
    devices: list

    @property
    def key(self):
        return (self.pid, self.start_ticks)


def default_directory() -> str:
    """Where the runtime publishes: TORCHNEURON_TOP_DIR or
    /dev/shm/torchneuron-<uid>."""
    return os.environ.get("TORCHNEURON_TOP_DIR") or f"/dev/shm/torchneuron-{os.getuid()}"


def parse(data: bytes) -> Page:
    """The page in data (one consistent copy), or PageError."""
    if len(data) < _HEADER.size:
        raise PageError(f"truncated: {len(data)} bytes, the header alone is {_HEADER.size}")
    (magic, version, byte_order, header_bytes, device_bytes, stream_bytes, max_streams,
     device_count, uid, page_bytes, pid, start_ticks, interval_ns, target, pid_namespace, seq,
     published_ns, fallbacks) = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise PageError("not a neuron-top page (bad magic)")
    if byte_order != BYTE_ORDER:
        raise PageError("written in another byte order")
    if version != VERSION:
        raise PageError(f"layout version {version}; this neuron-top reads version {VERSION}")
    if (header_bytes, device_bytes, stream_bytes, max_streams) != (
            _HEADER.size, DEVICE_BYTES, _STREAM.size, MAX_STREAMS):
        raise PageError(f"record sizes do not match layout version {VERSION}")
    if device_count > MAX_DEVICES:
        raise PageError(f"{device_count} devices (at most {MAX_DEVICES})")
    if page_bytes != _HEADER.size + device_count * DEVICE_BYTES:
        raise PageError(f"size {page_bytes} does not match its {device_count} devices")
    if len(data) < page_bytes:
        raise PageError(f"truncated: {len(data)} of {page_bytes} bytes")
    if pid <= 0:
        raise PageError(f"pid {pid}")
    if seq % 2:
        raise PageError("being written")
    name = target.rstrip(b"\0")
    if name and not (name.isalnum() and name.isascii()):
        raise PageError("garbled target name")
    devices = []
    for index in range(device_count):
        offset = _HEADER.size + index * DEVICE_BYTES
        (allocated, reserved, capacity, ops, queued, busy, device_fallbacks, in_use, listed) = \
            _DEVICE.unpack_from(data, offset)
        if listed > MAX_STREAMS or listed > in_use:
            raise PageError(f"neuron:{index} lists {listed} of {in_use} streams")
        streams = [Stream(*_STREAM.unpack_from(data, offset + _DEVICE.size + i * _STREAM.size))
                   for i in range(listed)]
        devices.append(Device(index, allocated, reserved, capacity, ops, queued, busy,
                              device_fallbacks, in_use, streams))
    return Page(pid, start_ticks, uid, interval_ns, name.decode(), pid_namespace, seq, published_ns,
                fallbacks, devices)


def read(path: str) -> Page:
    """Reads and checks the page at path: a regular file of this user's,
    not readable or writable by others, copied consistently (its sequence
    number even and unchanged across the copy)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise PageError(f"cannot open: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PageError("not a regular file")
        if st.st_uid != os.getuid():
            raise PageError(f"owned by uid {st.st_uid}, not by you")
        if st.st_mode & 0o077:
            raise PageError(f"others may use it (mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > MAX_PAGE_BYTES:
            raise PageError(f"{st.st_size} bytes (at most {MAX_PAGE_BYTES})")
        for _ in range(READ_TRIES):
            data = os.pread(fd, MAX_PAGE_BYTES, 0)
            after = os.pread(fd, 8, _SEQ_OFFSET)
            if len(data) >= _SEQ_OFFSET + 8 and after == data[_SEQ_OFFSET:_SEQ_OFFSET + 8]:
                try:
                    page = parse(data)
                except PageError as err:
                    if str(err) != "being written":
                        raise
                else:
                    if page.uid != os.getuid():
                        raise PageError(f"says uid {page.uid}, not yours")
                    return page
            time.sleep(0.001)
        raise PageError(f"still being written after {READ_TRIES} tries")
    finally:
        os.close(fd)


def start_ticks(pid: int):
    """The start time of process pid (clock ticks since boot), or None if no
    such process runs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # field 22; the fields after the command start at field 3
    except (IndexError, ValueError):
        return None


def command_line(pid: int, width: int = 120) -> str:
    """The process's command line, printable, cut to width."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return "?"
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[:width] or "?"


def _name_parts(name: str):
    """(pid, start) from "<pid>-<start>.page", or None."""
    stem, dot, suffix = name.partition(".")
    pid, dash, start = stem.partition("-")
    if suffix != "page" or not dash or not pid.isdigit() or not start.isdigit():
        return None
    return int(pid), int(start)


def _remove(path: str, notes: list, what: str) -> None:
    try:
        os.unlink(path)
        notes.append(f"removed {what}")
    except OSError as err:
        notes.append(f"could not remove {what}: {err.strerror}")


_NAMESPACE_OFFSET = 80


def own_pid_namespace() -> int:
    """The inode of this process's PID namespace (0 when unknown)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _pid_namespace_of(path: str):
    """The PID namespace a page at path names in its header, or None when
    its header cannot say (too short, not a page)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.pread(fd, _NAMESPACE_OFFSET + 8, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(head) < _NAMESPACE_OFFSET + 8 or head[:8] != MAGIC:
        return None
    return struct.unpack_from("=Q", head, _NAMESPACE_OFFSET)[0]


def scan(directory: str):
    """(pages of live processes, notes): every page in directory that reads
    cleanly and whose process still runs, sorted by pid; a note for each
    page skipped or removed. Pages of another PID namespace (a container
    sharing the directory) are skipped, never removed: their pids mean
    nothing here."""
    notes, pages = [], []
    own_namespace = own_pid_namespace()
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return pages, notes  # no process has published yet
    except OSError as err:
        return pages, [f"cannot read {directory}: {err.strerror}"]
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return pages, [f"ignored {directory}: not a directory of yours that only you may use"]
    for name in sorted(os.listdir(directory)):
        if name.startswith("."):
            continue  # a page being created
        path = os.path.join(directory, name)
        parts = _name_parts(name)
        if parts is None:
            notes.append(f"skipped {name}: not a page name (<pid>-<start>.page)")
            continue
        namespace = _pid_namespace_of(path)
        if namespace is not None and own_namespace and namespace not in (own_namespace, 0):
            notes.append(f"skipped {name}: a process of another PID namespace")
            continue
        running = start_ticks(parts[0]) == parts[1]
        try:
            page = read(path)
        except PageError as err:
            try:
                owned = os.lstat(path).st_uid == os.getuid()
            except FileNotFoundError:
                continue  # its process exited meanwhile and removed it
            if not running and owned:
                _remove(path, notes, f"the unreadable page {name} of exited process {parts[0]}")
            else:
                notes.append(f"skipped {name}: {err}")
            continue
        if page.key != parts:
            notes.append(f"skipped {name}: its header says pid {page.pid}, start {page.start_ticks}")
        elif not running:
            _remove(path, notes, f"the page of exited process {page.pid}")
        else:
            pages.append(page)
    return pages, notes
