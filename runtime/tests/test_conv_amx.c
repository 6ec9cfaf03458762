/* The direct AMX bfloat16 convolution (conv_amx.c) and its portable twin
 * against the definition in double: the forward (with a bias), the weight
 * gradient and the input gradient as the flipped forward, over shapes that
 * cross the blocking's edges: channel blocks with an odd tail, output
 * channels not a multiple of 32, positions whose last block runs past the
 * image, row padding columns of several widths, dilation, padding beyond
 * the window, 1x1 windows, groups, strided images and outputs, and weight
 * gradients of several passes of positions. The twin runs on every host;
 * the tiles where the host has AMX. Inputs are exact in bfloat16; outputs
 * are rounded once to bfloat16, hence the tolerance. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cpu_isa.h"
#include "ops/conv/conv_amx.h"
#include "ops/engine/scalar_types.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

typedef struct amx_case {
  int64_t n, c, h, w, k, kh, kw, ph, pw, dh, dw, groups;
  int pad_w;      /* extra elements per row of the image and the output */
  int64_t sh, sw; /* stride (0: 1) */
} amx_case;

/* bfloat16 [n, c, h, w] with row stride w + pad. */
ORACLE_CODE static rt_image make(int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int fill) {
  int64_t rs = w + pad, count = n * c * h * rs;
  rt_image im = {.n = n, .c = c, .h = h, .w = w, .sw = 1, .sh = rs, .sc = h * rs, .sn = c * h * rs};
  uint16_t *d = calloc((size_t)(count > 0 ? count : 1), sizeof *d);
  if (fill)
    for (int64_t i = 0; i < count; i++) d[i] = rt_bfloat16_from_float((float)rnd());
  im.data = (char *)d;
  return im;
}

ORACLE_CODE static double at(const rt_image *im, int64_t n, int64_t c, int64_t h, int64_t w) {
  return rt_bfloat16_to_float(((const uint16_t *)im->data)[n * im->sn + c * im->sc + h * im->sh + w * im->sw]);
}

ORACLE_CODE static int close_to(const rt_image *y, const double *want) {
  int bad = 0;
  for (int64_t n = 0; n < y->n; n++)
    for (int64_t c = 0; c < y->c; c++)
      for (int64_t h = 0; h < y->h; h++)
        for (int64_t w = 0; w < y->w; w++) {
          double got = at(y, n, c, h, w), e = want[((n * y->c + c) * y->h + h) * y->w + w];
          if (!(fabs(got - e) <= 8e-3 * (1 + fabs(e))) && bad++ < 5)
            fprintf(stderr, "  [%lld,%lld,%lld,%lld] got %g want %g\n", (long long)n, (long long)c, (long long)h,
                    (long long)w, got, e);
        }
  return bad == 0;
}

ORACLE_CODE static void run_case(const amx_case *g, int portable) {
  int64_t sh = g->sh ? g->sh : 1, sw = g->sw ? g->sw : 1;
  int64_t OH = (g->h + 2 * g->ph - g->dh * (g->kh - 1) - 1) / sh + 1;
  int64_t OW = (g->w + 2 * g->pw - g->dw * (g->kw - 1) - 1) / sw + 1;
  int64_t cg = g->c / g->groups, kg = g->k / g->groups;
  rt_image x = make(g->n, g->c, g->h, g->w, g->pad_w, 1), w = make(g->k, cg, g->kh, g->kw, 0, 1);
  rt_image bias = make(1, 1, 1, g->k, 0, 1), gy = make(g->n, g->k, OH, OW, g->pad_w, 1);
  rt_image y = make(g->n, g->k, OH, OW, g->pad_w, 0), gx = make(g->n, g->c, g->h, g->w, g->pad_w, 0);
  double *want_y = calloc((size_t)(g->n * g->k * OH * OW), sizeof(double));
  double *want_gx = calloc((size_t)(g->n * g->c * g->h * g->w), sizeof(double));
  double *want_gw = calloc((size_t)(g->k * cg * g->kh * g->kw), sizeof(double));
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t k = 0; k < g->k; k++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double sum = at(&bias, 0, 0, 0, k);
          for (int64_t cl = 0; cl < cg; cl++)
            for (int64_t i = 0; i < g->kh; i++)
              for (int64_t jj = 0; jj < g->kw; jj++) {
                int64_t ih = oh * sh - g->ph + i * g->dh, iw = ow * sw - g->pw + jj * g->dw, c = k / kg * cg + cl;
                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
                sum += at(&x, n, c, ih, iw) * at(&w, k, cl, i, jj);
                want_gx[((n * g->c + c) * g->h + ih) * g->w + iw] += at(&gy, n, k, oh, ow) * at(&w, k, cl, i, jj);
                want_gw[((k * cg + cl) * g->kh + i) * g->kw + jj] += at(&gy, n, k, oh, ow) * at(&x, n, c, ih, iw);
              }
          want_y[((n * g->k + k) * OH + oh) * OW + ow] = sum;
        }
  nrt_tensor_view wv = {.data = w.data, .dtype = NRT_BFLOAT16, .ndim = 4, .shape = {g->k, cg, g->kh, g->kw},
                        .strides = {w.sn, w.sc, w.sh, w.sw}};
  rt_conv_shape s = {.img = x, .out = y, .kh = g->kh, .kw = g->kw, .sh = sh, .sw = sw, .ph = g->ph, .pw = g->pw,
                     .dh = g->dh, .dw = g->dw, .groups = g->groups};
  CHECK_OK(rt_conv_amx_forward(&s, &wv, 0, bias.data, 1, portable, "test"));
  CHECK(close_to(&y, want_y));
  rt_image gw = make(g->k, cg, g->kh, g->kw, 0, 0);
  nrt_tensor_view gwv = wv;
  gwv.data = gw.data;
  rt_conv_shape b = s;
  b.out = gy;
  CHECK_OK(rt_conv_amx_weight_grad(&b, &gwv, portable, "test"));
  CHECK(close_to(&gw, want_gw));
  free(gw.data);
  /* The input gradient as the flipped forward: stride 1 (a strided one is
   * split by phase in conv.c, tested through PyTorch). */
  if (sh == 1 && sw == 1 && g->dh * (g->kh - 1) >= g->ph && g->dw * (g->kw - 1) >= g->pw) {
    rt_conv_shape f = s;
    f.img = gy;
    f.out = gx;
    f.ph = g->dh * (g->kh - 1) - g->ph;
    f.pw = g->dw * (g->kw - 1) - g->pw;
    CHECK_OK(rt_conv_amx_forward(&f, &wv, 1, NULL, 0, portable, "test"));
    CHECK(close_to(&gx, want_gx));
  }
  free(want_y), free(want_gx), free(want_gw);
  free(x.data), free(w.data), free(bias.data), free(gy.data), free(y.data), free(gx.data);
}

