/* Continuous distributions: UNIFORM, NORMAL, EXPONENTIAL, LOG_NORMAL,
 * CAUCHY (layouts and counter use in neuronrt/ops/random.h).
 *
 * float32, float16 and bfloat16 uniforms and normals are computed in float
 * from one 32-bit word per element with vectorised loops (polynomial log
 * and sine/cosine, random_math.h); everything else in double with libm from
 * 64-bit draws, then converted to the output dtype.
 */
#include <math.h>
#include "ops/engine/elementwise.h"
#include "ops/random/random_engine.h"
#include "ops/random/random_math.h"
#include "ops/engine/scalar_types.h"

#define TWO_PI 6.283185307179586

static int is_float_dtype(nrt_dtype d) {
  return d == NRT_FLOAT16 || d == NRT_BFLOAT16 || d == NRT_FLOAT32 || d == NRT_FLOAT64;
}

static nrt_status unsupported_dtype(const nrt_op *op) {
  return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype %s (floating types only)",
                 nrt_op_name(op->code), nrt_dtype_name(op->operands[0].dtype));
}

/* ---- UNIFORM ------------------------------------------------------------ */

typedef struct uniform_ctx {
  rt_philox_stream stream;
  double from, to;
  /* The largest value of the output dtype below `to` (and not below
   * `from`): what a sample that rounds up to `to` becomes. */
  double below_to;
  uint16_t below_to_bits; /* the same as float16 / bfloat16 bits */
  float to_ceil;          /* the least float >= to */
} uniform_ctx;

RT_SIMD_VOID(uniform_f32_loop, (float *out, const uint32_t *w, int64_t n, float from, float range,
                                float to, float below), (out, w, n, from, range, to, below)) {
  for (int64_t i = 0; i < n; i++) {
    float v = from + rt_uniform_f32(w[i]) * range;
    out[i] = v < to ? v : below;
  }
}

static void uniform_f32_chunk(const rt_random_chunk *c, void *arg) {
  const uniform_ctx *u = arg;
  uint32_t w[RT_RANDOM_CHUNK];
  rt_philox_words(&u->stream, (uint64_t)c->first, c->count, w);
  uniform_f32_loop((float *)c->data[0], w, c->count, (float)u->from, (float)(u->to - u->from),
                   (float)u->to, (float)u->below_to);
}

/* float16 / bfloat16: sampled in float, rounded, and pulled below `to`
 * where rounding reached it (to_ceil is the least float >= to, so the
 * float comparison is exact). */
#define UNIFORM_HALF_CHUNK(NAME, FROM_FLOAT, TO_FLOAT)                                   \
  RT_SIMD_VOID(uniform_##NAME##_round, (uint16_t *out, const float *v, int64_t n,        \
                                        float to_ceil, uint16_t below),                  \
                                       (out, v, n, to_ceil, below)) {                    \
    for (int64_t i = 0; i < n; i++) {                                                    \
      uint16_t h = FROM_FLOAT(v[i]);                                                     \
      out[i] = TO_FLOAT(h) < to_ceil ? h : below;                                        \
    }                                                                                    \
  }                                                                                      \
  static void uniform_##NAME##_chunk(const rt_random_chunk *c, void *arg) {              \
    const uniform_ctx *u = arg;                                                          \
    uint32_t w[RT_RANDOM_CHUNK];                                                         \
    float buf[RT_RANDOM_CHUNK];                                                          \
    rt_philox_words(&u->stream, (uint64_t)c->first, c->count, w);                        \
    uniform_f32_loop(buf, w, c->count, (float)u->from, (float)(u->to - u->from),         \
                     INFINITY, 0.0f);                                                    \
    uniform_##NAME##_round((uint16_t *)c->data[0], buf, c->count, u->to_ceil,            \
                           u->below_to_bits);                                            \
  }
UNIFORM_HALF_CHUNK(f16, rt_half_from_float, rt_half_to_float)
UNIFORM_HALF_CHUNK(bf16, rt_bfloat16_from_float, rt_bfloat16_to_float)

