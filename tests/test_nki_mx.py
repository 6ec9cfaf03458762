"""The packed MX dtypes, nki.isa.quantize_mx and nki.isa.nc_matmul_mx.

Encodings are checked against an oracle written here from the formats'
definitions: every code's value from its bit fields, the nearest code by
brute force, ties to the even code, saturation at the largest finite value.
quantize_mx and nc_matmul_mx exist on NeuronCore-v4 only, so their kernels
run in one trn3 child process; the parent compares with NumPy / torch.
"""

import json

import numpy as np
import pytest
import torch

import torchneuron.nki.language as nl
from torchneuron.nki import mx

from conftest import check_output, run_python

# (exponent bits, mantissa bits, bits, largest finite magnitude code, NaN code, inf code)
FORMATS = {"float8_e4m3fn": (4, 3, 8, 0x7E, 0x7F, None),
           "float8_e5m2": (5, 2, 8, 0x7B, 0x7E, 0x7C),
           "float4_e2m1fn": (2, 1, 4, 0x7, None, None)}


def oracle_values(fmt):
    """Value of every finite non-negative code, from sign / exponent / mantissa."""
    ebits, mbits, _, max_code, _, _ = FORMATS[fmt]
    bias = 2 ** (ebits - 1) - 1
    out = []
    for code in range(max_code + 1):
        e, m = code >> mbits, code % 2 ** mbits
        out.append(m / 2 ** mbits * 2.0 ** (1 - bias) if e == 0 else
                   (1 + m / 2 ** mbits) * 2.0 ** (e - bias))
    return np.array(out)


def oracle_encode(x, fmt):
    """Codes of x: brute-force nearest (ties to the even code), saturating."""
    _, _, bits, _, nan_code, _ = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    table = oracle_values(fmt)
    a = np.minimum(np.abs(x), 2 * table[-1])  # infinity saturates like any large value
    dist = np.abs(a[:, None] - table[None, :])
    best = dist == dist.min(axis=1, keepdims=True)
    even = best & (np.arange(len(table)) % 2 == 0)[None, :]
    code = np.where(even.any(axis=1), even.argmax(axis=1), best.argmax(axis=1))
    code = code | np.where(np.signbit(x), 1 << (bits - 1), 0)
    return np.where(np.isnan(x), nan_code if nan_code is not None else 0, code)


def test_formats_have_their_documented_ranges():
    e4m3 = oracle_values("float8_e4m3fn")
    assert e4m3[-1] == 448 and e4m3[1] == 2.0 ** -9 and e4m3[8] == 2.0 ** -6
    e5m2 = oracle_values("float8_e5m2")
    assert e5m2[-1] == 57344 and e5m2[1] == 2.0 ** -16 and e5m2[4] == 2.0 ** -14
    assert list(oracle_values("float4_e2m1fn")) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    for fmt in FORMATS:
        np.testing.assert_array_equal(mx.magnitudes(fmt), oracle_values(fmt))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_host_encode_decode_match_the_oracle(fmt):
    table = oracle_values(fmt)
    mids = (table[1:] + table[:-1]) / 2
    x = np.concatenate([table, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf),
                        [table[-1] * 1.5, 1e9, np.inf, 1e-30, 0.0]])
    x = np.concatenate([x, -x, np.random.default_rng(1).normal(0, table[-1] / 4, 2000)])
    np.testing.assert_array_equal(mx.encode(x, fmt), oracle_encode(x, fmt))
    bits = FORMATS[fmt][2]
    codes = np.arange(2 ** bits)
    values = mx.decode(codes, fmt)
    finite = ~np.isnan(values) & ~np.isinf(values)
    np.testing.assert_array_equal(mx.encode(values[finite], fmt), codes[finite])  # round trip
    assert np.isnan(values).sum() == {"float8_e4m3fn": 2, "float8_e5m2": 6, "float4_e2m1fn": 0}[fmt]


