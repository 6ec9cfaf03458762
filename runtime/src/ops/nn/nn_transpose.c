/* Column-major blocks into row-major form (nn_transpose.h). */
#include "ops/nn/nn_transpose.h"

#include "cpu_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

void rt_nn_transpose32_ref(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[r * ld_dst + c] = src[c * ld_src + r];
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The 8 x 8 block at src (columns ld_src apart) into dst (rows ld_dst
 * apart): unpack, shuffle, then swap 128-bit halves. */
__attribute__((target("avx2"))) static inline void block8(uint32_t *dst, int64_t ld_dst, const uint32_t *src,
                                                          int64_t ld_src) {
  __m256 v[8], t[8], u[8];
  for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps((const float *)(src + i * ld_src));
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
    u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
    u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    _mm256_storeu_ps((float *)(dst + q * ld_dst), _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
    _mm256_storeu_ps((float *)(dst + (q + 4) * ld_dst), _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
  }
}

__attribute__((target("avx2"))) static void transpose32_avx2(uint32_t *dst, int64_t ld_dst, const uint32_t *src,
                                                             int64_t ld_src, int64_t rows, int64_t cols) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) block8(dst + r * ld_dst + c, ld_dst, src + c * ld_src + r, ld_src);
  /* The edges: the last columns of the whole rows, then the last rows. */
  rt_nn_transpose32_ref(dst + c8, ld_dst, src + c8 * ld_src, ld_src, r8, cols - c8);
  rt_nn_transpose32_ref(dst + r8 * ld_dst, ld_dst, src + r8, ld_src, rows - r8, cols);
}
#endif

void rt_nn_transpose32(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                       int64_t cols) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX2) {
    transpose32_avx2(dst, ld_dst, src, ld_src, rows, cols);
    return;
  }
#endif
  rt_nn_transpose32_ref(dst, ld_dst, src, ld_src, rows, cols);
}
