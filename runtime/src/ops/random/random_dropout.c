/* DROPOUT and DROPOUT_BACKWARD (layouts in neuronrt/ops/random.h).
 *
 * The forward pass draws the mask and scales the kept inputs in one pass:
 * out = x * mask * scale, multiplied in that order as PyTorch's
 * input.mul(mask).mul_(scale) does, so a dropped inf or NaN input gives NaN
 * there as here. The backward pass is the same product without the draw.
 */
#include <math.h>
#include "ops/engine/loops.h"
#include "ops/pointwise/pointwise.h"
#include "ops/random/random_engine.h"

typedef struct dropout_ctx {
  rt_philox_stream stream;
  uint32_t threshold; /* kept  <=>  word < threshold, unless always */
  uint32_t always;
  double scale;
} dropout_ctx;

#define DROPOUT_LOOP(NAME, T)                                                               \
  RT_SIMD_VOID(dropout_##NAME##_loop, (T *out, uint8_t *mask, const T *x,                   \
                                       const uint32_t *w, int64_t n, uint32_t threshold,    \
                                       uint32_t always, T scale),                           \
                                      (out, mask, x, w, n, threshold, always, scale)) {     \
    for (int64_t i = 0; i < n; i++) {                                                       \
      uint32_t keep = (w[i] < threshold) | always;                                          \
      mask[i] = (uint8_t)keep;                                                              \
      out[i] = x[i] * (T)keep * scale;                                                      \
    }                                                                                       \
  }
DROPOUT_LOOP(f32, float)
DROPOUT_LOOP(f64, double)

static void dropout_f32_chunk(const rt_random_chunk *c, void *arg) {
  const dropout_ctx *d = arg;
  uint32_t w[RT_RANDOM_CHUNK];
  rt_philox_words(&d->stream, (uint64_t)c->first, c->count, w);
  dropout_f32_loop((float *)c->data[0], (uint8_t *)c->data[1], (const float *)c->data[2], w,
                   c->count, d->threshold, d->always, (float)d->scale);
}

static void dropout_f64_chunk(const rt_random_chunk *c, void *arg) {
  const dropout_ctx *d = arg;
  uint32_t w[RT_RANDOM_CHUNK];
  rt_philox_words(&d->stream, (uint64_t)c->first, c->count, w);
  dropout_f64_loop((double *)c->data[0], (uint8_t *)c->data[1], (const double *)c->data[2], w,
                   c->count, d->threshold, d->always, d->scale);
}

nrt_status rt_kernel_dropout(const nrt_op *op) {
  dropout_ctx d;
  nrt_status s = rt_random_check(op, 3, 2, 4, &d.stream);
  if (s) return s;
  nrt_dtype dtype = op->operands[0].dtype;
  if (!nrt_dtype_is_floating(dtype) || op->operands[2].dtype != dtype ||
      op->operands[1].dtype != NRT_BOOL)
    return rt_fail(NRT_ERROR_UNSUPPORTED,
                   "dropout: expects a floating output and input of one dtype and a bool mask, "
                   "got %s, %s, %s",
                   nrt_dtype_name(dtype), nrt_dtype_name(op->operands[2].dtype),
                   nrt_dtype_name(op->operands[1].dtype));
  double keep = rt_random_scalar_f(op, 2);
  if (!(keep >= 0 && keep <= 1))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "dropout: keep probability %g is outside [0, 1]",
                   keep);
  double t = ceil(keep * 0x1p32);
  d.always = t >= 0x1p32;
  d.threshold = d.always ? UINT32_MAX : (uint32_t)t;
  d.scale = rt_random_scalar_f(op, 3);
  nrt_dtype compute = rt_compute_dtype(dtype);
  nrt_dtype want[3] = {compute, NRT_BOOL, compute};
  rt_random_run(op, want, compute == NRT_FLOAT32 ? dropout_f32_chunk : dropout_f64_chunk, &d);
  return NRT_SUCCESS;
}

RT_BINARY_LOOP(dropout_backward_f32, float, float, a * b * (float)sc->f[0])
RT_BINARY_LOOP(dropout_backward_f64, double, double, a * b * sc->f[0])

nrt_status rt_kernel_dropout_backward(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_FLOAT32] = dropout_backward_f32,
                                      [NRT_FLOAT64] = dropout_backward_f64};
  if (op->num_operands != 3 || op->num_scalars != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "dropout_backward: expects operands (out, grad, mask) and a scale");
  return rt_run_pointwise(op, loops, -1);
}
