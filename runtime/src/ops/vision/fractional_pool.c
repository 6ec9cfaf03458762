/* Fractional max pooling: FRACTIONAL_MAX_POOL (see neuronrt/ops/vision.h).
 *
 * Each plane draws its windows from its own samples u in [0, 1): along a
 * dim of I inputs, O outputs and window k the starts are
 * floor((o + u) a) - floor(u a) with a = (I - k) / (O - 1), the last one
 * I - k (Graham's pseudo-random sequence). PyTorch computes these in the
 * samples' own dtype, rounding after each step for float16 and bfloat16;
 * so does this kernel, so the windows match the CPU's for every dtype.
 * The maximum of each window is the CPU's: the last NaN, otherwise the
 * first of the largest values; the index is the position in the plane.
 * Planes are independent: results do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/vision/vision_common.h"

typedef struct fmp_job {
  const nrt_tensor_view *out, *idx, *in, *samples;
  int64_t k[3];     /* window (D, H, W) */
  int dims;         /* 2: samples (w, h); 3: samples (d, h, w) */
  atomic_int out_of_memory;
} fmp_job;

/* x rounded to the samples' dtype (the CPU's scalar_t arithmetic). */
static double fmp_round(nrt_dtype t, double x) {
  switch (t) {
    case NRT_FLOAT32: return (float)x;
    case NRT_BFLOAT16: return rt_bfloat16_to_float(rt_bfloat16_from_float((float)x));
    case NRT_FLOAT16: return rt_half_to_float(rt_half_from_float((float)x));
    default: return x;
  }
}

static double fmp_load(nrt_dtype t, const char *p) {
  switch (t) {
    case NRT_FLOAT32: return *(const float *)p;
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(const uint16_t *)p);
    case NRT_FLOAT16: return rt_half_to_float(*(const uint16_t *)p);
    default: return *(const double *)p;
  }
}

static void fmp_store(nrt_dtype t, char *p, double v) {
  switch (t) {
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    default: *(double *)p = v; break;
  }
}

/* The maximum of one window and its position in the plane, one function
 * per dtype so that the innermost loop reads its elements directly (a
 * dtype switch per element cost a tenth of the forward). */
typedef double (*fmp_window_fn)(const char *plane, const nrt_tensor_view *in, const int64_t start[3],
                                const int64_t k[3], int64_t *at);

#define FMP_WINDOW(NAME, T, LOAD)                                                                       \
  static double NAME(const char *plane, const nrt_tensor_view *in, const int64_t start[3],             \
                     const int64_t k[3], int64_t *at) {                                                \
    const T *p = (const T *)plane;                                                                      \
    const int64_t H = in->shape[3], W = in->shape[4];                                                  \
    const int64_t sd = in->strides[2], sh = in->strides[3], sw = in->strides[4];                       \
    double best = -INFINITY;                                                                            \
    int64_t pos = (start[0] * H + start[1]) * W + start[2];                                            \
    for (int64_t d = start[0]; d < start[0] + k[0]; d++)                                                \
      for (int64_t h = start[1]; h < start[1] + k[1]; h++) {                                            \
        const T *row = p + d * sd + h * sh;                                                             \
        for (int64_t w = start[2]; w < start[2] + k[2]; w++) {                                          \
          double v = LOAD(row[w * sw]);                                                                 \
          if (v > best || v != v) best = v, pos = (d * H + h) * W + w;                                  \
        }                                                                                               \
      }                                                                                                 \
    *at = pos;                                                                                          \
    return best;                                                                                        \
  }
#define FMP_AS_IS(x) (x)
FMP_WINDOW(fmp_window_f32, float, FMP_AS_IS)
FMP_WINDOW(fmp_window_f64, double, FMP_AS_IS)
FMP_WINDOW(fmp_window_bf16, uint16_t, rt_bfloat16_to_float)
FMP_WINDOW(fmp_window_f16, uint16_t, rt_half_to_float)

static fmp_window_fn fmp_window_for(nrt_dtype t) {
  switch (t) {
    case NRT_FLOAT32: return fmp_window_f32;
    case NRT_BFLOAT16: return fmp_window_bf16;
    case NRT_FLOAT16: return fmp_window_f16;
    default: return fmp_window_f64;
  }
}

/* The window starts of one dim. */
static void fmp_starts(nrt_dtype t, double u, int64_t in, int64_t out, int64_t k, int64_t *start) {
  if (out > 1) {
    double alpha = fmp_round(t, fmp_round(t, (double)(in - k)) / fmp_round(t, (double)(out - 1)));
    int64_t base = (int64_t)fmp_round(t, u * alpha);
    for (int64_t o = 0; o < out - 1; o++)
      start[o] = (int64_t)fmp_round(t, fmp_round(t, fmp_round(t, (double)o) + u) * alpha) - base;
  }
  if (out > 0) start[out - 1] = in - k;
}

