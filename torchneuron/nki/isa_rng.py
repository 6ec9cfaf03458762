"""nki.isa's random numbers: rng, rand2, dropout, set_rng_seed and
rand_set_state / rand_get_state.

Every partition lane of the Vector and GpSimd engines has XORWOW generators
(4 streams on Vector, 1 on GpSimd: 24 and 6 uint32 of state per lane) that
persist across instructions. A run starts from seed 0, so a kernel that does
not seed gives the same numbers on every call; seed it (set_rng_seed from a
value the caller varies, or rand_set_state) for fresh ones. The simulator
runs them in runtime/src/nc/exec_rng.c.
"""

from torchneuron.nki import trace
from torchneuron.nki.isa import _emit, _engine, _rec, _scalar_operand, _tile


def rng(dst, engine=None, **_):
    """dst = 32 random bits per element (the low bits for int8/16 and
    uint8/16 tiles), from the Vector (default) or GpSimd engine's generators."""
    name = "nki.isa.rng"
    _tile(dst, "dst", name)
    _emit(name, trace.RNG, _engine(engine, trace.VECTOR_ENGINE), dst, [_rec(dst, name)])
    return dst


def rand2(dst, min, max, **_):  # noqa: A002 (the ISA reference's names)
    """dst = uniform random values in [min, max) (numbers or [P, 1] tiles),
    generated in fp32 on the Vector engine and rounded to dst's dtype."""
    name = "nki.isa.rand2"
    _tile(dst, "dst", name)
    r0, lo = _scalar_operand(min, name, "min")
    r1, hi = _scalar_operand(max, name, "max")
    _emit(name, trace.RAND2, trace.VECTOR_ENGINE, dst, [_rec(dst, name), r0, r1], imm=(lo, hi))
    return dst


def dropout(dst, data, prob, **_):
    """dst = data with each element replaced by 0 with probability prob (a
    number or a [P, 1] tile): prob 1.0 drops all, 0.0 none. The kept values
    are not rescaled."""
    name = "nki.isa.dropout"
    _tile(dst, "dst", name), _tile(data, "data", name)
    r, p = _scalar_operand(prob, name, "prob")
    _emit(name, trace.DROPOUT, trace.VECTOR_ENGINE, dst, [_rec(dst, name), _rec(data, name), r],
          imm=(p,))
    return dst


def set_rng_seed(src_seeds, **_):
    """Seeds every lane of the Vector engine's generators from the 32-bit
    value in src_seeds ([1, 1], SBUF or PSUM)."""
    name = "nki.isa.set_rng_seed"
    _tile(src_seeds, "src_seeds", name)
    trace.current().emit(name, trace.RNG_SEED, trace.VECTOR_ENGINE, [_rec(src_seeds, name)])


def rand_set_state(src_seeds, engine=None, **_):
    """Sets each lane's generator state from its partition of src_seeds
    (uint32; 6 values per partition for GpSimd, 24 for Vector)."""
    name = "nki.isa.rand_set_state"
    _tile(src_seeds, "src_seeds", name)
    trace.current().emit(name, trace.RNG_SET_STATE, _engine(engine, trace.VECTOR_ENGINE),
                         [_rec(src_seeds, name)])


def rand_get_state(dst, engine=None, **_):
    """dst[P, 6 or 24] (uint32) = the generator state of each lane (GpSimd or
    Vector), for rand_set_state to restore."""
    name = "nki.isa.rand_get_state"
    _tile(dst, "dst", name)
    _emit(name, trace.RNG_GET_STATE, _engine(engine, trace.VECTOR_ENGINE), dst, [_rec(dst, name)])
    return dst
