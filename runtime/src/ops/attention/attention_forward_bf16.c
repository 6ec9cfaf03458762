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
 * column softmax runs down whole vectors. The output is computed
 * transposed too, O^T += v^T P^T: P^T's bfloat16 pairs of keys are then
 * the B panels the softmax pass writes directly
 * (rt_attn_softmax_block_bf16), with no rounding or packing pass, and
 * rescaling O^T's columns is a vector product. Each element of O sums the
 * same products in the same order either way (a pair's products commute),
 * so the bits are those of O += P v. k and v^T panels are packed once per
 * head and thread (kv_panels), not once per query block.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attention/attention_bf16.h"
#include "ops/engine/thread_pool.h"

/* Packed key/value panels a thread keeps per key block: a task's key
 * blocks are those of its (batch, key head), and a thread's run of tasks
 * walks the query blocks of few heads, so each block is packed once per
 * head rather than once per query block. Slot kb % slots holds key block
 * kb; its tag says of which head (-1: empty). */
enum { BF16_PANEL_CACHE_BYTES = 4 << 20 };

typedef struct bf16_ctx {
  const rt_attn *a;
  const rt_gemm_kernel *ker;
  const nrt_tensor_view *out, *lse;
  int64_t q_blocks, k_blocks, slots;
  int64_t k_rows, v_rows; /* BK and Ev rounded up to the kernel's mr */
  int64_t k2_e, k2_k;     /* k pairs of k q^T (E) and of v^T p^T (BK) */
  int64_t k_words, v_words; /* a key block's K panels and V^T panels */
  int failed;
} bf16_ctx;

typedef struct bf16_tiles {
  uint32_t *qb, *kc, *vc, *pt; /* packed panels: q^T, the K and V^T cache, P^T */
  int64_t *tags;
  float *s, *bias, *z, *o, *m, *l, *alpha;
} bf16_tiles;

/* Key block kb of (b, hk): K's A panels (keys as rows) and V^T's A panels
 * (value columns as rows, keys as k), from the cache. */
static void kv_panels(const bf16_ctx *c, bf16_tiles *t, int64_t b, int64_t hk, int64_t kb,
                      const uint32_t **ka, const uint32_t **va) {
  const rt_attn *a = c->a;
  int64_t slot = kb % c->slots, tag = (b * a->Hk + hk) * c->k_blocks + kb;
  uint32_t *kd = t->kc + slot * c->k_words, *vd = t->vc + slot * c->v_words;
  if (t->tags[slot] != tag) {
    int64_t k0 = kb * RT_ATTN_BK, nk = a->S - k0 < RT_ATTN_BK ? a->S - k0 : RT_ATTN_BK;
    rt_gemm_src ks = rt_attn_bf16_src(a->k, b, hk, 2), vs = rt_attn_bf16_src(a->v, b, hk, 3);
    rt_attn_bf16_pack_a(c->ker, kd, &ks, k0, nk, 0, a->E);
    rt_attn_bf16_pack_a(c->ker, vd, &vs, 0, a->Ev, k0, nk);
    t->tags[slot] = tag;
  }
  *ka = kd;
  *va = vd;
}

/* S^T = k q^T over key rows [0, nk) and query columns [0, nq), a register
 * tile per call. Causal (first = k0 - q0): tiles whose keys all lie past
 * every query of their columns are skipped, as the softmax never reads
 * them (row j from column (first + j) rounded down to 16). */
static void scores(const rt_gemm_kernel *ker, int64_t k2, const uint32_t *ka, int64_t nk,
                   const uint32_t *qb, int64_t nq, float *S, int64_t first) {
  for (int64_t i = 0; i < nk; i += ker->mr)
    for (int64_t j = 0; j < nq; j += ker->nr)
      if (((first + i) & ~(int64_t)15) < j + ker->nr)
        ker->bf16(k2, ka + i * k2, qb + j * k2, ker->nr, S + i * RT_ATTN_BQ + j, RT_ATTN_BQ, 1.0f, 0.0f);
}

static void bf16_block(const bf16_ctx *c, bf16_tiles *t, int64_t task) {
  const rt_attn *a = c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t qb = task % c->q_blocks, bh = task / c->q_blocks;
  int64_t b = bh / a->H, h = bh % a->H, hk = h / a->group;
  int64_t q0 = qb * BQ, nq = a->L - q0 < BQ ? a->L - q0 : BQ;
  rt_gemm_src qs = rt_attn_bf16_src(a->q, b, h, 2);
  rt_gemm_pack_panels_bf16x2(t->qb, c->ker->nr, &qs, q0, nq, 0, a->E);
  for (int64_t i = 0; i < BQ; i++) t->m[i] = -INFINITY, t->l[i] = 0;
  int64_t kend = a->causal && q0 + nq < a->S ? q0 + nq : a->S;
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    int64_t nk = a->S - k0 < BK ? a->S - k0 : BK;
    const uint32_t *ka, *va;
    kv_panels(c, t, b, hk, k0 / BK, &ka, &va);
    int64_t first = a->causal ? k0 - q0 : -((int64_t)1 << 40);
    scores(c->ker, c->k2_e, ka, nk, t->qb, nq, t->s, first);
    int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t->bias, BQ, 1);
    if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t->z, BQ, 1);
    rt_attn_softmax_block_bf16(t->s, has_bias ? t->bias : NULL, a->dropout ? t->z : NULL, nk, BQ,
                               first, nq, a->scale, t->m, t->l, t->alpha, c->ker->nr, t->pt);
    /* the first block writes O^T (the product's sum from +0 is what
     * adding it to zeros gives), the others rescale and accumulate */
    if (k0) rt_attn_scale_cols(t->o, a->Ev, BQ, rt_attn_round_up(nq, c->ker->nr), t->alpha);
    rt_attn_bf16_product(c->ker, (nk + 1) / 2, va, a->Ev, t->pt, nq, t->o, BQ, k0 > 0);
  }
  if (kend <= 0) memset(t->o, 0, (size_t)(c->v_rows * BQ) * sizeof(float)); /* no keys */
  float *lse = (float *)c->lse->data, r[RT_ATTN_BQ];
  const int64_t *ls = c->lse->strides;
  for (int64_t i = 0; i < BQ; i++) r[i] = 1.0f / t->l[i];
  for (int64_t i = 0; i < nq; i++) {
    float l = t->l[i];
    lse[b * ls[0] + h * ls[1] + (q0 + i) * ls[2]] = l == 0 ? INFINITY : t->m[i] + logf(l);
  }
  rt_attn_bf16_store_t(c->out, b, h, q0, nq, a->Ev, t->o, r, t->l);
}

