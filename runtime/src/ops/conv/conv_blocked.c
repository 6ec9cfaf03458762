/* Blocked convolution (see conv_blocked.h).
 *
 * Forward: tasks (image, group, block of up to NB_MAX output positions).
 * The weight is packed once per call into row panels (12 output channels,
 * the last panel 4 or 8) for each k block of taps. A task walks its k
 * blocks; for each column panel of 32 positions it gathers the window
 * values of the block's taps straight into a B panel (one short copy per
 * tap and output row: no im2col matrix), then runs every row panel's tile
 * against it, accumulating into the output (float32 with unit-stride
 * positions) or a float32 buffer converted at the end.
 *
 * Weight gradient: the transposed product W'^T[r, o] = sum col[r, q] *
 * O[o, q], rows r = taps (panels of 12), columns o = output channels
 * (panels of 32), k = positions of every image. Tasks (part of the batch,
 * group, block of taps) pack grad_output's positions as B panels and each
 * tap panel's window values as an A panel per block of positions, and add
 * into a private float32 accumulator; the parts are summed in order.
 */
#include "ops/conv/conv_blocked.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/conv/conv_ukernels.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"

#define KC_MAX 320         /* taps per forward k block (B panel of 32 positions in L1) */
#define NB_MAX 256         /* output positions per forward task */
#define WG_KC 256          /* positions per weight-gradient k block */
#define WG_PARTS 8         /* batch parts of the weight gradient */
#define WG_ACC_BUDGET (1 << 22) /* floats of all accumulators */
#define WG_FEW_PARTS_FROM (1 << 15) /* accumulator floats from which half the parts are used */
#define WG_TASK_ACC (1 << 17)   /* floats of one task's accumulator (in L2) */

typedef struct cb_job {
  rt_conv_shape s;
  int bf16, flipped;
  const rt_conv_ukernels *uk;
  int64_t cg, kg, kk, ohw;
  int64_t kgp;            /* kg rounded up to 4: rows of the packed weight */
  int64_t kc, kblocks;    /* forward k blocks of taps (kc even) */
  int64_t nb, pblocks;    /* forward positions per task, tasks per image and group */
  int direct;             /* forward output is float32 with unit-stride positions: written in place */
  int fast_gather;        /* AVX-512 gathering plans (masked loads; float32 gathers when step != 1) */
  int64_t step;           /* elements between the inputs of neighbouring output positions in a row */
  int avx512;             /* AVX-512 (with BW) transposes */
  void *wpack;
  const void *bias;
  int64_t bias_stride;
  int64_t kkp, kg32;      /* weight gradient: taps rounded to 4, channels rounded to 32 */
  int64_t mb, mblocks, parts;
  float *acc;
  const nrt_tensor_view *wout; /* weight gradient */
  const nrt_tensor_view *wsrc; /* forward weight */
  atomic_int oom;
} cb_job;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Height of the row panel starting at row r0 of rows: 12, or the rest
 * rounded up to 4. */
static int panel_mr(int64_t rows, int64_t r0) {
  int64_t rem = rows - r0;
  return rem >= CONV_MR ? CONV_MR : (int)round_up(rem, 4);
}

/* Positions u in [0, count) with 0 <= start + u * step < size: [u0, u1). */
static void valid_range(int64_t start, int64_t step, int64_t size, int64_t count, int64_t *u0, int64_t *u1) {
  int64_t lo = start >= 0 ? 0 : (-start + step - 1) / step;
  int64_t hi = start >= size ? 0 : (size - start + step - 1) / step;
  *u0 = lo < count ? lo : count;
  *u1 = hi < count ? hi : count;
  if (*u1 < *u0) *u1 = *u0;
}

static inline uint16_t bf16_bits(float f) { return rt_bfloat16_from_float(f); }

/* ---- gathering window values ---------------------------------------------------- */

/* Image n's plane of channel c of group g (as bytes). */
static const char *plane_of(const cb_job *j, int64_t n, int64_t g, int64_t c, size_t esize) {
  const rt_image *im = &j->s.img;
  return im->data + (size_t)(n * im->sn + (g * j->cg + c) * im->sc) * esize;
}

/* dst[t], t < len: the value that tap (i, jj) of plane (image n, channel c)
 * meets at output position q + t (0 in the padding). Defined for float and
 * bfloat16 bits. */
#define DEFINE_GATHER(NAME, T)                                                                              \
  static void NAME(const cb_job *j, const T *plane, int64_t i, int64_t jj, int64_t q, int64_t len, T *dst) { \
    const rt_image *im = &j->s.img;                                                                        \
    int64_t OW = j->s.out.w, oh = q / OW, ow = q % OW;                                                     \
    for (int64_t t = 0; t < len; oh++, ow = 0) {                                                           \
      int64_t seg = len - t < OW - ow ? len - t : OW - ow;                                                 \
      int64_t ih = oh * j->s.sh - j->s.ph + i * j->s.dh;                                                   \
      T *d = dst + t;                                                                                      \
      t += seg;                                                                                            \
      if (ih < 0 || ih >= im->h) {                                                                         \
        memset(d, 0, (size_t)seg * sizeof(T));                                                             \
        continue;                                                                                          \
      }                                                                                                    \
      int64_t u0, u1, iw0 = ow * j->s.sw - j->s.pw + jj * j->s.dw;                                         \
      valid_range(iw0, j->s.sw, im->w, seg, &u0, &u1);                                                     \
      if (u0 > 0) memset(d, 0, (size_t)u0 * sizeof(T));                                                    \
      const T *row = plane + ih * im->sh + (iw0 + u0 * j->s.sw) * im->sw;                                  \
      int64_t step = j->s.sw * im->sw;                                                                     \
      if (step == 1)                                                                                       \
        memcpy(d + u0, row, (size_t)(u1 - u0) * sizeof(T));                                                \
      else                                                                                                 \
        for (int64_t u = 0; u < u1 - u0; u++) d[u0 + u] = row[u * step];                                   \
      if (u1 < seg) memset(d + u1, 0, (size_t)(seg - u1) * sizeof(T));                                     \
    }                                                                                                      \
  }
