/* Direct bfloat16 convolution on AMX tiles (see conv_amx.h).
 *
 * Tasks are (image, group): each copies its image into padded channel-pair
 * planes in its own buffer (in L2 for the CNN and ResNet shapes), then for
 * each block of 32 flat positions runs every block of 32 output channels,
 * so the planes' rows of a position block stay in L1 while the packed
 * weight streams from L2. The weight gradient packs a chunk of images
 * (stage 1, tasks (image, group)), then sums it into float32 accumulators
 * (stage 2, tasks (32 x 32 channel block, run of taps); a tap's four C
 * tiles stay in the tiles over the whole chunk). Every output
 * element is summed by one task in a fixed order: results do not depend on
 * the thread count.
 *
 * Numerics: bfloat16 products summed in float32 tiles (TDPBF16PS; the twin
 * sums pairs in float32 in the same order of taps and channel blocks), the
 * bias added in float32 and the result rounded once to bfloat16. */
#include "ops/conv/conv_amx.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "ops/gemm/gemm.h"
#include "ops/engine/thread_pool.h"

#define CA_CB 32 /* channels per k block: 16 pairs, one tile row */
#define CA_MB 32 /* output channels per C block: two A tiles */
#define CA_NB 32 /* flat positions per C block: two B tiles */

typedef struct ca_job {
  rt_conv_shape s;
  int flipped, portable;
  int64_t cg, kg, kgp, ncb, taps;
  int64_t wp, hp;     /* a phase plane of the padded image: columns, rows */
  int64_t phase;      /* words per phase plane, with the slack the last block reads */
  int64_t flat;       /* flat positions per image: OH * wp rounded up to CA_NB */
  int64_t fwd_flat;   /* the forward's: rounded up to 16 (a last block of one B tile) */
  int64_t plane;      /* words (channel pairs) per plane: sh * sw phase planes */
  int64_t *tap_off;   /* flat offset of each tap */
  int64_t *row_at;    /* [ih][b]: where image row ih's column phase b starts in a plane
                       * (worked out once: the divisions were a fifth of the packing) */
  uint32_t *wpack;    /* [group][tap][k block][kgp rows][16 pairs] */
  const void *bias;
  int64_t bias_stride;
  /* Weight gradient: images [n0, n0 + count) packed per (image, group). */
  int64_t cgp, chunk, n0, count, gq_img, xq_img, started;
  int64_t tap_parts; /* tasks per C block, each a run of its taps */
  uint32_t *gq; /* grad_output [kgp][flat] as words of two positions */
  uint32_t *xq; /* image [2][plane / 2][cgp]: pairs from even, then odd positions */
  float *acc;   /* [group][output block][channel block][tap][32][32] */
  const nrt_tensor_view *dw; /* the weight gradient, written by the last chunk's tasks */
  int last;                  /* the chunk is the last */
  atomic_int oom;
} ca_job;

static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/* Tile operands on cache lines: a 64-byte tile row across two lines costs
 * two (the ResNet 3x3 forward ran 1.5x slower on a misaligned heap). */
static void *tile_alloc(int64_t words) {
  return aligned_alloc(64, (size_t)round_up(words > 0 ? words * 4 : 64, 64));
}

/* ---- packing ---------------------------------------------------------------- */

/* A tiles of every (group, tap, k block): kgp rows of 16 channel pairs,
 * the low half of a word the even channel (as in the B planes); zeros
 * beyond kg rows and cg channels. The flipped weight (the input gradient's)
 * is read with its channel dims swapped and mirrored in space
 * (conv_blocked.h). Walked along w's shorter stride, writing within one
 * tap's block: scattered two-byte stores were a third of the forward's
 * time outside the tiles, reads a line apart a tenth of an input gradient's. */
static void pack_weight(ca_job *j, const nrt_tensor_view *w) {
  memset(j->wpack, 0, (size_t)(j->s.groups * j->taps * j->ncb * j->kgp * 16) * sizeof *j->wpack);
  uint16_t *dst = (uint16_t *)j->wpack;
  const uint16_t *src = w->data;
  const int64_t kh = j->s.kh, kw = j->s.kw, *st = w->strides;
  /* Steps in w between output channels and between input channels. */
  const int64_t o_step = j->flipped ? st[1] : st[0], c_step = j->flipped ? st[0] : st[1];
  for (int64_t g = 0; g < j->s.groups; g++)
    for (int64_t t = 0; t < j->taps; t++) {
      int64_t i = t / kw, jj = t % kw;
      if (j->flipped) i = kh - 1 - i, jj = kw - 1 - jj;
      const uint16_t *wt = src + g * (j->flipped ? j->cg * st[0] : j->kg * st[0]) + i * st[2] + jj * st[3];
      uint16_t *dt = dst + (g * j->taps + t) * j->ncb * j->kgp * 32;
      if (o_step < c_step) /* the flipped weight: read along output channels, write in an L1 block */
        for (int64_t c = 0; c < j->cg; c++) {
          const uint16_t *wc = wt + c * c_step;
          uint16_t *d = dt + c / CA_CB * j->kgp * 32 + c % CA_CB;
          for (int64_t o = 0; o < j->kg; o++) d[o * 32] = wc[o * o_step];
        }
      else
        for (int64_t o = 0; o < j->kg; o++)
          for (int64_t c0 = 0; c0 < j->cg; c0 += CA_CB) {
            const uint16_t *wc = wt + o * o_step + c0 * c_step;
            uint16_t *d = dt + (c0 / CA_CB * j->kgp + o) * 32;
            for (int64_t c = 0, e = j->cg - c0 < CA_CB ? j->cg - c0 : CA_CB; c < e; c++) d[c] = wc[c * c_step];
          }
    }
}

