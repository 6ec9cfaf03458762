"""The NeuronCore-v4 (trn3) only instructions activate2 and rand2, against
NumPy / torch. The simulated generation is fixed per process, so the cases run
in a child pytest with NEURON_PLATFORM_TARGET_OVERRIDE=trn3, started by
test_cases_pass_on_trn3 (on any other device the cases are skipped); their
generation rule (nc_version) and nl.prelu / nl.rand's trn2 lowerings are
tested on the default device in test_nki_rules.py, test_nki_isa_select.py and
test_nki_isa_rng.py."""

import os

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import NkiError

from conftest import check_output, run_python
from test_nki_isa_rng import xorwow_rows

ON_TRN3 = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE") == "trn3"
trn3 = pytest.mark.skipif(not ON_TRN3, reason="runs in the trn3 child (test_cases_pass_on_trn3)")


@pytest.mark.skipif(ON_TRN3, reason="the driver runs on the default device")
def test_cases_pass_on_trn3():
    code = f"""
        import sys, pytest
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", {os.path.abspath(__file__)!r}]))
    """
    out = check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}, timeout=600))
    assert " passed" in out and "failed" not in out, out


def rng(seed=0):
    return np.random.default_rng(seed)


def _np_alu(name):
    return {None: lambda x, s: x, "add": np.add, "subtract": np.subtract,
            "multiply": np.multiply}[name]


def _uniform(bits):
    return (bits >> 8).astype(np.float32) * np.float32(1 / 16777216)


# ---- activate2 and nl.prelu -----------------------------------------------------------

