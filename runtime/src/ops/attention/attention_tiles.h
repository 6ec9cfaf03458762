/* Shared pieces of the attention kernels (layouts in neuronrt/ops/attention.h).
 *
 * The kernels never hold an L x S matrix: they work on blocks of
 * RT_ATTN_BQ queries x RT_ATTN_BK keys, converted to float32 tiles whose rows
 * are padded to a multiple of 16 floats and aligned to 64 bytes, so the small
 * matrix products between tiles run on whole vectors (rt_attn_gemm); float32
 * views whose rows already suit a product are read in place
 * (rt_attn_direct). A thread owns its tiles; every output element is
 * written by exactly one task in a fixed order, so results do not depend on
 * the thread count.
 */
#ifndef NEURONRT_OPS_ATTENTION_TILES_H
#define NEURONRT_OPS_ATTENTION_TILES_H

#include <stdint.h>
#include "internal.h"
#include "ops/random/philox.h"

#define RT_ATTN_BQ 64
#define RT_ATTN_BK NRT_ATTENTION_KEY_BLOCK

/* Width of a padded tile row: n rounded up to 16 floats. */
static inline int64_t rt_attn_pad(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* One launch's geometry and attributes, read and checked from its op. */
typedef struct rt_attn {
  const char *name;
  int64_t B, H, Hk, L, S, E, Ev;
  int64_t group; /* H / Hk: query heads per key/value head */
  float scale;
  int causal;
  int dropout;          /* 0 when dropout_p == 0 */
  uint32_t threshold;   /* kept <=> word < threshold, unless keep_all */
  int keep_all;
  float keep_scale;     /* 1 / (1 - dropout_p) */
  rt_philox_stream stream;
  const nrt_tensor_view *q, *k, *v, *mask; /* mask is NULL when absent */
} rt_attn;

/* Reads the op's [scale, causal, dropout_p, seed, offset] and its q, k, v
 * (operands q_index .. q_index + 2) and optional mask (operand
 * q_index + 3 + mask_after, present when the op has that many operands);
 * checks shapes and dtypes; fails naming the op. */
nrt_status rt_attn_parse(const nrt_op *op, int q_index, int mask_after, rt_attn *a);

/* Element (b, h, 0, 0) of a 4-d view. */
const char *rt_attn_item(const nrt_tensor_view *v, int64_t b, int64_t h);

/* Row r, column c of a 4-d view at (b, h): loads rows [r0, r0 + nr) x
 * columns [0, nc) into dst (row-major, leading dimension ld), converting to
 * float; the padding columns [nc, ld) and rows up to pad_rows are zeroed. */
void rt_attn_load(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                  int64_t nc, float *dst, int64_t ld, int64_t pad_rows);
/* Rows of a float32 view at (b, h) that the tile products can read in
 * place, or NULL (then load a tile): unit column stride, and when as_b
 * (a B operand, read in whole 16-float vectors) also ncols a multiple of
 * 16, rows aligned to 64 bytes. *ld receives the row stride. */
const float *rt_attn_direct(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t ncols,
                            int as_b, int64_t *ld);
/* The same tile transposed: dst[c * ld + r] (ld >= nr); columns of dst past
 * nr up to ld are zeroed, and rows nc .. pad_c - 1. */
void rt_attn_load_t(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                    int64_t nc, float *dst, int64_t ld, int64_t pad_c);
/* Stores rows [r0, r0 + nr) x columns [c0, c0 + nc) from src (leading
 * dimension ld), converting (round to nearest even) to the view's dtype. */
void rt_attn_store(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                   int64_t c0, int64_t nc, const float *src, int64_t ld);

/* The additive bias of block (rows [q0, q0 + nq), keys [k0, k0 + nk)) for
 * (b, h): the mask (bool false: -inf), the causal triangle (-inf), and
 * -inf in padding columns [nk, ld). transposed: bias[j * ld + i]. Returns 0
 * when there is nothing to add (no mask, not causal or the block lies below
 * the diagonal, no padding), leaving bias untouched. */
int rt_attn_bias(const rt_attn *a, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0,
                 int64_t nk, float *bias, int64_t ld, int transposed);

/* The dropout factors of the same block: 0 for a dropped pair, keep_scale
 * for a kept one (layout as rt_attn_bias; padding is 0). */
void rt_attn_dropout(const rt_attn *a, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0,
                     int64_t nk, float *z, int64_t ld, int transposed);

/* Where the causal triangle leaves a tile product nonzero: a group of
 * rows [i, i + r) sums only p in [i + p_first, i + r - 1 + p_last] and
 * writes only columns from i + col_first (rounded down to 16); the terms
 * and columns skipped are those the triangle zeroes (or masks). NULL: the
 * whole product. Every caller that must agree bit for bit with another
 * passes the same window for the same rows. */
typedef struct rt_attn_win {
  int64_t p_first, p_last, col_first;
} rt_attn_win;

/* C[m x n] += A[m x k] B[k x n]: row-major, n a multiple of 16, B and C
 * rows aligned to 64 bytes (ldb, ldc multiples of 16). */
void rt_attn_gemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w);
/* C[m x n] += A^T B with A stored k x m (row p holds A^T's column p);
 * the same products in the same order as rt_attn_gemm on A^T. */