def test_pack_puts_value_i_in_byte_or_nibble_i():
    words = mx.pack(np.array([[1.0, -2.0, 0.5, 448.0]]), nl.float8_e4m3fn_x4)
    assert words.dtype == np.uint32 and words.tolist() == [[0x7E30_C038]]
    words = mx.pack(np.array([[1.0, -2.0, 0.5, 6.0]]), nl.float4_e2m1fn_x4)
    assert words.dtype == np.uint16 and words.tolist() == [[0x71C2]]
    v = np.random.default_rng(2).normal(0, 2, (4, 16)).astype(np.float32)
    for dt in (nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4):
        fmt = mx.ELEMENT_FORMAT[dt.name]
        np.testing.assert_array_equal(mx.unpack(mx.pack(v, dt), dt),
                                      mx.decode(oracle_encode(v, fmt), fmt).reshape(v.shape))


# ---- the instructions, on a trn3 device ------------------------------------------------------

MX_ON_TRN3 = """
    import json
    import numpy as np
    import torchneuron.nki as nki, torchneuron.nki.isa as nisa, torchneuron.nki.language as nl

    @nki.jit
    def quantize(x, dt):
        p, f = x.shape
        words = nl.ndarray((p, f // 4), dt, buffer=nl.shared_hbm)
        scales = nl.ndarray((p, f // 4), nl.uint8, buffer=nl.shared_hbm)
        src = nl.load(x)
        q = nl.ndarray((p, f // 4), dt)
        s = nl.ndarray((p, f // 4), nl.uint8)
        nisa.memset(s, 0)
        nisa.quantize_mx(q, src, s)
        nisa.dma_copy(words, q)
        nisa.dma_copy(scales, s)
        return words, scales

    @nki.jit
    def matmul(st, mv, st_scale, mv_scale, st_dt, mv_dt, twice, tile):
        k, m = st.shape
        n = mv.shape[1]
        out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
        a, b = nl.ndarray((k, m), st_dt), nl.ndarray((k, n), mv_dt)
        nisa.dma_copy(a, st.view(st_dt))
        nisa.dma_copy(b, mv.view(mv_dt))
        sa, sb = nl.load(st_scale), nl.load(mv_scale)
        acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        kw = dict(tile_position=(0, 0), tile_size=(k, 128)) if tile else {}
        for _ in range(2 if twice else 1):
            nisa.nc_matmul_mx(acc, a, b, sa, sb, **kw)
        res = nl.ndarray((m, n), nl.float32)
        nisa.tensor_copy(res, acc)
        nl.store(out, res)
        return out

    @nki.jit
    def quantized_product(x, y):
        k, m = x.shape
        n = y.shape[1]
        out = nl.ndarray((m // 4, n // 4), nl.float32, buffer=nl.shared_hbm)
        qx, qy = nl.ndarray((k, m // 4), nl.float8_e4m3fn_x4), nl.ndarray((k, n // 4), nl.float8_e4m3fn_x4)
        sx, sy = nl.ndarray((k, m // 4), nl.uint8), nl.ndarray((k, n // 4), nl.uint8)
        nisa.quantize_mx(qx, nl.load(x), sx)
        nisa.quantize_mx(qy, nl.load(y), sy)
        acc = nl.ndarray((m // 4, n // 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(acc, qx, qy, sx, sy)
        res = nl.ndarray((m // 4, n // 4), nl.float32)
        nisa.tensor_copy(res, acc)
        nl.store(out, res)
        return out

    case = json.loads(CASE)
    results = {}
    for key, (kind, args) in case.items():
        if kind == "quantize":
            x = np.array(args["x"], dtype=np.float32).astype(args["src"]) if args["src"] == "float16" \\
                else np.array(args["x"], dtype=np.float32)
            if args["src"] == "bfloat16":
                import torch
                x = torch.tensor(x).to(torch.bfloat16)
            w, s = nki.simulate(quantize)(x, getattr(nl, args["dt"]))
            results[key] = [np.asarray(w).astype(np.int64).tolist(), np.asarray(s).tolist()]
        elif kind == "matmul":
            st = np.array(args["st"], dtype=args["st_np"])
            mv = np.array(args["mv"], dtype=args["mv_np"])
            out = nki.simulate(matmul)(st, mv, np.array(args["sa"], np.uint8),
                                       np.array(args["sb"], np.uint8), getattr(nl, args["st_dt"]),
                                       getattr(nl, args["mv_dt"]), args["twice"], args["tile"])
            results[key] = np.asarray(out).tolist()
        else:
            x = np.array(args["x"], np.float16)
            y = np.array(args["y"], np.float16)
            results[key] = np.asarray(nki.simulate(quantized_product)(x, y)).tolist()
    print(json.dumps(results))
"""


