"""Host-side packing of the MX element formats (NumPy), for building inputs
of ``nisa.nc_matmul_mx`` and reading results of ``nisa.quantize_mx``.

A packed element holds four values of one format: float8_e4m3fn (no
infinity, 0x7f NaN, max 448), float8_e5m2 (IEEE-style, max 57344) or
float4_e2m1fn (max 6, no NaN). Value i sits in byte i of a uint32 word (bits
4i..4i+3 of a uint16 word for fp4). Encoding rounds to nearest even and
saturates to the largest finite magnitude, like the simulator; it is
table-driven: every code's value is decoded from its bit fields and the
nearest one chosen, so it is exact by construction.
"""

import numpy as np

from torchneuron.nki import dtypes

# name: (exponent bits, mantissa bits, bits, largest finite magnitude code,
#        NaN magnitude code or None, infinity magnitude code or None)
FORMATS = {
    "float8_e4m3fn": (4, 3, 8, 0x7E, 0x7F, None),
    "float8_e5m2": (5, 2, 8, 0x7B, 0x7E, 0x7C),
    "float4_e2m1fn": (2, 1, 4, 0x7, None, None),
}
ELEMENT_FORMAT = {"float8_e4m3fn_x4": "float8_e4m3fn", "float8_e5m2_x4": "float8_e5m2",
                  "float4_e2m1fn_x4": "float4_e2m1fn"}


def magnitudes(fmt):
    """The value of every magnitude code 0 .. largest finite, as float64."""
    ebits, mbits, _, max_code, _, _ = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    codes = np.arange(max_code + 1)
    field, man = codes >> mbits, codes & ((1 << mbits) - 1)
    sub = man * 2.0 ** (1 - bias - mbits)
    normal = (man + (1 << mbits)) * 2.0 ** (field.astype(np.float64) - bias - mbits)
    return np.where(field == 0, sub, normal)


def decode(codes, fmt):
    """Values (float32) of codes of format fmt."""
    ebits, mbits, bits, max_code, nan_code, inf_code = FORMATS[fmt]
    codes = np.asarray(codes).astype(np.int64)
    sign = np.where(codes >> (bits - 1) & 1, -1.0, 1.0)
    mag = codes & ((1 << (bits - 1)) - 1)
    table = magnitudes(fmt)
    out = sign * table[np.minimum(mag, max_code)]
    if inf_code is not None:
        out = np.where(mag == inf_code, sign * np.inf, out)
    if nan_code is not None:
        out = np.where((mag > max_code) & (mag != (inf_code if inf_code is not None else -1)),
                       np.nan, out)
    return out.astype(np.float32)


def encode(values, fmt):
    """Codes (int64) of values in format fmt: nearest, ties to the even code,
    saturating; NaN to the format's NaN (to +0 for fp4, which has none)."""
    _, _, bits, max_code, nan_code, _ = FORMATS[fmt]
    x = np.asarray(values, dtype=np.float64)
    table = magnitudes(fmt)
    a = np.abs(x)
    hi = np.clip(np.searchsorted(table, a), 0, max_code)  # first value >= a
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - table[lo], table[hi] - a
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(a >= table[max_code], max_code, pick)
    code = pick | np.where(np.signbit(x), 1 << (bits - 1), 0)
    nan = np.isnan(x)
    return np.where(nan, nan_code if nan_code is not None else 0, code).astype(np.int64)


def _format(dtype):
    dtype = dtypes.as_dtype(dtype)
    if dtype.name not in ELEMENT_FORMAT:
        raise TypeError(f"{dtype} is not a packed MX dtype")
    return dtype, ELEMENT_FORMAT[dtype.name]


def pack(values, dtype):
    """Values [..., 4 n] -> packed words [..., n] of a packed MX dtype
    (uint32 for the fp8 formats, uint16 for fp4)."""
    dtype, fmt = _format(dtype)
    values = np.asarray(values)
    if values.shape[-1] % 4:
        raise ValueError(f"pack needs a last dim that is a multiple of 4, got {values.shape}")
    codes = encode(values, fmt).reshape(values.shape[:-1] + (values.shape[-1] // 4, 4))
    bits = FORMATS[fmt][2]
    words = np.zeros(codes.shape[:-1], dtype=np.uint64)
    for i in range(4):
        words |= codes[..., i].astype(np.uint64) << np.uint64(bits * i)
    return words.astype(dtype.numpy)


def unpack(words, dtype):
    """Packed words [..., n] -> their values [..., 4 n] (float32)."""
    dtype, fmt = _format(dtype)
    words = np.asarray(words).astype(np.uint64)
    bits = FORMATS[fmt][2]
    codes = np.stack([(words >> np.uint64(bits * i)) & np.uint64((1 << bits) - 1)
                      for i in range(4)], axis=-1)
    return decode(codes, fmt).reshape(words.shape[:-1] + (words.shape[-1] * 4,))


def scale_values(scale_bytes):
    """E8M0 scale bytes -> 2^(b - 127) (float64; 255 is NaN)."""
    b = np.asarray(scale_bytes).astype(np.float64)
    return np.where(b == 255, np.nan, 2.0 ** (b - 127))


def scale_row(block):
    """The scale-tile partition of block ``block`` (partitions 8 block ..
    8 block + 7 of the data): four rows per 32-partition quadrant."""
    return (block // 4) * 32 + block % 4
