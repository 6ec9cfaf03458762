"""nki.lnc: sendrecv_compute, sendrecv and core_barrier between the two
cores of a logical NeuronCore (kernel[2]), against torch, on the host
simulator and on neuron tensors; and a negative test per rule."""

import pytest
import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.language as nl
from torchneuron.nki import lnc
from torchneuron.nki.errors import NkiError


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


@nki.jit
def exchange_reduce_sbuf(a, op):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = nl.program_id(0)
    src = nl.load(a[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    nki.lnc.sendrecv_compute(src, dst, send_to_rank=1 - r, recv_from_rank=1 - r, reduce_op=op)
    nl.store(out[r], dst)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op, ref", [(nl.add, torch.add), (nl.maximum, torch.maximum),
                                     (nl.minimum, torch.minimum)])
def test_sendrecv_compute_sbuf(op, ref, dtype):
    a = _rand(2, 128, 96, dtype=dtype)
    out = exchange_reduce_sbuf[2](a, op)
    want = ref(a[0].float(), a[1].float()).to(dtype)  # in fp32, rounded once
    assert out.dtype == dtype and torch.equal(out[0], want) and torch.equal(out[1], want)


@nki.jit
def exchange_reduce_hbm(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = nl.program_id(0)
    lnc.sendrecv_compute(a[r], out[r], 1 - r, 1 - r, nl.add)
    return out


def test_sendrecv_compute_hbm_non_contiguous_and_on_neuron():
    a = _rand(2, 64, 40).transpose(1, 2)  # non-contiguous: made contiguous first
    want = a[0] + a[1]
    out = exchange_reduce_hbm[2](a)
    assert torch.equal(out[0], want) and torch.equal(out[1], want)
    torchneuron.clear_op_tracking()
    got = exchange_reduce_hbm[2](a.to("neuron")).cpu()
    assert torch.equal(got[0], want) and torch.equal(got[1], want)
    assert not torchneuron.get_fallback_ops()


@nki.jit
def swap_and_barrier(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    halves = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = nl.program_id(0)
    src = nl.load(a[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    lnc.sendrecv(src, dst, send_to_rank=1 - r, recv_from_rank=1 - r)
    nl.store(out[r], dst)
    # Each core writes its own half of halves[0]; after the barrier core 1
    # copies all of it (both halves) into halves[1].
    rows = a.shape[1] // 2
    nl.store(halves[0, r * rows:(r + 1) * rows], nl.load(a[r, r * rows:(r + 1) * rows]))
    lnc.core_barrier(halves, (0, 1))
    if r == 1:
        nl.store(halves[1], nl.load(halves[0]))
    return out, halves


def test_sendrecv_and_core_barrier():
    a = _rand(2, 64, 32)
    out, halves = swap_and_barrier[2](a)
    assert torch.equal(out[0], a[1]) and torch.equal(out[1], a[0])
    want = torch.cat([a[0, :32], a[1, 32:]])
    assert torch.equal(halves[0], want) and torch.equal(halves[1], want)


def test_zero_size_tiles_are_refused_as_by_every_instruction():
    for shape in ((2, 0, 8), (2, 8, 0)):
        with pytest.raises(NkiError) as e:
            exchange_reduce_hbm[2](torch.empty(shape))
        assert e.value.rule == "shape", str(e.value)


def test_lnc_names():
    assert sorted(lnc.__all__) == ["core_barrier", "sendrecv", "sendrecv_compute"]
    assert nki.lnc is lnc


# ---- rules ------------------------------------------------------------------------


@nki.jit
def bad_exchange(a, case):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = nl.program_id(0)
    src = nl.load(a[r])
    dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
    peer, op = 1 - r, nl.add
    if case == "psum":
        dst = nl.ndarray(src.shape, nl.float32, buffer=nl.psum)
    elif case == "mix":
        dst = out[r]
    elif case == "shape":
        dst = nl.ndarray((src.shape[0], src.shape[1] // 2), src.dtype, buffer=nl.sbuf)
    elif case == "dtype":
        dst = nl.ndarray(src.shape, nl.bfloat16, buffer=nl.sbuf)
    elif case == "op":
        op = nl.multiply
    elif case == "self":
        peer = r
    elif case == "operand":
        src = 3.0
    lnc.sendrecv_compute(src, dst, peer, peer, op)
    nl.store(out[r], dst)
    return out


@pytest.mark.parametrize("case, rule", [
    ("psum", "collective_memory"), ("mix", "collective_memory"), ("shape", "shape_mismatch"),
    ("dtype", "dtype_mismatch"), ("op", "collective_op"), ("self", "replica_group"),
    ("operand", "operand")])
def test_sendrecv_compute_rules(case, rule):
    with pytest.raises(NkiError) as e:
        bad_exchange[2](_rand(2, 128, 16), case)
    assert e.value.rule == rule, str(e.value)


@pytest.mark.parametrize("grid", [1, 3])
def test_sendrecv_compute_needs_a_pair_of_cores(grid):
    with pytest.raises(NkiError, match="two cores") as e:
        exchange_reduce_hbm[grid](_rand(grid, 8, 8))
    assert e.value.rule == "lnc_degree"


def test_mismatched_sendrecv_compute_and_sendrecv_are_refused():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        r = nl.program_id(0)
        src = nl.load(a[r])
        dst = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
        if r == 0:
            lnc.sendrecv_compute(src, dst, 1, 1, nl.add)
        else:
            lnc.sendrecv(src, dst, 0, 0)
        nl.store(out[r], dst)
        return out

    with pytest.raises(NkiError, match="program 0 is at sendrecv_compute .*program 1 is at "
                       "sendrecv") as e:
        k[2](_rand(2, 8, 8))
    assert e.value.rule == "collective_mismatch"
