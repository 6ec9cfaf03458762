/* bfloat16 C written from float32 with VCVTNE2PS2BF16 (AVX512-BF16): 32
 * values rounded per instruction, where the portable conversion
 * (rt_bfloat16_from_float, vectorised by the compiler) takes a dozen
 * integer operations per 16 and was a quarter of the time of products with
 * k = 256 (2048x256 @ 256x1024 on the AMX host).
 *
 * The instruction rounds to nearest even as rt_bfloat16_from_float does,
 * but it reads subnormal inputs as zero and turns a NaN into its quieted
 * self, not the canonical 0x7fc0. Such values are found with VFPCLASSPS
 * (which MXCSR does not affect) and the 32 values holding one are
 * converted the portable way instead, so the result is identical for
 * every input (checked over all 2^32 floats when this was written).
 */
#include "ops/gemm/gemm.h"

#include "ops/engine/scalar_types.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

#define SPECIAL_CLASSES 0xa1 /* VFPCLASSPS: quiet NaN (0x01), subnormal (0x20), signalling NaN (0x80) */

/* n (<= 32) float32 values at v to bfloat16 at c. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512bf16"))) static inline void round32(
    rt_bfloat16 *c, __m512 lo, __m512 hi, int64_t n) {
  const __mmask32 keep = (__mmask32)(n >= 32 ? 0xffffffffu : (1u << n) - 1);
  const unsigned special = _mm512_fpclass_ps_mask(lo, SPECIAL_CLASSES) |
                           (unsigned)_mm512_fpclass_ps_mask(hi, SPECIAL_CLASSES) << 16;
  if (__builtin_expect((special & keep) != 0, 0)) {
    float v[32];
    _mm512_storeu_ps(v, lo);
    _mm512_storeu_ps(v + 16, hi);
    for (int64_t j = 0; j < n; j++) c[j] = rt_bfloat16_from_float(v[j]);
    return;
  }
  _mm512_mask_storeu_epi16(c, keep, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512bf16"))) static void flush_rows(
    rt_bfloat16 *c, int64_t c_rs, const float *w, int64_t ld, const rt_bfloat16 *in, int64_t i_rs,
    float beta, int64_t rows, int64_t n) {
  const __m512 vb = _mm512_set1_ps(beta);
  if (!in && n == 32) { /* a whole register tile's rows: the common case, kept short */
    for (int64_t i = 0; i < rows; i++, c += c_rs, w += ld) {
      const __m512 lo = _mm512_loadu_ps(w), hi = _mm512_loadu_ps(w + 16);
      if (__builtin_expect((_mm512_fpclass_ps_mask(lo, SPECIAL_CLASSES) | _mm512_fpclass_ps_mask(hi, SPECIAL_CLASSES)) != 0, 0)) {
        round32(c, lo, hi, 32);
        continue;
      }
      _mm512_storeu_si512(c, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    return;
  }
  for (int64_t i = 0; i < rows; i++, c += c_rs, w += ld) {
    const rt_bfloat16 *ir = in ? in + i * i_rs : NULL;
    for (int64_t j = 0; j < n; j += 32) {
      const int64_t len = n - j < 32 ? n - j : 32;
      const __mmask16 m0 = (__mmask16)(len >= 16 ? 0xffff : (1u << len) - 1);
      const __mmask16 m1 = (__mmask16)(len >= 32 ? 0xffff : len <= 16 ? 0 : (1u << (len - 16)) - 1);
      __m512 lo = _mm512_maskz_loadu_ps(m0, w + j), hi = _mm512_maskz_loadu_ps(m1, w + j + 16);
      if (ir) { /* w + beta * in, a product then a sum, as the portable flush rounds it */
        const __m512i x = _mm512_maskz_loadu_epi16((__mmask32)(m0 | (uint32_t)m1 << 16), ir + j);
        const __m512 xl = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(x)), 16));
        const __m512 xh = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(x, 1)), 16));
        lo = _mm512_add_ps(lo, _mm512_mul_ps(vb, xl));
        hi = _mm512_add_ps(hi, _mm512_mul_ps(vb, xh));
      }
      round32(c + j, lo, hi, len);
    }
  }
}

int rt_gemm_flush_bf16_rows(rt_bfloat16 *c, int64_t c_rs, const float *w, int64_t ld, const rt_bfloat16 *in,
                            int64_t i_rs, float beta, int64_t rows, int64_t n) {
  if (!rt_isa_avx512_bf16()) return 0;
  flush_rows(c, c_rs, w, ld, in, i_rs, beta, rows, n);
  return 1;
}
#else
int rt_gemm_flush_bf16_rows(rt_bfloat16 *c, int64_t c_rs, const float *w, int64_t ld, const rt_bfloat16 *in,
                            int64_t i_rs, float beta, int64_t rows, int64_t n) {
  (void)c, (void)c_rs, (void)w, (void)ld, (void)in, (void)i_rs, (void)beta, (void)rows, (void)n;
  return 0;
}
#endif
