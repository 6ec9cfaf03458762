/* The resampling kernels (ops/vision/resample.c) against a plain twin
 * written here from PyTorch's formulas, in double and not separated: each
 * output the double sum over its 2-d taps of w_h * w_w * x, and the
 * backward ops the same products scattered. Bicubic (Keys, a = -0.75,
 * indices clamped), and the antialiased bilinear, bicubic (a = -0.5) and
 * Lanczos (a = 3) filters with support widened by the downscale and
 * weights normalised; up and down, align_corners on and off, given scales;
 * NCHW and channels_last; float64 and float32. uint8 against a plain twin
 * of PyTorch's fixed-point rule (int16 weights, width then height). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

enum { AA_BILINEAR = 0, AA_BICUBIC = 1, AA_LANCZOS = 2, BICUBIC = 3 };

static uint64_t rng_state = 0x3c6ef372fe94f82bu;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

typedef struct image {
  nrt_tensor_view v;
} image;

static image make(nrt_dtype t, int64_t n, int64_t c, int64_t h, int64_t w, int cl) {
  image x;
  memset(&x, 0, sizeof x);
  int64_t numel = n * c * h * w;
  CHECK_OK(nrt_malloc(0, (size_t)(numel > 0 ? numel : 1) * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 4;
  x.v.shape[0] = n, x.v.shape[1] = c, x.v.shape[2] = h, x.v.shape[3] = w;
  if (cl)
    x.v.strides[1] = 1, x.v.strides[3] = c, x.v.strides[2] = c * w;
  else
    x.v.strides[3] = 1, x.v.strides[2] = w, x.v.strides[1] = w * h;
  x.v.strides[0] = c * h * w;
  return x;
}

ORACLE_CODE static void *at(const image *x, int64_t pl, int64_t h, int64_t w) {
  const int64_t *s = x->v.strides;
  int64_t off = pl / x->v.shape[1] * s[0] + pl % x->v.shape[1] * s[1] + h * s[2] + w * s[3];
  return (void *)((char *)nrt_device_to_host(x->v.data) + off * (int64_t)nrt_dtype_size(x->v.dtype));
}

ORACLE_CODE static double get(const image *x, int64_t pl, int64_t h, int64_t w) {
  void *p = at(x, pl, h, w);
  return x->v.dtype == NRT_FLOAT32 ? *(float *)p : *(double *)p;
}

ORACLE_CODE static void set(const image *x, int64_t pl, int64_t h, int64_t w, double v) {
  void *p = at(x, pl, h, w);
  if (x->v.dtype == NRT_FLOAT32) *(float *)p = (float)v;
  else *(double *)p = v;
}

ORACLE_CODE static double cubic(double x, double a) {
  x = fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

ORACLE_CODE static double filter(int kind, double x) {
  x = fabs(x);
  if (kind == AA_BILINEAR) return x < 1 ? 1 - x : 0;
  if (kind == AA_BICUBIC) return x < 2 ? cubic(x, -0.5) : 0;
  if (x >= 3) return 0;
  if (x == 0) return 1;
  double px = M_PI * x;
  return 3 * sin(px) * sin(px / 3) / (px * px);
}

/* Taps (index, weight) of output o along a dim; returns their count. */
ORACLE_CODE static int taps(int kind, int align, double user_scale, int64_t in, int64_t out, int64_t o,
                            int64_t idx[64], double w[64]) {
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                       : user_scale > 0 ? 1 / user_scale : (double)in / (double)out;
  if (kind == BICUBIC) {
    double real = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
    double fl = floor(real), t = real - fl;
    for (int k = 0; k < 4; k++) {
      int64_t i = (int64_t)fl - 1 + k;
      idx[k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
      w[k] = cubic(t + 1 - k, -0.75);
    }
    return 4;
  }
  double half = kind == AA_BILINEAR ? 1 : kind == AA_BICUBIC ? 2 : 3;
  double support = scale >= 1 ? half * scale : half, inv = scale >= 1 ? 1 / scale : 1;
  double center = scale * ((double)o + 0.5);
  int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
  if (lo < 0) lo = 0;
  if (hi > in) hi = in;
  double total = 0;
  int n = 0;
  for (int64_t i = lo; i < hi && n < 64; i++, n++) {
    idx[n] = i;
    w[n] = filter(kind, ((double)i - center + 0.5) * inv);
    total += w[n];
  }
  for (int k = 0; k < n && total != 0; k++) w[k] /= total;
  return n;
}

static nrt_op new_op(int kind, int backward, const image *dst, const image *src, double sh, double sw, int align) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = kind == BICUBIC ? (backward ? NRT_OP_UPSAMPLE_BICUBIC2D_BACKWARD : NRT_OP_UPSAMPLE_BICUBIC2D)
                            : (backward ? NRT_OP_UPSAMPLE_AA2D_BACKWARD : NRT_OP_UPSAMPLE_AA2D);
  op.num_outputs = 1;
  op.operands[0] = dst->v, op.operands[1] = src->v;
  op.num_operands = 2;
  op.scalars[0].is_float = 1, op.scalars[0].f = sh;
  op.scalars[1].is_float = 1, op.scalars[1].f = sw;
  op.scalars[2].i = align;
  op.scalars[3].i = kind;
  op.num_scalars = kind == BICUBIC ? 3 : 4;
  return op;
}