DEFINE_GATHER(gather_f32, float)
DEFINE_GATHER(gather_u16, uint16_t)

/* A gathering plan for a run of output positions [q, q + len): for each of
 * the kh * kw window offsets (i, jj) and each destination vector (V lanes),
 * `slots` masked loads from a plane. Chunks lie in one output row and one
 * vector; lanes outside the image are masked off (0), unused slots have an
 * empty mask. The plan is the same for every channel, so it is worked out
 * once per run and replayed per tap, with a fixed number of loads per
 * vector (no data-dependent branches). A load is a masked vector load when
 * neighbouring output positions read neighbouring elements (step 1), else
 * (float32 only) a masked gather at multiples of the step. */
typedef struct cb_load {
  int64_t off; /* bytes from the plane; may point before it (masked lanes are never read) */
  uint32_t mask;
} cb_load;

typedef struct cb_plan {
  int64_t q, len, vlen; /* run; elements written per tap (whole vectors, zeros beyond len) */
  int64_t nv, slots;    /* vectors per run, loads per vector */
  cb_load *loads;       /* [offset][vector][slot] */
} cb_plan;

static int plan_alloc(const cb_job *j, cb_plan *pl, int64_t maxvlen) {
  int64_t khw = j->s.kh * j->s.kw, V = j->bf16 ? 32 : 16;
  int64_t slots = min64(V, ceil_div(V, j->s.out.w) + 1);
  pl->loads = j->fast_gather ? malloc((size_t)(khw * ceil_div(maxvlen, V) * slots) * sizeof *pl->loads) : NULL;
  return pl->loads || !j->fast_gather ? 0 : -1;
}

static void plan_free(cb_plan *pl) { free(pl->loads); }

static void plan_build(const cb_job *j, cb_plan *pl, int64_t q, int64_t len, int64_t vlen) {
  pl->q = q, pl->len = len, pl->vlen = vlen;
  if (!j->fast_gather) return;
  const rt_image *im = &j->s.img;
  int64_t OW = j->s.out.w, V = j->bf16 ? 32 : 16, es = j->bf16 ? 2 : 4, khw = j->s.kh * j->s.kw;
  pl->nv = vlen / V;
  /* Slots: the most row pieces any vector of this run has (the chunks do
   * not depend on the window offset). */
  pl->slots = 1;
  for (int64_t t = 0, ow = q % OW, pieces = 0; t < len;) {
    int64_t seg = min64(min64(len - t, OW - ow), V - t % V);
    pieces = t % V == 0 ? 1 : pieces + 1;
    if (pieces > pl->slots) pl->slots = pieces;
    t += seg;
    ow = (ow + seg) % OW;
  }
  memset(pl->loads, 0, (size_t)(khw * pl->nv * pl->slots) * sizeof *pl->loads);
  for (int64_t o = 0; o < khw; o++) {
    int64_t di = o / j->s.kw * j->s.dh - j->s.ph, dj = o % j->s.kw * j->s.dw - j->s.pw;
    int64_t oh = q / OW, ow = q % OW, used = 0, vprev = 0;
    for (int64_t t = 0; t < len;) {
      int64_t seg = min64(min64(len - t, OW - ow), V - t % V);
      int64_t ih = oh * j->s.sh + di, iw0 = ow * j->s.sw + dj, v = t / V, u0, u1;
      valid_range(iw0, j->s.sw, im->w, seg, &u0, &u1);
      if (v != vprev) used = 0, vprev = v;
      if (ih >= 0 && ih < im->h && u1 > u0) {
        int64_t lane0 = t % V;
        pl->loads[(o * pl->nv + v) * pl->slots + used++] = (cb_load){
            (ih * im->sh + (iw0 - lane0 * j->s.sw) * im->sw) * es, (uint32_t)(((1ull << (u1 - u0)) - 1) << (lane0 + u0))};
      }
      t += seg;
      ow += seg;
      if (ow == OW) ow = 0, oh++;
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CB_X86 1

#define AT_(plane, e) ((const void *)((uintptr_t)(plane) + (uintptr_t)(e)->off))

/* Vector v of offset o's run: independent zero-masked loads (disjoint
 * lanes) combined by OR, so no load waits for another. */
__attribute__((target("avx512f"))) static inline __m512 replay_vec_f32(const cb_load *e, int64_t slots,
                                                                       const char *plane) {
  __m512i acc = _mm512_castps_si512(_mm512_maskz_loadu_ps((__mmask16)e->mask, AT_(plane, e)));
  for (int64_t s = 1; s < slots; s++)
    acc = _mm512_or_si512(acc, _mm512_castps_si512(_mm512_maskz_loadu_ps((__mmask16)e[s].mask, AT_(plane, e + s))));
  return _mm512_castsi512_ps(acc);
}

/* The same for a row step != 1: gathers at lane * step from each load's
 * lane-0 address (masked lanes are not read). */
__attribute__((target("avx512f"))) static inline __m512 replay_vec_f32_step(const cb_load *e, int64_t slots,
                                                                            const char *plane, __m512i idx) {
  __m512 acc = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), (__mmask16)e->mask, idx, AT_(plane, e), 4);
  for (int64_t s = 1; s < slots; s++)
    acc = _mm512_mask_i32gather_ps(acc, (__mmask16)e[s].mask, idx, AT_(plane, e + s), 4);
  return acc;
}

__attribute__((target("avx512f"))) static inline __m512i lane_steps(int64_t step) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32((int)step));
}

