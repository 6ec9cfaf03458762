/* RANDPERM: a uniformly random permutation of 0 .. n-1 (layout in
 * neuronrt/ops/random.h).
 *
 * Fisher-Yates from the top: step i (n-1 down to 1) swaps position i with
 * j = floor(x_i (i + 1) / 2^64), x_i being element i's 64-bit draw. The
 * walk is serial (every step depends on the ones before) but its cost is
 * the random accesses, not the draws: a batch of j's is computed ahead so
 * that each swap's target can be prefetched some steps before it is used.
 * Results are the same for any thread count because nothing is split.
 */
#include <stdlib.h>
#include "ops/engine/convert.h"
#include "ops/random/random_engine.h"

#define BATCH 1024
#define PREFETCH_DISTANCE 16

static void shuffle(int64_t *perm, int64_t n, const rt_philox_stream *stream) {
  uint32_t w[2 * BATCH];
  int64_t target[BATCH];
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t hi = n; hi > 1;) { /* steps hi-1 down to lo, lo >= 1 */
    int64_t lo = hi - BATCH < 1 ? 1 : hi - BATCH, count = hi - lo;
    rt_philox_words(stream, 2 * (uint64_t)lo, 2 * count, w);
    for (int64_t k = 0; k < count; k++)
      target[k] = (int64_t)rt_mulhi_u64(rt_random_u64(w[2 * k], w[2 * k + 1]), (uint64_t)(lo + k) + 1);
    for (int64_t k = count - 1; k >= 0; k--) {
      if (k >= PREFETCH_DISTANCE) __builtin_prefetch(&perm[target[k - PREFETCH_DISTANCE]], 1);
      int64_t i = lo + k, j = target[k];
      int64_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    hi = lo;
  }
}

nrt_status rt_kernel_randperm(const nrt_op *op) {
  rt_philox_stream stream;
  nrt_status s = rt_random_check(op, 1, 1, 2, &stream);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0];
  if (out->ndim != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "randperm: expects a 1-d output, got %d dims",
                   out->ndim);
  if (out->dtype == NRT_BOOL)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "randperm: not implemented for dtype bool");
  int64_t n = out->shape[0];
  if (n == 0) return NRT_SUCCESS;
  int in_place = out->dtype == NRT_INT64 && (out->strides[0] == 1 || n == 1);
  int64_t *perm = in_place ? out->data : malloc((size_t)n * sizeof *perm);
  if (!perm)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "randperm: cannot allocate %lld bytes of host scratch",
                   (long long)n * 8);
  shuffle(perm, n, &stream);
  if (!in_place) {
    nrt_tensor_view views[2] = {*out, *out};
    views[1].data = perm;
    views[1].dtype = NRT_INT64;
    views[1].strides[0] = 1;
    rt_iterate(2, views, rt_convert_loops[out->dtype][NRT_INT64], NULL);
    free(perm);
  }
  return NRT_SUCCESS;
}
