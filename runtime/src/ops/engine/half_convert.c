/* See half_convert.h. */
#include "ops/engine/half_convert.h"

#include "cpu_isa.h"
#include "ops/engine/half_convert_simd.h"
#include "ops/engine/scalar_types.h"

static void to_float_c(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = rt_half_to_float(src[i]);
}

static void from_float_c(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = rt_half_from_float(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void to_float_avx512(float *dst, const uint16_t *src,
                                                                                  int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i))));
  to_float_c(dst + i, src + i, n - i);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void from_float_avx512(uint16_t *dst, const float *src,
                                                                                    int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(void *)(dst + i), rt_half16_from_ps(_mm512_loadu_ps(src + i)));
  from_float_c(dst + i, src + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void to_float_f16c(float *dst, const uint16_t *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
  to_float_c(dst + i, src + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void from_float_f16c(uint16_t *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(void *)(dst + i), rt_half8_from_ps(_mm256_loadu_ps(src + i)));
  from_float_c(dst + i, src + i, n - i);
}

void rt_half_block_to_float(float *dst, const uint16_t *src, int64_t n) {
  const nrt_isa isa = rt_isa();
  if (isa == NRT_ISA_AVX512) to_float_avx512(dst, src, n);
  else if (isa == NRT_ISA_AVX2) to_float_f16c(dst, src, n);
  else to_float_c(dst, src, n);
}

void rt_half_block_from_float(uint16_t *dst, const float *src, int64_t n) {
  const nrt_isa isa = rt_isa();
  if (isa == NRT_ISA_AVX512) from_float_avx512(dst, src, n);
  else if (isa == NRT_ISA_AVX2) from_float_f16c(dst, src, n);
  else from_float_c(dst, src, n);
}
#else
void rt_half_block_to_float(float *dst, const uint16_t *src, int64_t n) { to_float_c(dst, src, n); }
void rt_half_block_from_float(uint16_t *dst, const float *src, int64_t n) { from_float_c(dst, src, n); }
#endif
