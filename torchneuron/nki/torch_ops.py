"""NKI kernels as PyTorch custom ops.

``nki_op("ns::name", mutates_args=())(kernel)`` registers the kernel with
``torch.library.custom_op``: the schema comes from the kernel's type hints
(unannotated parameters are tensors, or numbers when their default is one;
``nt.tensor`` parameters are tensors; an unannotated return is one tensor),
the fake implementation from the traced output shapes, so the op works in
eager mode, under ``torch.compile`` and with ``op.register_autograd``.
``wrap_nki(kernel)`` does the same under a generated name, for code (and
later the compile backend) that needs a traceable callable.
"""

import inspect
import itertools

import torch

from torchneuron.nki.jit import Kernel, jit
from torchneuron.nki.typing import TensorType

_wrapped_ids = itertools.count()

# "ns::name" -> the Kernel of every op nki_op registered, so that the
# compiler can lower the op's graph nodes to the kernel's program.
KERNELS = {}


def _as_kernel(kernel):
    return kernel if isinstance(kernel, Kernel) else jit(kernel)


def _annotated(fn):
    """A copy of fn's signature with tensors assumed where hints are missing."""
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        ann = p.annotation
        if isinstance(ann, TensorType):
            ann = torch.Tensor
        elif ann is inspect.Parameter.empty:
            default = p.default
            ann = type(default) if isinstance(default, (bool, int, float)) else torch.Tensor
        params.append(p.replace(annotation=ann))
    ret = sig.return_annotation
    if ret is inspect.Signature.empty:
        ret = torch.Tensor
    return sig.replace(parameters=params, return_annotation=ret)


def _to_torch_dtype(dt):
    if dt.torch is None:
        raise TypeError(f"NKI output dtype {dt} has no torch dtype")
    return dt.torch


def _concrete(value):
    """A tensor with symbolic sizes as a meta tensor of their current values."""
    if isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape):
        return torch.empty(tuple(int(d) for d in value.shape), dtype=value.dtype, device="meta")
    return value


def nki_op(name, *, mutates_args=(), device_types=None):
    """Decorator registering an NKI kernel as the torch custom op ``name``."""

    def register(kernel):
        kernel = _as_kernel(kernel)
        signature = _annotated(kernel.fn)

        def impl(*args, **kwargs):
            return kernel(*args, **kwargs)

        impl.__signature__ = signature
        impl.__name__ = kernel.fn.__name__
        impl.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        impl.__annotations__["return"] = signature.return_annotation
        op = torch.library.custom_op(name, impl, mutates_args=mutates_args,
                                     device_types=device_types)

        def fake(*args, **kwargs):
            device = next((a.device for a in list(args) + list(kwargs.values())
                           if isinstance(a, torch.Tensor)), torch.device("cpu"))
            # A kernel is traced per shape: symbolic sizes are specialised
            # here (int() adds the guard), so a compiled graph recompiles for
            # a new shape as an eager call retraces.
            args = [_concrete(a) for a in args]
            kwargs = {k: _concrete(v) for k, v in kwargs.items()}
            specs = kernel.output_specs(*args, **kwargs)

            def build(spec):
                if spec is None:
                    return None
                if isinstance(spec, list):
                    return [build(s) for s in spec]
                if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], tuple) \
                        and not isinstance(spec[1], tuple):
                    shape, dt = spec
                    return torch.empty(shape, dtype=_to_torch_dtype(dt), device=device)
                return tuple(build(s) for s in spec)

            return build(specs)

        op.register_fake(fake)
        op.kernel = kernel
        if not mutates_args:
            KERNELS[name] = kernel
        return op

    return register


def wrap_nki(kernel):
    """A traceable callable for kernel: a custom op with a generated name."""
    kernel = _as_kernel(kernel)
    name = f"torchneuron_nki::{kernel.fn.__name__}_{next(_wrapped_ids)}"
    return nki_op(name)(kernel)