static void uniform_f64_chunk(const rt_random_chunk *c, void *arg) {
  const uniform_ctx *u = arg;
  uint32_t w[2 * RT_RANDOM_CHUNK];
  rt_philox_words(&u->stream, 2 * (uint64_t)c->first, 2 * c->count, w);
  double *out = (double *)c->data[0], range = u->to - u->from;
  for (int64_t i = 0; i < c->count; i++) {
    double v = u->from + rt_uniform_f64(w[2 * i], w[2 * i + 1]) * range;
    out[i] = v < u->to ? v : u->below_to;
  }
}

/* One step towards minus infinity for sign-magnitude 16-bit floats. */
static uint16_t half_bits_down(uint16_t h) {
  if (h == 0) return 0x8001u;
  return (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

static void set_below_to(uniform_ctx *u, nrt_dtype dtype) {
  u->to_ceil = (float)u->to;
  if ((double)u->to_ceil < u->to) u->to_ceil = nextafterf(u->to_ceil, INFINITY);
  if (dtype == NRT_FLOAT64) {
    double b = nextafter(u->to, -INFINITY);
    u->below_to = b < u->from ? u->from : b;
  } else if (dtype == NRT_FLOAT32) {
    float b = (float)u->to;
    while ((double)b >= u->to) b = nextafterf(b, -INFINITY);
    u->below_to = (double)b < u->from ? (double)(float)u->from : (double)b;
  } else {
    int half = dtype == NRT_FLOAT16;
    uint16_t h = half ? rt_half_from_float((float)u->to) : rt_bfloat16_from_float((float)u->to);
#define VALUE(bits) (half ? rt_half_to_float(bits) : rt_bfloat16_to_float(bits))
    while ((double)VALUE(h) >= u->to) h = half_bits_down(h);
    if ((double)VALUE(h) < u->from)
      h = half ? rt_half_from_float((float)u->from) : rt_bfloat16_from_float((float)u->from);
#undef VALUE
    u->below_to_bits = h;
  }
}

nrt_status rt_kernel_uniform(const nrt_op *op) {
  uniform_ctx u;
  nrt_status s = rt_random_check(op, 1, 1, 4, &u.stream);
  if (s) return s;
  nrt_dtype dtype = op->operands[0].dtype;
  if (!is_float_dtype(dtype)) return unsupported_dtype(op);
  u.from = rt_random_scalar_f(op, 2);
  u.to = rt_random_scalar_f(op, 3);
  if (!(u.from <= u.to))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "uniform: expects from <= to, got from=%g, to=%g",
                   u.from, u.to);
  set_below_to(&u, dtype);
  rt_random_fn fn = dtype == NRT_FLOAT32   ? uniform_f32_chunk
                    : dtype == NRT_FLOAT64 ? uniform_f64_chunk
                    : dtype == NRT_FLOAT16 ? uniform_f16_chunk
                                           : uniform_bf16_chunk;
  rt_random_run(op, &dtype, fn, &u);
  return NRT_SUCCESS;
}

/* ---- standard normals ------------------------------------------------------ */

/* Box-Muller in float over pairs: out[2m], out[2m+1] = mean + std * z. */
RT_SIMD_VOID(normal_f32_pairs, (float *out, const uint32_t *w, int64_t pairs, float mean,
                                float std), (out, w, pairs, mean, std)) {
  for (int64_t m = 0; m < pairs; m++) {
    float radius = rt_sqrtf_newton(-2.0f * rt_logf_poly(rt_uniform_open_f32(w[2 * m])));
    float cosine, sine;
    rt_sincos_turns(rt_uniform_f32(w[2 * m + 1]), &cosine, &sine);
    out[2 * m] = mean + std * (radius * cosine);
    out[2 * m + 1] = mean + std * (radius * sine);
  }
}

/* count float32 normals (mean, std) of elements first.. into out. */
static void normal_f32_fill(const rt_philox_stream *stream, int64_t first, int64_t count, float *out,
                            float mean, float std) {
  uint32_t w[RT_RANDOM_CHUNK];
  int64_t even = (count + 1) & ~(int64_t)1; /* a last odd element still needs its pair */
  rt_philox_words(stream, (uint64_t)first, even, w);
  normal_f32_pairs(out, w, count / 2, mean, std);
  if (count & 1) {
    float pair[2];
    normal_f32_pairs(pair, w + count - 1, 1, mean, std);
    out[count - 1] = pair[0];
  }
}

/* Standard normals in double; pair m reads words 4m .. 4m + 3. */
static void normal_f64_fill(const rt_philox_stream *stream, int64_t first, int64_t count, double *z) {
  uint32_t w[2 * RT_RANDOM_CHUNK + 2];
  int64_t even = (count + 1) & ~(int64_t)1;
  rt_philox_words(stream, 2 * (uint64_t)first, 2 * even, w);
  for (int64_t m = 0; 2 * m < count; m++) {
    const uint32_t *p = w + 4 * m;
    double radius = sqrt(-2.0 * log(rt_uniform_open_f64(p[0], p[1])));
    double angle = TWO_PI * rt_uniform_f64(p[2], p[3]);
    z[2 * m] = radius * cos(angle);
    if (2 * m + 1 < count) z[2 * m + 1] = radius * sin(angle);
  }
}

/* ---- NORMAL --------------------------------------------------------------- */

typedef struct normal_ctx {
  rt_philox_stream stream;
  double mean, std;
  rt_random_error bad_std;
} normal_ctx;

static void normal_f32_chunk(const rt_random_chunk *c, void *arg) {
  const normal_ctx *n = arg;
  normal_f32_fill(&n->stream, c->first, c->count, (float *)c->data[0], (float)n->mean,
                  (float)n->std);
}

static void normal_f64_chunk(const rt_random_chunk *c, void *arg) {
  const normal_ctx *n = arg;
  double *out = (double *)c->data[0];
  normal_f64_fill(&n->stream, c->first, c->count, out);
  for (int64_t i = 0; i < c->count; i++) out[i] = n->mean + n->std * out[i];
}

/* Tensor mean and std: out = mean + std * z. */
#define NORMAL_TENSOR_CHUNK(NAME, T, FILL)                                           \
  static void normal_tensor_##NAME##_chunk(const rt_random_chunk *c, void *arg) {    \
    normal_ctx *n = arg;                                                             \
    T *out = (T *)c->data[0];                                                        \
    const T *mean = (const T *)c->data[1], *std = (const T *)c->data[2];             \
    FILL;                                                                            \
    for (int64_t i = 0; i < c->count; i++) {                                         \
      if (!(std[i] >= 0)) rt_random_error_record(&n->bad_std, c->first + i, std[i]); \
      out[i] = mean[i] + std[i] * out[i];                                            \
    }                                                                                \
  }
