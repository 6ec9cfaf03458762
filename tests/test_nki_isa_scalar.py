"""nki.isa.NkiScalar: device integers from scalar_load, exact 32-bit
arithmetic that wraps on overflow, scalar_store."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


def wrap32(v):
    return (int(v) + 2**31) % 2**32 - 2**31


@nki.jit
def arithmetic(index, other):
    out = nl.ndarray((6, 1), nl.int32, buffer=nl.shared_hbm)
    i = nisa.scalar_load(index)          # from HBM
    t = nl.ndarray((1, 1), nl.int32)
    nisa.dma_copy(t, other)
    j = nisa.scalar_load(t)              # from SBUF
    results = [i * 4 + 1, i * j, 3 - i, -j, i - j + 7, (i + j) * (i - j)]
    for r, s in enumerate(results):
        nisa.scalar_store(out[r:r + 1, :], s)
    return out


@pytest.mark.parametrize("i,j", [(5, 9), (100000, 100000), (2**31 - 1, 1), (-2**31, -1),
                                 (-7, 123456789)])
def test_scalar_arithmetic_is_exact_and_wraps(i, j):
    out = nki.simulate(arithmetic)(np.array([[i]], np.int32), np.array([[j]], np.int32))
    want = [i * 4 + 1, i * j, 3 - i, -j, i - j + 7, (i + j) * (i - j)]
    assert out.reshape(-1).tolist() == [wrap32(v) for v in want]


def test_scalar_load_reads_the_value_when_the_kernel_runs():
    @nki.jit
    def k(index):
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), nl.int32)
        nisa.dma_copy(t, index)
        s = nisa.scalar_load(t)
        nisa.memset(t, 42)                # later writes do not change the scalar
        nisa.scalar_store(out, s + 0)
        return out

    assert nki.simulate(k)(np.array([[17]], np.int32)).tolist() == [[17]]
    assert nki.simulate(k)(np.array([[-3]], np.int32)).tolist() == [[-3]]
    assert isinstance(nisa.NkiScalar(None), nisa.NkiScalar) and nisa.NkiScalar(None).dtype is nl.int32