ORACLE_CODE static void check(nrt_dtype t, int kind, int align, int64_t H, int64_t W, int64_t OH, int64_t OW,
                              double sh, double sw, int cl) {
  const int64_t P = 6;
  image x = make(t, 2, 3, H, W, cl), y = make(t, 2, 3, OH, OW, cl), gy = make(t, 2, 3, OH, OW, !cl),
        gx = make(t, 2, 3, H, W, cl);
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) set(&x, p, h, w, round(rnd() * 64) / 64);
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < OH; h++)
      for (int64_t w = 0; w < OW; w++) set(&gy, p, h, w, round(rnd() * 64) / 64);
  double *want_y = calloc((size_t)(P * OH * OW), sizeof(double)), *want_g = calloc((size_t)(P * H * W), sizeof(double));
  int64_t ih[64], iw[64];
  double lh[64], lw[64];
  for (int64_t p = 0; p < P; p++)
    for (int64_t a = 0; a < OH; a++)
      for (int64_t b = 0; b < OW; b++) {
        int nh = taps(kind, align, sh, H, OH, a, ih, lh), nw = taps(kind, align, sw, W, OW, b, iw, lw);
        double g = get(&gy, p, a, b);
        for (int i = 0; i < nh; i++)
          for (int j = 0; j < nw; j++) {
            want_y[(p * OH + a) * OW + b] += lh[i] * lw[j] * get(&x, p, ih[i], iw[j]);
            want_g[(p * H + ih[i]) * W + iw[j]] += lh[i] * lw[j] * g;
          }
      }
  double tol = t == NRT_FLOAT64 ? 1e-12 : 2e-5;
  nrt_op op = new_op(kind, 0, &y, &x, sh, sw, align);
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  for (int64_t p = 0; p < P; p++)
    for (int64_t a = 0; a < OH; a++)
      for (int64_t b = 0; b < OW; b++) {
        double want = want_y[(p * OH + a) * OW + b];
        if (!(fabs(get(&y, p, a, b) - want) <= tol * (1 + fabs(want)))) bad++;
      }
  CHECK(bad == 0);
  op = new_op(kind, 1, &gx, &gy, sh, sw, align);
  CHECK_OK(nrt_op_execute(&op));
  bad = 0;
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) {
        double want = want_g[(p * H + h) * W + w];
        if (!(fabs(get(&gx, p, h, w) - want) <= tol * 10 * (1 + fabs(want)))) bad++;
      }
  CHECK(bad == 0);
  free(want_y), free(want_g);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
}

static void test_resampling_matches_the_formulas(void) {
  const int64_t sizes[][2] = {{11, 13}, {3, 4}, {1, 1}, {5, 2}, {7, 9}, {40, 3}};
  for (int kind = 0; kind <= BICUBIC; kind++)
    for (int align = 0; align < 2; align++)
      for (int cl = 0; cl < 2; cl++)
        for (int s = 0; s < 6; s++) {
          check(NRT_FLOAT64, kind, align, 7, 9, sizes[s][0], sizes[s][1], 0, 0, cl);
          check(NRT_FLOAT32, kind, align, 7, 9, sizes[s][0], sizes[s][1], 0, 0, cl);
        }
  for (int kind = 0; kind <= BICUBIC; kind++) check(NRT_FLOAT64, kind, 0, 7, 9, 15, 3, 2.2, 0.35, 0);
}

