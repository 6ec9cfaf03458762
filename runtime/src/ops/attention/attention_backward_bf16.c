/* The backward passes of bfloat16 SDPA (attention_backward.c says what they
 * compute) on the GEMM's bfloat16 micro-kernel, the way PyTorch CPU's flash
 * attention backward computes bfloat16: the scores S = q k^T and
 * dP = grad_out v^T from exact bfloat16 products summed in float32, the
 * weights P and dS = P (dP Z - D) in float32, then P Z and dS rounded to
 * bfloat16 for grad_v += (P Z)^T grad_out, grad_k += dS^T q and
 * grad_q += dS k, accumulated in float32 (PyTorch rounds its accumulators
 * to bfloat16 after every block; here they are rounded once, at the end)
 * and scaled at the end. The float32-tile path is this file's reference
 * twin and serves float16, float32, and bfloat16 without a bfloat16 kernel.
 *
 * The passes are the float32 path's: key blocks (grad_k, grad_v), query
 * blocks (grad_q, grad_scores) and one pass per key/value head (all three).
 * All of them compute a block pair (query block, key block) with the same
 * calls on the same packed operands (one block of queries, q_side; one
 * of keys, k_side), tiles transposed as keys x queries, and sum each
 * gradient element over the same block pairs in the same order (grad_k,
 * grad_v: query head, then query block; grad_q: key block): the passes
 * agree bit for bit, so the choice between them may depend on the thread
 * count. Products run over whole register tiles; what the causal triangle
 * zeroes adds exact zeros.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attention/attention_bf16.h"
#include "ops/engine/thread_pool.h"

/* A shift beyond any block: the window of a launch without causal. */
#define NO_CAUSAL ((int64_t)1 << 40)

typedef struct bwd_ctx {
  const rt_attn *a;
  const rt_attn_grads *g;
  const rt_gemm_kernel *ker;
  rt_attn_pass pass;
  int64_t q_blocks, k_blocks;          /* per head */
  int64_t q_rows, k_rows;              /* BQ and BK rounded up to the kernel's mr */
  int64_t ld_e, ld_ev;                 /* E and Ev rounded up to its nr */
  int64_t k2_e, k2_ev;                 /* k pairs over E and Ev */
  int64_t q_words[6], k_words[3];      /* the pieces of a side, in 32-bit words */
  int64_t q_side_words, k_side_words;  /* their sums */
  int failed;
} bwd_ctx;

/* A block of queries of head (b, h), packed: q and grad_out as B panels
 * over the head dims (columns: queries; for S and dP) and over the
 * queries (columns: head dims; for grad_k and grad_v); lse and D. */
typedef struct q_side {
  uint32_t *q_e, *g_e, *q_l, *g_l;
  float *lse, *delta;
  int64_t q0, nq;
} q_side;

/* A block of keys of head (b, hk): k and v as A panels over the head dims
 * (rows: keys), k as B panels over the keys (for grad_q). */
typedef struct k_side {
  uint32_t *k_e, *v_e, *k_s;
  int64_t k0, nk;
} k_side;

/* A thread's tiles for one block pair (transposed: BK keys x BQ queries). */
typedef struct pair_tiles {
  float *s, *dp, *pz, *bias, *z;
  uint16_t *p16, *ds16;     /* P Z and dS in bfloat16 */
  uint32_t *pa, *dsa, *dqa; /* (P Z)^T, dS^T and dS as A panels */
} pair_tiles;

/* Pieces rounded to 16 words keep every panel 64-byte aligned. */
static int64_t words16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static q_side q_side_at(const bwd_ctx *c, uint32_t *base) {
  q_side s;
  s.q_e = base;
  s.g_e = s.q_e + c->q_words[0];
  s.q_l = s.g_e + c->q_words[1];
  s.g_l = s.q_l + c->q_words[2];
  s.lse = (float *)(s.g_l + c->q_words[3]);
  s.delta = s.lse + c->q_words[4];
  return s;
}

static k_side k_side_at(const bwd_ctx *c, uint32_t *base) {
  k_side s;
  s.k_e = base;
  s.v_e = s.k_e + c->k_words[0];
  s.k_s = s.v_e + c->k_words[1];
  return s;
}

