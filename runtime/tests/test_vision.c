/* The vision kernels (pooling, upsampling, convolution) and the strided,
 * accumulating product convolution makes of rt_gemm, against plain
 * reference twins written here.
 *
 * Each reference states the op's definition with direct loops in double:
 * convolution as the sum over every tap of every output position (and its
 * two gradients as the same sum scattered to the image or the weight),
 * pooling by walking each raw window and testing bounds, upsampling from
 * PyTorch's index formulas. Operands are NCHW or channels_last (by
 * strides); float32 and float64 are checked to rounding tolerance, bfloat16
 * to its precision; selections (max pooling, nearest) must be exact. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/conv/conv_gemm.h"
#include "ops/engine/scalar_types.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

ORACLE_CODE static double get(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(const uint16_t *)p);
    case NRT_FLOAT16: return rt_half_to_float(*(const uint16_t *)p);
    case NRT_FLOAT32: return *(const float *)p;
    case NRT_INT64: return (double)*(const int64_t *)p;
    default: return *(const double *)p;
  }
}

ORACLE_CODE static void set(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
    default: *(double *)p = v; break;
  }
}

/* A 4-d (or 1-d) device tensor with its view. */
typedef struct tensor {
  nrt_tensor_view v;
  int64_t numel;
} tensor;

