/* The blocked convolution (conv_blocked.c) and its register tiles
 * (conv_ukernels.c) against plain twins written here.
 *
 * The oracle is the definition in double: every tap of every output
 * position (forward, the flipped input-gradient form), and the same sum
 * scattered to the weight (weight gradient). Each case runs with the CPU's
 * best tiles and with the portable ones, over shapes that cross every edge
 * of the blocking: several k blocks of taps, row panels of 4 and 8, column
 * tails, several position blocks, batch parts, tap blocks, groups, stride,
 * dilation, padding larger than the window, and strided (non-contiguous)
 * images. bfloat16 operands are exact in bfloat16, so the oracle sees the
 * same values; tolerances are float32 accumulation error. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "check.h"
#include "ops/conv/conv_blocked.h"
#include "ops/conv/conv_ukernels.h"
#include "ops/engine/scalar_types.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

typedef struct conv_case {
  int64_t n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int pad_w; /* extra elements per image row: a strided (sliced) image */
} conv_case;

/* A host image [n, c, h, w] with row stride w + pad, values exact in bfloat16. */
typedef struct img {
  rt_image im;
  nrt_dtype t;
} img;

ORACLE_CODE static double ld(nrt_dtype t, const char *base, int64_t i) {
  return t == NRT_BFLOAT16 ? rt_bfloat16_to_float(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

ORACLE_CODE static void st(nrt_dtype t, char *base, int64_t i, double v) {
  if (t == NRT_BFLOAT16)
    ((uint16_t *)base)[i] = rt_bfloat16_from_float((float)v);
  else
    ((float *)base)[i] = (float)v;
}

ORACLE_CODE static img make_img(nrt_dtype t, int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int fill) {
  img x = {{0}, t};
  int64_t rs = w + pad;
  x.im = (rt_image){.n = n, .c = c, .h = h, .w = w, .sw = 1, .sh = rs, .sc = h * rs, .sn = c * h * rs};
  int64_t count = n * c * h * rs;
  x.im.data = calloc((size_t)(count > 0 ? count : 1), nrt_dtype_size(t));
  if (fill)
    for (int64_t i = 0; i < count; i++) st(t, x.im.data, i, (double)rt_bfloat16_to_float(rt_bfloat16_from_float((float)rnd())));
  return x;
}

ORACLE_CODE static double at(const img *x, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ld(x->t, x->im.data, n * x->im.sn + c * x->im.sc + h * x->im.sh + w * x->im.sw);
}

/* Each element within tol * (1 + |want|) * sqrt(terms). */
ORACLE_CODE static int close_to(const img *y, const double *want, double tol) {
  const rt_image *im = &y->im;
  int bad = 0;
  for (int64_t n = 0; n < im->n; n++)
    for (int64_t c = 0; c < im->c; c++)
      for (int64_t h = 0; h < im->h; h++)
        for (int64_t w = 0; w < im->w; w++) {
          double got = at(y, n, c, h, w), e = want[((n * im->c + c) * im->h + h) * im->w + w];
          if (!(fabs(got - e) <= tol * (1 + fabs(e)))) {
            if (bad++ < 5) fprintf(stderr, "  [%lld,%lld,%lld,%lld] got %g want %g\n", (long long)n, (long long)c,
                                   (long long)h, (long long)w, got, e);
          }
        }
  return bad == 0;
}

ORACLE_CODE static void run_case(const conv_case *g, nrt_dtype t, int portable) {
  int64_t OH = (g->h + 2 * g->ph - g->dh * (g->kh - 1) - 1) / g->sh + 1;
  int64_t OW = (g->w + 2 * g->pw - g->dw * (g->kw - 1) - 1) / g->sw + 1;
  int64_t cg = g->c / g->groups, kg = g->k / g->groups;
  img x = make_img(t, g->n, g->c, g->h, g->w, g->pad_w, 1);
  img w = make_img(t, g->k, cg, g->kh, g->kw, 0, 1);
  img bias = make_img(t, 1, 1, 1, g->k, 0, 1);
  img gy = make_img(t, g->n, g->k, OH, OW, g->pad_w, 1);
  img y = make_img(t, g->n, g->k, OH, OW, g->pad_w, 0);
  img gw = make_img(t, g->k, cg, g->kh, g->kw, 0, 0);
  img gx = make_img(t, g->n, g->c, g->h, g->w, 0, 0);
  double *want_y = calloc((size_t)(g->n * g->k * OH * OW), sizeof(double));
  double *want_gw = calloc((size_t)(g->k * cg * g->kh * g->kw), sizeof(double));
  double *want_gx = calloc((size_t)(g->n * g->c * g->h * g->w), sizeof(double));
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t k = 0; k < g->k; k++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double sum = at(&bias, 0, 0, 0, k);
          for (int64_t cl = 0; cl < cg; cl++)
            for (int64_t i = 0; i < g->kh; i++)
              for (int64_t jj = 0; jj < g->kw; jj++) {
                int64_t ih = oh * g->sh - g->ph + i * g->dh, iw = ow * g->sw - g->pw + jj * g->dw;
                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
                int64_t c = k / kg * cg + cl;
                sum += at(&x, n, c, ih, iw) * at(&w, k, cl, i, jj);
                want_gw[((k * cg + cl) * g->kh + i) * g->kw + jj] += at(&gy, n, k, oh, ow) * at(&x, n, c, ih, iw);
                want_gx[((n * g->c + c) * g->h + ih) * g->w + iw] += at(&gy, n, k, oh, ow) * at(&w, k, cl, i, jj);
              }
          want_y[((n * g->k + k) * OH + oh) * OW + ow] = sum;
        }
  nrt_tensor_view wv = {.data = w.im.data, .dtype = t, .ndim = 4, .shape = {g->k, cg, g->kh, g->kw},
                        .strides = {w.im.sn, w.im.sc, w.im.sh, w.im.sw}};
  nrt_tensor_view gwv = wv;
  gwv.data = gw.im.data;
  rt_conv_shape s = {.img = x.im, .out = y.im, .kh = g->kh, .kw = g->kw, .sh = g->sh, .sw = g->sw,
                     .ph = g->ph, .pw = g->pw, .dh = g->dh, .dw = g->dw, .groups = g->groups};
  double tol = 2e-5 * sqrt((double)(cg * g->kh * g->kw));
  double otol = t == NRT_BFLOAT16 ? 8e-3 : tol; /* outputs are rounded to bfloat16 once */
  /* The blocked path is taken where the ISA level has tiles of its own
   * (AVX-512), on shapes like these; elsewhere it runs here on the portable
   * tiles only, as their twin. */
  const rt_conv_ukernels *best = rt_conv_ukernels_get(0), *ref = rt_conv_ukernels_get(1);
  int own_tiles = t == NRT_BFLOAT16 ? best->bf16[3] != ref->bf16[3] : best->f32[3] != ref->f32[3];
  CHECK(rt_conv_blocked_usable(&s, t) == own_tiles || portable == 0);
  CHECK_OK(rt_conv_blocked_forward(&s, t, &wv, 0, bias.im.data, 1, portable, "test"));
  CHECK(close_to(&y, want_y, otol));
  s.out = gy.im;
  double wtol = t == NRT_BFLOAT16 ? 8e-3 : 2e-5 * sqrt((double)(g->n * OH * OW));
  CHECK_OK(rt_conv_blocked_weight_grad(&s, t, &gwv, portable, "test"));
  CHECK(close_to(&gw, want_gw, wtol));
  /* The input gradient of a stride-1 convolution as the flipped forward. */
  if (g->sh == 1 && g->sw == 1 && g->dh * (g->kh - 1) >= g->ph && g->dw * (g->kw - 1) >= g->pw) {
    rt_conv_shape f = s;
    f.img = gy.im;
    f.out = gx.im;
    f.ph = g->dh * (g->kh - 1) - g->ph;
    f.pw = g->dw * (g->kw - 1) - g->pw;
    CHECK_OK(rt_conv_blocked_forward(&f, t, &wv, 1, NULL, 0, portable, "test"));
    CHECK(close_to(&gx, want_gx, t == NRT_BFLOAT16 ? 8e-3 : 2e-5 * sqrt((double)(kg * g->kh * g->kw))));
  }
  free(want_y), free(want_gw), free(want_gx);
  free(x.im.data), free(w.im.data), free(bias.im.data), free(gy.im.data), free(y.im.data), free(gw.im.data);
  free(gx.im.data);
}

static const conv_case cases[] = {
    /* n  c   h   w   k   kh kw sh sw ph pw dh dw groups pad_w */
    {3, 3, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},   /* CNN first layer, small */
    {2, 37, 9, 11, 27, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},   /* two k blocks, panels 12+12+4, column tail */
    {2, 8, 20, 19, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 3},   /* strided rows, position blocks of 256+ */
    {9, 16, 6, 6, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},    /* 1x1, batch parts of unequal size */
    {2, 6, 11, 10, 12, 3, 2, 2, 1, 2, 0, 2, 1, 3, 1},    /* stride, dilation, groups */
    {1, 4, 5, 5, 8, 3, 3, 1, 1, 4, 4, 1, 1, 1, 0},      /* padding larger than the window */
    {2, 130, 6, 6, 200, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},  /* weight gradient in tap blocks */
    {1, 2, 1, 40, 5, 1, 5, 1, 2, 0, 2, 1, 1, 1, 0},     /* a 1-d convolution */
    {2, 16, 15, 17, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 2},  /* stride 2: gathers (float32) */
    {21, 6, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* weight gradient: images sharing a k block */
};

static void test_blocked_conv_matches_direct_loops(void) {
  const nrt_dtype types[] = {NRT_FLOAT32, NRT_BFLOAT16};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
    for (int ti = 0; ti < 2; ti++)
      for (int portable = 0; portable < 2; portable++) {
        int before = check_failures;
        run_case(&cases[ci], types[ti], portable);
        if (check_failures != before)
          fprintf(stderr, "  in case %zu, %s, %s tiles\n", ci, nrt_dtype_name(types[ti]), portable ? "portable" : "best");
      }
}

/* Each tile height against its portable twin, accumulating and not. */
static void test_tiles_match_portable_twins(void) {
  const rt_conv_ukernels *best = rt_conv_ukernels_get(0), *ref = rt_conv_ukernels_get(1);
  fprintf(stderr, "  tiles: %s\n", best->name);
  /* The tiles are those of the ISA level in use (TORCHNEURON_ISA). */
  CHECK((strncmp(best->name, "avx512", 6) == 0) == (rt_isa() >= NRT_ISA_AVX512));
  enum { K = 37, LDC = 40 };
  float a[(K + 1) * CONV_MR], b[(K + 1) * CONV_NR], c1[CONV_MR * LDC], c2[CONV_MR * LDC];
  for (int i = 0; i < (K + 1) * CONV_MR; i++) a[i] = rt_bfloat16_to_float(rt_bfloat16_from_float((float)rnd()));
  for (int i = 0; i < (K + 1) * CONV_NR; i++) b[i] = rt_bfloat16_to_float(rt_bfloat16_from_float((float)rnd()));
  for (int idx = 1; idx <= 3; idx++)
    for (int accumulate = 0; accumulate < 2; accumulate++) {
      for (int i = 0; i < CONV_MR * LDC; i++) c1[i] = c2[i] = (float)rnd();
      best->f32[idx](K, a, b, c1, LDC, accumulate);
      ref->f32[idx](K, a, b, c2, LDC, accumulate);
      int ok = 1;
      for (int i = 0; i < CONV_MR * LDC; i++) ok &= fabsf(c1[i] - c2[i]) <= 1e-5f * (1 + fabsf(c2[i]));
      CHECK(ok);
      /* bfloat16 pairs of the same values (bits of a and b reused as words). */
      uint32_t a2[CONV_MR * 20], b2[CONV_NR * 20];
      for (int i = 0; i < CONV_MR * 20; i++) a2[i] = rt_bfloat16_from_float(a[i]) | (uint32_t)rt_bfloat16_from_float(a[i + 7]) << 16;
      for (int i = 0; i < CONV_NR * 20; i++) b2[i] = rt_bfloat16_from_float(b[i]) | (uint32_t)rt_bfloat16_from_float(b[i + 5]) << 16;
      for (int i = 0; i < CONV_MR * LDC; i++) c1[i] = c2[i] = (float)rnd();
      if (best->bf16[idx]) best->bf16[idx](19, a2, b2, c1, LDC, accumulate);
      ref->bf16[idx](19, a2, b2, c2, LDC, accumulate);
      ok = 1;
      for (int i = 0; i < CONV_MR * LDC; i++) ok &= fabsf(c1[i] - c2[i]) <= 1e-5f * (1 + fabsf(c2[i]));
      CHECK(ok);
      /* Rows beyond the tile height are untouched. */
      int mr = idx * 4;
      for (int i = mr * LDC; i < CONV_MR * LDC; i++) ok &= c1[i] == c2[i];
      CHECK(ok);
    }
}

int main(void) {
  RUN(test_tiles_match_portable_twins);
  RUN(test_blocked_conv_matches_direct_loops);
  return CHECK_MAIN_RESULT();
}
