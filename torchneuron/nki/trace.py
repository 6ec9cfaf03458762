"""The tracer: records a kernel's ISA calls into a program for the simulator.

A kernel runs once per specialisation as ordinary Python with symbolic
tensors; every ``nki.isa`` call appends an instruction (with the kernel's file
and line) and every ``nl.ndarray`` a tensor. ``pack`` turns both lists into
the C records of ``neuronrt/nc.h``, which the runtime checks, places and
estimates once; the resulting program is cached by the kernel.
"""

import functools
import math
import os
import sys
import threading

import numpy as np

from torchneuron.nki.errors import NkiError, NkiValidationError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# nrt_nc_opcode, nrt_nc_engine, nrt_nc_buffer
DMA_COPY, MATMUL, TRANSPOSE, ACTIVATION, TENSOR_TENSOR, TENSOR_SCALAR = range(6)
SCALAR_TENSOR_TENSOR, TENSOR_REDUCE, TENSOR_COPY, COPY_PREDICATED, MEMSET = range(6, 11)
IOTA, AFFINE_SELECT = 11, 12
TENSOR_TENSOR_SCAN, BN_STATS, BN_AGGR, MAX8, FIND_INDEX8, MATCH_REPLACE8 = range(13, 19)
PARTITION_REDUCE = 19
ACTIVATE2, SCALAR_CUMULATIVE, SELECT_REDUCE, RANGE_SELECT, NONZERO_WITH_COUNT = range(20, 25)
DMA_TRANSPOSE = 25
RNG, RAND2, DROPOUT, RNG_SEED, RNG_SET_STATE, RNG_GET_STATE = range(26, 32)
TOPK, EXPONENTIAL, LOCAL_GATHER, N_GATHER, SEQUENCE_BOUNDS, STREAM_SHUFFLE = range(32, 38)
QUANTIZE_MX, MATMUL_MX, SCALAR_INT = 38, 39, 40
COLLECTIVE = 41
BRANCH = 42  # a compiled loop's compare-and-branch (torchneuron/nki/loops.py)
TENSOR_ENGINE, VECTOR_ENGINE, SCALAR_ENGINE, GPSIMD_ENGINE, DMA_ENGINE = range(5)
ENGINE_NAMES = ["Tensor", "Vector", "Scalar", "GpSimd", "DMA"]
SBUF, PSUM, HBM = 0, 1, 2
FLAG_ACCUMULATE, FLAG_REVERSE0, FLAG_REVERSE1, FLAG_NEGATE = 1, 2, 4, 8
FLAG_REDUCE_RESET, FLAG_REDUCE_LOAD, FLAG_REDUCE_FOLD = 16, 32, 64
FLAG_DOUBLE_ROW = 128  # nc_matmul perf_mode=double_row
FLAG_RELU_TILE = 256  # activate2's relu_param is a [P, 1] tile (operand 5)
# dma_copy's indirect form (operand 2 the index tile; NRT_NC_FLAG_INDIRECT_* in nc.h)
FLAG_INDIRECT_SRC, FLAG_INDIRECT_DST, FLAG_OOB_SKIP, FLAG_UNIQUE_INDICES = 512, 1024, 2048, 4096
FLAG_SCALAR_OFFSET, FLAG_HWDGE = 8192, 16384  # operand 2 one word; descriptors by hardware DGE
MAX_APS = 6  # operand slots of an instruction record (NRT_NC_MAX_APS)

_AP = np.dtype([("tensor", "<i4"), ("dtype", "<i4"), ("partition_start", "<i4"),
                ("partitions", "<i4"), ("partition_step", "<i8"), ("offset", "<i8"),
                ("num_free", "<i4"), ("reserved", "<i4"), ("stride", "<i8", (4,)),
                ("count", "<i8", (4,))])
_INST = np.dtype([("opcode", "<i4"), ("engine", "<i4"), ("func", "<i4", (3,)), ("flags", "<u4"),
                  ("axes", "<i4"), ("remote", "<i4"), ("ap", _AP, (MAX_APS,)), ("imm", "<f8", (4,))])
_TENSOR = np.dtype([("buffer", "<i4"), ("partitions", "<i4"), ("bytes", "<i8"), ("fixed", "<i4"),
                    ("partition_base", "<i4"), ("byte_offset", "<i8")])
NO_AP = (-1, 0, 0, 1, 0, 0, 0, 0, (0, 0, 0, 0), (1, 1, 1, 1))


def check_layout(layout):
    """Asserts that the NumPy records match the C structs (sizes from _C)."""
    inst, ap, tensor = layout
    if (inst, ap, tensor) != (_INST.itemsize, _AP.itemsize, _TENSOR.itemsize):
        raise RuntimeError(f"NKI record layout mismatch: C {layout}, Python "
                           f"{(_INST.itemsize, _AP.itemsize, _TENSOR.itemsize)}")


