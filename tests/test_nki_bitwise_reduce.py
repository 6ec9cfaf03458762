"""Bitwise reductions on the Vector engine: nisa.tensor_reduce with a bitvec
op and nisa.tensor_scalar_reduce with bitvec ops or a bitwise reduce_op
fold raw bits (the ISA reference: bitvec operators see integers as bit
patterns, without conversion), checked against NumPy with values past
2**24 and negative ones; their rules (integer tiles, reduce_cmd idle) with a
negative test each."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of

RNG = np.random.default_rng(42)


def wide_ints(*shape):
    """int32 values whose low bits a float32 would round away."""
    return RNG.integers(-(1 << 31), (1 << 31) - 1, size=shape, dtype=np.int64).astype(np.int32)


def hbm_out(tile):
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
    nl.store(out, tile)
    return out


@nki.jit
def bitwise_reductions(a):
    rows, cols = a.shape
    x = nl.load(a.reshape((rows, 4, cols // 4)))
    outs = []
    for op in (nl.bitwise_or, nl.bitwise_and, nl.bitwise_xor):
        both = nl.ndarray((rows, 1), nl.int32)
        nisa.tensor_reduce(both, op, x, axis=(1, 2))
        last = nl.ndarray((rows, 4), nl.int32)
        nisa.tensor_reduce(last, op, x, axis=2)
        outs += [hbm_out(both), hbm_out(last)]
    return tuple(outs)


def test_tensor_reduce_with_bitwise_ops_folds_raw_bits():
    a = wide_ints(16, 24)
    got = bitwise_reductions(a)
    x = a.reshape(16, 4, 6)
    for k, ufunc in enumerate((np.bitwise_or, np.bitwise_and, np.bitwise_xor)):
        np.testing.assert_array_equal(got[2 * k][:, 0], ufunc.reduce(a, axis=1))
        np.testing.assert_array_equal(got[2 * k + 1], ufunc.reduce(x, axis=2))


@nki.jit
def scalar_then_reduce(a):
    rows, cols = a.shape
    x = nl.load(a)
    masked = nl.ndarray((rows, cols), nl.int32)
    ored = nl.ndarray((rows, 1), nl.int32)
    nisa.tensor_scalar_reduce(masked, x, nl.bitwise_and, 0x00FFFF00, nl.bitwise_or, ored)
    summed = nl.ndarray((rows, 1), nl.int32)
    shifted = nl.ndarray((rows, cols), nl.int32)
    nisa.tensor_scalar_reduce(shifted, x, nl.right_shift, 28, nl.add, summed)
    plus = nl.ndarray((rows, cols), nl.int32)
    xored = nl.ndarray((rows, 1), nl.int32)
    nisa.tensor_scalar_reduce(plus, x, nl.add, 3, nl.bitwise_xor, xored)
    return (hbm_out(masked), hbm_out(ored), hbm_out(shifted), hbm_out(summed), hbm_out(plus),
            hbm_out(xored))


def test_tensor_scalar_reduce_with_bitwise_ops_writes_reduce_res():
    a = wide_ints(8, 40)
    a[:, 0] = 5  # small values too, so the arithmetic op below stays exact
    masked, ored, shifted, summed, plus, xored = scalar_then_reduce(a)
    want = a & 0x00FFFF00
    np.testing.assert_array_equal(masked, want)
    np.testing.assert_array_equal(ored[:, 0], np.bitwise_or.reduce(want, axis=1))
    logical = (a.view(np.uint32) >> 28).astype(np.int32)
    np.testing.assert_array_equal(shifted, logical)
    np.testing.assert_array_equal(summed[:, 0], logical.sum(1))
    small = np.arange(8 * 40, dtype=np.int32).reshape(8, 40)
    _, _, _, _, plus, xored = scalar_then_reduce(small)
    np.testing.assert_array_equal(plus, small + 3)
    np.testing.assert_array_equal(xored[:, 0], np.bitwise_xor.reduce(small + 3, axis=1))


def test_a_bitwise_reduction_of_a_float_tile_is_refused():
    def k(a):
        x = nl.load(a)
        r = nl.ndarray((a.shape[0], 1), nl.float32)
        nisa.tensor_reduce(r, nl.bitwise_or, x, axis=1)
        return hbm_out(r)

    assert rule_of(k, np.zeros((4, 8), np.float32), match="integer tiles") == "dtype"


def test_a_bitwise_reduce_op_takes_no_reduce_registers():
    def k(a):
        x = nl.load(a)
        y = nl.ndarray(a.shape, nl.int32)
        r = nl.ndarray((a.shape[0], 1), nl.int32)
        nisa.tensor_scalar_reduce(y, x, nl.bitwise_and, 7, nl.bitwise_or, r,
                                  reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return hbm_out(r)

    assert rule_of(k, np.zeros((4, 8), np.int32), match="reduce_cmd idle") == "reduce_cmd"


@pytest.mark.parametrize("op", [nl.add, nl.maximum])
def test_arithmetic_reductions_of_int_tiles_are_unchanged(op):
    """The float path stays for arithmetic ops (values reduced in fp32)."""
    def k(a):
        x = nl.load(a)
        r = nl.ndarray((a.shape[0], 1), nl.int32)
        nisa.tensor_reduce(r, op, x, axis=1)
        return hbm_out(r)

    a = RNG.integers(-1000, 1000, size=(6, 10)).astype(np.int32)
    want = a.sum(1) if op is nl.add else a.max(1)
    np.testing.assert_array_equal(nki.simulate(nki.jit(k))(a)[:, 0], want)
