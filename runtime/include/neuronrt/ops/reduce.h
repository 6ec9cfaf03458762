/* Reductions and scans (see op_list.h).
 *
 * Reductions. Operands: [outputs..., in]. Every output has the input's rank
 * and size 1 in each reduced dimension (PyTorch's keepdim form; a caller
 * without keepdim passes its result viewed that way). A dimension is
 * reduced when its output size is 1 and its input size is not; every other
 * dimension must have equal sizes. A reduction over nothing (a reduced size
 * 0) yields the op's identity; ops without one fail. Results do not depend
 * on the number of kernel threads.
 *
 * Accumulation: floating inputs accumulate in float64 (float16 and
 * bfloat16 are read exactly; sums and norms of 16-bit and float32 inputs
 * add short groups of terms in float32 first, unless the output is
 * float64), integer and bool inputs in int64 (wrapping as PyTorch's
 * integer arithmetic does); the result is converted to the output's dtype. An output may be wider than the input only where that
 * widening is exact and agrees with PyTorch's "convert the input to the
 * result dtype first" (integer -> int64, float16/bfloat16 -> float32,
 * float32 -> float64); other conversions are the caller's job.
 *
 *   SUM, PROD            [out, in]   any dtype; integer out for integer in
 *   NANSUM               [out, in]   SUM with NaN read as zero
 *   MEAN                 [out, in]   floating in: sum / count
 *   COUNT_NONZERO        [out, in]   out int64
 *   ANY, ALL             [out, in]   out bool or uint8 (x != 0, NaN is true)
 *   AMAX, AMIN           [out, in]   out has the input's dtype; NaN wins
 *   AMINMAX              [min, max, in]   both in one pass, as AMIN and AMAX
 *   ARGMAX, ARGMIN       [indices, in] or [values, indices, in]: indices
 *                        int64 count in row-major order over the reduced
 *                        dims only; ties and NaN take the first occurrence
 *   VAR                  [var, in] or [var, mean, in]   floating in
 *                        scalars [correction, take_sqrt]:
 *                        var = M2 / max(0, count - correction), std = sqrt
 *   NORM                 [out, in]   floating in; scalars [p]:
 *                        p = 0 count of nonzeros, inf / -inf max / min |x|,
 *                        otherwise (sum |x|^p)^(1/p)
 *   LOGSUMEXP            [out, in]   floating in; m + log(sum exp(x - m))
 *                        with m the max (0 if it is infinite)
 *
 * Scans. Operands [out, in] of one shape; scalars [dim]. out[..., i, ...]
 * combines in[..., 0..i, ...] along dim, in order, accumulating as above:
 *   CUMSUM, CUMPROD
 *   LOGCUMSUMEXP         floating: log(sum exp) of the prefix, combined
 *                        pairwise as PyTorch's CPU scan does (equal
 *                        infinities stay themselves, NaN propagates)
 *   CUMMAX, CUMMIN       [values, indices, in]: values in the input's dtype,
 *                        indices int64; as PyTorch's CPU: a later element
 *                        equal to the running extreme takes over (the last
 *                        index of a tie), a NaN takes over from anything
 *                        and only a later NaN replaces it
 *
 * Histogram.
 *   HISTC  [hist [bins], x]  floating x of any shape, hist of its dtype;
 *          scalars [bins, min, max] (finite, min < max): counts of x in
 *          equal-width bins over [min, max], as PyTorch's CPU bins them;
 *          NaN and elements outside the range are not counted
 *
 * Segment reductions (torch.segment_reduce). data is [outer, rows, inner]
 * (any strides), float32 or float64; offsets a contiguous int64
 * [outer, segments + 1] whose segment s spans rows [offsets[s],
 * offsets[s + 1]); per-segment tensors are [outer, segments, inner].
 * scalars [reduce (0 sum, 1 mean, 2 prod, 3 max, 4 min), has_initial,
 * initial].
 *   SEGMENT_REDUCE [out, data, offsets]: every segment starts from initial
 *            (else 0, 1, -inf or +inf; mean divides sum + initial by the
 *            length and is initial, else NaN, when empty); NaN wins max
 *            and min. Offsets that do not ascend within [0, rows] fail with
 *            NRT_ERROR_INDEX_OUT_OF_RANGE.
 *   SEGMENT_REDUCE_BACKWARD [grad_data, grad, output, data, offsets]: sum
 *            copies, mean divides by the length, max and min share among
 *            the rows equal to the extreme, prod is output / x (with one
 *            zero in the segment: that row gets the product of the others,
 *            the rest 0); rows outside every segment get 0.
 */
#ifndef NEURONRT_OPS_REDUCE_H
#define NEURONRT_OPS_REDUCE_H

#define NRT_REDUCE_OPS(X)          \
  X(SUM, sum)                      \
  X(NANSUM, nansum)                \
  X(MEAN, mean)                    \
  X(PROD, prod)                    \
  X(COUNT_NONZERO, count_nonzero)  \
  X(ANY, any)                      \
  X(ALL, all)                      \
  X(AMAX, amax)                    \
  X(AMIN, amin)                    \
  X(AMINMAX, aminmax)              \
  X(ARGMAX, argmax)                \
  X(ARGMIN, argmin)                \
  X(VAR, var)                      \
  X(NORM, norm)                    \
  X(LOGSUMEXP, logsumexp)          \
  X(CUMSUM, cumsum)                \
  X(CUMPROD, cumprod)              \
  X(LOGCUMSUMEXP, logcumsumexp)    \
  X(CUMMAX, cummax)                \
  X(CUMMIN, cummin)                \
  X(HISTC, histc)                  \
  X(SEGMENT_REDUCE, segment_reduce) \
  X(SEGMENT_REDUCE_BACKWARD, segment_reduce_backward)

#endif