static void pack_q_side(const bwd_ctx *c, q_side *s, int64_t b, int64_t h, int64_t q0) {
  const rt_attn *a = c->a;
  const int nr = c->ker->nr;
  s->q0 = q0;
  s->nq = a->L - q0 < RT_ATTN_BQ ? a->L - q0 : RT_ATTN_BQ;
  rt_gemm_src q_rows = rt_attn_bf16_src(a->q, b, h, 2), q_cols = rt_attn_bf16_src(a->q, b, h, 3);
  rt_gemm_src g_rows = rt_attn_bf16_src(c->g->grad_out, b, h, 2);
  rt_gemm_src g_cols = rt_attn_bf16_src(c->g->grad_out, b, h, 3);
  rt_gemm_pack_panels_bf16x2(s->q_e, nr, &q_rows, q0, s->nq, 0, a->E);
  rt_gemm_pack_panels_bf16x2(s->g_e, nr, &g_rows, q0, s->nq, 0, a->Ev);
  rt_gemm_pack_panels_bf16x2(s->q_l, nr, &q_cols, 0, a->E, q0, s->nq);
  rt_gemm_pack_panels_bf16x2(s->g_l, nr, &g_cols, 0, a->Ev, q0, s->nq);
  rt_attn_load_stats(c->g->stats, b, h, q0, s->nq, RT_ATTN_BQ, s->lse, s->delta);
}

static void pack_k_side(const bwd_ctx *c, k_side *s, int64_t b, int64_t hk, int64_t k0) {
  const rt_attn *a = c->a;
  s->k0 = k0;
  s->nk = a->S - k0 < RT_ATTN_BK ? a->S - k0 : RT_ATTN_BK;
  rt_gemm_src k_rows = rt_attn_bf16_src(a->k, b, hk, 2), k_cols = rt_attn_bf16_src(a->k, b, hk, 3);
  rt_gemm_src v_rows = rt_attn_bf16_src(a->v, b, hk, 2);
  rt_attn_bf16_pack_a(c->ker, s->k_e, &k_rows, k0, s->nk, 0, a->E);
  rt_attn_bf16_pack_a(c->ker, s->v_e, &v_rows, k0, s->nk, 0, a->Ev);
  rt_gemm_pack_panels_bf16x2(s->k_s, c->ker->nr, &k_cols, 0, a->E, k0, s->nk);
}

/* grad_scores rows [q0, q0 + nq) x keys [k0, k0 + nk) of (b, h) from the
 * transposed tile dst (row j: key k0 + j; NULL: zeros). */
static void store_scores(const bwd_ctx *c, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0,
                         int64_t nk, const float *ds) {
  const nrt_tensor_view *gs = c->g->grad_scores;
  float *base = (float *)rt_attn_item(gs, b, h);
  for (int64_t i = 0; i < nq; i++) {
    float *row = base + (q0 + i) * gs->strides[2] + k0 * gs->strides[3];
    for (int64_t j = 0; j < nk; j++) row[j * gs->strides[3]] = ds ? ds[j * RT_ATTN_BQ + i] : 0.0f;
  }
}

/* Block pair (qs of query head h, ks): accumulates into the float32 tiles
 * dk, dv (rows: the block's keys) and dq (rows: its queries); NULL skips
 * one. */
static void pair(const bwd_ctx *c, const pair_tiles *t, int64_t b, int64_t h, const q_side *qs,
                 const k_side *ks, float *dk, float *dv, float *dq) {
  const rt_attn *a = c->a;
  const rt_gemm_kernel *ker = c->ker;
  const int64_t BQ = RT_ATTN_BQ, q0 = qs->q0, nq = qs->nq, k0 = ks->k0, nk = ks->nk;
  rt_attn_bf16_product(ker, c->k2_e, ks->k_e, nk, qs->q_e, nq, t->s, BQ, 0);
  rt_attn_bf16_product(ker, c->k2_ev, ks->v_e, nk, qs->g_e, nq, t->dp, BQ, 0);
  int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t->bias, BQ, 1);
  if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t->z, BQ, 1);
  rt_attn_backward_block(t->s, t->dp, has_bias ? t->bias : NULL, a->dropout ? t->z : NULL, t->pz, nk,
                         BQ, a->causal ? k0 - q0 : -NO_CAUSAL, nq, a->scale, qs->lse, qs->delta);
  rt_attn_bf16_round(t->s, nk * BQ, t->ds16);
  const int64_t q2 = (nq + 1) / 2, n2 = (nk + 1) / 2;
  if (dv) { /* keys x queries times queries x Ev */
    rt_attn_bf16_round(t->pz, nk * BQ, t->p16);
    rt_gemm_src p = {(const char *)t->p16, NRT_BFLOAT16, BQ, 1, 0, nq};
    rt_attn_bf16_pack_a(ker, t->pa, &p, 0, nk, 0, nq);
    rt_attn_bf16_product(ker, q2, t->pa, nk, qs->g_l, a->Ev, dv, c->ld_ev, 1);
  }
  if (dk) {
    rt_gemm_src d = {(const char *)t->ds16, NRT_BFLOAT16, BQ, 1, 0, nq};
    rt_attn_bf16_pack_a(ker, t->dsa, &d, 0, nk, 0, nq);
    rt_attn_bf16_product(ker, q2, t->dsa, nk, qs->q_l, a->E, dk, c->ld_e, 1);
  }
  if (dq) { /* dS: rows are queries, k runs over keys */
    rt_gemm_src d = {(const char *)t->ds16, NRT_BFLOAT16, 1, BQ, 0, nk};
    rt_attn_bf16_pack_a(ker, t->dqa, &d, 0, nq, 0, nk);
    rt_attn_bf16_product(ker, n2, t->dqa, nq, ks->k_s, a->E, dq, c->ld_e, 1);
  }
}