void rt_attn_gemm_at(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w);

/* x[j] *= s over n floats (n a multiple of 16, 64-byte aligned). */
void rt_attn_row_scale(float *x, int64_t n, float s);

/* One block of transposed scores S (row j: key k0 + j, column i: query
 * q0 + i, row stride ld) through the online softmax (attention_softmax.c
 * says how); gives in alpha the factor for the rows of O. */
void rt_attn_softmax_block(float *S, const float *bias, const float *Z, int64_t nk, int64_t ld,
                           int64_t first, int64_t nq, float scale, float *restrict m, float *restrict l,
                           float *restrict alpha);
/* Row i of O (n rows, row stride ld) *= alpha[i] where alpha[i] != 1. */
void rt_attn_scale_rows(float *O, int64_t n, int64_t ld, const float *alpha);
/* Column i < cols of O^T (n rows, row stride ld; cols a multiple of 16)
 * *= alpha[i]: the same products (groups of 16 columns whose factors are
 * all 1 are left, as x * 1 is x). */
void rt_attn_scale_cols(float *O, int64_t n, int64_t ld, int64_t cols, const float *alpha);

/* SDPA_FORWARD on the GEMM's bfloat16 micro-kernel (attention_forward_bf16.c)
 * when q is bfloat16 and the CPU has one: returns 1 with *status set when
 * it ran, 0 when the float32-tile path must. */
int rt_attn_forward_bf16(const rt_attn *a, const nrt_tensor_view *out, const nrt_tensor_view *lse,
                         nrt_status *status);

/* The backward launches' gradients and their extra inputs
 * (attention_backward.c); absent outputs are NULL. */
typedef struct rt_attn_grads {
  const nrt_tensor_view *grad_q, *grad_k, *grad_v, *grad_scores, *grad_out, *stats;
} rt_attn_grads;

/* One block of the backward in the key/value layout (row j: key k0 + j,
 * column i: query q0 + i, row stride ld; row j's queries start at
 * first + j and end at nq): S holds the scores and becomes
 * dS = P (DP Z - D); PZ receives P Z, with P = exp(S scale + bias - lse).
 * bias and Z: NULL for none. */
void rt_attn_backward_block(float *S, const float *DP, const float *bias, const float *Z, float *PZ,
                            int64_t nk, int64_t ld, int64_t first, int64_t nq, float scale,
                            const float *restrict lse, const float *restrict delta);
/* lse and D of query rows [q0, q0 + nq) of (b, h) from the float32 stats
 * (B, H, L, 2); rows nq .. pad - 1 get 0. */
void rt_attn_load_stats(const nrt_tensor_view *stats, int64_t b, int64_t h, int64_t q0, int64_t nq,
                        int64_t pad, float *lse, float *delta);

/* The passes of the backward: SDPA_BACKWARD_KV's key blocks (grad_k,
 * grad_v), SDPA_BACKWARD_Q's query blocks (grad_q, grad_scores), or one
 * pass per key/value head (all three gradients). */
typedef enum rt_attn_pass { RT_ATTN_PASS_KV, RT_ATTN_PASS_Q, RT_ATTN_PASS_HEADS } rt_attn_pass;

/* A backward pass on the GEMM's bfloat16 micro-kernel
 * (attention_backward_bf16.c) when q is bfloat16 and the CPU has one:
 * returns 1 with *status set when it ran, 0 when the float32-tile path
 * must. */
int rt_attn_backward_bf16(const rt_attn *a, const rt_attn_grads *g, rt_attn_pass pass,
                          nrt_status *status);

/* A 64-byte aligned float buffer of n floats (NULL on failure). */
float *rt_attn_alloc(int64_t n);

#endif
