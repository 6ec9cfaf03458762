/* The bfloat16 micro-kernel on AMX tiles (TDPBF16PS), for Intel Xeons
 * from Sapphire Rapids on.
 *
 * A 32 x 32 float32 tile of C lives in four 16 x 16 accumulator tiles
 * (tmm0-3); each step loads two A tiles (16 rows x 16 k pairs, tmm4-5) and
 * two B tiles (16 k pairs x 16 columns, tmm6-7) and issues four TDPBF16PS.
 * B tiles read the packed B panel where it lies: its rows are k pairs of
 * nr words, the layout AMX wants. A tiles want each row's k pairs
 * contiguous, so A is packed straight into that layout (pack_a_amx): for
 * a row-major A a 64-byte copy per row and step, otherwise k-major pairs
 * of one step transposed in registers.
 *
 * What TDPBF16PS computes (measured on this kernel's first host, a Xeon
 * with amx_bf16, by a throwaway driver against candidate models; the
 * twin in tests/test_gemm.c holds the kernel to it bit for bit): for each
 * C element and one instruction over 16 k pairs, the even (low) products
 * and the odd (high) products are summed separately, each in k order
 * from zero with one rounding per step (round to nearest even); then
 * C += (even + odd), rounded twice. Subnormal inputs count as zero and
 * subnormal results are flushed to zero at every step.
 */
#include <string.h>
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

#define AMX_MR 32
#define AMX_NR 32
#define AMX_KP 16 /* k pairs per tile step */

/* LDTILECFG's 64-byte operand: palette 1, eight tiles of 16 rows x 64
 * bytes. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* GCC's tile load and store intrinsics are asm statements that do not
 * tell the compiler they read or write memory: a barrier before tile
 * loads (and LDTILECFG) and after tile stores keeps the buffers' writes
 * and reads in place. */
#define MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

/* The configuration is loaded once per run of micro-kernel calls (the
 * driver's begin/end around a unit of work), not per call: LDTILECFG
 * waits for the tiles in flight, and per call it took a third of the
 * kernel's time at k = 256. Not once per thread either: other code on the
 * same thread (oneDNN, under PyTorch's CPU ops) loads its own shapes
 * between our calls. end() releases the tiles, so that an idle pool
 * thread holds no tile state (8 KiB more for every context switch). */
__attribute__((target("amx-tile"))) static void tiles_begin(void) {
  tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  MEMORY_BARRIER();
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) static void tiles_end(void) { _tile_release(); }


/* Four accumulators += the products of one step: A tiles at a (rows 0-15)
 * and a + 16 * a_ld (rows 16-31), B tiles at b (columns 0-15) and b + 16. */
#define AMX_STEP(a, a_ld, b, b_ld)                          \
  do {                                                      \
    MEMORY_BARRIER();                                       \
    _tile_loadd(4, (a), (a_ld) * 4);                        \
    _tile_loadd(5, (a) + 16 * (a_ld), (a_ld) * 4);          \
    _tile_loadd(6, (b), (b_ld) * 4);                        \
    _tile_loadd(7, (b) + 16, (b_ld) * 4);                   \
    _tile_dpbf16ps(0, 4, 6);                                \
    _tile_dpbf16ps(1, 4, 7);                                \
    _tile_dpbf16ps(2, 5, 6);                                \
    _tile_dpbf16ps(3, 5, 7);                                \
  } while (0)

/* The 32 x 32 tile's sums over k2 pairs into tmm0-3. Step s of A (16 k
 * pairs of 32 rows) at a + s * a_step, rows lda words apart: packed by
 * pack_a_amx (a_step 512, lda 16; a last short step's rows are w words
 * apart) or rows read in place (a_step 16). A last short step is copied
 * into zero-padded tiles. With pf, the first pf_rows lines at pf, pf +
 * pf_ld, ... (the C rows of the tile computed next) are prefetched into
 * L2, spread over the steps. Runs between tiles_begin() and tiles_end(). */
