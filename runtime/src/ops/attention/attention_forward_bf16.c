/* SDPA_FORWARD for bfloat16 q, k, v on the GEMM's bfloat16 micro-kernel
 * (AMX tiles or AVX512-BF16 pairs; gemm.h), the way PyTorch CPU's flash
 * attention computes bfloat16: scores S = q k^T from exact bfloat16
 * products summed in float32, the online softmax in float32, the weights
 * P rounded to bfloat16 for O += P v (float32 accumulation), O divided by
 * the float32 denominator at the end. The float32-tile path
 * (attention_forward.c) keeps P in float32; it is this path's reference
 * twin and still serves float16, float32, and bfloat16 on CPUs without a
 * bfloat16 kernel (or under TORCHNEURON_ISA).
 *
 * As there, scores are computed transposed, S^T = k q^T (k as the
 * product's A panels, q as its B panels, packed once per task), so the
 * float32 path's column softmax (rt_attn_softmax_block) runs on them
 * unchanged; the weights P^T are rounded to bfloat16 and packed as the A
 * panels of O += P v.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attention/attention_bf16.h"
#include "ops/engine/thread_pool.h"

typedef struct bf16_ctx {
  const rt_attn *a;
  const rt_gemm_kernel *ker;
  const nrt_tensor_view *out, *lse;
  int64_t q_blocks;
  int64_t q_rows, k_rows; /* BQ and BK rounded up to the kernel's mr */
  int64_t ld_o;           /* Ev rounded up to its nr */
  int64_t k2_e, k2_k;  /* k pairs of q k^T (E) and of P v (BK) */
  int failed;
} bf16_ctx;

typedef struct bf16_tiles {
  uint32_t *qb, *ka, *pa, *vb; /* packed panels */
  uint16_t *p;                 /* P^T in bfloat16, BK x BQ */
  float *s, *bias, *z, *o, *m, *l, *alpha;
} bf16_tiles;

static void bf16_block(const bf16_ctx *c, const bf16_tiles *t, int64_t task) {
  const rt_attn *a = c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t qb = task % c->q_blocks, bh = task / c->q_blocks;
  int64_t b = bh / a->H, h = bh % a->H, hk = h / a->group;
  int64_t q0 = qb * BQ, nq = a->L - q0 < BQ ? a->L - q0 : BQ;
  rt_gemm_src qs = rt_attn_bf16_src(a->q, b, h, 2), ks = rt_attn_bf16_src(a->k, b, hk, 2), vs = rt_attn_bf16_src(a->v, b, hk, 3);
  rt_gemm_pack_panels_bf16x2(t->qb, c->ker->nr, &qs, q0, nq, 0, a->E);
  memset(t->o, 0, (size_t)(c->q_rows * c->ld_o) * sizeof(float));
  for (int64_t i = 0; i < BQ; i++) t->m[i] = -INFINITY, t->l[i] = 0;
  int64_t kend = a->causal && q0 + nq < a->S ? q0 + nq : a->S;
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    int64_t nk = a->S - k0 < BK ? a->S - k0 : BK;
    rt_attn_bf16_pack_a(c->ker, t->ka, &ks, k0, nk, 0, a->E);
    rt_attn_bf16_product(c->ker, c->k2_e, t->ka, nk, t->qb, nq, t->s, BQ, 0);
    int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t->bias, BQ, 1);
    if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t->z, BQ, 1);
    rt_attn_softmax_block(t->s, has_bias ? t->bias : NULL, a->dropout ? t->z : NULL, nk, BQ,
                          a->causal ? k0 - q0 : -((int64_t)1 << 40), nq, a->scale, t->m, t->l, t->alpha);
    rt_attn_scale_rows(t->o, nq, c->ld_o, t->alpha);
    rt_attn_bf16_round(t->s, nk * BQ, t->p);
    rt_gemm_src ps = {(const char *)t->p, NRT_BFLOAT16, 1, BQ, 0, nk}; /* P: rows are queries */
    rt_attn_bf16_pack_a(c->ker, t->pa, &ps, 0, nq, 0, nk);
    rt_gemm_pack_panels_bf16x2(t->vb, c->ker->nr, &vs, 0, a->Ev, k0, nk);
    rt_attn_bf16_product(c->ker, (nk + 1) / 2, t->pa, nq, t->vb, a->Ev, t->o, c->ld_o, 1);
  }
  float *lse = (float *)c->lse->data;
  const int64_t *ls = c->lse->strides;
  for (int64_t i = 0; i < nq; i++) {
    float l = t->l[i], *o = t->o + i * c->ld_o;
    float *dst = lse + b * ls[0] + h * ls[1] + (q0 + i) * ls[2];
    if (l == 0) { /* every key masked: PyTorch's _safe_softmax gives 0 */
      memset(o, 0, (size_t)c->ld_o * sizeof(float));
      *dst = INFINITY;
    } else {
      float r = 1.0f / l;
      for (int64_t e = 0; e < c->ld_o; e++) o[e] *= r;
      *dst = t->m[i] + logf(l);
    }
  }
  rt_attn_store(c->out, b, h, q0, nq, 0, a->Ev, t->o, c->ld_o);
}