/* NCHW, or channels_last when cl, contiguous in memory. */
static tensor make(nrt_dtype t, int64_t n, int64_t c, int64_t h, int64_t w, int cl) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.numel = n * c * h * w;
  CHECK_OK(nrt_malloc(0, (size_t)(x.numel > 0 ? x.numel : 1) * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 4;
  int64_t shape[4] = {n, c, h, w};
  int64_t nchw[4] = {c * h * w, h * w, w, 1}, nhwc[4] = {h * w * c, 1, w * c, c};
  for (int d = 0; d < 4; d++) {
    x.v.shape[d] = shape[d];
    x.v.strides[d] = cl ? nhwc[d] : nchw[d];
  }
  return x;
}

static tensor make_vector(nrt_dtype t, int64_t n) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.numel = n;
  CHECK_OK(nrt_malloc(0, (size_t)n * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 1;
  x.v.shape[0] = n;
  x.v.strides[0] = 1;
  return x;
}

ORACLE_CODE static void *at4(const tensor *x, int64_t a, int64_t b, int64_t c, int64_t d) {
  const nrt_tensor_view *v = &x->v;
  int64_t off = a * v->strides[0] + b * v->strides[1] + c * v->strides[2] + d * v->strides[3];
  return (char *)nrt_device_to_host(v->data) + off * (int64_t)nrt_dtype_size(v->dtype);
}

ORACLE_CODE static double val(const tensor *x, int64_t a, int64_t b, int64_t c, int64_t d) {
  return get(x->v.dtype, at4(x, a, b, c, d));
}

/* Random values; quantised to multiples of 1/64 so that sums are exact. */
ORACLE_CODE static void fill(tensor *x) {
  char *p = nrt_device_to_host(x->v.data);
  for (int64_t i = 0; i < x->numel; i++)
    set(x->v.dtype, p + i * (int64_t)nrt_dtype_size(x->v.dtype), round(rnd() * 64.0) / 64.0);
}

static void release(tensor *x) { nrt_free(x->v.data); }

static nrt_op new_op(nrt_op_code code, int outputs) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  return op;
}

static void add(nrt_op *op, const tensor *t) { op->operands[op->num_operands++] = t->v; }
static void scalar(nrt_op *op, int64_t v) { op->scalars[op->num_scalars++].i = v; }
static void real(nrt_op *op, double v) {
  op->scalars[op->num_scalars].is_float = 1;
  op->scalars[op->num_scalars++].f = v;
}

/* Every element of x against want (an NCHW double array). */
ORACLE_CODE static int close_to(const tensor *x, const double *want, double tol) {
  const int64_t *s = x->v.shape;
  int bad = 0;
  for (int64_t a = 0; a < s[0]; a++)
    for (int64_t b = 0; b < s[1]; b++)
      for (int64_t c = 0; c < s[2]; c++)
        for (int64_t d = 0; d < s[3]; d++) {
          double got = val(x, a, b, c, d), w = want[((a * s[1] + b) * s[2] + c) * s[3] + d];
          if (!(fabs(got - w) <= tol * (1.0 + fabs(w))) && !(isnan(got) && isnan(w))) {
            if (!bad) fprintf(stderr, "  at [%lld,%lld,%lld,%lld]: got %g want %g\n", (long long)a, (long long)b,
                              (long long)c, (long long)d, got, w);
            bad = 1;
          }
        }
  return !bad;
}

static double tol_of(nrt_dtype t) { return t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : 2e-2; }

/* ---- convolution ---------------------------------------------------------------- */

typedef struct conv_case {
  int64_t n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} conv_case;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void conv_scalars(nrt_op *op, const conv_case *g) {
  scalar(op, g->sh), scalar(op, g->sw), scalar(op, g->ph), scalar(op, g->pw);
  scalar(op, g->dh), scalar(op, g->dw), scalar(op, g->groups);
}

/* Calls f(n, k, oh, ow, c, i, j, ih, iw) for every tap inside the image:
 * output (n, k, oh, ow) meets image (n, c, ih, iw) through weight (k, c % cg, i, j). */
#define FOR_EACH_TAP(g, OH, OW, BODY)                                                               \
  for (int64_t n = 0; n < (g)->n; n++)                                                              \
    for (int64_t k = 0; k < (g)->k; k++)                                                            \
      for (int64_t oh = 0; oh < (OH); oh++)                                                         \
        for (int64_t ow = 0; ow < (OW); ow++)                                                       \
          for (int64_t cl = 0; cl < (g)->c / (g)->groups; cl++)                                     \
            for (int64_t i = 0; i < (g)->kh; i++)                                                   \
              for (int64_t j = 0; j < (g)->kw; j++) {                                               \
                int64_t c = k / ((g)->k / (g)->groups) * ((g)->c / (g)->groups) + cl;               \
                int64_t ih = oh * (g)->sh - (g)->ph + i * (g)->dh, iw = ow * (g)->sw - (g)->pw + j * (g)->dw; \
                if (ih < 0 || ih >= (g)->h || iw < 0 || iw >= (g)->w) continue;                     \
                BODY                                                                                \
              }

ORACLE_CODE static void check_conv(const conv_case *g, nrt_dtype t, int cl, int with_bias) {
  int64_t OH = out_size(g->h, g->kh, g->sh, g->ph, g->dh), OW = out_size(g->w, g->kw, g->sw, g->pw, g->dw);
  int64_t cg = g->c / g->groups;
  tensor x = make(t, g->n, g->c, g->h, g->w, cl), w = make(t, g->k, cg, g->kh, g->kw, cl);
  tensor y = make(t, g->n, g->k, OH, OW, cl), gy = make(t, g->n, g->k, OH, OW, !cl);
  tensor gx = make(t, g->n, g->c, g->h, g->w, cl), gw = make(t, g->k, cg, g->kh, g->kw, 0);
  tensor b = make_vector(t, g->k), bx = make_vector(t, g->c);
  fill(&x), fill(&w), fill(&gy), fill(&b), fill(&bx);
  double *want_y = calloc((size_t)(y.numel + 1), sizeof(double));
  double *want_gx = calloc((size_t)(gx.numel + 1), sizeof(double));
  double *want_gw = calloc((size_t)(gw.numel + 1), sizeof(double));
  FOR_EACH_TAP(g, OH, OW, {
    double wv = val(&w, k, cl, i, j);
    want_y[((n * g->k + k) * OH + oh) * OW + ow] += val(&x, n, c, ih, iw) * wv;
    want_gx[((n * g->c + c) * g->h + ih) * g->w + iw] += val(&gy, n, k, oh, ow) * wv;
    want_gw[((k * cg + cl) * g->kh + i) * g->kw + j] += val(&gy, n, k, oh, ow) * val(&x, n, c, ih, iw);
  })
  if (with_bias) {
    for (int64_t i = 0; i < y.numel; i++) want_y[i] += get(t, (char *)nrt_device_to_host(b.v.data) + (i / (OH * OW) % g->k) * (int64_t)nrt_dtype_size(t));
    for (int64_t i = 0; i < gx.numel; i++)
      want_gx[i] += get(t, (char *)nrt_device_to_host(bx.v.data) + (i / (g->h * g->w) % g->c) * (int64_t)nrt_dtype_size(t));
  }
  nrt_op op = new_op(NRT_OP_CONV2D, 1);
  add(&op, &y), add(&op, &x), add(&op, &w);
  if (with_bias) add(&op, &b);
  conv_scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want_y, tol_of(t)));
  op = new_op(NRT_OP_CONV2D_INPUT_GRAD, 1);
  add(&op, &gx), add(&op, &gy), add(&op, &w);
  if (with_bias) add(&op, &bx);
  conv_scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, want_gx, tol_of(t)));
  op = new_op(NRT_OP_CONV2D_WEIGHT_GRAD, 1);
  add(&op, &gw), add(&op, &x), add(&op, &gy);
  conv_scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gw, want_gw, tol_of(t) * (t == NRT_BFLOAT16 ? 1.0 : 10.0)));
  free(want_y), free(want_gx), free(want_gw);
  release(&x), release(&w), release(&y), release(&gy), release(&gx), release(&gw), release(&b), release(&bx);
}

