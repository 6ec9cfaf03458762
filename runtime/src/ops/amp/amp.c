/* AMP_UNSCALE and AMP_UPDATE_SCALE (layouts in neuronrt/ops/amp.h).
 *
 * AMP_UNSCALE reads and writes every gradient element once: the loops test
 * finiteness with a comparison the compiler vectorises (|x| <= max is false
 * for infinities and NaN) and OR the verdicts of a run together, so no branch
 * sits in the hot loop. Runs on different threads publish their verdict with
 * an atomic store; only "found one" is ever written, so the result does not
 * depend on the split. With inv_scale == 1 the gradient is left untouched
 * (PyTorch's CPU kernel returns the value itself then, too).
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/iterate.h"
#include "ops/engine/scalar_types.h"

typedef struct unscale_ctx {
  float inv_scale;
  int scale; /* 0: only check (inv_scale == 1) */
  int found; /* written atomically */
} unscale_ctx;

#define LD_SAME(x) (x)
#define ST_SAME(x) (x)
#define ABS_OF(x) _Generic((x), float: fabsf, double: fabs)(x)

/* T: storage type, C: compute type, MAX: C's largest finite value. */
#define UNSCALE_LOOP(NAME, T, C, MAX, LOAD, STORE)                                            \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *arg),              \
                     (data, strides, n, arg)) {                                                \
    unscale_ctx *k = arg;                                                                      \
    const C inv = (C)k->inv_scale;                                                             \
    const int64_t s = strides[0];                                                              \
    int bad = 0;                                                                               \
    if (s == (int64_t)sizeof(T)) {                                                             \
      T *x = (T *)data[0];                                                                     \
      if (k->scale) {                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                      \
          C v = LOAD(x[i]);                                                                    \
          bad |= !(ABS_OF(v) <= (MAX));                                                        \
          x[i] = STORE(v * inv);                                                               \
        }                                                                                      \
      } else {                                                                                 \
        for (int64_t i = 0; i < n; i++) bad |= !(ABS_OF(LOAD(x[i])) <= (MAX));                 \
      }                                                                                        \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        T *p = (T *)(data[0] + i * s);                                                         \
        C v = LOAD(*p);                                                                        \
        bad |= !(ABS_OF(v) <= (MAX));                                                          \
        if (k->scale) *p = STORE(v * inv);                                                     \
      }                                                                                        \
    }                                                                                          \
    if (bad) __atomic_store_n(&k->found, 1, __ATOMIC_RELAXED);                                 \
  }

UNSCALE_LOOP(unscale_f32, float, float, FLT_MAX, LD_SAME, ST_SAME)
UNSCALE_LOOP(unscale_f64, double, double, DBL_MAX, LD_SAME, ST_SAME)
UNSCALE_LOOP(unscale_bf16, uint16_t, float, FLT_MAX, rt_bfloat16_to_float, rt_bfloat16_from_float)
UNSCALE_LOOP(unscale_f16, uint16_t, float, FLT_MAX, rt_half_to_float, rt_half_from_float)

static rt_inner_loop unscale_loop_for(nrt_dtype d) {
  switch (d) {
    case NRT_FLOAT32: return unscale_f32;
    case NRT_FLOAT64: return unscale_f64;
    case NRT_BFLOAT16: return unscale_bf16;
    case NRT_FLOAT16: return unscale_f16;
    default: return NULL;
  }
}

/* A one-element operand of the given dtype, or an error naming it. */
static nrt_status check_single(const nrt_tensor_view *v, nrt_dtype dtype, const char *op,
                               const char *what) {
  if (nrt_view_numel(v) != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must have one element", op, what);
  if (v->dtype != dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must be %s, got %s", op, what,
                   nrt_dtype_name(dtype), nrt_dtype_name(v->dtype));
  return NRT_SUCCESS;
}

/* The address of a one-element view's element (its strides do not matter). */
static void *single(const nrt_tensor_view *v) {
  return v->data;
}

nrt_status rt_kernel_amp_unscale(const nrt_op *op) {
  const char *name = "amp_unscale";
  if (op->num_outputs != 2 || op->num_operands != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects outputs (grad, found_inf) and input inv_scale", name);
  const nrt_tensor_view *grad = &op->operands[0];
  rt_inner_loop loop = unscale_loop_for(grad->dtype);
  if (!loop)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: gradients of dtype %s are not supported", name,
                   nrt_dtype_name(grad->dtype));
  nrt_status s = check_single(&op->operands[1], NRT_FLOAT32, name, "found_inf");
  if (!s) s = check_single(&op->operands[2], NRT_FLOAT32, name, "inv_scale");
  if (s) return s;
  unscale_ctx k;
  memset(&k, 0, sizeof k);
  memcpy(&k.inv_scale, single(&op->operands[2]), sizeof k.inv_scale);
  k.scale = k.inv_scale != 1.0f;
  if (nrt_view_numel(grad) == 0) return NRT_SUCCESS;
  rt_iterate(1, grad, loop, &k);
  if (k.found) {
    const float one = 1.0f;
    memcpy(single(&op->operands[1]), &one, sizeof one);
  }
  return NRT_SUCCESS;
}

nrt_status rt_kernel_amp_update_scale(const nrt_op *op) {
  const char *name = "amp_update_scale";
  if (op->num_outputs != 2 || op->num_operands != 3 || op->num_scalars != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects outputs (scale, growth_tracker), input found_inf and 3 scalars",
                   name);
  nrt_status s = check_single(&op->operands[0], NRT_FLOAT32, name, "scale");
  if (!s) s = check_single(&op->operands[1], NRT_INT32, name, "growth_tracker");
  if (!s) s = check_single(&op->operands[2], NRT_FLOAT32, name, "found_inf");
  if (s) return s;
  double growth = op->scalars[0].is_float ? op->scalars[0].f : (double)op->scalars[0].i;
  double backoff = op->scalars[1].is_float ? op->scalars[1].f : (double)op->scalars[1].i;
  int64_t interval = op->scalars[2].is_float ? (int64_t)op->scalars[2].f : op->scalars[2].i;
  float scale, found;
  int32_t tracker;
  memcpy(&scale, single(&op->operands[0]), sizeof scale);
  memcpy(&tracker, single(&op->operands[1]), sizeof tracker);
  memcpy(&found, single(&op->operands[2]), sizeof found);
  if (found != 0.0f) {
    scale = (float)(scale * backoff);
    tracker = 0;
  } else if ((int64_t)tracker + 1 == interval) {
    /* The product is rounded to float before the finiteness test. */
    float grown = (float)(scale * growth);
    if (isfinite(grown)) scale = grown;
    tracker = 0;
  } else {
    tracker = (int32_t)((int64_t)tracker + 1);
  }
  memcpy(single(&op->operands[0]), &scale, sizeof scale);
  memcpy(single(&op->operands[1]), &tracker, sizeof tracker);
  return NRT_SUCCESS;
}
