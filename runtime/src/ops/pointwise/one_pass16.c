/* See one_pass16.h. */
#include "ops/pointwise/one_pass16.h"

#include <string.h>
#include "cpu_isa.h"
#include "ops/engine/half_convert_simd.h"
#include "ops/engine/scalar_types.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline
#define AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), always_inline)) static inline
#define AVX2 __attribute__((target("avx2,f16c"), always_inline)) static inline

/* ---- AVX-512: 16 elements a step, the tail under a mask ------------------ */
/* Masked only in the tail (m a constant 0xffff elsewhere, folded): a masked
 * store costs more than a plain one on Zen 4. */
AVX512 __m256i load16(const uint16_t *p, __mmask16 m) {
  return m == 0xffff ? _mm256_loadu_si256((const __m256i *)(const void *)p) : _mm256_maskz_loadu_epi16(m, p);
}
AVX512 void write16(uint16_t *p, __m256i h, __mmask16 m) {
  if (m == 0xffff) _mm256_storeu_si256((__m256i *)(void *)p, h);
  else _mm256_mask_storeu_epi16(p, m, h);
}

AVX512 __m512 load_f16(const uint16_t *p, __mmask16 m) { return _mm512_cvtph_ps(load16(p, m)); }

/* To float16 as rt_half_from_float rounds (half_convert_simd.h). */
AVX512 void store_f16(uint16_t *p, __m512 v, __mmask16 m) { write16(p, rt_half16_from_ps(v), m); }

AVX512 __m512 load_bf16(const uint16_t *p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load16(p, m)), 16));
}

#define SPECIAL_CLASSES 0xa1 /* VFPCLASSPS: quiet NaN (0x01), subnormal (0x20), signalling NaN (0x80) */

/* rt_bfloat16_from_float over a vector: to nearest even on the bits, any
 * NaN 0x7fc0. */
AVX512 __m256i bf16_portable(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}

AVX512_BF16 void store_bf16(uint16_t *p, __m512 v, __mmask16 m) {
  __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
  if (__builtin_expect(_mm512_fpclass_ps_mask(v, SPECIAL_CLASSES) != 0, 0)) h = bf16_portable(v);
  write16(p, h, m);
}

/* The C loops' expressions, operation for operation (pointwise_binary.c). */
AVX512 __m512 compute16(rt_pass16_op op, __m512 a, __m512 b, __m512 alpha) {
  if (op == RT_PASS16_ADD) return _mm512_add_ps(a, _mm512_mul_ps(alpha, b));
  if (op == RT_PASS16_MUL) return _mm512_mask_mov_ps(_mm512_mul_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
  return _mm512_div_ps(a, b);
}

/* a_step, b_step: 1 for a contiguous input, 0 for one value (va, vb). */
#define DEFINE_RUN16_(NAME, ATTRS, LOAD, STORE)                                                         \
  ATTRS void NAME(rt_pass16_op op, int a_step, int b_step, uint16_t *o, const uint16_t *pa,            \
                  const uint16_t *pb, __m512 va, __m512 vb, __m512 alpha, int64_t n) {                 \
    int64_t i = 0;                                                                                    \
    for (; i + 16 <= n; i += 16) {                                                                    \
      const __m512 a = a_step ? LOAD(pa + i, 0xffff) : va, b = b_step ? LOAD(pb + i, 0xffff) : vb;    \
      STORE(o + i, compute16(op, a, b, alpha), 0xffff);                                               \
    }                                                                                                 \
    if (i < n) {                                                                                      \
      const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                                          \
      const __m512 a = a_step ? LOAD(pa + i, m) : va, b = b_step ? LOAD(pb + i, m) : vb;              \
      STORE(o + i, compute16(op, a, b, alpha), m);                                                    \
    }                                                                                                 \
  }
DEFINE_RUN16_(run_f16_avx512, AVX512, load_f16, store_f16)
DEFINE_RUN16_(run_bf16_avx512, AVX512_BF16, load_bf16, store_bf16)

#define LAYOUTS_(RUN, OP)                                              \
  if (a_step && b_step) RUN(OP, 1, 1, o, pa, pb, va, vb, alpha, n);    \
  else if (a_step) RUN(OP, 1, 0, o, pa, pb, va, vb, alpha, n);         \
  else RUN(OP, 0, 1, o, pa, pb, va, vb, alpha, n);
/* Each (op, layout) its own loop, the choice made once per run. */
#define DISPATCH_(RUN)                                                                    \
  if (op == RT_PASS16_ADD) { LAYOUTS_(RUN, RT_PASS16_ADD) }                              \
  else if (op == RT_PASS16_MUL) { LAYOUTS_(RUN, RT_PASS16_MUL) }                         \
  else { LAYOUTS_(RUN, RT_PASS16_DIV) }

#define PASS_PARAMS_                                                                                    \
  (rt_pass16_op op, int a_step, int b_step, uint16_t *o, const uint16_t *pa, const uint16_t *pb,      \
   float a_value, float b_value, float alpha_value, int64_t n)
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pass_f16_avx512 PASS_PARAMS_ {
  const __m512 va = _mm512_set1_ps(a_value), vb = _mm512_set1_ps(b_value), alpha = _mm512_set1_ps(alpha_value);
  DISPATCH_(run_f16_avx512)
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) static void pass_bf16_avx512 PASS_PARAMS_ {
  const __m512 va = _mm512_set1_ps(a_value), vb = _mm512_set1_ps(b_value), alpha = _mm512_set1_ps(alpha_value);
  DISPATCH_(run_bf16_avx512)
}

/* ---- AVX2 with F16C (float16 only): 8 a step, the tail through buffers --- */
AVX2 __m256 load8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }

