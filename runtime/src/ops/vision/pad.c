/* Reflection and replication padding of the last 1 to 3 dims, and their
 * gradients (PAD, PAD_BACKWARD in neuronrt/ops/vision.h). (Circular padding
 * is ATen's composite of slices and cat, which run natively.)
 *
 * Both are maps from an output position to one input position per dim; the
 * maps of the three dims are tabulated once per op (three small arrays), so
 * the element loops only look indices up. The forward copies elements by
 * their size (any dtype). The backward gives each plane to one task, which
 * sums the gradient into a zeroed plane of the compute type (float, double
 * for float64) in output order, then stores it: no atomics, and the order of
 * the sums is fixed, so results do not depend on the thread count.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

enum { PAD_REFLECT = 0, PAD_REPLICATE = 1 };

typedef struct pad_job {
  const nrt_tensor_view *out, *in; /* [planes, D, H, W]: out is the padded side */
  int64_t *map[3];                  /* per padded dim: output index -> input index */
  nrt_dtype c;                      /* backward: compute dtype */
  atomic_int out_of_memory;
} pad_job;

/* The input index that output index o of a dim reads. */
static int64_t pad_source(int mode, int64_t o, int64_t begin, int64_t size) {
  int64_t i = o - begin;
  if (mode == PAD_REPLICATE) return i < 0 ? 0 : i >= size ? size - 1 : i;
  if (size == 1) return 0;
  const int64_t period = 2 * (size - 1); /* reflect without repeating the edge */
  i = ((i % period) + period) % period;
  return i < size ? i : period - i;
}

#define DEFINE_GATHER(T)                                                                            \
  static void gather_##T(char *dst, int64_t ds, const char *src, int64_t ss, const int64_t *map,   \
                         int64_t n) {                                                               \
    for (int64_t k = 0; k < n; k++) *(T *)(dst + k * ds) = *(const T *)(src + map[k] * ss);        \
  }
DEFINE_GATHER(uint8_t)
DEFINE_GATHER(uint16_t)
DEFINE_GATHER(uint32_t)
DEFINE_GATHER(uint64_t)

static void pad_forward_range(int64_t begin, int64_t end, void *ctx) {
  const pad_job *job = ctx;
  const nrt_tensor_view *o = job->out, *in = job->in;
  const int64_t es = (int64_t)nrt_dtype_size(o->dtype);
  const int64_t OD = o->shape[1], OH = o->shape[2], OW = o->shape[3];
  for (int64_t r = begin; r < end; r++) { /* r: an output row (plane, od, oh) */
    const int64_t p = r / (OD * OH), od = r / OH % OD, oh = r % OH;
    char *dst = (char *)o->data + (p * o->strides[0] + od * o->strides[1] + oh * o->strides[2]) * es;
    const char *src = (const char *)in->data +
                      (p * in->strides[0] + job->map[0][od] * in->strides[1] + job->map[1][oh] * in->strides[2]) * es;
    const int64_t ds = o->strides[3] * es, ss = in->strides[3] * es;
    switch (es) {
      case 1: gather_uint8_t(dst, ds, src, ss, job->map[2], OW); break;
      case 2: gather_uint16_t(dst, ds, src, ss, job->map[2], OW); break;
      case 4: gather_uint32_t(dst, ds, src, ss, job->map[2], OW); break;
      default: gather_uint64_t(dst, ds, src, ss, job->map[2], OW); break;
    }
  }
}

/* One plane of the backward in compute type C: acc (the input plane, D*H*W)
 * += grad_out rows, row by row through buf (OW elements). */
#define DEFINE_PAD_BACKWARD(C)                                                                      \
  static void pad_backward_plane_##C(const pad_job *job, int64_t p, C *acc, C *buf) {               \
    const nrt_tensor_view *g = job->out, *gi = job->in;                                             \
    const int64_t es = (int64_t)nrt_dtype_size(g->dtype), is = (int64_t)nrt_dtype_size(gi->dtype); \
    const int64_t OD = g->shape[1], OH = g->shape[2], OW = g->shape[3];                            \
    const int64_t D = gi->shape[1], H = gi->shape[2], W = gi->shape[3];                            \
    const int64_t *mw = job->map[2];                                                                \
    memset(acc, 0, (size_t)(D * H * W) * sizeof(C));                                                \
    for (int64_t od = 0; od < OD; od++)                                                             \
      for (int64_t oh = 0; oh < OH; oh++) {                                                         \
        const char *src = (const char *)g->data +                                                   \
                          (p * g->strides[0] + od * g->strides[1] + oh * g->strides[2]) * es;       \
        char *data[2] = {(char *)buf, (char *)src};                                                 \
        int64_t strides[2] = {(int64_t)sizeof(C), g->strides[3] * es};                              \
        rt_convert_loops[job->c][g->dtype](data, strides, OW, NULL);                                \
        C *row = acc + (job->map[0][od] * H + job->map[1][oh]) * W;                                 \
        for (int64_t ow = 0; ow < OW; ow++) row[mw[ow]] += buf[ow];                                 \
      }                                                                                             \
    for (int64_t d = 0; d < D; d++)                                                                 \
      for (int64_t h = 0; h < H; h++) {                                                             \
        char *dst = (char *)gi->data + (p * gi->strides[0] + d * gi->strides[1] + h * gi->strides[2]) * is; \
        char *data[2] = {dst, (char *)(acc + (d * H + h) * W)};                                     \
        int64_t strides[2] = {gi->strides[3] * is, (int64_t)sizeof(C)};                             \
        rt_convert_loops[gi->dtype][job->c](data, strides, W, NULL);                                \
      }                                                                                             \
  }
