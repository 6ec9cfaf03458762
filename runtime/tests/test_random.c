/* The random kernels against a reference twin.
 *
 * The twin is plain per-element code: each value is computed from the
 * single-block Philox function (itself checked against the published
 * known-answer vectors) at the counters random.h assigns to the element,
 * with double-precision libm where the kernels use float polynomials. The
 * kernels must reproduce it exactly (or, for the float32 normal sampler,
 * within float accuracy) on contiguous, transposed and odd-sized outputs,
 * for 1, 2 and 3 kernel threads: the cases run in child processes with
 * TORCHNEURON_NUM_THREADS set.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"
#include "ops/random/philox.h"
#include "ops/random/random_math.h"
#include "ops/engine/scalar_types.h"

#define SEED 0x0123456789abcdefull
#define OFFSET 1000003ull
#define N 100003 /* above the parallel grain, odd, not a multiple of the chunk */

/* ---- the reference twin --------------------------------------------------- */

static uint32_t ref_word(uint64_t seed, uint64_t offset, uint64_t word) {
  uint64_t block = offset + word / 4;
  uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  rt_philox4x32_10(counter, key, out);
  return out[word % 4];
}

static uint32_t w32(uint64_t i) { return ref_word(SEED, OFFSET, i); }
static uint64_t w64(uint64_t i) { return (uint64_t)w32(2 * i + 1) << 32 | w32(2 * i); }
static double u24(uint32_t w) { return (double)(w >> 8) / 16777216.0; }
static double u53(uint64_t x) { return (double)(x >> 11) / 9007199254740992.0; }
/* (0, 1) as the kernels define it: 52 bits, centred in the last place. */
static double open64(uint64_t x) { return ((double)(x >> 12) + 0.5) / 4503599627370496.0; }
static uint64_t mulhi(uint64_t a, uint64_t b) {
  __extension__ typedef unsigned __int128 u128;
  return (uint64_t)(((u128)a * b) >> 64);
}

/* ---- devices, views, ops ------------------------------------------------- */

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}

static void *host_of(void *dev) { return nrt_device_to_host(dev); }

static nrt_tensor_view view_2d(void *data, nrt_dtype dtype, int64_t rows, int64_t cols,
                               int64_t row_stride, int64_t col_stride) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = 2;
  v.shape[0] = rows, v.shape[1] = cols;
  v.strides[0] = row_stride, v.strides[1] = col_stride;
  return v;
}

static nrt_tensor_view view_1d(void *data, nrt_dtype dtype, int64_t n) {
  nrt_tensor_view v = view_2d(data, dtype, n, 1, 1, 1);
  v.ndim = 1;
  return v;
}

static nrt_op random_op(nrt_op_code code, int outputs, int operands, const nrt_tensor_view *views,
                        int nparams, const double *params) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  op.num_operands = operands;
  for (int k = 0; k < operands; k++) op.operands[k] = views[k];
  op.scalars[0].i = (int64_t)SEED;
  op.scalars[1].i = (int64_t)OFFSET;
  for (int k = 0; k < nparams; k++) {
    op.scalars[2 + k].is_float = 1;
    op.scalars[2 + k].f = params[k];
  }
  op.num_scalars = 2 + nparams;
  return op;
}

/* The element a logical index lands on in a rows x cols view. */
static int64_t at(const nrt_tensor_view *v, int64_t logical) {
  int64_t cols = v->ndim == 2 ? v->shape[1] : 1;
  int64_t r = logical / cols, c = logical % cols;
  return r * v->strides[0] + (v->ndim == 2 ? c * v->strides[1] : 0);
}

/* ---- Philox ------------------------------------------------------------------ */

/* The known-answer vectors published with Random123 (kat_vectors). */
static void test_philox_known_answers(void) {
  static const uint32_t cases[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    rt_philox4x32_10(cases[t], cases[t] + 4, out);
    for (int k = 0; k < 4; k++) CHECK(out[k] == cases[t][6 + k]);
  }
}