__attribute__((target("amx-tile,amx-bf16"))) static inline __attribute__((always_inline)) void accumulate_a(
    int64_t k2, const uint32_t *a, int64_t a_step, int64_t lda, const uint32_t *b, int64_t ldb, const char *pf,
    int64_t pf_ld, int64_t pf_rows) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t steps = k2 / AMX_KP, w = k2 % AMX_KP;
  const int64_t per_step = steps ? (pf_rows + steps - 1) / steps : 0;
  int64_t row = 0;
  for (int64_t s = 0; s < steps; s++) {
    /* No software prefetch of A or B: with a loop of 32 prefetches of B
     * per step (two steps ahead, meant for B panels from L3), every
     * product measured was 0-6% slower on one thread, B beyond L2
     * included. */
    AMX_STEP(a + s * a_step, lda, b + s * AMX_KP * ldb, ldb);
    for (int64_t q = 0; pf && q < per_step && row < pf_rows; q++, row++) _mm_prefetch(pf + row * pf_ld, _MM_HINT_T1);
  }
  if (w) {
    uint32_t at[AMX_MR * AMX_KP] __attribute__((aligned(64)));
    uint32_t bt[AMX_KP * AMX_NR] __attribute__((aligned(64)));
    const uint32_t *as = a + steps * a_step, *bs = b + steps * AMX_KP * ldb;
    memset(at, 0, sizeof at);
    memset(bt, 0, sizeof bt);
    for (int r = 0; r < AMX_MR; r++) memcpy(at + r * AMX_KP, as + r * (a_step == AMX_KP ? lda : w), (size_t)w * 4);
    for (int64_t q = 0; q < w; q++) memcpy(bt + q * AMX_NR, bs + q * ldb, AMX_NR * 4);
    AMX_STEP(at, AMX_KP, bt, AMX_NR);
  }
}

/* A packed by pack_a_amx: a step's 32 rows of 16 words one after another. */
__attribute__((target("amx-tile,amx-bf16"))) static inline __attribute__((always_inline)) void accumulate(
    int64_t k2, const uint32_t *a, const uint32_t *b, int64_t ldb) {
  accumulate_a(k2, a, AMX_KP * AMX_MR, AMX_KP, b, ldb, NULL, 0, 0);
}

/* The four accumulators to a 32 x 32 float32 tile at c (row stride ldc). */
__attribute__((target("amx-tile"))) static inline __attribute__((always_inline)) void store_tile(float *c, int64_t ldc) {
  _tile_stored(0, c, ldc * 4);
  _tile_stored(1, c + 16, ldc * 4);
  _tile_stored(2, c + 16 * ldc, ldc * 4);
  _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
  MEMORY_BARRIER();
}

/* The accumulators, times alpha, plus beta * C (beta 0: C not read), to
 * the 32 x 32 float32 tile at c (row stride ldc). */
__attribute__((target("amx-tile,avx512f"))) static inline __attribute__((always_inline)) void finish_tile(
    float *c, int64_t ldc, float alpha, float beta) {
  if (alpha == 1 && beta == 0) { /* acc * 1 is acc: straight to C */
    store_tile(c, ldc);
    return;
  }
  float out[AMX_MR * AMX_NR] __attribute__((aligned(64)));
  store_tile(out, AMX_NR);
  /* alpha and beta as the AVX512-BF16 kernel applies them. */
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < AMX_MR; i++)
    for (int v = 0; v < AMX_NR; v += 16) {
      float *cp = c + i * ldc + v;
      __m512 r = _mm512_mul_ps(_mm512_load_ps(out + i * AMX_NR + v), va);
      _mm512_storeu_ps(cp, beta == 0 ? r : _mm512_fmadd_ps(_mm512_loadu_ps(cp), vb, r));
    }
}

