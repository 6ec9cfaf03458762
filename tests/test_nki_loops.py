"""Compiled loops (nl.fori_loop, nl.while_loop) and nl.ds with a start read
while the kernel runs, as the NKI 0.7 reference defines them: the body is
traced once and the simulator runs it as the loop says (runtime bounds,
zero trips, nesting, state carried through SBUF), checked against NumPy,
with the cost model's trip counts and a negative test per rule."""

import numpy as np
import pytest

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

from nki_testing import rule_of_body


def _rng(seed):
    return np.random.default_rng(seed)


def _bound(value, how):
    """A loop bound as the kernel gives it: "int" (value is an int), or read
    from the [1, 1] int32 HBM tensor value as a register or an NkiScalar."""
    if how == "int":
        return value
    word = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(word, value)
    if how == "register":
        reg = nisa.register_alloc()
        nisa.register_load(reg, word)
        return reg
    return nisa.scalar_load(word)


@nki.jit
def doubled_rows(x, lo, hi, step, how):
    """out[i] = 2 x[i] for i in range(lo, hi, step), 0 elsewhere."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.zeros((rows, cols), x.dtype, buffer=nl.sbuf))

    def body(i):
        t = nl.load(x[nl.ds(i, 1), :])
        nl.store(out[nl.ds(i, 1), :], nl.add(t, t))

    nl.fori_loop(_bound(lo, how), _bound(hi, how), body, step=step)
    return out


def _doubled(x, lo, hi, step):
    want = np.zeros_like(x)
    want[lo:hi:step] = 2 * x[lo:hi:step]
    return want


@pytest.mark.parametrize("how", ["int", "register", "scalar"])
@pytest.mark.parametrize("lo,hi,step", [(0, 9, 1), (2, 9, 3), (5, 5, 1), (7, 3, 1)])
def test_fori_loop_runs_its_body_for_each_value_of_the_range(how, lo, hi, step):
    x = _rng(0).standard_normal((9, 12)).astype(np.float32)
    args = (lo, hi) if how == "int" else (np.array([[lo]], np.int32), np.array([[hi]], np.int32))
    got = nki.simulate(doubled_rows)(x, *args, step, how)
    np.testing.assert_array_equal(got, _doubled(x, lo, hi, step))


def test_the_index_is_a_register_when_a_bound_is_one_else_a_scalar():
    seen = []

    @nki.jit
    def k(x):
        nl.fori_loop(0, 2, lambda i: seen.append(type(i).__name__))
        nl.fori_loop(nisa.register_alloc(0), 2, lambda i: seen.append(type(i).__name__))
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    nki.simulate(k)(np.zeros((2, 2), np.float32))
    assert seen == ["NkiScalar", "VirtualRegister"]  # the body is traced once per loop


@nki.jit
def row_sums_repeated(x, times):
    """out[i] = x[i] * times, summed in SBUF by an inner loop: the
    accumulator is fresh in each outer iteration and carried through the
    inner one."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)

    def outer(i):
        acc = nl.zeros((1, cols), nl.float32, buffer=nl.sbuf)
        row = nl.load(x[nl.ds(i, 1), :])

        def inner(_):
            nisa.tensor_tensor(acc, acc, row, op=nl.add)

        nl.fori_loop(0, _bound(times, "register"), inner)
        nl.store(out[nl.ds(i, 1), :], acc)

    nl.fori_loop(0, rows, outer)
    return out


@pytest.mark.parametrize("times", [0, 1, 5])
def test_nested_loops_carry_sbuf_state_through_the_inner_one(times):
    x = _rng(1).integers(-8, 8, (6, 10)).astype(np.float32)
    got = nki.simulate(row_sums_repeated)(x, np.array([[times]], np.int32))
    np.testing.assert_array_equal(got, x * times)


