"""nki.typing: annotations for a kernel's tensor parameters.

``def kernel(x: nt.tensor[128, 512], w: nt.tensor[[512], nl.bfloat16])``
declares the shape (and optionally the dtype) each argument must have; a
bare ``nt.tensor`` declares only that the argument is a tensor. ``@nki.jit``
checks the declarations when it specialises the kernel, so a call with the
wrong shape fails at the call with the parameter named (rule
``annotation``) instead of deep inside the kernel. ``nki_op`` reads these
parameters as ``torch.Tensor`` in the op's schema.
"""

import inspect
import operator

from torchneuron.nki import dtypes
from torchneuron.nki.errors import NkiError


class TensorType:
    """``nt.tensor``, or ``nt.tensor[shape]`` / ``nt.tensor[shape, dtype]``."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape=None, dtype=None):
        self.shape = shape
        self.dtype = dtype

    def __getitem__(self, item):
        dtype = None
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (tuple, list)):
            item, dtype = item
        dims = item if isinstance(item, (tuple, list)) else (item,)
        try:
            shape = tuple(operator.index(d) for d in dims)
        except TypeError:
            raise TypeError(f"nt.tensor[...] takes integer sizes (and a dtype after a "
                            f"bracketed shape), got {item!r}") from None
        return TensorType(shape, dtypes.as_dtype(dtype) if dtype is not None else None)

    def __repr__(self):
        if self.shape is None:
            return "nt.tensor"
        dims = ", ".join(str(d) for d in self.shape)
        return f"nt.tensor[[{dims}], {self.dtype!r}]" if self.dtype else f"nt.tensor[{dims}]"

    def mismatch(self, value):
        """Why value does not fit this declaration (None when it does)."""
        shape = getattr(value, "shape", None)
        if shape is None or not hasattr(value, "dtype"):
            return f"expected a tensor, got {type(value).__name__}"
        if self.shape is not None and tuple(shape) != self.shape:
            return f"expected shape {self.shape}, got {tuple(shape)}"
        if self.dtype is not None and dtypes.as_dtype(value.dtype) is not self.dtype:
            return f"expected dtype {self.dtype!r}, got {dtypes.as_dtype(value.dtype)!r}"
        return None


tensor = TensorType()

__all__ = ["tensor"]


def _evaluated(annotation, fn):
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, fn.__globals__)  # noqa: S307 - the kernel's own hint
    except Exception:  # noqa: BLE001 - a hint that does not evaluate declares nothing
        return None


def declarations(fn):
    """({parameter name: TensorType}, signature) for fn. String annotations
    (``from __future__ import annotations``) are evaluated in fn's module, each
    on its own; one that does not evaluate declares nothing."""
    sig = inspect.signature(fn)
    decls = {}
    for name, p in sig.parameters.items():
        annotation = _evaluated(p.annotation, fn)
        if isinstance(annotation, TensorType):
            decls[name] = annotation
    return decls, sig


def check_arguments(fn, args, kwargs, location):
    """Raises an NkiError (rule ``annotation``) naming the first argument that
    does not fit its parameter's nt.tensor declaration."""
    decls, sig = declarations(fn)
    if not decls:
        return
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return  # the call itself fails with Python's own message
    for name, decl in decls.items():
        if name in bound.arguments:
            why = decl.mismatch(bound.arguments[name])
            if why:
                raise NkiError(f"argument {name!r} does not match its annotation {decl!r}: "
                               f"{why}", rule="annotation", instruction="nki.typing.tensor",
                               filename=location[0], line=location[1])