/* ---- uint8 (resample_u8.c): a plain twin of PyTorch's fixed-point rule --- */

/* PyTorch's Lanczos factor, as its uint8 weights compute it. */
ORACLE_CODE static double sinc(double x) {
  x = fabs(x);
  if (x == 0) return 1;
  x *= M_PI;
  return sin(x) / x;
}

/* One axis: int16 weights [out][k] from input lo[o], precision *prec. */
ORACLE_CODE static int64_t u8_twin_table(int kind, int align, double user_scale, int64_t in, int64_t out,
                                         int64_t *lo, int32_t *w16, int *prec) {
  int aa = kind != BICUBIC && kind != 4; /* 4: plain bilinear */
  int taps = kind == AA_BILINEAR || kind == 4 ? 2 : kind == AA_LANCZOS ? 6 : 4;
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                       : user_scale > 0 ? 1 / user_scale : (double)in / (double)out;
  double support = aa && scale >= 1 ? taps * 0.5 * scale : taps * 0.5;
  int64_t k = aa ? (int64_t)ceil(support) * 2 + 1 : taps;
  double *w = calloc((size_t)(out * k), sizeof *w), wmax = 0;
  for (int64_t o = 0; o < out; o++) {
    double *row = w + o * k;
    if (aa) {
      double ww[256];
      int64_t n = 0;
      double center = scale * ((double)o + 0.5), inv = scale >= 1 ? 1 / scale : 1;
      int64_t a = (int64_t)(center - support + 0.5), b = (int64_t)(center + support + 0.5);
      if (a < 0) a = 0;
      if (b > in) b = in;
      double total = 0;
      for (int64_t i = a; i < b && n < k; i++, n++) {
        double x = ((double)i - center + 0.5) * inv;
        ww[n] = kind == AA_LANCZOS ? (fabs(x) < 3 ? sinc(x) * sinc(x / 3.0) : 0) : filter(kind, x);
        total += ww[n];
      }
      lo[o] = a;
      for (int64_t j = 0; j < n; j++) {
        row[j] = total != 0 ? ww[j] / total : ww[j];
        if (total != 0 && row[j] > wmax) wmax = row[j];
      }
    } else {
      double real = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
      if (kind == 4 && real < 0) real = 0;
      int64_t i = (int64_t)floorf((float)real);
      if (i > in - 1) i = in - 1;
      double t = real - (double)i;
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      int64_t half = taps / 2, first = i - half + 1;
      lo[o] = first < 0 ? 0 : first;
      for (int j = 0; j < taps; j++) {
        int64_t src = first + j < 0 ? 0 : first + j > in - 1 ? in - 1 : first + j;
        double x = fabs((double)(j + 1 - half) - t);
        row[src - lo[o]] += kind == 4 ? (x < 1 ? 1 - x : 0) : (x < 2 ? cubic(x, -0.75) : 0);
        if (row[src - lo[o]] > wmax) wmax = row[src - lo[o]];
      }
    }
  }
  int p = 0;
  while (p < 22 && (int)(0.5 + wmax * (double)(1 << (p + 1))) < (1 << 15)) p++;
  for (int64_t i = 0; i < out * k; i++) {
    double v = w[i] * (double)(1 << p);
    w16[i] = (int32_t)(v < 0 ? trunc(v - 0.5) : trunc(v + 0.5));
  }
  free(w);
  *prec = p;
  return k;
}

/* Resamples the [P, H, W] plane stack along W (along_w) or H into dst. */
ORACLE_CODE static void u8_twin_pass(const uint8_t *src, uint8_t *dst, int64_t P, int64_t H, int64_t W,
                                     int64_t OH, int64_t OW, int along_w, int kind, int align, double scale) {
  int64_t in = along_w ? W : H, out = along_w ? OW : OH, lo[4096];
  int32_t *w16 = calloc((size_t)(out * 256), sizeof *w16);
  int prec;
  int64_t k = u8_twin_table(kind, align, scale, in, out, lo, w16, &prec);
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < OH; h++)
      for (int64_t w = 0; w < OW; w++) {
        int64_t o = along_w ? w : h;
        int64_t acc = 1 << (prec - 1);
        for (int64_t j = 0; j < k; j++) {
          int64_t i = lo[o] + j > in - 1 ? in - 1 : lo[o] + j;
          acc += (int64_t)w16[o * k + j] * src[(p * H + (along_w ? h : i)) * W + (along_w ? i : w)];
        }
        acc >>= prec;
        dst[(p * OH + h) * OW + w] = (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
      }
  free(w16);
}

