"""nl.float8_e8m0fnu, the OCP MX scale format, stored for real: conversions
against torch.float8_e8m0fnu, and quantize_mx / nc_matmul_mx with scales in it
(on a trn3 device), with the dtype rules."""

import json

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
from torchneuron.nki import NkiError

from conftest import check_output, run_python

E8M0 = torch.float8_e8m0fnu


def test_dtype_maps_to_torch():
    assert nl.float8_e8m0fnu.torch is E8M0
    assert nl.float8_e8m0fnu.itemsize == 1
    assert nl.as_dtype(E8M0) is nl.float8_e8m0fnu


@nki.jit
def to_e8m0(x):
    """float32 -> float8_e8m0fnu on the Vector engine, stored as it is."""
    out = nl.ndarray(x.shape, nl.float8_e8m0fnu, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, nl.float8_e8m0fnu)
    nisa.tensor_copy(t, nl.load(x))
    nl.store(out, t)
    return out


@nki.jit
def from_e8m0(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_copy(t, nl.load(x))
    nl.store(out, t)
    return out


def test_stores_round_as_torch_does():
    """Every rounding case: exact powers of two, ties (mantissa 1.5), just
    below / above, subnormals, zero, negatives, overflow past 2^127, inf, NaN,
    and a random sweep of float32 bit patterns."""
    special = np.array([0x00000001, 0x003fffff, 0x00400000, 0x00400001, 0x007fffff, 0x00800000,
                        0x00bfffff, 0x00c00000, 0x3f800000, 0x3fbfffff, 0x3fc00000, 0x3fc00001,
                        0x7f3fffff, 0x7f400000, 0x7f7fffff, 0x7f800000, 0x7fc00000, 0x00000000],
                       np.uint32)
    rng = np.random.default_rng(0)
    sweep = rng.integers(0, 2 ** 32, 4096 - len(special) * 2, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([special, special | 0x80000000, sweep]).reshape(128, 32)
    x = torch.from_numpy(bits.view(np.float32).copy())
    got = to_e8m0(x)
    assert got.dtype == E8M0
    np.testing.assert_array_equal(got.view(torch.uint8).numpy(), x.to(E8M0).view(torch.uint8).numpy())


def test_loads_are_powers_of_two_and_255_is_nan():
    b = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(8, 32)
    got = from_e8m0(b.view(E8M0))
    expect = np.ldexp(np.float32(1.0), np.minimum(np.arange(256), 254) - 127).reshape(8, 32)
    expect[7, 31] = np.nan
    np.testing.assert_array_equal(got.numpy(), expect)
    np.testing.assert_array_equal(got.numpy(), b.view(E8M0).float().numpy())


def test_e8m0_is_not_a_tensor_engine_operand():
    def k(a):
        s = nl.zeros((128, 128), nl.float8_e8m0fnu)
        nisa.nc_matmul(nl.ndarray((128, 128), nl.float32, buffer=nl.psum), s, s)

    with pytest.raises(NkiError) as info:
        nki.simulate(nki.jit(k))(np.zeros((1, 1), np.float32))
    assert info.value.rule == "dtype"


MX_SCALES = """
    import json
    import numpy as np
    import torch
    import torchneuron.nki as nki, torchneuron.nki.isa as nisa, torchneuron.nki.language as nl

    @nki.jit
    def product(x, y, sdt):
        k, m = x.shape
        n = y.shape[1]
        out = nl.ndarray((m // 4, n // 4), nl.float32, buffer=nl.shared_hbm)
        scales = nl.ndarray((k, m // 4), sdt, buffer=nl.shared_hbm)
        qx = nl.ndarray((k, m // 4), nl.float8_e4m3fn_x4)
        qy = nl.ndarray((k, n // 4), nl.float8_e5m2_x4)
        sx, sy = nl.ndarray((k, m // 4), sdt), nl.ndarray((k, n // 4), sdt)
        nisa.memset(sx, 1.0 if sdt is nl.float8_e8m0fnu else 127)
        nisa.memset(sy, 1.0 if sdt is nl.float8_e8m0fnu else 127)
        nisa.quantize_mx(qx, nl.load(x), sx)
        nisa.quantize_mx(qy, nl.load(y), sy)
        acc = nl.ndarray((m // 4, n // 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(acc, qx, qy, sx, sy)
        res = nl.ndarray((m // 4, n // 4), nl.float32)
        nisa.tensor_copy(res, acc)
        nl.store(out, res)
        nisa.dma_copy(scales, sx)
        return out, scales

    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.normal(0, 3, (64, 128)).astype(np.float16))
    y = torch.from_numpy(rng.normal(0, 0.1, (64, 256)).astype(np.float16))
    ref = x.float().reshape(64, 32, 4).transpose(1, 2).reshape(256, 32).T @ \
        y.float().reshape(64, 64, 4).transpose(1, 2).reshape(256, 64)
    o8, s8 = product(x, y, nl.float8_e8m0fnu)
    ou, su = product(x, y, nl.uint8)
    print(json.dumps({
        "scale_dtype": str(s8.dtype),
        "same_bytes": bool(torch.equal(s8.view(torch.uint8), su)),
        "same_product": bool(torch.equal(o8, ou)),
        "scale_values_ok": bool(torch.equal(s8.float(), torch.ldexp(torch.ones(()), su.int() - 127))),
        "rel_err": float((o8 - ref).norm() / ref.norm()),
    }))
"""


def test_quantize_mx_and_nc_matmul_mx_take_e8m0_scales():
    """float8_e8m0fnu scale tiles give the same scale bytes and product as
    uint8 ones (the reference's backward-compatible form), and read back as
    the powers of two they encode."""
    out = json.loads(check_output(run_python(MX_SCALES, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})))
    assert out["scale_dtype"] == "torch.float8_e8m0fnu"
    assert out["same_bytes"] and out["same_product"] and out["scale_values_ok"]
    assert out["rel_err"] < 0.15  # fp8 quantisation error of a 256-term product


def test_mx_scale_of_another_dtype_is_refused():
    def k(a):
        nisa.quantize_mx(nl.ndarray((32, 4), nl.float8_e4m3fn_x4), nl.zeros((32, 16), nl.bfloat16),
                         nl.ndarray((4, 4), nl.bfloat16))

    with pytest.raises(NkiError) as info:
        nki.simulate(nki.jit(k))(np.zeros((1, 1), np.float32))
    assert info.value.rule == "dtype"
    assert "float8_e8m0fnu" in str(info.value)