@nki.jit
def countdown(x, n):
    """while n: n -= 1; out[n] = x[n] + 1 (rows past the initial n stay 0)."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.zeros((rows, cols), x.dtype, buffer=nl.sbuf))
    count = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(count, n)
    init = nisa.register_alloc()
    nisa.register_load(init, count)

    def body(r):
        k = nisa.scalar_load(count) - 1
        nisa.scalar_store(count, k)
        t = nl.load(x[nl.ds(k, 1), :])
        nl.store(out[nl.ds(k, 1), :], nl.add(t, 1.0))
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, count)
        return nxt

    nl.while_loop(init, body)
    return out


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_while_loop_checks_its_condition_before_each_iteration(n):
    x = _rng(2).standard_normal((7, 5)).astype(np.float32)
    got = nki.simulate(countdown)(x, np.array([[n]], np.int32))
    want = np.zeros_like(x)
    want[:n] = x[:n] + 1
    np.testing.assert_array_equal(got, want)


def test_a_while_loop_whose_condition_never_clears_stops_at_the_iteration_limit():
    @nki.jit
    def forever(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.while_loop(nisa.register_alloc(1), lambda r: r)
        nl.store(out, nl.load(x))
        return out

    with pytest.raises(nki.NkiError, match="loop_limit") as e:
        nki.simulate(forever)(np.zeros((1, 1), np.float32))
    assert e.value.rule == "loop_limit"


# ---- nl.ds with a runtime start ------------------------------------------------------


@nki.jit
def window_of_tile(x, start, width):
    """An SBUF tile's columns [start, start + width) to HBM; start a uint32
    word, as the reference's nl.ds example declares it."""
    rows, cols = x.shape
    out = nl.ndarray((rows, width), x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    idx = nl.ndarray((1, 1), nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(idx, start)
    nisa.dma_copy(out, t[:, nl.ds(idx, width)])
    return out


def test_a_runtime_ds_start_slides_a_window_over_an_sbuf_tile():
    x = _rng(3).standard_normal((16, 40)).astype(np.float32)
    for s in (0, 9, 24):
        got = nki.simulate(window_of_tile)(x, np.array([[s]], np.uint32), 16)
        np.testing.assert_array_equal(got, x[:, s:s + 16])


def test_a_runtime_ds_window_that_leaves_its_dim_fails_the_run():
    x = np.zeros((16, 40), np.float32)
    with pytest.raises(nki.NkiError, match=r"\[oob_mode\].*25") as e:
        nki.simulate(window_of_tile)(x, np.array([[25]], np.uint32), 16)
    assert e.value.rule == "oob_mode"


@nki.jit
def hbm_rows(x, start, count):
    """x[start : start + count] of a 3-D HBM tensor, start an NkiScalar."""
    out = nl.ndarray((count, x.shape[1], 2), x.dtype, buffer=nl.shared_hbm)
    word = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(word, start)
    s = nisa.scalar_load(word) * 2
    nisa.dma_copy(out, x[nl.ds(s, count), :, 1:3])
    return out


def test_a_runtime_ds_start_moves_an_hbm_access():
    x = _rng(4).standard_normal((10, 3, 4)).astype(np.float32)
    got = nki.simulate(hbm_rows)(x, np.array([[3]], np.int32), 4)
    np.testing.assert_array_equal(got, x[6:10, :, 1:3])


# ---- cost ---------------------------------------------------------------------------


@nki.jit
def copies(x, trips):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.fori_loop(0, trips, lambda i: nl.store(out, t))
    return out


def test_the_estimate_runs_a_static_loop_its_trip_count():
    x = np.zeros((128, 512), np.float32)
    runs = {n: nki.benchmark(copies)(x, n) for n in (10, 20, 300, 600)}
    # The DMA work is the same in each iteration: exactly proportional,
    # beyond the iterations the estimate walks (64) too.
    dma = {n: r.busy_us["DMA"] for n, r in runs.items()}
    per_trip = (dma[20] - dma[10]) / 10
    assert per_trip > 0
    assert dma[600] - dma[300] == pytest.approx(300 * per_trip, rel=1e-9)
    assert runs[600].dma_bytes - runs[300].dma_bytes == 300 * 128 * 512 * 4
    assert runs[600].instructions["DMA"] - runs[300].instructions["DMA"] == 300
    lat = {n: r.latency_us for n, r in runs.items()}
    assert lat[600] - lat[300] == pytest.approx(30 * (lat[20] - lat[10]), rel=1e-6)


# ---- rules --------------------------------------------------------------------------


def test_loop_rules():
    x = np.zeros((4, 8), np.float32)

    def float_register():
        w = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(w, 3.0)
        reg = nisa.register_alloc()
        nisa.register_load(reg, w)
        return reg

    assert rule_of_body(lambda x: nl.fori_loop(0, 4, lambda i: None, step=0), x) == "loop"
    assert rule_of_body(lambda x: nl.fori_loop(0, 4, "body"), x) == "loop"
    assert rule_of_body(lambda x: nl.fori_loop(0, 2.5, lambda i: None), x) == "loop_operand"
    assert rule_of_body(lambda x: nl.fori_loop(0, 2**31, lambda i: None), x) == "loop_operand"
    assert rule_of_body(lambda x: nl.fori_loop(0, float_register(), lambda i: None),
                        x) == "loop_operand"
    assert rule_of_body(lambda x: nl.while_loop(3, lambda r: r), x) == "loop_operand"
    assert rule_of_body(lambda x: nl.while_loop(nisa.register_alloc(1), lambda r: None),
                        x) == "loop"
    assert rule_of_body(lambda x: nl.while_loop(nisa.register_alloc(), lambda r: r),
                        x) == "register_unset"


def test_runtime_ds_rules():
    x = np.zeros((4, 8), np.float32)

    def word(dtype=nl.int32):
        w = nl.ndarray((1, 1), dtype, buffer=nl.sbuf)
        nisa.memset(w, 0)
        return w

    def tile():
        return nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)

    # one runtime start per access; never the partitions of an on-chip tensor
    assert rule_of_body(lambda x: nl.load(x[nl.ds(word(), 2), nl.ds(word(), 2)]),
                        x) == "dynamic_start"
    assert rule_of_body(lambda x: nl.store(x, tile()[nl.ds(word(), 4), :]), x) == "dynamic_start"
    # the size is a static positive int no larger than the dim
    assert rule_of_body(lambda x: nl.load(x[:, nl.ds(word(), 9)]), x) == "index"
    assert rule_of_body(lambda x: nl.load(x[:, nl.ds(word(), word())]), x) == "index"
    # the start word: an int32 / uint32 [1, 1] SBUF word
    assert rule_of_body(lambda x: nl.load(x[:, nl.ds(word(nl.float32), 2)]),
                        x) == "indirect_indices"
    # only the DMA instructions and tensor_copy_dynamic_src / _dst take a sliding view
    assert rule_of_body(lambda x: nisa.tensor_copy(tile()[:, 0:2], tile()[:, nl.ds(word(), 2)]),
                        x) == "dynamic_start"


def test_compiled_loops_on_a_grid_and_on_neuron_tensors():
    import torch

    import torchneuron

    @nki.jit
    def scaled_half(x, times):
        """Program p of 2 adds its half of x to itself `times` times (a loop per core)."""
        rows, cols = x.shape
        half = rows // 2
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        t = nl.load(x[p * half:(p + 1) * half, :])
        acc = nl.zeros((half, cols), nl.float32, buffer=nl.sbuf)
        nl.fori_loop(0, _bound(times, "register"),
                     lambda i: nisa.tensor_tensor(acc, acc, t, op=nl.add))
        nl.store(out[p * half:(p + 1) * half, :], acc)
        return out

    x = torch.randint(-4, 4, (8, 16)).float()
    times = torch.tensor([[3]], dtype=torch.int32)
    torchneuron.clear_op_tracking()
    got = scaled_half[2](x.to("neuron"), times.to("neuron")).cpu()
    assert not torchneuron.get_fallback_ops()
    assert torch.equal(got, x * 3)