__attribute__((target("avx512f,avx512bw"))) static inline __m512i replay_vec_u16(const cb_load *e, int64_t slots,
                                                                                 const char *plane) {
  __m512i acc = _mm512_maskz_loadu_epi16((__mmask32)e->mask, AT_(plane, e));
  for (int64_t s = 1; s < slots; s++)
    acc = _mm512_or_si512(acc, _mm512_maskz_loadu_epi16((__mmask32)e[s].mask, AT_(plane, e + s)));
  return acc;
}

/* bfloat16 with a row step of 2 (stride 2): lane L reads element 2L from
 * the load's lane-0 address; each load covers 64 elements as two masked
 * 32-lane loads (mask bits spread to the even elements) and keeps the even
 * ones with one two-source permute. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static inline __m512i replay_vec_u16_step2(const cb_load *e,
                                                                                           int64_t slots,
                                                                                           const char *plane,
                                                                                           __m512i even) {
  __m512i acc = _mm512_setzero_si512();
  for (int64_t s = 0; s < slots; s++) {
    uint64_t m = _pdep_u64(e[s].mask, 0x5555555555555555ull);
    const char *at = AT_(plane, e + s);
    __m512i a = _mm512_maskz_loadu_epi16((__mmask32)m, at), b = _mm512_maskz_loadu_epi16((__mmask32)(m >> 32), at + 64);
    acc = _mm512_or_si512(acc, _mm512_permutex2var_epi16(a, even, b));
  }
  return acc;
}

__attribute__((target("avx512f,avx512bw"))) static inline __m512i even_lanes(void) {
  uint16_t idx[32];
  for (int t = 0; t < 32; t++) idx[t] = (uint16_t)(2 * t);
  return _mm512_loadu_si512(idx);
}

/* A B panel (32 positions per tap, float32) of taps [k0, k0 + kcur) from
 * the planes of one image and group (channel c at plane0 + c * csize). */
__attribute__((target("avx512f"))) static void fill_panel_f32(const cb_job *j, const cb_plan *pl, const char *plane0,
                                                              int64_t csize, int64_t k0, int64_t kcur, float *b) {
  int64_t khw = j->s.kh * j->s.kw, o = k0 % khw, slots = pl->slots;
  const char *plane = plane0 + k0 / khw * csize;
  const cb_load *loads = pl->loads;
  if (j->step != 1) {
    __m512i idx = lane_steps(j->step);
    for (int64_t p = 0; p < kcur; p++) {
      const cb_load *e = loads + o * 2 * slots;
      _mm512_storeu_ps(b + p * CONV_NR, replay_vec_f32_step(e, slots, plane, idx));
      _mm512_storeu_ps(b + p * CONV_NR + 16, replay_vec_f32_step(e + slots, slots, plane, idx));
      if (++o == khw) o = 0, plane += csize;
    }
    return;
  }
  for (int64_t p = 0; p < kcur; p++) {
    const cb_load *e = loads + o * 2 * slots;
    __m512 v0 = replay_vec_f32(e, slots, plane), v1 = replay_vec_f32(e + slots, slots, plane);
    _mm512_storeu_ps(b + p * CONV_NR, v0);
    _mm512_storeu_ps(b + p * CONV_NR + 16, v1);
    if (++o == khw) o = 0, plane += csize;
  }
}

/* The bfloat16 B panel: pairs of taps interleaved into 32-bit words. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static void fill_panel_bf16(const cb_job *j, const cb_plan *pl,
                                                                        const char *plane0, int64_t csize,
                                                                        int64_t k0, int64_t kcur, uint32_t *b) {
  int64_t khw = j->s.kh * j->s.kw, o = k0 % khw, slots = pl->slots;
  const char *plane = plane0 + k0 / khw * csize;
  const cb_load *loads = pl->loads;
  uint16_t i0[32], i1[32];
  for (int t = 0; t < 16; t++) i0[2 * t] = (uint16_t)t, i0[2 * t + 1] = (uint16_t)(32 + t);
  for (int t = 0; t < 16; t++) i1[2 * t] = (uint16_t)(16 + t), i1[2 * t + 1] = (uint16_t)(48 + t);
  __m512i idx0 = _mm512_loadu_si512(i0), idx1 = _mm512_loadu_si512(i1), even = even_lanes();
  for (int64_t p = 0; p < kcur; p += 2) {
    __m512i lo = j->step == 2 ? replay_vec_u16_step2(loads + o * slots, slots, plane, even)
                              : replay_vec_u16(loads + o * slots, slots, plane);
    __m512i hi = _mm512_setzero_si512();
    if (++o == khw) o = 0, plane += csize;
    if (p + 1 < kcur) {
      hi = j->step == 2 ? replay_vec_u16_step2(loads + o * slots, slots, plane, even)
                        : replay_vec_u16(loads + o * slots, slots, plane);
      if (++o == khw) o = 0, plane += csize;
    }
    _mm512_storeu_si512(b + p / 2 * CONV_NR, _mm512_permutex2var_epi16(lo, idx0, hi));
    _mm512_storeu_si512(b + p / 2 * CONV_NR + 16, _mm512_permutex2var_epi16(lo, idx1, hi));
  }
}

/* The whole run of offset o (pl->vlen elements). */
__attribute__((target("avx512f,avx512bw,bmi2"))) static void replay_run(const cb_job *j, const cb_plan *pl,
                                                                   const char *plane, int64_t o, void *dst) {
  int64_t nv = pl->nv, slots = pl->slots;
  const cb_load *e = pl->loads + o * nv * slots;
  for (int64_t v = 0; v < nv; v++, e += slots) {
    if (j->bf16)
      _mm512_storeu_si512((uint16_t *)dst + 32 * v, j->step == 2 ? replay_vec_u16_step2(e, slots, plane, even_lanes())
                                                                   : replay_vec_u16(e, slots, plane));
    else if (j->step != 1)
      _mm512_storeu_ps((float *)dst + 16 * v, replay_vec_f32_step(e, slots, plane, lane_steps(j->step)));
    else
      _mm512_storeu_ps((float *)dst + 16 * v, replay_vec_f32(e, slots, plane));
  }
}

