"""nl.rand, nl.random_seed and nl.dropout: the nki.isa random instructions
(Vector engine generators, runtime/src/nc/exec_rng.c) as tile-returning calls."""

from torchneuron.nki import isa as nisa
from torchneuron.nki import language as nl
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail


def rand(shape, dtype=None, **_):
    """A new SBUF tile of uniform random values in [0, 1) (fp32 rounded to
    dtype, float32 by default): one rand2 on trn3; on trn1 / trn2, which
    lack rand2, the same numbers from the same Vector-engine generators as
    rng bits, shifted right by 8 and times 2^-24 (three Vector
    instructions)."""
    out = nl.ndarray(tuple(shape), nl.as_dtype(dtype) if dtype is not None else nl.float32)
    if nisa.get_nc_version() >= nisa.nc_version.gen4:
        nisa.rand2(out, 0.0, 1.0)
        return out
    bits = nl.ndarray(tuple(shape), nl.uint32)
    nisa.rng(bits)
    nisa.tensor_scalar(bits, bits, nl.right_shift, 8)
    nisa.tensor_scalar(out, bits, nl.multiply, 1.0 / 16777216.0)
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
