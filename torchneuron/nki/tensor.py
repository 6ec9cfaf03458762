"""NkiTensor: a view of a tensor in HBM, SBUF or PSUM.

A view is (storage, dtype, shape, strides, offset). On chip, dimension 0 is
the partition dimension: its stride steps partitions and ``partition``
says where the view starts; the other strides and ``offset`` count elements
inside a partition. In HBM every dimension is an ordinary strided one.
Indexing follows NKI: on chip an int index keeps the partition dimension
(size 1) and drops a free dimension unless the view would fall below 2-D; in
HBM ints drop dimensions as in NumPy. An ``nl.ds(start, size)`` window
indexes as the slice start:start + size does, but is never clipped.
"""

import math
import numbers

from torchneuron.nki import dtypes
from torchneuron.nki.slicing import DynamicSlice
from torchneuron.nki.trace import HBM, PSUM, SBUF, fail

_BUFFER_NAMES = {SBUF: "sbuf", PSUM: "psum", HBM: "hbm"}


def _coalesce(dims):
    """Merges [stride, count] pairs that walk memory as one, drops size-1 pairs."""
    out = []
    for stride, count in dims:
        if count == 1:
            continue
        if out and out[-1][0] == stride * count:
            out[-1] = (stride, out[-1][1] * count)
        else:
            out.append((stride, count))
    return out


def _partition_step(step, partitions, row):
    """The partition step of an on-chip access pattern whose first pair is
    [step, partitions] with step in elements, as NKI writes it: the element
    count of one partition (``row``, in the pattern's dtype). NeuronCore
    v2-v4 read partitions contiguously, so no other step is accepted."""
    if partitions <= 1:
        return 1
    if step != row:
        hint = f" ({step // row} partitions apart)" if row and step % row == 0 and step > row else ""
        fail(f"the first [step, num] pair of an on-chip access pattern walks partitions, which are "
             f"read contiguously: its step counts elements and must be the {row} elements of one "
             f"partition, got {step}{hint}", "ap_partition_step", "NkiTensor.ap")
    return 1


