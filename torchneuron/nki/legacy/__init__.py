"""The legacy ``neuronxcc.nki`` dialect (the one of AWS's nki-samples).

Opt in once, then legacy kernels import and run unmodified::

    import torchneuron.nki.legacy
    torchneuron.nki.legacy.install()      # makes `import neuronxcc.nki` resolve here

    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.isa as nisa

``install`` never shadows a real ``neuronxcc`` package: when one is
importable it does nothing and returns False. Without installing,
``torchneuron.nki.legacy`` (with ``.language`` and ``.isa``) is the same
module under our name.
"""

import importlib.util
import sys
import types

from torchneuron.nki import typing  # noqa: F401  (nki.typing)
from torchneuron.nki.errors import NkiError
from torchneuron.nki.jit import Kernel, jit, simulate, simulate_kernel  # noqa: F401
from torchneuron.nki.legacy import isa, language  # noqa: F401
from torchneuron.nki.tensor import NkiTensor  # noqa: F401


def baremetal(kernel=None, **_):
    """@nki.baremetal: the kernel run on NumPy arrays (here: the simulator)."""
    if kernel is None:
        return lambda k: baremetal(k)
    return simulate(kernel)


class _Latency:
    """neuron-bench's latency statistics, here every percentile the estimate."""

    def __init__(self, latency_us):
        self.latency_us = latency_us

    def get_latency_percentile(self, percentile):
        """The estimated latency in microseconds (the cost model is
        deterministic, so every percentile is the same)."""
        if not 0 <= float(percentile) <= 100:
            raise ValueError(f"a percentile is between 0 and 100, got {percentile}")
        return self.latency_us


class BenchmarkResult:
    def __init__(self, estimate):
        self.estimate = estimate
        self.nc_latency = _Latency(estimate.latency_us)


class _Benchmarked:
    """A kernel under @nki.benchmark: calling it runs it on the simulator and
    sets ``benchmark_result`` from the cost model's estimate."""

    def __init__(self, kernel, save_trace_name=None):
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.save_trace_name = save_trace_name
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        from torchneuron.nki.benchmark import benchmark as estimate

        est = estimate(self.kernel, save_trace=self.save_trace_name)(*args, **kwargs)
        self.benchmark_result = BenchmarkResult(est)
        return simulate(self.kernel)(*args, **kwargs)


def benchmark(kernel=None, warmup=None, iters=None, save_neff_name=None, save_trace_name=None,
              **_):
    """@nki.benchmark(warmup=..., iters=...): runs the kernel and records the
    estimated latency in ``kernel.benchmark_result.nc_latency`` (us)."""
    if kernel is None:
        return lambda k: _Benchmarked(k, save_trace_name)
    return _Benchmarked(kernel, save_trace_name)


def install():
    """Registers this module as ``neuronxcc.nki`` (and ``neuronxcc``) unless a
    real neuronxcc is importable. Returns whether it installed."""
    existing = sys.modules.get("neuronxcc")
    if existing is not None:
        return getattr(existing, "__torchneuron_legacy__", False)
    if importlib.util.find_spec("neuronxcc") is not None:
        return False
    this = sys.modules[__name__]
    root = types.ModuleType("neuronxcc", "torchneuron's stand-in for neuronxcc (NKI only)")
    root.__torchneuron_legacy__ = True
    root.__path__ = []
    root.nki = this
    sys.modules["neuronxcc"] = root
    sys.modules["neuronxcc.nki"] = this
    sys.modules["neuronxcc.nki.language"] = language
    sys.modules["neuronxcc.nki.isa"] = isa
    sys.modules["neuronxcc.nki.typing"] = typing
    return True


__all__ = ["NkiError", "baremetal", "benchmark", "install", "isa", "jit", "language",
           "simulate_kernel", "typing"]