static const conv_case conv_cases[] = {
    /* n  c  h   w   k  kh kw sh sw ph pw dh dw groups */
    {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {2, 3, 9, 11, 4, 3, 2, 2, 1, 2, 0, 2, 1, 1},
    {1, 6, 8, 7, 6, 3, 3, 1, 2, 1, 1, 1, 1, 3},
    {2, 6, 8, 7, 12, 3, 3, 1, 1, 1, 1, 1, 1, 6},  /* grouped, one image channel per group */
    {2, 8, 7, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8},   /* depthwise: direct loops */
    {2, 6, 8, 7, 6, 3, 2, 2, 1, 1, 1, 1, 2, 6},   /* depthwise, strided and dilated */
    {1, 70, 5, 6, 70, 3, 3, 1, 1, 1, 1, 1, 1, 70}, /* depthwise, a ragged channel block */
    {2, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1},   /* pointwise: the image is its own col */
    {1, 3, 5, 5, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* padding beyond the kernel: col2im path */
    {1, 300, 5, 4, 260, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* a large weight: staged weight gradient */
    {1, 1, 1, 40, 3, 1, 5, 1, 3, 0, 2, 1, 1, 1},  /* 1-d */
    {3, 16, 33, 35, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* several tiles and tasks */
    {1, 40, 12, 12, 70, 3, 3, 2, 2, 1, 1, 1, 1, 1}, /* K blocks in the product */
    {17, 4, 5, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},  /* small images batched per tile, a ragged last block */
    {0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},   /* empty batch */
    {4, 16, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* 144 taps, rows of 8: bfloat16 columns, whole-row copies */
    {2, 8, 15, 16, 8, 3, 3, 2, 1, 1, 1, 1, 1, 1}, /* rows of 16 at row stride 2 */
};

static void test_conv_matches_direct_loops(void) {
  nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
    for (int t = 0; t < 3; t++)
      for (int cl = 0; cl < 2; cl++) check_conv(&conv_cases[i], types[t], cl, (int)(i + (size_t)cl) % 2 == 0);
}

/* ---- the GEMM ----------------------------------------------------------------------- */

static void test_conv_gemm_matches_naive_product(void) {
  int64_t sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 37, 300}, {96, 1030, 260}, {5, 17, 0}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
    float *a = malloc((size_t)(m * k + 1) * sizeof(float)), *b = malloc((size_t)(k * n + 1) * sizeof(float));
    float *c = malloc((size_t)(m * n) * sizeof(float));
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)(round(rnd() * 16) / 16);
    for (int64_t i = 0; i < k * n; i++) b[i] = (float)(round(rnd() * 16) / 16);
    for (int64_t i = 0; i < m * n; i++) c[i] = 1.0f;
    /* A read transposed (column-major), C written column-major, accumulating. */
    CHECK(rt_conv_gemm_f32(m, n, k, (rt_matrix_f32){a, 1, m}, (rt_matrix_f32){b, n, 1}, (rt_matrix_f32){c, 1, m},
                           1) == 0);
    int ok = 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double want = 1.0;
        for (int64_t p = 0; p < k; p++) want += (double)a[p * m + i] * b[p * n + j];
        ok &= fabs(c[j * m + i] - want) <= 1e-4 * (1 + fabs(want));
      }
    CHECK(ok);
    free(a), free(b), free(c);
  }
}

/* ---- pooling -------------------------------------------------------------------------- */

typedef struct pool_case {
  int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
} pool_case;

static void check_max_pool(const pool_case *p, nrt_dtype t, int cl, int adaptive) {
  tensor x = make(t, p->n, p->c, p->h, p->w, cl), y = make(t, p->n, p->c, p->oh, p->ow, cl);
  tensor ind = make(NRT_INT64, p->n, p->c, p->oh, p->ow, cl), gy = make(t, p->n, p->c, p->oh, p->ow, 0);
  tensor gx = make(t, p->n, p->c, p->h, p->w, cl);
  fill(&x), fill(&gy);
  double *want = calloc((size_t)(y.numel + 1), sizeof(double)), *want_i = calloc((size_t)(y.numel + 1), sizeof(double));
  double *want_gx = calloc((size_t)(gx.numel + 1), sizeof(double));
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++)
      for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
          int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw, nh = p->kh, nw = p->kw, steph = p->dh, stepw = p->dw;
          if (adaptive) {
            h0 = oh * p->h / p->oh, w0 = ow * p->w / p->ow, steph = stepw = 1;
            nh = ((oh + 1) * p->h + p->oh - 1) / p->oh - h0, nw = ((ow + 1) * p->w + p->ow - 1) / p->ow - w0;
          }
          double best = -INFINITY;
          int64_t arg = -1;
          for (int64_t i = 0; i < nh; i++)
            for (int64_t j = 0; j < nw; j++) {
              int64_t ih = h0 + i * steph, iw = w0 + j * stepw;
              if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
              double v = val(&x, n, c, ih, iw);
              if (arg < 0 || v > best) best = v, arg = ih * p->w + iw;
            }
          int64_t o = ((n * p->c + c) * p->oh + oh) * p->ow + ow;
          want[o] = best;
          want_i[o] = (double)arg;
          want_gx[(n * p->c + c) * p->h * p->w + arg] += val(&gy, n, c, oh, ow);
        }
  nrt_op op = new_op(adaptive ? NRT_OP_ADAPTIVE_MAX_POOL2D : NRT_OP_MAX_POOL2D, 2);
  add(&op, &y), add(&op, &ind), add(&op, &x);
  if (!adaptive) {
    scalar(&op, p->kh), scalar(&op, p->kw), scalar(&op, p->sh), scalar(&op, p->sw);
    scalar(&op, p->ph), scalar(&op, p->pw), scalar(&op, p->dh), scalar(&op, p->dw);
  }
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want, 0));
  CHECK(close_to(&ind, want_i, 0));
  op = new_op(NRT_OP_MAX_POOL2D_BACKWARD, 1);
  add(&op, &gx), add(&op, &gy), add(&op, &ind);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, want_gx, t == NRT_BFLOAT16 ? 1e-2 : 0));
  free(want), free(want_i), free(want_gx);
  release(&x), release(&y), release(&ind), release(&gy), release(&gx);
}

