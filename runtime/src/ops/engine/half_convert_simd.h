/* float32 -> float16 in registers, by VCVTPS2PH with the NaN rule of
 * rt_half_from_float: to nearest even (stated in the instruction, not read
 * from MXCSR), and a NaN made sign | 0x7e00 (the instruction keeps part of
 * its payload). Shared by the block conversions (half_convert.c) and the
 * one-pass arithmetic (one_pass16.c), so that both round alike. */
#ifndef NEURONRT_OPS_HALF_CONVERT_SIMD_H
#define NEURONRT_OPS_HALF_CONVERT_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define RT_HALF_RNE 0x08 /* _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC */

/* 16 floats (AVX-512). */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m256i rt_half16_from_ps(__m512 v) {
  const __m256i h = _mm512_cvtps_ph(v, RT_HALF_RNE);
  const __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7c00));
  const __m256i canonical = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)), _mm256_set1_epi16(0x7e00));
  return _mm256_mask_blend_epi16(nan, h, canonical);
}

/* 8 floats (AVX2 with F16C). */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m128i rt_half8_from_ps(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, RT_HALF_RNE);
  const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
  const __m128i canonical = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, canonical, nan);
}
#endif

#endif