/* The vectorised stream generators (the one this CPU uses, and the
 * portable one) against the single-block definition, from unaligned
 * starts, with lengths that end mid-block and counters that carry into the
 * upper 32 bits. */
static void test_philox_stream_matches_blocks(void) {
  static const uint64_t offsets[] = {0, 7, 0xfffffff0ull};
  static const uint64_t starts[] = {0, 1, 3, 61, 64, 1000};
  static const int64_t counts[] = {1, 3, 64, 65, 300};
  uint32_t words[300];
  for (int portable = 0; portable < 2; portable++) {
    rt_philox_force_portable(portable);
    for (size_t o = 0; o < 3; o++)
      for (size_t s = 0; s < 6; s++)
        for (size_t c = 0; c < 5; c++) {
          rt_philox_stream stream = {.seed = SEED, .offset = offsets[o]};
          rt_philox_words(&stream, starts[s], counts[c], words);
          int ok = 1;
          for (int64_t i = 0; i < counts[c]; i++)
            ok &= words[i] == ref_word(SEED, offsets[o], starts[s] + (uint64_t)i);
          CHECK(ok);
        }
  }
  rt_philox_force_portable(0);
}

/* ---- the float samplers' arithmetic -------------------------------------- */

static void test_float_math_accuracy(void) {
  double worst_log = 0, worst_sqrt = 0, worst_trig = 0;
  for (uint32_t k = 0; k < (1u << 20); k++) {
    uint32_t w = k * 4099u + (k >> 7); /* spread over all 32-bit words */
    float u = rt_uniform_open_f32(w);
    double l = log((double)u), got = rt_logf_poly(u);
    double e = fabs(got - l) / fmax(fabs(l), 1e-30);
    if (e > worst_log) worst_log = e;
    double x = -2.0 * l, r = rt_sqrtf_newton((float)x);
    e = fabs(r - sqrt((double)(float)x)) / fmax(sqrt(x), 1e-30);
    if (e > worst_sqrt) worst_sqrt = e;
    float turn = rt_uniform_f32(w), c, s;
    rt_sincos_turns(turn, &c, &s);
    double angle = 2 * M_PI * (double)turn;
    e = fmax(fabs(c - cos(angle)), fabs(s - sin(angle)));
    if (e > worst_trig) worst_trig = e;
  }
  CHECK(worst_log < 4e-7);  /* relative; a few float ulps */
  CHECK(worst_sqrt < 3e-7); /* relative */
  CHECK(worst_trig < 3e-7); /* absolute, of values in [-1, 1] */
  CHECK(rt_sqrtf_newton(0.0f) == 0.0f);
  if (worst_log >= 4e-7 || worst_sqrt >= 3e-7 || worst_trig >= 3e-7)
    fprintf(stderr, "worst errors: log %g sqrt %g sincos %g\n", worst_log, worst_sqrt, worst_trig);
}

/* ---- elementwise kernels against the twin ----------------------------------- */

/* Layouts every elementwise case runs on: contiguous rows x cols, and the
 * transpose of a cols x rows buffer (column-major in memory). */
typedef struct layout {
  int64_t rows, cols;
  int transposed;
} layout;

static const layout layouts[] = {{1, N, 0}, {317, 315, 1}, {3, 5, 1}, {1, 1, 0}};
#define NUM_LAYOUTS (sizeof layouts / sizeof layouts[0])

static nrt_tensor_view layout_view(const layout *l, void *data, nrt_dtype dtype) {
  return l->transposed ? view_2d(data, dtype, l->rows, l->cols, 1, l->rows)
                       : view_2d(data, dtype, l->rows, l->cols, l->cols, 1);
}