/* dst[k*32 + i] = word k of row i (rows row_bytes apart), i, k < 16: the
 * standard unpack / shuffle transpose of 32-bit words. */
__attribute__((target("avx512f"))) static void transpose16(const char *src, int64_t row_bytes, uint32_t *dst) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(src + i * row_bytes);
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      t[8 * i + k] = _mm512_shuffle_i32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
      t[8 * i + k + 4] = _mm512_shuffle_i32x4(r[8 * i + k], r[8 * i + 4 + k], 0xDD);
    }
  for (int k = 0; k < 8; k++) {
    _mm512_storeu_si512(dst + k * 32, _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88));
    _mm512_storeu_si512(dst + (k + 8) * 32, _mm512_shuffle_i32x4(t[k], t[8 + k], 0xDD));
  }
}

/* AVX-512 F and BW, and BMI2 (x86-64-v3 has it, so v4 too). */
static int have_avx512bw(void) { return rt_isa() >= NRT_ISA_AVX512; }
#endif

/* The run of window offset o of a plane into dst (pl->vlen elements). */
static void plan_run(const cb_job *j, const cb_plan *pl, const char *plane, int64_t o, void *dst) {
#ifdef CB_X86
  if (j->fast_gather) {
    replay_run(j, pl, plane, o, dst);
    return;
  }
#endif
  int64_t i = o / j->s.kw, jj = o % j->s.kw;
  size_t es = j->bf16 ? 2 : 4;
  if (j->bf16)
    gather_u16(j, (const uint16_t *)plane, i, jj, pl->q, pl->len, dst);
  else
    gather_f32(j, (const float *)plane, i, jj, pl->q, pl->len, dst);
  memset((char *)dst + (size_t)pl->len * es, 0, (size_t)(pl->vlen - pl->len) * es);
}

/* ---- vectorised rows ------------------------------------------------------------------ */

RT_SIMD_VOID(interleave_pairs, (uint32_t *d, const uint16_t *lo, const uint16_t *hi, int64_t n),
                               (d, lo, hi, n)) {
  for (int64_t t = 0; t < n; t++) d[t] = lo[t] | (uint32_t)hi[t] << 16;
}

RT_SIMD_VOID(store_row_bf16, (uint16_t *d, int64_t ds, const float *src, float bias, int64_t n),
                             (d, ds, src, bias, n)) {
  if (ds == 1)
    for (int64_t u = 0; u < n; u++) d[u] = bf16_bits(src[u] + bias);
  else
    for (int64_t u = 0; u < n; u++) d[u * ds] = bf16_bits(src[u] + bias);
}

RT_SIMD_VOID(store_row_f32, (float *d, int64_t ds, const float *src, float bias, int64_t n),
                            (d, ds, src, bias, n)) {
  if (ds == 1)
    for (int64_t u = 0; u < n; u++) d[u] = src[u] + bias;
  else
    for (int64_t u = 0; u < n; u++) d[u * ds] = src[u] + bias;
}

/* ---- forward ---------------------------------------------------------------------- */

/* Offset (elements: floats, or 32-bit pairs for bfloat16) of the packed
 * weight panel (group g, k block kb, rows from o0). */
static int64_t wpack_offset(const cb_job *j, int64_t g, int64_t kb, int64_t o0) {
  int64_t div = j->bf16 ? 2 : 1, k0 = kb * j->kc, kcur = min64(j->kc, j->kk - k0);
  return g * j->kgp * ceil_div(j->kk, div) + k0 / div * j->kgp + o0 * ceil_div(kcur, div);
}

/* Packs weight rows (group, output row) [begin, end) into row panels per
 * k block (flipped: read as the input gradient's forward weight); rows
 * beyond kg stay 0 (calloc). */
static void pack_weight_rows(int64_t begin, int64_t end, void *arg) {
  cb_job *j = arg;
  const nrt_tensor_view *w = j->wsrc;
  const int64_t *st = w->strides;
  int64_t kh = j->s.kh, kw = j->s.kw;
  /* Strides of (row o, channel c, tap i, tap jj) and the first tap. */
  int64_t s_o = j->flipped ? st[1] : st[0], s_c = j->flipped ? st[0] : st[1];
  int64_t s_i = j->flipped ? -st[2] : st[2], s_j = j->flipped ? -st[3] : st[3];
  int64_t first = j->flipped ? (kh - 1) * st[2] + (kw - 1) * st[3] : 0;
  for (int64_t row = begin; row < end; row++) {
    int64_t g = row / j->kg, o = row % j->kg;
    int64_t o0 = o / CONV_MR * CONV_MR, mr = panel_mr(j->kg, o0), io = o - o0;
    int64_t base = first + g * (j->flipped ? j->cg : j->kg) * st[0] + o * s_o;
    int64_t kb = 0, p = 0, at = wpack_offset(j, g, 0, o0);
    for (int64_t c = 0; c < j->cg; c++)
      for (int64_t i = 0; i < kh; i++)
        for (int64_t jj = 0; jj < kw; jj++) {
          int64_t src = base + c * s_c + i * s_i + jj * s_j;
          if (j->bf16)
            ((uint16_t *)j->wpack)[2 * (at + p / 2 * mr + io) + (p & 1)] = ((const uint16_t *)w->data)[src];
          else
            ((float *)j->wpack)[at + p * mr + io] = ((const float *)w->data)[src];
          if (++p == j->kc) p = 0, kb++, at = kb < j->kblocks ? wpack_offset(j, g, kb, o0) : 0;
        }
  }
}

