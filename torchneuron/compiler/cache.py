"""The plan caches: in memory (per process) and on disk.

A key is a SHA-256 of the FX graph's code, every node's result layout
(dtype, sizes, strides, offset, device: the lowering depends on them), the
fuse option, the plan format, torchneuron's version, a fingerprint of the
compiler's own code and the configured target. On disk an entry is one file, ``<key>.plan``, under
``TORCHNEURON_CACHE_DIR`` (default ``~/.cache/torchneuron``, created
readable and writable by its owner only):

    8 bytes "TNPLAN01", 32 bytes SHA-256 of the payload, the payload
    (JSON: the plan, graph IR blobs in base64)

It is plain data: loading parses JSON and hands each IR to the runtime's
loader, which validates it; nothing in it is executed. A file that is
truncated, corrupt (digest mismatch), malformed or from another version is
reported with a warning and recompiled. Entries are written to a
temporary file and renamed into place, so concurrent writers of one entry
leave one whole file.
"""

import base64
import hashlib
import json
import os
import tempfile
import threading
import warnings

import torch

MAGIC = b"TNPLAN01"
_memory = {}
_lock = threading.Lock()


def cache_dir():
    d = os.environ.get("TORCHNEURON_CACHE_DIR")
    if not d:
        d = os.path.join(os.path.expanduser("~"), ".cache", "torchneuron")
    return d


def disk_enabled():
    return os.environ.get("TORCHNEURON_DISK_CACHE", "1") != "0"


def _layout(val):
    if isinstance(val, torch.Tensor):
        return (str(val.dtype), str(val.device.type), tuple(str(s) for s in val.shape),
                tuple(str(s) for s in val.stride()), str(val.storage_offset()))
    if isinstance(val, (tuple, list)):
        return tuple(_layout(v) for v in val)
    return repr(type(val).__name__) + (str(val) if isinstance(val, (int, float, bool, torch.SymInt)) else "")


_fingerprint = None


def code_fingerprint():
    """Of the compiler's own code (its Python files, the extension's size
    and time), so that a plan made by other code is never looked up."""
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(os.path.join(here, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
        from torchneuron import _C
        try:
            st = os.stat(_C.__file__)
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        except (OSError, AttributeError):
            pass
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


def graph_key(gm, fuse):
    from torchneuron.compiler.plan import PLAN_VERSION
    try:
        from importlib.metadata import version
        tn_version = version("torchneuron")
    except Exception:
        tn_version = "unknown"
    target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "")
    h = hashlib.sha256()
    h.update(f"plan{PLAN_VERSION}|{tn_version}|{code_fingerprint()}|{torch.__version__}|{target}|"
             f"fuse={fuse}\n".encode())
    h.update(gm.code.encode())
    for n in gm.graph.nodes:
        h.update(f"{n.name}:{_layout(n.meta.get('val'))}\n".encode())
    return h.hexdigest()


def lookup(key):
    """(plan, programs, "memory" | "disk") or None."""
    with _lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit[0], hit[1], "memory"
    if not disk_enabled():
        return None
    entry = _load_disk(key)
    if entry is None:
        return None
    with _lock:
        _memory[key] = entry
    return entry[0], entry[1], "disk"


def store(key, plan, programs):
    with _lock:
        _memory[key] = (plan, programs)
    if disk_enabled():
        try:
            _store_disk(key, plan)
        except OSError as e:
            warnings.warn(f"torchneuron: could not write the compile cache ({e})")


def clear_memory():
    with _lock:
        _memory.clear()


def _encode(plan):
    steps = []
    for s in plan["steps"]:
        s = dict(s)
        if s.get("kind") == "segment" and s.get("ir") is not None:
            s["ir"] = base64.b64encode(s["ir"]).decode()
        steps.append(s)
    return json.dumps(dict(plan, steps=steps), sort_keys=True).encode()


def _decode(payload):
    plan = json.loads(payload.decode())
    if not isinstance(plan, dict) or not isinstance(plan.get("steps"), list):
        raise ValueError("not a plan")
    from torchneuron.compiler.plan import PLAN_VERSION
    if plan.get("version") != PLAN_VERSION:
        raise ValueError(f"plan format {plan.get('version')!r}, expected {PLAN_VERSION}")
    for s in plan["steps"]:
        if not isinstance(s, dict):
            raise ValueError("a step that is not an object")
        if s.get("kind") == "segment" and s.get("ir") is not None:
            s["ir"] = base64.b64decode(s["ir"].encode(), validate=True)
    return plan


def _path(key):
    return os.path.join(cache_dir(), key + ".plan")


def _store_disk(key, plan):
    d = cache_dir()
    os.makedirs(d, mode=0o700, exist_ok=True)
    payload = _encode(plan)
    data = MAGIC + hashlib.sha256(payload).digest() + payload
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".plan")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, _path(key))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _load_disk(key):
    from torchneuron.compiler.runner import compile_ir
    path = _path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        if len(data) < 40 or data[:8] != MAGIC:
            raise ValueError("not a torchneuron plan file")
        payload = data[40:]
        if hashlib.sha256(payload).digest() != data[8:40]:
            raise ValueError("checksum mismatch (truncated or corrupt)")
        plan = _decode(payload)
        programs = [compile_ir(s["ir"], bool(plan.get("fuse", True))) for s in plan["steps"]
                    if s.get("kind") == "segment" and s.get("ir") is not None]
        return plan, programs
    except Exception as e:  # any defect: recompile, never trust
        warnings.warn(f"torchneuron: ignoring compile cache entry {path}: {e}; recompiling")
        return None
