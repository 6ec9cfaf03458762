"""nki.isa's DMA read-modify-write (dma_copy's dst_rmw_op), dma_compute and the
virtual registers against NumPy, with their rules."""

import numpy as np
import pytest

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of_body

HBM = np.zeros((4, 4), np.float32)  # the kernel argument of the rule tests


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- dma_copy(dst_rmw_op=nl.add) and dma_compute --------------------------------------------

@nki.jit
def rmw_kernel(acc, x):
    t = nl.load(x)
    nisa.dma_copy(acc, t, dst_rmw_op=nl.add)  # HBM += SBUF
    nisa.dma_copy(t, x, dst_rmw_op=nl.add)    # SBUF += HBM
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_dma_copy_read_modify_write():
    acc = rng(1).standard_normal((16, 24)).astype(np.float32)
    x = rng(2).standard_normal((16, 24)).astype(np.float32)
    before = acc.copy()
    out = nki.simulate(rmw_kernel)(acc, x)
    np.testing.assert_array_equal(acc, before + x)  # the kernel wrote its argument
    np.testing.assert_array_equal(out, x + x)


@nki.jit
def compute_kernel(a, b, c, out_dtype):
    out = nl.ndarray(a.shape, out_dtype, buffer=nl.shared_hbm)
    nisa.dma_compute(out, [a, nl.load(b), c], [1.0, 1.0, 1.0], nl.add)
    return out


@pytest.mark.parametrize("out_dtype", [nl.float32, nl.float16])
def test_dma_compute_sums_in_fp32_and_rounds_once(out_dtype):
    a, b, c = (rng(s).standard_normal((8, 40)).astype(np.float32) for s in (3, 4, 5))
    b = b.astype(np.float16)
    got = nki.simulate(compute_kernel)(a, b, c, out_dtype)
    ref = (a + b.astype(np.float32)) + c  # fp32, in source order
    want = ref if out_dtype is nl.float32 else ref.astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_dma_compute_with_dst_among_the_sources():
    @nki.jit
    def k(a, b):
        nisa.dma_compute(a, [b, a], [1.0, 1.0], nl.add)
        return None

    a, b = np.ones((4, 8), np.float32), np.full((4, 8), 2.0, np.float32)
    nki.simulate(k)(a, b)
    np.testing.assert_array_equal(a, 3.0)


def test_dma_rules():
    for body, rule in [
        (lambda a: nisa.dma_copy(a, a, dst_rmw_op=nl.multiply), "operand"),
        (lambda a: nisa.dma_compute(a, [a, a], [1.0, 2.0], nl.add), "dma_compute_scales"),
        (lambda a: nisa.dma_compute(a, [a] * 17, [1.0] * 17, nl.add), "dma_compute_sources"),
        (lambda a: nisa.dma_compute(a, [a, a], [1.0, 1.0], nl.maximum), "operand"),
        (lambda a: nisa.dma_compute(a, [a[0:2]], [1.0], nl.add), "shape_mismatch"),
    ]:
        assert rule_of_body(body, HBM) == rule


# ---- virtual registers -------------------------------------------------------------------------

@nki.jit
def register_kernel(src):
    out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
    fout = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    tile = nl.ndarray((1, 4), nl.int32)
    r = nisa.register_alloc(7)
    nisa.register_store(tile[0:1, 0:1], r)        # a constant into SBUF
    nisa.register_move(r, -3)
    nisa.register_store(out[0:1, 1:2], r)         # a constant into HBM
    loaded = nisa.register_alloc()
    s = nl.load(src)
    nisa.register_load(loaded, s[0:1, 2:3])       # from SBUF, read at run time
    nisa.memset(s, 0)                             # the register keeps what it read
    nisa.register_store(tile[0:1, 2:3], loaded)
    h = nisa.register_alloc()
    nisa.register_load(h, src[0, 3])             # from HBM (a one-element view)
    nisa.register_store(tile[0:1, 3:4], h)
    f = nisa.register_alloc()
    nisa.register_load(f, s.view(nl.float32)[0:1, 0:1])  # raw bits: memset 0 -> 0.0
    nisa.register_store(fout, f)
    nl.store(out[0:1, 0:1], tile[0:1, 0:1])
    nl.store(out[0:1, 2:4], tile[0:1, 2:4])
    return out, fout


def test_registers_store_constants_and_loaded_values():
    src = np.array([[10, 11, 12, 13]], np.int32)
    out, fout = nki.simulate(register_kernel)(src)
    np.testing.assert_array_equal(out, [[7, -3, 12, 13]])
    assert fout[0, 0] == 0.0


def test_a_constant_register_is_a_trace_time_int():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        for _ in range(nisa.register_alloc(3)):
            t = nl.add(t, 1.0)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(nki.simulate(k)(np.zeros((2, 2), np.float32)), 3.0)


def test_register_rules():
    for body, rule in [
        (lambda a: nisa.register_store(a[0:1, 0:1], nisa.register_alloc()), "register_unset"),
        (lambda a: nisa.register_load(nisa.register_alloc(), a), "register_operand"),
        (lambda a: nisa.register_load(nisa.register_alloc(),
                                     nl.zeros((1, 1), nl.float32, buffer=nl.psum)),
         "register_operand"),
        (lambda a: nisa.register_move(nisa.register_alloc(), 1.5), "operand"),
        (lambda a: nisa.register_move(3, 1), "operand"),
    ]:
        assert rule_of_body(body, HBM) == rule

    def loaded_as_loop_bound(a):
        r = nisa.register_alloc()
        nisa.register_load(r, a[0:1, 0:1])
        range(r)

    assert rule_of_body(loaded_as_loop_bound, HBM) == "dynamic_register"

    def wrong_width(a):
        r = nisa.register_alloc()
        nisa.register_load(r, a[0:1, 0:1])
        nisa.register_store(nl.ndarray((1, 1), nl.int16), r)

    assert rule_of_body(wrong_width, HBM) == "register_operand"
