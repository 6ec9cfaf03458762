/* GEMM packing: copies a block of A or B into the panel layout the
 * micro-kernels read (k-major groups of R values, zero-padded), converting
 * float16/bfloat16 to float32 on the way. Packing reads any strides, so a
 * transposed operand is read in place, never copied first. The layout of the
 * source picks the loop order: contiguous along the panel's rows (a copy per
 * k), contiguous along k (a transpose, done in chunks that stay in L1), or
 * neither (element by element).
 */
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/gemm/gemm.h"
#include "ops/engine/scalar_types.h"

#define PACK_CHUNK 256 /* k values per transpose chunk: long reads, destination in L1 */

static inline float f32_of_f32(float v) { return v; }
static inline double f64_of_f64(double v) { return v; }
static inline float f32_of_bf16(rt_bfloat16 v) { return rt_bfloat16_to_float(v); }
static inline float f32_of_f16(rt_half v) { return rt_half_to_float(v); }

#define PACK_SEGMENT(NAME, S, T, CONV)                                                         \
  RT_SIMD_VOID(NAME, (T *dst, int R, const S *src, int64_t rows, int64_t len, int64_t s_r,     \
                      int64_t s_k), (dst, R, src, rows, len, s_r, s_k)) {                      \
    if (s_r == 1) {                                                                            \
      for (int64_t p = 0; p < len; p++) {                                                      \
        const S *sp = src + p * s_k;                                                           \
        T *d = dst + p * R;                                                                    \
        for (int64_t r = 0; r < rows; r++) d[r] = CONV(sp[r]);                                 \
        for (int64_t r = rows; r < R; r++) d[r] = 0;                                           \
      }                                                                                        \
      return;                                                                                  \
    }                                                                                          \
    for (int64_t p0 = 0; p0 < len; p0 += PACK_CHUNK) {                                         \
      int64_t pn = len - p0 < PACK_CHUNK ? len - p0 : PACK_CHUNK;                              \
      T *d = dst + p0 * R;                                                                     \
      if (s_k == 1) {                                                                          \
        for (int64_t r = 0; r < rows; r++) {                                                   \
          const S *sp = src + r * s_r + p0;                                                    \
          if (r + 1 < rows) /* start the next row's stream early */                            \
            for (int64_t q = 0; q < pn; q += 64 / (int64_t)sizeof(S))                          \
              __builtin_prefetch(sp + s_r + q);                                                \
          for (int64_t p = 0; p < pn; p++) d[p * R + r] = CONV(sp[p]);                         \
        }                                                                                      \
      } else {                                                                                 \
        for (int64_t p = 0; p < pn; p++)                                                       \
          for (int64_t r = 0; r < rows; r++) d[p * R + r] = CONV(src[r * s_r + (p0 + p) * s_k]); \
      }                                                                                        \
      if (rows < R)                                                                            \
        for (int64_t p = 0; p < pn; p++)                                                       \
          for (int64_t r = rows; r < R; r++) d[p * R + r] = 0;                                 \
    }                                                                                          \
  }

PACK_SEGMENT(pack_f32_from_f32, float, float, f32_of_f32)
PACK_SEGMENT(pack_f32_from_bf16, rt_bfloat16, float, f32_of_bf16)
PACK_SEGMENT(pack_f32_from_f16, rt_half, float, f32_of_f16)
PACK_SEGMENT(pack_f64_from_f64, double, double, f64_of_f64)
static inline uint16_t bits_of_bits(uint16_t v) { return v; }
PACK_SEGMENT(pack_bf16_bits, uint16_t, uint16_t, bits_of_bits)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "ops/engine/transpose8.h"

/* dst[p*R + r] = src[r*s_r + p] for r < 8, p < len: 8 x 8 blocks through
 * registers (the standard unpack/shuffle/permute transpose). The values are
 * only moved, so this serves any 32-bit words (bfloat16 pairs too); src
 * needs no alignment. */
__attribute__((target("avx2"))) static void transpose8_f32(float *dst, int R, const float *src,
                                                             int64_t s_r, int64_t len) {
  int64_t p = 0;
  for (; p + 8 <= len; p += 8) rt_transpose8x8_32(dst + p * R, R, src + p, s_r);
  for (; p < len; p++)
    for (int i = 0; i < 8; i++) memcpy(dst + p * R + i, src + i * s_r + p, 4);
}

/* dst[p*R + r] = src[p*s_k + r] for r < rows, 0 for rows <= r < R <= 32:
 * per k one or two masked 16-float moves (the zero padding comes free). */
