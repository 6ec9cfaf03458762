/* uint8 resampling in fixed point: UPSAMPLE_BILINEAR2D, UPSAMPLE_BICUBIC2D
 * and UPSAMPLE_AA2D (bilinear and bicubic filters) on uint8 images (see
 * neuronrt/ops/vision.h).
 *
 * The rule is the one PyTorch's CPU follows for uint8 on every host (its
 * AVX2 kernel for 1..4 channels and its generic kernel agree bit for bit):
 *   - per axis, each output position takes a run of input positions
 *     [lo, lo + count) with weights computed in double: for antialias the
 *     PIL filter widened by the downscale and normalised to sum 1; without
 *     it the 2 (linear) or 4 (cubic, Keys a = -0.75) taps around PyTorch's
 *     source index, taps outside the image added onto the border one;
 *   - the weights of an axis are scaled to int16 by 2^p, p the largest
 *     precision below 22 keeping round(max weight * 2^(p + 1)) < 2^15, and
 *     rounded half away from zero;
 *   - the width is resampled first into a uint8 image, then the height;
 *     an axis whose size does not change is skipped (both unchanged: a
 *     copy). Each output is clamp((2^(p-1) + sum w16 * x) >> p, 0, 255)
 *     with the sum in 32-bit integers.
 * Every output element is computed alone in integers, so the result does
 * not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/vision/vision_common.h"

typedef struct u8_axis {
  int64_t out, k; /* k: the table's row length */
  int64_t *lo, *count;
  int16_t *w; /* [out * k] */
  int prec;
} u8_axis;

static int u8_is_cubic(int filter) { return filter == RT_U8_CUBIC || filter == RT_U8_AA_CUBIC; }

static double u8_sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return sin(x) / x;
}