/* avg_pool2d with count_include_pad / divisor_override, or the adaptive mean. */
static void check_avg_pool(const pool_case *p, nrt_dtype t, int cl, int adaptive, int include_pad, int64_t divisor) {
  tensor x = make(t, p->n, p->c, p->h, p->w, cl), y = make(t, p->n, p->c, p->oh, p->ow, cl);
  tensor gy = make(t, p->n, p->c, p->oh, p->ow, !cl), gx = make(t, p->n, p->c, p->h, p->w, cl);
  fill(&x), fill(&gy);
  double *want = calloc((size_t)(y.numel + 1), sizeof(double)), *want_gx = calloc((size_t)(gx.numel + 1), sizeof(double));
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++)
      for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
          int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw, h1 = h0 + p->kh, w1 = w0 + p->kw;
          if (adaptive) {
            h0 = oh * p->h / p->oh, w0 = ow * p->w / p->ow;
            h1 = ((oh + 1) * p->h + p->oh - 1) / p->oh, w1 = ((ow + 1) * p->w + p->ow - 1) / p->ow;
          }
          double sum = 0, inside = 0, padded = 0;
          for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t iw = w0; iw < w1; iw++) {
              if (ih < p->h + p->ph && iw < p->w + p->pw) padded++;
              if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
              sum += val(&x, n, c, ih, iw);
              inside++;
            }
          double d = divisor ? (double)divisor : include_pad && !adaptive ? padded : inside;
          want[((n * p->c + c) * p->oh + oh) * p->ow + ow] = sum / d;
          for (int64_t ih = h0 > 0 ? h0 : 0; ih < h1 && ih < p->h; ih++)
            for (int64_t iw = w0 > 0 ? w0 : 0; iw < w1 && iw < p->w; iw++)
              want_gx[((n * p->c + c) * p->h + ih) * p->w + iw] += val(&gy, n, c, oh, ow) / d;
        }
  nrt_op op = new_op(adaptive ? NRT_OP_ADAPTIVE_AVG_POOL2D : NRT_OP_AVG_POOL2D, 1);
  add(&op, &y), add(&op, &x);
  if (!adaptive) {
    scalar(&op, p->kh), scalar(&op, p->kw), scalar(&op, p->sh), scalar(&op, p->sw);
    scalar(&op, p->ph), scalar(&op, p->pw), scalar(&op, include_pad), scalar(&op, divisor);
  }
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want, tol_of(t)));
  nrt_op back = op;
  back.code = adaptive ? NRT_OP_ADAPTIVE_AVG_POOL2D_BACKWARD : NRT_OP_AVG_POOL2D_BACKWARD;
  back.operands[0] = gx.v;
  back.operands[1] = gy.v;
  CHECK_OK(nrt_op_execute(&back));
  CHECK(close_to(&gx, want_gx, tol_of(t)));
  free(want), free(want_gx);
  release(&x), release(&y), release(&gy), release(&gx);
}