class NkiTensor:
    __slots__ = ("storage", "dtype", "shape", "strides", "offset", "partition")

    def __init__(self, storage, dtype, shape, strides, offset=0, partition=0):
        self.storage = storage
        self.dtype = dtype
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.partition = int(partition)

    # ---- properties -------------------------------------------------------

    @property
    def buffer(self):
        return _BUFFER_NAMES[self.storage.buffer]

    @property
    def on_chip(self):
        return self.storage.buffer != HBM

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"NkiTensor(shape={self.shape}, dtype={self.dtype}, buffer={self.buffer})"

    def _with(self, shape, strides, offset=None, partition=None, dtype=None):
        return NkiTensor(self.storage, dtype or self.dtype, shape, strides,
                         self.offset if offset is None else offset,
                         self.partition if partition is None else partition)

    # ---- indexing ---------------------------------------------------------

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if index and isinstance(index[0], NkiTensor):
            return IndirectTensor(self, index[0], index[1:])
        if not all(isinstance(i, (int, slice, DynamicSlice)) or i is Ellipsis for i in index):
            from torchneuron.nki.legacy import index as legacy_index

            if legacy_index.has_index_expr(index):
                return legacy_index.index_tensor(self, index)
            if len(index) == 1 and isinstance(index[0], legacy_index.Mask):
                from torchneuron.nki.legacy.operand_mask import MaskedOperand

                return MaskedOperand(self, index[0])  # lhs[i_f < 64]: a matmul operand
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = self.ndim - (len(index) - 1)
            index = index[:at] + (slice(None),) * fill + index[at + 1:]
        if len(index) > self.ndim:
            fail(f"too many indices ({len(index)}) for a {self.ndim}-D tensor", "index")
        index = index + (slice(None),) * (self.ndim - len(index))
        runtime = [d for d, i in enumerate(index) if isinstance(i, DynamicSlice) and i.is_runtime()]
        if runtime:
            return self._sliding(index, runtime)
        shape, strides, offset, partition = [], [], self.offset, self.partition
        kept_int = []
        for d, (i, size, stride) in enumerate(zip(index, self.shape, self.strides)):
            if isinstance(i, DynamicSlice):
                i = slice(*i.bounds(size, d))
            if isinstance(i, slice):
                start, stop, step = i.indices(size)
                if step <= 0:
                    fail("slices need a positive step", "index")
                count = max(0, (stop - start + step - 1) // step)
                if d == 0 and self.on_chip:
                    partition += start * stride
                else:
                    offset += start * stride
                shape.append(count)
                strides.append(stride * step)
                continue
            i = int(i)
            if i < 0:
                i += size
            if not 0 <= i < size:
                fail(f"index {i} is out of bounds for dimension {d} of size {size}",
                     "out_of_bounds")
            if d == 0 and self.on_chip:
                partition += i * stride
                shape.append(1)
                strides.append(stride)
            else:
                offset += i * stride
                kept_int.append(len(shape))
                shape.append(None)
                strides.append(stride)
        # Drop int-indexed dims; on chip keep the last ones needed for 2-D.
        keep = set()
        if self.on_chip:
            remaining = sum(1 for s in shape if s is not None)
            for pos in reversed(kept_int):
                if remaining >= 2:
                    break
                keep.add(pos)
                remaining += 1
        new_shape, new_strides = [], []
        for pos, (s, st) in enumerate(zip(shape, strides)):
            if s is None and pos not in keep:
                continue
            new_shape.append(1 if s is None else s)
            new_strides.append(st)
        return self._with(new_shape, new_strides, offset, partition)

    def _sliding(self, index, runtime):
        """``t[..., nl.ds(start, size), ...]`` with a start read while the
        kernel runs: the window at 0, moved by the start as an access
        pattern's scalar_offset on that dim."""
        name = "nki.language.ds"
        if len(runtime) > 1:
            fail("one nl.ds with a runtime start per access (it is the access's one "
                 "scalar_offset)", "dynamic_start", name)
        d = runtime[0]
        if self.on_chip and d == 0:
            fail("a runtime nl.ds start moves a free dim of an on-chip tensor; dim 0 is the "
                 "partitions", "dynamic_start", name)
        ds = index[d]
        size = ds.window(self.shape[d], d)
        view = self[index[:d] + (slice(0, size),) + index[d + 1:]]
        start = ds.start
        if self.on_chip and isinstance(start, NkiTensor) and start.dtype is dtypes.uint32:
            # an on-chip operand's offset word is int32 (nki.isa.scalar_load's page); a value
            # past int32's range is past any on-chip dim, and stays out of bounds
            from torchneuron.nki.isa import tensor_copy
            from torchneuron.nki import language as nl

            word = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
            tensor_copy(word, start if start.ndim == 2 else start.reshape(1, 1))
            start = word
        return IndirectTensor.moved(self, view, start, d, window=size)

    def __setitem__(self, index, value):
        from torchneuron.nki.tile_operators import assign

        assign(self[index], value)

    # ---- view methods -----------------------------------------------------

    def _dense(self, dims):
        expect = 1
        for d in reversed(dims):
            if self.shape[d] != 1 and self.strides[d] != expect:
                return False
            expect *= self.shape[d]
        return True

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(shape)
        first = 1 if self.on_chip else 0
        total = math.prod(self.shape[first:])
        if -1 in shape:
            known = math.prod(s for s in shape[first:] if s != -1)
            shape[shape.index(-1)] = total // known if known else 0
        if self.on_chip and shape[0] != self.shape[0]:
            fail(f"reshape of an on-chip tensor keeps the partition dim ({self.shape[0]}), "
                 f"got {tuple(shape)}", "reshape")
        if math.prod(shape[first:]) != total:
            fail(f"cannot reshape {self.shape} to {tuple(shape)}", "reshape")
        if not self._dense(range(first, self.ndim)):
            fail("reshape needs a contiguous view", "reshape")
        strides, expect = [], 1
        for s in reversed(shape[first:]):
            strides.append(expect)
            expect *= s
        strides.reverse()
        if self.on_chip:
            strides = [self.strides[0]] + strides
        if self.on_chip and len(shape) < 2:
            fail("on-chip tensors are at least 2-D", "reshape")
        return self._with(shape, strides)

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if sorted(dims) != list(range(self.ndim)):
            fail(f"permute needs a permutation of {self.ndim} dims, got {dims}", "permute")
        if self.on_chip and dims[0] != 0:
            fail("permute cannot move the partition dim of an on-chip tensor (use "
                 "nc_transpose)", "permute")
        return self._with([self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def transpose(self, *dims):
        return self.permute(*dims) if dims else self.permute(*reversed(range(self.ndim)))

    def broadcast_to(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if len(shape) != self.ndim:
            fail(f"broadcast_to needs {self.ndim} dims, got {shape}", "broadcast")
        strides = []
        for size, new, stride in zip(self.shape, shape, self.strides):
            if size == new:
                strides.append(stride)
            elif size == 1:
                strides.append(0)
            else:
                fail(f"cannot broadcast {self.shape} to {tuple(shape)}", "broadcast")
        return self._with(shape, strides)

    def broadcast(self, dim, size):
        shape = list(self.shape)
        shape[dim] = size
        return self.broadcast_to(shape)

    def expand_dims(self, dim):
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._with(shape, strides)

    expand_dim = expand_dims

    def slice(self, dim, start, end, step=1):
        index = [slice(None)] * self.ndim
        index[dim] = slice(start, end, step)
        return self[tuple(index)]

    def select(self, dim, index):
        idx = [slice(None)] * self.ndim
        idx[dim] = index
        return self[tuple(idx)]

    def view(self, dtype):
        dtype = dtypes.as_dtype(dtype)
        old, new = self.dtype.itemsize, dtype.itemsize
        if old == new:
            return self._with(self.shape, self.strides, dtype=dtype)
        if self.strides[-1] != 1 or (self.shape[-1] * old) % new:
            fail("view(dtype) needs a contiguous last dim whose bytes divide evenly",
                 "view")
        shape = list(self.shape)
        shape[-1] = shape[-1] * old // new
        first = 1 if self.on_chip else 0
        strides = [s if d < first else s * old // new for d, s in enumerate(self.strides[:-1])]
        if (self.offset * old) % new:
            fail("view(dtype) needs an offset aligned to the new element size", "view")
        return NkiTensor(self.storage, dtype, shape, strides + [1], self.offset * old // new,
                         self.partition)

    def indirect(self, *args, **kwargs):
        """Tensor indirection (Trainium3): a compute instruction reading or
        writing columns of this SBUF / PSUM tensor at uint16 offsets, one
        list per 16-partition group. Refused: the reference pages in reach
        (the deep dive's opening) define its terms only, not this method's
        parameters, the index tensor's layout, its rules or its cost, so it
        cannot be simulated faithfully (docs/nki.md, "Not implemented")."""
        fail("tensor indirection (NkiTensor.indirect: columns of an SBUF / PSUM tensor at "
             "uint16 offsets per 16-partition group, Trainium3) is not simulated: the "
             "reference in reach defines its terms, not the index tensor's layout, rules or "
             "cost; gather columns with nisa.nc_n_gather / local_gather or an indirect "
             "dma_copy instead", "tensor_indirection", "NkiTensor.indirect")

    def ap(self, pattern, offset=0, dtype=None, vector_offset=None, indirect_dim=0,
           scalar_offset=None):
        """A raw access pattern on the base storage: ``pattern`` is a list of
        [stride, count] pairs in elements of the storage seen as one flat
        array (on chip the first is [elements per partition, partitions]:
        partitions are read contiguously); ``offset`` counts elements from the
        storage's start (on chip: partition * elements per partition + element
        in partition).
        With ``vector_offset`` (an SBUF index tile [P, 1]) an HBM pattern is
        indirect: on ``indirect_dim`` 0, partition p is the row
        ``vector_offset[p]`` (pattern[0][0] elements each) past offset; on
        another dim d, partition p keeps its place and moves
        ``vector_offset[p]`` steps of dim d. ``scalar_offset`` (an int, a
        register, an NkiScalar or an SBUF [1, 1] word) moves the whole
        pattern that many steps of ``indirect_dim`` (an IndirectTensor when
        the value exists only while the kernel runs)."""
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self.storage.dtype
        if vector_offset is not None and scalar_offset is not None:
            fail("at most one of scalar_offset and vector_offset", "indirect_dma", "NkiTensor.ap")
        if vector_offset is not None:
            return IndirectTensor.from_pattern(self, pattern, offset, vector_offset, indirect_dim,
                                               dtype)
        shape = [int(c) for _, c in pattern]
        strides = [int(s) for s, _ in pattern]
        if self.on_chip:
            row = self.storage.nbytes // dtype.itemsize
            strides[0] = _partition_step(strides[0], shape[0] if shape else 1, row)
            partition, offset = divmod(int(offset), row) if row else (0, 0)
            view = NkiTensor(self.storage, dtype, shape, strides, offset, partition)
        else:
            view = NkiTensor(self.storage, dtype, shape, strides, offset, 0)
        if scalar_offset is None:
            return view
        return IndirectTensor.moved(self, view, scalar_offset, indirect_dim)

    # ---- access patterns for the simulator --------------------------------

    def record(self, split=None, partitions=None, name=None):
        """The nrt_nc_ap record of this view. On chip, ``split`` puts free
        dims from that index on into a separate group (reductions); returns
        (record, number of dims in the last group). In HBM, ``partitions``
        chooses how many leading elements form the outer dimension."""
        if self.on_chip:
            free = list(zip(self.strides[1:], self.shape[1:]))
            groups = [free] if split is None else [free[:split - 1], free[split - 1:]]
            dims = []
            for g in groups:
                dims += _coalesce(g)
            tail = len(_coalesce(groups[-1])) if split is not None else 0
            if split is not None and tail == 0:
                dims.append((1, 1))
                tail = 1
            part_count, part_step, part_start = self.shape[0], self.strides[0], self.partition
        else:
            dims_all = list(zip(self.strides, self.shape))
            lead = self._leading(partitions)
            outer = _coalesce(dims_all[:lead])
            if len(outer) > 1:
                fail(f"the HBM view {self.shape} cannot be split into {partitions} rows",
                     "shape_mismatch", name)
            part_step, part_count = outer[0] if outer else (0, 1)
            part_start = 0
            dims = _coalesce(dims_all[lead:])
            tail = 0
        if len(dims) > 4:
            fail(f"the access pattern of a {self.shape} view needs {len(dims)} free dims per "
                 "partition; at most 4", "max_free_dims", name)
        if not dims:
            dims = [(1, 1)]
        strides = [s for s, _ in dims] + [0] * (4 - len(dims))
        counts = [c for _, c in dims] + [1] * (4 - len(dims))
        rec = (self.storage.index, self.dtype.code, part_start, part_count, part_step,
               self.offset, len(dims), 0, tuple(strides), tuple(counts))
        return rec, tail

    def _leading(self, partitions):
        if partitions is None:
            return 1 if self.ndim >= 2 else 0
        prod = 1
        for lead in range(self.ndim + 1):
            if prod == partitions:
                return lead
            if lead < self.ndim:
                prod *= self.shape[lead]
        return 1 if self.ndim >= 2 else 0

    def rows(self):
        """Partition count of the view as the simulator sees it."""
        return self.shape[0] if (self.on_chip or self.ndim >= 2) else 1

    def free_size(self):
        return self.size // max(self.rows(), 1) if self.size else 0


def is_tensor(x):
    return isinstance(x, NkiTensor)


class IndirectTensor:
    """``tensor[indices, ...]`` with an on-chip index tile: the rows of
    tensor's first dim named by the indices (read while the kernel runs,
    partition first: index[p, j] is row j * P + p of the view), the other
    dims indexed as given (slices, or the legacy dialect's index
    expressions). Only the instructions that document an indirect form take
    it: nki.isa.dma_copy (so nl.load / nl.store / nl.atomic_rmw) and
    nki.isa.dma_transpose. ``row`` is the view of row 0 ([1, ...]; or
    [P, ...] stepping partitions when a dim other than the first is
    indexed), ``bound`` the number of values an index may take and
    ``step`` the elements between them. ``scalar``: one word (an access
    pattern's scalar_offset) moves the whole view ``row``."""

    on_chip = False

    def __init__(self, base, indices, rest, row=None, bound=None, step=None, scalar=False):
        if base.ndim < 2 and row is None:
            fail("an indirect (index-tile) access needs a tensor of at least 2 dims", "index")
        self.base = base
        self.indices = indices
        if row is None:
            from torchneuron.nki.legacy import index as legacy_index

            if legacy_index.has_index_expr(tuple(rest)):  # x[idx, i_f]: i_f spans the free dims
                row = legacy_index.index_tensor(base, (0,) + tuple(rest))
                if not isinstance(row, NkiTensor):
                    fail("the index expressions of an indirect access leave the tensor",
                         "out_of_bounds")
                if row.shape[0] != 1:
                    fail("beside an index tile, index expressions span the free axes only (the "
                         "first axis is the index tile's)", "index")
            else:
                row = base[(slice(0, 1),) + tuple(rest)]
        self.row = row
        self.bound = base.shape[0] if bound is None else int(bound)
        self.step = base.strides[0] if step is None else int(step)
        self.scalar = scalar
        if scalar:
            self.shape = tuple(row.shape)
        else:
            count = indices.shape[0] * (math.prod(indices.shape[1:]) if indices.ndim > 1 else 1) \
                if isinstance(indices, NkiTensor) else 0
            self.shape = (count,) + tuple(self.row.shape[1:])
        self.dtype = row.dtype

    @staticmethod
    def _dim_step(tensor, dim, dtype, name):
        """Elements of dtype between consecutive positions of tensor's dim."""
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < tensor.ndim:
            fail(f"indirect_dim must be a dim of the {tensor.ndim}-D tensor, got {dim!r}",
                 "indirect_dma", name)
        nbytes = tensor.strides[dim] * tensor.dtype.itemsize
        if nbytes <= 0 or nbytes % dtype.itemsize:
            fail(f"dim {dim} of the tensor is not a whole number of {dtype} elements apart",
                 "indirect_dma", name)
        return nbytes // dtype.itemsize

    @staticmethod
    def _bound(tensor, view, step, dim, name, pattern):
        """How many values an offset may take so that every partition's access
        stays inside the tensor (HBM) or its partition (on chip); at most the
        size of the indexed dim."""
        elems = view.storage.nbytes // view.dtype.itemsize
        hi = view.offset + sum(st * (c - 1) for st, c in zip(view.strides[1:], view.shape[1:])
                               if st > 0)
        if not view.on_chip and view.shape and view.strides[0] > 0:
            hi += view.strides[0] * (view.shape[0] - 1)
        bound = (elems - 1 - hi) // step + 1 if step > 0 else 0
        if bound < 1:
            fail(f"the access pattern {pattern} does not fit the tensor's {elems} elements "
                 "even at offset 0", "indirect_dma", name)
        return min(bound, tensor.shape[dim] if dim is not None else bound, 2 ** 31)

    @classmethod
    def from_pattern(cls, tensor, pattern, offset, indices, indirect_dim, dtype):
        """``tensor.ap(pattern, offset, vector_offset=indices, indirect_dim=d)``
        of an HBM tensor: on d = 0, row p starts at offset + indices[p] *
        pattern[0][0] and walks pattern[1:]; on another d, partition p
        starts at offset + p * pattern[0][0] + indices[p] * (dim d's step)."""
        name = "NkiTensor.ap"
        if tensor.on_chip:
            fail("a vector_offset (indirect) access pattern indexes an HBM tensor", "indirect_dma",
                 name)
        if len(pattern) < 2:
            fail("an indirect access pattern needs [[row step, rows], [stride, count], ...]",
                 "indirect_dma", name)
        dim = indirect_dim
        if dim != 0:
            step = cls._dim_step(tensor, dim, dtype, name)
            view = NkiTensor(tensor.storage, dtype, [int(c) for _, c in pattern],
                             [int(st) for st, _ in pattern], int(offset), 0)
            bound = cls._bound(tensor, view, step, dim, name, pattern)
            return cls(tensor, indices, (), row=view, bound=bound, step=step)
        step = int(pattern[0][0])
        rest = [(int(st), int(c)) for st, c in pattern[1:]]
        row = NkiTensor(tensor.storage, dtype, [1] + [c for _, c in rest],
                        [step] + [st for st, _ in rest], int(offset), 0)
        if step <= 0:
            fail(f"an indirect access pattern steps rows forward (pattern[0][0] > 0), got "
                 f"{pattern}", "indirect_dma", name)
        bound = cls._bound(tensor, row, step, None, name, pattern)
        return cls(tensor, indices, (), row=row, bound=bound, step=step)

    @classmethod
    def moved(cls, tensor, view, offset, indirect_dim, window=None):
        """``tensor.ap(..., scalar_offset=offset, indirect_dim=d)``: view moved
        offset steps of dim d. A value known now (an int, a constant
        register) moves it here; a value read while the kernel runs (an SBUF
        [1, 1] word, a loaded register, an NkiScalar) gives an
        IndirectTensor that one dma_copy moves."""
        name = "NkiTensor.ap"
        from torchneuron.nki.isa_register import VirtualRegister
        from torchneuron.nki.isa_scalar import NkiScalar

        dim = indirect_dim
        step = cls._dim_step(tensor, dim, view.dtype, name)
        if view.on_chip and dim == 0:
            fail("a scalar_offset on an SBUF / PSUM tensor moves a free dim (indirect_dim >= 1): "
                 "dim 0 is the partitions", "indirect_dma", name)
        if isinstance(offset, VirtualRegister) and offset.constant is not None:
            offset = offset.constant
        if isinstance(offset, numbers.Integral) and not isinstance(offset, bool):
            return view._with(view.shape, view.strides, offset=view.offset + int(offset) * step)
        if isinstance(offset, VirtualRegister):
            if offset.word is None:
                fail("the register was never given a value", "register_unset", name)
            word = offset.word
        elif isinstance(offset, NkiScalar):
            word = offset._word(name)
        else:
            word = offset
        if not isinstance(word, NkiTensor) or word.storage.buffer != SBUF or \
                word.size != 1 or word.dtype not in (dtypes.int32, dtypes.uint32, dtypes.int64):
            what = (f"a {list(word.shape)} {word.dtype} tensor in {word.buffer}"
                    if isinstance(word, NkiTensor) else type(word).__name__)
            fail(f"scalar_offset is an int, a register, an NkiScalar or an int32 / uint32 / int64 "
                 f"SBUF word [1, 1], got {what}", "indirect_indices", name)
        if view.on_chip and word.dtype is not dtypes.int32:
            fail("a scalar_offset on an SBUF or PSUM operand must be int32 (the reference "
                 "rejects a wider one there)", "indirect_indices", name)
        word = word if word.ndim == 2 else word.reshape(1, 1)
        bound = cls._bound(tensor, view, step, dim, name, [[st, c] for st, c in
                                                          zip(view.strides, view.shape)])
        if window is not None:  # an nl.ds window stays inside its dim
            bound = min(bound, tensor.shape[dim] - window + 1)
        return cls(tensor, word, (), row=view, bound=bound, step=step, scalar=True)

    def __getitem__(self, index):
        """A box of the view (the legacy dialect's masks): slices of the
        partitions (the indices too) and of the free dims."""
        if not isinstance(index, tuple) or not all(isinstance(i, slice) for i in index):
            fail("an indirect view takes slices only", "index")
        if self.scalar:
            return IndirectTensor(self.base, self.indices, (), row=self.row[index],
                                  bound=self.bound, step=self.step, scalar=True)
        index = index + (slice(None),) * (len(self.shape) - len(index))
        if self.indices.ndim != 2 or self.indices.shape[1] != 1:
            fail("a box of an indirect view needs [P, 1] indices", "index")
        part = index[0]
        row = self.row[((part if self.row.shape[0] > 1 else slice(None)),) + index[1:]]
        return IndirectTensor(self.base, self.indices[part], (), row=row, bound=self.bound,
                              step=self.step)

    @property
    def ndim(self):
        return len(self.shape)

    def free_size(self):
        return self.row.size

    def __repr__(self):
        return f"IndirectTensor(shape={self.shape}, dtype={self.dtype}, rows of {self.base!r})"