static double u8_filter(int filter, double x) {
  x = fabs(x);
  if (filter == RT_U8_AA_LANCZOS) return x < 3.0 ? u8_sinc(x) * u8_sinc(x / 3.0) : 0.0;
  if (!u8_is_cubic(filter)) return x < 1.0 ? 1.0 - x : 0.0;
  double a = filter == RT_U8_AA_CUBIC ? -0.5 : -0.75;
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

/* Fills ax for in -> out positions; returns 0 when out of memory. */
static int u8_table(u8_axis *ax, int filter, int64_t in, int64_t out, int align, double user_scale) {
  int aa = filter >= RT_U8_AA_LINEAR, cubic = u8_is_cubic(filter);
  int taps = filter == RT_U8_AA_LANCZOS ? 6 : cubic ? 4 : 2;
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                       : user_scale > 0 ? 1.0 / user_scale : (double)in / (double)out;
  double support = aa && scale >= 1.0 ? taps * 0.5 * scale : taps * 0.5;
  int64_t k = aa ? (int64_t)ceil(support) * 2 + 1 : taps;
  ax->out = out, ax->k = k;
  ax->lo = calloc((size_t)out, sizeof *ax->lo);
  ax->count = calloc((size_t)out, sizeof *ax->count);
  ax->w = calloc((size_t)(out * k), sizeof *ax->w);
  double *wd = calloc((size_t)(out * k), sizeof *wd);
  if (!ax->lo || !ax->count || !ax->w || !wd) {
    free(wd);
    return 0;
  }
  double wmax = 0.0;
  for (int64_t o = 0; o < out; o++) {
    double *row = wd + o * k;
    int64_t lo, n;
    if (aa) {
      double center = scale * ((double)o + 0.5), inv = scale >= 1.0 ? 1.0 / scale : 1.0;
      lo = (int64_t)(center - support + 0.5);
      if (lo < 0) lo = 0;
      int64_t hi = (int64_t)(center + support + 0.5);
      n = (hi < in ? hi : in) - lo;
      n = n < 0 ? 0 : n > k ? k : n;
      double total = 0.0;
      for (int64_t j = 0; j < n; j++) {
        row[j] = u8_filter(filter, ((double)(j + lo) - center + 0.5) * inv);
        total += row[j];
      }
      if (total != 0.0)
        for (int64_t j = 0; j < n; j++) {
          row[j] /= total;
          if (row[j] > wmax) wmax = row[j];
        }
    } else {
      double real = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
      if (!cubic && real < 0) real = 0;
      /* PyTorch takes the floor in float32 (floorf). */
      int64_t idx = (int64_t)floorf((float)real);
      if (idx > in - 1) idx = in - 1;
      double lambda = real - (double)idx;
      lambda = lambda < 0 ? 0 : lambda > 1 ? 1 : lambda;
      int64_t half = taps / 2, first = idx - half + 1, last = idx + half + 1;
      lo = first > 0 ? first : 0;
      n = (last < in ? last : in) - lo;
      n = n < 0 ? 0 : n > k ? k : n;
      /* Taps left of the image add onto the first used, right onto the last. */
      int64_t slot = 0;
      for (int64_t j = 0; j < taps; j++) {
        double w = u8_filter(filter, (double)(j + 1 - half) - lambda);
        if (first + j <= 0)
          slot = 0;
        else if (first + j >= in - 1)
          slot = n - 1;
        if (slot < 0 || slot >= k) slot = slot < 0 ? 0 : k - 1;
        row[slot] += w;
        if (row[slot] > wmax) wmax = row[slot];
        slot++;
      }
    }
    ax->lo[o] = lo;
    ax->count[o] = n;
  }
  int p = 0;
  for (; p < 22; p++)
    if ((int)(0.5 + wmax * (double)(1 << (p + 1))) >= (1 << 15)) break;
  if (p < 1) p = 1; /* weights above 2^13: not reachable with these filters */
  ax->prec = p;
  for (int64_t i = 0; i < out * k; i++) {
    double v = wd[i] * (double)(1 << p);
    ax->w[i] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
  }
  free(wd);
  return 1;
}

static void u8_axis_free(u8_axis *ax) {
  free(ax->lo);
  free(ax->count);
  free(ax->w);
}

/* clamp(acc >> p, 0, 255); the shift of a negative sum stays negative. */
static inline uint8_t u8_round(int32_t acc, int p) {
  int32_t v = acc >> p;
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

typedef struct u8_pass {
  rt_image src, dst;
  const u8_axis *ax;
  int64_t lane_chans; /* tiles: channels per row in a tile (1: planes) */
  atomic_int out_of_memory;
} u8_pass;

#define U8_CHUNK 512

/* Two-tap tables (bilinear without antialias), where the tiles' copy costs
 * more than it saves. Along the width, one [n, c, h] row per task (planes). The tables are
 * read through restrict locals: the uint8 stores may otherwise alias them. */
static void u8_width_planes(int64_t begin, int64_t end, void *arg) {
  const u8_pass *j = arg;
  const rt_image *s = &j->src, *d = &j->dst;
  const u8_axis *ax = j->ax;
  const int64_t *restrict lo = ax->lo, *restrict count = ax->count;
  const int16_t *restrict wts = ax->w;
  const int64_t k = ax->k, outs = ax->out, sw = s->sw, dw = d->sw, H = s->h, C = s->c;
  const int prec = ax->prec;
  const int32_t bias = 1 << (prec - 1);
  for (int64_t r = begin; r < end; r++) {
    int64_t h = r % H, c = r / H % C, n = r / H / C;
    const uint8_t *restrict in = (const uint8_t *)s->data + n * s->sn + c * s->sc + h * s->sh;
    uint8_t *restrict out = (uint8_t *)d->data + n * d->sn + c * d->sc + h * d->sh;
    if (sw == 1 && k == 2) {
      for (int64_t o = 0; o < outs; o++) {
        const uint8_t *x = in + lo[o];
        const int16_t *w = wts + o * 2;
        int32_t acc = bias + (int32_t)w[0] * x[0] + (count[o] > 1 ? (int32_t)w[1] * x[1] : 0);
        out[o * dw] = u8_round(acc, prec);
      }
      continue;
    }
    if (sw == 1 && r + 3 < end && h + 3 < H) {
      /* Four rows of the plane share each output's taps. */
      const int64_t sh = s->sh, dh = d->sh;
      for (int64_t o = 0; o < outs; o++) {
        const int16_t *w = wts + o * k;
        const uint8_t *x = in + lo[o];
        int64_t m = count[o];
        int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;
        for (int64_t t = 0; t < m; t++) {
          int32_t wt = w[t];
          a0 += wt * x[t];
          a1 += wt * x[t + sh];
          a2 += wt * x[t + 2 * sh];
          a3 += wt * x[t + 3 * sh];
        }
        out[o * dw] = u8_round(a0, prec);
        out[o * dw + dh] = u8_round(a1, prec);
        out[o * dw + 2 * dh] = u8_round(a2, prec);
        out[o * dw + 3 * dh] = u8_round(a3, prec);
      }
      r += 3;
      continue;
    }
    for (int64_t o = 0; o < outs; o++) {
      const int16_t *w = wts + o * k;
      const uint8_t *x = in + lo[o] * sw;
      int64_t m = count[o];
      int32_t acc = bias;
      if (sw == 1)
        for (int64_t t = 0; t < m; t++) acc += (int32_t)w[t] * x[t];
      else
        for (int64_t t = 0; t < m; t++) acc += (int32_t)w[t] * x[t * sw];
      out[o * dw] = u8_round(acc, prec);
    }
  }
}

/* Pixels of NC channels (a compile-time count) with unit channel stride. */
#define U8_WIDTH_PIXELS_FIXED_(NC)                                                                 \
  static void u8_width_pixels_##NC(const u8_pass *j, int64_t r) {                                 \
    const rt_image *s = &j->src, *d = &j->dst;                                                    \
    const u8_axis *ax = j->ax;                                                                    \
    const int64_t *restrict lo = ax->lo, *restrict count = ax->count;                            \
    const int16_t *restrict wts = ax->w;                                                          \
    const int64_t k = ax->k, outs = ax->out, sw = s->sw, dw = d->sw;                              \
    const int prec = ax->prec;                                                                    \
    const int32_t bias = 1 << (prec - 1);                                                         \
    int64_t h = r % s->h, n = r / s->h;                                                           \
    const uint8_t *restrict in = (const uint8_t *)s->data + n * s->sn + h * s->sh;                \
    uint8_t *restrict out = (uint8_t *)d->data + n * d->sn + h * d->sh;                           \
    for (int64_t o = 0; o < outs; o++) {                                                          \
      const int16_t *w = wts + o * k;                                                             \
      const uint8_t *x = in + lo[o] * sw;                                                         \
      int32_t acc[NC];                                                                            \
      for (int c = 0; c < NC; c++) acc[c] = bias;                                                 \
      for (int64_t t = 0; t < count[o]; t++, x += sw)                                             \
        for (int c = 0; c < NC; c++) acc[c] += (int32_t)w[t] * x[c];                              \
      for (int c = 0; c < NC; c++) out[o * dw + c] = u8_round(acc[c], prec);                      \
    }                                                                                             \
  }
U8_WIDTH_PIXELS_FIXED_(3)
U8_WIDTH_PIXELS_FIXED_(4)

/* Along the width, one [n, h] row of pixels per task (channels inner: two
 * taps, or more channels than a tile has lanes). */
static void u8_width_pixels(int64_t begin, int64_t end, void *arg) {
  const u8_pass *j = arg;
  const rt_image *s = &j->src, *d = &j->dst;
  const u8_axis *ax = j->ax;
  if (s->sc == 1 && d->sc == 1 && (s->c == 3 || s->c == 4)) {
    for (int64_t r = begin; r < end; r++) (s->c == 3 ? u8_width_pixels_3 : u8_width_pixels_4)(j, r);
    return;
  }
  int32_t bias = 1 << (ax->prec - 1), acc[U8_CHUNK];
  for (int64_t r = begin; r < end; r++) {
    int64_t h = r % s->h, n = r / s->h;
    const uint8_t *in = (const uint8_t *)s->data + n * s->sn + h * s->sh;
    uint8_t *out = (uint8_t *)d->data + n * d->sn + h * d->sh;
    for (int64_t o = 0; o < ax->out; o++) {
      const int16_t *w = ax->w + o * ax->k;
      for (int64_t c0 = 0; c0 < s->c; c0 += U8_CHUNK) {
        int64_t cn = s->c - c0 < U8_CHUNK ? s->c - c0 : U8_CHUNK;
        for (int64_t c = 0; c < cn; c++) acc[c] = bias;
        for (int64_t t = 0; t < ax->count[o]; t++) {
          const uint8_t *x = in + (ax->lo[o] + t) * s->sw + c0 * s->sc;
          int32_t wt = w[t];
          if (s->sc == 1)
            for (int64_t c = 0; c < cn; c++) acc[c] += wt * x[c];
          else
            for (int64_t c = 0; c < cn; c++) acc[c] += wt * x[c * s->sc];
        }
        uint8_t *y = out + o * d->sw + c0 * d->sc;
        for (int64_t c = 0; c < cn; c++) y[c * d->sc] = u8_round(acc[c], ax->prec);
      }
    }
  }
}

/* Along the width by tiles: a tile holds U8_LANES rows of one plane
 * (planes, E = 1) or of one image's pixels (channels inner with unit
 * channel stride, E = C <= 4 channels per position), copied transposed
 * (element position major, the rows as lanes), so that each output's taps
 * add whole vectors of lanes. The same integer sums as the kernels above. */
#define U8_LANES 64

/* a[i] holds bytes (i, 0..7) of an 8 x 8 block (little endian); afterwards
 * a[j] holds bytes (0..7, j). */
static inline void u8_transpose8(uint64_t a[8]) {
  for (int i = 0; i < 8; i += 2) {
    uint64_t t = ((a[i] >> 8) ^ a[i + 1]) & 0x00FF00FF00FF00FFull;
    a[i + 1] ^= t;
    a[i] ^= t << 8;
  }
  for (int i = 0; i < 8; i += (i % 4 == 1) ? 3 : 1) {
    uint64_t t = ((a[i] >> 16) ^ a[i + 2]) & 0x0000FFFF0000FFFFull;
    a[i + 2] ^= t;
    a[i] ^= t << 16;
  }
  for (int i = 0; i < 4; i++) {
    uint64_t t = ((a[i] >> 32) ^ a[i + 4]) & 0x00000000FFFFFFFFull;
    a[i + 4] ^= t;
    a[i] ^= t << 32;
  }
}

RT_SIMD_VOID(u8_width_tiles, (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  u8_pass *j = arg;
  const rt_image *s = &j->src, *d = &j->dst;
  const u8_axis *ax = j->ax;
  const int64_t *restrict lo = ax->lo, *restrict count = ax->count;
  const int16_t *restrict wts = ax->w;
  const int64_t k = ax->k, outs = ax->out, E = j->lane_chans, WE = s->w * E, sw = s->sw, dw = d->sw;
  const int64_t dc = E > 1 ? d->sc : 0, tiles = (s->h + U8_LANES - 1) / U8_LANES;
  /* Elements of a row in order: unit stride over W * E bytes. */
  const int dense = E == 1 ? sw == 1 : (s->sc == 1 && sw == E);
  const int prec = ax->prec;
  const int32_t bias = 1 << (prec - 1);
  uint8_t *tile = calloc((size_t)(WE * U8_LANES), 1);
  if (!tile) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  const uint8_t *src = (const uint8_t *)s->data;
  uint8_t *dst = (uint8_t *)d->data;
  int64_t ib[U8_LANES], ob[U8_LANES];
  int32_t acc[U8_LANES];
  for (int64_t t = begin; t < end; t++) {
    int64_t g = t / tiles, h0 = t % tiles * U8_LANES;
    int64_t L = s->h - h0 < U8_LANES ? s->h - h0 : U8_LANES;
    int64_t n = E == 1 ? g / s->c : g, ch = E == 1 ? g % s->c : 0;
    for (int64_t l = 0; l < U8_LANES; l++) {
      int64_t q = l < L ? l : 0; /* lanes past L repeat row 0 */
      ib[l] = n * s->sn + ch * s->sc + (h0 + q) * s->sh;
      ob[l] = n * d->sn + ch * d->sc + (h0 + q) * d->sh;
    }
    int64_t x = 0;
    if (dense)
      /* 8 x 8 byte blocks transposed in registers. */
      for (; x + 8 <= WE; x += 8)
        for (int64_t l0 = 0; l0 < U8_LANES; l0 += 8) {
          uint64_t a[8];
          for (int i = 0; i < 8; i++) memcpy(&a[i], src + ib[l0 + i] + x, 8);
          u8_transpose8(a);
          for (int b = 0; b < 8; b++) memcpy(tile + (x + b) * U8_LANES + l0, &a[b], 8);
        }
    for (; x < WE; x++) {
      uint8_t *row = tile + x * U8_LANES;
      int64_t off = x / E * sw + x % E * (E > 1 ? s->sc : 0);
      for (int64_t l = 0; l < L; l++) row[l] = src[ib[l] + off];
    }
    for (int64_t o = 0; o < outs; o++) {
      const int16_t *wo = wts + o * k;
      for (int64_t e = 0; e < E; e++) {
        for (int l = 0; l < U8_LANES; l++) acc[l] = bias;
        for (int64_t u = 0; u < count[o]; u++) {
          const uint8_t *restrict row = tile + ((lo[o] + u) * E + e) * U8_LANES;
          int32_t wt = wo[u];
          for (int l = 0; l < U8_LANES; l++) acc[l] += wt * row[l];
        }
        for (int64_t l = 0; l < L; l++) dst[ob[l] + o * dw + e * dc] = u8_round(acc[l], prec);
      }
    }
  }
  free(tile);
}

/* Along the height: output row oh is a weighted sum of input rows. A task
 * is one [n, c, oh] row of W elements, or with dense channels_last rows one
 * [n, oh] row of W * C. */
typedef struct u8_rows {
  u8_pass pass;
  int dense; /* rows of W * C elements with unit stride */
} u8_rows;

RT_SIMD_VOID(u8_height, (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  const u8_rows *jr = arg;
  const rt_image *s = &jr->pass.src, *d = &jr->pass.dst;
  const u8_axis *ax = jr->pass.ax;
  int32_t bias = 1 << (ax->prec - 1), acc[U8_CHUNK];
  int64_t groups = jr->dense ? 1 : s->c;
  int64_t len = jr->dense ? s->w * s->c : s->w, ss = jr->dense ? 1 : s->sw, ds = jr->dense ? 1 : d->sw;
  for (int64_t r = begin; r < end; r++) {
    int64_t oh = r % ax->out, c = r / ax->out % groups, n = r / ax->out / groups;
    const uint8_t *in = (const uint8_t *)s->data + n * s->sn + (jr->dense ? 0 : c * s->sc);
    uint8_t *out = (uint8_t *)d->data + n * d->sn + (jr->dense ? 0 : c * d->sc) + oh * d->sh;
    const int16_t *w = ax->w + oh * ax->k;
    for (int64_t i0 = 0; i0 < len; i0 += U8_CHUNK) {
      int64_t m = len - i0 < U8_CHUNK ? len - i0 : U8_CHUNK;
      for (int64_t i = 0; i < m; i++) acc[i] = bias;
      for (int64_t t = 0; t < ax->count[oh]; t++) {
        const uint8_t *x = in + (ax->lo[oh] + t) * s->sh + i0 * ss;
        int32_t wt = w[t];
        if (ss == 1)
          for (int64_t i = 0; i < m; i++) acc[i] += wt * x[i];
        else
          for (int64_t i = 0; i < m; i++) acc[i] += wt * x[i * ss];
      }
      uint8_t *y = out + i0 * ds;
      if (ds == 1)
        for (int64_t i = 0; i < m; i++) y[i] = u8_round(acc[i], ax->prec);
      else
        for (int64_t i = 0; i < m; i++) y[i * ds] = u8_round(acc[i], ax->prec);
    }
  }
}

static void u8_copy(int64_t begin, int64_t end, void *arg) {
  const u8_pass *j = arg;
  const rt_image *s = &j->src, *d = &j->dst;
  for (int64_t r = begin; r < end; r++) {
    int64_t h = r % s->h, c = r / s->h % s->c, n = r / s->h / s->c;
    const uint8_t *in = (const uint8_t *)s->data + n * s->sn + c * s->sc + h * s->sh;
    uint8_t *out = (uint8_t *)d->data + n * d->sn + c * d->sc + h * d->sh;
    for (int64_t w = 0; w < s->w; w++) out[w * d->sw] = in[w * s->sw];
  }
}

static int64_t u8_grain(int64_t per_task) {
  return per_task >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (per_task > 0 ? per_task : 1);
}

static int u8_dense(const rt_image *a, const rt_image *b) {
  return a->c > 1 && a->sc == 1 && a->sw == a->c && b->sc == 1 && b->sw == b->c;
}

nrt_status rt_resample_u8(const nrt_op *op, int filter) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_check_arity(op, 2, 3);
  if (s) return s;
  if (op->num_outputs != 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects one output", name);
  if ((s = rt_check_image(op, 0, "the output")) || (s = rt_check_image(op, 1, "the input"))) return s;
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1];
  if (dst->dtype != NRT_UINT8 || src->dtype != NRT_UINT8)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the fixed-point path takes uint8 operands", name);
  if (filter < RT_U8_LINEAR || filter > RT_U8_AA_LANCZOS)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: this filter has no uint8 kernel", name);
  rt_image in = rt_image_of(src), out = rt_image_of(dst);
  if (in.n != out.n || in.c != out.c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: batch and channel sizes differ between operands", name);
  if (out.n * out.c * out.h * out.w == 0) return NRT_SUCCESS;
  if (in.h * in.w == 0) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input plane is empty", name);
  double scale_h = rt_scalar_double(op, 0), scale_w = rt_scalar_double(op, 1);
  int align = rt_scalar_int(op, 2) != 0;
  int need_w = in.w != out.w, need_h = in.h != out.h;
  if (!need_w && !need_h) {
    u8_pass job = {.src = in, .dst = out, .lane_chans = 1};
    rt_parallel_for(in.n * in.c * in.h, u8_grain(in.w), u8_copy, &job);
    return NRT_SUCCESS;
  }
  u8_axis aw, ah;
  memset(&aw, 0, sizeof aw);
  memset(&ah, 0, sizeof ah);
  uint8_t *tmp = NULL;
  int ok = (!need_w || u8_table(&aw, filter, in.w, out.w, align, scale_w)) &&
           (!need_h || u8_table(&ah, filter, in.h, out.h, align, scale_h));
  rt_image mid = out;
  if (ok && need_w && need_h) {
    /* The intermediate [N, C, H_in, W_out] in the output's layout. */
    tmp = malloc((size_t)(in.n * in.c * in.h * out.w));
    ok = tmp != NULL;
    mid.data = (char *)tmp, mid.h = in.h;
    if (rt_image_channels_inner(&out))
      mid.sc = 1, mid.sw = in.c, mid.sh = in.c * out.w, mid.sn = in.c * out.w * in.h;
    else
      mid.sw = 1, mid.sh = out.w, mid.sc = out.w * in.h, mid.sn = out.w * in.h * in.c;
  }
  if (!ok) {
    u8_axis_free(&aw);
    u8_axis_free(&ah);
    free(tmp);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its tables", name);
  }
  rt_image cur = in;
  int oom = 0;
  if (need_w) {
    u8_pass job = {.src = cur, .dst = mid, .ax = &aw, .lane_chans = 1};
    atomic_init(&job.out_of_memory, 0);
    int64_t taps = aw.k;
    int pixels = rt_image_channels_inner(&cur) && rt_image_channels_inner(&mid);
    if (taps <= 2 && !pixels) {
      rt_parallel_for(in.n * in.c * in.h, u8_grain(out.w * taps), u8_width_planes, &job);
    } else if (!pixels || (in.c <= 4 && cur.sc == 1 && mid.sc == 1)) {
      job.lane_chans = pixels ? in.c : 1;
      int64_t tiles = (in.h + U8_LANES - 1) / U8_LANES;
      rt_parallel_for((pixels ? in.n : in.n * in.c) * tiles, u8_grain(U8_LANES * in.c * out.w * taps), u8_width_tiles,
                      &job);
    } else {
      rt_parallel_for(in.n * in.h, u8_grain(out.w * in.c * taps), u8_width_pixels, &job);
    }
    oom = atomic_load(&job.out_of_memory);
    cur = mid;
  }
  if (need_h && !oom) {
    u8_rows job = {.pass = {.src = cur, .dst = out, .ax = &ah, .lane_chans = 1}, .dense = u8_dense(&cur, &out)};
    int64_t rows = in.n * (job.dense ? 1 : in.c) * out.h, len = job.dense ? out.w * in.c : out.w;
    rt_parallel_for(rows, u8_grain(len * ah.k), u8_height, &job);
  }
  u8_axis_free(&aw);
  u8_axis_free(&ah);
  free(tmp);
  if (oom) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its tiles", name);
  return NRT_SUCCESS;
}
