"""NKI element types and their storage formats.

Each dtype knows its code in the simulator (``nrt_nc_dtype``), its size and,
where one exists, the matching torch and NumPy dtype. float8 and tfloat32
exist only on chip or in NumPy-free HBM buffers; bfloat16 has no NumPy dtype,
so NumPy-mode results in bfloat16 come back as float32 arrays holding the
bfloat16 values.

The packed MX dtypes (``float8_e4m3fn_x4``, ``float8_e5m2_x4``,
``float4_e2m1fn_x4``) hold four values per element (value i in byte i, or in
bits 4i..4i+3 for fp4); NumPy-mode results in them come back as their raw
uint32 / uint16 words, and ``torchneuron.nki.mx`` packs and unpacks them.
"""

import numpy as np
import torch


class NkiDtype:
    __slots__ = ("name", "code", "itemsize", "is_float", "torch", "numpy")

    def __init__(self, name, code, itemsize, is_float, torch_dtype, numpy_dtype):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_float = is_float
        self.torch = torch_dtype
        self.numpy = numpy_dtype

    def __repr__(self):
        return f"nl.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


bool_ = NkiDtype("bool_", 0, 1, False, torch.bool, np.dtype(np.bool_))
uint8 = NkiDtype("uint8", 1, 1, False, torch.uint8, np.dtype(np.uint8))
int8 = NkiDtype("int8", 2, 1, False, torch.int8, np.dtype(np.int8))
uint16 = NkiDtype("uint16", 3, 2, False, None, np.dtype(np.uint16))
int16 = NkiDtype("int16", 4, 2, False, torch.int16, np.dtype(np.int16))
uint32 = NkiDtype("uint32", 5, 4, False, None, np.dtype(np.uint32))
int32 = NkiDtype("int32", 6, 4, False, torch.int32, np.dtype(np.int32))
float8_e4m3 = NkiDtype("float8_e4m3", 7, 1, True, None, None)
float8_e5m2 = NkiDtype("float8_e5m2", 8, 1, True, torch.float8_e5m2, None)
float16 = NkiDtype("float16", 9, 2, True, torch.float16, np.dtype(np.float16))
bfloat16 = NkiDtype("bfloat16", 10, 2, True, torch.bfloat16, None)
tfloat32 = NkiDtype("tfloat32", 11, 4, True, None, None)
float32 = NkiDtype("float32", 12, 4, True, torch.float32, np.dtype(np.float32))
# Packed: the NumPy dtype is that of the raw words (never used to infer a dtype).
float8_e4m3fn_x4 = NkiDtype("float8_e4m3fn_x4", 13, 4, True, None, np.dtype(np.uint32))
float8_e5m2_x4 = NkiDtype("float8_e5m2_x4", 14, 4, True, None, np.dtype(np.uint32))
float4_e2m1fn_x4 = NkiDtype("float4_e2m1fn_x4", 15, 2, True, None, np.dtype(np.uint16))

# The OCP MX scale format: byte b = 2^(b - 127), 255 NaN (no sign, no zero).
float8_e8m0fnu = NkiDtype("float8_e8m0fnu", 16, 1, True, torch.float8_e8m0fnu, None)

# The 64-bit NkiScalar's dtype (nki.isa.scalar_load takes nl.int32 or nl.int64):
# [1, 1] words that DMAs copy, scalar arithmetic combines and an HBM access
# reads as its scalar_offset; no compute instruction takes it.
int64 = NkiDtype("int64", 17, 8, False, torch.int64, np.dtype(np.int64))

PACKED = [float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4]
ALL = [bool_, uint8, int8, uint16, int16, uint32, int32, float8_e4m3, float8_e5m2, float16,
       bfloat16, tfloat32, float32] + PACKED + [float8_e8m0fnu, int64]
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool"] = bool_
_BY_TORCH = {d.torch: d for d in ALL if d.torch is not None}
_BY_NUMPY = {d.numpy: d for d in ALL if d.numpy is not None and d not in PACKED}


def by_name(name):
    return _BY_NAME[name]


def as_dtype(value):
    """An NkiDtype from an NkiDtype, torch dtype, NumPy dtype or name."""
    if isinstance(value, NkiDtype):
        return value
    if isinstance(value, torch.dtype):
        if value in _BY_TORCH:
            return _BY_TORCH[value]
        raise TypeError(f"NKI has no dtype for torch.{value}")
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        d = np.dtype(value)
    except TypeError:
        raise TypeError(f"not an NKI dtype: {value!r}") from None
    if d in _BY_NUMPY:
        return _BY_NUMPY[d]
    raise TypeError(f"NKI has no dtype for NumPy {d}")
