"""Row softmax of a [rows, cols] tensor (cols fit one partition's SBUF).

Per 128-row tile: the negated row max (tensor_reduce), exp(x - max) with
the row sums accumulated by the same activation, a reciprocal and a scale.
"""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def softmax(x):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range((rows + 127) // 128):
        r0, n = r * 128, min(128, rows - r * 128)
        tile = nl.load(x[r0:r0 + n, :], dtype=nl.float32)
        neg_max = nl.ndarray((n, 1), nl.float32)
        nisa.tensor_reduce(neg_max, nl.maximum, tile, axis=1, negate=True)
        exps = nl.ndarray((n, cols), nl.float32)
        sums = nl.ndarray((n, 1), nl.float32)
        nisa.activation(exps, nl.exp, tile, bias=neg_max, reduce_op=nl.add, reduce_res=sums)
        inv = nl.ndarray((n, 1), nl.float32)
        nisa.reciprocal(inv, sums)
        result = nl.ndarray((n, cols), x.dtype)
        nisa.tensor_scalar(result, exps, nl.multiply, inv)
        nl.store(out[r0:r0 + n, :], result)
    return out
