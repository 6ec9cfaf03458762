"""RMSNorm: x * rsqrt(mean(x^2) + eps) * weight over the last dim.

The weight vector is broadcast to every partition by the DMA itself (an HBM
view with a zero partition stride), loaded once.
"""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def rmsnorm(x, weight, eps=1e-6):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    w = nl.load(weight.expand_dims(0).broadcast_to((min(rows, 128), cols)), dtype=nl.float32)
    for r in nl.affine_range((rows + 127) // 128):
        r0, n = r * 128, min(128, rows - r * 128)
        tile = nl.load(x[r0:r0 + n, :], dtype=nl.float32)
        squares = nl.ndarray((n, cols), nl.float32)
        sum_sq = nl.ndarray((n, 1), nl.float32)
        nisa.activation(squares, nl.square, tile, reduce_op=nl.add, reduce_res=sum_sq)
        rstd = nl.ndarray((n, 1), nl.float32)
        nisa.tensor_scalar(rstd, sum_sq, nl.multiply, 1.0 / cols, op1=nl.add, operand1=eps)
        nisa.activation(rstd, nl.rsqrt, rstd)
        result = nl.ndarray((n, cols), x.dtype)
        nisa.scalar_tensor_tensor(result, tile, nl.multiply, rstd, nl.multiply, w[0:n, :])
        nl.store(out[r0:r0 + n, :], result)
    return out