/* Where padded position (r, c) lands in a channel's plane: the plane of
 * its phase (r mod sh, c mod sw), at row r / sh and column c / sw. */
static int64_t plane_index(const ca_job *j, int64_t r, int64_t c) {
  return (r % j->s.sh * j->s.sw + c % j->s.sw) * j->phase + r / j->s.sh * j->wp + c / j->s.sw;
}

/* The image rows [ih0, ih1) and columns [iw0, iw1) that land in the padded
 * planes (negative padding drops leading ones). */
static void image_window(const ca_job *j, int64_t *ih0, int64_t *ih1, int64_t *iw0, int64_t *iw1) {
  const rt_image *im = &j->s.img;
  int64_t hmax = j->hp * j->s.sh - j->s.ph, wmax = j->wp * j->s.sw - j->s.pw;
  *ih0 = j->s.ph < 0 ? -j->s.ph : 0;
  *iw0 = j->s.pw < 0 ? -j->s.pw : 0;
  *ih1 = im->h < hmax ? im->h : hmax;
  *iw1 = im->w < wmax ? im->w : wmax;
}

/* d[k] = r0[k step] | r1[k step] << 16 for k < n: one row of a phase
 * plane from two channel rows of unit column stride. */
static void pairs_row(uint32_t *d, const uint16_t *r0, const uint16_t *r1, int64_t n, int64_t step) {
  for (int64_t k = 0; k < n; k++) d[k] = r0[k * step] | (uint32_t)r1[k * step] << 16;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same by 16 words a step (steps 1 and 2; AMX hosts have AVX512-BW):
 * the scalar loop at stride 2 was most of the packing. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pairs_row_avx512(uint32_t *d, const uint16_t *r0,
                                                                         const uint16_t *r1, int64_t n,
                                                                         int64_t step) {
  if (step > 2) {
    pairs_row(d, r0, r1, n, step);
    return;
  }
  const __m512i lo = _mm512_set1_epi32(0xffff);
  for (int64_t k = 0; k < n; k += 16) {
    int64_t m = n - k < 16 ? n - k : 16;
    __m512i v;
    if (step == 1) {
      __mmask16 mk = (__mmask16)((1u << m) - 1);
      __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, r0 + k));
      __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, r1 + k));
      v = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
    } else { /* the even halfwords of 2m - 1 */
      __mmask32 mk = (__mmask32)((m == 16 ? 0xffffffffu : (1u << (2 * m)) - 1) >> 1);
      __m512i a = _mm512_maskz_loadu_epi16(mk, r0 + 2 * k), b = _mm512_maskz_loadu_epi16(mk, r1 + 2 * k);
      v = _mm512_or_si512(_mm512_and_si512(a, lo), _mm512_slli_epi32(b, 16));
    }
    _mm512_mask_storeu_epi32(d + k, (__mmask16)((1u << m) - 1), v);
  }
}
#endif

/* Channels x0, x1 (odd: x0 alone, zeros in the high halves) of the image
 * into plane p (zeroed), row by row, each row dealt to its sw column
 * phases; PAIRS packs a row of unit column stride. One body for both
 * builds below, so the vector one inlines its rows (a call a row of 8 was
 * a sixth of conv3's input gradient). */
#define CA_PACK_PAIR_BODY(PAIRS)                                                                            \
  const rt_image *im = &j->s.img;                                                                         \
  int64_t ih0, ih1, iw0, iw1, sw = j->s.sw;                                                               \
  image_window(j, &ih0, &ih1, &iw0, &iw1);                                                                \
  memset(p, 0, (size_t)j->plane * sizeof *p); /* then filled while in L1 */                               \
  for (int64_t ih = ih0; ih < ih1; ih++)                                                                  \
    for (int64_t b = 0; b < sw && iw0 + b < iw1; b++) { /* column phase of iw0 + b */                     \
      const int64_t len = (iw1 - iw0 - b + sw - 1) / sw, step = sw * im->sw;                              \
      uint32_t *d = p + j->row_at[ih * sw + b];                                                           \
      const uint16_t *r0 = x0 + ih * im->sh + (iw0 + b) * im->sw, *r1 = x1 + ih * im->sh + (iw0 + b) * im->sw; \
      if (odd)                                                                                            \
        for (int64_t x = 0; x < len; x++) d[x] = r0[x * step];                                            \
      else if (im->sw == 1)                                                                               \
        PAIRS(d, r0, r1, len, sw);                                                                        \
      else                                                                                                \
        for (int64_t x = 0; x < len; x++) d[x] = r0[x * step] | (uint32_t)r1[x * step] << 16;             \
    }

