/* GEMM micro-kernels: one register tile per ISA, and the table that picks
 * them at run time.
 *
 * Each kernel keeps an mr x nr tile of C in vector registers and, for each
 * k, loads one row of the B panel (nr values, packed or in place) and broadcasts the mr
 * values of the A column (packed, or read in place: k-major with stride lda,
 * or, in the float32 _rows twins, rows of a row-major A) against it with
 * fused multiply-adds.
 * AVX-512 has 32 registers: 12 x 32 floats (24 accumulators; the float32
 * tile in use is the hand-scheduled one of gemm_tile_f32.c), AVX2 has 16:
 * 6 x 16 floats (12 accumulators); float64 tiles have half the columns.
 * bfloat16 inputs use AVX512_BF16's pair dot products where the CPU has
 * them (twice the float32 rate), float32 kernels after packing otherwise.
 * Block sizes: the packed A block (mc x kc) stays in L2, a B micro-panel
 * (kc x nr) in L1, the packed B chunk (b_elems) in L2/L3.
 */
#include <pthread.h>
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RT_GEMM_X86 1
#include <immintrin.h>
#include "cpu_isa.h"
#endif

/* The portable tile: plain loops the compiler vectorises for the baseline. */
#define PORTABLE_KERNEL(NAME, T, MR, NR)                                                     \
  static void NAME(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c,        \
                   int64_t ldc, T alpha, T beta) {                                           \
    T acc[MR][NR] = {{0}};                                                                   \
    for (int64_t p = 0; p < k; p++, a += lda, b += ldb)                                      \
      for (int i = 0; i < MR; i++)                                                           \
        for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];                               \
    for (int i = 0; i < MR; i++)                                                             \
      for (int j = 0; j < NR; j++)                                                           \
        c[i * ldc + j] = beta == 0 ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c[i * ldc + j]; \
  }

PORTABLE_KERNEL(ukr_f32_portable, float, 4, 8)
PORTABLE_KERNEL(ukr_f64_portable, double, 4, 4)

#ifdef RT_GEMM_X86

/* An ISA's tile of MR rows x NV vectors. The k loop is unrolled by 4 with
 * the next B line prefetched; the tile lives in acc[][] which the
 * compiler keeps in registers once every index is a constant. Element
 * (i, p) of A is a[i * A_RS + p * A_KS]: A_RS 1 and A_KS lda for packed or
 * k-major panels, A_RS lda and A_KS 1 for rows of a row-major A. */
#define SIMD_KERNEL_(NAME, A_RS, A_KS, TARGET, T, V, LANES, MR, NV, LOADU, STOREU, SET1, FMA, MUL, ZERO) \
  __attribute__((target(TARGET))) static void NAME(int64_t k, const T *a, int64_t lda, const T *b, \
                                                   int64_t ldb, T *c, int64_t ldc, T alpha, T beta) { \
    V acc[MR][NV];                                                                               \
    _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++)                                        \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ZERO();                 \
    _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++)                                        \
        __builtin_prefetch(c + i * ldc + NV * LANES - 1, 1);                                     \
    _Pragma("GCC unroll 4") for (int64_t p = 0; p < k; p++, a += A_KS, b += ldb) {               \
      __builtin_prefetch(b + 8 * ldb);                                                           \
      V bv[NV];                                                                                  \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = LOADU(b + v * LANES);         \
      _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++) {                                    \
        V ai = SET1(a[i * A_RS]);                                                                \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = FMA(ai, bv[v], acc[i][v]); \
      }                                                                                          \
    }                                                                                            \
    V va = SET1(alpha), vb = SET1(beta);                                                         \
    if (beta == 0 && alpha == 1) { /* the common case: no multiply (the same result) */         \
      _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++)                                      \
          _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) STOREU(c + i * ldc + v * LANES, acc[i][v]); \
    } else if (beta == 0) {                                                                      \
      _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++)                                      \
          _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                   \
              STOREU(c + i * ldc + v * LANES, MUL(acc[i][v], va));                               \
    } else {                                                                                     \
      _Pragma("GCC unroll 32") for (int i = 0; i < MR; i++)                                      \
          _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                 \
        T *cp = c + i * ldc + v * LANES;                                                         \
        STOREU(cp, FMA(LOADU(cp), vb, MUL(acc[i][v], va)));                                      \
      }                                                                                          \
    }                                                                                            \
  }