static void test_uniform_matches_twin(void) {
  const double from = -2.0, to = 3.0;
  for (size_t li = 0; li < NUM_LAYOUTS; li++) {
    const layout *l = &layouts[li];
    int64_t n = l->rows * l->cols;
    float *f = dev_alloc((size_t)n * 4);
    double *d = dev_alloc((size_t)n * 8);
    uint16_t *h = dev_alloc((size_t)n * 2);
    nrt_tensor_view vf = layout_view(l, f, NRT_FLOAT32), vd = layout_view(l, d, NRT_FLOAT64),
                    vh = layout_view(l, h, NRT_BFLOAT16);
    double params[2] = {from, to};
    nrt_op op = random_op(NRT_OP_UNIFORM, 1, 1, &vf, 2, params);
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vd;
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vh;
    CHECK_OK(nrt_op_execute(&op));
    float *hf = host_of(f);
    double *hd = host_of(d);
    uint16_t *hh = host_of(h);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
      float expect_f = (float)from + (float)u24(w32(i)) * (float)(to - from);
      double expect_d = from + u53(w64(i)) * (to - from);
      uint16_t expect_h = rt_bfloat16_from_float(expect_f);
      if (rt_bfloat16_to_float(expect_h) >= to) expect_h = rt_bfloat16_from_float(2.984375f);
      ok &= hf[at(&vf, i)] == expect_f && hd[at(&vd, i)] == expect_d && hh[at(&vh, i)] == expect_h;
    }
    CHECK(ok);
    CHECK_OK(nrt_free(f));
    CHECK_OK(nrt_free(d));
    CHECK_OK(nrt_free(h));
  }
}

/* Values that round up to `to` in the output dtype become the largest
 * value below it: [from, to) holds in every dtype. */
static void test_uniform_stays_below_to(void) {
  int64_t n = 4096;
  uint16_t *h = dev_alloc((size_t)n * 2);
  float *f = dev_alloc((size_t)n * 4);
  nrt_tensor_view vh = view_1d(h, NRT_FLOAT16, n), vf = view_1d(f, NRT_FLOAT32, n);
  double params[2] = {1000.0, 1000.5}; /* float16 spacing there is 0.5 */
  nrt_op op = random_op(NRT_OP_UNIFORM, 1, 1, &vh, 2, params);
  CHECK_OK(nrt_op_execute(&op));
  double tight[2] = {1.0, 1.0 + 0x1p-22}; /* 2 float ulps wide */
  op = random_op(NRT_OP_UNIFORM, 1, 1, &vf, 2, tight);
  CHECK_OK(nrt_op_execute(&op));
  int ok = 1;
  for (int64_t i = 0; i < n; i++) {
    float v = rt_half_to_float(((uint16_t *)host_of(h))[i]);
    ok &= v == 1000.0f;
    float g = ((float *)host_of(f))[i];
    ok &= g >= 1.0f && g < 1.0f + 0x1p-22f;
  }
  CHECK(ok);
  CHECK_OK(nrt_free(h));
  CHECK_OK(nrt_free(f));
}

/* Box-Muller on pairs (2m, 2m+1), in double from the same uniforms. */
static double ref_normal_f32(int64_t i) {
  int64_t m = i / 2;
  double radius = sqrt(-2.0 * log((double)rt_uniform_open_f32(w32(2 * m))));
  double angle = 2 * M_PI * u24(w32(2 * m + 1));
  return radius * (i % 2 ? sin(angle) : cos(angle));
}

static double ref_normal_f64(int64_t i) {
  int64_t m = i / 2;
  double radius = sqrt(-2.0 * log(open64(w64(2 * m))));
  double angle = 2 * M_PI * u53(w64(2 * m + 1));
  return radius * (i % 2 ? sin(angle) : cos(angle));
}

static void test_normal_matches_twin(void) {
  const double mean = 0.5, std = 2.0;
  for (size_t li = 0; li < NUM_LAYOUTS; li++) {
    const layout *l = &layouts[li];
    int64_t n = l->rows * l->cols;
    float *f = dev_alloc((size_t)n * 4);
    double *d = dev_alloc((size_t)n * 8);
    nrt_tensor_view vf = layout_view(l, f, NRT_FLOAT32), vd = layout_view(l, d, NRT_FLOAT64);
    double params[2] = {mean, std};
    nrt_op op = random_op(NRT_OP_NORMAL, 1, 1, &vf, 2, params);
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vd;
    CHECK_OK(nrt_op_execute(&op));
    float *hf = host_of(f);
    double *hd = host_of(d);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
      double zf = ref_normal_f32(i), zd = ref_normal_f64(i);
      if (!(fabs(hf[at(&vf, i)] - (mean + std * zf)) <= 2e-6 * (1 + fabs(zf)) * std) && ok) {
        fprintf(stderr, "i=%lld got %.9g want %.9g\n", (long long)i, hf[at(&vf, i)], mean + std * zf);
        ok = 0;
      }
      ok &= hd[at(&vd, i)] == mean + std * zd;
    }
    CHECK(ok);
    CHECK_OK(nrt_free(f));
    CHECK_OK(nrt_free(d));
  }
}