@functools.lru_cache(maxsize=None)
def _inside_package(filename):
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)


def caller_location():
    """(filename, line) of the innermost frame outside this package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _inside_package(filename):
            return filename, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


class Storage:
    """A tensor of the program: an on-chip allocation or an HBM tensor."""

    def __init__(self, index, buffer, dtype, shape, kind, location, address=None):
        self.index = index
        self.buffer = buffer  # SBUF, PSUM or HBM
        self.dtype = dtype
        self.shape = tuple(shape)
        self.kind = kind  # "arg", "shared", "private" (HBM) or "tile"
        self.location = location
        self.address = address
        self.arg_position = None
        if buffer == HBM:
            self.partitions = 0
            self.nbytes = math.prod(shape) * dtype.itemsize
        else:
            self.partitions = shape[0]
            self.nbytes = math.prod(shape[1:]) * dtype.itemsize
        # PSUM words written so far (first-write rule of nc_matmul).
        self.psum_written = (np.zeros((max(self.partitions, 1), (self.nbytes + 3) // 4), bool)
                             if buffer == PSUM else None)

    def record(self):
        fixed = self.address is not None
        part, offset = self.address if fixed else (0, 0)
        return (self.buffer, self.partitions, self.nbytes, int(fixed), part, offset)


class Instruction:
    __slots__ = ("name", "location", "record")

    def __init__(self, name, location, record):
        self.name = name
        self.location = location
        self.record = record


class Tracer:
    """The program being recorded for one (kernel, specialisation, program id)."""

    def __init__(self, program_id, num_programs, rank_base=0, world=None, link="neuronlink"):
        self.program_id = program_id
        self.num_programs = num_programs
        # What joins this process's ranks to the others' (the cost model's
        # link for collectives across processes): "neuronlink" or "efa".
        self.link = link
        # The collectives' rank of this program is rank_base + program_id, of
        # world ranks (the grid alone, or every rank's grid of a process
        # group: torchneuron/nki/ranks.py).
        self.rank_base = rank_base
        self.world = num_programs if world is None else world
        self.storages = []
        self.instructions = []
        # (kind, location) of each collective call, in program order.
        self.collective_calls = []

    @property
    def rank(self):
        return self.rank_base + self.program_id

    def is_remote(self, rank):
        """Whether a collectives rank is another process's (nki.distributed)."""
        return not self.rank_base <= rank < self.rank_base + self.num_programs

    def new_storage(self, buffer, dtype, shape, kind, location, address=None):
        s = Storage(len(self.storages), buffer, dtype, shape, kind, location, address)
        self.storages.append(s)
        return s

    def emit(self, name, opcode, engine, aps, func=(0, 0, 0), flags=0, axes=0, imm=(0, 0, 0, 0),
             remote=0):
        aps = list(aps) + [NO_AP] * (MAX_APS - len(aps))
        imm = tuple(float(v) for v in imm) + (0.0,) * (4 - len(imm))
        func = tuple(func) + (0,) * (3 - len(func))
        record = (opcode, engine, func, flags, axes, remote, aps, imm)
        self.instructions.append(Instruction(name, caller_location(), record))

    def pack(self):
        insts = np.array([i.record for i in self.instructions], dtype=_INST)
        tensors = np.array([s.record() for s in self.storages], dtype=_TENSOR)
        return insts.tobytes(), tensors.tobytes()

    def error_from_diagnostic(self, diagnostic):
        status, message, inst, tensor, rule = diagnostic
        if inst >= 0:
            instruction = self.instructions[inst]
            filename, line = instruction.location
            name = instruction.name
            if tensor >= 0 and rule in ("sbuf_capacity", "psum_capacity"):
                tf, tl = self.storages[tensor].location
                message += f" (the tile was allocated at {tf}:{tl})"
        elif tensor >= 0:
            filename, line = self.storages[tensor].location
            name = "nki.language.ndarray"
        else:
            filename, line, name = None, None, None
        return NkiValidationError(message, rule=rule, instruction=name, filename=filename,
                                  line=line)


_state = threading.local()


def current():
    tracer = getattr(_state, "tracer", None)
    if tracer is None:
        raise NkiError("NKI instructions can only be called inside an @nki.jit kernel",
                       rule="not_tracing")
    return tracer


def tracing():
    return getattr(_state, "tracer", None) is not None


class active:
    """Context manager making a tracer the current one."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        self.previous = getattr(_state, "tracer", None)
        _state.tracer = self.tracer
        return self.tracer

    def __exit__(self, *exc):
        _state.tracer = self.previous
        return False


def fail(message, rule, name=None):
    """Raises an NkiError at the kernel's current line."""
    filename, line = caller_location()
    raise NkiValidationError(message, rule=rule, instruction=name, filename=filename, line=line)