static void test_pooling_matches_window_walks(void) {
  const pool_case cases[] = {
      /* n c  h   w  oh ow kh kw sh sw ph pw dh dw */
      {2, 3, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 1, 1},
      {2, 5, 9, 11, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1},
      {1, 4, 9, 11, 5, 5, 3, 2, 2, 2, 1, 1, 2, 1}, /* dilation; ceil-mode sized output */
      {3, 70, 12, 13, 5, 6, 3, 3, 2, 2, 0, 0, 1, 1},
      {1, 2, 1, 17, 1, 8, 1, 3, 1, 2, 0, 1, 1, 1},
  };
  nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int t = 0; t < 3; t++)
      for (int cl = 0; cl < 2; cl++) {
        const pool_case *p = &cases[i];
        check_max_pool(p, types[t], cl, 0);
        check_max_pool(p, types[t], cl, 1);
        pool_case a = *p;
        a.dh = a.dw = 1;
        check_avg_pool(&a, types[t], cl, 0, 1, 0);
        check_avg_pool(&a, types[t], cl, 0, 0, 0);
        check_avg_pool(&a, types[t], cl, 0, 1, 3);
        check_avg_pool(&a, types[t], cl, 1, 0, 0);
      }
}

/* ---- upsampling ------------------------------------------------------------------------- */