static const amx_case cases[] = {
    /* n  c   h   w   k  kh kw ph pw dh dw groups pad_w sh sw */
    {3, 64, 8, 8, 128, 3, 3, 1, 1, 1, 1, 1, 0, 1, 1},  /* CNN conv3: 8 + 2 columns a row */
    {2, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 3, 1, 1}, /* CNN conv2, strided rows */
    {2, 37, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 0, 1, 1},  /* channel tail (odd), 40 output channels */
    {1, 16, 12, 10, 8, 3, 2, 2, 1, 2, 3, 1, 0, 1, 1},  /* dilation, 16 channels: half a k block */
    {2, 64, 6, 6, 24, 3, 3, 3, 3, 1, 1, 1, 0, 1, 1},   /* padding beyond the window (forward only) */
    {2, 96, 7, 5, 40, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1},   /* 1x1 */
    {2, 64, 9, 9, 48, 3, 3, 1, 1, 1, 1, 2, 0, 1, 1},   /* groups */
    {1, 32, 1, 40, 33, 1, 5, 0, 2, 1, 1, 1, 0, 1, 1},  /* a 1-d convolution */
    {3, 32, 30, 30, 40, 3, 3, 1, 1, 1, 1, 1, 0, 1, 1}, /* weight gradient: chunks of 2 images, sums reloaded */
    {2, 64, 13, 13, 48, 3, 3, 1, 1, 1, 1, 1, 0, 2, 2}, /* stride 2: four phase planes, odd image */
    {2, 32, 12, 9, 40, 3, 3, 1, 0, 1, 1, 1, 2, 2, 2},  /* stride 2, no column padding, strided rows */
    {1, 48, 11, 16, 33, 4, 3, 1, 1, 1, 1, 1, 0, 3, 1}, /* stride 3 x 1: phases of rows only */
    {2, 32, 20, 20, 64, 3, 3, 0, 2, 1, 1, 2, 0, 2, 3}, /* stride 2 x 3, groups */
};

static void test_direct_conv_matches_definition(void) {
  int amx = rt_isa_amx_bf16();
  fprintf(stderr, "  AMX tiles %s\n", amx ? "present: tiles and twin" : "absent: twin only");
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
    for (int portable = amx ? 0 : 1; portable < 2; portable++) {
      int before = check_failures;
      run_case(&cases[ci], portable);
      if (check_failures != before) fprintf(stderr, "  in case %zu, %s\n", ci, portable ? "twin" : "AMX tiles");
    }
}

/* The path is an AMX one: only where the tiles are usable; a stride only
 * when its window covers it without dilation (every phase has taps). */
static void test_usable_only_with_tiles_and_live_phases(void) {
  rt_image im = {.n = 1, .c = 64, .h = 8, .w = 8, .sw = 1, .sh = 8, .sc = 64, .sn = 4096};
  rt_conv_shape s = {.img = im, .out = im, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1,
                     .groups = 1};
  CHECK(rt_conv_amx_usable(&s) == rt_isa_amx_bf16());
  s.sh = 2;
  CHECK(rt_conv_amx_usable(&s) == rt_isa_amx_bf16());
  s.sh = 4; /* phase 3 has no tap */
  CHECK(!rt_conv_amx_usable(&s));
  s.sh = 2;
  s.dh = 2; /* only even phases have taps */
  CHECK(!rt_conv_amx_usable(&s));
  s.sh = 1;
  s.dh = 1;
  s.groups = 64; /* depthwise */
  CHECK(!rt_conv_amx_usable(&s));
}

int main(void) {
  RUN(test_usable_only_with_tiles_and_live_phases);
  RUN(test_direct_conv_matches_definition);
  return CHECK_MAIN_RESULT();
}
