/* The attention kernels' bridge to the GEMM's bfloat16 micro-kernel
 * (attention_bf16.h). */
#include "ops/attention/attention_bf16.h"

#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"

const rt_gemm_kernel *rt_attn_bf16_kernel(const rt_attn *a) {
  const rt_gemm_kernel *const *list;
  if (a->q->dtype != NRT_BFLOAT16 || rt_gemm_kernels(NRT_BFLOAT16, &list) == 0) return NULL;
  const rt_gemm_kernel *ker = list[0];
  int64_t k_max = a->E > a->Ev ? a->E : a->Ev;
  if (k_max < RT_ATTN_BQ) k_max = RT_ATTN_BQ;
  if (k_max < RT_ATTN_BK) k_max = RT_ATTN_BK;
  /* one k block per product; score tiles' query columns in whole register tiles */
  if (k_max > ker->kc || RT_ATTN_BQ % ker->nr) return NULL;
  return ker;
}

rt_gemm_src rt_attn_bf16_src(const nrt_tensor_view *v, int64_t b, int64_t h, int row_dim) {
  rt_gemm_src s = {rt_attn_item(v, b, h), v->dtype, v->strides[row_dim], v->strides[5 - row_dim], 0,
                   v->shape[5 - row_dim]};
  return s;
}

void rt_attn_bf16_pack_a(const rt_gemm_kernel *ker, uint32_t *dst, const rt_gemm_src *src, int64_t r0,
                         int64_t rows, int64_t kk0, int64_t kc) {
  if (ker->bf16_pack_a)
    for (int64_t q = 0; q < rows; q += ker->mr) {
      int64_t n = rows - q < ker->mr ? rows - q : ker->mr;
      ker->bf16_pack_a(dst + q * ((kc + 1) / 2), src, r0 + q, n, kk0, kc);
    }
  else
    rt_gemm_pack_panels_bf16x2(dst, ker->mr, src, r0, rows, kk0, kc);
}

void rt_attn_bf16_product(const rt_gemm_kernel *ker, int64_t k2, const uint32_t *a, int64_t rows,
                          const uint32_t *b, int64_t cols, float *C, int64_t ldc, int accumulate) {
  const int mr = ker->mr, nr = ker->nr;
  for (int64_t i = 0; i < rows; i += mr)
    for (int64_t j = 0; j < cols; j += nr)
      ker->bf16(k2, a + i * k2, b + j * k2, nr, C + i * ldc + j, ldc, 1.0f, accumulate ? 1.0f : 0.0f);
}

RT_SIMD_DEFINE(, , void, , rt_attn_bf16_round, (const float *w, int64_t n, uint16_t *p), (w, n, p)) {
  for (int64_t j = 0; j < n; j++) p[j] = rt_bfloat16_from_float(w[j]);
}

/* ---- the forward's output: O^T's columns as bfloat16 rows ----------------- */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

#define AVX512_BW_VL __attribute__((target("avx512f,avx512bw,avx512vl")))

/* 16 x 16 floats: out[c] = column c of rows r[0..15]. Pairs of rows
 * interleaved, then quads, then 128-bit lanes gathered across quads. */
AVX512_BW_VL static inline void transpose16(const __m512 r[16], __m512 out[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
  }
  /* lane L of u[4g + j]: column 4L + j of rows 4g .. 4g + 3 */
  for (int k = 0; k < 16; k += 4) {
    u[k] = _mm512_shuffle_ps(t[k], t[k + 2], 0x44);
    u[k + 1] = _mm512_shuffle_ps(t[k], t[k + 2], 0xEE);
    u[k + 2] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    u[k + 3] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int j = 0; j < 4; j++) {
    __m512 x01 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), x23 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
    __m512 y01 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44), y23 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    out[j] = _mm512_shuffle_f32x4(x01, y01, 0x88);
    out[4 + j] = _mm512_shuffle_f32x4(x01, y01, 0xDD);
    out[8 + j] = _mm512_shuffle_f32x4(x23, y23, 0x88);
    out[12 + j] = _mm512_shuffle_f32x4(x23, y23, 0xDD);
  }
}

/* rt_bfloat16_from_float on 16 lanes. */
AVX512_BW_VL static inline __m256i bf16_of(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd), 16);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0)));
}

AVX512_BW_VL static void store_t_avx512(const nrt_tensor_view *out, int64_t b, int64_t h, int64_t q0, int64_t nq,
                                        int64_t Ev, const float *ot, const float *r, const float *l) {
  uint16_t *base = (uint16_t *)(void *)rt_attn_item(out, b, h) + q0 * out->strides[2];
  for (int64_t i0 = 0; i0 < nq; i0 += 16) {
    const __m512 rv = _mm512_loadu_ps(r + i0);
    const __mmask16 seen = _mm512_cmp_ps_mask(_mm512_loadu_ps(l + i0), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const int64_t rows = nq - i0 < 16 ? nq - i0 : 16;
    for (int64_t e0 = 0; e0 < Ev; e0 += 16) {
      __m512 in[16], col[16];
      for (int k = 0; k < 16; k++) /* zero where every key was masked */
        in[k] = e0 + k < Ev ? _mm512_maskz_mul_ps(seen, _mm512_loadu_ps(ot + (e0 + k) * RT_ATTN_BQ + i0), rv)
                            : _mm512_setzero_ps();
      transpose16(in, col);
      const __mmask16 m = (__mmask16)(Ev - e0 >= 16 ? 0xffff : (1u << (Ev - e0)) - 1);
      for (int64_t c = 0; c < rows; c++)
        _mm256_mask_storeu_epi16(base + (i0 + c) * out->strides[2] + e0, m, bf16_of(col[c]));
    }
  }
}
#endif

void rt_attn_bf16_store_t(const nrt_tensor_view *out, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t Ev,
                          const float *ot, const float *r, const float *l) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX512) {
    store_t_avx512(out, b, h, q0, nq, Ev, ot, r, l);
    return;
  }
#endif
  /* the same values element by element (CPUs with a bfloat16 kernel take
   * the path above) */
  for (int64_t i = 0; i < nq; i++) {
    uint16_t *row = (uint16_t *)(void *)rt_attn_item(out, b, h) + (q0 + i) * out->strides[2];
    for (int64_t e = 0; e < Ev; e++)
      row[e] = rt_bfloat16_from_float(l[i] == 0 ? 0.0f : ot[e * RT_ATTN_BQ + i] * r[i]);
  }
}
