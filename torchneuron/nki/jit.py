"""@nki.jit kernels: specialisation, the program cache and running.

A call computes the specialisation key (program id, tensor shapes and
dtypes, non-tensor values), traces the kernel once per key into a program
the runtime has checked, placed and estimated, and runs it:

* on ``neuron`` tensors, asynchronously on the device's current stream,
  the HBM operands being the tensors' device memory; outputs are new neuron
  tensors;
* on NumPy arrays or CPU torch tensors (and for anything under
  ``nki.simulate`` / ``NKI_SIMULATOR=1``), synchronously on host memory;
  NumPy in gives NumPy out, CPU tensors give CPU tensors.

``kernel[2](...)`` launches two programs (``nl.program_id(0)`` = 0, 1) that
share their ``shared_hbm`` outputs. They run interleaved: each up to its
next collective call (``nki.collectives``, ``nisa.core_barrier``,
``nisa.sendrecv``), program 0 first, where all of them meet; programs whose
calls differ in number or kind are refused before anything runs.
"""

import contextlib
import functools
import gc
import math
import operator
import os
import re

import numpy as np
import torch

from torchneuron import _C
from torchneuron.nki import dtypes, trace
from torchneuron.nki import typing as nki_typing
from torchneuron.nki.errors import NkiError
from torchneuron.nki.tensor import NkiTensor

trace.check_layout(_C._nki_layout())

_NEURON = "neuron"



class Grid(int):
    """The program count of a multi-axis launch grid (kernel[2, 3]: 6
    programs), carrying its shape: program p has coordinates p in row-major
    order, which nl.program_id(axis) reads. Everything else sees the count."""

    def __new__(cls, shape):
        grid = int.__new__(cls, math.prod(shape))
        grid.shape = tuple(shape)
        return grid

    def __reduce__(self):
        return (Grid, (self.shape,))

    def __repr__(self):
        return f"Grid{self.shape}"

class Program:
    """A traced, checked program for one specialisation and program id."""

    def __init__(self, tracer, handle, result, args):
        self.tracer = tracer
        self.handle = handle
        self.result = result  # nested structure of Storage (or None)
        self.arg_storages = args  # per kernel argument: Storage or None
        self.storages = tracer.storages

    def __del__(self):
        if getattr(self, "handle", 0):
            _C._nki_program_destroy(self.handle)
            self.handle = 0

    def estimate(self):
        return _C._nki_program_estimate(self.handle)

    def outputs(self):
        """Kernel-created HBM storages: (storage, 'shared' | 'private')."""
        return [s for s in self.storages if s.buffer == trace.HBM and s.kind != "arg"]


def _arg_key(value):
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_arg_key(v) for v in value)
    try:
        hash(value)
        return ("value", type(value).__name__, value)
    except TypeError:
        return ("repr", repr(value))


def _dtype_of(value):
    if isinstance(value, torch.Tensor):
        return dtypes.as_dtype(value.dtype)
    return dtypes.as_dtype(value.dtype)


def _structure(value, fn):
    if isinstance(value, (tuple, list)):
        return type(value)(_structure(v, fn) for v in value)
    return fn(value)


