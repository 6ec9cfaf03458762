/* Normalisation, softmax and loss ops (see op_list.h).
 *
 * Floating data only. float16 and bfloat16 are computed and accumulated in
 * float32, float32 in float32 (long sums are cut into fixed chunks whose
 * float32 partial sums are added in float64), float64 in float64. Operands
 * of one op may mix floating dtypes (a bfloat16 input with float32 weights,
 * a float32 gradient of a float16 softmax): each is read in its own dtype.
 * Every split of the work depends on the shapes only, so results do not
 * depend on the number of kernel threads. An optional operand that is
 * absent is an empty view (0 elements); an output that is not wanted is
 * likewise empty.
 *
 * Softmax. Operands are 3-d views [outer, n, inner] (any strides) and the
 * op works along the middle dimension:
 *   SOFTMAX, LOG_SOFTMAX        [out, in]
 *   SOFTMAX_BACKWARD            [grad_in, grad_out, out]:
 *                               grad_in = out (grad_out - sum(grad_out out))
 *   LOG_SOFTMAX_BACKWARD        [grad_in, grad_out, out]:
 *                               grad_in = grad_out - exp(out) sum(grad_out)
 * SOFTMAX and SOFTMAX_BACKWARD take an optional last operand, a bool mask
 * seen as [A, B, n, inner] with A B = outer (any strides, 0 to broadcast):
 * a masked input counts as -inf (a row masked whole gives NaN), and a
 * masked entry's gradient is 0 and adds nothing to sum(grad_out out).
 *
 * Row norms. in is [rows, n] (any strides); weight, bias [n]; mean, rstd
 * [rows]. rstd = 1 / sqrt(var + eps) with the biased variance; RMS_NORM
 * uses the mean square instead of the variance and does not centre.
 *   LAYER_NORM   [out, mean, rstd, in, weight?, bias?]  scalars [eps]
 *   RMS_NORM     [out, rstd, in, weight?]               scalars [eps]
 *   LAYER_NORM_BACKWARD [grad_in?, grad_weight?, grad_bias?, grad_out, in,
 *                        mean, rstd, weight?]
 *   RMS_NORM_BACKWARD   [grad_in?, grad_weight?, grad_out, in, rstd, weight?]
 *
 * Group norm. in is [batch, channels, spatial] (any strides); channels
 * split into groups of equal size; weight, bias [channels]; mean, rstd
 * [batch, groups].
 *   GROUP_NORM          [out, mean, rstd, in, weight?, bias?]  scalars [groups, eps]
 *   GROUP_NORM_BACKWARD [grad_in?, grad_weight?, grad_bias?, grad_out, in,
 *                        mean, rstd, weight?]                  scalars [groups]
 *
 * Batch norm. in is [batch, channels, spatial] (any strides); every other
 * operand is [channels] or absent. Training: the batch statistics are
 * computed, saved (mean and invstd = 1 / sqrt(var + eps)) and folded into
 * the running statistics when given: running = (1 - momentum) running +
 * momentum stat, with the unbiased variance. Evaluation: the running
 * statistics normalise and nothing is saved.
 *   BATCH_NORM          [out, save_mean?, save_invstd?, running_mean?,
 *                        running_var?, in, weight?, bias?]
 *                       scalars [training, momentum, eps]
 *   BATCH_NORM_BACKWARD [grad_in?, grad_weight?, grad_bias?, grad_out, in,
 *                        weight?, mean, invstd_or_var]  scalars [training, eps]
 *                       training: mean and invstd are the saved ones;
 *                       evaluation: the running mean and variance
 *
 * Losses.
 *   NLL_LOSS [out, total_weight, in, target, weight?]
 *            scalars [reduction (0 none, 1 mean, 2 sum), ignore_index]
 *            in [batch, classes, spatial], target int64 [batch, spatial],
 *            out [batch, spatial] (none) or one element; total_weight one
 *            element: the summed weights of the targets counted (0 for
 *            none). A target outside [0, classes) other than ignore_index
 *            fails with NRT_ERROR_INDEX_OUT_OF_RANGE.
 *   NLL_LOSS_BACKWARD [grad_in, grad_out, target, weight?, total_weight]
 *            the same scalars and layouts; grad_in is written in full.
 * Pointwise losses (operands of one shape, broadcast allowed, as in
 * pointwise.h; reductions are left to the reduction ops):
 *   MSE_LOSS         [out, x, y]                   (x - y)^2
 *   SMOOTH_L1_LOSS   [out, x, y]  scalars [beta]   0.5 d^2 / beta if |d| < beta,
 *                                                  else |d| - 0.5 beta
 *   HUBER_LOSS       [out, x, y]  scalars [delta]  0.5 d^2 if |d| < delta,
 *                                                  else delta (|d| - 0.5 delta)
 *   BINARY_CROSS_ENTROPY [out, x, y, weight]       -w (y max(log x, -100) +
 *                    (1 - y) max(log(1 - x), -100)); x outside [0, 1] fails
 *                    with NRT_ERROR_INVALID_ARGUMENT
 *   MSE_LOSS_BACKWARD         [grad_in, grad_out, x, y]  scalars [scale]
 *   SMOOTH_L1_LOSS_BACKWARD   [grad_in, grad_out, x, y]  scalars [beta, scale]
 *   HUBER_LOSS_BACKWARD       [grad_in, grad_out, x, y]  scalars [delta, scale]
 *   BINARY_CROSS_ENTROPY_BACKWARD [grad_in, grad_out, x, y, weight]
 *                                 scalars [scale]
 *   (scale multiplies the gradient: 1 / count for a mean reduction)
 * Pointwise helpers that loss formulas reach (kl_div, the target gradient
 * of binary cross entropy), float, with pointwise.h's conventions:
 *   XLOGY  [out, x, y]  x log(y); 0 where x is 0, NaN where y is NaN
 *   LOGIT  [out, x]     scalars [eps]: log(z / (1 - z)), z = x clamped to
 *                       [eps, 1 - eps] when eps >= 0, z = x otherwise
 *   LOGIT_BACKWARD [grad_in, grad_out, x]  scalars [eps]: grad_out / (x (1 - x));
 *                       0 outside [eps, 1 - eps] when eps >= 0, NaN outside
 *                       [0, 1] otherwise
 *
 * Recurrent cells: one time step after the GEMMs (ATen's fused cell ops).
 * Gates are [batch, k * hidden] views (any strides), biases [k * hidden]
 * or absent, states [batch, hidden]; the gate blocks are LSTM (i, f, g, o),
 * GRU (r, z, n).
 *   LSTM_CELL  [hy, cy, workspace, input_gates, hidden_gates, cx, b_ih?, b_hh?]
 *              gates = input_gates + hidden_gates + b_ih + b_hh; i, f, o
 *              sigmoid, g tanh of their blocks; cy = f cx + i g,
 *              hy = o tanh(cy); workspace [batch, 4 hidden] = (i, f, g, o)
 *   LSTM_CELL_BACKWARD [grad_gates, grad_cx, grad_hy?, grad_cy?, cx, cy, workspace]
 *              grad_gates [batch, 4 hidden] (of the summed gates before
 *              the nonlinearities); an absent gradient counts as zeros
 *   GRU_CELL   [hy, workspace, input_gates, hidden_gates, hx, b_ih?, b_hh?]
 *              r, z = sigmoid(input + hidden gates + biases),
 *              hn = hidden_n + b_hn, n = tanh(input_n + b_in + r hn),
 *              hy = n + z (hx - n); workspace [batch, 5 hidden] = (r, z, n, hx, hn)
 *   GRU_CELL_BACKWARD [grad_input_gates, grad_hidden_gates, grad_hx, grad_hy, workspace]
 *
 * Embedding bags (ATen's _embedding_bag). weight [V, D] floating; indices
 * [N] and offsets int32/int64; bag b takes indices [offsets[b], offsets[b+1])
 * (the last bag runs to N unless include_last_offset, where offsets has B + 1
 * entries). Indices equal to padding_idx are skipped and not counted.
 *   EMBEDDING_BAG [out [B, D], offset2bag int64 [N], bag_size int64 [B],
 *                  max_indices int64 ([B, D] for max, else [B]), weight,
 *                  indices, offsets, per_sample_weights? [N] (sum only)]
 *                 scalars [mode (0 sum, 1 mean, 2 max), padding_idx,
 *                 include_last_offset]: out = sum (times the sample
 *                 weights), mean or max of the bag's rows (0 for an empty
 *                 bag); bag_size = rows counted; max_indices = the row that
 *                 gave each max (bag_size again outside max mode);
 *                 offset2bag[i] = the bag of index i (-1 for none). Offsets
 *                 not starting at 0, decreasing or past N and indices out of
 *                 [0, V) fail.
 *   EMBEDDING_BAG_BACKWARD [grad_weight [V, D], grad [B, D], indices,
 *                  offset2bag, bag_size, max_indices, per_sample_weights?]
 *                 scalars [mode, padding_idx, scale_grad_by_freq]
 *   EMBEDDING_BAG_PSW_BACKWARD [grad_psw [N], grad [B, D], weight, indices,
 *                  offset2bag]  scalars [mode (sum only), padding_idx]:
 *                 grad_psw[i] = grad[bag(i)] . weight[indices[i]]
 *
 * Renorm.
 *   RENORM [out, x]  scalars [p > 0, maxnorm >= 0, embedding?]: the slices
 *                    along dim 0 (the caller moves the renormed dim there),
 *                    each scaled by maxnorm / (norm + 1e-7) where its p-norm
 *                    exceeds maxnorm. renorm rounds that factor to x's
 *                    dtype; with embedding = 1 (embedding_renorm_) the norm
 *                    is rounded to x's dtype too, the factor computed in
 *                    double
 *
 * CTC loss (Graves et al. 2006), log space, float32 or float64 data.
 * log_probs [T, N, C] (any strides); targets a 1-d int32/int64 view holding
 * every item's labels; meta a contiguous int64 [N, 3] of (input length <= T,
 * target length L, offset of the item's first label in targets);
 * log_alpha [N, T, S] with S >= 2 max L + 1.
 *   CTC_LOSS [nll [N], log_alpha, log_probs, targets, meta]  scalars [blank]
 *            nll = -log p(target | input) (+inf when no path exists, 0 for
 *            an empty input and target); log_alpha the forward variables,
 *            -inf past an item's states or input length. A label outside
 *            [0, C) fails with NRT_ERROR_INDEX_OUT_OF_RANGE.
 *   CTC_LOSS_BACKWARD [grad [T, N, C], grad_out [N], log_probs, targets,
 *            meta, nll, log_alpha]  scalars [blank, zero_infinity]
 *            d(grad_out . nll)/d log_probs; 0 past an item's input length
 *            and, with zero_infinity, for items whose nll is +inf
 */
