"""The decomposition table AOTAutograd traces with.

Decompose what has no native neuron kernel, keep what has one: an op with
a PrivateUse1 kernel stays whole (addmm, SDPA, layer norm, softmax, the
activations and their backward ops), so the compiled graph reaches the
same kernels eager runs. Of the rest, PyTorch's core ATen decompositions
are taken, which turns composite ops into ones we lower.
"""

import functools

import torch
from torch._decomp import core_aten_decompositions


def has_native_kernel(op) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")
    except Exception:
        return False


@functools.lru_cache(maxsize=1)
def _table():
    table = {}
    for op, fn in core_aten_decompositions().items():
        if isinstance(op, torch._ops.OpOverload) and not has_native_kernel(op):
            table[op] = fn
    return table


def decomposition_table() -> dict:
    return dict(_table())