static int pack_weight(cb_job *j, const nrt_tensor_view *w) {
  int64_t words = j->s.groups * j->kgp * (j->bf16 ? ceil_div(j->kk, 2) : j->kk);
  j->wpack = calloc((size_t)(words > 0 ? words : 1), 4);
  if (!j->wpack) return -1;
  j->wsrc = w;
  rt_parallel_for(j->s.groups * j->kg, ceil_div(1 << 14, j->kk), pack_weight_rows, j);
  return 0;
}

/* The B panel of k block [k0, k0 + kcur) for the planned positions of
 * image n, group g: 32 values per tap (or per pair of taps). */
static void pack_cols(const cb_job *j, int64_t n, int64_t g, int64_t k0, int64_t kcur, const cb_plan *pl,
                      void *panel) {
  int64_t khw = j->s.kh * j->s.kw, c = k0 / khw, o = k0 % khw;
  size_t es = j->bf16 ? 2 : 4;
#ifdef CB_X86
  if (j->fast_gather) {
    const char *plane0 = plane_of(j, n, g, 0, es);
    int64_t csize = j->s.img.sc * (int64_t)es;
    if (j->bf16)
      fill_panel_bf16(j, pl, plane0, csize, k0, kcur, panel);
    else
      fill_panel_f32(j, pl, plane0, csize, k0, kcur, panel);
    return;
  }
#endif
  if (!j->bf16) {
    float *b = panel;
    for (int64_t p = 0; p < kcur; p++) {
      plan_run(j, pl, plane_of(j, n, g, c, es), o, b + p * CONV_NR);
      if (++o == khw) o = 0, c++;
    }
    return;
  }
  uint32_t *b = panel;
  uint16_t lo[CONV_NR] __attribute__((aligned(64))), hi[CONV_NR] __attribute__((aligned(64)));
  for (int64_t p = 0; p < kcur; p += 2) {
    plan_run(j, pl, plane_of(j, n, g, c, es), o, lo);
    if (++o == khw) o = 0, c++;
    if (p + 1 < kcur) {
      plan_run(j, pl, plane_of(j, n, g, c, es), o, hi);
      if (++o == khw) o = 0, c++;
    } else {
      memset(hi, 0, sizeof hi);
    }
    interleave_pairs(b + p / 2 * CONV_NR, lo, hi, CONV_NR);
  }
}

/* One tile: c (rows x ncols valid of an MR x 32 tile, row stride ldc) +=
 * or = a x b; partial tiles go through a local buffer. */
static void run_tile(const cb_job *j, int mr, int64_t kcur, const void *a, const void *b, float *c, int64_t ldc,
                     int64_t rows, int64_t ncols, int accumulate) {
  int idx = mr / 4;
  int64_t kw = j->bf16 ? ceil_div(kcur, 2) : kcur;
  if (rows == mr && ncols == CONV_NR) {
    if (j->bf16)
      j->uk->bf16[idx](kw, a, b, c, ldc, accumulate);
    else
      j->uk->f32[idx](kw, a, b, c, ldc, accumulate);
    return;
  }
  float tile[CONV_MR * CONV_NR];
  if (accumulate)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t t = 0; t < ncols; t++) tile[i * CONV_NR + t] = c[i * ldc + t];
  if (j->bf16)
    j->uk->bf16[idx](kw, a, b, tile, CONV_NR, accumulate);
  else
    j->uk->f32[idx](kw, a, b, tile, CONV_NR, accumulate);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t t = 0; t < ncols; t++) c[i * ldc + t] = tile[i * CONV_NR + t];
}

/* Writes a task's float32 results (row o at src + o * ld) to O, adding the
 * bias and rounding once to O's dtype. */
static void store_out(const cb_job *j, int64_t n, int64_t g, int64_t q0, int64_t nq, const float *src, int64_t ld) {
  const rt_image *out = &j->s.out;
  int64_t OW = out->w;
  for (int64_t o = 0; o < j->kg; o++) {
    float bo = 0;
    if (j->bias)
      bo = j->bf16 ? rt_bfloat16_to_float(((const uint16_t *)j->bias)[(g * j->kg + o) * j->bias_stride])
                   : ((const float *)j->bias)[(g * j->kg + o) * j->bias_stride];
    const float *row = src + o * ld;
    char *base = out->data + (size_t)(n * out->sn + (g * j->kg + o) * out->sc) * (j->bf16 ? 2 : 4);
    int64_t oh = q0 / OW, ow = q0 % OW;
    int flat = out->sw == 1 && (out->h == 1 || out->sh == OW); /* positions are one run */
    for (int64_t t = 0; t < nq;) {
      int64_t seg = flat ? nq : min64(nq - t, OW - ow), at = oh * out->sh + ow * out->sw;
      if (j->bf16)
        store_row_bf16((uint16_t *)base + at, out->sw, row + t, bo, seg);
      else
        store_row_f32((float *)base + at, out->sw, row + t, bo, seg);
      t += seg;
      ow = 0, oh++;
    }
  }
}

