"""nl.rand, nl.random_seed and nl.dropout: the nki.isa random instructions
(Vector engine generators, runtime/src/nc/exec_rng.c) as tile-returning calls."""

from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


def rand(shape, dtype=None, **_):
    """A new SBUF tile of uniform random values in [0, 1) (rand2, fp32 rounded
    to dtype, float32 by default)."""
    out = nl.ndarray(tuple(shape), nl.as_dtype(dtype) if dtype is not None else nl.float32)
    nisa.rand2(out, 0.0, 1.0)
    return out


def random_seed(seed, **_):
    """Seeds the Vector engine's generators: seed is a [1, 1] tile holding a
    32-bit value, or a Python int (written to such a tile first)."""
    if not isinstance(seed, NkiTensor):
        try:
            value = int(seed)
        except (TypeError, ValueError):
            fail(f"random_seed takes a [1, 1] tile or an int, got {type(seed).__name__}",
                 "operand", "nki.language.random_seed")
        seed = nl.full((1, 1), value, nl.int32)
    nisa.set_rng_seed(seed)


def dropout(x, rate, dtype=None, **_):
    """A new SBUF tile: x with each element zeroed with probability rate (a
    number or a [P, 1] tile); kept values are not rescaled."""
    out = nl.ndarray(nl._tile_shape(x), x.dtype)
    nisa.dropout(out, x, rate)
    return out if dtype is None or nl.as_dtype(dtype) == x.dtype else nl.copy(out, dtype=dtype)