static void nearest_ref(int64_t out, int64_t in, int exact, double scale, int64_t *idx) {
  float step = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
  for (int64_t o = 0; o < out; o++) {
    double src = exact ? ((double)o + 0.5) * step : (double)((float)o * step);
    if (!exact && out == in) src = (double)o;
    if (!exact && out == 2 * in) src = (double)(o / 2);
    int64_t i = (int64_t)floor((float)src);
    idx[o] = i < in - 1 ? i : in - 1;
  }
}

static void linear_ref(int64_t out, int64_t in, int align, int64_t *i0, double *l1) {
  for (int64_t o = 0; o < out; o++) {
    double src = align ? (out > 1 ? (double)o * (in - 1) / (out - 1) : 0) : ((double)o + 0.5) * in / out - 0.5;
    if (out == in) src = (double)o;
    if (src < 0) src = 0;
    i0[o] = (int64_t)floor(src) < in - 1 ? (int64_t)floor(src) : in - 1;
    l1[o] = src - (double)i0[o];
  }
}

static void check_upsample(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, int mode, int flag,
                           nrt_dtype t, int cl) {
  tensor x = make(t, n, c, h, w, cl), y = make(t, n, c, oh, ow, cl);
  tensor gy = make(t, n, c, oh, ow, !cl), gx = make(t, n, c, h, w, cl);
  fill(&x), fill(&gy);
  int64_t *hi = malloc((size_t)oh * sizeof *hi), *wi = malloc((size_t)ow * sizeof *wi);
  double *hl = calloc((size_t)oh, sizeof *hl), *wl = calloc((size_t)ow, sizeof *wl);
  if (mode == 0) {
    nearest_ref(oh, h, flag, 0, hi);
    nearest_ref(ow, w, flag, 0, wi);
  } else {
    linear_ref(oh, h, flag, hi, hl);
    linear_ref(ow, w, flag, wi, wl);
  }
  double *want = calloc((size_t)(y.numel + 1), sizeof(double)), *want_gx = calloc((size_t)(gx.numel + 1), sizeof(double));
  for (int64_t a = 0; a < n; a++)
    for (int64_t b = 0; b < c; b++)
      for (int64_t p = 0; p < oh; p++)
        for (int64_t q = 0; q < ow; q++) {
          int64_t h0 = hi[p], w0 = wi[q], h1 = h0 + (h0 < h - 1), w1 = w0 + (w0 < w - 1);
          double fh[2] = {1 - hl[p], hl[p]}, fw[2] = {1 - wl[q], wl[q]}, s = 0;
          int64_t hs[2] = {h0, h1}, ws[2] = {w0, w1};
          double g = val(&gy, a, b, p, q);
          for (int u = 0; u < 2; u++)
            for (int v = 0; v < 2; v++) {
              double f = fh[u] * fw[v];
              if (f == 0) continue;
              s += f * val(&x, a, b, hs[u], ws[v]);
              want_gx[((a * c + b) * h + hs[u]) * w + ws[v]] += f * g;
            }
          want[((a * c + b) * oh + p) * ow + q] = s;
        }
  nrt_op op = new_op(mode == 0 ? NRT_OP_UPSAMPLE_NEAREST2D : NRT_OP_UPSAMPLE_BILINEAR2D, 1);
  add(&op, &y), add(&op, &x);
  real(&op, 0), real(&op, 0), scalar(&op, flag);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want, mode == 0 ? 0 : tol_of(t)));
  op.code = mode == 0 ? NRT_OP_UPSAMPLE_NEAREST2D_BACKWARD : NRT_OP_UPSAMPLE_BILINEAR2D_BACKWARD;
  op.operands[0] = gx.v;
  op.operands[1] = gy.v;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, want_gx, tol_of(t) * 10));
  free(hi), free(wi), free(hl), free(wl), free(want), free(want_gx);
  release(&x), release(&y), release(&gy), release(&gx);
}

