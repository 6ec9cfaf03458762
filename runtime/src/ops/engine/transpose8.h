/* An 8 x 8 block of 32-bit words transposed through AVX registers, shared
 * by the GEMM's packing (gemm_pack.c) and the recurrent cells' reading of
 * transposed gates (nn_transpose.c): row q of dst (dst + q * ld_dst) gets
 * column q of src, whose rows are ld_src words apart. Unpack, shuffle,
 * then swap 128-bit halves; the words are only moved, so any 32-bit type
 * (float, bfloat16 pairs) goes through; nothing needs alignment. */
#ifndef RT_OPS_ENGINE_TRANSPOSE8_H
#define RT_OPS_ENGINE_TRANSPOSE8_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

__attribute__((target("avx2"))) static inline void rt_transpose8x8_32(void *dst, int64_t ld_dst, const void *src,
                                                                      int64_t ld_src) {
  const float *s = src;
  float *d = dst;
  __m256 v[8], t[8], u[8];
  for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps(s + i * ld_src);
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
    _mm256_storeu_ps(d + q * ld_dst, _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
    _mm256_storeu_ps(d + (q + 4) * ld_dst, _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
  }
}
#endif

#endif