/* rows of a float32 tile (row stride ld) times scale, stored to the view. */
static void finish(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t rows, int64_t cols,
                   float *tile, int64_t ld, float scale) {
  if (scale != 1.0f)
    for (int64_t r = 0; r < rows; r++) rt_attn_row_scale(tile + r * ld, ld, scale);
  rt_attn_store(v, b, h, r0, rows, 0, cols, tile, ld);
}

/* Pieces of a thread's memory (sizes in 32-bit words, bwd_range). */
enum { T_S, T_DP, T_PZ, T_BIAS, T_Z, T_P16, T_DS16, T_PA, T_DSA, T_DQA, T_K, T_Q, T_DK, T_DV, T_DQ,
       T_COUNT };

/* Key block kb of key/value head bhk: walks the query blocks of its query
 * heads. */
static void kv_task(const bwd_ctx *c, const pair_tiles *t, float **buf, int64_t task) {
  const rt_attn *a = c->a;
  int64_t kb = task % c->k_blocks, bhk = task / c->k_blocks, b = bhk / a->Hk, hk = bhk % a->Hk;
  k_side ks = k_side_at(c, (uint32_t *)buf[T_K]);
  q_side qs = q_side_at(c, (uint32_t *)buf[T_Q]);
  pack_k_side(c, &ks, b, hk, kb * RT_ATTN_BK);
  memset(buf[T_DK], 0, (size_t)(c->k_rows * c->ld_e) * sizeof(float));
  memset(buf[T_DV], 0, (size_t)(c->k_rows * c->ld_ev) * sizeof(float));
  int64_t qstart = a->causal ? ks.k0 / RT_ATTN_BQ * RT_ATTN_BQ : 0; /* earlier queries see none */
  for (int64_t h = hk * a->group; h < (hk + 1) * a->group; h++)
    for (int64_t q0 = qstart; q0 < a->L; q0 += RT_ATTN_BQ) {
      pack_q_side(c, &qs, b, h, q0);
      pair(c, t, b, h, &qs, &ks, buf[T_DK], buf[T_DV], NULL);
    }
  finish(c->g->grad_k, b, hk, ks.k0, ks.nk, a->E, buf[T_DK], c->ld_e, a->scale);
  finish(c->g->grad_v, b, hk, ks.k0, ks.nk, a->Ev, buf[T_DV], c->ld_ev, 1.0f);
}

/* Query block qb of query head bh: walks the key blocks it sees. */
static void q_task(const bwd_ctx *c, const pair_tiles *t, float **buf, int64_t task) {
  const rt_attn *a = c->a;
  int64_t qb = task % c->q_blocks, bh = task / c->q_blocks, b = bh / a->H, h = bh % a->H;
  k_side ks = k_side_at(c, (uint32_t *)buf[T_K]);
  q_side qs = q_side_at(c, (uint32_t *)buf[T_Q]);
  pack_q_side(c, &qs, b, h, qb * RT_ATTN_BQ);
  memset(buf[T_DQ], 0, (size_t)(c->q_rows * c->ld_e) * sizeof(float));
  int64_t kend = a->causal && qs.q0 + qs.nq < a->S ? qs.q0 + qs.nq : a->S;
  if (c->g->grad_scores && kend < a->S) /* keys no query of the block sees */
    store_scores(c, b, h, qs.q0, qs.nq, kend, a->S - kend, NULL);
  for (int64_t k0 = 0; k0 < kend; k0 += RT_ATTN_BK) {
    pack_k_side(c, &ks, b, h / a->group, k0);
    pair(c, t, b, h, &qs, &ks, NULL, NULL, buf[T_DQ]);
    if (c->g->grad_scores) store_scores(c, b, h, qs.q0, qs.nq, k0, ks.nk, t->s);
  }
  finish(c->g->grad_q, b, h, qs.q0, qs.nq, a->E, buf[T_DQ], c->ld_e, a->scale);
}