static void test_upsampling_matches_index_formulas(void) {
  nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64};
  for (int t = 0; t < 2; t++)
    for (int cl = 0; cl < 2; cl++)
      for (int flag = 0; flag < 2; flag++)
        for (int mode = 0; mode < 2; mode++) {
          check_upsample(2, 3, 5, 6, 10, 12, mode, flag, types[t], cl);
          check_upsample(2, 3, 5, 6, 7, 15, mode, flag, types[t], cl);
          check_upsample(1, 70, 6, 5, 3, 13, mode, flag, types[t], cl);
          check_upsample(1, 2, 4, 4, 4, 1, mode, flag, types[t], cl);
        }
}

/* ---- im2col / col2im -------------------------------------------------------------------- */

typedef struct patch_case {
  int64_t n, c, h, w, kh, kw, dh, dw, ph, pw, sh, sw;
} patch_case;

static void patch_scalars(nrt_op *op, const patch_case *p) {
  scalar(op, p->kh), scalar(op, p->kw), scalar(op, p->dh), scalar(op, p->dw);
  scalar(op, p->ph), scalar(op, p->pw), scalar(op, p->sh), scalar(op, p->sw);
}

/* IM2COL against the definition (each tap of each window, zero outside),
 * then COL2IM against the same walk scattering the columns back. */
static void check_patches(const patch_case *p, nrt_dtype t, int cl) {
  const int64_t oh = out_size(p->h, p->kh, p->sh, p->ph, p->dh), ow = out_size(p->w, p->kw, p->sw, p->pw, p->dw);
  const int64_t rows = p->c * p->kh * p->kw;
  tensor img = make(t, p->n, p->c, p->h, p->w, cl), cols = make(t, p->n, rows, oh, ow, 0);
  fill(&img);
  nrt_op op = new_op(NRT_OP_IM2COL, 1);
  add(&op, &cols), add(&op, &img);
  patch_scalars(&op, p);
  CHECK_OK(nrt_op_execute(&op));
  double *want = calloc((size_t)(p->n * rows * oh * ow), sizeof(double));
  double *back = calloc((size_t)(p->n * p->c * p->h * p->w), sizeof(double));
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++)
      for (int64_t i = 0; i < p->kh; i++)
        for (int64_t j = 0; j < p->kw; j++)
          for (int64_t y = 0; y < oh; y++)
            for (int64_t x = 0; x < ow; x++) {
              int64_t h = y * p->sh - p->ph + i * p->dh, w = x * p->sw - p->pw + j * p->dw;
              int64_t row = (c * p->kh + i) * p->kw + j;
              int inside = h >= 0 && h < p->h && w >= 0 && w < p->w;
              want[((n * rows + row) * oh + y) * ow + x] = inside ? val(&img, n, c, h, w) : 0.0;
            }
  CHECK(close_to(&cols, want, 0.0));
  fill(&cols); /* now COL2IM of fresh columns */
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t row = 0; row < rows; row++)
      for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++) {
          int64_t c = row / (p->kh * p->kw), i = row / p->kw % p->kh, j = row % p->kw;
          int64_t h = y * p->sh - p->ph + i * p->dh, w = x * p->sw - p->pw + j * p->dw;
          if (h >= 0 && h < p->h && w >= 0 && w < p->w)
            back[((n * p->c + c) * p->h + h) * p->w + w] += val(&cols, n, row, y, x);
        }
  op = new_op(NRT_OP_COL2IM, 1);
  add(&op, &img), add(&op, &cols);
  patch_scalars(&op, p);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&img, back, t == NRT_BFLOAT16 ? tol_of(t) : 0.0)); /* multiples of 1/64: exact sums */
  free(want), free(back);
  release(&img), release(&cols);
}