/* NORMAL with tensor mean and std: a row of means broadcast down the
 * columns, std an immediate; a negative std fails naming the op. */
static void test_normal_tensor_operands(void) {
  int64_t rows = 300, cols = 7, n = rows * cols;
  double *out = dev_alloc((size_t)n * 8);
  float *mean = dev_alloc((size_t)cols * 4);
  for (int64_t c = 0; c < cols; c++) ((float *)host_of(mean))[c] = (float)(10 * c);
  nrt_tensor_view views[3] = {view_2d(out, NRT_FLOAT64, rows, cols, cols, 1),
                              view_2d(mean, NRT_FLOAT32, rows, cols, 0, 1),
                              view_2d(NULL, NRT_FLOAT64, rows, cols, 0, 0)};
  nrt_op op = random_op(NRT_OP_NORMAL, 1, 3, views, 0, NULL);
  op.immediate_mask = 1u << 2;
  op.immediates[2].is_float = 1;
  op.immediates[2].f = 0.25;
  CHECK_OK(nrt_op_execute(&op));
  int ok = 1;
  for (int64_t i = 0; i < n; i++)
    ok &= ((double *)host_of(out))[i] == 10.0 * (double)(i % cols) + 0.25 * ref_normal_f64(i);
  CHECK(ok);
  op.immediates[2].f = -1.0;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_DATA);
  CHECK(strstr(nrt_last_error(), "normal") && strstr(nrt_last_error(), "std"));
  CHECK_OK(nrt_free(out));
  CHECK_OK(nrt_free(mean));
}

static void test_bernoulli_matches_twin(void) {
  const double p = 0.3;
  const uint64_t threshold = (uint64_t)ceil(p * 4294967296.0);
  for (size_t li = 0; li < NUM_LAYOUTS; li++) {
    const layout *l = &layouts[li];
    int64_t n = l->rows * l->cols;
    uint8_t *b = dev_alloc((size_t)n);
    float *f = dev_alloc((size_t)n * 4);
    int32_t *i32 = dev_alloc((size_t)n * 4);
    nrt_tensor_view vb = layout_view(l, b, NRT_BOOL), vf = layout_view(l, f, NRT_FLOAT32),
                    vi = layout_view(l, i32, NRT_INT32);
    nrt_op op = random_op(NRT_OP_BERNOULLI, 1, 1, &vb, 1, &p);
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vf;
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vi;
    CHECK_OK(nrt_op_execute(&op));
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
      int expect = w32(i) < threshold;
      ok &= ((uint8_t *)host_of(b))[at(&vb, i)] == expect;
      ok &= ((float *)host_of(f))[at(&vf, i)] == (float)expect;
      ok &= ((int32_t *)host_of(i32))[at(&vi, i)] == expect;
    }
    CHECK(ok);
    CHECK_OK(nrt_free(b));
    CHECK_OK(nrt_free(f));
    CHECK_OK(nrt_free(i32));
  }
}

