"""LayerNorm over the last dim: (x - mean) * rsqrt(var + eps) * gamma + beta."""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    p = min(rows, 128)
    g = nl.load(gamma.expand_dims(0).broadcast_to((p, cols)), dtype=nl.float32)
    b = nl.load(beta.expand_dims(0).broadcast_to((p, cols)), dtype=nl.float32)
    for r in nl.affine_range((rows + 127) // 128):
        r0, n = r * 128, min(128, rows - r * 128)
        tile = nl.load(x[r0:r0 + n, :], dtype=nl.float32)
        mean = nl.ndarray((n, 1), nl.float32)
        nisa.tensor_reduce(mean, nl.add, tile, axis=1)
        nisa.tensor_scalar(mean, mean, nl.multiply, 1.0 / cols)
        centred = nl.ndarray((n, cols), nl.float32)
        nisa.tensor_scalar(centred, tile, nl.subtract, mean)
        squares = nl.ndarray((n, cols), nl.float32)
        var = nl.ndarray((n, 1), nl.float32)
        nisa.activation(squares, nl.square, centred, reduce_op=nl.add, reduce_res=var)
        rstd = nl.ndarray((n, 1), nl.float32)
        nisa.tensor_scalar(rstd, var, nl.multiply, 1.0 / cols, op1=nl.add, operand1=eps)
        nisa.activation(rstd, nl.rsqrt, rstd)
        scaled = nl.ndarray((n, cols), nl.float32)
        nisa.scalar_tensor_tensor(scaled, centred, nl.multiply, rstd, nl.multiply, g[0:n, :])
        result = nl.ndarray((n, cols), x.dtype)
        nisa.tensor_tensor(result, scaled, b[0:n, :], nl.add)
        nl.store(out[r0:r0 + n, :], result)
    return out
