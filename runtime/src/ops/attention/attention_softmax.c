/* The forward kernels' online softmax over one block of transposed scores S
 * (row j: key k0 + j, column i: query q0 + i, row stride ld), column by
 * column so that every step is a vertical vector operation: scale, add the
 * bias (NULL: none), mask outside the window (row j's queries start at
 * first + j, first = k0 - q0 when causal, and end at nq), raise the running
 * max m, exponentiate, fold the column sums into l, and give in alpha the
 * factor exp(m_old - m_new) for the rows of O. Dropout factors (NULL: none)
 * apply after the sums.
 *
 * rt_attn_softmax_block leaves the weights P in S as float32 (the float32
 * tiles' path); rt_attn_softmax_block_bf16 writes them rounded to bfloat16
 * straight into the B panels of the bfloat16 product O^T += V^T P^T, in the
 * same pass as the exponentials: the same bits as rt_attn_softmax_block,
 * rt_attn_bf16_round and rt_gemm_pack_panels_bf16x2 one after another (its
 * reference, runtime/tests/test_attention.c), without writing S back or
 * reading it twice more.
 */
#include <math.h>
#include <string.h>
#include "ops/attention/attention_bf16.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"

/* Stands in for an absent bias, so that the block loop has no branch. */
static const float no_bias[RT_ATTN_BQ] __attribute__((aligned(64)));

static inline int32_t clamp_col(int64_t x, int64_t n) {
  return (int32_t)(x < 0 ? 0 : x > n ? n : x);
}

/* The first pass: S scaled, biased and masked in place (whole vectors below
 * the causal window are left: the exponential pass zeroes them), the
 * running max raised; muse receives the max each column's exponentials
 * subtract, alpha the factor for O. */
static inline __attribute__((always_inline)) void softmax_max(
    float *S, const float *bias, int64_t nk, int64_t ld, int64_t first, int64_t nq, float scale,
    float *restrict m, float *restrict alpha, float *restrict muse) {
  float cmax[RT_ATTN_BQ] __attribute__((aligned(64)));
  int32_t hi = clamp_col(nq, ld);
  for (int64_t i = 0; i < ld; i++) cmax[i] = m[i];
  for (int64_t j = 0; j < nk; j++) {
    float *restrict s = S + j * ld;
    const float *restrict b = bias ? bias + j * ld : no_bias;
    int32_t lo = clamp_col(first + j, ld);
    for (int32_t i = lo & ~15; i < ld; i++) {
      float x = s[i] * scale + b[i];
      x = i >= lo && i < hi ? x : -INFINITY;
      s[i] = x;
      cmax[i] = x > cmax[i] ? x : cmax[i];
    }
  }
  for (int64_t i = 0; i < ld; i++) {
    muse[i] = cmax[i] == -INFINITY ? 0.0f : cmax[i]; /* all masked so far: weights 0 */
    float f = rt_vm_expf(m[i] - muse[i]);
    alpha[i] = m[i] == -INFINITY ? 0.0f : f;
    m[i] = cmax[i];
  }
}

/* A weight of the block: exp(x - max), 0 where x is masked. */
static inline __attribute__((always_inline)) float weight(float x, float muse) {
  float p = rt_vm_expf(x - muse);
  return x == -INFINITY ? 0.0f : p;
}

static inline __attribute__((always_inline)) void fold_sums(float *restrict l, const float *alpha,
                                                            const float *csum, int64_t ld) {
  for (int64_t i = 0; i < ld; i++) l[i] = l[i] * alpha[i] + csum[i];
}

RT_SIMD_DEFINE(, , void, , rt_attn_softmax_block, (float *S, const float *bias, const float *Z, int64_t nk, int64_t ld,
                             int64_t first, int64_t nq, float scale, float *restrict m,
                             float *restrict l, float *restrict alpha),
                            (S, bias, Z, nk, ld, first, nq, scale, m, l, alpha)) {
  float muse[RT_ATTN_BQ] __attribute__((aligned(64)));
  float csum[RT_ATTN_BQ] __attribute__((aligned(64)));
  softmax_max(S, bias, nk, ld, first, nq, scale, m, alpha, muse);
  for (int64_t i = 0; i < ld; i++) csum[i] = 0.0f;
  for (int64_t j = 0; j < nk; j++) {
    float *restrict s = S + j * ld;
    int32_t lo16 = clamp_col(first + j, ld) & ~15;
    for (int32_t i = 0; i < lo16; i++) s[i] = 0.0f;
    for (int32_t i = lo16; i < ld; i++) {
      float p = weight(s[i], muse[i]);
      s[i] = p;
      csum[i] += p;
    }
  }
  fold_sums(l, alpha, csum, ld);
  if (Z)
    for (int64_t j = 0; j < nk; j++) {
      float *restrict s = S + j * ld;
      const float *restrict z = Z + j * ld;
      for (int64_t i = 0; i < ld; i++) s[i] *= z[i];
    }
}

/* The weight of x = score - max as the fast pass computes it: 0 below
 * -104 (rt_vm_expf's clamp gives 0 there too, and -inf is masked), else
 * rt_vm_expf_tame, which has rt_vm_expf's bits on [-86, 88]; x <= 0 here,
 * and *bad records an x in [-104, -86) or NaN, which only the full
 * rt_vm_expf handles. */
static inline __attribute__((always_inline)) float weight_tame(float x, int *bad) {
  float e = rt_vm_expf_tame(x);
  *bad |= !(x >= RT_VM_EXP_TAME_LO || x < -104.0f);
  return x < -104.0f ? 0.0f : e;
}