enum { BF16_TILES = 12 };

static void bf16_range(int64_t begin, int64_t end, void *arg) {
  bf16_ctx *c = arg;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  /* sizes in floats (4-byte words) */
  int64_t sizes[BF16_TILES] = {BQ * c->k2_e, c->slots * c->k_words, c->slots * c->v_words,
                               BQ * c->k2_k, c->slots * 2,          c->k_rows * BQ,
                               BK * BQ,      BK * BQ,               c->v_rows * BQ,
                               BQ,           BQ,                    BQ};
  float *buf[BF16_TILES] = {0};
  int ok = 1;
  for (int k = 0; k < BF16_TILES; k++) ok &= (buf[k] = rt_attn_alloc(sizes[k])) != NULL;
  if (ok) {
    bf16_tiles t = {(uint32_t *)buf[0], (uint32_t *)buf[1], (uint32_t *)buf[2], (uint32_t *)buf[3],
                    (int64_t *)(void *)buf[4], buf[5], buf[6], buf[7], buf[8], buf[9], buf[10],
                    buf[11]};
    for (int64_t s = 0; s < c->slots; s++) t.tags[s] = -1;
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
  if (!ker || out->strides[3] != 1) return 0; /* rt_attn_bf16_store_t writes whole rows */
  bf16_ctx c = {0};
  c.a = a;
  c.ker = ker;
  c.out = out;
  c.lse = lse;
  c.q_blocks = (a->L + RT_ATTN_BQ - 1) / RT_ATTN_BQ;
  c.k_blocks = (a->S + RT_ATTN_BK - 1) / RT_ATTN_BK;
  c.k_rows = rt_attn_round_up(RT_ATTN_BK, ker->mr);
  c.v_rows = rt_attn_round_up(a->Ev, ker->mr);
  c.k2_e = (a->E + 1) / 2;
  c.k2_k = (RT_ATTN_BK + 1) / 2;
  c.k_words = c.k_rows * c.k2_e;
  c.v_words = c.v_rows * c.k2_k;
  int64_t fit = BF16_PANEL_CACHE_BYTES / (4 * (c.k_words + c.v_words));
  c.slots = c.k_blocks < fit ? c.k_blocks : fit > 0 ? fit : 1;
  int64_t tasks = a->B * a->H * c.q_blocks;
  *status = NRT_SUCCESS;
  if (tasks == 0) return 1;
  rt_metric_add(NRT_METRIC_ATTENTION_BF16_TILES, 1);
  rt_parallel_for(tasks, 1, bf16_range, &c);
  if (c.failed)
    *status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_forward: cannot allocate the kernel's tiles");
  return 1;
}