/* Probabilities per column, broadcast over rows; out of range fails. */
static void test_bernoulli_tensor_matches_twin(void) {
  int64_t rows = 2000, cols = 5, n = rows * cols;
  uint8_t *out = dev_alloc((size_t)n);
  float *p = dev_alloc((size_t)cols * 4);
  const float probs[5] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
  memcpy(host_of(p), probs, sizeof probs);
  nrt_tensor_view views[2] = {view_2d(out, NRT_UINT8, rows, cols, cols, 1),
                              view_2d(p, NRT_FLOAT32, rows, cols, 0, 1)};
  nrt_op op = random_op(NRT_OP_BERNOULLI_TENSOR, 1, 2, views, 0, NULL);
  CHECK_OK(nrt_op_execute(&op));
  int ok = 1;
  for (int64_t i = 0; i < n; i++)
    ok &= ((uint8_t *)host_of(out))[i] == ((double)w32(i) / 4294967296.0 < (double)probs[i % cols]);
  CHECK(ok);
  ((float *)host_of(p))[3] = 1.5f;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_DATA);
  CHECK(strstr(nrt_last_error(), "bernoulli") && strstr(nrt_last_error(), "1.5"));
  ((float *)host_of(p))[3] = NAN;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_DATA);
  CHECK_OK(nrt_free(out));
  CHECK_OK(nrt_free(p));
}

/* RANDOM over small, 2^32-plus and full 2^64 ranges, in int64 and
 * converted to int8, float32, uint16 and uint64 (modulo 2^n, as C casts). */
static void test_random_matches_twin(void) {
  static const struct { uint64_t range; int64_t base; } cases[] = {
      {10, -5}, {(1ull << 40) + 7, 3}, {0, 0}, {1ull << 24, 0}, {UINT32_MAX, 1}, {1ull << 32, 0}};
  for (size_t li = 0; li < NUM_LAYOUTS; li++) {
    const layout *l = &layouts[li];
    int64_t n = l->rows * l->cols;
    int64_t *out = dev_alloc((size_t)n * 8);
    float *f = dev_alloc((size_t)n * 4);
    int8_t *b = dev_alloc((size_t)n);
    uint16_t *h = dev_alloc((size_t)n * 2);
    uint64_t *u = dev_alloc((size_t)n * 8);
    nrt_tensor_view v = layout_view(l, out, NRT_INT64), vf = layout_view(l, f, NRT_FLOAT32),
                    vb = layout_view(l, b, NRT_INT8), vh = layout_view(l, h, NRT_UINT16),
                    vu = layout_view(l, u, NRT_UINT64);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      nrt_op op = random_op(NRT_OP_RANDOM, 1, 1, &v, 0, NULL);
      op.num_scalars = 4;
      op.scalars[2].i = (int64_t)cases[c].range;
      op.scalars[3].i = cases[c].base;
      CHECK_OK(nrt_op_execute(&op));
      op.operands[0] = vf;
      CHECK_OK(nrt_op_execute(&op));
      op.operands[0] = vb;
      CHECK_OK(nrt_op_execute(&op));
      op.operands[0] = vh;
      CHECK_OK(nrt_op_execute(&op));
      op.operands[0] = vu;
      CHECK_OK(nrt_op_execute(&op));
      int ok = 1;
      for (int64_t i = 0; i < n; i++) {
        uint64_t x = w64(i);
        int64_t expect = (int64_t)((uint64_t)cases[c].base + (cases[c].range ? mulhi(x, cases[c].range) : x));
        ok &= ((int64_t *)host_of(out))[at(&v, i)] == expect;
        ok &= ((float *)host_of(f))[at(&vf, i)] == (float)expect;
        ok &= ((int8_t *)host_of(b))[at(&vb, i)] == (int8_t)expect;
        ok &= ((uint16_t *)host_of(h))[at(&vh, i)] == (uint16_t)expect;
        ok &= ((uint64_t *)host_of(u))[at(&vu, i)] == (uint64_t)expect;
      }
      CHECK(ok);
    }
    CHECK_OK(nrt_free(out));
    CHECK_OK(nrt_free(f));
    CHECK_OK(nrt_free(b));
    CHECK_OK(nrt_free(h));
    CHECK_OK(nrt_free(u));
  }
}

