"""Causal attention forward for one head: softmax(q k^T / sqrt(d) + mask) v.

q, k, v are [seq, d] with d <= 128. Per block of 128 queries:
  scores = q k^T through the Tensor engine (q^T and k^T are loaded straight
           from transposed HBM views, d on the partitions), scaled on the way
           out of PSUM;
  mask   = affine_select keeps key j for query i when i - j >= 0: the affine
           value is (q0 - k0) + 1 * partition - 1 * column;
  softmax as in softmax.py;
  out    = P v, accumulating over key blocks in PSUM (P^T comes from a
           Tensor-engine transpose).
Keys after the block's last query are never touched.
"""

import math

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


def _blocks(total, size):
    return [(start, min(size, total - start)) for start in range(0, total, size)]


@nki.jit
def causal_attention(q, k, v):
    seq, d = q.shape
    out = nl.ndarray((seq, d), q.dtype, buffer=nl.shared_hbm)
    scale = 1.0 / math.sqrt(d)
    for q0, nq in _blocks(seq, 128):
        kv_len = q0 + nq
        qT = nl.load(q[q0:q0 + nq, :].permute(1, 0))
        scores = nl.ndarray((nq, kv_len), nl.float32)
        for k0, nk in _blocks(kv_len, 512):
            kT = nl.load(k[k0:k0 + nk, :].permute(1, 0))
            s_psum = nl.ndarray((nq, nk), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(s_psum, qT, kT)
            block = scores[:, k0:k0 + nk]
            nisa.activation(block, nl.copy, s_psum, scale=scale)
            nisa.affine_select(block, pattern=[[-1, nk]], channel_multiplier=1,
                               on_true_tile=block, on_false_value=-math.inf,
                               cmp_op=nl.greater_equal, offset=q0 - k0)
        neg_max = nl.ndarray((nq, 1), nl.float32)
        nisa.tensor_reduce(neg_max, nl.maximum, scores, axis=1, negate=True)
        probs = nl.ndarray((nq, kv_len), nl.bfloat16)
        sums = nl.ndarray((nq, 1), nl.float32)
        nisa.activation(probs, nl.exp, scores, bias=neg_max, reduce_op=nl.add, reduce_res=sums)
        acc = nl.ndarray((nq, d), nl.float32, buffer=nl.psum)
        for k0, nk in _blocks(kv_len, 128):
            pT_psum = nl.ndarray((nk, nq), nl.bfloat16, buffer=nl.psum)
            nisa.nc_transpose(pT_psum, probs[:, k0:k0 + nk])
            pT = nl.ndarray((nk, nq), nl.bfloat16)
            nisa.tensor_copy(pT, pT_psum)
            v_tile = nl.load(v[k0:k0 + nk, :], dtype=nl.bfloat16)
            nisa.nc_matmul(acc, pT, v_tile)
        inv = nl.ndarray((nq, 1), nl.float32)
        nisa.reciprocal(inv, sums)
        result = nl.ndarray((nq, d), q.dtype)
        nisa.tensor_scalar(result, acc, nl.multiply, inv)
        nl.store(out[q0:q0 + nq, :], result)
    return out
