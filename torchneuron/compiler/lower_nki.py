"""NKI kernels inside compiled graphs.

An op registered with ``torchneuron.nki_op`` (or made by ``wrap_nki``) is
a node of the FX graph; its lowering traces the kernel for the node's
(static) shapes, exactly as an eager call does, and emits one graph node
that carries the traced program: the runtime checks it against the
NeuronCore's rules when the graph is compiled and runs it inside the
compiled program, with its HBM tensors bound to the graph's buffers. So
the kernel is launched by the program, with no graph break and no return
to Python. Kernels with symbolic shapes, several programs (a grid) or
mutated arguments run through the eager path instead.
"""

import struct

import torch

from torchneuron.compiler.ir import Unsupported
from torchneuron.compiler.lowering import fake, is_contiguous_layout


def nki_kernel_of(target):
    """The Kernel behind an FX target, or None."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    from torchneuron.nki.torch_ops import KERNELS
    return KERNELS.get(target._schema.name)


def _static(value, what):
    for s in value:
        if not isinstance(s, int):
            raise Unsupported(f"NKI kernel: {what} has a symbolic size")
    return tuple(value)


def lower_nki(ctx, node, kernel):
    from torchneuron.nki import trace

    args = list(node.args)
    kwargs = dict(node.kwargs)
    device = None
    for a in list(args) + list(kwargs.values()):
        f = fake(a)
        if isinstance(f, torch.Tensor):
            if f.device.type != "neuron":
                raise Unsupported(f"NKI kernel: an argument on {f.device}")
            _static(f.shape, "an argument")
            device = f.device.index if f.device.index is not None else 0
    if device is None:
        raise Unsupported("NKI kernel: no tensor argument")
    fake_args = [fake(a) for a in args]
    fake_kwargs = {k: fake(v) for k, v in kwargs.items()}
    program = kernel.specialise(fake_args, fake_kwargs, 0, 1, device)
    insts, tensors = program.tracer.pack()

    # Operands: the kernel's HBM outputs first, then its arguments, each a
    # contiguous view (a strided argument is copied first, as eager does).
    result = node.meta["val"]
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    result_storages = program.result
    result_storages = list(result_storages) if isinstance(result_storages, (tuple, list)) else [result_storages]
    if len(result_storages) != len(results):
        raise Unsupported("NKI kernel: its results do not match the op's")
    outputs, bound, values = [], [], []
    by_index = {}
    for k, s in enumerate(result_storages):
        if s is None:
            values.append(None)
            continue
        v = ctx.result(node, k if isinstance(result, (tuple, list)) else None)
        by_index[s.index] = v
        values.append(v)
    for s in program.outputs():  # HBM the kernel creates but does not return
        if s.index not in by_index:
            by_index[s.index] = ctx.temp(s.dtype.torch, s.shape)
    for s in program.storages:
        if s.buffer == trace.HBM and s.kind != "arg":
            outputs.append(by_index[s.index])
            bound.append(s.index)
    inputs = []
    for s in program.storages:
        if s.kind != "arg":
            continue
        pos = s.arg_position
        arg = args[pos] if isinstance(pos, int) else kwargs[pos]
        v = ctx.operand(arg)
        if not is_contiguous_layout(v.shape, v.strides):
            t = ctx.temp(v.dtype, v.shape)
            ctx.emit("copy", [t], [v])
            v = t
        inputs.append(v)
        bound.append(s.index)
    if len(outputs) + len(inputs) > 8:
        raise Unsupported("NKI kernel: more than 8 HBM tensors")
    blobs = [ctx.b.blob(insts), ctx.b.blob(tensors), ctx.b.blob(struct.pack(f"<{len(bound)}i", *bound))]
    ctx.emit("nki_kernel", outputs, inputs, blobs, compute_dtype=torch.float32)
    if isinstance(result, (tuple, list)):
        return tuple(values)
    return values[0]
