"""Python operators on tiles: ``a + b``, ``x * 2``, ``acc += t``, ``t[...] = v``.

Each operator is the ``nl`` call it spells (``a + b`` is ``nl.add(a, b)``, a
new SBUF tile). ``psum += nl.matmul(...)`` (or ``nisa.nc_matmul``) is the
compiler's accumulation idiom: when the right side is the PSUM tile the
last instruction (a matmul) just wrote, that matmul is redirected into the
left side, accumulating when the region already holds data (``nl.zeros``)
and overwriting on its first write; any other ``+=`` is an in-place
``tensor_tensor``. ``==`` and ``!=`` keep Python's identity meaning (tiles
are dict keys in kernels); use ``nl.equal`` / ``nl.not_equal``.
"""

from torchneuron.nki import trace
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


def _nl():
    from torchneuron.nki import language

    return language


def _binary(name, reverse=False):
    def op(self, other):
        nl = _nl()
        if not isinstance(other, (NkiTensor, int, float)):
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        return nl.elementwise(getattr(nl, name), a, b)

    op.__name__ = f"__{'r' if reverse else ''}{name}__"
    return op


def _same_view(a, b):
    return (a.storage is b.storage and a.shape == b.shape and a.strides == b.strides
            and a.offset == b.offset and a.partition == b.partition and a.dtype is b.dtype)


def _covers_storage(t):
    s = t.storage
    return t.partition == 0 and t.offset == 0 and t.shape == s.shape and t.dtype is s.dtype


def _redirect_matmul(dst, value):
    """Retargets the last instruction (a matmul writing all of value) to dst."""
    from torchneuron.nki import isa as nisa

    tracer = trace.current()
    if not tracer.instructions or value.storage.buffer != trace.PSUM or \
            dst.storage.buffer != trace.PSUM or not _covers_storage(value):
        return False
    last = tracer.instructions[-1]
    record = list(last.record)
    if record[0] != trace.MATMUL or record[6][0][0] != value.storage.index:
        return False
    if dst.free_size() != value.free_size() or dst.shape[0] != value.shape[0]:
        fail(f"cannot accumulate a {value.shape} matmul result into a {dst.shape} PSUM tile",
             "shape_mismatch", "nki.isa.nc_matmul")
    state = nisa._psum_state(dst)
    if state == "some":
        fail("+= of a matmul into a PSUM region that is only partly written: the "
             "first-write rule is ambiguous", "psum_accumulate", "nki.isa.nc_matmul")
    flat = dst if dst.ndim == 2 else dst.reshape(dst.shape[0], dst.free_size())
    aps = list(record[6])
    aps[0] = flat.record(name="nki.isa.nc_matmul")[0]
    record[6] = aps
    flags = record[3] & ~trace.FLAG_ACCUMULATE
    record[3] = flags | (trace.FLAG_ACCUMULATE if state == "all" else 0)
    last.record = tuple(record)
    nisa._mark_written(dst)
    return True


def _inplace(name):
    def op(self, other):
        if getattr(type(other), "add_into", None) is not None:
            return other.add_into(self, name, _apply_inplace)  # a legacy masked result
        if name == "add" and isinstance(other, NkiTensor) and _redirect_matmul(self, other):
            return self
        return _apply_inplace(self, other, name)

    op.__name__ = f"__i{name}__"
    return op


def _apply_inplace(self, other, name):
    """self = self op other, in place (tensor_tensor or tensor_scalar)."""
    from torchneuron.nki import isa as nisa

    nl = _nl()
    if isinstance(other, NkiTensor):
        if other.storage.buffer == trace.PSUM and self.storage.buffer == trace.PSUM:
            other = nl.copy(other, dtype=nl.float32)  # not both inputs from PSUM
        if other.free_size() == self.free_size():
            nisa.tensor_tensor(self, self, other, getattr(nl, name))
            return self
    nisa.tensor_scalar(self, self, getattr(nl, name), other)
    return self


def assign(dst, value):
    """dst[...] = value: a store for HBM, a copy (or memset) on chip."""
    from torchneuron.nki import isa as nisa

    nl = _nl()
    if not isinstance(dst, NkiTensor):
        dst.resolve({})  # an out-of-bounds index view: fails naming the index
    if getattr(type(value), "assign_into", None) is not None:
        return value.assign_into(dst)  # a legacy masked result writes its part only
    if not dst.on_chip:
        nl.store(dst, value)
    elif isinstance(value, NkiTensor):
        if _same_view(dst, value):
            return  # t[...] += x already wrote t
        if value.on_chip:
            nisa.tensor_copy(dst, value)
        else:
            nisa.dma_copy(dst, value)
    else:
        nisa.memset(dst, value)


for _name, _py in (("add", "add"), ("subtract", "sub"), ("multiply", "mul"),
                   ("divide", "truediv"), ("power", "pow"), ("mod", "mod"),
                   ("less", "lt"), ("less_equal", "le"), ("greater", "gt"),
                   ("greater_equal", "ge"), ("bitwise_and", "and"), ("bitwise_or", "or"),
                   ("bitwise_xor", "xor"), ("left_shift", "lshift"), ("right_shift", "rshift")):
    setattr(NkiTensor, f"__{_py}__", _binary(_name))
    if _py not in ("lt", "le", "gt", "ge"):
        setattr(NkiTensor, f"__r{_py}__", _binary(_name, reverse=True))
        setattr(NkiTensor, f"__i{_py}__", _inplace(_name))
NkiTensor.__neg__ = lambda self: _nl().negative_of(self)
