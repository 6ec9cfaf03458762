/* HISTC (see ops/reduce.h): counts of x's elements in bins equal-width bins
 * over [min, max]. The bin of an element follows PyTorch's CPU kernel
 * (linear interpolation without a search of the edges, in the data's own
 * dtype: float16 and bfloat16 round after each operation as c10::Half and
 * c10::BFloat16 arithmetic does), so the counts are identical. Elements
 * outside [min, max] and NaN are not counted; max falls in the last bin.
 * Counts are int64 per chunk of the walk (fixed chunks), summed at the end
 * and stored in the data's dtype. (The CPU adds its counts in the data's
 * dtype: its float16 and bfloat16 counts stop growing past 2048 and 256;
 * these are exact, rounded once.)
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/iterate.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"

#define HISTC_CHUNKS 64

typedef struct histc_job {
  rt_plan plan;
  nrt_dtype dtype;
  int64_t bins;
  double left, right;
  int64_t *counts; /* [HISTC_CHUNKS][bins] */
} histc_job;

typedef struct histc_chunk {
  const histc_job *job;
  int64_t *counts;
} histc_chunk;

static inline float round_to(nrt_dtype t, float f) {
  return t == NRT_FLOAT16 ? rt_half_to_float(rt_half_from_float(f)) : rt_bfloat16_to_float(rt_bfloat16_from_float(f));
}

static void histc_run(char **data, const int64_t *strides, int64_t n, void *ctx) {
  histc_chunk *c = ctx;
  const histc_job *job = c->job;
  int64_t last = job->bins - 1;
  const char *p = data[0];
  switch (job->dtype) {
    case NRT_FLOAT64: {
      double l = job->left, r = job->right;
      for (int64_t i = 0; i < n; i++, p += strides[0]) {
        double e = *(const double *)p;
        if (!(e >= l && e <= r)) continue;
        int64_t pos = (int64_t)((e - l) * (double)job->bins / (r - l));
        c->counts[pos > last ? last : pos]++;
      }
      break;
    }
    case NRT_FLOAT32: {
      float l = (float)job->left, r = (float)job->right, bins = (float)job->bins, width = r - l;
      for (int64_t i = 0; i < n; i++, p += strides[0]) {
        float e = *(const float *)p;
        if (!(e >= l && e <= r)) continue;
        float scaled = (e - l) * bins;
        int64_t pos = (int64_t)(scaled / width);
        c->counts[pos > last ? last : pos]++;
      }
      break;
    }
    default: { /* float16, bfloat16 */
      nrt_dtype t = job->dtype;
      float l = round_to(t, (float)job->left), r = round_to(t, (float)job->right);
      float bins = round_to(t, (float)job->bins), width = round_to(t, r - l);
      for (int64_t i = 0; i < n; i++, p += strides[0]) {
        float e = t == NRT_FLOAT16 ? rt_half_to_float(*(const rt_half *)p) : rt_bfloat16_to_float(*(const rt_bfloat16 *)p);
        if (!(e >= l && e <= r)) continue;
        float q = round_to(t, round_to(t, round_to(t, e - l) * bins) / width);
        int64_t pos = (int64_t)q;
        c->counts[pos > last ? last : pos]++;
      }
    }
  }
}

static void histc_chunks(int64_t c0, int64_t c1, void *arg) {
  histc_job *job = arg;
  int64_t numel = job->plan.numel;
  for (int64_t c = c0; c < c1; c++) {
    histc_chunk chunk = {.job = job, .counts = job->counts + c * job->bins};
    rt_plan_run(&job->plan, numel * c / HISTC_CHUNKS, numel * (c + 1) / HISTC_CHUNKS, histc_run, &chunk);
  }
}

nrt_status rt_kernel_histc(const nrt_op *op) {
  const char *name = "histc";
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [hist, x] and scalars [bins, min, max]", name);
  const nrt_tensor_view *hist = &op->operands[0], *x = &op->operands[1];
  int64_t bins = op->scalars[0].i;
  double left = op->scalars[1].f, right = op->scalars[2].f;
  nrt_dtype t = x->dtype;
  if (t != NRT_FLOAT16 && t != NRT_BFLOAT16 && t != NRT_FLOAT32 && t != NRT_FLOAT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: \"histogram_cpu\" not implemented for '%s'", name,
                   nrt_dtype_name(t));
  if (bins <= 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "torch.histogram(): bins must be > 0, but got %lld for dimension 0",
                   (long long)bins);
  if (!isfinite(left) || !isfinite(right))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "torch.histc: range of [%g, %g] is not finite", left, right);
  if (!(left < right)) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "torch.histc: max must be larger than min");
  if (hist->ndim != 1 || hist->shape[0] != bins || hist->dtype != t)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects hist [bins] of x's dtype", name);
  histc_job *job = malloc(sizeof *job);
  int64_t *counts = calloc((size_t)(HISTC_CHUNKS * bins + bins), sizeof *counts);
  if (!job || !counts) {
    free(job);
    free(counts);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the counts", name);
  }
  *job = (histc_job){.dtype = t, .bins = bins, .left = left, .right = right, .counts = counts};
  rt_plan_build(1, x, &job->plan);
  if (job->plan.numel > 0)
    rt_parallel_for(HISTC_CHUNKS, job->plan.numel >= RT_PARALLEL_GRAIN ? 1 : HISTC_CHUNKS, histc_chunks, job);
  int64_t *total = counts + HISTC_CHUNKS * bins;
  for (int64_t c = 0; c < HISTC_CHUNKS; c++)
    for (int64_t b = 0; b < bins; b++) total[b] += counts[c * bins + b];
  double *values = (double *)counts; /* reuse the first chunk's space */
  for (int64_t b = 0; b < bins; b++) values[b] = (double)total[b];
  char *data[2] = {(char *)hist->data, (char *)values};
  int64_t strides[2] = {hist->strides[0] * (int64_t)nrt_dtype_size(t), 8};
  rt_convert_loops[t][NRT_FLOAT64](data, strides, bins, NULL);
  free(counts);
  free(job);
  return NRT_SUCCESS;
}
