"""torch.compile(backend="neuron"): the front end of the graph compiler.

Dynamo finds the backend through the ``torch_dynamo_backends`` entry point
(``neuron = "torchneuron.compiler.entry:neuron_backend"``); importing that
module registers the DeviceInterface that lets Dynamo trace neuron
streams, events and device guards. This package itself imports nothing
heavy, so that ``import torchneuron`` stays fast.
"""

__all__ = ["CompilationError", "neuron_backend"]


def neuron_backend(gm, example_inputs, **kwargs):
    """The Dynamo backend: ``torch.compile(model, backend="neuron")``."""
    from torchneuron.compiler.entry import neuron_backend as backend
    return backend(gm, example_inputs, **kwargs)


def __getattr__(name):
    if name == "CompilationError":
        from torchneuron.compiler.backend import CompilationError
        return CompilationError
    raise AttributeError(name)
