/* Random ops (see op_list.h): counter-based, from Philox4x32-10.
 *
 * Every random op carries the generator state of its launch as its first
 * two scalars: [seed, offset] (uint64 bit patterns in .i). The caller
 * reserves NRT_RANDOM_BLOCKS(n) counter blocks for an op over n elements
 * (n = the output's numel; for MULTINOMIAL rows * categories without
 * replacement, rows * samples with it) by advancing the generator's offset
 * when it launches the op, so launches on a stream draw disjoint numbers in
 * stream order.
 *
 * Counters and elements. Block b of a launch is Philox of counter
 * (offset + b, 0) under key seed: four 32-bit words, and word w of the
 * launch is lane w % 4 of block w / 4. Element i of the output, counted in
 * its logical row-major order (whatever its strides), reads:
 *   32-bit draws (UNIFORM, NORMAL, BERNOULLI, DROPOUT for float32, float16
 *     and bfloat16; every BERNOULLI_TENSOR)     word i
 *   64-bit draws (float64 outputs, RANDOM, EXPONENTIAL, GEOMETRIC,
 *     LOG_NORMAL, CAUCHY, RANDPERM, MULTINOMIAL)  words 2i, 2i + 1
 * NORMAL and LOG_NORMAL use Box-Muller on element pairs (2m, 2m + 1): the
 * pair's radius comes from element 2m's draw, its angle from element
 * 2m + 1's. Values therefore depend on (seed, offset, i) alone: not on the
 * thread count, on how a kernel splits its work, or on the output's layout.
 *
 * Operands and scalars after [seed, offset]:
 *   UNIFORM           [out float]                   [from, to]     [from, to)
 *   NORMAL            [out float]                   [mean, std]
 *                     or [out, mean, std] (tensors, broadcast or immediate;
 *                     std < 0 fails)
 *   BERNOULLI         [out any]                     [p]            u < p
 *   BERNOULLI_TENSOR  [out any, p float, broadcast]                 p outside [0, 1] fails
 *   RANDOM            [out any]          [range (uint64, 0 means 2^64), base]
 *                                                  base + v, v uniform in [0, range)
 *   EXPONENTIAL       [out float]                   [lambda]
 *   GEOMETRIC         [out any numeric]             [p]            in {1, 2, ...}
 *   LOG_NORMAL        [out float]                   [mean, std]    exp(normal)
 *   CAUCHY            [out float]                   [median, sigma]
 *   RANDPERM          [out, 1-d]                                   Fisher-Yates: step i
 *                                                  (n-1 down to 1) swaps i with j <= i
 *                                                  drawn by element i
 *   DROPOUT           [out, mask bool, x]           [keep, scale]  mask = u < keep,
 *                                                  out = x * mask * scale
 *   DROPOUT_BACKWARD  [out, grad, mask] (no seed, offset)  [scale]  out = grad * mask * scale
 *   MULTINOMIAL       [out int64 (rows, k), probs float (rows, categories)]
 *                                                  [replacement]; draw for sample s of row r
 *                     is element r * k + s (with replacement) or r * categories + c
 *                     (category c, without: the k largest of u^(1/p), in order)
 */
#ifndef NEURONRT_OPS_RANDOM_H
#define NEURONRT_OPS_RANDOM_H

/* Counter blocks an op over n elements reserves: 64 bits per element. */
#define NRT_RANDOM_BLOCKS(n) (((n) + 1) / 2)

#define NRT_RANDOM_OPS(X)               \
  X(UNIFORM, uniform)                   \
  X(NORMAL, normal)                     \
  X(BERNOULLI, bernoulli)               \
  X(BERNOULLI_TENSOR, bernoulli_tensor) \
  X(RANDOM, random)                     \
  X(EXPONENTIAL, exponential)           \
  X(GEOMETRIC, geometric)               \
  X(LOG_NORMAL, log_normal)             \
  X(CAUCHY, cauchy)                     \
  X(RANDPERM, randperm)                 \
  X(DROPOUT, dropout)                   \
  X(DROPOUT_BACKWARD, dropout_backward) \
  X(MULTINOMIAL, multinomial)

#endif