ORACLE_CODE static void check_u8(int kind, int align, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                 double sh, double sw, int cl) {
  const int64_t N = 2, P = N * C;
  /* cl: 0 NCHW -> channels_last, 1 the reverse, 2 channels_last both sides */
  image x = make(NRT_UINT8, N, C, H, W, cl != 0), y = make(NRT_UINT8, N, C, OH, OW, cl != 1);
  uint8_t *plain = malloc((size_t)(P * H * W)), *mid = malloc((size_t)(P * H * OW)),
          *want = malloc((size_t)(P * OH * OW));
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) {
        uint8_t v = (h % 5 == 0) ? 255 : (w % 7 == 1) ? 0 : (uint8_t)((rnd() + 1) * 127.9);
        plain[(p * H + h) * W + w] = v;
        *(uint8_t *)at(&x, p, h, w) = v;
      }
  const uint8_t *cur = plain;
  if (OW != W) {
    u8_twin_pass(cur, mid, P, H, W, H, OW, 1, kind, align, sw);
    cur = mid;
  } else {
    memcpy(mid, plain, (size_t)(P * H * W));
    cur = mid;
  }
  if (OH != H)
    u8_twin_pass(cur, want, P, H, OW, OH, OW, 0, kind, align, sh);
  else
    memcpy(want, cur, (size_t)(P * OH * OW));
  nrt_op op = new_op(kind == 4 ? AA_BILINEAR : kind, 0, &y, &x, sh, sw, align);
  if (kind == 4) op.code = NRT_OP_UPSAMPLE_BILINEAR2D, op.num_scalars = 3;
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  for (int64_t p = 0; p < P; p++)
    for (int64_t h = 0; h < OH; h++)
      for (int64_t w = 0; w < OW; w++) bad += *(uint8_t *)at(&y, p, h, w) != want[(p * OH + h) * OW + w];
  CHECK(bad == 0);
  free(plain), free(mid), free(want);
  nrt_free(x.v.data), nrt_free(y.v.data);
}

static void test_uint8_matches_the_fixed_point_twin(void) {
  const int64_t sizes[][2] = {{11, 13}, {3, 4}, {1, 1}, {7, 2}, {7, 9}, {40, 3}, {2, 9}};
  for (int kind = 0; kind <= 4; kind++)
    for (int align = 0; align < 2; align++)
      for (int cl = 0; cl < 3; cl++)
        for (int s = 0; s < 7; s++)
          for (int64_t c = 1; c <= 5; c += 2) check_u8(kind, align, c, 7, 9, sizes[s][0], sizes[s][1], 0, 0, cl);
  for (int kind = 0; kind <= 4; kind++) {
    check_u8(kind, 0, 3, 7, 9, 15, 3, 2.2, 0.35, 1);
    check_u8(kind, 0, 4, 96, 120, 8, 10, 0, 0, 1); /* 12x down: many taps */
    check_u8(kind, 0, 3, 70, 45, 9, 130, 0, 0, 2); /* tiles past 64 rows, 8-byte blocks */
    check_u8(kind, 1, 1, 70, 45, 9, 130, 0, 0, 0);
  }
}

static void test_bad_descriptors_fail_cleanly(void) {
  image x = make(NRT_INT32, 1, 1, 2, 2, 0), y = make(NRT_INT32, 1, 1, 3, 3, 0);
  nrt_op op = new_op(AA_BILINEAR, 0, &y, &x, 0, 0, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* floating only */
  image f = make(NRT_FLOAT32, 1, 1, 2, 2, 0), g = make(NRT_FLOAT32, 1, 1, 3, 3, 0);
  op = new_op(AA_BILINEAR, 0, &g, &f, 0, 0, 0);
  op.scalars[3].i = 7;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* no such filter */
  op = new_op(BICUBIC, 0, &g, &f, 0, 0, 0);
  op.num_scalars = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op = new_op(BICUBIC, 0, &g, &x, 0, 0, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* mixed dtypes */
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(f.v.data), nrt_free(g.v.data);
}

int main(void) {
  RUN(test_resampling_matches_the_formulas);
  RUN(test_uint8_matches_the_fixed_point_twin);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