DEFINE_PAD_BACKWARD(float)
DEFINE_PAD_BACKWARD(double)

static void pad_backward_range(int64_t begin, int64_t end, void *ctx) {
  pad_job *job = ctx;
  const size_t c = nrt_dtype_size(job->c);
  const int64_t plane = job->in->shape[1] * job->in->shape[2] * job->in->shape[3];
  void *acc = malloc((size_t)(plane > 0 ? plane : 1) * c);
  void *buf = malloc((size_t)(job->out->shape[3] > 0 ? job->out->shape[3] : 1) * c);
  if (!acc || !buf) {
    atomic_store(&job->out_of_memory, 1);
  } else {
    for (int64_t p = begin; p < end; p++) {
      if (job->c == NRT_FLOAT64)
        pad_backward_plane_double(job, p, acc, buf);
      else
        pad_backward_plane_float(job, p, acc, buf);
    }
  }
  free(acc);
  free(buf);
}

/* operands [padded, unpadded] (out, in for PAD; grad_out is operand 1 of
 * PAD_BACKWARD, so the roles swap). */
static nrt_status pad_run(const nrt_op *op, int backward) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars != 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands (out, in) and scalars (mode, pad_d, pad_h, pad_w)",
                   name);
  const nrt_tensor_view *padded = &op->operands[backward ? 1 : 0], *plain = &op->operands[backward ? 0 : 1];
  if (padded->ndim != 4 || plain->ndim != 4 || padded->shape[0] != plain->shape[0])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be 4-d [planes, D, H, W] views of as many planes",
                   name);
  const int mode = (int)op->scalars[0].i;
  if (mode != PAD_REFLECT && mode != PAD_REPLICATE)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown mode %d", name, mode);
  if (!backward && padded->dtype != plain->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: out and in must have one dtype", name);
  if (backward && (!rt_is_float_dtype(padded->dtype) || !rt_is_float_dtype(plain->dtype)))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: floating dtypes only, got %s", name, nrt_dtype_name(padded->dtype));
  const int64_t planes = padded->shape[0];
  int64_t rows = planes, elems = planes;
  for (int d = 1; d < 4; d++) {
    if (padded->shape[d] > 0 && plain->shape[d] == 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: cannot pad an empty dim %d", name, d);
    if (mode == PAD_REFLECT && plain->shape[d] > 0 && op->scalars[d].i >= plain->shape[d] &&
        padded->shape[d] > plain->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: reflection padding %lld is not less than the dim %lld", name,
                     (long long)op->scalars[d].i, (long long)plain->shape[d]);
    elems *= padded->shape[d];
    if (d < 3) rows *= padded->shape[d];
  }
  pad_job job = {.out = padded, .in = plain, .c = padded->dtype == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32};
  nrt_status s = NRT_SUCCESS;
  for (int d = 0; d < 3; d++) {
    const int64_t n = padded->shape[d + 1];
    job.map[d] = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!job.map[d]) {
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      goto done;
    }
    for (int64_t o = 0; o < n; o++) job.map[d][o] = pad_source(mode, o, op->scalars[d + 1].i, plain->shape[d + 1]);
  }
  if (!backward) {
    if (elems > 0) rt_parallel_for(rows, 1 + RT_VISION_GRAIN / (padded->shape[3] + 1), pad_forward_range, &job);
  } else if (nrt_view_numel(plain) > 0) {
    const int64_t per_plane = planes > 0 ? elems / planes + nrt_view_numel(plain) / planes : 1;
    rt_parallel_for(planes, 1 + RT_VISION_GRAIN / (per_plane + 1), pad_backward_range, &job);
    if (atomic_load(&job.out_of_memory)) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  }
done:
  for (int d = 0; d < 3; d++) free(job.map[d]);
  return s;
}

nrt_status rt_kernel_pad(const nrt_op *op) { return pad_run(op, 0); }

nrt_status rt_kernel_pad_backward(const nrt_op *op) { return pad_run(op, 1); }