__attribute__((target("avx512f"))) static void copy_rows_avx512(float *dst, int R, const float *src,
                                                                  int64_t rows, int64_t len, int64_t s_k) {
  const __mmask16 m0 = (__mmask16)(rows >= 16 ? 0xffff : (1u << rows) - 1);
  const __mmask16 m1 = (__mmask16)(rows >= 32 ? 0xffff : rows <= 16 ? 0 : (1u << (rows - 16)) - 1);
  const __mmask16 w0 = (__mmask16)(R >= 16 ? 0xffff : (1u << R) - 1);
  const __mmask16 w1 = (__mmask16)(R >= 32 ? 0xffff : R <= 16 ? 0 : (1u << (R - 16)) - 1);
  if (R > 16) {
    for (int64_t p = 0; p < len; p++) {
      const float *sp = src + p * s_k;
      _mm512_mask_storeu_ps(dst + p * R, w0, _mm512_maskz_loadu_ps(m0, sp));
      _mm512_mask_storeu_ps(dst + p * R + 16, w1, _mm512_maskz_loadu_ps(m1, sp + 16));
    }
  } else {
    for (int64_t p = 0; p < len; p++)
      _mm512_mask_storeu_ps(dst + p * R, w0, _mm512_maskz_loadu_ps(m0, src + p * s_k));
  }
}

/* Several panels of a k-major source (s_r == 1) at once: per k, one read
 * along the rows, scattered to the panels (dst + q*R*kc). Reading panel by
 * panel would revisit each k row's lines and pages once per panel. */
__attribute__((target("avx512f"))) static void copy_panels_avx512(float *dst, int R, int64_t kc,
                                                                   const float *src, int64_t rows,
                                                                   int64_t len, int64_t s_k) {
  const int64_t full = rows / R, rest = rows % R;
  for (int64_t p = 0; p < len; p++) {
    const float *sp = src + p * s_k;
    float *d = dst + p * R;
    for (int64_t q = 0; q < full; q++, sp += R, d += R * kc) {
      int r = 0;
      for (; r + 16 <= R; r += 16) _mm512_storeu_ps(d + r, _mm512_loadu_ps(sp + r));
      if (r < R) {
        __mmask16 m = (__mmask16)((1u << (R - r)) - 1);
        _mm512_mask_storeu_ps(d + r, m, _mm512_maskz_loadu_ps(m, sp + r));
      }
    }
    if (rest)
      for (int r = 0; r < R; r += 16) {
        int64_t have = rest - r < 0 ? 0 : rest - r > 16 ? 16 : rest - r;
        __mmask16 m = (__mmask16)((1u << have) - 1), w = (__mmask16)(R - r >= 16 ? 0xffff : (1u << (R - r)) - 1);
        _mm512_mask_storeu_ps(d + r, w, _mm512_maskz_loadu_ps(m, sp + r));
      }
  }
}

/* bfloat16 pairs from a k-major source (s_r == 1): per k pair, the two k
 * rows interleaved word by word (even k in the low half) by one VPERMT2W per
 * 16 pairs, zero padding from the masked loads; a last odd k pairs with 0.
 * All panels of `rows` at once (panel q at dst + q*R*k2). The k rows lie s_k
 * apart, a few lines of each used, and without help the loop waited on
 * them: one thread, (2048x256)^T @ 2048x256 spent a quarter of its time
 * here, more than half of it on the first load. So the rows PAIR_AHEAD
 * pairs on are prefetched. */
#define PAIR_AHEAD 8
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pair_panels_avx512(
    uint32_t *dst, int R, const uint16_t *src, int64_t rows, int64_t kc, int64_t s_k) {
  const int64_t k2 = (kc + 1) / 2, bytes = rows * 2;
  /* word j of the low (high) result: row j / 2 (16 + j / 2) of the even k row, or of the odd one for odd j */
  uint16_t t[32];
  for (int j = 0; j < 32; j++) t[j] = (uint16_t)(j / 2 | (j & 1) << 5);
  const __m512i ilo = _mm512_loadu_si512(t), ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
  for (int64_t q = 0; q < k2; q++) {
    const uint16_t *lo = src + 2 * q * s_k, *hi = lo + s_k;
    const int has_hi = 2 * q + 1 < kc;
    if (q + PAIR_AHEAD < k2) {
      const char *f = (const char *)(lo + 2 * PAIR_AHEAD * s_k), *g = f + s_k * 2;
      for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(f + o), __builtin_prefetch(g + o);
      __builtin_prefetch(f + bytes - 1), __builtin_prefetch(g + bytes - 1);
    }
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
      uint32_t *d = dst + r0 / R * R * k2 + q * R;
      const int64_t have = rows - r0 < R ? rows - r0 : R;
      const __mmask32 m = have >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << have) - 1;
      const __m512i a = _mm512_maskz_loadu_epi16(m, lo + r0);
      const __m512i b = has_hi ? _mm512_maskz_loadu_epi16(m, hi + r0) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(d, (__mmask16)(R >= 16 ? 0xffff : (1u << R) - 1), _mm512_permutex2var_epi16(a, ilo, b));
      if (R > 16)
        _mm512_mask_storeu_epi32(d + 16, (__mmask16)(R >= 32 ? 0xffff : (1u << (R - 16)) - 1),
                                 _mm512_permutex2var_epi16(a, ihi, b));
    }
  }
}