/* EXPONENTIAL, GEOMETRIC, LOG_NORMAL and CAUCHY compute in double. */
static void test_other_distributions_match_twin(void) {
  int64_t n = N;
  double *d = dev_alloc((size_t)n * 8);
  int32_t *g = dev_alloc((size_t)n * 4);
  nrt_tensor_view vd = view_1d(d, NRT_FLOAT64, n), vg = view_1d(g, NRT_INT32, n);
  double *hd = host_of(d);
  int ok = 1;

  double lambda = 1.5;
  nrt_op op = random_op(NRT_OP_EXPONENTIAL, 1, 1, &vd, 1, &lambda);
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t i = 0; i < n; i++) ok &= hd[i] == -log(open64(w64(i))) / lambda;

  double ln[2] = {0.5, 0.75};
  op = random_op(NRT_OP_LOG_NORMAL, 1, 1, &vd, 2, ln);
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t i = 0; i < n; i++) ok &= hd[i] == exp(0.5 + 0.75 * ref_normal_f64(i));

  double cauchy[2] = {1.0, 2.0};
  op = random_op(NRT_OP_CAUCHY, 1, 1, &vd, 2, cauchy);
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t i = 0; i < n; i++) ok &= hd[i] == 1.0 + 2.0 * tan(M_PI * (u53(w64(i)) - 0.5));

  double p = 0.2;
  op = random_op(NRT_OP_GEOMETRIC, 1, 1, &vg, 1, &p);
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t i = 0; i < n; i++) {
    double trials = ceil(log(open64(w64(i))) / log1p(-p));
    ok &= ((int32_t *)host_of(g))[i] == (int32_t)(trials < 1 ? 1 : trials);
  }
  CHECK(ok);

  lambda = 0;
  op = random_op(NRT_OP_EXPONENTIAL, 1, 1, &vd, 1, &lambda);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  p = 1.0;
  op = random_op(NRT_OP_GEOMETRIC, 1, 1, &vg, 1, &p);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op = random_op(NRT_OP_CAUCHY, 1, 1, &vg, 2, cauchy); /* integer output */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  CHECK_OK(nrt_free(d));
  CHECK_OK(nrt_free(g));
}

/* DROPOUT on a transposed bfloat16 input (kept in float); the backward
 * pass multiplies by the same mask. */
static void test_dropout_matches_twin(void) {
  int64_t rows = 401, cols = 251, n = rows * cols;
  const double keep = 0.75, scale = 1 / keep;
  const uint64_t threshold = (uint64_t)ceil(keep * 4294967296.0);
  uint16_t *x = dev_alloc((size_t)n * 2), *out = dev_alloc((size_t)n * 2);
  uint16_t *grad_in = dev_alloc((size_t)n * 2);
  uint8_t *mask = dev_alloc((size_t)n);
  for (int64_t k = 0; k < n; k++) {
    ((uint16_t *)host_of(x))[k] = rt_bfloat16_from_float((float)(k % 97) - 48.0f);
    ((uint16_t *)host_of(grad_in))[k] = rt_bfloat16_from_float(0.5f);
  }
  nrt_tensor_view views[3] = {view_2d(out, NRT_BFLOAT16, rows, cols, cols, 1),
                              view_2d(mask, NRT_BOOL, rows, cols, cols, 1),
                              view_2d(x, NRT_BFLOAT16, rows, cols, 1, rows)};
  double params[2] = {keep, scale};
  nrt_op op = random_op(NRT_OP_DROPOUT, 2, 3, views, 2, params);
  CHECK_OK(nrt_op_execute(&op));
  int ok = 1;
  for (int64_t i = 0; i < n; i++) {
    int kept = w32(i) < threshold;
    float xv = rt_bfloat16_to_float(((uint16_t *)host_of(x))[at(&views[2], i)]);
    uint16_t expect = rt_bfloat16_from_float(xv * (float)kept * (float)scale);
    ok &= ((uint8_t *)host_of(mask))[i] == kept && ((uint16_t *)host_of(out))[i] == expect;
  }
  CHECK(ok);

  nrt_op back;
  memset(&back, 0, sizeof back);
  back.code = NRT_OP_DROPOUT_BACKWARD;
  back.compute_dtype = NRT_BFLOAT16;
  back.num_operands = 3;
  back.num_outputs = 1;
  back.operands[0] = views[0];
  back.operands[1] = view_2d(grad_in, NRT_BFLOAT16, rows, cols, cols, 1);
  back.operands[2] = views[1];
  back.num_scalars = 1;
  back.scalars[0].is_float = 1;
  back.scalars[0].f = scale;
  CHECK_OK(nrt_op_execute(&back));
  for (int64_t i = 0; i < n; i++) {
    float expect = ((uint8_t *)host_of(mask))[i] ? 0.5f * (float)scale : 0.0f;
    ok &= rt_bfloat16_to_float(((uint16_t *)host_of(out))[i]) ==
          rt_bfloat16_to_float(rt_bfloat16_from_float(expect));
  }
  CHECK(ok);
  CHECK_OK(nrt_free(x));
  CHECK_OK(nrt_free(out));
  CHECK_OK(nrt_free(grad_in));
  CHECK_OK(nrt_free(mask));
}