static void fmp_planes(int64_t begin, int64_t end, void *arg) {
  fmp_job *j = arg;
  const nrt_tensor_view *in = j->in, *out = j->out, *idx = j->idx, *sm = j->samples;
  const nrt_dtype t = in->dtype;
  const size_t es = nrt_dtype_size(t);
  const fmp_window_fn window = fmp_window_for(t);
  const int64_t C = in->shape[1], D = in->shape[2], H = in->shape[3], W = in->shape[4];
  const int64_t OD = out->shape[2], OH = out->shape[3], OW = out->shape[4];
  int64_t *starts = malloc((size_t)(OD + OH + OW) * sizeof *starts);
  if (!starts) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  int64_t *sd = starts, *sh = starts + OD, *sw = starts + OD + OH;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / C, c = p % C;
    const char *u = (const char *)sm->data + (n * sm->strides[0] + c * sm->strides[1]) * (int64_t)es;
    double us[3];
    for (int s = 0; s < j->dims; s++) us[s] = fmp_load(t, u + s * sm->strides[2] * (int64_t)es);
    double ud = j->dims == 3 ? us[0] : 0, uh = us[1], uw = j->dims == 3 ? us[2] : us[0];
    if (j->dims == 3)
      fmp_starts(t, ud, D, OD, j->k[0], sd);
    else
      sd[0] = 0;
    fmp_starts(t, uh, H, OH, j->k[1], sh);
    fmp_starts(t, uw, W, OW, j->k[2], sw);
    const char *src = (const char *)in->data + (n * in->strides[0] + c * in->strides[1]) * (int64_t)es;
    char *dst = (char *)out->data + (n * out->strides[0] + c * out->strides[1]) * (int64_t)es;
    int64_t *ix = (int64_t *)idx->data + n * idx->strides[0] + c * idx->strides[1];
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          const int64_t start[3] = {sd[od], sh[oh], sw[ow]};
          int64_t at;
          double best = window(src, in, start, j->k, &at);
          fmp_store(t, dst + (od * out->strides[2] + oh * out->strides[3] + ow * out->strides[4]) * (int64_t)es,
                    best);
          ix[od * idx->strides[2] + oh * idx->strides[3] + ow * idx->strides[4]] = at;
        }
  }
  free(starts);
}

/* [out, indices, in, samples [N, C, S]]; scalars [kD, kH, kW]. */
nrt_status rt_kernel_fractional_max_pool(const nrt_op *op) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_check_arity(op, 4, 3);
  if (s) return s;
  if (op->num_outputs != 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects two outputs", name);
  const nrt_tensor_view *out = &op->operands[0], *idx = &op->operands[1], *in = &op->operands[2],
                        *sm = &op->operands[3];
  for (int i = 0; i < 3; i++)
    if (op->operands[i].ndim != 5)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a 5-d [N, C, D, H, W] view", name, i);
  if (sm->ndim != 3 || (sm->shape[2] != 2 && sm->shape[2] != 3))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the samples must be an [N, C, 2 or 3] view", name);
  if (!rt_is_float_dtype(in->dtype) || out->dtype != in->dtype || sm->dtype != in->dtype)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: input, output and samples must share one floating dtype", name);
  if (idx->dtype != NRT_INT64) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64", name);
  fmp_job job;
  memset(&job, 0, sizeof job);
  job.out = out, job.idx = idx, job.in = in, job.samples = sm;
  job.dims = (int)sm->shape[2];
  for (int d = 0; d < 3; d++) job.k[d] = rt_scalar_int(op, d);
  for (int d = 0; d < 2; d++)
    if (out->shape[d] != in->shape[d] || idx->shape[d] != in->shape[d] || sm->shape[d] != in->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: batch and channel sizes differ between operands", name);
  for (int d = 2; d < 5; d++) {
    int64_t k = job.k[d - 2];
    if (idx->shape[d] != out->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output and indices shapes differ", name);
    if (k < 1 || (out->shape[d] > 0 && out->shape[d] + k - 1 > in->shape[d]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: window %lld does not fit %lld inputs for %lld outputs", name,
                     (long long)k, (long long)in->shape[d], (long long)out->shape[d]);
  }
  if (job.dims == 2 && (in->shape[2] != 1 || job.k[0] != 1))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: two samples per plane pool a 2-d image (D = 1)", name);
  int64_t planes = in->shape[0] * in->shape[1];
  int64_t per = out->shape[2] * out->shape[3] * out->shape[4] * job.k[0] * job.k[1] * job.k[2];
  if (planes == 0 || per == 0) return NRT_SUCCESS;
  atomic_init(&job.out_of_memory, 0);
  rt_parallel_for(planes, per >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / per, fmp_planes, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its windows", name);
  return NRT_SUCCESS;
}
