"""torch.compile(backend="neuron"): the front end of the graph compiler.

Dynamo finds the backend through the ``torch_dynamo_backends`` entry point
(``neuron = "torchneuron.compiler.entry:neuron_backend"``); importing that
module registers the DeviceInterface that lets Dynamo trace neuron
streams, events and device guards. This package itself imports nothing
heavy, so that ``import torchneuron`` stays fast.
"""

__all__ = ["CompilationError", "neuron_backend", "wait_for_kernels"]


def neuron_backend(gm, example_inputs, **kwargs):
    """The Dynamo backend: ``torch.compile(model, backend="neuron")``."""
    from torchneuron.compiler.entry import neuron_backend as backend
    return backend(gm, example_inputs, **kwargs)


def wait_for_kernels(timeout=None) -> int:
    """Waits until the generated kernels of compiled graphs' fused groups
    that are being compiled in the background are ready (each group runs
    its tape, with the same results, until then), or ``timeout`` seconds
    have passed. Returns the compiles still pending (0: all done, or
    failed and left to the tape). ``TORCHNEURON_CODEGEN=sync`` compiles
    them with the graph instead."""
    from torchneuron import _C
    return int(_C._graph_wait_for_kernels(-1.0 if timeout is None else float(timeout)))


def __getattr__(name):
    if name == "CompilationError":
        from torchneuron.compiler.backend import CompilationError
        return CompilationError
    raise AttributeError(name)