NORMAL_TENSOR_CHUNK(f32, float, normal_f32_fill(&n->stream, c->first, c->count, out, 0.0f, 1.0f))
NORMAL_TENSOR_CHUNK(f64, double, normal_f64_fill(&n->stream, c->first, c->count, out))

nrt_status rt_kernel_normal(const nrt_op *op) {
  normal_ctx n = {.bad_std = RT_RANDOM_ERROR_INIT};
  int tensors = op->num_operands == 3;
  nrt_status s = rt_random_check(op, tensors ? 3 : 1, 1, tensors ? 2 : 4, &n.stream);
  if (s) return s;
  nrt_dtype dtype = op->operands[0].dtype;
  if (!is_float_dtype(dtype)) return unsupported_dtype(op);
  nrt_dtype compute = rt_compute_dtype(dtype);
  nrt_dtype want[3] = {compute, compute, compute};
  if (!tensors) {
    n.mean = rt_random_scalar_f(op, 2);
    n.std = rt_random_scalar_f(op, 3);
    if (!(n.std >= 0))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "normal: expects std >= 0.0, got %g", n.std);
    rt_random_run(op, want, compute == NRT_FLOAT32 ? normal_f32_chunk : normal_f64_chunk, &n);
    return NRT_SUCCESS;
  }
  rt_random_run(op, want,
                compute == NRT_FLOAT32 ? normal_tensor_f32_chunk : normal_tensor_f64_chunk, &n);
  if (n.bad_std.set)
    return rt_fail(NRT_ERROR_INVALID_DATA,
                   "normal: expects all elements of std >= 0.0, but std[%lld] (flat index) = %g",
                   (long long)n.bad_std.index, n.bad_std.value);
  return NRT_SUCCESS;
}

