"""torchneuron.nki: the Neuron Kernel Interface on the simulated NeuronCore.

Write kernels as with the ``nki`` package::

    import torchneuron.nki as nki
    import torchneuron.nki.language as nl
    import torchneuron.nki.isa as nisa
    import torchneuron.nki.typing as nt

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

and call them with ``neuron`` tensors (asynchronous, on the current stream)
or NumPy arrays (simulated on the host). docs/nki.md is the user guide.
"""

from torchneuron.nki import collectives, isa, language, lnc, typing
from torchneuron.nki.benchmark import Estimate, benchmark
from torchneuron.nki.errors import NkiError
from torchneuron.nki.jit import Kernel, jit, simulate, simulate_kernel
from torchneuron.nki.ranks import distributed
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.torch_ops import nki_op, wrap_nki

__all__ = ["Estimate", "collectives", "Kernel", "NkiError", "NkiTensor", "benchmark", "isa", "jit", "language", "lnc",
           "nki_op", "simulate", "simulate_kernel", "typing", "wrap_nki", "distributed"]
