/* The attention kernels' bridge to the GEMM's bfloat16 micro-kernel
 * (gemm.h: AMX tiles or AVX512-BF16 pairs), shared by the bfloat16 forward
 * and backward: packing operands into its panels, register-tile products
 * into float32 tiles, and rounding float32 tiles to bfloat16.
 */
#ifndef NEURONRT_OPS_ATTENTION_BF16_H
#define NEURONRT_OPS_ATTENTION_BF16_H

#include "ops/attention/attention_tiles.h"
#include "ops/gemm/gemm.h"

/* The best bfloat16 micro-kernel when a's operands are bfloat16 and every
 * product fits one k block and whole register tiles of queries; NULL when
 * the float32-tile path must run. */
const rt_gemm_kernel *rt_attn_bf16_kernel(const rt_attn *a);

/* n rounded up to a multiple of r. */
static inline int64_t rt_attn_round_up(int64_t n, int64_t r) { return (n + r - 1) / r * r; }

/* A packing source over item (b, h) of a 4-d view: rows along dim row_dim
 * (2 or 3), k along the other. */
rt_gemm_src rt_attn_bf16_src(const nrt_tensor_view *v, int64_t b, int64_t h, int row_dim);

/* rows (rounded up to mr) x kc of src from row r0, k kk0, as the kernel's
 * A panels. */
void rt_attn_bf16_pack_a(const rt_gemm_kernel *ker, uint32_t *dst, const rt_gemm_src *src, int64_t r0,
                         int64_t rows, int64_t kk0, int64_t kc);

/* C (rows x cols rounded up to mr x nr, row stride ldc) = A panels times
 * B panels over k2 pairs (+ C when accumulate), one register tile per
 * call: each element sums its k in the kernel's fixed order, whatever the
 * other rows and columns. */
void rt_attn_bf16_product(const rt_gemm_kernel *ker, int64_t k2, const uint32_t *a, int64_t rows,
                          const uint32_t *b, int64_t cols, float *C, int64_t ldc, int accumulate);

/* rt_attn_softmax_block with the weights P^T rounded to bfloat16 and
 * written as the B panels (nr columns each, pairs of keys) of the product
 * O^T += V^T P^T, for all ld columns; S keeps the masked scores. The same
 * bits as rt_attn_softmax_block, rt_attn_bf16_round and
 * rt_gemm_pack_panels_bf16x2 in turn (attention_softmax.c). */
void rt_attn_softmax_block_bf16(float *S, const float *bias, const float *Z, int64_t nk, int64_t ld,
                                int64_t first, int64_t nq, float scale, float *restrict m,
                                float *restrict l, float *restrict alpha, int nr, uint32_t *restrict pt);

/* Rows [q0, q0 + nq) of out at (b, h), bfloat16 with unit column stride,
 * from O^T (Ev rows of RT_ATTN_BQ queries): column i times r[i], or 0
 * where l[i] == 0 (every key masked), rounded as rt_bfloat16_from_float;
 * r and l hold RT_ATTN_BQ values. AVX-512 transposes in registers. */
void rt_attn_bf16_store_t(const nrt_tensor_view *out, int64_t b, int64_t h, int64_t q0, int64_t nq,
                          int64_t Ev, const float *ot, const float *r, const float *l);

/* n float32 values to bfloat16 (rt_bfloat16_from_float, vectorised). */
void rt_attn_bf16_round(const float *w, int64_t n, uint16_t *p);

#endif