enum { BF16_TILES = 12 };

static void bf16_range(int64_t begin, int64_t end, void *arg) {
  bf16_ctx *c = arg;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  /* sizes in floats (4-byte words); P^T's bfloat16 takes half */
  int64_t sizes[BF16_TILES] = {BQ * c->k2_e,      c->k_rows * c->k2_e, c->q_rows * c->k2_k,
                               c->ld_o * c->k2_k, (BK * BQ + 1) / 2,   c->k_rows * BQ,
                               BK * BQ,           BK * BQ,             c->q_rows * c->ld_o,
                               BQ,                BQ,                  BQ};
  float *buf[BF16_TILES] = {0};
  int ok = 1;
  for (int k = 0; k < BF16_TILES; k++) ok &= (buf[k] = rt_attn_alloc(sizes[k])) != NULL;
  if (ok) {
    bf16_tiles t = {(uint32_t *)buf[0], (uint32_t *)buf[1], (uint32_t *)buf[2], (uint32_t *)buf[3],
                    (uint16_t *)buf[4], buf[5], buf[6], buf[7], buf[8], buf[9], buf[10], buf[11]};
    if (c->ker->begin) c->ker->begin();
    for (int64_t task = begin; task < end; task++) bf16_block(c, &t, task);
    if (c->ker->end) c->ker->end();
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  for (int k = 0; k < BF16_TILES; k++) free(buf[k]);
}

int rt_attn_forward_bf16(const rt_attn *a, const nrt_tensor_view *out, const nrt_tensor_view *lse,
                         nrt_status *status) {
  const rt_gemm_kernel *ker = rt_attn_bf16_kernel(a);
  if (!ker) return 0;
  bf16_ctx c = {0};
  c.a = a;
  c.ker = ker;
  c.out = out;
  c.lse = lse;
  c.q_blocks = (a->L + RT_ATTN_BQ - 1) / RT_ATTN_BQ;
  c.q_rows = rt_attn_round_up(RT_ATTN_BQ, ker->mr);
  c.k_rows = rt_attn_round_up(RT_ATTN_BK, ker->mr);
  c.ld_o = rt_attn_round_up(a->Ev, ker->nr);
  c.k2_e = (a->E + 1) / 2;
  c.k2_k = (RT_ATTN_BK + 1) / 2;
  int64_t tasks = a->B * a->H * c.q_blocks;
  *status = NRT_SUCCESS;
  if (tasks == 0) return 1;
  rt_metric_add(NRT_METRIC_ATTENTION_BF16_TILES, 1);
  rt_parallel_for(tasks, 1, bf16_range, &c);
  if (c.failed)
    *status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_forward: cannot allocate the kernel's tiles");
  return 1;
}