AVX2 void store8(uint16_t *p, __m256 v) { _mm_storeu_si128((__m128i *)(void *)p, rt_half8_from_ps(v)); }

AVX2 __m256 compute8(rt_pass16_op op, __m256 a, __m256 b, __m256 alpha) {
  if (op == RT_PASS16_ADD) return _mm256_add_ps(a, _mm256_mul_ps(alpha, b));
  if (op == RT_PASS16_MUL) return _mm256_blendv_ps(_mm256_mul_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_div_ps(a, b);
}

AVX2 void run_f16_avx2(rt_pass16_op op, int a_step, int b_step, uint16_t *o, const uint16_t *pa, const uint16_t *pb,
                       __m256 va, __m256 vb, __m256 alpha, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = a_step ? load8(pa + i) : va, b = b_step ? load8(pb + i) : vb;
    store8(o + i, compute8(op, a, b, alpha));
  }
  if (i < n) { /* copied in whole before anything is written: o may be pa or pb */
    uint16_t ta[8] = {0}, tb[8] = {0}, to[8];
    const size_t bytes = (size_t)(n - i) * 2;
    if (a_step) memcpy(ta, pa + i, bytes);
    if (b_step) memcpy(tb, pb + i, bytes);
    store8(to, compute8(op, a_step ? load8(ta) : va, b_step ? load8(tb) : vb, alpha));
    memcpy(o + i, to, bytes);
  }
}

__attribute__((target("avx2,f16c"))) static void pass_f16_avx2 PASS_PARAMS_ {
  const __m256 va = _mm256_set1_ps(a_value), vb = _mm256_set1_ps(b_value), alpha = _mm256_set1_ps(alpha_value);
  DISPATCH_(run_f16_avx2)
}

/* One input's layout: 1 contiguous, 0 one value (in *value, read as the C
 * loops read it), -1 neither. */
static int input_layout(nrt_dtype type, rt_pass16_input kind, const char *p, int64_t stride, float *value) {
  if (kind == RT_PASS16_FLOAT_VALUE) {
    if (stride != 0) return -1;
    memcpy(value, p, sizeof *value);
    return 0;
  }
  if (stride == 2) return 1;
  if (stride != 0) return -1;
  uint16_t h;
  memcpy(&h, p, sizeof h);
  *value = type == NRT_FLOAT16 ? rt_half_to_float(h) : rt_bfloat16_to_float(h);
  return 0;
}

int rt_one_pass16(nrt_dtype type, rt_pass16_op op, rt_pass16_input a_kind, rt_pass16_input b_kind, char **data,
                  const int64_t *strides, int64_t n, float alpha) {
  const nrt_isa isa = rt_isa();
  const int f16 = type == NRT_FLOAT16;
  if (f16 ? isa != NRT_ISA_AVX512 && isa != NRT_ISA_AVX2 : !rt_isa_avx512_bf16()) return 0;
  if (strides[0] != 2 || n <= 0) return 0;
  float a_value = 0, b_value = 0;
  const int a_step = input_layout(type, a_kind, data[1], strides[1], &a_value);
  const int b_step = input_layout(type, b_kind, data[2], strides[2], &b_value);
  if (a_step < 0 || b_step < 0 || (a_step == 0 && b_step == 0)) return 0;
  uint16_t *o = (uint16_t *)(void *)data[0];
  const uint16_t *pa = (const uint16_t *)(const void *)data[1], *pb = (const uint16_t *)(const void *)data[2];
  if (!f16) pass_bf16_avx512(op, a_step, b_step, o, pa, pb, a_value, b_value, alpha, n);
  else if (isa == NRT_ISA_AVX512) pass_f16_avx512(op, a_step, b_step, o, pa, pb, a_value, b_value, alpha, n);
  else pass_f16_avx2(op, a_step, b_step, o, pa, pb, a_value, b_value, alpha, n);
  return 1;
}
#else
int rt_one_pass16(nrt_dtype type, rt_pass16_op op, rt_pass16_input a_kind, rt_pass16_input b_kind, char **data,
                  const int64_t *strides, int64_t n, float alpha) {
  (void)type, (void)op, (void)a_kind, (void)b_kind, (void)data, (void)strides, (void)n, (void)alpha;
  return 0;
}
#endif