/* 0: avx2 (and f16c), 1: avx512f, 2: avx512bw+vl; the AVX-512 level has all three. */
static int cpu_has(int which) { return rt_isa() >= (which ? NRT_ISA_AVX512 : NRT_ISA_AVX2); }

/* float16 to float32 with F16C (VCVTPH2PS: exact, subnormals included,
 * whatever MXCSR says; only a signalling NaN comes out quieted). */
__attribute__((target("avx2,f16c"))) static void f32_of_f16_f16c(float *d, const uint16_t *s, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j))));
  for (; j < n; j++) d[j] = rt_half_to_float(s[j]);
}

/* float16 rows contiguous along k: 8 rows at a time converted into an L1
 * buffer, then transposed as float32. */
__attribute__((target("avx2,f16c"))) static void pack_f16_rows_f16c(float *dst, int R, const uint16_t *src,
                                                                    int64_t rows, int64_t len, int64_t s_r) {
  float buf[8 * PACK_CHUNK];
  for (int64_t p0 = 0; p0 < len; p0 += PACK_CHUNK) {
    const int64_t pn = len - p0 < PACK_CHUNK ? len - p0 : PACK_CHUNK;
    for (int64_t r = 0; r < rows; r += 8) {
      const int64_t r8 = r + 8 <= rows ? r : rows - 8; /* the last group overlaps the one before */
      for (int i = 0; i < 8; i++) f32_of_f16_f16c(buf + i * PACK_CHUNK, src + (r8 + i) * s_r + p0, pn);
      transpose8_f32(dst + p0 * R + r8, R, buf, PACK_CHUNK, pn);
    }
    for (int64_t p = 0; p < pn; p++)
      for (int64_t i = rows; i < R; i++) dst[(p0 + p) * R + i] = 0;
  }
}

/* float16 k-major (rows contiguous): per k, up to 32 rows converted in two
 * masked moves, zero padding included (as copy_rows_avx512). */
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) static void pack_f16_kmajor_avx512(
    float *dst, int R, const uint16_t *src, int64_t rows, int64_t len, int64_t s_k) {
  for (int64_t p = 0; p < len; p++)
    for (int r = 0; r < R; r += 16) {
      const int64_t have = rows - r < 0 ? 0 : rows - r > 16 ? 16 : rows - r;
      const __mmask16 m = (__mmask16)((1u << have) - 1), w = (__mmask16)(R - r >= 16 ? 0xffff : (1u << (R - r)) - 1);
      _mm512_mask_storeu_ps(dst + p * R + r, w, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + p * s_k + r)));
    }
}
#endif

/* float16 segments: with F16C where the layout allows, else portable. */
static void pack_f16_segment(float *dst, int R, const rt_half *src, int64_t rows, int64_t len,
                             int64_t s_r, int64_t s_k) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (s_r == 1 && R <= 32 && cpu_has(2)) {
    pack_f16_kmajor_avx512(dst, R, (const uint16_t *)src, rows, len, s_k);
    return;
  }
  if (s_k == 1 && s_r != 1 && rows >= 8 && cpu_has(0)) {
    pack_f16_rows_f16c(dst, R, (const uint16_t *)src, rows, len, s_r);
    return;
  }
#endif
  pack_f32_from_f16(dst, R, src, rows, len, s_r, s_k);
}

/* float32 segments: rows contiguous along k (row-major A, transposed B) are
 * transposed 8 rows at a time where the CPU has AVX2; k-major ones
 * (transposed A, row-major B) copied with masked AVX-512 moves. */