@nki.jit
def activate2_kernel(x, s, fn, op0, op1, imm0_tile, imm1, reverse0, reverse1, reduce_op):
    rows = x.shape[0]
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    red_out = nl.ndarray((rows, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    imm0 = nl.load(s) if imm0_tile else 0.75
    res = nl.ndarray(x.shape, nl.float32)
    red = nl.ndarray((rows, 1), nl.float32)
    nisa.activate2(res, fn, t, imm0, imm1, op0, op1, reverse0=reverse0, reverse1=reverse1,
                   reduce_op=reduce_op, reduce_res=red)
    nl.store(out, res), nl.store(red_out, red)
    return out, red_out


@trn3
@pytest.mark.parametrize("fn,np_fn", [(nl.exp, np.exp), (nl.tanh, np.tanh), (nl.copy, None)])
@pytest.mark.parametrize("op0,op1", [("multiply", "add"), ("multiply", "subtract"),
                                     ("subtract", None), (None, None)])
@pytest.mark.parametrize("reverse", [False, True])
def test_activate2(fn, np_fn, op0, op1, reverse):
    x = rng(1).uniform(-1, 1, (32, 24)).astype(np.float32)
    s = rng(2).uniform(0.5, 1.5, (32, 1)).astype(np.float32)
    ops = {None: None, "add": nl.add, "subtract": nl.subtract, "multiply": nl.multiply}
    got, red = nki.simulate(activate2_kernel)(x, s, fn, ops[op0], ops[op1], True, -0.25, reverse,
                                              reverse, nl.maximum)
    f0, f1 = _np_alu(op0), _np_alu(op1)
    v = f0(s, x) if reverse and op0 else f0(x, s)
    v = f1(np.float32(-0.25), v) if reverse and op1 else f1(v, np.float32(-0.25))
    ref = np_fn(v) if np_fn else v
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(red[:, 0], ref.max(axis=1), rtol=2e-6, atol=2e-6)


@trn3
def test_activate2_immediate_and_row_sum():
    x = rng(3).standard_normal((16, 40)).astype(np.float32)
    got, red = nki.simulate(activate2_kernel)(x, x[:, :1], nl.sigmoid, nl.multiply, nl.add, False,
                                              0.5, False, False, nl.add)
    ref = 1 / (1 + np.exp(-(x * 0.75 + 0.5)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(red[:, 0], ref.sum(axis=1), rtol=1e-5)


@trn3
def test_prelu_through_activate2_with_scale():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, nl.bfloat16)
        nisa.activate2(r, nl.prelu, nl.load(x), 2.0, 0.0, nl.multiply, None, relu_param=0.25)
        nl.store(out, r)
        return out

    x = torch.randn(8, 64)
    ref = torch.nn.functional.prelu(2 * x, torch.tensor([0.25])).to(torch.bfloat16)
    torch.testing.assert_close(k(x.to("neuron")).cpu(), ref, rtol=0, atol=0)



# ---- rand2 -------------------------------------------------------------------------------

@nki.jit
def rand_dropout_kernel(x, prob, lo, hi):
    rows, cols = x.shape
    state_out = nl.ndarray((rows, 24), nl.uint32, buffer=nl.shared_hbm)
    u_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    d_out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    state = nl.ndarray((rows, 24), nl.uint32)
    nisa.rand_get_state(state)
    u = nl.ndarray(x.shape, nl.float32)
    nisa.rand2(u, lo, hi)
    d = nl.ndarray(x.shape, x.dtype)
    nisa.dropout(d, nl.load(x), prob)
    nl.store(state_out, state), nl.store(u_out, u), nl.store(d_out, d)
    return state_out, u_out, d_out


@trn3
def test_rand2_and_dropout_against_the_reference_generator():
    x = np.random.default_rng(0).standard_normal((16, 300)).astype(np.float32)
    state, u, d = nki.simulate(rand_dropout_kernel)(x, 0.3, -2.0, 3.0)
    bits = xorwow_rows(state, 600, 4)
    ref_u = np.float32(-2.0) + _uniform(bits[:, :300]) * np.float32(5.0)
    np.testing.assert_array_equal(u, ref_u)
    assert u.min() >= -2.0 and u.max() < 3.0
    ref_d = np.where(_uniform(bits[:, 300:]) < np.float32(0.3), np.float32(0), x)
    np.testing.assert_array_equal(d, ref_d)
    assert abs((d == 0).mean() - 0.3) < 0.03


@trn3
def test_activate2_relu_param_tile():
    """relu_param as a [P, 1] tile: one negative slope per partition."""
    @nki.jit
    def k(x, alpha):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, nl.float32)
        nisa.activate2(r, nl.prelu, nl.load(x), 0.5, 0.0, nl.multiply, None,
                       relu_param=nl.load(alpha), reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nl.store(out, r)
        return out

    x = torch.randn(32, 48)
    alpha = torch.linspace(-1, 1, 32).reshape(32, 1)
    ref = torch.where(0.5 * x >= 0, 0.5 * x, alpha * (0.5 * x))
    torch.testing.assert_close(k(x, alpha), ref, rtol=0, atol=0)


@nki.jit
def prelu_reduce_kernel(x, alpha, s0, s1, reduce_op, reduce_cmd, out_dtype):
    """Every operand slot in use: data, imm0 and imm1 tiles, reduce_res, relu_param."""
    rows = x.shape[0]
    out = nl.ndarray(x.shape, out_dtype, buffer=nl.shared_hbm)
    red_out = nl.ndarray((rows, 1), nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray(x.shape, out_dtype)
    red = nl.ndarray((rows, 1), nl.float32)
    nisa.activate2(r, nl.prelu, nl.load(x), nl.load(s0), nl.load(s1), nl.multiply, nl.add,
                   relu_param=nl.load(alpha), reduce_op=reduce_op, reduce_res=red,
                   reduce_cmd=reduce_cmd)
    nl.store(out, r), nl.store(red_out, red)
    return out, red_out


@trn3
@pytest.mark.parametrize("reduce_op,np_red", [(nl.add, np.sum), (nl.maximum, np.max),
                                              (nl.minimum, np.min)])
@pytest.mark.parametrize("bf16", [False, True])
def test_activate2_relu_param_tile_with_reduce_res(reduce_op, np_red, bf16):
    """A [P, 1] relu_param tile together with reduce_res: reduce_res gets the
    reduction of the fp32 results (before dst's rounding), in element order."""
    x = rng(4).standard_normal((32, 40)).astype(np.float32)
    alpha = np.linspace(-1, 1, 32, dtype=np.float32).reshape(32, 1)
    s0 = rng(5).uniform(0.5, 1.5, (32, 1)).astype(np.float32)
    s1 = rng(6).standard_normal((32, 1)).astype(np.float32)
    dt = nl.bfloat16 if bf16 else nl.float32
    got, red = nki.simulate(prelu_reduce_kernel)(x, alpha, s0, s1, reduce_op,
                                                 nisa.reduce_cmd.idle, dt)
    v = x * s0 + s1
    ref = np.where(v >= 0, v, alpha * v).astype(np.float32)
    want = torch.from_numpy(ref).to(torch.bfloat16).float().numpy() if bf16 else ref
    np.testing.assert_array_equal(np.asarray(got, np.float32), want)
    if reduce_op is nl.add:  # in order along the row, fp32
        acc = np.zeros(32, np.float32)
        for j in range(ref.shape[1]):
            acc = acc + ref[:, j]
        np.testing.assert_array_equal(red[:, 0], acc)
    else:
        np.testing.assert_array_equal(red[:, 0], np_red(ref, axis=1))


@trn3
def test_activate2_relu_param_tile_with_reduce_res_and_registers():
    """reset_reduce with reduce_res: reduce_res receives the register, which
    holds this instruction's row sums; the neuron device gives the same."""
    x = torch.randn(16, 24)
    alpha = torch.full((16, 1), 0.2)
    s0, s1 = torch.full((16, 1), 0.5), torch.full((16, 1), -0.5)
    got, red = prelu_reduce_kernel(x.to("neuron"), alpha.to("neuron"), s0.to("neuron"),
                                   s1.to("neuron"), nl.add, nisa.reduce_cmd.reset_reduce,
                                   nl.float32)
    v = x * 0.5 - 0.5
    ref = torch.where(v >= 0, v, alpha * v)
    torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0)
    torch.testing.assert_close(red.cpu()[:, 0], ref.sum(dim=1), rtol=1e-6, atol=1e-6)


@trn3
@pytest.mark.parametrize("alpha", [0.0, 0.1, -0.5])
def test_prelu_is_one_activate2_on_trn3(alpha):
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.prelu(nl.load(x), alpha))
        return out

    x = torch.randn(64, 80)
    torch.testing.assert_close(nki.jit(k)(x), torch.nn.functional.leaky_relu(x, alpha),
                               rtol=0, atol=0)
    est = nki.benchmark(nki.jit(k))(x)
    assert est.instructions["Scalar"] == 1 and est.instructions["Vector"] == 0


@trn3
def test_language_rand_is_rand2_on_trn3():
    @nki.jit
    def k(x):
        state_out = nl.ndarray((x.shape[0], 24), nl.uint32, buffer=nl.shared_hbm)
        u_out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        state = nl.ndarray((x.shape[0], 24), nl.uint32)
        nisa.rand_get_state(state)
        nl.store(state_out, state)
        nl.store(u_out, nl.rand(x.shape))
        return state_out, u_out

    state, u = nki.simulate(k)(np.zeros((16, 100), np.float32))
    np.testing.assert_array_equal(u, _uniform(xorwow_rows(state, 100, 4)))
    est = nki.benchmark(k)(np.zeros((16, 100), np.float32))
    assert est.instructions["Vector"] == 2  # rand_get_state and one rand2


@trn3
def test_relu_param_tile_rules():
    def wrong_shape(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.prelu, t, 1.0, 0.0, nl.multiply, None,
                       relu_param=t)

    def other_partitions(x):
        t = nl.load(x)
        slopes = nl.zeros((8, 1), nl.float32)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.prelu, t, 1.0, 0.0, nl.multiply, None,
                       relu_param=slopes[4:8], reduce_res=nl.ndarray((4, 1), nl.float32))

    def reduce_res_not_per_partition(x):
        t = nl.load(x)
        nisa.activate2(nl.ndarray((4, 8), nl.float32), nl.prelu, t, 1.0, 0.0, nl.multiply, None,
                       relu_param=nl.zeros((4, 1), nl.float32),
                       reduce_res=nl.ndarray((4, 2), nl.float32))

    x = np.zeros((4, 8), np.float32)
    for body, rule in ((wrong_shape, "operand_shape"), (other_partitions, "same_partitions"),
                       (reduce_res_not_per_partition, "operand_shape")):
        with pytest.raises(NkiError) as info:
            nki.simulate(nki.jit(body))(x)
        assert info.value.rule == rule
