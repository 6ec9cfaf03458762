/* The bfloat16 forward's fused softmax step (rt_attn_softmax_block_bf16)
 * against its reference: the float32 step rt_attn_softmax_block, then
 * rt_attn_bf16_round, then rt_gemm_pack_panels_bf16x2 into the B panels of
 * O^T += V^T P^T. The panels, the running max and sum and the rescaling
 * factors must agree bit for bit, over blocks with causal windows (on and
 * off the diagonal), partial query and key blocks (odd key counts), a bias
 * with -inf and large finite negatives, dropout factors, scores spread wide
 * enough that some weights underflow, and NaN scores.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/attention/attention_bf16.h"

enum { BQ = RT_ATTN_BQ, BK = RT_ATTN_BK };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* xorshift64, in [0, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

typedef struct block_case {
  const char *name;
  int64_t nk, nq, first; /* first: k0 - q0 when causal, very negative when not */
  float spread;          /* scores uniform in [-spread, spread] */
  int bias, dropout, nan;
} block_case;

static const block_case cases[] = {
    {"full", BK, BQ, -(1 << 30), 8, 0, 0, 0},
    {"diagonal", BK, BQ, 0, 8, 0, 0, 0},
    {"diagonal_partial", 37, 45, 0, 8, 0, 0, 0},
    {"off_diagonal_window", BK, BQ, -20, 8, 0, 0, 0},
    {"odd_keys", 33, BQ, -(1 << 30), 8, 0, 0, 0},
    {"one_key", 1, 17, -(1 << 30), 8, 0, 0, 0},
    {"underflowing_weights", BK, BQ, -(1 << 30), 400, 0, 0, 0},
    {"bias", 51, BQ, -(1 << 30), 8, 1, 0, 0},
    {"dropout", 47, 40, 0, 8, 0, 1, 0},
    {"nan_scores", BK, BQ, -(1 << 30), 8, 0, 0, 1},
};

/* The test's scratch, 64-byte aligned as rt_attn_alloc's: from libc, not
 * from the runtime, so that fault injection (make faultinject) fails only
 * the runtime's own allocations (the steps under test make none). */
static float *scratch(int64_t n) {
  float *f = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
  if (!f) abort();
  return f;
}

static void run_block(const block_case *c, int nr) {
  const int64_t ld = BQ, k2 = (c->nk + 1) / 2;
  float *s = scratch(BK * BQ), *s_ref = scratch(BK * BQ);
  float *bias = scratch(BK * BQ), *z = scratch(BK * BQ);
  uint16_t *p = (uint16_t *)(void *)scratch(BK * BQ / 2);
  uint32_t *pt = (uint32_t *)(void *)scratch(BQ * k2), *pt_ref = (uint32_t *)(void *)scratch(BQ * k2);
  float m[BQ], l[BQ], alpha[BQ], m_ref[BQ], l_ref[BQ], alpha_ref[BQ];
  for (int64_t j = 0; j < BK * BQ; j++) {
    s[j] = (float)((2 * urand() - 1) * c->spread);
    double u = urand();
    bias[j] = u < 0.1 ? -INFINITY : u < 0.15 ? -1e30f : (float)(u - 0.5);
    z[j] = urand() < 0.3 ? 0.0f : 1.25f;
  }
  if (c->nan) s[5 * ld + 7] = NAN, s[9 * ld + 30] = NAN;
  for (int64_t i = 0; i < BQ; i++) {
    /* a running state as after earlier blocks: some columns unseen */
    m[i] = i % 5 == 0 ? -INFINITY : (float)(urand() * 4);
    l[i] = m[i] == -INFINITY ? 0.0f : (float)(1 + urand() * 10);
  }
  memcpy(s_ref, s, BK * BQ * sizeof(float));
  memcpy(m_ref, m, sizeof m), memcpy(l_ref, l, sizeof l);
  const float *b = c->bias ? bias : NULL, *zz = c->dropout ? z : NULL;
  rt_attn_softmax_block(s_ref, b, zz, c->nk, ld, c->first, c->nq, 0.125f, m_ref, l_ref, alpha_ref);
  rt_attn_bf16_round(s_ref, c->nk * ld, p);
  rt_gemm_src src = {(const char *)p, NRT_BFLOAT16, 1, ld, 0, c->nk}; /* rows: queries */
  rt_gemm_pack_panels_bf16x2(pt_ref, nr, &src, 0, ld, 0, c->nk);
  rt_attn_softmax_block_bf16(s, b, zz, c->nk, ld, c->first, c->nq, 0.125f, m, l, alpha, nr, pt);
  int same = memcmp(pt, pt_ref, (size_t)(BQ * k2) * 4) == 0;
  same &= memcmp(m, m_ref, sizeof m) == 0 && memcmp(l, l_ref, sizeof l) == 0;
  same &= memcmp(alpha, alpha_ref, sizeof alpha) == 0;
  if (!same) fprintf(stderr, "case %s, nr %d: fused softmax differs from its reference\n", c->name, nr);
  CHECK(same);
  free(s), free(s_ref), free(bias), free(z), free(p), free(pt), free(pt_ref);
}

static void test_fused_softmax_matches_its_reference(void) {
  static const int nrs[] = {32, 16};
  for (size_t n = 0; n < sizeof nrs / sizeof nrs[0]; n++)
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_block(&cases[k], nrs[n]);
}

int main(void) {
  RUN(test_fused_softmax_matches_its_reference);
  return CHECK_MAIN_RESULT();
}