#define SIMD_KERNEL(...) SIMD_KERNEL_(__VA_ARGS__) /* expands the argument lists below */
#define F32_AVX512 float, __m512, 16, 12, 2, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, \
                   _mm512_fmadd_ps, _mm512_mul_ps, _mm512_setzero_ps
#define F32_AVX2 float, __m256, 8, 6, 2, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, \
                 _mm256_fmadd_ps, _mm256_mul_ps, _mm256_setzero_ps
SIMD_KERNEL(ukr_f32_avx512, 1, lda, "avx512f", F32_AVX512)
SIMD_KERNEL(ukr_f32_avx512_rows, lda, 1, "avx512f", F32_AVX512)
SIMD_KERNEL(ukr_f64_avx512, 1, lda, "avx512f", double, __m512d, 8, 12, 2, _mm512_loadu_pd,
            _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_mul_pd, _mm512_setzero_pd)
SIMD_KERNEL(ukr_f32_avx2, 1, lda, "avx2,fma", F32_AVX2)
SIMD_KERNEL(ukr_f32_avx2_rows, lda, 1, "avx2,fma", F32_AVX2)
/* Narrow twins of the _rows tiles, one vector of columns (8 or 16), for
 * the last column panel of a product with few columns (f32_rows_narrow):
 * the same sums per element as the wide tiles, so bitwise the same C. On
 * Zen 4 a 256-bit FMA costs half a 512-bit one, so 8 columns take half the
 * time of 16, and 24 (one of each) three quarters of 32. */
SIMD_KERNEL(ukr_f32_avx512_rows_n16, lda, 1, "avx512f", float, __m512, 16, 12, 1, _mm512_loadu_ps,
            _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_setzero_ps)
SIMD_KERNEL(ukr_f32_avx512_rows_n8, lda, 1, "avx512f,avx512vl,fma", float, __m256, 8, 12, 1, _mm256_loadu_ps,
            _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_setzero_ps)
/* 24 columns: a 512-bit and a 256-bit vector per row, one pass over A's
 * rows (as the 16-column tile then the 8-column one, A came back from L2
 * with conflicts: rows a multiple of 4 KiB apart share L1 sets, and W
 * [4096, 1024] at m = 20 took 3.6 ms against 2.9 with 32 columns). */
#define N24_ROWS 12
__attribute__((target("avx512f,avx512vl,fma"))) static void ukr_f32_avx512_rows_n24(
    int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
    float beta) {
  __m512 lo[N24_ROWS];
  __m256 hi[N24_ROWS];
  _Pragma("GCC unroll 12") for (int i = 0; i < N24_ROWS; i++) lo[i] = _mm512_setzero_ps(), hi[i] = _mm256_setzero_ps();
  _Pragma("GCC unroll 4") for (int64_t p = 0; p < k; p++, a++, b += ldb) {
    __builtin_prefetch(b + 8 * ldb);
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 16);
    _Pragma("GCC unroll 12") for (int i = 0; i < N24_ROWS; i++) {
      const __m512 ai = _mm512_set1_ps(a[i * lda]);
      lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(ai), b1, hi[i]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  _Pragma("GCC unroll 12") for (int i = 0; i < N24_ROWS; i++) {
    float *cp = c + i * ldc;
    __m512 r0 = lo[i];
    __m256 r1 = hi[i];
    if (beta == 0 && alpha == 1) {
    } else if (beta == 0) {
      r0 = _mm512_mul_ps(r0, va), r1 = _mm256_mul_ps(r1, _mm512_castps512_ps256(va));
    } else {
      r0 = _mm512_fmadd_ps(_mm512_loadu_ps(cp), vb, _mm512_mul_ps(r0, va));
      r1 = _mm256_fmadd_ps(_mm256_loadu_ps(cp + 16), _mm512_castps512_ps256(vb),
                           _mm256_mul_ps(r1, _mm512_castps512_ps256(va)));
    }
    _mm512_storeu_ps(cp, r0);
    _mm256_storeu_ps(cp + 16, r1);
  }
}
SIMD_KERNEL(ukr_f32_avx2_rows_n8, lda, 1, "avx2,fma", float, __m256, 8, 6, 1, _mm256_loadu_ps,
            _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_setzero_ps)
SIMD_KERNEL(ukr_f64_avx2, 1, lda, "avx2,fma", double, __m256d, 4, 6, 2, _mm256_loadu_pd,
            _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_mul_pd, _mm256_setzero_pd)

/* bfloat16 pairs with AVX512_BF16: each vdpbf16ps adds two k steps' exact
 * products to 16 float32 accumulators. 12 x 32 floats as above. */
#define BF16_MR 12
__attribute__((target("avx512f,avx512bf16"))) static void ukr_bf16_avx512(
    int64_t k2, const uint32_t *a, const uint32_t *b, int64_t ldb, float *c, int64_t ldc, float alpha,
    float beta) {
  __m512 acc[BF16_MR][2];
  _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) __builtin_prefetch(c + i * ldc + 31, 1);
  _Pragma("GCC unroll 2") for (int64_t p = 0; p < k2; p++, a += BF16_MR, b += ldb) {
    __builtin_prefetch(b + 8 * ldb);
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
    _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++)
      _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) {
    float *cp = c + i * ldc + v * 16;
    __m512 r = _mm512_mul_ps(acc[i][v], va);
    _mm512_storeu_ps(cp, beta == 0 ? r : _mm512_fmadd_ps(_mm512_loadu_ps(cp), vb, r));
  }
}

