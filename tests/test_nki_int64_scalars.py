"""64-bit device scalars, as the NKI 0.7 reference's scalar_load /
scalar_store / NkiScalar pages define them: scalar_load takes nl.int32 or
nl.int64 tiles and the scalar keeps that width; +, -, * wrap at 64 bits;
comparisons and loop bounds are refused; scalar_store writes only into a
tile of the scalar's width; an int64 scalar is an HBM access's
scalar_offset but never an on-chip one's. Checked against NumPy, with a
negative test per rule."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of_body


def _wrap64(v):
    return np.array(v & (2**64 - 1), np.uint64).view(np.int64)


@nki.jit
def arithmetic(a, b, op):
    """out = op(scalar_load(a), scalar_load(b)), then + 7 and * -3, in int64."""
    out = nl.ndarray((1, 1), nl.int64, buffer=nl.shared_hbm)
    x, y = nisa.scalar_load(a), nisa.scalar_load(b)
    r = {"add": x + y, "sub": x - y, "mul": x * y}[op]
    nisa.scalar_store(out, (r + 7) * -3)
    return out


@pytest.mark.parametrize("a,b", [(2**40 + 5, 3), (-2**62, 2**62 + 11), (2**63 - 1, 2**33 + 1),
                                 (-(2**35), -(2**31))])
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_int64_scalar_arithmetic_wraps_at_64_bits(a, b, op):
    got = nki.simulate(arithmetic)(np.array([[a]], np.int64), np.array([[b]], np.int64), op)
    r = {"add": a + b, "sub": a - b, "mul": a * b}[op]
    assert got.dtype == np.int64
    assert got[0, 0] == _wrap64((_wrap64(r).item() + 7) * -3)


@nki.jit
def int64_roundtrip_through_sbuf(a):
    """An int64 word loaded from SBUF and stored into SBUF, then out."""
    out = nl.ndarray((1, 1), nl.int64, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), nl.int64, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    u = nl.ndarray((1, 1), nl.int64, buffer=nl.sbuf)
    nisa.scalar_store(u, nisa.scalar_load(t) - 1)
    nisa.dma_copy(out, u)
    return out


def test_int64_values_are_not_truncated():
    v = -(2**50) - 12345
    got = nki.simulate(int64_roundtrip_through_sbuf)(np.array([[v]], np.int64))
    assert got[0, 0] == v - 1


@nki.jit
def pick_row(x, at):
    """x[at] of a [E, P, F] HBM tensor, at an int64 scalar (scalar_offset)."""
    e, p, f = x.shape
    out = nl.ndarray((p, f), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), x.dtype, buffer=nl.sbuf)
    s = nisa.scalar_load(at) * 1
    nisa.dma_copy(t, x.ap([[f, p], [1, f]], offset=0, scalar_offset=s, indirect_dim=0))
    nl.store(out, t)
    return out


def test_an_int64_scalar_moves_an_hbm_access():
    x = np.random.default_rng(0).standard_normal((5, 8, 6)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(pick_row)(x, np.array([[3]], np.int64)), x[3])
    # 2**32 + 1 is out of bounds: the word is read at its full width, not as its low 32 bits
    with pytest.raises(nki.NkiError, match=r"\[oob_mode\].*scalar_offset 4294967297 ") as e:
        nki.simulate(pick_row)(x, np.array([[2**32 + 1]], np.int64))
    assert e.value.rule == "oob_mode"


def test_int64_rules():
    a = np.zeros((1, 1), np.int64)

    def wide(x):
        return nisa.scalar_load(x)

    def narrow():
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.memset(t, 1)
        return nisa.scalar_load(t)

    # comparisons do not exist at 64 bits; widths do not mix
    assert rule_of_body(lambda x: wide(x) < 3, a) == "scalar_comparison"
    assert rule_of_body(lambda x: wide(x) + narrow(), a) == "scalar_operand"
    # stored only at its own width
    assert rule_of_body(lambda x: nisa.scalar_store(nl.ndarray((1, 1), nl.int32,
                                                               buffer=nl.sbuf), wide(x)),
                        a) == "scalar_operand"
    assert rule_of_body(lambda x: nisa.scalar_store(nl.ndarray((1, 1), nl.int64,
                                                               buffer=nl.sbuf), narrow()),
                        a) == "scalar_operand"
    # unsigned tiles are not scalars; immediates fit a double exactly
    assert rule_of_body(lambda x: nisa.scalar_load(nl.ndarray((1, 1), nl.uint32,
                                                              buffer=nl.sbuf)),
                        a) == "scalar_operand"
    assert rule_of_body(lambda x: wide(x) + 2**60, a) == "operand"
    # no 64-bit loop bound, and no 64-bit offset on chip
    assert rule_of_body(lambda x: nl.fori_loop(0, wide(x), lambda i: None), a) == "loop_operand"
    assert rule_of_body(lambda x: nisa.dma_copy(
        nl.ndarray((4, 2), nl.float32, buffer=nl.shared_hbm),
        nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf).ap([[8, 4], [1, 2]], offset=0,
                                                          scalar_offset=wide(x),
                                                          indirect_dim=1)),
        a) == "indirect_indices"
    # no compute engine has 64-bit lanes
    assert rule_of_body(lambda x: nisa.tensor_copy(nl.ndarray((1, 1), nl.int64, buffer=nl.sbuf),
                                                   nl.zeros((1, 1), nl.int32)),
                        a) == "int64_operand"