#ifndef NEURONRT_OPS_NN_H
#define NEURONRT_OPS_NN_H

#define NRT_NN_OPS(X)                                                \
  X(SOFTMAX, softmax)                                                \
  X(LOG_SOFTMAX, log_softmax)                                        \
  X(SOFTMAX_BACKWARD, softmax_backward)                              \
  X(LOG_SOFTMAX_BACKWARD, log_softmax_backward)                      \
  X(LAYER_NORM, layer_norm)                                          \
  X(RMS_NORM, rms_norm)                                              \
  X(LAYER_NORM_BACKWARD, layer_norm_backward)                        \
  X(RMS_NORM_BACKWARD, rms_norm_backward)                            \
  X(GROUP_NORM, group_norm)                                          \
  X(GROUP_NORM_BACKWARD, group_norm_backward)                        \
  X(BATCH_NORM, batch_norm)                                          \
  X(BATCH_NORM_BACKWARD, batch_norm_backward)                        \
  X(NLL_LOSS, nll_loss)                                              \
  X(NLL_LOSS_BACKWARD, nll_loss_backward)                            \
  X(MSE_LOSS, mse_loss)                                              \
  X(SMOOTH_L1_LOSS, smooth_l1_loss)                                  \
  X(HUBER_LOSS, huber_loss)                                          \
  X(BINARY_CROSS_ENTROPY, binary_cross_entropy)                      \
  X(MSE_LOSS_BACKWARD, mse_loss_backward)                            \
  X(SMOOTH_L1_LOSS_BACKWARD, smooth_l1_loss_backward)                \
  X(HUBER_LOSS_BACKWARD, huber_loss_backward)                        \
  X(BINARY_CROSS_ENTROPY_BACKWARD, binary_cross_entropy_backward)    \
  X(XLOGY, xlogy)                                                    \
  X(LOGIT, logit)                                                    \
  X(LOGIT_BACKWARD, logit_backward)                                  \
  X(LSTM_CELL, lstm_cell)                                            \
  X(LSTM_CELL_BACKWARD, lstm_cell_backward)                          \
  X(GRU_CELL, gru_cell)                                              \
  X(GRU_CELL_BACKWARD, gru_cell_backward)                            \
  X(EMBEDDING_BAG, embedding_bag)                                    \
  X(EMBEDDING_BAG_BACKWARD, embedding_bag_backward)                  \
  X(EMBEDDING_BAG_PSW_BACKWARD, embedding_bag_psw_backward)          \
  X(RENORM, renorm)                                                  \
  X(CTC_LOSS, ctc_loss)                                              \
  X(CTC_LOSS_BACKWARD, ctc_loss_backward)

#endif