/* W's rows whose stride is within a line of a multiple of 4 KiB (W [n,
 * 2048 j] bfloat16, as W [4096, 4096]) put the 12 lines a tile broadcasts
 * from in one L1 set (64 sets of 8 ways, 4 KiB apart): they evict each
 * other long before their 16 pair steps are done, and the 8-column tile
 * took 24 cycles a step where 6 would do (Zen 4, W in L3: W [1024, 4096] at
 * m = 4 1.1 ms, the same W with a padded stride 0.65). Such tiles read a
 * copy of each row's next line instead (stage_rows), from 12 different
 * sets; other strides (6 rows a set and fewer) read W in place (staging
 * cost as much as it saved there). The same words are broadcast in the same
 * order either way: the same bits. */
#define L1_WAY_BYTES 4096
#define ROWS_AHEAD 64 /* words of a staged row prefetched ahead: 4 lines */
static inline int rows_share_l1_sets(int64_t lda) {
  const int64_t r = (lda * 4) % L1_WAY_BYTES;
  return r < 64 || r > L1_WAY_BYTES - 64;
}

/* Copies the next 16 words of each of the tile's rows (zeros past `left`). */
__attribute__((target("avx512f"), always_inline)) static inline void stage_rows(uint32_t (*dst)[16], const uint32_t *a,
                                                                             int64_t lda, int64_t left) {
  const __mmask16 mk = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
  _Pragma("GCC unroll 12") for (int i = 0; i < BF16_MR; i++)
      _mm512_store_si512(dst[i], _mm512_maskz_loadu_epi32(mk, a + i * lda));
}

/* ukr_bf16_avx512's twins reading A's rows where they lie (bf16_rows: W's rows of a
 * transposed small-m product, each a run of k pairs as words), for 32
 * columns (n16 = 2, n8 = 0) and a last narrow panel of 8, 16 or 24
 * (bf16_rows_narrow). Each accumulator takes the same pair dot products in
 * the same order from zero, then alpha and beta as ukr_bf16_avx512 applies
 * them: the same bits for the columns stored, and no other column of C is
 * read or stored. A 256-bit vdpbf16ps is the 512-bit one's low half. */
__attribute__((target("avx512f,avx512vl,avx512bf16,fma"), always_inline)) static inline void bf16_rows_tile(
    int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c, int64_t ldc,
    float alpha, float beta, const int n16, const int n8) {
  __m512 acc[BF16_MR][2];
  __m256 acc8[BF16_MR];
  _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    acc8[i] = _mm256_setzero_ps();
  }
