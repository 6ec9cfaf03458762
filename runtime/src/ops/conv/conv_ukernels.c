/* Register tiles of the blocked convolution (see conv_ukernels.h).
 *
 * AVX-512: the tile's MR x 2 vectors of 16 floats stay in registers (24 of
 * the 32 for MR = 12); each k step loads two B vectors and broadcasts the
 * MR values of A against them. AVX512_BF16 does the same with vdpbf16ps,
 * two k values per instruction. */
#include "ops/conv/conv_ukernels.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CONV_X86 1
#include <immintrin.h>
#include "cpu_isa.h"
#endif

static inline float bf16_lo(uint32_t w) {
  uint32_t u = w << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float bf16_hi(uint32_t w) {
  uint32_t u = w & 0xffff0000u;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- portable -------------------------------------------------------------- */

/* A's element (i, p) of a packed panel, or of row-major rows. */
#define A_PACKED(MR, i, p) a[(p) * (MR) + (i)]
#define A_ROWS(MR, i, p) a[(i) * lda + (p)]

#define PORTABLE_F32(MR, NAME, AT, ...)                                                            \
  static void NAME(int64_t k, const float *a, __VA_ARGS__ const float *b, float *c, int64_t ldc,    \
                   int accumulate) {                                                              \
    float acc[MR][CONV_NR] = {{0}};                                                               \
    for (int64_t p = 0; p < k; p++, b += CONV_NR)                                                 \
      for (int i = 0; i < MR; i++)                                                                \
        for (int j = 0; j < CONV_NR; j++) acc[i][j] += AT(MR, i, p) * b[j];                       \
    for (int i = 0; i < MR; i++)                                                                  \
      for (int j = 0; j < CONV_NR; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j]; \
  }

#define PORTABLE_BF16(MR, NAME, AT, ...)                                                           \
  static void NAME(int64_t k2, const uint32_t *a, __VA_ARGS__ const uint32_t *b, float *c,         \
                   int64_t ldc, int accumulate) {                                                 \
    float acc[MR][CONV_NR] = {{0}};                                                               \
    for (int64_t p = 0; p < k2; p++, b += CONV_NR)                                                \
      for (int i = 0; i < MR; i++)                                                                \
        for (int j = 0; j < CONV_NR; j++)                                                         \
          acc[i][j] += bf16_lo(AT(MR, i, p)) * bf16_lo(b[j]) + bf16_hi(AT(MR, i, p)) * bf16_hi(b[j]); \
    for (int i = 0; i < MR; i++)                                                                  \
      for (int j = 0; j < CONV_NR; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j]; \
  }

#define PORTABLE_SET(MR)                                                                  \
  PORTABLE_F32(MR, ukr_f32_portable_##MR, A_PACKED)                                       \
  PORTABLE_BF16(MR, ukr_bf16_portable_##MR, A_PACKED)                                     \
  PORTABLE_F32(MR, ukr_ra_f32_portable_##MR, A_ROWS, int64_t lda, )                       \
  PORTABLE_BF16(MR, ukr_ra_bf16_portable_##MR, A_ROWS, int64_t lda, )
PORTABLE_SET(4)
PORTABLE_SET(8)
PORTABLE_SET(12)

static const rt_conv_ukernels portable = {
    "portable",
    {NULL, ukr_f32_portable_4, ukr_f32_portable_8, ukr_f32_portable_12},
    {NULL, ukr_bf16_portable_4, ukr_bf16_portable_8, ukr_bf16_portable_12},
    {NULL, ukr_ra_f32_portable_4, ukr_ra_f32_portable_8, ukr_ra_f32_portable_12},
    {NULL, ukr_ra_bf16_portable_4, ukr_ra_bf16_portable_8, ukr_ra_bf16_portable_12}};

/* ---- AVX-512 ----------------------------------------------------------------- */

#ifdef CONV_X86
/* The end of every AVX-512 tile: MR rows of 32 floats into c (row step
 * ldc), added to what is there when accumulate is set. */
#define AVX512_STORE_TILE(MR)                                                  \
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                      \
    float *cp = c + i * ldc;                                                   \
    if (accumulate) {                                                          \
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(cp));               \
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(cp + 16));          \
    }                                                                          \
    _mm512_storeu_ps(cp, acc[i][0]);                                           \
    _mm512_storeu_ps(cp + 16, acc[i][1]);                                      \
  }

#define AVX512_F32(MR, NAME, AT, ...)                                                             \
  __attribute__((target("avx512f"))) static void NAME(                                            \
      int64_t k, const float *a, __VA_ARGS__ const float *b, float *c, int64_t ldc, int accumulate) { \
    __m512 acc[MR][2];                                                                            \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps(); \
    _Pragma("GCC unroll 4") for (int64_t p = 0; p < k; p++, b += CONV_NR) {                       \
      __builtin_prefetch(b + 8 * CONV_NR);                                                        \
      __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);                               \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                     \
        __m512 ai = _mm512_set1_ps(AT(MR, i, p));                                                 \
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                                           \
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                                           \
      }                                                                                           \
    }                                                                                             \
    AVX512_STORE_TILE(MR)                                                                         \
  }

#define AVX512_BF16(MR, NAME, AT, ...)                                                            \
  __attribute__((target("avx512f,avx512bf16"))) static void NAME(                                 \
      int64_t k2, const uint32_t *a, __VA_ARGS__ const uint32_t *b, float *c, int64_t ldc, int accumulate) { \
    __m512 acc[MR][2];                                                                            \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps(); \
    _Pragma("GCC unroll 2") for (int64_t p = 0; p < k2; p++, b += CONV_NR) {                      \
      __builtin_prefetch(b + 8 * CONV_NR);                                                        \
      __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);   \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                     \
        __m512bh ai = (__m512bh)_mm512_set1_epi32((int)AT(MR, i, p));                             \
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);                                          \
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);                                          \
      }                                                                                           \
    }                                                                                             \
    AVX512_STORE_TILE(MR)                                                                         \
  }