/* ---- EXPONENTIAL, LOG_NORMAL, CAUCHY (double, converted) ------------------ */

typedef struct params_ctx {
  rt_philox_stream stream;
  double a, b;
} params_ctx;

static void exponential_chunk(const rt_random_chunk *c, void *arg) {
  const params_ctx *p = arg;
  uint32_t w[2 * RT_RANDOM_CHUNK];
  rt_philox_words(&p->stream, 2 * (uint64_t)c->first, 2 * c->count, w);
  double *out = (double *)c->data[0];
  for (int64_t i = 0; i < c->count; i++) {
    /* u < 1 strictly: never 0, which lies outside the support. */
    out[i] = -log(rt_uniform_open_f64(w[2 * i], w[2 * i + 1])) / p->a;
  }
}

static void log_normal_chunk(const rt_random_chunk *c, void *arg) {
  const params_ctx *p = arg;
  double *out = (double *)c->data[0];
  normal_f64_fill(&p->stream, c->first, c->count, out);
  for (int64_t i = 0; i < c->count; i++) out[i] = exp(p->a + p->b * out[i]);
}

static void cauchy_chunk(const rt_random_chunk *c, void *arg) {
  const params_ctx *p = arg;
  uint32_t w[2 * RT_RANDOM_CHUNK];
  rt_philox_words(&p->stream, 2 * (uint64_t)c->first, 2 * c->count, w);
  double *out = (double *)c->data[0];
  for (int64_t i = 0; i < c->count; i++) {
    double u = rt_uniform_f64(w[2 * i], w[2 * i + 1]);
    out[i] = p->a + p->b * tan(M_PI * (u - 0.5));
  }
}

static nrt_status run_params(const nrt_op *op, rt_random_fn fn, params_ctx *p) {
  nrt_status s = rt_random_check(op, 1, 1, op->code == NRT_OP_EXPONENTIAL ? 3 : 4, &p->stream);
  if (s) return s;
  if (!is_float_dtype(op->operands[0].dtype)) return unsupported_dtype(op);
  p->a = rt_random_scalar_f(op, 2);
  p->b = op->code == NRT_OP_EXPONENTIAL ? 0.0 : rt_random_scalar_f(op, 3);
  nrt_dtype want = NRT_FLOAT64;
  rt_random_run(op, &want, fn, p);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_exponential(const nrt_op *op) {
  params_ctx p;
  if (op->num_scalars >= 3 && !(rt_random_scalar_f(op, 2) > 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "exponential: expects lambda > 0.0, got %g",
                   rt_random_scalar_f(op, 2));
  return run_params(op, exponential_chunk, &p);
}

nrt_status rt_kernel_log_normal(const nrt_op *op) {
  params_ctx p;
  if (op->num_scalars >= 4 && !(rt_random_scalar_f(op, 3) > 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "log_normal: expects std > 0.0, got %g",
                   rt_random_scalar_f(op, 3));
  return run_params(op, log_normal_chunk, &p);
}

nrt_status rt_kernel_cauchy(const nrt_op *op) {
  params_ctx p;
  if (op->num_scalars >= 4 && !(rt_random_scalar_f(op, 3) > 0))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cauchy: expects sigma > 0.0, got %g",
                   rt_random_scalar_f(op, 3));
  return run_params(op, cauchy_chunk, &p);
}