class Kernel:
    """An @nki.jit kernel (see the module docstring)."""

    def __init__(self, fn, mode=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.mode = mode
        self.cache = {}
        self.trace_count = 0
        code = fn.__code__
        # Names the kernel in errors raised while it runs asynchronously.
        self.label = f"NKI kernel {fn.__name__} ({code.co_filename}:{code.co_firstlineno})"

    def __getitem__(self, grid):
        grid = grid if isinstance(grid, tuple) else (grid,)
        try:
            sizes = tuple(operator.index(g) for g in grid)
        except TypeError:
            sizes = ()
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError(f"an NKI launch grid is one or more positive ints "
                             f"(kernel[4], kernel[2, 3]), got {grid}")
        return functools.partial(self._launch, sizes[0] if len(sizes) == 1 else Grid(sizes))

    def __call__(self, *args, **kwargs):
        return self._launch(1, *args, **kwargs)

    # ---- specialisation ---------------------------------------------------

    def specialise(self, args, kwargs, program_id=0, num_programs=1, device=0, ranks=(0, None)):
        """ranks: (rank of program 0, ranks of the launch) for the collectives
        (nki.distributed); (0, None) for the grid alone."""
        key = (program_id, num_programs, getattr(num_programs, "shape", None), device,
               tuple(ranks), tuple(_arg_key(a) for a in args),
               tuple(sorted((k, _arg_key(v)) for k, v in kwargs.items())))
        program = self.cache.get(key)
        if program is None:
            program = self._trace(args, kwargs, program_id, num_programs, device, ranks)
            self.cache[key] = program
        return program

    def _trace(self, args, kwargs, program_id, num_programs, device, ranks=(0, None)):
        tracer = trace.Tracer(program_id, num_programs, *ranks)
        self.trace_count += 1
        arg_storages = []
        location = (self.fn.__code__.co_filename, self.fn.__code__.co_firstlineno)
        nki_typing.check_arguments(self.fn, args, kwargs, location)

        def symbolic(value, position):
            if isinstance(value, (np.ndarray, torch.Tensor)):
                dt = _dtype_of(value)
                shape = tuple(value.shape)
                storage = tracer.new_storage(trace.HBM, dt, shape, "arg", location)
                storage.arg_position = position
                arg_storages.append(storage)
                strides, acc = [], 1
                for s in reversed(shape):
                    strides.append(acc)
                    acc *= s
                return NkiTensor(storage, dt, shape, list(reversed(strides)))
            arg_storages.append(None)
            return value

        sym_args = [symbolic(a, i) for i, a in enumerate(args)]
        sym_kwargs = {k: symbolic(v, k) for k, v in kwargs.items()}
        # Tracing allocates many small objects that all live until the
        # program is built; cyclic GC passes over torch's object graph would
        # cost more than the trace itself.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            with trace.active(tracer):
                result = self.fn(*sym_args, **sym_kwargs)
        finally:
            if gc_was_enabled:
                gc.enable()

        def result_storage(value):
            if value is None:
                return None
            if not isinstance(value, NkiTensor) or value.storage.buffer != trace.HBM:
                raise NkiError("a kernel returns HBM tensors (nl.ndarray(..., "
                               "buffer=nl.shared_hbm)) or a tuple of them", rule="return",
                               filename=location[0], line=location[1])
            return value.storage

        result = _structure(result, result_storage)
        insts, tensors = tracer.pack()
        handle, diagnostic = _C._nki_program_create(insts, tensors, device)
        if diagnostic is not None:
            raise tracer.error_from_diagnostic(diagnostic)
        return Program(tracer, handle, result, arg_storages)

    def output_specs(self, *args, **kwargs):
        """Shapes and dtypes of the outputs for these arguments (traces if
        needed, runs nothing): a nested structure of (shape, NkiDtype)."""
        program = self.specialise(args, kwargs)
        return _structure(program.result,
                          lambda s: None if s is None else (s.shape, s.dtype))

    # ---- running ----------------------------------------------------------

    def _launch(self, grid, *args, _ranks=None, **kwargs):
        values = list(args) + list(kwargs.values())
        on_device = any(isinstance(v, torch.Tensor) and v.device.type == _NEURON for v in values)
        simulate = self.mode == "simulate" or os.environ.get("NKI_SIMULATOR", "0") not in ("", "0")
        if on_device and not simulate:
            return _run_device(self, grid, args, kwargs, _ranks)
        return _run_host(self, grid, args, kwargs, _ranks)


def _check_calls(kernel, programs, calls=None, who="program"):
    """The grid's programs make the same collective calls in the same order
    (else they would deadlock on hardware). calls: each program's list of
    (kind, location), if not the programs' own (every rank's, under
    nki.distributed); who names them in the message."""
    calls = [p.tracer.collective_calls for p in programs] if calls is None else calls
    for pid, mine in enumerate(calls[1:], 1):
        for k in range(max(len(calls[0]), len(mine))):
            a = calls[0][k] if k < len(calls[0]) else None
            b = mine[k] if k < len(mine) else None
            if a is not None and b is not None and a[0] == b[0]:
                continue

            def where(call, who):
                if call is None:
                    return f"{kind} {who} ends without it"
                return f"{kind} {who} is at {call[0]} ({call[1][0]}:{call[1][1]})"

            kind = who
            at = a if a is not None else b
            raise NkiError(f"{kernel.label}: the {who}s of the launch disagree at collective "
                           f"call {k} ({where(a, 0)}; {where(b, pid)}): on hardware this would "
                           "deadlock", rule="collective_mismatch", filename=at[1][0],
                           line=at[1][1])


def _order(args, kwargs):
    return list(args) + list(kwargs.values())


def _specialise_all(kernel, grid, args, kwargs, index, ranks):
    """The grid's programs, checked to agree on their collective calls (with
    every rank's, under nki.distributed)."""
    if ranks is None:
        programs = [kernel.specialise(args, kwargs, pid, grid, index) for pid in range(grid)]
        _check_calls(kernel, programs)
        return programs
    where = (ranks.rank * grid, ranks.size * grid)
    try:
        programs = [kernel.specialise(args, kwargs, pid, grid, index, where) for pid in range(grid)]
    except Exception as e:
        ranks.agree(kernel, grid, None, failure=e)  # the other ranks stop too
        raise
    ranks.agree(kernel, grid, programs)
    return programs


def _run_device(kernel, grid, args, kwargs, ranks=None):
    if any(isinstance(v, np.ndarray) for v in _order(args, kwargs)):
        raise ValueError("an NKI kernel called with neuron tensors cannot also take NumPy arrays "
                         "(move them to the device, or run everything on the simulator with "
                         "nki.simulate)")
    devices = {v.device for v in _order(args, kwargs) if isinstance(v, torch.Tensor)}
    if len(devices) != 1:
        raise ValueError(f"an NKI kernel's tensors must all be on one neuron device, got {devices}")
    device = devices.pop()
    index = device.index if device.index is not None else torch.neuron.current_device()
    given = _order(args, kwargs)
    args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
    kwargs = {k: (v.contiguous() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    programs = _specialise_all(kernel, grid, args, kwargs, index, ranks)
    with _failing_run(ranks, grid, index):
        launches, results = _bind_device(programs, args, kwargs, device)
    if ranks is not None:
        _C._nki_programs_launch_dist([p.handle for p in programs], launches, index, kernel.label,
                                     ranks.run_backend)
    elif grid == 1:
        _C._nki_program_launch(programs[0].handle, launches[0], index, kernel.label)
    else:
        _C._nki_programs_launch([p.handle for p in programs], launches, index, kernel.label)
    # A kernel may write its arguments: non-contiguous ones ran on a copy,
    # which goes back in stream order.
    for original, used in zip(given, _order(args, kwargs)):
        if isinstance(original, torch.Tensor) and used is not original:
            original.copy_(used)
    return results


def _bind_device(programs, args, kwargs, device):
    """Each program's HBM tensors (arguments, and new outputs: shared ones
    once for the grid) and the kernel's results."""
    shared = None
    results = None
    launches = []
    for program in programs:
        bound = [None] * len(program.storages)
        for storage in program.storages:
            if storage.kind == "arg":
                position = storage.arg_position
                value = args[position] if isinstance(position, int) else kwargs[position]
                bound[storage.index] = value
        outs = program.outputs()
        if shared is None:
            shared = [_new_device_tensor(s, device) for s in outs if s.kind == "shared"]
        shared_iter = iter(shared)
        for s in outs:
            bound[s.index] = next(shared_iter) if s.kind == "shared" else _new_device_tensor(s, device)
        launches.append(bound)
        if results is None:
            results = _structure(program.result, lambda s: None if s is None else bound[s.index])
    return launches, results


@contextlib.contextmanager
def _failing_run(ranks, grid, device=-1):
    """Under nki.distributed, an error between the ranks' agreement and the
    launch still takes part in the run's first round (as a FAILED message),
    so the other ranks stop with it instead of waiting for this one."""
    try:
        yield
    except BaseException as e:
        if ranks is not None:
            _C._nki_exchange_fail(ranks.run_backend, grid,
                                  f"its launch failed: {type(e).__name__}: {e}"[:240], device)
        raise


def _new_device_tensor(storage, device):
    if storage.dtype.torch is None:
        raise NkiError(f"an HBM output of dtype {storage.dtype} has no torch dtype",
                       rule="dtype", filename=storage.location[0], line=storage.location[1])
    return torch.empty(storage.shape, dtype=storage.dtype.torch, device=device)


def _host_array(value):
    """(object to keep alive, address, converter back) for a host argument."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        return t, t.data_ptr()
    arr = np.ascontiguousarray(value)
    return arr, arr.ctypes.data


def _run_host(kernel, grid, args, kwargs, ranks=None):
    as_torch = any(isinstance(v, torch.Tensor) for v in _order(args, kwargs))
    originals = (list(args), dict(kwargs))
    keep = {}

    def hostify(v):
        if isinstance(v, torch.Tensor) and v.device.type != "cpu":
            v = v.detach().cpu()
        if isinstance(v, (np.ndarray, torch.Tensor)):
            obj, _ = _host_array(v)
            return obj
        return v

    args = [hostify(a) for a in args]
    kwargs = {k: hostify(v) for k, v in kwargs.items()}
    shared = None
    results = None
    programs = _specialise_all(kernel, grid, args, kwargs, 0, ranks)
    with _failing_run(ranks, grid):
        runs = []
        for pid, program in enumerate(programs):
            pointers = [0] * len(program.storages)
            for storage in program.storages:
                if storage.kind == "arg":
                    pos = storage.arg_position
                    value = args[pos] if isinstance(pos, int) else kwargs[pos]
                    pointers[storage.index] = value.data_ptr() if isinstance(value, torch.Tensor) \
                        else value.ctypes.data
            outs = program.outputs()
            if shared is None:
                shared = [_new_host_buffer(s) for s in outs if s.kind == "shared"]
            shared_iter = iter(shared)
            for s in outs:
                buf = next(shared_iter) if s.kind == "shared" else _new_host_buffer(s)
                keep[(pid, s.index)] = buf
                pointers[s.index] = buf.ctypes.data
            runs.append(pointers)
            if results is None:
                results = _structure(program.result, lambda s: None if s is None else
                                     _HostOutput(s, keep[(pid, s.index)]))
    if grid == 1 and ranks is None:
        try:
            _C._nki_program_run_host(programs[0].handle, runs[0])
        except (IndexError, ValueError) as e:
            fault = _run_fault(kernel, programs, e)
            if fault is None:
                raise
            raise fault from None
    else:
        try:
            if ranks is None:
                _C._nki_programs_run_host([p.handle for p in programs], runs)
            else:
                _C._nki_programs_run_host_dist([p.handle for p in programs], runs,
                                               ranks.run_backend)
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, ValueError) as e:  # the programs disagreed when they met
            fault = _run_fault(kernel, programs, e)
            if fault is not None:
                raise fault from None
            raise NkiError(f"{kernel.label}: {e}", rule="collective") from None
    # Inputs a kernel wrote to (copies of non-CPU tensors) are written back.
    for new, old in zip(args + list(kwargs.values()), originals[0] + list(originals[1].values())):
        if isinstance(old, torch.Tensor) and old.device.type != "cpu":
            old.copy_(new)
    return _structure(results, lambda r: None if r is None else
                      _host_result(r.storage, r.buffer, as_torch))


_FAULT = re.compile(r"NKI instruction (\d+): \[(\w+)\] ([^\n]*)")


def _run_fault(kernel, programs, error):
    """An instruction's failure at run time (an indirect DMA's index out of
    bounds: runtime/src/nc/exec_indirect.c) as the NkiError of the kernel
    line that made the instruction, or None for other errors."""
    match = _FAULT.search(str(error))
    instructions = programs[0].tracer.instructions
    if match is None or int(match.group(1)) >= len(instructions):
        return None
    instruction = instructions[int(match.group(1))]
    filename, line = instruction.location
    return NkiError(f"{kernel.label}: {match.group(3)}", rule=match.group(2),
                    instruction=instruction.name, filename=filename, line=line)


class _HostOutput:
    __slots__ = ("storage", "buffer")

    def __init__(self, storage, buffer):
        self.storage = storage
        self.buffer = buffer


def _new_host_buffer(storage):
    return np.empty(storage.nbytes, dtype=np.uint8)


def _host_result(storage, buf, as_torch):
    dt = storage.dtype
    if as_torch and dt.torch is not None:
        return torch.from_numpy(buf).view(dt.torch).reshape(storage.shape)
    if dt.numpy is not None:
        return buf.view(dt.numpy).reshape(storage.shape)
    if dt is dtypes.bfloat16:
        bits = buf.view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(storage.shape)
    raise NkiError(f"an output of dtype {dt} has no NumPy form", rule="dtype",
                   filename=storage.location[0], line=storage.location[1])


def jit(fn=None, mode=None, **_):
    """Decorator: makes fn an NKI kernel (``@nki.jit`` or ``@nki.jit(mode=...)``)."""
    if fn is None:
        return lambda f: Kernel(f, mode=mode)
    return Kernel(fn, mode=mode)


def simulate(kernel):
    """The kernel run on the simulator with host (NumPy) inputs and outputs."""
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    sim = Kernel(kernel.fn, mode="simulate")
    sim.cache = kernel.cache
    return sim


def simulate_kernel(kernel, *args, **kwargs):
    return simulate(kernel)(*args, **kwargs)
