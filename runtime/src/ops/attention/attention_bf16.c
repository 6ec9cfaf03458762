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