/* rt_gemm_ukr_bf16 with a in the layout of pack_a_amx. */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static void ukr_bf16_amx(
    int64_t k2, const uint32_t *a, const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
    float alpha, float beta) {
  accumulate(k2, a, b, ldb);
  finish_tile(c, ldc, alpha, beta);
}

/* bf16_rows: the same tile with A's 32 rows read where they lie (row i's
 * k pair p at a[i * lda + p]), the layout a tile load wants: W of a
 * transposed small-m product (gemm.c small_m_transposed), which the
 * straight plan would repack as W^T on every call. The same TDPBF16PS
 * over the same pairs (a product commutes): the straight plan's sums. */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static void ukr_bf16_amx_rows(
    int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
    float alpha, float beta) {
  accumulate_a(k2, a, AMX_KP, lda, b, ldb, NULL, 0, 0);
  finish_tile(c, ldc, alpha, beta);
}

/* The float32 tile at out (row stride AMX_NR), times alpha, rounded into
 * the first rows x cols values of bfloat16 C. A whole tile with alpha 1
 * (the common case) is rounded with VCVTNE2PS2BF16 and one check per row:
 * TDPBF16PS flushes subnormal results to zero, so of the values the
 * instruction alone gets wrong (gemm_round.c) only NaN can occur, and a
 * tile holding one is rewritten the portable way. The rows flush's two
 * VFPCLASSPS per row, on every row, were a tenth of products with k = 256.
 * Anything else (alpha, ragged tiles) goes through that flush. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline __attribute__((always_inline)) void round_tile(
    float *out, uint16_t *c, int64_t ldc, int64_t rows, int64_t cols, float alpha) {
  if (alpha != 1 || rows != AMX_MR || cols != AMX_NR) {
    const __m512 va = _mm512_set1_ps(alpha);
    if (alpha != 1)
      for (int i = 0; i < AMX_MR * AMX_NR; i += 16) _mm512_store_ps(out + i, _mm512_mul_ps(_mm512_load_ps(out + i), va));
    rt_gemm_flush_bf16_rows(c, ldc, out, AMX_NR, NULL, 0, 0, rows, cols);
    return;
  }
  __mmask16 nan = 0;
  for (int i = 0; i < AMX_MR; i++) {
    const __m512 lo = _mm512_load_ps(out + i * AMX_NR), hi = _mm512_load_ps(out + i * AMX_NR + 16);
    nan |= _mm512_cmp_ps_mask(lo, hi, _CMP_UNORD_Q);
    _mm512_storeu_si512(c + i * ldc, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  if (__builtin_expect(nan != 0, 0)) rt_gemm_flush_bf16_rows(c, ldc, out, AMX_NR, NULL, 0, 0, rows, cols);
}

/* bf16_c: one tile, rounded as soon as it is computed. */
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16"))) static void ukr_bf16_amx_c(
    int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, uint16_t *c, int64_t ldc,
    int64_t rows, int64_t cols, float alpha) {
  float out[AMX_MR * AMX_NR] __attribute__((aligned(64)));
  accumulate_a(k2, a, lda ? AMX_KP : AMX_KP * AMX_MR, lda ? lda : AMX_KP, b, ldb, NULL, 0, 0);
  store_tile(out, AMX_NR);
  round_tile(out, c, ldc, rows, cols, alpha);
}

/* Bytes of B a block may sweep once per row panel (bf16_c_block), at
 * most: it is then read from L2 (2 MiB per core here) by every row panel. */
#define ROW_ORDER_B_BYTES (1 << 20)