static void pack_f32_segment(float *dst, int R, const float *src, int64_t rows, int64_t len,
                             int64_t s_r, int64_t s_k) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (s_r == 1 && R <= 32 && cpu_has(1)) {
    copy_rows_avx512(dst, R, src, rows, len, s_k);
    return;
  }
  if (s_k == 1 && s_r != 1 && rows >= 8 && cpu_has(0)) {
    for (int64_t r = 0; r < rows; r += 8) {
      int64_t r8 = r + 8 <= rows ? r : rows - 8; /* the last group overlaps the one before */
      transpose8_f32(dst + r8, R, src + r8 * s_r, s_r, len);
    }
    if (rows < R)
      for (int64_t p = 0; p < len; p++)
        for (int64_t i = rows; i < R; i++) dst[p * R + i] = 0;
    return;
  }
#endif
  pack_f32_from_f32(dst, R, src, rows, len, s_r, s_k);
}

/* Calls SEGMENT(dst_offset, src_pointer, len) for each piece of the k range
 * [kk0, kk0 + kc) that lies within one slice. */
#define FOR_EACH_SEGMENT(src, r0, kk0, kc, ESIZE, SEGMENT)                                     \
  for (int64_t done_ = 0; done_ < (kc);) {                                                     \
    int64_t kk_ = (kk0) + done_, s_ = kk_ / (src)->k, p_ = kk_ % (src)->k;                     \
    int64_t len_ = (src)->k - p_ < (kc) - done_ ? (src)->k - p_ : (kc) - done_;                \
    const char *at_ = (src)->base + (s_ * (src)->s_slice + (r0) * (src)->s_r + p_ * (src)->s_k) * (ESIZE); \
    SEGMENT(done_, at_, len_);                                                                 \
    done_ += len_;                                                                             \
  }

void rt_gemm_pack_f32(float *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                      int64_t kk0, int64_t kc) {
  switch (src->dtype) {
#define SEG_F32_(off, at, len) \
  pack_f32_segment(dst + (off) * R, R, (const float *)(at), rows, len, src->s_r, src->s_k)
    case NRT_FLOAT32: FOR_EACH_SEGMENT(src, r0, kk0, kc, 4, SEG_F32_) break;
#define SEG_BF16_(off, at, len) \
  pack_f32_from_bf16(dst + (off) * R, R, (const rt_bfloat16 *)(at), rows, len, src->s_r, src->s_k)
    case NRT_BFLOAT16: FOR_EACH_SEGMENT(src, r0, kk0, kc, 2, SEG_BF16_) break;
#define SEG_F16_(off, at, len) \
  pack_f16_segment(dst + (off) * R, R, (const rt_half *)(at), rows, len, src->s_r, src->s_k)
    case NRT_FLOAT16: FOR_EACH_SEGMENT(src, r0, kk0, kc, 2, SEG_F16_) break;
    default: break; /* rt_gemm admits no other dtype here */
  }
}

void rt_gemm_pack_f64(double *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                      int64_t kk0, int64_t kc) {
#define SEG_F64_(off, at, len) \
  pack_f64_from_f64(dst + (off) * R, R, (const double *)(at), rows, len, src->s_r, src->s_k)
  FOR_EACH_SEGMENT(src, r0, kk0, kc, 8, SEG_F64_)
}

/* The bfloat16 fast paths, for a k range within one slice: pairs of
 * consecutive k in memory (s_k == 1) are 32-bit words, transposed like
 * float32; k-major sources are paired by pair_panels_avx512. Returns 0 when
 * neither applies. Packs all panels of `rows` (see rt_gemm_pack_panels_*). */
static int pack_bf16x2_fast(uint32_t *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                            int64_t kk0, int64_t kc) {
#if defined(__x86_64__) && defined(__GNUC__)
  const int64_t slice = kk0 / src->k, p0 = kk0 % src->k, k2 = (kc + 1) / 2;
  if (src->dtype != NRT_BFLOAT16 || p0 + kc > src->k) return 0;
  const uint16_t *base = (const uint16_t *)src->base + slice * src->s_slice + r0 * src->s_r + p0 * src->s_k;
  if (src->s_r == 1 && R <= 32 && cpu_has(2)) {
    pair_panels_avx512(dst, R, base, rows, kc, src->s_k);
    return 1;
  }
  if (src->s_k == 1 && src->s_r % 2 == 0 && src->s_r != 0 && rows >= 8 && R >= 8 && cpu_has(0)) {
    for (int64_t q0 = 0; q0 < rows; q0 += R) {
      const int64_t n = rows - q0 < R ? rows - q0 : R;
      uint32_t *d = dst + q0 / R * R * k2;
      const uint16_t *b = base + q0 * src->s_r;
      if (n < 8) { /* a last short panel: word by word */
        for (int64_t q = 0; q < kc / 2; q++)
          for (int64_t r = 0; r < n; r++) memcpy(d + q * R + r, b + r * src->s_r + 2 * q, 4);
      } else {
        for (int64_t r = 0; r < n; r += 8) {
          int64_t r8 = r + 8 <= n ? r : n - 8; /* the last group overlaps the one before */
          transpose8_f32((float *)(void *)(d + r8), R, (const float *)(const void *)(b + r8 * src->s_r),
                         src->s_r / 2, kc / 2);
        }
      }
      if (kc % 2)
        for (int64_t r = 0; r < n; r++) d[(k2 - 1) * R + r] = b[r * src->s_r + kc - 1];
      for (int64_t q = 0; q < k2; q++)
        for (int64_t r = n; r < R; r++) d[q * R + r] = 0;
    }
    return 1;
  }
#else
  (void)dst, (void)R, (void)src, (void)r0, (void)rows, (void)kk0, (void)kc;
#endif
  return 0;
}

