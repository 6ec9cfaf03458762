"""nl.ds: a window of ``size`` elements starting at ``start``, as an index.

``t[:, nl.ds(j * 512, 512)]`` is ``t[:, j * 512:(j + 1) * 512]`` spelled by
start and length, the form kernels use with loop variables. Unlike a Python
slice, a window is never clipped: one that leaves the dimension is an error.
The start is an int (Python loop variables are, since those loops unroll)
or, as the reference allows, a value that exists only while the kernel
runs: a [1, 1] int32 / uint32 SBUF word, a loaded VirtualRegister or an
NkiScalar (a compiled loop's index). Such a window slides when the kernel
runs: the view is indirect (the access pattern's scalar_offset on that
dim, NkiTensor.ap), which only the DMA instructions take (dma_copy, so
nl.load / nl.store). One runtime start per access; the window stays inside
the dim, checked at run time (oob_mode).
"""

import operator

from torchneuron.nki.trace import fail


class DynamicSlice:
    """The index that nl.ds returns (``start`` and ``size`` elements)."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = start
        self.size = size

    def __repr__(self):
        return f"nl.ds({self.start!r}, {self.size!r})"

    def is_runtime(self):
        """Whether the start exists only while the kernel runs."""
        from torchneuron.nki.isa_register import VirtualRegister
        from torchneuron.nki.isa_scalar import NkiScalar
        from torchneuron.nki.tensor import NkiTensor

        if isinstance(self.start, VirtualRegister):
            return self.start.constant is None
        return isinstance(self.start, (NkiTensor, NkiScalar))

    def window(self, dim_size, dim):
        """The size of a window whose start is known only at run time."""
        try:
            size = operator.index(self.size)
        except TypeError:
            fail(f"nl.ds takes an integer size (the access pattern needs a static element "
                 f"count), got {self!r}", "index", "nki.language.ds")
        if not 1 <= size <= dim_size:
            fail(f"nl.ds needs a size from 1 to the dimension's {dim_size} (dimension {dim}), got "
                 f"{size}", "index", "nki.language.ds")
        return size

    def bounds(self, dim_size, dim):
        """(start, stop) inside a dimension of dim_size elements."""
        try:
            start, size = operator.index(self.start), operator.index(self.size)
        except TypeError:
            fail(f"nl.ds takes integer start and size, got {self!r}", "index", "nki.language.ds")
        if size < 1:
            fail(f"nl.ds needs a positive size, got {size}", "index", "nki.language.ds")
        if start < 0 or start + size > dim_size:
            fail(f"nl.ds({start}, {size}) leaves dimension {dim} of size {dim_size}",
                 "out_of_bounds", "nki.language.ds")
        return start, start + size


def ds(start, size):
    """A window of ``size`` elements from ``start``, for tensor indexing."""
    return DynamicSlice(start, size)