static void pack_pair(const ca_job *j, uint32_t *p, const uint16_t *x0, const uint16_t *x1, int odd) {
  CA_PACK_PAIR_BODY(pairs_row)
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pack_pair_avx512(const ca_job *j, uint32_t *p,
                                                                                  const uint16_t *x0,
                                                                                  const uint16_t *x1, int odd) {
  CA_PACK_PAIR_BODY(pairs_row_avx512)
}
#endif

/* Image n of group g into ncb * 16 zero-padded planes of channel pairs. */
static void pack_image(const ca_job *j, int64_t n, int64_t g, uint32_t *planes) {
  const rt_image *im = &j->s.img;
  const uint16_t *base = (const uint16_t *)im->data + n * im->sn + g * j->cg * im->sc;
  void (*pack)(const ca_job *, uint32_t *, const uint16_t *, const uint16_t *, int) = pack_pair;
#if defined(__x86_64__) && defined(__GNUC__)
  if (!j->portable) pack = pack_pair_avx512;
#endif
  for (int64_t c2 = 0; c2 < j->ncb * 16; c2++) {
    uint32_t *p = planes + c2 * j->plane;
    if (2 * c2 >= j->cg)
      memset(p, 0, (size_t)j->plane * sizeof *p);
    else
      pack(j, p, base + 2 * c2 * im->sc, base + (2 * c2 + 1) * im->sc, 2 * c2 + 1 == j->cg);
  }
}

/* ---- the tile loop and its twin --------------------------------------------- */

/* c[32][32] = sum over taps and k blocks of A (weight rows from a) x B
 * (plane words from b at the tap's offset). a steps by a_step words per
 * k block (kgp * 16), taps follow k blocks; b steps 16 planes per k block. */
typedef void (*ca_block_fn)(const ca_job *j, const uint32_t *a, const uint32_t *b, float *c, int narrow);

/* narrow: positions 0-15 only (the image's last 16); the rest of c is
 * left as it was. */
static void block_portable(const ca_job *j, const uint32_t *a, const uint32_t *b, float *c, int narrow) {
  int64_t a_step = j->kgp * 16;
  float acc[CA_MB * CA_NB];
  memset(acc, 0, sizeof acc);
  for (int64_t t = 0; t < j->taps; t++)
    for (int64_t cb = 0; cb < j->ncb; cb++) {
      const uint32_t *at = a + (t * j->ncb + cb) * a_step, *bt = b + cb * 16 * j->plane + j->tap_off[t];
      for (int64_t m = 0; m < CA_MB; m++)
        for (int64_t u = 0; u < (narrow ? 16 : CA_NB); u++) {
          float sum = 0;
          for (int64_t q = 0; q < 16; q++) {
            uint32_t x = at[m * 16 + q], y = bt[q * j->plane + u];
            sum += rt_bfloat16_to_float((uint16_t)x) * rt_bfloat16_to_float((uint16_t)y) +
                   rt_bfloat16_to_float((uint16_t)(x >> 16)) * rt_bfloat16_to_float((uint16_t)(y >> 16));
          }
          acc[m * CA_NB + u] += sum;
        }
    }
  for (int64_t m = 0; m < CA_MB; m++) memcpy(c + m * CA_NB, acc + m * CA_NB, (narrow ? 16 : CA_NB) * sizeof *c);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CA_AMX 1

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} ca_tile_config;

/* GCC's tile intrinsics do not tell the compiler they touch memory. */
#define CA_BARRIER() __asm__ volatile("" ::: "memory")

/* Eight tiles of 16 rows x 64 bytes, loaded once per range of tasks
 * (LDTILECFG waits for the tiles in flight) and released after it. */
__attribute__((target("amx-tile"))) static void tiles_begin(void) {
  ca_tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  CA_BARRIER();
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) static void tiles_end(void) { _tile_release(); }

__attribute__((target("amx-tile,amx-bf16"))) static void block_amx(const ca_job *j, const uint32_t *a,
                                                                 const uint32_t *b, float *c, int narrow) {
  const int64_t a_step = j->kgp * 16, b_stride = j->plane * 4, ncb = j->ncb;
  _tile_zero(0);
  _tile_zero(2);
  if (narrow) {
    for (int64_t t = 0; t < j->taps; t++) {
      const uint32_t *bt = b + j->tap_off[t], *at = a + t * ncb * a_step;
      for (int64_t cb = 0; cb < ncb; cb++, at += a_step, bt += 16 * j->plane) {
        CA_BARRIER();
        _tile_loadd(4, at, 64);
        _tile_loadd(5, at + 16 * 16, 64);
        _tile_loadd(6, bt, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
      }
    }
  } else {
    _tile_zero(1);
    _tile_zero(3);
    for (int64_t t = 0; t < j->taps; t++) {
      const uint32_t *bt = b + j->tap_off[t], *at = a + t * ncb * a_step;
      for (int64_t cb = 0; cb < ncb; cb++, at += a_step, bt += 16 * j->plane) {
        CA_BARRIER();
        _tile_loadd(4, at, 64);
        _tile_loadd(5, at + 16 * 16, 64);
        _tile_loadd(6, bt, b_stride);
        _tile_loadd(7, bt + 16, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    _tile_stored(1, c + 16, CA_NB * 4);
    _tile_stored(3, c + 16 * CA_NB + 16, CA_NB * 4);
  }
  _tile_stored(0, c, CA_NB * 4);
  _tile_stored(2, c + 16 * CA_NB, CA_NB * 4);
  CA_BARRIER();
}
#endif

/* ---- driver ----------------------------------------------------------------- */

#ifdef CA_AMX
/* d[0, n) = s[0, n), n <= 32: one masked store (runs of 8 or 16 values
 * cost more as loops or memcpy calls than the tiles that made them). */
__attribute__((target("avx512f,avx512bw"))) static void copy_run(uint16_t *d, const uint16_t *s, int64_t n) {
  const __mmask32 m = (__mmask32)(n >= 32 ? 0xffffffffu : (1u << n) - 1);
  _mm512_mask_storeu_epi16(d, m, _mm512_maskz_loadu_epi16(m, s));
}

/* d[2 k] = s[k], k < n <= 32, the odd places untouched: a phase of a
 * stride-2 input gradient (two-byte stores a place were a sixth of it). */
__attribute__((target("avx512f,avx512bw"))) static void copy_run2(uint16_t *d, const uint16_t *s, int64_t n) {
  /* Lane 2 k takes value k (set_epi16 lists lanes from the highest). */
  const __m512i spread = _mm512_set_epi16(0, 15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5,
                                          0, 4, 0, 3, 0, 2, 0, 1, 0, 0);
  for (int64_t k = 0; k < n; k += 16) {
    int64_t m = n - k < 16 ? n - k : 16;
    __m512i v = _mm512_maskz_loadu_epi16((__mmask32)((1u << m) - 1), s + k);
    __mmask32 even = (__mmask32)(0x55555555u & (m == 16 ? 0xffffffffu : (1u << (2 * m)) - 1));
    _mm512_mask_storeu_epi16(d + 2 * k, even, _mm512_permutexvar_epi16(spread, v));
  }
}
#endif

#ifdef CA_AMX
/* rows x 32 rounded values r of a block into output rows dense in
 * positions (row stride OW): the block's valid positions are one run of
 * the output, gathered to its front by idx and stored under mask m (one
 * store a row; runs of one output row cost a call each). */
__attribute__((target("avx512f,avx512bw"))) static void store_dense(uint16_t *d, int64_t sc, const uint16_t *r,
                                                                   int64_t rows, const uint16_t *idx,
                                                                   int64_t count) {
  const __m512i ix = _mm512_loadu_si512(idx);
  const __mmask32 m = (__mmask32)(count >= 32 ? 0xffffffffu : (1u << count) - 1);
  for (int64_t i = 0; i < rows; i++)
    _mm512_mask_storeu_epi16(d + i * sc, m, _mm512_permutexvar_epi16(ix, _mm512_loadu_si512(r + i * CA_NB)));
}
#endif

/* Rows [m0, m0 + 32) of block c (positions from p0) into image n's output:
 * valid rows and columns only, plus the bias, rounded once (the whole
 * block at a time by the GEMM's AVX512-BF16 rounding where it applies). */
static void store_block(const ca_job *j, int64_t n, int64_t g, int64_t m0, int64_t p0, float *c) {
  const rt_image *out = &j->s.out;
  int64_t rows = j->kg - m0 < CA_MB ? j->kg - m0 : CA_MB, wp = j->wp;
  uint16_t *base = (uint16_t *)out->data + n * out->sn + (g * j->kg + m0) * out->sc;
  if (j->bias)
    for (int64_t m = 0; m < rows; m++) {
      float b = rt_bfloat16_to_float(((const uint16_t *)j->bias)[(g * j->kg + m0 + m) * j->bias_stride]);
      for (int64_t u = 0; u < CA_NB; u++) c[m * CA_NB + u] += b;
    }
  uint16_t r[CA_MB * CA_NB];
  if (!rt_gemm_flush_bf16_rows(r, CA_NB, c, CA_NB, NULL, 0, 0, rows, CA_NB))
    for (int64_t i = 0; i < rows * CA_NB; i++) r[i] = rt_bfloat16_from_float(c[i]);
#ifdef CA_AMX
  if (!j->portable && out->sw == 1 && out->sh == out->w) {
    uint16_t idx[CA_NB] __attribute__((aligned(64))) = {0};
    int64_t count = 0, first = -1;
    for (int64_t u = 0, oh = p0 / wp, ow = p0 % wp; u < CA_NB && oh < out->h; u++) {
      if (ow < out->w) {
        if (first < 0) first = oh * out->w + ow;
        idx[count++] = (uint16_t)u;
      }
      if (++ow == wp) ow = 0, oh++;
    }
    if (count) store_dense(base + first, out->sc, r, rows, idx, count);
    return;
  }
#endif
  /* By runs of one output row: no division per element. */
  for (int64_t u = 0, oh = p0 / wp, ow = p0 % wp; u < CA_NB && oh < out->h; oh++, ow = 0) {
    int64_t seg = CA_NB - u < wp - ow ? CA_NB - u : wp - ow, valid = out->w - ow;
    if (valid > seg) valid = seg;
    uint16_t *d = base + oh * out->sh + ow * out->sw;
    for (int64_t m = 0; m < rows && valid > 0; m++) {
      const uint16_t *sr = r + m * CA_NB + u;
      uint16_t *dm = d + m * out->sc;
#ifdef CA_AMX
      if (out->sw <= 2 && !j->portable) { /* AMX hosts have AVX512-BW */
        (out->sw == 1 ? copy_run : copy_run2)(dm, sr, valid);
        continue;
      }
#endif
      for (int64_t v = 0; v < valid; v++) dm[v * out->sw] = sr[v];
    }
    u += seg;
  }
}

static void forward_tasks(int64_t begin, int64_t end, void *arg) {
  ca_job *j = arg;
  uint32_t *planes = tile_alloc(j->ncb * 16 * j->plane);
  if (!planes) {
    atomic_store(&j->oom, 1);
    return;
  }
  ca_block_fn block = block_portable;
#ifdef CA_AMX
  if (!j->portable) {
    block = block_amx;
    tiles_begin();
  }
#endif
  /* Zeros first: a narrow block leaves columns 16-31 as they were, and
   * those (positions past the image) are rounded but never stored. */
  float c[CA_MB * CA_NB] __attribute__((aligned(64))) = {0};
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / j->s.groups, g = task % j->s.groups;
    pack_image(j, n, g, planes);
    const uint32_t *wg = j->wpack + g * j->taps * j->ncb * j->kgp * 16;
    for (int64_t p0 = 0; p0 < j->fwd_flat; p0 += CA_NB)
      for (int64_t m0 = 0; m0 < j->kg; m0 += CA_MB) {
        block(j, wg + m0 * 16, planes + p0, c, p0 + CA_NB > j->fwd_flat);
        store_block(j, n, g, m0, p0, c);
      }
  }
#ifdef CA_AMX
  if (!j->portable) tiles_end();
#endif
  free(planes);
}

/* The geometry of s and the taps' flat offsets; -1 when out of memory.
 * Stride sh x sw splits the padded image into sh * sw phase planes of wp x
 * hp: output (oh, ow) meets tap (i, j) at row oh + i dh / sh, column ow +
 * j dw / sw of the phase (i dh mod sh, j dw mod sw), so every tap is again
 * one offset from the output's flat position (oh * wp + ow). */
static int setup(ca_job *j, const rt_conv_shape *s, int portable) {
  memset(j, 0, sizeof *j);
  atomic_init(&j->oom, 0);
  j->s = *s;
  j->portable = portable;
  j->cg = s->img.c / s->groups;
  j->kg = s->out.c / s->groups;
  j->kgp = round_up(j->kg, CA_MB);
  j->ncb = (j->cg + CA_CB - 1) / CA_CB;
  j->cgp = j->ncb * CA_CB;
  j->taps = s->kh * s->kw;
  j->wp = s->out.w + s->dw * (s->kw - 1) / s->sw;
  j->hp = s->out.h + s->dh * (s->kh - 1) / s->sh;
  j->flat = round_up(s->out.h * j->wp, CA_NB);
  j->fwd_flat = round_up(s->out.h * j->wp, 16);
  int64_t reach = (s->kh - 1) * s->dh / s->sh * j->wp + (s->kw - 1) * s->dw / s->sw;
  j->phase = round_up(j->flat + reach, 16);
  if (j->phase < j->hp * j->wp) j->phase = round_up(j->hp * j->wp, 16);
  j->plane = s->sh * s->sw * j->phase;
  j->tap_off = malloc((size_t)j->taps * sizeof *j->tap_off);
  j->row_at = malloc((size_t)(s->img.h * s->sw + 1) * sizeof *j->row_at);
  if (!j->tap_off || !j->row_at) {
    free(j->tap_off), free(j->row_at);
    return -1;
  }
  for (int64_t t = 0; t < j->taps; t++) j->tap_off[t] = plane_index(j, t / s->kw * s->dh, t % s->kw * s->dw);
  int64_t ih0, ih1, iw0, iw1;
  image_window(j, &ih0, &ih1, &iw0, &iw1);
  for (int64_t ih = ih0; ih < ih1; ih++)
    for (int64_t b = 0; b < s->sw && iw0 + b < iw1; b++)
      j->row_at[ih * s->sw + b] = plane_index(j, ih + s->ph, iw0 + b + s->pw);
  return 0;
}

int rt_conv_amx_usable(const rt_conv_shape *s) {
  int64_t cg = s->img.c / s->groups, kg = s->out.c / s->groups;
  /* Padded planes below 2^25 positions: the weight gradient's gathers take
   * 32-bit byte offsets of 16 of them (a bound on every phase's, with the
   * last block's slack). */
  int64_t wp = s->out.w + s->dw * (s->kw - 1) / s->sw + 1, hp = s->out.h + s->dh * (s->kh - 1) / s->sh + 1;
  int64_t padded = s->sh * s->sw * (hp * wp + 2 * CA_NB);
  /* A stride takes the phase planes when every phase has a tap (dilation 1,
   * window at least the stride): else most of them would be dead weight. */
  int strided = s->sh > 1 || s->sw > 1;
  int phases_used = s->dh == 1 && s->dw == 1 && s->kh >= s->sh && s->kw >= s->sw;
  return rt_isa_amx_bf16() && s->sh >= 1 && s->sw >= 1 && (!strided || phases_used) && cg >= 16 &&
         cg * s->kh * s->kw >= 64 && kg >= 1 && padded < (1 << 25);
}

nrt_status rt_conv_amx_forward(const rt_conv_shape *s, const nrt_tensor_view *w, int flipped, const void *bias,
                               int64_t bias_stride, int portable, const char *name) {
#ifndef CA_AMX
  if (!portable) return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: no AMX tiles on this build", name);
#endif
  if (s->sh < 1 || s->sw < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the direct AMX convolution needs a positive stride", name);
  if (s->out.n * s->out.c * s->out.h * s->out.w == 0) return NRT_SUCCESS;
  ca_job j;
  if (setup(&j, s, portable)) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  j.flipped = flipped;
  j.bias = bias;
  j.bias_stride = bias_stride;
  j.wpack = tile_alloc(s->groups * j.taps * j.ncb * j.kgp * 16);
  if (!j.wpack) {
    free(j.tap_off);
    free(j.row_at);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the packed weight", name);
  }
  pack_weight(&j, w);
  /* Work per task: the tile products of one image and group. */
  double work = 2.0 * (double)(j.flat * j.kgp * j.taps * j.ncb * CA_CB);
  rt_parallel_for(s->out.n * s->groups, work >= RT_VISION_GRAIN ? 1 : (int64_t)(RT_VISION_GRAIN / (work + 1)) + 1,
                  forward_tasks, &j);
  free(j.tap_off);
  free(j.row_at);
  free(j.wpack);
  if (atomic_load(&j.oom))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the padded image planes", name);
  return NRT_SUCCESS;
}

/* ---- weight gradient ---------------------------------------------------------- */

/* Channel c of image n, group g, into row: its padded plane (phase
 * planes at stride > 1) of flat positions, zeros outside the image
 * (plane + 2 entries). */
static void padded_channel(const ca_job *j, int64_t n, int64_t g, int64_t c, uint16_t *row) {
  const rt_image *im = &j->s.img;
  const uint16_t *x = (const uint16_t *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
  int64_t ih0, ih1, iw0, iw1, sw = j->s.sw;
  image_window(j, &ih0, &ih1, &iw0, &iw1);
  memset(row, 0, (size_t)(j->plane + 2) * sizeof *row);
  for (int64_t ih = ih0; ih < ih1; ih++) {
    const uint16_t *r = x + ih * im->sh;
    for (int64_t b = 0; b < sw && iw0 + b < iw1; b++) {
      uint16_t *d = row + j->row_at[ih * sw + b];
      if (sw == 1 && im->sw == 1)
        memcpy(d, r + iw0, (size_t)(iw1 - iw0) * sizeof *d);
      else
        for (int64_t iw = iw0 + b; iw < iw1; iw += sw) *d++ = r[iw * im->sw];
    }
  }
}

/* Stage 1, tasks (image of the chunk, group): grad_output as A rows and the
 * image as B rows of position pairs (see conv_amx.h). */
/* Words p < half of 16 padded channel rows (rl entries each, from rows)
 * into B rows of position pairs: xe[p][c] = (row_c[2p], row_c[2p + 1]),
 * xo[p][c] = (row_c[2p + 1], row_c[2p + 2]), row stride cgp words. */
static void transpose_pairs(const uint16_t *rows, int64_t rl, int64_t half, uint32_t *xe, uint32_t *xo,
                            int64_t cgp) {
  for (int64_t p = 0; p < half; p++)
    for (int c = 0; c < 16; c++) {
      const uint16_t *r = rows + c * rl + 2 * p;
      xe[p * cgp + c] = r[0] | (uint32_t)r[1] << 16;
      xo[p * cgp + c] = r[1] | (uint32_t)r[2] << 16;
    }
}

#ifdef CA_AMX
/* The same by one 16-lane gather per B row (the scalar loop's strided
 * stores were most of the weight gradient's packing). */
__attribute__((target("avx512f"))) static void transpose_pairs_avx512(const uint16_t *rows, int64_t rl,
                                                                      int64_t half, uint32_t *xe, uint32_t *xo,
                                                                      int64_t cgp) {
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32((int)(rl * 2)));
  const char *base = (const char *)rows;
  for (int64_t p = 0; p < half; p++) {
    _mm512_storeu_si512(xe + p * cgp, _mm512_i32gather_epi32(at, base + 4 * p, 1));
    _mm512_storeu_si512(xo + p * cgp, _mm512_i32gather_epi32(at, base + 4 * p + 2, 1));
  }
}
#endif

static void wgrad_pack(int64_t begin, int64_t end, void *arg) {
  ca_job *j = arg;
  const int64_t rl = j->plane + 2, half = j->plane / 2;
  uint16_t *rows = malloc((size_t)(16 * rl) * sizeof *rows);
  if (!rows) {
    atomic_store(&j->oom, 1);
    return;
  }
  void (*transpose)(const uint16_t *, int64_t, int64_t, uint32_t *, uint32_t *, int64_t) = transpose_pairs;
#ifdef CA_AMX
  if (!j->portable && rt_isa() >= NRT_ISA_AVX512) transpose = transpose_pairs_avx512;
#endif
  const rt_image *out = &j->s.out;
  for (int64_t task = begin; task < end; task++) {
    int64_t nl = task / j->s.groups, g = task % j->s.groups, n = j->n0 + nl;
    uint16_t *gq = (uint16_t *)(j->gq + task * j->gq_img);
    memset(gq, 0, (size_t)j->gq_img * sizeof *j->gq);
    const uint16_t *o = (const uint16_t *)out->data + n * out->sn + g * j->kg * out->sc;
    for (int64_t k = 0; k < j->kg; k++)
      for (int64_t oh = 0; oh < out->h; oh++) {
        uint16_t *d = gq + k * j->flat + oh * j->wp;
        const uint16_t *r = o + k * out->sc + oh * out->sh;
        if (out->sw == 1) /* a copy, not a loop the compiler keeps scalar for the stride */
          memcpy(d, r, (size_t)out->w * sizeof *d);
        else
          for (int64_t ow = 0; ow < out->w; ow++) d[ow] = r[ow * out->sw];
      }
    uint32_t *xe = j->xq + task * j->xq_img, *xo = xe + half * j->cgp;
    for (int64_t c0 = 0; c0 < j->cgp; c0 += 16) {
      for (int64_t c = 0; c < 16; c++) {
        if (c0 + c < j->cg)
          padded_channel(j, n, g, c0 + c, rows + c * rl);
        else
          memset(rows + c * rl, 0, (size_t)rl * sizeof *rows);
      }
      transpose(rows, rl, half, xe + c0, xo + c0, j->cgp);
    }
  }
  free(rows);
}

/* Tap t's 32 x 32 block (output rows from o0, channels from c0) of group g
 * += the products of every flat position of every image of the chunk; c
 * holds the running sums (ignored when first). One call a tap and chunk:
 * the sums stay in tiles over all its images (storing and reloading them
 * per image and pass of positions cost the short images much of the tile
 * loop). */
typedef void (*ca_wblock_fn)(const ca_job *j, int64_t g, int64_t o0, int64_t c0, int64_t t, float *c, int first);

/* B rows of position pairs from flat position p0 + off of a packed image. */
static const uint32_t *pairs_at(const ca_job *j, const uint32_t *xe, int64_t s, int64_t c0) {
  const uint32_t *base = s & 1 ? xe + j->plane / 2 * j->cgp : xe;
  return base + (s >> 1) * j->cgp + c0;
}

static void wblock_portable(const ca_job *j, int64_t g, int64_t o0, int64_t c0, int64_t t, float *c, int first) {
  float acc[CA_MB * CA_MB];
  if (first)
    memset(acc, 0, sizeof acc);
  else
    memcpy(acc, c, sizeof acc);
  const int64_t half = j->flat / 2;
  for (int64_t nl = 0; nl < j->count; nl++) {
    int64_t task = nl * j->s.groups + g;
    const uint32_t *a = j->gq + task * j->gq_img + o0 * half, *xe = j->xq + task * j->xq_img;
    for (int64_t p0 = 0; p0 < j->flat; p0 += CA_NB) {
      const uint32_t *b = pairs_at(j, xe, p0 + j->tap_off[t], c0);
      for (int64_t m = 0; m < CA_MB; m++)
        for (int64_t u = 0; u < CA_MB; u++) {
          float sum = 0;
          for (int64_t q = 0; q < 16; q++) {
            uint32_t x = a[m * half + p0 / 2 + q], y = b[q * j->cgp + u];
            sum += rt_bfloat16_to_float((uint16_t)x) * rt_bfloat16_to_float((uint16_t)y) +
                   rt_bfloat16_to_float((uint16_t)(x >> 16)) * rt_bfloat16_to_float((uint16_t)(y >> 16));
          }
          acc[m * CA_MB + u] += sum;
        }
    }
  }
  memcpy(c, acc, sizeof acc);
}

#ifdef CA_AMX
__attribute__((target("amx-tile,amx-bf16"))) static void wblock_amx(const ca_job *j, int64_t g, int64_t o0,
                                                                  int64_t c0, int64_t t, float *c, int first) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    CA_BARRIER();
    _tile_loadd(0, c, CA_MB * 4);
    _tile_loadd(1, c + 16, CA_MB * 4);
    _tile_loadd(2, c + 16 * CA_MB, CA_MB * 4);
    _tile_loadd(3, c + 16 * CA_MB + 16, CA_MB * 4);
  }
  const int64_t half = j->flat / 2, a_stride = j->flat * 2, b_stride = j->cgp * 4;
  for (int64_t nl = 0; nl < j->count; nl++) {
    int64_t task = nl * j->s.groups + g;
    const uint32_t *a = j->gq + task * j->gq_img + o0 * half, *xe = j->xq + task * j->xq_img;
    for (int64_t p0 = 0; p0 < j->flat; p0 += CA_NB) {
      const uint32_t *b = pairs_at(j, xe, p0 + j->tap_off[t], c0);
      CA_BARRIER();
      _tile_loadd(4, a + p0 / 2, a_stride);
      _tile_loadd(5, a + 16 * half + p0 / 2, a_stride);
      _tile_loadd(6, b, b_stride);
      _tile_loadd(7, b + 16, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, CA_MB * 4);
  _tile_stored(1, c + 16, CA_MB * 4);
  _tile_stored(2, c + 16 * CA_MB, CA_MB * 4);
  _tile_stored(3, c + 16 * CA_MB + 16, CA_MB * 4);
  CA_BARRIER();
}
#endif

/* Taps [t0, t1) of C block cblock (group g, output and input channels
 * from o0 and c0), summed over every image, rounded into the weight
 * gradient by the task that summed them, while they are in its cache. */
static void store_wgrad(const ca_job *j, int64_t cblock, int64_t g, int64_t o0, int64_t c0, int64_t t0, int64_t t1) {
  const int64_t *st = j->dw->strides, rows = j->kg - o0 < CA_MB ? j->kg - o0 : CA_MB;
  const int64_t cols = j->cg - c0 < CA_CB ? j->cg - c0 : CA_CB;
  uint16_t r[CA_MB * CA_CB];
  for (int64_t t = t0; t < t1; t++) {
    const float *a = j->acc + (cblock * j->taps + t) * CA_MB * CA_MB;
    if (j->portable || !rt_gemm_flush_bf16_rows(r, CA_CB, a, CA_MB, NULL, 0, 0, rows, CA_CB))
      for (int64_t i = 0; i < rows * CA_CB; i++) r[i] = rt_bfloat16_from_float(a[i]);
    uint16_t *d = (uint16_t *)j->dw->data + (g * j->kg + o0) * st[0] + c0 * st[1] + t / j->s.kw * st[2] +
                  t % j->s.kw * st[3];
    for (int64_t o = 0; o < rows; o++)
      for (int64_t c = 0; c < cols; c++) d[o * st[0] + c * st[1]] = r[o * CA_CB + c];
  }
}

/* Stage 2, tasks (group, output block, channel block, run of taps): each
 * tap's block over the chunk's images and their positions, in order; the
 * last chunk's tasks round their blocks into the weight gradient. */
static void wgrad_products(int64_t begin, int64_t end, void *arg) {
  ca_job *j = arg;
  ca_wblock_fn block = wblock_portable;
#ifdef CA_AMX
  if (!j->portable) {
    block = wblock_amx;
    tiles_begin();
  }
#endif
  int64_t nob = j->kgp / CA_MB;
  for (int64_t task = begin; task < end; task++) {
    int64_t cblock = task / j->tap_parts, part = task % j->tap_parts;
    int64_t g = cblock / (nob * j->ncb), o0 = cblock / j->ncb % nob * CA_MB, c0 = cblock % j->ncb * CA_CB;
    int64_t t0 = part * j->taps / j->tap_parts, t1 = (part + 1) * j->taps / j->tap_parts;
    for (int64_t t = t0; t < t1; t++)
      block(j, g, o0, c0, t, j->acc + (cblock * j->taps + t) * CA_MB * CA_MB, !j->started);
    if (j->last) store_wgrad(j, cblock, g, o0, c0, t0, t1);
  }
#ifdef CA_AMX
  if (!j->portable) tiles_end();
#endif
}

/* Bytes a product task reads of one chunk of images (its 32 rows of
 * grad_output and 32 channels of image pairs): sets how many images are
 * packed per stage. */
#define CA_CHUNK_BYTES (1 << 19)
/* Product tasks wanted at least (several threads' worth). */
#define CA_WG_TASKS 8

nrt_status rt_conv_amx_weight_grad(const rt_conv_shape *s, const nrt_tensor_view *w, int portable,
                                   const char *name) {
#ifndef CA_AMX
  if (!portable) return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: no AMX tiles on this build", name);
#endif
  if (s->sh < 1 || s->sw < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the direct AMX convolution needs a positive stride", name);
  if (w->shape[0] * w->shape[1] * w->shape[2] * w->shape[3] == 0) return NRT_SUCCESS;
  ca_job j;
  if (setup(&j, s, portable)) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  int64_t nob = j.kgp / CA_MB, cblocks = s->groups * nob * j.ncb;
  /* Few C blocks (32 channels in and out: one) split their taps into runs,
   * for work on every thread; by the shape only, so each element is still
   * summed by one task in one order. */
  j.tap_parts = cblocks >= CA_WG_TASKS ? 1 : (CA_WG_TASKS + cblocks - 1) / cblocks;
  if (j.tap_parts > j.taps) j.tap_parts = j.taps;
  int64_t tasks = cblocks * j.tap_parts;
  j.gq_img = j.kgp * j.flat / 2;
  j.xq_img = j.plane * j.cgp;
  int64_t per_task = (CA_MB * j.flat / 2 + j.plane * CA_CB) * 4;
  j.chunk = CA_CHUNK_BYTES / per_task;
  if (j.chunk < 1) j.chunk = 1;
  if (j.chunk > s->img.n) j.chunk = s->img.n > 0 ? s->img.n : 1;
  j.dw = w;
  /* No zeros needed: the first chunk's products start the sums. */
  j.acc = tile_alloc(cblocks * j.taps * CA_MB * CA_MB);
  j.gq = tile_alloc(j.chunk * s->groups * j.gq_img);
  j.xq = tile_alloc(j.chunk * s->groups * j.xq_img);
  nrt_status status = NRT_SUCCESS;
  if (!j.acc || !j.gq || !j.xq) {
    status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the packed operands", name);
    goto done;
  }
  double work = 2.0 * (double)(CA_MB * CA_CB * j.flat * j.taps) / (double)j.tap_parts;
  if (s->img.n == 0) /* no images: no task writes the (zero) gradient */
    for (int64_t a = 0; a < w->shape[0]; a++)
      for (int64_t b = 0; b < w->shape[1]; b++)
        for (int64_t t = 0; t < j.taps; t++)
          ((uint16_t *)w->data)[a * w->strides[0] + b * w->strides[1] + t / s->kw * w->strides[2] +
                                t % s->kw * w->strides[3]] = 0;
  for (j.n0 = 0; j.n0 < s->img.n && !atomic_load(&j.oom); j.n0 += j.chunk) {
    j.count = s->img.n - j.n0 < j.chunk ? s->img.n - j.n0 : j.chunk;
    j.last = j.n0 + j.count >= s->img.n;
    rt_parallel_for(j.count * s->groups, 1, wgrad_pack, &j);
    if (atomic_load(&j.oom)) break;
    rt_parallel_for(tasks, work * (double)j.count >= RT_VISION_GRAIN ? 1 : 4, wgrad_products, &j);
    j.started = 1;
  }
  if (atomic_load(&j.oom)) {
    status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a padded image row", name);
    goto done;
  }
done:
  free(j.tap_off);
  free(j.row_at);
  free(j.acc);
  free(j.gq);
  free(j.xq);
  return status;
}