#define ROWS_STEPS(SRC, STRIDE, STEPS)                                                                          \
  _Pragma("GCC unroll 2") for (int64_t q = 0; q < (STEPS); q++, b += ldb) {                                       \
    __builtin_prefetch(b + 8 * ldb);                                                                             \
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);                                                          \
    const __m512bh b1 = n16 > 1 ? (__m512bh)_mm512_loadu_si512(b + 16) : b0;                                      \
    const __m256bh b2 = n8 ? (__m256bh)_mm256_loadu_si256((const __m256i *)(const void *)(b + 16 * n16))          \
                           : (__m256bh)_mm256_setzero_si256();                                                    \
    _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) {                                                  \
      const __m512i ai = _mm512_set1_epi32((int)(SRC)[i * (STRIDE) + q]);                                         \
      if (n16 > 0) acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)ai, b0);                                     \
      if (n16 > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)ai, b1);                                     \
      if (n8) acc8[i] = _mm256_dpbf16_ps(acc8[i], (__m256bh)_mm512_castsi512_si256(ai), b2);                      \
    }                                                                                                             \
  }
  if (!rows_share_l1_sets(lda)) {
    ROWS_STEPS(a, lda, k2)
  } else {
  /* Staged: a line (16 pair steps) of each row is copied to the stack while
   * the line before is in use (two buffers), and the rows are prefetched
   * ROWS_AHEAD words ahead (a 4 KiB-aligned stride defeats the hardware's
   * stream prefetch as well; 4 lines ahead was best of 4, 8 and 12). */
  {
    uint32_t stage[2][BF16_MR][16] __attribute__((aligned(64)));
    stage_rows(stage[0], a, lda, k2);
    for (int64_t p0 = 0; p0 < k2; p0 += 16) {
      const uint32_t *st = &stage[(p0 >> 4) & 1][0][0];
      if (p0 + 16 < k2) stage_rows(stage[((p0 >> 4) + 1) & 1], a + p0 + 16, lda, k2 - p0 - 16);
      _Pragma("GCC unroll 12") for (int i = 0; i < BF16_MR; i++) __builtin_prefetch(a + i * lda + p0 + ROWS_AHEAD);
      const int64_t steps = k2 - p0 < 16 ? k2 - p0 : 16;
      ROWS_STEPS(st, 16, steps)
    }
  }
  }
#undef ROWS_STEPS
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __m256 va8 = _mm256_set1_ps(alpha), vb8 = _mm256_set1_ps(beta);
  _Pragma("GCC unroll 32") for (int i = 0; i < BF16_MR; i++) {
    _Pragma("GCC unroll 2") for (int v = 0; v < n16; v++) {
      float *cp = c + i * ldc + v * 16;
      const __m512 r = _mm512_mul_ps(acc[i][v], va);
      _mm512_storeu_ps(cp, beta == 0 ? r : _mm512_fmadd_ps(_mm512_loadu_ps(cp), vb, r));
    }
    if (n8) {
      float *cp = c + i * ldc + 16 * n16;
      const __m256 r = _mm256_mul_ps(acc8[i], va8);
      _mm256_storeu_ps(cp, beta == 0 ? r : _mm256_fmadd_ps(_mm256_loadu_ps(cp), vb8, r));
    }
  }
}
#define BF16_ROWS_KERNEL(NAME, N16, N8)                                                                           \
  __attribute__((target("avx512f,avx512vl,avx512bf16,fma"))) static void NAME(                                        \
      int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c, int64_t ldc,       \
      float alpha, float beta) {                                                                                  \
    bf16_rows_tile(k2, a, lda, b, ldb, c, ldc, alpha, beta, N16, N8);                                            \
  }
BF16_ROWS_KERNEL(ukr_bf16_avx512_rows, 2, 0)
BF16_ROWS_KERNEL(ukr_bf16_avx512_rows_n8, 0, 1)
BF16_ROWS_KERNEL(ukr_bf16_avx512_rows_n16, 1, 0)
BF16_ROWS_KERNEL(ukr_bf16_avx512_rows_n24, 1, 1)

static const rt_gemm_kernel k_bf16_avx512 = {
    .name = "avx512bf16_12x32", .compute = NRT_BFLOAT16, .mr = BF16_MR, .nr = 32, .mc = 240,
    .kc = 512, .b_elems = 1 << 22, .bf16 = ukr_bf16_avx512, .bf16_rows = ukr_bf16_avx512_rows,
    .bf16_rows_narrow = {ukr_bf16_avx512_rows_n8, ukr_bf16_avx512_rows_n16, ukr_bf16_avx512_rows_n24}};

