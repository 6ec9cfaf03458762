/* Attention ops (see op_list.h): scaled dot-product attention, tiled.
 *
 * Shapes: q (B, H, L, E), k (B, Hk, S, E), v (B, Hk, S, Ev), H a multiple of
 * Hk (grouped-query attention: query head h reads key/value head
 * h / (H / Hk)); E and Ev at most NRT_ATTENTION_MAX_HEAD_DIM. q, k, v, out
 * and the gradients share one floating dtype (float32, bfloat16, float16);
 * the kernels accumulate in float32. Any strides. The optional mask is
 * (B, H, L, S), broadcast with stride 0 where the user's mask is smaller:
 * bool (false: the pair does not attend) or floating (added to the scores).
 * Rows whose every key is masked give out = 0 and lse = +inf (as PyTorch's
 * _safe_softmax), and no gradient.
 *
 * Scalars (every op): [scale, causal, dropout_p, seed, offset].
 *   causal: query i attends keys j <= i (the top-left aligned triangle).
 *   dropout: the attention weight of pair (b, h, i, j) is kept, and scaled
 *   by 1 / (1 - dropout_p), iff word n < ceil((1 - dropout_p) 2^32) of the
 *   Philox stream of (seed, offset) (neuronrt/ops/random.h), where
 *   n = ((b H + h) L + i) S + j; the launch reserves
 *   NRT_RANDOM_BLOCKS(B H L S) blocks. Forward and backward launched with
 *   the same seed and offset therefore see the same mask.
 *
 *   SDPA_FORWARD       [out (B,H,L,Ev), lse float32 (B,H,L), q, k, v, mask?]
 *                      lse = log of the row's softmax denominator
 *                      (natural log, scores already scaled and masked)
 *   SDPA_BACKWARD_STATS [stats float32 (B,H,L,2), grad_out, out, lse]
 *                      stats[..., 0] = lse, stats[..., 1] = rowsum(grad_out * out)
 *   SDPA_BACKWARD_KV   [grad_k, grad_v, grad_q?, grad_out, q, k, v, stats, mask?]
 *                      grad_q (when num_outputs is 3): the op then also
 *                      computes grad_q, bit for bit what SDPA_BACKWARD_Q
 *                      gives, and SDPA_BACKWARD_Q is not needed.
 *   SDPA_BACKWARD_Q    [grad_q, grad_scores?, grad_out, q, k, v, stats, mask?]
 *                      grad_scores (B,H,L,S) float32, the gradient of the
 *                      masked scores (that is, of a floating mask), when
 *                      num_outputs is 2.
 * The two backward ops recompute the attention weights block by block from
 * lse: KV walks key blocks (each owns its rows of grad_k and grad_v), Q walks
 * query blocks, so no two threads ever add into one element.
 */
#ifndef NEURONRT_OPS_ATTENTION_H
#define NEURONRT_OPS_ATTENTION_H

#define NRT_ATTENTION_MAX_HEAD_DIM 256
/* Keys per block of the kernels. */
#define NRT_ATTENTION_KEY_BLOCK 64

#define NRT_ATTENTION_OPS(X)                       \
  X(SDPA_FORWARD, sdpa_forward)                    \
  X(SDPA_BACKWARD_STATS, sdpa_backward_stats)      \
  X(SDPA_BACKWARD_KV, sdpa_backward_kv)            \
  X(SDPA_BACKWARD_Q, sdpa_backward_q)

#endif