/* bf16_c_block. C of a few MiB is written beyond L2, and written tile by
 * tile it cost a quarter of 2048x256 @ 256x1024 on one thread (0.79 ms,
 * 0.57 with C kept in L2; one core stores ~29 GB/s beyond L2 here). Three
 * things hide most of it (0.63 ms), each measured on its own:
 * - each tile is rounded one tile late: rounded at once, its C stores sit
 *   in the store buffer ahead of the next tile's tile stores, which commit
 *   in order behind them, and that tile's rounding waits for both (-2-10%);
 * - the C rows of the tile computed next are prefetched into L2 during
 *   this tile's steps (PREFETCHT1: PREFETCHW into L1 was 5-10% slower,
 *   holding the fill buffers the tile loads need; -8-12%);
 * - row panels outer when B's block fits L2 (the A panel stays in L1, B
 *   comes from L2 either way), so that each C row is written line after
 *   line (-2-8%); else column panels outer, reusing each B panel. */
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16"))) static void ukr_bf16_amx_c_block(
    int64_t k2, const uint32_t *a, int64_t a_panel, int64_t lda, const uint32_t *b, int64_t b_panel, int64_t ldb,
    uint16_t *c, int64_t ldc, int64_t rows, int64_t cols, float alpha) {
  float out[2][AMX_MR * AMX_NR] __attribute__((aligned(64)));
  const int64_t tiles_r = (rows + AMX_MR - 1) / AMX_MR, tiles_c = (cols + AMX_NR - 1) / AMX_NR;
  const int rows_outer = k2 * 4 * tiles_c * AMX_NR <= ROW_ORDER_B_BYTES;
  uint16_t *pend_c = NULL; /* the tile computed but not yet rounded: out[cur ^ 1] */
  int64_t pend_rows = 0, pend_cols = 0;
  int cur = 0;
  /* Tile (i, j) now, (in, jn) next: stepped, not divided (a division per
   * tile was 7% of 2048x128 @ 128x128, 4 steps a tile). */
  int64_t i = 0, j = 0;
  for (int64_t t = 0; t < tiles_r * tiles_c; t++, cur ^= 1) {
    int64_t in = i, jn = j;
    if (rows_outer) {
      if ((jn += AMX_NR) >= cols) jn = 0, in += AMX_MR;
    } else if ((in += AMX_MR) >= rows) {
      in = 0, jn += AMX_NR;
    }
    const int next = t + 1 < tiles_r * tiles_c;
    const char *pf = next ? (const char *)(c + in * ldc + jn) : NULL;
    const int64_t pf_rows = rows - in < AMX_MR ? rows - in : AMX_MR;
    accumulate_a(k2, a + i / AMX_MR * a_panel, lda ? AMX_KP : AMX_KP * AMX_MR, lda ? lda : AMX_KP,
                 b + j / AMX_NR * b_panel, ldb, pf, ldc * 2, pf_rows);
    store_tile(out[cur], AMX_NR);
    if (pend_c) round_tile(out[cur ^ 1], pend_c, ldc, pend_rows, pend_cols, alpha);
    pend_c = c + i * ldc + j;
    pend_rows = rows - i < AMX_MR ? rows - i : AMX_MR;
    pend_cols = cols - j < AMX_NR ? cols - j : AMX_NR;
    i = in, j = jn;
  }
  if (pend_c) round_tile(out[cur ^ 1], pend_c, ldc, pend_rows, pend_cols, alpha);
}

/* One whole step: src is 16 k pairs x 32 rows (k-major), dst 32 rows x 16
 * pairs; two 16 x 16 word transposes in registers (pairs of words, then
 * of 64-bit halves, then 128-bit lanes), instead of 512 scalar moves. */