/* Key/value head bhk and its query heads in one pass: packs every key
 * block once, every query block once per query head, and keeps all three
 * gradients of the head in float32. Key blocks outer, query blocks inner,
 * as in attention_backward.c's head tasks. */
static void head_task(const bwd_ctx *c, const pair_tiles *t, float **buf, int64_t bhk) {
  const rt_attn *a = c->a;
  int64_t b = bhk / a->Hk, hk = bhk % a->Hk;
  const int64_t dk_tile = c->k_rows * c->ld_e, dv_tile = c->k_rows * c->ld_ev, dq_tile = c->q_rows * c->ld_e;
  for (int64_t kb = 0; kb < c->k_blocks; kb++) {
    k_side ks = k_side_at(c, (uint32_t *)buf[T_K] + kb * c->k_side_words);
    pack_k_side(c, &ks, b, hk, kb * RT_ATTN_BK);
  }
  memset(buf[T_DK], 0, (size_t)(c->k_blocks * dk_tile) * sizeof(float));
  memset(buf[T_DV], 0, (size_t)(c->k_blocks * dv_tile) * sizeof(float));
  for (int64_t h = hk * a->group; h < (hk + 1) * a->group; h++) {
    for (int64_t qb = 0; qb < c->q_blocks; qb++) {
      q_side qs = q_side_at(c, (uint32_t *)buf[T_Q] + qb * c->q_side_words);
      pack_q_side(c, &qs, b, h, qb * RT_ATTN_BQ);
    }
    memset(buf[T_DQ], 0, (size_t)(c->q_blocks * dq_tile) * sizeof(float));
    for (int64_t kb = 0; kb < c->k_blocks; kb++) {
      k_side ks = k_side_at(c, (uint32_t *)buf[T_K] + kb * c->k_side_words);
      ks.k0 = kb * RT_ATTN_BK;
      ks.nk = a->S - ks.k0 < RT_ATTN_BK ? a->S - ks.k0 : RT_ATTN_BK;
      for (int64_t qb = a->causal ? ks.k0 / RT_ATTN_BQ : 0; qb < c->q_blocks; qb++) {
        q_side qs = q_side_at(c, (uint32_t *)buf[T_Q] + qb * c->q_side_words);
        qs.q0 = qb * RT_ATTN_BQ;
        qs.nq = a->L - qs.q0 < RT_ATTN_BQ ? a->L - qs.q0 : RT_ATTN_BQ;
        pair(c, t, b, h, &qs, &ks, buf[T_DK] + kb * dk_tile, buf[T_DV] + kb * dv_tile,
             buf[T_DQ] + qb * dq_tile);
      }
    }
    for (int64_t qb = 0; qb < c->q_blocks; qb++) {
      int64_t q0 = qb * RT_ATTN_BQ, nq = a->L - q0 < RT_ATTN_BQ ? a->L - q0 : RT_ATTN_BQ;
      finish(c->g->grad_q, b, h, q0, nq, a->E, buf[T_DQ] + qb * dq_tile, c->ld_e, a->scale);
    }
  }
  for (int64_t kb = 0; kb < c->k_blocks; kb++) {
    int64_t k0 = kb * RT_ATTN_BK, nk = a->S - k0 < RT_ATTN_BK ? a->S - k0 : RT_ATTN_BK;
    finish(c->g->grad_k, b, hk, k0, nk, a->E, buf[T_DK] + kb * dk_tile, c->ld_e, a->scale);
    finish(c->g->grad_v, b, hk, k0, nk, a->Ev, buf[T_DV] + kb * dv_tile, c->ld_ev, 1.0f);
  }
}