def block_scale_rows(p):
    return [mx.scale_row(g) for g in range(p // 8)]


def quantize_reference(x, fmt):
    """(words, scales [P, F/4]) of quantize_mx from the oracle: per block of 8
    partitions x 4 values, exponent floor(log2 amax) - emax + 1."""
    emax = {"float8_e4m3fn": 8, "float8_e5m2": 15}[fmt]
    p, f = x.shape
    blocks = x.astype(np.float64).reshape(p // 8, 8, f // 4, 4)
    amax = np.abs(blocks).max(axis=(1, 3))
    bad = ~np.isfinite(blocks).all(axis=(1, 3))
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - emax + 1, -127)
    e = np.clip(e, -127, 127)
    scale_bytes = np.where(bad, 255, e + 127).astype(np.int64)
    scaled = blocks * 2.0 ** -e[:, None, :, None]
    codes = oracle_encode(np.where(bad[:, None, :, None], np.nan, scaled), fmt).reshape(blocks.shape)
    codes = codes.transpose(0, 1, 2, 3).reshape(p, f // 4, 4)
    words = sum(codes[..., i].astype(np.int64) << (8 * i) for i in range(4))
    scales = np.zeros((p, f // 4), np.int64)
    for g in range(p // 8):
        scales[mx.scale_row(g)] = scale_bytes[g]
    return words, scales


def _exhaustive_fp16(fmt, rng):
    """Every finite float16 below 2^emax in magnitude, 31 per block, with a
    2^(emax-1) anchor in each block so that its scale is 1: the encoder sees
    every such fp16 input unscaled."""
    emax = {"float8_e4m3fn": 8, "float8_e5m2": 15}[fmt]
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    v = bits.view(np.float16).astype(np.float64)
    v = v[np.isfinite(v) & (np.abs(v) < 2.0 ** emax)]
    v = v[rng.permutation(len(v))]
    per = 31
    nblocks = -(-len(v) // per)
    cols = -(-nblocks // 16)  # 16 blocks of 8 partitions per column of a 128-partition tile
    vals = np.zeros((16 * cols, 32))
    vals[:, 0] = 2.0 ** (emax - 1)
    flat = vals[:, 1:].reshape(-1)
    flat[:len(v)] = v
    vals[:, 1:] = flat.reshape(-1, 31)
    # block (g, j) -> partitions 8 g .. 8 g + 7, columns 4 j .. 4 j + 3
    x = vals.reshape(16, cols, 8, 4).transpose(0, 2, 1, 3).reshape(128, cols * 4)
    return x.astype(np.float16)


def _cases():
    rng = np.random.default_rng(3)
    cases, expect = {}, {}
    # Random blocks over a wide range of magnitudes, a zero block and a NaN block.
    x = rng.normal(0, 1, (128, 64)) * 2.0 ** rng.integers(-12, 12, (16, 1, 16, 1)).repeat(
        8, 1).repeat(4, 3).reshape(128, 64)
    x[0:8, 0:4] = 0.0
    x[8:16, 4:8] = np.inf
    x[16, 8] = np.nan
    for src in ("float16", "bfloat16"):
        xs = x.astype(np.float16).astype(np.float64) if src == "float16" else \
            torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).double().numpy()
        for dt in ("float8_e4m3fn_x4", "float8_e5m2_x4"):
            key = f"quantize/{src}/{dt}"
            cases[key] = ("quantize", {"x": np.nan_to_num(xs, nan=np.nan).tolist(), "src": src, "dt": dt})
            expect[key] = quantize_reference(xs, mx.ELEMENT_FORMAT[dt])
    for dt in ("float8_e4m3fn_x4", "float8_e5m2_x4"):
        xs = _exhaustive_fp16(mx.ELEMENT_FORMAT[dt], rng)
        key = f"exhaustive/{dt}"
        cases[key] = ("quantize", {"x": xs.astype(np.float64).tolist(), "src": "float16", "dt": dt})
        expect[key] = quantize_reference(xs.astype(np.float64), mx.ELEMENT_FORMAT[dt])
    # Matmuls of packed operands with random scales.
    for st_dt, mv_dt, k, m, n, twice, tile in [
            ("float8_e4m3fn_x4", "float8_e4m3fn_x4", 128, 128, 512, False, False),
            ("float8_e5m2_x4", "float4_e2m1fn_x4", 64, 48, 100, True, False),
            ("float4_e2m1fn_x4", "float8_e5m2_x4", 32, 16, 40, False, True)]:
        vals = {}
        for side, dt, cols in (("st", st_dt, m), ("mv", mv_dt, n)):
            fmt = mx.ELEMENT_FORMAT[dt]
            top = oracle_values(fmt)[-1]
            v = rng.normal(0, top / 3, (k, 4 * cols))
            vals[side] = mx.pack(v, getattr(nl, dt))
            sc = np.zeros((k, cols), np.uint8)
            for g in range(k // 8):
                sc[mx.scale_row(g)] = rng.integers(110, 140, cols)
            vals[side + "_scale"] = sc
        key = f"matmul/{st_dt}/{mv_dt}/{twice}/{tile}"
        cases[key] = ("matmul", {"st": vals["st"].tolist(), "mv": vals["mv"].tolist(),
                                 "st_np": str(vals["st"].dtype), "mv_np": str(vals["mv"].dtype),
                                 "sa": vals["st_scale"].tolist(), "sb": vals["mv_scale"].tolist(),
                                 "st_dt": st_dt, "mv_dt": mv_dt, "twice": twice, "tile": tile})

        def dequant(words, scale, dt):
            v = mx.unpack(words, getattr(nl, dt)).astype(np.float64).reshape(k, -1, 4)
            s = np.stack([mx.scale_values(scale[mx.scale_row(p // 8)]) for p in range(k)])
            return v * s[:, :, None]

        a, b = dequant(vals["st"], vals["st_scale"], st_dt), dequant(vals["mv"], vals["mv_scale"], mv_dt)
        expect[key] = np.einsum("kmi,kni->mn", a, b) * (2 if twice else 1)
    x = rng.normal(0, 1, (128, 64)).astype(np.float16)
    y = rng.normal(0, 1, (128, 256)).astype(np.float16)
    cases["product"] = ("product", {"x": x.astype(np.float64).tolist(), "y": y.astype(np.float64).tolist()})
    # the contraction pairs value i of packed column c with value i: rows k, 4 c + i
    xr = x.astype(np.float64).reshape(128, 16, 4).transpose(0, 2, 1).reshape(512, 16)
    yr = y.astype(np.float64).reshape(128, 64, 4).transpose(0, 2, 1).reshape(512, 64)
    expect["product"] = xr.T @ yr
    return cases, expect


def test_quantize_mx_and_nc_matmul_mx_on_trn3():
    cases, expect = _cases()
    code = MX_ON_TRN3.replace("json.loads(CASE)", "json.loads(open(CASE_FILE).read())")
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f, allow_nan=True)
    code = code.replace("CASE_FILE", repr(f.name))
    out = json.loads(check_output(run_python(code, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"},
                                             timeout=300)))
    for key, want in expect.items():
        if key.startswith(("quantize", "exhaustive")):
            words, scales = (np.array(v, np.int64) for v in out[key])
            np.testing.assert_array_equal(scales, want[1], err_msg=key)
            np.testing.assert_array_equal(words, want[0], err_msg=key)
        elif key.startswith("matmul"):
            np.testing.assert_allclose(np.array(out[key]), want, rtol=1e-5,
                                       atol=1e-5 * np.abs(want).max(), err_msg=key)
        else:
            got = torch.tensor(out[key])
            # MXFP8 e4m3: 3 mantissa bits per value, so a few percent of the row norm
            ref = torch.tensor(want, dtype=torch.float32)
            scale = ref.abs().max()
            torch.testing.assert_close(got, ref, rtol=0, atol=float(scale) * 0.1)
            assert torch.corrcoef(torch.stack([got.flatten(), ref.flatten()]))[0, 1] > 0.99