__attribute__((target("avx512f"))) static void transpose_step(uint32_t *dst, const uint32_t *src) {
  for (int half = 0; half < 2; half++) {
    __m512i r[16], t[16], u[16];
    for (int q = 0; q < 16; q++) r[q] = _mm512_loadu_si512(src + q * AMX_MR + half * 16);
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* Lane L of u[4i + j] holds column 4L + j of rows 4i..4i+3. */
    for (int i = 0; i < 16; i += 4) {
      u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
      u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
      u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
      u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    uint32_t *out = dst + half * 16 * AMX_KP;
    for (int j = 0; j < 4; j++) {
      __m512i x01 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), y01 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
      __m512i x23 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE), y23 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
      _mm512_storeu_si512(out + (0 + j) * AMX_KP, _mm512_shuffle_i32x4(x01, y01, 0x88));
      _mm512_storeu_si512(out + (4 + j) * AMX_KP, _mm512_shuffle_i32x4(x01, y01, 0xDD));
      _mm512_storeu_si512(out + (8 + j) * AMX_KP, _mm512_shuffle_i32x4(x23, y23, 0x88));
      _mm512_storeu_si512(out + (12 + j) * AMX_KP, _mm512_shuffle_i32x4(x23, y23, 0xDD));
    }
  }
}

/* One step of a row-major bfloat16 A (k contiguous): rows n of `vals`
 * values (<= 32, an odd last one paired with 0) from src (row stride
 * s_r) to w = ceil(vals / 2) words per row at dst; rows n..31 zero. */
__attribute__((target("avx512f,avx512bw"))) static void copy_step(uint32_t *dst, const uint16_t *src,
                                                                  int64_t s_r, int64_t n, int64_t vals) {
  const int64_t w = (vals + 1) / 2;
  const __mmask32 m = (__mmask32)(vals >= 32 ? 0xffffffffu : (1u << vals) - 1);
  const __mmask16 wm = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
  int64_t r = 0;
  for (; r < n; r++) _mm512_mask_storeu_epi32(dst + r * w, wm, _mm512_maskz_loadu_epi16(m, src + r * s_r));
  for (; r < AMX_MR; r++) _mm512_mask_storeu_epi32(dst + r * w, wm, _mm512_setzero_si512());
}

/* A whole step of a k-major bfloat16 A (rows contiguous, k stride s_k):
 * 32 k values of 32 rows paired into 16 k pairs x 32 rows of words, the
 * k-major layout transpose_step takes; one permute per 16 words. Word j
 * of a permute's output takes row j/2 (+16 for the second half) of the
 * even k (indices < 32) or of the odd k (indices >= 32). */
