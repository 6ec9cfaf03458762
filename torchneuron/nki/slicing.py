"""nl.ds: a window of ``size`` elements starting at ``start``, as an index.

``t[:, nl.ds(j * 512, 512)]`` is ``t[:, j * 512:(j + 1) * 512]`` spelled by
start and length, the form kernels use with loop variables. Unlike a Python
slice, a window is never clipped: one that leaves the dimension is an error.
The start must be known when the kernel is traced (an int, which loop
variables are, since loops unroll); the simulator's access patterns are
static, so a runtime start held in a tile is refused with its own rule.
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

    def bounds(self, dim_size, dim):
        """(start, stop) inside a dimension of dim_size elements."""
        from torchneuron.nki.tensor import NkiTensor

        if isinstance(self.start, NkiTensor):
            fail("nl.ds with a start held in a tile (a runtime start) is not supported: the "
                 "simulator's access patterns are fixed when the kernel is traced",
                 "dynamic_start", "nki.language.ds")
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
