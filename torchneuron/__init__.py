"""TorchNeuron: the AWS NeuronCore as a native PyTorch device, ``neuron``.

``import torch`` loads this package through the ``torch.backends`` entry
point, so ``torch.device("neuron")``, ``torch.neuron`` and
``torch.accelerator`` work without importing it. Import it explicitly for
the helpers below (op tracking, fallback control).
"""

import torch

from torchneuron import _C, metrics, profiler
from torchneuron._registration import register as _register

__all__ = [
    "IndexOutOfRangeError",
    "adaptive_eager_enabled",
    "clear_op_tracking",
    "get_executed_ops",
    "get_fallback_ops",
    "get_fallback_mode",
    "get_log_level",
    "metrics",
    "nki_op",
    "profiler",
    "set_adaptive_eager",
    "set_fallback_mode",
    "set_log_level",
    "wrap_nki",
]

# An index out of range found by a neuron kernel: both an IndexError and a
# RuntimeError, whichever of the two the CPU raises for the same call.
IndexOutOfRangeError = _C.IndexOutOfRangeError


def set_fallback_mode(mode: str) -> None:
    """How ops without a native neuron kernel behave: ``"warn"`` (run on the
    CPU, warn once per op), ``"silent"`` (run on the CPU) or ``"error"``
    (raise NotImplementedError). ``TORCHNEURON_FALLBACK`` sets the default."""
    _C._set_fallback_mode(mode)


def get_fallback_mode() -> str:
    return _C._get_fallback_mode()


def get_fallback_ops() -> dict:
    """Ops that ran through the CPU fallback since the last clear, with counts."""
    return dict(_C._get_fallback_ops())


def get_executed_ops() -> dict:
    """Every op that ran on neuron (native or fallback) since the last clear, with counts."""
    return dict(_C._get_executed_ops())


def clear_op_tracking() -> None:
    _C._clear_op_tracking()


def set_log_level(level: str) -> None:
    """The least severe of the runtime's own messages (on stderr) that are
    shown: ``"error"``, ``"warning"`` (the default), ``"info"`` or
    ``"debug"``. ``TORCHNEURON_LOG_LEVEL`` sets it at start-up."""
    if not isinstance(level, str):
        raise TypeError(f"set_log_level expects a level name (str), got {type(level).__name__}")
    _C._set_log_level(level)


def get_log_level() -> str:
    return _C._get_log_level()


def set_adaptive_eager(enabled: bool) -> None:
    """Whether stream workers fuse the pointwise ops queued behind the one
    they run (adaptive eager execution; results are bitwise the same either
    way). ``TORCHNEURON_ADAPTIVE_EAGER=0`` turns it off at start-up;
    under ``NEURON_LAUNCH_BLOCKING=1`` it stays off."""
    _C._set_adaptive_eager(bool(enabled))


def adaptive_eager_enabled() -> bool:
    return _C._adaptive_eager_enabled()


def nki_op(name: str, *, mutates_args=(), device_types=None):
    """Registers an NKI kernel as the torch custom op ``name`` (see
    torchneuron.nki.torch_ops); use as a decorator."""
    from torchneuron.nki.torch_ops import nki_op as register

    return register(name, mutates_args=mutates_args, device_types=device_types)


def wrap_nki(kernel):
    """A traceable callable (a generated custom op) running an NKI kernel."""
    from torchneuron.nki.torch_ops import wrap_nki as wrap

    return wrap(kernel)


_register()