static void forward_tasks(int64_t begin, int64_t end, void *arg) {
  cb_job *j = arg;
  const rt_image *out = &j->s.out;
  int64_t nbpad = round_up(j->nb, CONV_NR);
  void *panel = aligned_alloc(64, (size_t)round_up(j->kc, 2) * CONV_NR * 4);
  float *cbuf = j->direct ? NULL : aligned_alloc(64, (size_t)(j->kgp * nbpad) * 4);
  /* Tasks run position block major: consecutive tasks (images, groups) of
   * a range reuse the block's gathering plans, one per column panel. */
  enum { PANELS = NB_MAX / CONV_NR };
  cb_plan pl[PANELS] = {{0}};
  int failed = !panel || (!j->direct && !cbuf);
  for (int i = 0; i < PANELS; i++) failed |= plan_alloc(j, &pl[i], CONV_NR);
  if (failed) {
    atomic_store(&j->oom, 1);
    free(panel);
    free(cbuf);
    for (int i = 0; i < PANELS; i++) plan_free(&pl[i]);
    return;
  }
  int64_t planned = -1;
  for (int64_t task = begin; task < end; task++) {
    int64_t pb = task / (j->s.groups * j->s.out.n), g = task / j->s.out.n % j->s.groups, n = task % j->s.out.n;
    int64_t q0 = pb * j->nb, nq = min64(j->nb, j->ohw - q0);
    if (pb != planned)
      for (int64_t jr = 0; jr < nq; jr += CONV_NR) plan_build(j, &pl[jr / CONV_NR], q0 + jr, min64(CONV_NR, nq - jr), CONV_NR);
    planned = pb;
    float *c = cbuf;
    int64_t ldc = nbpad;
    if (j->direct) {
      c = (float *)out->data + n * out->sn + g * j->kg * out->sc + q0;
      ldc = out->sc;
    }
    for (int64_t jr = 0; jr < nq; jr += CONV_NR) {
      int64_t ncols = min64(CONV_NR, nq - jr);
      for (int64_t kb = 0; kb < j->kblocks; kb++) {
        int64_t k0 = kb * j->kc, kcur = min64(j->kc, j->kk - k0);
        pack_cols(j, n, g, k0, kcur, &pl[jr / CONV_NR], panel);
        for (int64_t o0 = 0; o0 < j->kg; o0 += CONV_MR) {
          int mr = panel_mr(j->kg, o0);
          const char *a = (const char *)j->wpack + wpack_offset(j, g, kb, o0) * 4;
          if (j->direct)
            run_tile(j, mr, kcur, a, panel, c + o0 * ldc + jr, ldc, min64(mr, j->kg - o0), ncols, kb > 0);
          else
            run_tile(j, mr, kcur, a, panel, c + o0 * ldc + jr, ldc, mr, CONV_NR, kb > 0);
        }
      }
    }
    if (!j->direct) {
      store_out(j, n, g, q0, nq, cbuf, ldc);
    } else if (j->bias) {
      for (int64_t o = 0; o < j->kg; o++) {
        float bo = ((const float *)j->bias)[(g * j->kg + o) * j->bias_stride];
        for (int64_t t = 0; t < nq; t++) c[o * ldc + t] += bo;
      }
    }
  }
  free(panel);
  free(cbuf);
  for (int i = 0; i < PANELS; i++) plan_free(&pl[i]);
}

/* ---- common setup ------------------------------------------------------------------- */

int rt_conv_blocked_usable(const rt_conv_shape *s, nrt_dtype dtype) {
  const rt_conv_ukernels *best = rt_conv_ukernels_get(0), *portable = rt_conv_ukernels_get(1);
  if (dtype == NRT_FLOAT32) {
    if (best->f32[3] == portable->f32[3]) return 0;
  } else if (dtype == NRT_BFLOAT16) {
    if (best->bf16[3] == portable->bf16[3]) return 0;
  } else {
    return 0;
  }
  int64_t cg = s->img.c / s->groups, kg = s->out.c / s->groups;
  if (cg == 1 && kg == 1) return 0; /* depthwise: direct loops (conv_depthwise_impl.h) */
  return !rt_image_channels_inner(&s->img);
}

static void init_job(cb_job *j, const rt_conv_shape *s, nrt_dtype dtype, int portable) {
  memset(j, 0, sizeof *j);
  atomic_init(&j->oom, 0);
  j->s = *s;
  j->bf16 = dtype == NRT_BFLOAT16;
  j->uk = rt_conv_ukernels_get(portable);
  j->cg = s->img.c / s->groups;
  j->kg = s->out.c / s->groups;
  j->kk = j->cg * s->kh * s->kw;
  j->ohw = s->out.h * s->out.w;
#ifdef CB_X86
  j->avx512 = !portable && have_avx512bw();
  j->step = s->sw * s->img.sw;
  /* bfloat16 has no 16-bit gather: steps above 2 take the scalar path. */
  j->fast_gather = !portable && (j->step == 1 || (j->bf16 ? j->step == 2 : j->step * 16 < INT32_MAX)) &&
                   have_avx512bw();
#endif
}

static nrt_status oom_status(const char *name) {
  return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for convolution buffers", name);
}