void rt_gemm_pack_bf16x2(uint32_t *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                         int64_t kk0, int64_t kc) {
  if (pack_bf16x2_fast(dst, R, src, r0, rows, kk0, kc)) return;
  /* Gather the bits k-major first (any strides, slices), then pair them. */
  uint16_t tmp[16384];
  const int64_t chunk = (int64_t)(sizeof tmp / sizeof tmp[0]) / R & ~(int64_t)1; /* even */
  for (int64_t q0 = 0; q0 < kc; q0 += chunk) {
    int64_t len = kc - q0 < chunk ? kc - q0 : chunk;
#define SEG_BITS_(off, at, seg) \
  pack_bf16_bits(tmp + (off) * R, R, (const uint16_t *)(at), rows, seg, src->s_r, src->s_k)
    FOR_EACH_SEGMENT(src, r0, kk0 + q0, len, 2, SEG_BITS_)
    uint32_t *d = dst + q0 / 2 * R;
    for (int64_t p = 0; p + 1 < len; p += 2)
      for (int r = 0; r < R; r++) d[p / 2 * R + r] = tmp[p * R + r] | (uint32_t)tmp[(p + 1) * R + r] << 16;
    if (len % 2)
      for (int r = 0; r < R; r++) d[(len - 1) / 2 * R + r] = tmp[(len - 1) * R + r];
  }
}

/* ---- several panels at once ------------------------------------------------ */

#define PACK_PANELS_LOOP(SUF, T, KDIV)                                                         \
  for (int64_t q = 0; q * R < rows; q++)                                                       \
    rt_gemm_pack_##SUF(dst + q * R * ((kc + KDIV - 1) / KDIV), R, src, r0 + q * R,             \
                       rows - q * R < R ? rows - q * R : R, kk0, kc);

void rt_gemm_pack_panels_f32(float *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                             int64_t kk0, int64_t kc) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (src->dtype == NRT_FLOAT32 && src->s_r == 1 && R <= 32 && rows > R && cpu_has(1)) {
#define SEG_PANELS_(off, at, len) \
  copy_panels_avx512(dst + (off) * R, R, kc, (const float *)(at), rows, len, src->s_k)
    FOR_EACH_SEGMENT(src, r0, kk0, kc, 4, SEG_PANELS_)
    return;
  }
#endif
  PACK_PANELS_LOOP(f32, float, 1)
}

void rt_gemm_pack_panels_part_f32(float *dst, int R, int64_t kstride, const rt_gemm_src *src, int64_t r0,
                                  int64_t rows, int64_t kk0, int64_t len) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (src->dtype == NRT_FLOAT32 && src->s_r == 1 && R <= 32 && cpu_has(1)) {
#define SEG_PART_(off, at, seg) \
  copy_panels_avx512(dst + (off) * R, R, kstride, (const float *)(at), rows, seg, src->s_k)
    FOR_EACH_SEGMENT(src, r0, kk0, len, 4, SEG_PART_)
    return;
  }
#endif
  for (int64_t q = 0; q * R < rows; q++)
    rt_gemm_pack_f32(dst + q * R * kstride, R, src, r0 + q * R, rows - q * R < R ? rows - q * R : R, kk0, len);
}

void rt_gemm_pack_panels_f64(double *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                             int64_t kk0, int64_t kc) {
  PACK_PANELS_LOOP(f64, double, 1)
}

void rt_gemm_pack_panels_bf16x2(uint32_t *dst, int R, const rt_gemm_src *src, int64_t r0,
                                int64_t rows, int64_t kk0, int64_t kc) {
  if (pack_bf16x2_fast(dst, R, src, r0, rows, kk0, kc)) return;
  PACK_PANELS_LOOP(bf16x2, uint32_t, 2)
}
