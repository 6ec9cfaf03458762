"""Launch grids of more than one axis (``kernel[2, 3]``, the legacy
``kernel[nl.spmd_dim(...), n]``): the programs are numbered row-major and
nl.program_id(axis) / nl.num_programs(axis) / nl.program_ndim() give each
its coordinates, as the NKI SPMD programming model's grids do. Checked
against NumPy, with collectives across the flattened ranks and the
launch-grid errors."""

import numpy as np
import pytest
import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.collectives as ncc
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def tiles_by_coordinates(a):
    """Program (i, j) of a [G0, G1] grid adds 100 i + j + 1000 ndim to its
    block of rows i and columns j."""
    rows, cols = a.shape
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    r, c = rows // nl.num_programs(0), cols // nl.num_programs(1)
    block = nl.load(a[i * r:(i + 1) * r, j * c:(j + 1) * c])
    bump = 100.0 * i + j + 1000.0 * nl.program_ndim() + 0 * nl.program_id(2)
    nl.store(out[i * r:(i + 1) * r, j * c:(j + 1) * c], nl.add(block, bump))
    return out


@pytest.mark.parametrize("grid", [(2, 3), (3, 2), (1, 4), (4, 1)])
def test_programs_of_a_two_axis_grid_know_their_coordinates(grid):
    a = np.random.default_rng(0).standard_normal((12, 24)).astype(np.float32)
    got = nki.simulate(tiles_by_coordinates)[grid](a)
    want = a.copy()
    r, c = 12 // grid[0], 24 // grid[1]
    for i in range(grid[0]):
        for j in range(grid[1]):
            want[i * r:(i + 1) * r, j * c:(j + 1) * c] += 100 * i + j + 2000
    np.testing.assert_array_equal(got, want)


def test_a_grid_of_spmd_dims_on_neuron_tensors():
    from torchneuron.nki import legacy

    a = torch.randn(8, 12)
    torchneuron.clear_op_tracking()
    got = tiles_by_coordinates[legacy.language.spmd_dim(2, 2), 3](a.to("neuron")).cpu()
    assert not torchneuron.get_fallback_ops()
    want = a.clone()
    for i in range(4):
        for j in range(3):
            want[2 * i:2 * i + 2, 4 * j:4 * j + 4] += 100 * i + j + 2000
    assert torch.equal(got, want)


def test_collectives_span_the_flattened_grid():
    @nki.jit
    def summed(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.memset(s, 0.0)
        mine = nl.add(t, float(nl.program_id(0) * 10 + nl.program_id(1)))
        ncc.all_reduce(srcs=[mine], dsts=[s], replica_group=ncc.ReplicaGroup([list(range(6))]),
                       op=nl.add)
        nl.store(out, s)
        return out

    a = np.ones((4, 8), np.float32)
    got = nki.simulate(summed)[2, 3](a)
    np.testing.assert_array_equal(got, 6 * a + sum(10 * i + j for i in range(2) for j in range(3)))


@pytest.mark.parametrize("grid", [(2, 0), (0,), ("a", 2), ()])
def test_a_launch_grid_is_positive_ints(grid):
    with pytest.raises(ValueError, match="launch grid"):
        tiles_by_coordinates[grid]
