/* Discrete distributions: BERNOULLI, BERNOULLI_TENSOR, RANDOM, GEOMETRIC
 * (layouts and counter use in neuronrt/ops/random.h).
 *
 * Bernoulli draws compare a 32-bit word with the probability scaled to
 * 2^32 (resolution 2^-32); random integers take the high half of a 64-bit
 * draw times the range, whose bias (at most range / 2^64) is far below
 * what any test could see.
 */
#include <math.h>
#include "ops/engine/elementwise.h"
#include "ops/random/random_engine.h"

/* Bernoulli results are written as bytes 0/1 (bool, uint8, int8 as they
 * are), float or double; other dtypes receive bytes converted. */
static nrt_dtype bernoulli_want(nrt_dtype out) {
  switch (out) {
    case NRT_BOOL: case NRT_UINT8: case NRT_INT8: case NRT_FLOAT32: case NRT_FLOAT64:
      return out;
    default:
      return NRT_UINT8;
  }
}

/* ---- BERNOULLI (scalar p) --------------------------------------------------- */

typedef struct bernoulli_ctx {
  rt_philox_stream stream;
  uint32_t threshold; /* u < p  <=>  word < threshold, unless always */
  uint32_t always;    /* p so close to 1 that every word qualifies */
  nrt_dtype want;
} bernoulli_ctx;

#define BERNOULLI_LOOP(NAME, T)                                                         \
  RT_SIMD_VOID(bernoulli_##NAME##_loop, (T *out, const uint32_t *w, int64_t n,         \
                                         uint32_t threshold, uint32_t always),         \
                                        (out, w, n, threshold, always)) {              \
    for (int64_t i = 0; i < n; i++) out[i] = (T)((w[i] < threshold) | always);         \
  }
BERNOULLI_LOOP(u8, uint8_t)
BERNOULLI_LOOP(f32, float)
BERNOULLI_LOOP(f64, double)

static void bernoulli_chunk(const rt_random_chunk *c, void *arg) {
  const bernoulli_ctx *b = arg;
  uint32_t w[RT_RANDOM_CHUNK];
  rt_philox_words(&b->stream, (uint64_t)c->first, c->count, w);
  if (b->want == NRT_FLOAT32)
    bernoulli_f32_loop((float *)c->data[0], w, c->count, b->threshold, b->always);
  else if (b->want == NRT_FLOAT64)
    bernoulli_f64_loop((double *)c->data[0], w, c->count, b->threshold, b->always);
  else
    bernoulli_u8_loop((uint8_t *)c->data[0], w, c->count, b->threshold, b->always);
}

/* The word threshold of probability p in [0, 1]: P(word < t) = t / 2^32. */
static void bernoulli_threshold(double p, uint32_t *threshold, uint32_t *always) {
  double t = ceil(p * 0x1p32);
  *always = t >= 0x1p32;
  *threshold = *always ? UINT32_MAX : (uint32_t)t;
}

nrt_status rt_kernel_bernoulli(const nrt_op *op) {
  bernoulli_ctx b;
  nrt_status s = rt_random_check(op, 1, 1, 3, &b.stream);
  if (s) return s;
  double p = rt_random_scalar_f(op, 2);
  if (!(p >= 0 && p <= 1))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "bernoulli: expects p in [0, 1], got p=%g", p);
  bernoulli_threshold(p, &b.threshold, &b.always);
  b.want = bernoulli_want(op->operands[0].dtype);
  rt_random_run(op, &b.want, bernoulli_chunk, &b);
  return NRT_SUCCESS;
}

/* ---- BERNOULLI_TENSOR -------------------------------------------------------- */

typedef struct bernoulli_tensor_ctx {
  rt_philox_stream stream;
  nrt_dtype want;
  rt_random_error bad_p;
} bernoulli_tensor_ctx;

#define BERNOULLI_TENSOR_LOOP(NAME, T)                                                  \
  static void bernoulli_tensor_##NAME(T *out, const double *p, const uint32_t *w,       \
                                      int64_t n) {                                      \
    for (int64_t i = 0; i < n; i++) out[i] = (T)((double)w[i] * 0x1p-32 < p[i]);       \
  }
BERNOULLI_TENSOR_LOOP(u8, uint8_t)
BERNOULLI_TENSOR_LOOP(f32, float)
BERNOULLI_TENSOR_LOOP(f64, double)

static void bernoulli_tensor_chunk(const rt_random_chunk *c, void *arg) {
  bernoulli_tensor_ctx *b = arg;
  const double *p = (const double *)c->data[1];
  uint32_t w[RT_RANDOM_CHUNK];
  for (int64_t i = 0; i < c->count; i++)
    if (!(p[i] >= 0 && p[i] <= 1)) rt_random_error_record(&b->bad_p, c->first + i, p[i]);
  rt_philox_words(&b->stream, (uint64_t)c->first, c->count, w);
  if (b->want == NRT_FLOAT32)
    bernoulli_tensor_f32((float *)c->data[0], p, w, c->count);
  else if (b->want == NRT_FLOAT64)
    bernoulli_tensor_f64((double *)c->data[0], p, w, c->count);
  else
    bernoulli_tensor_u8((uint8_t *)c->data[0], p, w, c->count);
}