/* The hand-scheduled tile (gemm_tile_f32.c), and its compiler-scheduled twin
 * (the same tile sums bit for bit; listed second, so tested and timed too).
 * The hand tile takes k blocks of up to 384: one thread, the weight
 * gradients 2-4% faster than with 256 (the twin showed no difference). */
static const rt_gemm_kernel k_f32_avx512 = {
    .name = "avx512_12x32", .compute = NRT_FLOAT32, .mr = 12, .nr = 32, .mc = 240, .kc = 384,
    .b_elems = 1 << 21, .f32 = rt_gemm_ukr_f32_avx512_12x32,
    .f32_rows = rt_gemm_ukr_f32_avx512_12x32_rows,
    .f32_rows_narrow = {ukr_f32_avx512_rows_n8, ukr_f32_avx512_rows_n16, ukr_f32_avx512_rows_n24}};
static const rt_gemm_kernel k_f32_avx512_cc = {
    .name = "avx512cc_12x32", .compute = NRT_FLOAT32, .mr = 12, .nr = 32, .mc = 240, .kc = 256,
    .b_elems = 1 << 21, .f32 = ukr_f32_avx512, .f32_rows = ukr_f32_avx512_rows,
    .f32_rows_narrow = {ukr_f32_avx512_rows_n8, ukr_f32_avx512_rows_n16, ukr_f32_avx512_rows_n24}};
static const rt_gemm_kernel k_f64_avx512 = {
    .name = "avx512_12x16", .compute = NRT_FLOAT64, .mr = 12, .nr = 16, .mc = 96, .kc = 192,
    .b_elems = 1 << 20, .f64 = ukr_f64_avx512};
static const rt_gemm_kernel k_f32_avx2 = {
    .name = "avx2_6x16", .compute = NRT_FLOAT32, .mr = 6, .nr = 16, .mc = 120, .kc = 256,
    .b_elems = 1 << 21, .f32 = ukr_f32_avx2, .f32_rows = ukr_f32_avx2_rows,
    .f32_rows_narrow = {ukr_f32_avx2_rows_n8}};
static const rt_gemm_kernel k_f64_avx2 = {
    .name = "avx2_6x8", .compute = NRT_FLOAT64, .mr = 6, .nr = 8, .mc = 96, .kc = 256,
    .b_elems = 1 << 20, .f64 = ukr_f64_avx2};
#endif

static const rt_gemm_kernel k_f32_portable = {
    .name = "portable_4x8", .compute = NRT_FLOAT32, .mr = 4, .nr = 8, .mc = 64, .kc = 256,
    .b_elems = 1 << 21, .f32 = ukr_f32_portable};
static const rt_gemm_kernel k_f64_portable = {
    .name = "portable_4x4", .compute = NRT_FLOAT64, .mr = 4, .nr = 4, .mc = 64, .kc = 256,
    .b_elems = 1 << 20, .f64 = ukr_f64_portable};

static const rt_gemm_kernel *table_f32[4], *table_f64[3], *table_bf16[2];
static int table_f32_count;
static int table_count, table_bf16_count;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  int n = 0, nf32 = 0;
#ifdef RT_GEMM_X86
  if (rt_isa() >= NRT_ISA_AVX512) {
    table_f32[nf32++] = &k_f32_avx512;
    table_f32[nf32++] = &k_f32_avx512_cc;
    table_f64[n++] = &k_f64_avx512;
    if (rt_isa_amx_bf16()) table_bf16[table_bf16_count++] = &rt_gemm_kernel_amx_bf16;
    if (rt_isa_avx512_bf16()) table_bf16[table_bf16_count++] = &k_bf16_avx512;
  }
  if (rt_isa() >= NRT_ISA_AVX2) {
    table_f32[nf32++] = &k_f32_avx2;
    table_f64[n++] = &k_f64_avx2;
  }
#endif
  table_f32[nf32++] = &k_f32_portable;
  table_f64[n++] = &k_f64_portable;
  table_count = n;
  table_f32_count = nf32;
}

int rt_gemm_kernels(nrt_dtype compute, const rt_gemm_kernel *const **list) {
  pthread_once(&table_once, build_table);
  if (compute == NRT_BFLOAT16) {
    *list = table_bf16;
    return table_bf16_count;
  }
  if (compute == NRT_FLOAT64) {
    *list = table_f64;
    return table_count;
  }
  *list = table_f32;
  return table_f32_count;
}