/* rt_bfloat16_from_float for a value that is not NaN. */
static inline __attribute__((always_inline)) uint32_t bf16_bits_no_nan(float f) {
  uint32_t x = rt_vm_bits(f);
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

/* Keys j and j + 1 of columns [from, to) as bfloat16 pairs at w (w[i - c0]
 * for column i): the weights of rows s0 and s1, zero in s1's columns below
 * lo1, times the dropout factors z0, z1 when dropout; their sums into
 * csum, even key first, as the row-by-row pass adds them. tame: the fast
 * pass, which returns nonzero when a value needs the full one. */
static inline __attribute__((always_inline)) int weight_pairs(
    const float *restrict s0, const float *restrict s1, const float *restrict z0,
    const float *restrict z1, int dropout, int tame, int32_t from, int32_t to, int32_t lo1,
    const float *restrict muse, float *restrict csum, uint32_t *restrict w, int32_t c0) {
  int bad = 0;
  for (int32_t i = from; i < to; i++) {
    float p0, p1;
    if (tame) {
      p0 = weight_tame(s0[i] - muse[i], &bad), p1 = weight_tame(s1[i] - muse[i], &bad);
    } else {
      p0 = weight(s0[i], muse[i]), p1 = weight(s1[i], muse[i]);
    }
    p1 = i < lo1 ? 0.0f : p1;
    csum[i] += p0;
    csum[i] += p1;
    if (dropout) p0 *= z0[i], p1 *= z1[i];
    if (tame)
      w[i - c0] = bf16_bits_no_nan(p0) | bf16_bits_no_nan(p1) << 16;
    else
      w[i - c0] = (uint32_t)rt_bfloat16_from_float(p0) | (uint32_t)rt_bfloat16_from_float(p1) << 16;
  }
  return bad;
}

/* The exponential pass over the block, writing P^T's panels; with tame,
 * returns nonzero (and must be redone without) when a weight needs the
 * full exponential. */
static inline __attribute__((always_inline)) int pairs_pass(const float *S, const float *Z, int64_t nk,
                                                            int64_t ld, int64_t first, const float *muse,
                                                            float *csum, int nr, uint32_t *pt, int tame) {
  const int64_t k2 = (nk + 1) / 2;
  int bad = 0;
  for (int64_t i = 0; i < ld; i++) csum[i] = 0.0f;
  for (int64_t j = 0; j < nk; j += 2) {
    /* an odd last key pairs with zeros: row j again, below the window */
    const int odd = j + 1 < nk;
    const float *s0 = S + j * ld, *s1 = odd ? s0 + ld : s0;
    const float *z0 = Z ? Z + j * ld : NULL, *z1 = Z && odd ? z0 + ld : z0;
    int32_t lo0 = clamp_col(first + j, ld) & ~15;
    int32_t lo1 = odd ? clamp_col(first + j + 1, ld) & ~15 : (int32_t)ld;
    for (int32_t c0 = 0; c0 < ld; c0 += nr) {
      /* panel c0 / nr holds columns c0 .. c0 + nr - 1, k2 rows of nr words */
      uint32_t *w = pt + (c0 / nr) * nr * k2 + (j / 2) * nr;
      int32_t from = lo0 > c0 ? (lo0 < c0 + nr ? lo0 : c0 + nr) : c0;
      for (int32_t i = c0; i < from; i++) w[i - c0] = 0;
      if (Z)
        bad |= weight_pairs(s0, s1, z0, z1, 1, tame, from, c0 + nr, lo1, muse, csum, w, c0);
      else
        bad |= weight_pairs(s0, s1, NULL, NULL, 0, tame, from, c0 + nr, lo1, muse, csum, w, c0);
    }
  }
  return bad;
}

RT_SIMD_DEFINE(, , void, , rt_attn_softmax_block_bf16,
               (float *S, const float *bias, const float *Z, int64_t nk, int64_t ld, int64_t first,
                int64_t nq, float scale, float *restrict m, float *restrict l, float *restrict alpha,
                int nr, uint32_t *restrict pt),
               (S, bias, Z, nk, ld, first, nq, scale, m, l, alpha, nr, pt)) {
  float muse[RT_ATTN_BQ] __attribute__((aligned(64)));
  float csum[RT_ATTN_BQ] __attribute__((aligned(64)));
  softmax_max(S, bias, nk, ld, first, nq, scale, m, alpha, muse);
  if (pairs_pass(S, Z, nk, ld, first, muse, csum, nr, pt, 1))
    pairs_pass(S, Z, nk, ld, first, muse, csum, nr, pt, 0);
  fold_sums(l, alpha, csum, ld);
}

RT_SIMD_DEFINE(, , void, , rt_attn_scale_rows, (float *O, int64_t n, int64_t ld, const float *alpha), (O, n, ld, alpha)) {
  for (int64_t i = 0; i < n; i++)
    if (alpha[i] != 1.0f) {
      float *restrict o = O + i * ld;
      for (int64_t e = 0; e < ld; e++) o[e] *= alpha[i];
    }
}

RT_SIMD_DEFINE(, , void, , rt_attn_scale_cols, (float *O, int64_t n, int64_t ld, int64_t cols, const float *alpha),
               (O, n, ld, cols, alpha)) {
  for (int64_t c = 0; c < cols; c += 16) {
    float f[16] __attribute__((aligned(64))); /* a copy: O cannot alias it */
    int ones = 1;
    for (int64_t i = 0; i < 16; i++) f[i] = alpha[c + i], ones &= f[i] == 1.0f;
    if (ones) continue;
    for (int64_t e = 0; e < n; e++) {
      float *restrict o = O + e * ld + c;
      for (int64_t i = 0; i < 16; i++) o[i] *= f[i];
    }
  }
}