/* Fisher-Yates from the top with element i choosing j in [0, i]. */
static void test_randperm_matches_twin(void) {
  static const int64_t sizes[] = {1, 2, 5, 1025, N};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t n = sizes[s];
    int64_t *out = dev_alloc((size_t)n * 8);
    int32_t *strided = dev_alloc((size_t)n * 8); /* int32 with stride 2 */
    int64_t *expect = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) expect[i] = i;
    for (int64_t i = n - 1; i >= 1; i--) {
      int64_t j = (int64_t)mulhi(w64(i), (uint64_t)i + 1), t = expect[i];
      expect[i] = expect[j];
      expect[j] = t;
    }
    nrt_tensor_view v = view_1d(out, NRT_INT64, n), vs = view_1d(strided, NRT_INT32, n);
    vs.strides[0] = 2;
    nrt_op op = random_op(NRT_OP_RANDPERM, 1, 1, &v, 0, NULL);
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = vs;
    CHECK_OK(nrt_op_execute(&op));
    int ok = 1;
    for (int64_t i = 0; i < n; i++)
      ok &= ((int64_t *)host_of(out))[i] == expect[i] &&
            ((int32_t *)host_of(strided))[2 * i] == (int32_t)expect[i];
    CHECK(ok);
    free(expect);
    CHECK_OK(nrt_free(out));
    CHECK_OK(nrt_free(strided));
  }
}

/* Both sampling modes against a direct transcription, on a transposed
 * probability matrix with zero entries. */
static void test_multinomial_matches_twin(void) {
  int64_t rows = 37, cats = 50, k = 20;
  double *probs = dev_alloc((size_t)(rows * cats) * 8);
  int64_t *out = dev_alloc((size_t)(rows * k) * 8);
  double *hp = host_of(probs);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cats; c++) hp[c * rows + r] = (c + r) % 3 ? (double)((c * 7 + r) % 11) : 0.0;
  nrt_tensor_view views[2] = {view_2d(out, NRT_INT64, rows, k, k, 1),
                              view_2d(probs, NRT_FLOAT64, rows, cats, 1, rows)};
  for (int replacement = 0; replacement < 2; replacement++) {
    double flag = replacement;
    nrt_op op = random_op(NRT_OP_MULTINOMIAL, 1, 2, views, 1, &flag);
    CHECK_OK(nrt_op_execute(&op));
    int ok = 1;
    for (int64_t r = 0; r < rows; r++) {
      double cdf[50], total = 0, key[50];
      int used[50] = {0};
      for (int64_t c = 0; c < cats; c++) cdf[c] = total += hp[c * rows + r];
      for (int64_t c = 0; c < cats; c++)
        key[c] = hp[c * rows + r] > 0 ? log(open64(w64(r * cats + c))) / hp[c * rows + r] : -INFINITY;
      for (int64_t s = 0; s < k; s++) {
        int64_t expect = 0;
        if (replacement) {
          double x = u53(w64(r * k + s)) * total;
          while (!(cdf[expect] > x)) expect++;
        } else {
          for (int64_t c = 0; c < cats; c++)
            if (!used[c] && (used[expect] || key[c] > key[expect])) expect = c;
          used[expect] = 1;
        }
        ok &= ((int64_t *)host_of(out))[r * k + s] == expect;
      }
    }
    CHECK(ok);
  }
  hp[5 * rows + 2] = -1; /* row 2 */
  double flag = 1;
  nrt_op op = random_op(NRT_OP_MULTINOMIAL, 1, 2, views, 1, &flag);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_DATA);
  CHECK(strstr(nrt_last_error(), "multinomial") && strstr(nrt_last_error(), "row 2"));
  CHECK_OK(nrt_free(probs));
  CHECK_OK(nrt_free(out));
}