nrt_status rt_conv_blocked_forward(const rt_conv_shape *s, nrt_dtype dtype, const nrt_tensor_view *w, int flipped,
                                   const void *bias, int64_t bias_stride, int portable, const char *name) {
  cb_job j;
  init_job(&j, s, dtype, portable);
  j.flipped = flipped;
  j.bias = bias;
  j.bias_stride = bias_stride;
  j.kgp = round_up(j.kg, 4);
  j.kblocks = ceil_div(j.kk, j.bf16 ? 2 * KC_MAX : KC_MAX); /* the same bytes of B panel */
  j.kc = round_up(ceil_div(j.kk, j.kblocks), 2);
  j.kblocks = ceil_div(j.kk, j.kc);
  j.pblocks = ceil_div(j.ohw, NB_MAX);
  j.nb = round_up(ceil_div(j.ohw, j.pblocks), CONV_NR);
  j.pblocks = ceil_div(j.ohw, j.nb);
  const rt_image *out = &s->out;
  j.direct = !j.bf16 && out->sw == 1 && (out->h == 1 || out->sh == out->w);
  if (pack_weight(&j, w)) return oom_status(name);
  int64_t tasks = s->out.n * s->groups * j.pblocks;
  rt_parallel_for(tasks, 1, forward_tasks, &j);
  free(j.wpack);
  return atomic_load(&j.oom) ? oom_status(name) : NRT_SUCCESS;
}

/* ---- weight gradient ------------------------------------------------------------------- */

/* B panels of grad_output: channels [g * kg, g * kg + kg) in panels of 32,
 * positions [q0, q0 + qcur) of image n; panel jp at b + jp * qw * 32 where
 * qw is the k block's length in words (positions, or pairs of them for
 * bfloat16), this image's words from word woff on. */
static void pack_grad_out(const cb_job *j, int64_t n, int64_t g, int64_t q0, int64_t qcur, void *b, int64_t qw,
                          int64_t woff) {
  const rt_image *out = &j->s.out;
  b = (uint32_t *)b + woff * CONV_NR;
  int flat = out->sw == 1 && (out->h == 1 || out->sh == out->w);
#ifdef CB_X86
  /* Blocks of 16 channels x 16 words (positions, or pairs of them) through
   * registers; the rest element by element below. */
  int64_t full = j->bf16 ? qcur / 2 : qcur, done = 0;
  if (j->avx512 && flat && full >= 16) {
    int64_t es = j->bf16 ? 2 : 4;
    done = full / 16 * 16;
    for (int64_t o0 = 0; o0 + 16 <= j->kg; o0 += 16) {
      const char *src = out->data + (n * out->sn + (g * j->kg + o0) * out->sc + q0) * es;
      uint32_t *d = (uint32_t *)b + o0 / CONV_NR * qw * CONV_NR + o0 % CONV_NR;
      for (int64_t w0 = 0; w0 < done; w0 += 16) transpose16(src + w0 * 4, out->sc * es, d + w0 * CONV_NR);
    }
  }
#endif
  for (int64_t o = 0; o < j->kg32; o++) {
    int64_t jp = o / CONV_NR, t = o % CONV_NR;
    int64_t base = n * out->sn + (g * j->kg + o) * out->sc;
#ifdef CB_X86
    int64_t skip = o < j->kg / 16 * 16 ? done : 0; /* words the blocks wrote */
#else
    int64_t skip = 0;
#endif
    if (!j->bf16) {
      float *d = (float *)b + jp * qw * CONV_NR + t;
      const float *src = (const float *)out->data + base;
      if (o >= j->kg)
        for (int64_t p = 0; p < qcur; p++) d[p * CONV_NR] = 0;
      else if (flat)
        for (int64_t p = skip; p < qcur; p++) d[p * CONV_NR] = src[q0 + p];
      else
        for (int64_t p = 0, q = q0; p < qcur; p++, q++) d[p * CONV_NR] = src[q / out->w * out->sh + q % out->w * out->sw];
      continue;
    }
    uint32_t *d = (uint32_t *)b + jp * qw * CONV_NR + t;
    const uint16_t *src = (const uint16_t *)out->data + base;
    if (o < j->kg && flat) {
      for (int64_t p = 2 * skip; p + 1 < qcur; p += 2) d[p / 2 * CONV_NR] = src[q0 + p] | (uint32_t)src[q0 + p + 1] << 16;
      if (qcur % 2) d[qcur / 2 * CONV_NR] = src[q0 + qcur - 1];
      continue;
    }
    for (int64_t p = 0, q = q0; p < qcur; p += 2, q += 2) {
      uint32_t lo = 0, hi = 0;
      if (o < j->kg) {
        lo = src[q / out->w * out->sh + q % out->w * out->sw];
        if (p + 1 < qcur) hi = src[(q + 1) / out->w * out->sh + (q + 1) % out->w * out->sw];
      }
      d[p / 2 * CONV_NR] = lo | hi << 16;
    }
  }
}