static const uint16_t pair_lo[32] __attribute__((aligned(64))) = {
    0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
static const uint16_t pair_hi[32] __attribute__((aligned(64))) = {
    16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
__attribute__((target("avx512f,avx512bw"))) static void pair_step(uint32_t *tmp, const uint16_t *src, int64_t s_k) {
  const __m512i lo = _mm512_load_si512(pair_lo), hi = _mm512_load_si512(pair_hi);
  for (int q = 0; q < AMX_KP; q++) {
    const __m512i even = _mm512_loadu_si512(src + 2 * q * s_k), odd = _mm512_loadu_si512(src + (2 * q + 1) * s_k);
    _mm512_store_si512(tmp + q * AMX_MR, _mm512_permutex2var_epi16(even, lo, odd));
    _mm512_store_si512(tmp + q * AMX_MR + 16, _mm512_permutex2var_epi16(even, hi, odd));
  }
}

/* bf16_pack_a: panels of 32 rows as rt_gemm_pack_panels_bf16x2 packs
 * them (k2 = ceil(kc / 2) words a row), each in steps of 16 k pairs, a
 * step's 32 rows one after another (w words each, w < 16 only in the
 * last step). Row-major A (within one slice) is copied row by row; any
 * other layout is packed a step at a time k-major (in L1) and transposed. */
static void pack_a_amx(uint32_t *dst, const rt_gemm_src *src, int64_t r0, int64_t rows, int64_t kk0,
                       int64_t kc) {
  const int64_t k2 = (kc + 1) / 2, slice = kk0 / src->k, p0 = kk0 % src->k;
  const int one_slice = p0 + kc <= src->k && rt_isa() >= NRT_ISA_AVX512;
  const int by_rows = one_slice && src->s_k == 1, by_k = one_slice && src->s_r == 1 && !by_rows;
  const uint16_t *base = (const uint16_t *)(const void *)src->base + slice * src->s_slice + p0 * src->s_k;
  uint32_t tmp[AMX_KP * AMX_MR] __attribute__((aligned(64)));
  for (int64_t q0 = 0; q0 < rows; q0 += AMX_MR, dst += AMX_MR * k2) {
    const int64_t n = rows - q0 < AMX_MR ? rows - q0 : AMX_MR;
    for (int64_t s = 0; s < k2; s += AMX_KP) {
      const int64_t w = k2 - s < AMX_KP ? k2 - s : AMX_KP, vals = kc - 2 * s < 2 * AMX_KP ? kc - 2 * s : 2 * AMX_KP;
      uint32_t *step = dst + s * AMX_MR;
      if (by_rows) {
        copy_step(step, base + (r0 + q0) * src->s_r + 2 * s, src->s_r, n, vals);
        continue;
      }
      if (by_k && n == AMX_MR && vals == 2 * AMX_KP) {
        pair_step(tmp, base + r0 + q0 + 2 * s * src->s_k, src->s_k);
        transpose_step(step, tmp);
        continue;
      }
      rt_gemm_pack_bf16x2(tmp, AMX_MR, src, r0 + q0, n, kk0 + 2 * s, vals);
      if (w == AMX_KP) {
        transpose_step(step, tmp);
        continue;
      }
      for (int r = 0; r < AMX_MR; r++)
        for (int64_t q = 0; q < w; q++) step[r * w + q] = tmp[q * AMX_MR + r];
    }
  }
}

/* Below about 35 us of one core's work, two threads were no faster on
 * their own (TORCHNEURON_NUM_THREADS=2 gemm_kernel_time, best of 300:
 * 256^3 25.2 us alone, 25.8-26.8 on two; 1024x128 @ (128x128)^T 24.1
 * against 20.5-24.4) and slower back to back through torch.mm (256^3 in
 * blocks of 40: 33 us a product alone, 37-98 on two): each thread reads
 * the packed B half of which the other wrote, and the pool's hand-offs
 * cost a few microseconds each. 2048x128 @ (128x128)^T (67 Mflop) gains
 * from the second thread (46.6 us against 35-41). Batched products (an
 * attention head per item) share nothing between threads and stay split. */
#define AMX_SERIAL_FLOPS 5e7

/* Rows, at most, of a product with k < 512 computed transposed (W's rows
 * in place, ukr_bf16_amx_rows; gemm.c small_m_transposed). One thread, CPU
 * time, x [m, k] @ W^T (session s48-amxsmall): W [3072, 256] m = 24 211 ->
 * 67 us, m = 48 254-267 -> 179-188; W [1024, 256] m = 32 44-48 -> 34-35,
 * m = 48 even, m = 56 57-58 -> 58-62, m = 64 65 -> 75, m = 128 92 -> 155
 * (writing C^T's columns, scalar, outweighs the packing saved). */
#define SMALL_M_ANY_K 48

const rt_gemm_kernel rt_gemm_kernel_amx_bf16 = {
    .name = "amxbf16_32x32", .compute = NRT_BFLOAT16, .mr = AMX_MR, .nr = AMX_NR, .mc = 256,
    .kc = 1024, .b_elems = 1 << 22, .big_b_mc = 256, .bf16 = ukr_bf16_amx, .bf16_rows = ukr_bf16_amx_rows,
    .bf16_pack_a = pack_a_amx,
    .begin = tiles_begin, .end = tiles_end, .bf16_c = ukr_bf16_amx_c,
    .bf16_c_block = ukr_bf16_amx_c_block, .bf16_c_rows_b_bytes = ROW_ORDER_B_BYTES,
    .small_m_bf16_any_k = SMALL_M_ANY_K,
    .serial_flops = AMX_SERIAL_FLOPS};
#endif