/* The same op at another offset draws other numbers; at the same
 * (seed, offset) the same ones, also through a stream. */
static void test_offsets_and_streams(void) {
  int64_t n = 1000;
  float *a = dev_alloc((size_t)n * 4), *b = dev_alloc((size_t)n * 4);
  nrt_tensor_view va = view_1d(a, NRT_FLOAT32, n), vb = view_1d(b, NRT_FLOAT32, n);
  double params[2] = {0, 1};
  nrt_op op = random_op(NRT_OP_UNIFORM, 1, 1, &va, 2, params);
  CHECK_OK(nrt_op_execute(&op));
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  op.operands[0] = vb;
  CHECK_OK(nrt_launch(s, &op));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(memcmp(host_of(a), host_of(b), (size_t)n * 4) == 0);
  op.scalars[1].i += NRT_RANDOM_BLOCKS(n);
  CHECK_OK(nrt_op_execute(&op));
  int same = 0;
  for (int64_t i = 0; i < n; i++) same += ((float *)host_of(a))[i] == ((float *)host_of(b))[i];
  CHECK(same < 5);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
}

static void test_bad_descriptors(void) {
  int64_t n = 8;
  int32_t *i = dev_alloc((size_t)n * 4);
  nrt_tensor_view v = view_1d(i, NRT_INT32, n);
  double params[2] = {0, 1};
  nrt_op op = random_op(NRT_OP_UNIFORM, 1, 1, &v, 2, params);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error(), "uniform") && strstr(nrt_last_error(), "int32"));
  op.operands[0].dtype = NRT_FLOAT32;
  op.num_scalars = 3;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  double bad_p = 1.5;
  op = random_op(NRT_OP_BERNOULLI, 1, 1, &v, 1, &bad_p);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_free(i));
}

/* ---- thread counts ---------------------------------------------------------- */

static void run_kernel_cases(void) {
  RUN(test_uniform_matches_twin);
  RUN(test_uniform_stays_below_to);
  RUN(test_normal_matches_twin);
  RUN(test_normal_tensor_operands);
  RUN(test_bernoulli_matches_twin);
  RUN(test_bernoulli_tensor_matches_twin);
  RUN(test_random_matches_twin);
  RUN(test_other_distributions_match_twin);
  RUN(test_dropout_matches_twin);
  RUN(test_randperm_matches_twin);
  RUN(test_multinomial_matches_twin);
}

static void test_kernels_with_1_2_3_threads(void) {
  unsetenv("TORCHNEURON_NUM_THREADS");
  CHECK(child_run("kernels", (const char *[]){"TORCHNEURON_NUM_THREADS=1", NULL}) == 0);
  CHECK(child_run("kernels", (const char *[]){"TORCHNEURON_NUM_THREADS=2", NULL}) == 0);
  CHECK(child_run("kernels", (const char *[]){"TORCHNEURON_NUM_THREADS=3", NULL}) == 0);
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) {
    run_kernel_cases();
    return CHECK_MAIN_RESULT();
  }
  RUN(test_philox_known_answers);
  RUN(test_philox_stream_matches_blocks);
  RUN(test_float_math_accuracy);
  RUN(test_offsets_and_streams);
  RUN(test_bad_descriptors);
  RUN(test_kernels_with_1_2_3_threads);
  return CHECK_MAIN_RESULT();
}