static void wgrad_tasks(int64_t begin, int64_t end, void *arg) {
  cb_job *j = arg;
  /* Small images share a k block (ipb images of whole vectors each), so
   * that each product runs long enough to amortise its accumulator tile. */
  int64_t ipb = j->ohw % (2 * CONV_NR) == 0 && 2 * j->ohw <= WG_KC ? WG_KC / j->ohw : 1;
  int64_t npanels = j->kg32 / CONV_NR, qmax = ipb > 1 ? ipb * j->ohw : min64(WG_KC, j->ohw);
  int64_t khw = j->s.kh * j->s.kw;
  /* A rows: mr runs of positions, ldr elements apart (whole vectors; for
   * bfloat16 an even count, read as pair words). */
  int64_t ldr = round_up(qmax, CONV_NR * 2);
  void *b = aligned_alloc(64, (size_t)(round_up(qmax, 2) * j->kg32) * 4);
  void *rows = aligned_alloc(64, (size_t)(ldr * CONV_MR) * 4);
  cb_plan pl = {0};
  if (!rows || !b || plan_alloc(j, &pl, round_up(min64(WG_KC, j->ohw), 2 * CONV_NR))) {
    atomic_store(&j->oom, 1);
    free(rows);
    free(b);
    plan_free(&pl);
    return;
  }
  size_t es = j->bf16 ? 2 : 4;
  int64_t N = j->s.img.n;
  for (int64_t task = begin; task < end; task++) {
    int64_t part = task / (j->s.groups * j->mblocks), g = task / j->mblocks % j->s.groups;
    int64_t r0 = task % j->mblocks * j->mb, r1 = min64(r0 + j->mb, j->kk);
    float *acc = j->acc + (part * j->s.groups + g) * j->kkp * j->kg32;
    int accumulate = 0; /* the task's first product overwrites its accumulator rows */
    for (int64_t q0 = 0; q0 < j->ohw; q0 += WG_KC) {
      int64_t qcur = min64(WG_KC, j->ohw - q0), qimg = j->bf16 ? ceil_div(qcur, 2) : qcur;
      plan_build(j, &pl, q0, qcur, round_up(qcur, 2 * CONV_NR));
      int64_t n1 = (part + 1) * N / j->parts;
      for (int64_t n = part * N / j->parts; n < n1; n += ipb) {
        int64_t nb = min64(ipb, n1 - n), qw = nb * qimg;
        for (int64_t bi = 0; bi < nb; bi++) pack_grad_out(j, n + bi, g, q0, qcur, b, qw, bi * qimg);
        for (int64_t ta = r0; ta < r1; ta += CONV_MR) {
          int mr = panel_mr(j->kk, ta);
          for (int i = 0; i < mr; i++) {
            char *row = (char *)rows + (size_t)(i * ldr) * es;
            if (ta + i >= j->kk)
              memset(row, 0, (size_t)ldr * es);
            else
              for (int64_t bi = 0; bi < nb; bi++)
                plan_run(j, &pl, plane_of(j, n + bi, g, (ta + i) / khw, es), (ta + i) % khw,
                         row + (size_t)(bi * qcur) * es);
          }
          for (int64_t jp = 0; jp < npanels; jp++) {
            const char *bp = (const char *)b + jp * qw * CONV_NR * 4;
            float *cp = acc + ta * j->kg32 + jp * CONV_NR;
            if (j->bf16)
              j->uk->ra_bf16[mr / 4](qw, rows, ldr / 2, (const uint32_t *)bp, cp, j->kg32, accumulate);
            else
              j->uk->ra_f32[mr / 4](qw, rows, ldr, (const float *)bp, cp, j->kg32, accumulate);
          }
        }
        accumulate = 1;
      }
    }
  }
  free(rows);
  free(b);
  plan_free(&pl);
}

/* Rows (group, tap) [begin, end) of the weight gradient: the parts summed
 * in order, rounded once and stored into the weight's layout. */
static void store_weight_grad(int64_t begin, int64_t end, void *arg) {
  cb_job *j = arg;
  const nrt_tensor_view *w = j->wout;
  int64_t size = j->s.groups * j->kkp * j->kg32, khw = j->s.kh * j->s.kw;
  float *sum = malloc((size_t)j->kg * sizeof *sum);
  if (!sum) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t row = begin; row < end; row++) {
    int64_t g = row / j->kk, r = row % j->kk, c = r / khw, i = r % khw / j->s.kw, jj = r % j->s.kw;
    const float *src = j->acc + (g * j->kkp + r) * j->kg32;
    for (int64_t o = 0; o < j->kg; o++) sum[o] = src[o];
    for (int64_t p = 1; p < j->parts; p++)
      for (int64_t o = 0; o < j->kg; o++) sum[o] += src[p * size + o];
    int64_t at = g * j->kg * w->strides[0] + c * w->strides[1] + i * w->strides[2] + jj * w->strides[3];
    if (j->bf16)
      for (int64_t o = 0; o < j->kg; o++) ((uint16_t *)w->data)[at + o * w->strides[0]] = bf16_bits(sum[o]);
    else
      for (int64_t o = 0; o < j->kg; o++) ((float *)w->data)[at + o * w->strides[0]] = sum[o];
  }
  free(sum);
}

nrt_status rt_conv_blocked_weight_grad(const rt_conv_shape *s, nrt_dtype dtype, const nrt_tensor_view *w,
                                       int portable, const char *name) {
  cb_job j;
  init_job(&j, s, dtype, portable);
  j.kkp = round_up(j.kk, 4);
  j.kg32 = round_up(j.kg, CONV_NR);
  int64_t size = s->groups * j.kkp * j.kg32;
  /* Tap blocks (multiples of 12) keep a task's accumulator within L2;
   * batch parts give the pool enough tasks without sharing outputs. */
  j.mb = round_up(ceil_div(j.kk, ceil_div(j.kk * j.kg32, WG_TASK_ACC)), CONV_MR);
  j.mblocks = ceil_div(j.kk, j.mb);
  /* Fewer parts for large weights: their sum costs as much as a part. */
  j.parts = min64(size >= WG_FEW_PARTS_FROM ? WG_PARTS / 2 : WG_PARTS, s->img.n);
  while (j.parts > 1 && j.parts * size > WG_ACC_BUDGET) j.parts--;
  if (j.parts < 1) j.parts = 1;
  int work = j.ohw > 0 && s->img.n > 0;
  j.acc = work ? malloc((size_t)(j.parts * size) * 4) : calloc((size_t)size, 4);
  if (!j.acc) return oom_status(name);
  if (!work) j.parts = 1;
  j.wout = w;
  if (work) rt_parallel_for(j.parts * s->groups * j.mblocks, 1, wgrad_tasks, &j);
  if (!atomic_load(&j.oom)) rt_parallel_for(s->groups * j.kk, 64, store_weight_grad, &j);
  free(j.acc);
  return atomic_load(&j.oom) ? oom_status(name) : NRT_SUCCESS;
}