nrt_status rt_kernel_bernoulli_tensor(const nrt_op *op) {
  bernoulli_tensor_ctx b = {.bad_p = RT_RANDOM_ERROR_INIT};
  nrt_status s = rt_random_check(op, 2, 1, 2, &b.stream);
  if (s) return s;
  if (!nrt_dtype_is_floating(op->operands[1].dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED,
                   "bernoulli_tensor: probabilities must have a floating dtype, got %s",
                   nrt_dtype_name(op->operands[1].dtype));
  b.want = bernoulli_want(op->operands[0].dtype);
  nrt_dtype want[2] = {b.want, NRT_FLOAT64};
  rt_random_run(op, want, bernoulli_tensor_chunk, &b);
  if (b.bad_p.set)
    return rt_fail(NRT_ERROR_INVALID_DATA,
                   "bernoulli: expects every probability in [0, 1], but p[%lld] (flat index) = %g",
                   (long long)b.bad_p.index, b.bad_p.value);
  return NRT_SUCCESS;
}

/* ---- RANDOM --------------------------------------------------------------------- */

typedef struct random_ctx {
  rt_philox_stream stream;
  uint64_t range; /* 0: all 2^64 values */
  uint64_t base;
} random_ctx;

/* Ranges below 2^32: the high half of x * range from 32x32-bit products,
 * (hi * range + (lo * range >> 32)) >> 32, which is exact (no sum
 * overflows) and vectorises. */
RT_SIMD_VOID(random_small_loop, (int64_t *out, const uint32_t *w, int64_t n, uint32_t range,
                                 uint64_t base), (out, w, n, range, base)) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t low = ((uint64_t)w[2 * i] * range) >> 32;
    out[i] = (int64_t)(base + (((uint64_t)w[2 * i + 1] * range + low) >> 32));
  }
}

static void random_chunk(const rt_random_chunk *c, void *arg) {
  const random_ctx *r = arg;
  uint32_t w[2 * RT_RANDOM_CHUNK];
  rt_philox_words(&r->stream, 2 * (uint64_t)c->first, 2 * c->count, w);
  int64_t *out = (int64_t *)c->data[0];
  if (r->range && r->range <= UINT32_MAX) {
    random_small_loop(out, w, c->count, (uint32_t)r->range, r->base);
    return;
  }
  for (int64_t i = 0; i < c->count; i++) {
    uint64_t x = rt_random_u64(w[2 * i], w[2 * i + 1]);
    uint64_t v = r->range ? rt_mulhi_u64(x, r->range) : x;
    out[i] = (int64_t)(r->base + v);
  }
}

nrt_status rt_kernel_random(const nrt_op *op) {
  random_ctx r;
  nrt_status s = rt_random_check(op, 1, 1, 4, &r.stream);
  if (s) return s;
  r.range = (uint64_t)rt_random_scalar_i(op, 2);
  r.base = (uint64_t)rt_random_scalar_i(op, 3);
  nrt_dtype want = NRT_INT64;
  rt_random_run(op, &want, random_chunk, &r);
  return NRT_SUCCESS;
}

/* ---- GEOMETRIC ------------------------------------------------------------------ */

typedef struct geometric_ctx {
  rt_philox_stream stream;
  double log_q; /* log(1 - p) */
} geometric_ctx;

/* Trials up to the first success: ceil(log(u) / log(1 - p)) >= 1. */
static void geometric_chunk(const rt_random_chunk *c, void *arg) {
  const geometric_ctx *g = arg;
  uint32_t w[2 * RT_RANDOM_CHUNK];
  rt_philox_words(&g->stream, 2 * (uint64_t)c->first, 2 * c->count, w);
  double *out = (double *)c->data[0];
  for (int64_t i = 0; i < c->count; i++) {
    double trials = ceil(log(rt_uniform_open_f64(w[2 * i], w[2 * i + 1])) / g->log_q);
    out[i] = trials < 1 ? 1 : trials;
  }
}

nrt_status rt_kernel_geometric(const nrt_op *op) {
  geometric_ctx g;
  nrt_status s = rt_random_check(op, 1, 1, 3, &g.stream);
  if (s) return s;
  double p = rt_random_scalar_f(op, 2);
  if (!(p > 0 && p < 1))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "geometric: expects p in (0, 1), got p=%g", p);
  if (op->operands[0].dtype == NRT_BOOL)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "geometric: not implemented for dtype bool");
  g.log_q = log1p(-p);
  nrt_dtype want = NRT_FLOAT64;
  rt_random_run(op, &want, geometric_chunk, &g);
  return NRT_SUCCESS;
}