#define AVX512_SET(MR)                                                                    \
  AVX512_F32(MR, ukr_f32_avx512_##MR, A_PACKED)                                           \
  AVX512_BF16(MR, ukr_bf16_avx512_##MR, A_PACKED)                                         \
  AVX512_F32(MR, ukr_ra_f32_avx512_##MR, A_ROWS, int64_t lda, )                           \
  AVX512_BF16(MR, ukr_ra_bf16_avx512_##MR, A_ROWS, int64_t lda, )
AVX512_SET(4)
AVX512_SET(8)
AVX512_SET(12)
#endif

static rt_conv_ukernels best;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void choose_best(void) {
  best = portable;
#ifdef CONV_X86
  if (rt_isa() >= NRT_ISA_AVX512) {
    best.name = "avx512";
    best.f32[1] = ukr_f32_avx512_4;
    best.f32[2] = ukr_f32_avx512_8;
    best.f32[3] = ukr_f32_avx512_12;
    best.ra_f32[1] = ukr_ra_f32_avx512_4;
    best.ra_f32[2] = ukr_ra_f32_avx512_8;
    best.ra_f32[3] = ukr_ra_f32_avx512_12;
    if (rt_isa_avx512_bf16()) {
      best.name = "avx512+bf16";
      best.bf16[1] = ukr_bf16_avx512_4;
      best.bf16[2] = ukr_bf16_avx512_8;
      best.bf16[3] = ukr_bf16_avx512_12;
      best.ra_bf16[1] = ukr_ra_bf16_avx512_4;
      best.ra_bf16[2] = ukr_ra_bf16_avx512_8;
      best.ra_bf16[3] = ukr_ra_bf16_avx512_12;
    }
  }
#endif
}

const rt_conv_ukernels *rt_conv_ukernels_get(int want_portable) {
  if (want_portable) return &portable;
  pthread_once(&best_once, choose_best);
  return &best;
}