static void test_patches_match_window_walks(void) {
  static const patch_case cases[] = {
      {2, 3, 6, 5, 2, 3, 1, 1, 0, 0, 1, 1}, {1, 2, 7, 7, 3, 3, 2, 2, 1, 1, 2, 2},
      {1, 1, 5, 9, 1, 4, 1, 2, 0, 3, 3, 1}, {1, 4, 3, 3, 3, 3, 1, 1, 2, 2, 1, 1},
      {3, 8, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1},
  };
  const nrt_dtype dtypes[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (size_t d = 0; d < 3; d++)
      for (int cl = 0; cl < 2; cl++) check_patches(&cases[k], dtypes[d], cl);
  /* IM2COL copies any dtype; COL2IM sums floating dtypes only */
  tensor img = make(NRT_INT64, 1, 1, 3, 3, 0), cols = make(NRT_INT64, 1, 4, 2, 2, 0);
  patch_case p = {1, 1, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1};
  nrt_op op = new_op(NRT_OP_IM2COL, 1);
  add(&op, &cols), add(&op, &img);
  patch_scalars(&op, &p);
  CHECK_OK(nrt_op_execute(&op));
  op = new_op(NRT_OP_COL2IM, 1);
  add(&op, &img), add(&op, &cols);
  patch_scalars(&op, &p);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  tensor wrong = make(NRT_INT64, 1, 4, 3, 2, 0); /* 3 window rows for 2 */
  op = new_op(NRT_OP_IM2COL, 1);
  add(&op, &wrong), add(&op, &img);
  patch_scalars(&op, &p);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  release(&img), release(&cols), release(&wrong);
}

/* ---- validation ------------------------------------------------------------------------- */

static void test_bad_descriptors_fail_cleanly(void) {
  conv_case g = {1, 4, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  tensor x = make(NRT_FLOAT32, 1, 4, 5, 5, 0), w = make(NRT_FLOAT32, 2, 3, 3, 3, 0), y = make(NRT_FLOAT32, 1, 2, 5, 5, 0);
  nrt_op op = new_op(NRT_OP_CONV2D, 1);
  add(&op, &y), add(&op, &x), add(&op, &w);
  conv_scalars(&op, &g);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* 3 weight channels for 4 */
  tensor xi = make(NRT_INT64, 1, 2, 4, 4, 0), yi = make(NRT_INT64, 1, 2, 2, 2, 0);
  op = new_op(NRT_OP_ADAPTIVE_AVG_POOL2D, 1); /* floating only */
  add(&op, &yi), add(&op, &xi);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  tensor gx = make(NRT_FLOAT32, 1, 1, 2, 2, 0), gy = make(NRT_FLOAT32, 1, 1, 1, 1, 0), ind = make(NRT_INT64, 1, 1, 1, 1, 0);
  set(NRT_INT64, nrt_device_to_host(ind.v.data), 4);
  op = new_op(NRT_OP_MAX_POOL2D_BACKWARD, 1);
  add(&op, &gx), add(&op, &gy), add(&op, &ind);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  release(&x), release(&w), release(&y), release(&xi), release(&yi), release(&gx), release(&gy), release(&ind);
}

int main(void) {
  RUN(test_conv_gemm_matches_naive_product);
  RUN(test_conv_matches_direct_loops);
  RUN(test_pooling_matches_window_walks);
  RUN(test_upsampling_matches_index_formulas);
  RUN(test_patches_match_window_walks);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