static void bwd_range(int64_t begin, int64_t end, void *arg) {
  bwd_ctx *c = arg;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK, tile = BK * BQ;
  const int heads = c->pass == RT_ATTN_PASS_HEADS;
  int64_t nkb = heads ? c->k_blocks : 1, nqb = heads ? c->q_blocks : 1;
  int64_t sizes[T_COUNT] = {
      [T_S] = c->k_rows * BQ,       [T_DP] = c->k_rows * BQ,     [T_PZ] = tile,
      [T_BIAS] = tile,              [T_Z] = tile,                [T_P16] = tile / 2,
      [T_DS16] = tile / 2,          [T_PA] = c->k_rows * BQ / 2, [T_DSA] = c->k_rows * BQ / 2,
      [T_DQA] = c->q_rows * BK / 2, [T_K] = nkb * c->k_side_words,
      [T_Q] = nqb * c->q_side_words,
      [T_DK] = c->pass == RT_ATTN_PASS_Q ? 0 : nkb * c->k_rows * c->ld_e,
      [T_DV] = c->pass == RT_ATTN_PASS_Q ? 0 : nkb * c->k_rows * c->ld_ev,
      [T_DQ] = c->pass == RT_ATTN_PASS_KV ? 0 : nqb * c->q_rows * c->ld_e};
  float *buf[T_COUNT] = {0};
  int ok = 1;
  for (int k = 0; k < T_COUNT; k++) ok &= (buf[k] = rt_attn_alloc(sizes[k])) != NULL;
  if (ok) {
    pair_tiles t = {buf[T_S],   buf[T_DP], buf[T_PZ], buf[T_BIAS], buf[T_Z],
                    (uint16_t *)buf[T_P16], (uint16_t *)buf[T_DS16], (uint32_t *)buf[T_PA],
                    (uint32_t *)buf[T_DSA], (uint32_t *)buf[T_DQA]};
    if (c->ker->begin) c->ker->begin();
    for (int64_t task = begin; task < end; task++) {
      if (c->pass == RT_ATTN_PASS_KV) kv_task(c, &t, buf, task);
      else if (c->pass == RT_ATTN_PASS_Q) q_task(c, &t, buf, task);
      else head_task(c, &t, buf, task);
    }
    if (c->ker->end) c->ker->end();
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  for (int k = 0; k < T_COUNT; k++) free(buf[k]);
}

int rt_attn_backward_bf16(const rt_attn *a, const rt_attn_grads *g, rt_attn_pass pass,
                          nrt_status *status) {
  const rt_gemm_kernel *ker = rt_attn_bf16_kernel(a);
  if (!ker) return 0;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  bwd_ctx c = {0};
  c.a = a;
  c.g = g;
  c.ker = ker;
  c.pass = pass;
  c.q_blocks = (a->L + BQ - 1) / BQ;
  c.k_blocks = (a->S + BK - 1) / BK;
  c.q_rows = rt_attn_round_up(BQ, ker->mr);
  c.k_rows = rt_attn_round_up(BK, ker->mr);
  c.ld_e = rt_attn_round_up(a->E, ker->nr);
  c.ld_ev = rt_attn_round_up(a->Ev, ker->nr);
  c.k2_e = (a->E + 1) / 2;
  c.k2_ev = (a->Ev + 1) / 2;
  int64_t q_words[6] = {BQ * c.k2_e, BQ * c.k2_ev, c.ld_e * BQ / 2, c.ld_ev * BQ / 2, BQ, BQ};
  int64_t k_words[3] = {c.k_rows * c.k2_e, c.k_rows * c.k2_ev, c.ld_e * BK / 2};
  for (int k = 0; k < 6; k++) c.q_side_words += c.q_words[k] = words16(q_words[k]);
  for (int k = 0; k < 3; k++) c.k_side_words += c.k_words[k] = words16(k_words[k]);
  int64_t tasks = pass == RT_ATTN_PASS_KV ? a->B * a->Hk * c.k_blocks
                  : pass == RT_ATTN_PASS_Q ? a->B * a->H * c.q_blocks
                                           : a->B * a->Hk;
  *status = NRT_SUCCESS;
  if (tasks == 0) return 1;
  rt_metric_add(NRT_METRIC_ATTENTION_BF16_BACKWARD_TILES, 1);
  rt_parallel_for(tasks, 1, bwd_range, &c);
  if (c.failed)
    *status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: cannot allocate the kernel's tiles", a->name);
  return 1;
}
