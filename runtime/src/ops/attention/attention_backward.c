/* SDPA_BACKWARD_KV and SDPA_BACKWARD_Q (layouts in neuronrt/ops/attention.h).
 *
 * Both recompute the attention weights of a block from the saved log-sum-exp,
 *   P = exp(scale * q.k + bias - lse),
 * and with D = rowsum(grad_out * out) (SDPA_BACKWARD_STATS) and the dropout
 * factors Z of the forward pass:
 *   grad_v += (P Z)^T grad_out,   dS = P (Z (grad_out v^T) - D),
 *   grad_k += scale dS^T q,       grad_q += scale dS k.
 * KV tasks own a block of keys of one key/value head and walk every query
 * block of the query heads that read it (grouped-query attention); Q tasks
 * own a block of queries and walk the key blocks. Each gradient element is
 * summed by one task in a fixed order, so no atomics and no dependence on
 * the thread count; the price is computing the weights twice. When asked
 * for grad_q too and there are enough heads to share among the threads,
 * SDPA_BACKWARD_KV instead runs one pass per key/value head (head tasks
 * below) that computes the weights once and sums every gradient element
 * in the same order as the two passes: the same bits either way, so the
 * choice may depend on the thread count. Within a block, every loop runs
 * along the queries (the tiles are transposed: keys x queries), and the
 * tile products skip what the causal triangle zeroes (rt_attn_win).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attention/attention_tiles.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"
#include "ops/engine/vmath.h"

/* Heads per thread below which the one-pass kernel would leave threads
 * idle; the two passes split heads into blocks instead. */
#define RT_ATTN_HEADS_PER_THREAD 4
/* Per-thread memory above which the one-pass kernel gives way to the blocks
 * (its buffers hold whole heads: linear in L and S, but large for long
 * sequences). */
#define RT_ATTN_HEAD_BYTES_MAX ((int64_t)64 << 20)

typedef struct backward_ctx {
  rt_attn a;
  const nrt_tensor_view *grad_q, *grad_k, *grad_v, *grad_scores, *grad_out, *stats;
  int64_t blocks; /* query blocks (Q) or key blocks (KV) per head */
  int failed;
} backward_ctx;

/* The window of a block row where scores count: the causal triangle and
 * the padding past the last key or query give weight 0 (as bias -inf
 * would). A non-causal launch passes a shift beyond any block. */
#define RT_ATTN_NO_CAUSAL ((int64_t)1 << 40)

static inline int32_t clamp_col(int64_t x, int64_t n) {
  return (int32_t)(x < 0 ? 0 : x > n ? n : x);
}

/* Rows standing in for an absent bias (0) or dropout (1), so that the
 * block loops have no branches and vectorise; the same bits result. */
#define ROW_MAX (RT_ATTN_BQ > RT_ATTN_BK ? RT_ATTN_BQ : RT_ATTN_BK)
static const float no_bias[ROW_MAX] __attribute__((aligned(64)));
static const float no_dropout[ROW_MAX] __attribute__((aligned(64))) = {[0 ... ROW_MAX - 1] = 1.0f};

/* KV layout (rt_attn_backward_block): lse and D per column; first =
 * k0 - q0 when causal. */
RT_SIMD_DEFINE(, , void, , rt_attn_backward_block,
               (float *S, const float *DP, const float *bias, const float *Z, float *PZ, int64_t nk,
                int64_t ld, int64_t first, int64_t nq, float scale, const float *restrict lse,
                const float *restrict delta),
               (S, DP, bias, Z, PZ, nk, ld, first, nq, scale, lse, delta)) {
  int32_t hi = clamp_col(nq, ld);
  for (int64_t j = 0; j < nk; j++) {
    /* restrict: otherwise too many pointer pairs to check for overlap */
    float *restrict s = S + j * ld, *restrict pz = PZ + j * ld;
    const float *restrict dp = DP + j * ld, *restrict b = bias ? bias + j * ld : no_bias;
    const float *restrict z = Z ? Z + j * ld : no_dropout;
    int32_t lo = clamp_col(first + j, ld), lo16 = lo & ~15;
    for (int32_t i = 0; i < lo16; i++) s[i] = 0.0f, pz[i] = 0.0f; /* whole vectors masked */
    for (int32_t i = lo16; i < ld; i++) {
      float p = rt_vm_expf(s[i] * scale + b[i] - lse[i]);
      p = i >= lo && i < hi ? p : 0.0f;
      float zi = z[i];
      pz[i] = p * zi;
      s[i] = p * (dp[i] * zi - delta[i]);
    }
  }
}

/* Q layout: row i is query q0 + i (lse[i], delta[i]), column j key k0 + j;
 * row i's keys end at last + i (last = q0 - k0 + 1 when causal) or nk. The
 * same formula as rt_attn_backward_block, element for element. */
RT_SIMD_VOID(backward_block_q, (float *S, const float *DP, const float *bias, const float *Z,
                                int64_t nq, int64_t ld, int64_t last, int64_t nk, float scale,
                                const float *lse, const float *delta),
                               (S, DP, bias, Z, nq, ld, last, nk, scale, lse, delta)) {
  for (int64_t i = 0; i < nq; i++) {
    float *restrict s = S + i * ld;
    const float *restrict dp = DP + i * ld, *restrict b = bias ? bias + i * ld : no_bias;
    const float *restrict z = Z ? Z + i * ld : no_dropout;
    int32_t hi = clamp_col(last + i < nk ? last + i : nk, ld);
    float l = lse[i], d = delta[i];
    for (int32_t j = 0; j < ld; j++) {
      float p = rt_vm_expf(s[j] * scale + b[j] - l);
      p = j < hi ? p : 0.0f;
      float zj = z[j];
      s[j] = p * (dp[j] * zj - d);
    }
  }
}

/* The causal windows of block (q0, k0) (rt_attn_win): query q0 + i sees
 * key k0 + j iff j <= i - (k0 - q0). kind S: rows are keys, columns
 * queries (the scores); KV: rows are keys, the sum runs over queries (grad_k,
 * grad_v); Q: rows are queries, the sum runs over keys (grad_q). */
enum { WIN_S, WIN_KV, WIN_Q };

static rt_attn_win causal_win(const rt_attn *a, int64_t q0, int64_t k0, int kind) {
  int64_t far = a->L + a->S + RT_ATTN_BQ + RT_ATTN_BK, first = k0 - q0;
  rt_attn_win w = {-far, far, -far};
  if (kind == WIN_S) w.col_first = first;
  if (kind == WIN_KV) w.p_first = first;
  if (kind == WIN_Q) w.p_last = -first;
  return w;
}

void rt_attn_load_stats(const nrt_tensor_view *stats, int64_t b, int64_t h, int64_t q0, int64_t nq,
                        int64_t pad, float *lse, float *delta) {
  const int64_t *ss = stats->strides;
  const float *base = (const float *)stats->data + b * ss[0] + h * ss[1];
  for (int64_t i = 0; i < nq; i++) {
    lse[i] = base[(q0 + i) * ss[2]];
    delta[i] = base[(q0 + i) * ss[2] + ss[3]];
  }
  for (int64_t i = nq; i < pad; i++) lse[i] = 0, delta[i] = 0;
}

static nrt_status parse(const nrt_op *op, int outputs_max, backward_ctx *c) {
  memset(c, 0, sizeof *c);
  const char *name = nrt_op_name(op->code);
  if (op->num_outputs < 1 || op->num_outputs > outputs_max)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad number of outputs", name);
  int n_out = op->num_outputs;
  /* inputs: grad_out, q, k, v, stats, mask? */
  nrt_status s = rt_attn_parse(op, n_out + 1, 1, &c->a);
  if (s) return s;
  const rt_attn *a = &c->a;
  c->grad_out = &op->operands[n_out];
  c->stats = &op->operands[n_out + 4];
  const nrt_tensor_view *g = c->grad_out, *st = c->stats;
  if (g->ndim != 4 || g->dtype != a->q->dtype || g->shape[0] != a->B || g->shape[1] != a->H ||
      g->shape[2] != a->L || g->shape[3] != a->Ev)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: grad_out must be (B, H, L, Ev) in q's dtype", name);
  if (st->ndim != 4 || st->dtype != NRT_FLOAT32 || st->shape[0] != a->B || st->shape[1] != a->H ||
      st->shape[2] != a->L || st->shape[3] != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: stats must be float32 (B, H, L, 2)", name);
  return NRT_SUCCESS;
}

static int same_shape(const nrt_tensor_view *x, const nrt_tensor_view *like) {
  if (x->ndim != like->ndim || x->dtype != like->dtype) return 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != like->shape[d]) return 0;
  return 1;
}

static int alloc_tiles(float **buf, const int64_t *sizes, int n) {
  int ok = 1;
  for (int k = 0; k < n; k++) ok &= (buf[k] = rt_attn_alloc(sizes[k])) != NULL;
  return ok;
}

static void free_tiles(float **buf, int n) {
  for (int k = 0; k < n; k++) free(buf[k]);
}

/* ---- SDPA_BACKWARD_KV -------------------------------------------------------------- */

enum { KV_K, KV_V, KV_QT, KV_Q, KV_GT, KV_G, KV_S, KV_DP, KV_PZ, KV_BIAS, KV_Z, KV_DK, KV_DV,
       KV_LSE, KV_D, KV_TILES };

static void kv_block(const backward_ctx *c, float **t, int64_t task) {
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  int64_t kb = task % c->blocks, bhk = task / c->blocks;
  int64_t b = bhk / a->Hk, hk = bhk % a->Hk;
  int64_t k0 = kb * BK, nk = a->S - k0 < BK ? a->S - k0 : BK;
  rt_attn_load(a->k, b, hk, k0, nk, a->E, t[KV_K], Ep, 0);
  rt_attn_load(a->v, b, hk, k0, nk, a->Ev, t[KV_V], Evp, 0);
  memset(t[KV_DK], 0, (size_t)(nk * Ep) * sizeof(float));
  memset(t[KV_DV], 0, (size_t)(nk * Evp) * sizeof(float));
  int64_t qstart = a->causal ? k0 / BQ * BQ : 0; /* earlier queries see none of these keys */
  for (int64_t h = hk * a->group; h < (hk + 1) * a->group; h++) {
    for (int64_t q0 = qstart; q0 < a->L; q0 += BQ) {
      int64_t nq = a->L - q0 < BQ ? a->L - q0 : BQ;
      rt_attn_load_t(a->q, b, h, q0, nq, a->E, t[KV_QT], BQ, 0);
      rt_attn_load(a->q, b, h, q0, nq, a->E, t[KV_Q], Ep, 0);
      rt_attn_load_t(c->grad_out, b, h, q0, nq, a->Ev, t[KV_GT], BQ, 0);
      rt_attn_load(c->grad_out, b, h, q0, nq, a->Ev, t[KV_G], Evp, 0);
      rt_attn_load_stats(c->stats, b, h, q0, nq, BQ, t[KV_LSE], t[KV_D]);
      memset(t[KV_S], 0, (size_t)(nk * BQ) * sizeof(float));
      memset(t[KV_DP], 0, (size_t)(nk * BQ) * sizeof(float));
      rt_attn_win ws = causal_win(a, q0, k0, WIN_S), wkv = causal_win(a, q0, k0, WIN_KV);
      const rt_attn_win *w = a->causal ? &ws : NULL;
      rt_attn_gemm(nk, BQ, a->E, t[KV_K], Ep, t[KV_QT], BQ, t[KV_S], BQ, w);
      rt_attn_gemm(nk, BQ, a->Ev, t[KV_V], Evp, t[KV_GT], BQ, t[KV_DP], BQ, w);
      w = a->causal ? &wkv : NULL;
      int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t[KV_BIAS], BQ, 1);
      if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t[KV_Z], BQ, 1);
      rt_attn_backward_block(t[KV_S], t[KV_DP], has_bias ? t[KV_BIAS] : NULL,
                        a->dropout ? t[KV_Z] : NULL, t[KV_PZ], nk, BQ,
                        a->causal ? k0 - q0 : -RT_ATTN_NO_CAUSAL, nq, a->scale, t[KV_LSE], t[KV_D]);
      rt_attn_gemm(nk, Evp, nq, t[KV_PZ], BQ, t[KV_G], Evp, t[KV_DV], Evp, w);
      rt_attn_gemm(nk, Ep, nq, t[KV_S], BQ, t[KV_Q], Ep, t[KV_DK], Ep, w);
    }
  }
  for (int64_t j = 0; j < nk; j++) rt_attn_row_scale(t[KV_DK] + j * Ep, Ep, a->scale);
  rt_attn_store(c->grad_k, b, hk, k0, nk, 0, a->E, t[KV_DK], Ep);
  rt_attn_store(c->grad_v, b, hk, k0, nk, 0, a->Ev, t[KV_DV], Evp);
}

static void kv_range(int64_t begin, int64_t end, void *arg) {
  backward_ctx *c = arg;
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  int64_t sizes[KV_TILES] = {
      [KV_K] = BK * Ep,  [KV_V] = BK * Evp,  [KV_QT] = Ep * BQ,  [KV_Q] = BQ * Ep,
      [KV_GT] = Evp * BQ, [KV_G] = BQ * Evp, [KV_S] = BK * BQ,   [KV_DP] = BK * BQ,
      [KV_PZ] = BK * BQ, [KV_BIAS] = BK * BQ, [KV_Z] = BK * BQ,  [KV_DK] = BK * Ep,
      [KV_DV] = BK * Evp, [KV_LSE] = BQ,     [KV_D] = BQ};
  float *t[KV_TILES] = {0};
  if (alloc_tiles(t, sizes, KV_TILES)) {
    for (int64_t task = begin; task < end; task++) kv_block(c, t, task);
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  free_tiles(t, KV_TILES);
}

static void q_range(int64_t begin, int64_t end, void *arg);

/* ---- one pass per head (SDPA_BACKWARD_KV with grad_q) ----------------------------- */

/* A task owns one key/value head (b, hk) and its query heads: it converts
 * their whole q, grad_out (also transposed), k and v once, then for each
 * query head walks key blocks (outer) and query blocks (inner), keeping
 * grad_k, grad_v (S rows) and grad_q (L rows) in per-thread buffers: memory
 * linear in L and S, and the weights computed once. Every gradient element
 * sums the same products in the same order as the two passes (grad_k,
 * grad_v: query head, then query block; grad_q: key block; dQ = dS k takes
 * dS from the transposed tile through rt_attn_gemm_at), so the results are
 * bit for bit those of SDPA_BACKWARD_KV + SDPA_BACKWARD_Q. */
enum { H_K, H_V, H_DK, H_DV, H_Q, H_QT, H_G, H_GT, H_DQ, H_LSE, H_D, H_S, H_DP, H_PZ, H_Z,
       H_TILES };

typedef struct head_dims {
  int64_t Ep, Evp, Lp, Sp; /* padded head dims; L and S rounded up to whole blocks */
} head_dims;

static head_dims dims_of(const rt_attn *a) {
  head_dims d = {rt_attn_pad(a->E), rt_attn_pad(a->Ev),
                 (a->L + RT_ATTN_BQ - 1) / RT_ATTN_BQ * RT_ATTN_BQ,
                 (a->S + RT_ATTN_BK - 1) / RT_ATTN_BK * RT_ATTN_BK};
  return d;
}

/* k and v of the task's key/value head: k as an A operand (k), as a B
 * operand (kb: padded to whole vectors), v as an A operand. */
typedef struct head_kv {
  const float *k, *kb, *v;
  int64_t ldk, ldkb, ldv;
} head_kv;

static void head_query(const backward_ctx *c, float **t, const head_dims *d, const head_kv *kv,
                       int64_t b, int64_t h) {
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK, Ep = d->Ep, Evp = d->Evp, Lp = d->Lp;
  /* q and grad_out as B operands: in place when they can be */
  int64_t ldq = Ep, ldg = Evp;
  const float *qd = rt_attn_direct(a->q, b, h, a->E, 1, &ldq), *gd = NULL;
  if (!qd) rt_attn_load(a->q, b, h, 0, a->L, a->E, t[H_Q], Ep, Lp), qd = t[H_Q], ldq = Ep;
  rt_attn_load_t(a->q, b, h, 0, a->L, a->E, t[H_QT], Lp, 0);
  gd = rt_attn_direct(c->grad_out, b, h, a->Ev, 1, &ldg);
  if (!gd) rt_attn_load(c->grad_out, b, h, 0, a->L, a->Ev, t[H_G], Evp, Lp), gd = t[H_G], ldg = Evp;
  rt_attn_load_t(c->grad_out, b, h, 0, a->L, a->Ev, t[H_GT], Lp, 0);
  rt_attn_load_stats(c->stats, b, h, 0, a->L, Lp, t[H_LSE], t[H_D]);
  memset(t[H_DQ], 0, (size_t)(Lp * Ep) * sizeof(float));
  for (int64_t k0 = 0; k0 < a->S; k0 += BK) {
    int64_t nk = a->S - k0 < BK ? a->S - k0 : BK;
    const float *kb = kv->k + k0 * kv->ldk, *vb = kv->v + k0 * kv->ldv;
    int64_t qstart = a->causal ? k0 / BQ * BQ : 0; /* earlier queries see none of these keys */
    for (int64_t q0 = qstart; q0 < a->L; q0 += BQ) {
      int64_t nq = a->L - q0 < BQ ? a->L - q0 : BQ;
      memset(t[H_S], 0, (size_t)(nk * BQ) * sizeof(float));
      memset(t[H_DP], 0, (size_t)(nk * BQ) * sizeof(float));
      rt_attn_win ws = causal_win(a, q0, k0, WIN_S), wkv = causal_win(a, q0, k0, WIN_KV);
      rt_attn_win wq = causal_win(a, q0, k0, WIN_Q);
      const rt_attn_win *w = a->causal ? &ws : NULL;
      rt_attn_gemm(nk, BQ, a->E, kb, kv->ldk, t[H_QT] + q0, Lp, t[H_S], BQ, w);
      rt_attn_gemm(nk, BQ, a->Ev, vb, kv->ldv, t[H_GT] + q0, Lp, t[H_DP], BQ, w);
      w = a->causal ? &wkv : NULL;
      if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t[H_Z], BQ, 1);
      rt_attn_backward_block(t[H_S], t[H_DP], NULL, a->dropout ? t[H_Z] : NULL, t[H_PZ], nk, BQ,
                        a->causal ? k0 - q0 : -RT_ATTN_NO_CAUSAL, nq, a->scale, t[H_LSE] + q0,
                        t[H_D] + q0);
      rt_attn_gemm(nk, Evp, nq, t[H_PZ], BQ, gd + q0 * ldg, ldg, t[H_DV] + k0 * Evp, Evp, w);
      rt_attn_gemm(nk, Ep, nq, t[H_S], BQ, qd + q0 * ldq, ldq, t[H_DK] + k0 * Ep, Ep, w);
      rt_attn_gemm_at(nq, Ep, nk, t[H_S], BQ, kv->kb + k0 * kv->ldkb, kv->ldkb,
                      t[H_DQ] + q0 * Ep, Ep, a->causal ? &wq : NULL);
    }
  }
  for (int64_t i = 0; i < a->L; i++) rt_attn_row_scale(t[H_DQ] + i * Ep, Ep, a->scale);
  rt_attn_store(c->grad_q, b, h, 0, a->L, 0, a->E, t[H_DQ], Ep);
}

static void head_task(const backward_ctx *c, float **t, const head_dims *d, int64_t bhk) {
  const rt_attn *a = &c->a;
  int64_t b = bhk / a->Hk, hk = bhk % a->Hk;
  head_kv kv;
  kv.kb = rt_attn_direct(a->k, b, hk, a->E, 1, &kv.ldkb);
  kv.k = rt_attn_direct(a->k, b, hk, a->E, 0, &kv.ldk);
  kv.v = rt_attn_direct(a->v, b, hk, a->Ev, 0, &kv.ldv);
  if (!kv.kb) {
    rt_attn_load(a->k, b, hk, 0, a->S, a->E, t[H_K], d->Ep, d->Sp);
    kv.kb = t[H_K], kv.ldkb = d->Ep;
    if (!kv.k) kv.k = t[H_K], kv.ldk = d->Ep;
  }
  if (!kv.v) {
    rt_attn_load(a->v, b, hk, 0, a->S, a->Ev, t[H_V], d->Evp, d->Sp);
    kv.v = t[H_V], kv.ldv = d->Evp;
  }
  memset(t[H_DK], 0, (size_t)(d->Sp * d->Ep) * sizeof(float));
  memset(t[H_DV], 0, (size_t)(d->Sp * d->Evp) * sizeof(float));
  for (int64_t h = hk * a->group; h < (hk + 1) * a->group; h++) head_query(c, t, d, &kv, b, h);
  for (int64_t j = 0; j < a->S; j++) rt_attn_row_scale(t[H_DK] + j * d->Ep, d->Ep, a->scale);
  rt_attn_store(c->grad_k, b, hk, 0, a->S, 0, a->E, t[H_DK], d->Ep);
  rt_attn_store(c->grad_v, b, hk, 0, a->S, 0, a->Ev, t[H_DV], d->Evp);
}

static void head_range(int64_t begin, int64_t end, void *arg) {
  backward_ctx *c = arg;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  head_dims d = dims_of(&c->a);
  int64_t sizes[H_TILES] = {
      [H_K] = d.Sp * d.Ep,   [H_V] = d.Sp * d.Evp,  [H_DK] = d.Sp * d.Ep,  [H_DV] = d.Sp * d.Evp,
      [H_Q] = d.Lp * d.Ep,   [H_QT] = d.Ep * d.Lp,  [H_G] = d.Lp * d.Evp, [H_GT] = d.Evp * d.Lp,
      [H_DQ] = d.Lp * d.Ep,  [H_LSE] = d.Lp,        [H_D] = d.Lp,         [H_S] = BK * BQ,
      [H_DP] = BK * BQ,      [H_PZ] = BK * BQ,      [H_Z] = BK * BQ};
  float *t[H_TILES] = {0};
  if (alloc_tiles(t, sizes, H_TILES)) {
    for (int64_t task = begin; task < end; task++) head_task(c, t, &d, task);
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  free_tiles(t, H_TILES);
}

nrt_status rt_kernel_sdpa_backward_kv(const nrt_op *op) {
  backward_ctx c;
  nrt_status s = parse(op, 3, &c);
  if (s) return s;
  if (op->num_outputs < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_kv: expects outputs (grad_k, grad_v[, grad_q])");
  c.grad_k = &op->operands[0];
  c.grad_v = &op->operands[1];
  c.grad_q = op->num_outputs == 3 ? &op->operands[2] : NULL;
  if (!same_shape(c.grad_k, c.a.k) || !same_shape(c.grad_v, c.a.v))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_kv: grad_k and grad_v must have the shapes and dtype of k and v");
  if (c.grad_q && !same_shape(c.grad_q, c.a.q))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_kv: grad_q must have the shape and dtype of q");
  int64_t heads = c.a.B * c.a.Hk;
  if (heads == 0) return NRT_SUCCESS;
  /* the head tasks' buffers: whole heads of q, q^T, grad_out (and ^T),
   * grad_q, k, v, grad_k, grad_v */
  head_dims d = dims_of(&c.a);
  int64_t head_bytes = (int64_t)sizeof(float) * (d.Lp * (3 * d.Ep + 2 * d.Evp) +
                                                 d.Sp * (2 * d.Ep + 2 * d.Evp));
  int one_pass = c.grad_q && !c.a.mask && head_bytes <= RT_ATTN_HEAD_BYTES_MAX &&
                 heads >= RT_ATTN_HEADS_PER_THREAD * rt_num_threads();
  rt_attn_grads g = {c.grad_q, c.grad_k, c.grad_v, NULL, c.grad_out, c.stats};
  nrt_status bs;
  if (one_pass) {
    /* enough heads to keep every thread busy: one pass per head */
    if (rt_attn_backward_bf16(&c.a, &g, RT_ATTN_PASS_HEADS, &bs)) {
      c.failed = bs != NRT_SUCCESS;
    } else {
      rt_parallel_for(heads, 1, head_range, &c);
    }
    /* if a thread could not allocate its buffers, the blocks below
     * rewrite every output */
    one_pass = !c.failed;
    c.failed = 0;
  }
  if (!one_pass) {
    /* few heads: split keys, then queries, into blocks (same results) */
    c.blocks = (c.a.S + RT_ATTN_BK - 1) / RT_ATTN_BK;
    if (rt_attn_backward_bf16(&c.a, &g, RT_ATTN_PASS_KV, &bs)) {
      if (bs) return bs;
    } else if (c.blocks) {
      rt_parallel_for(heads * c.blocks, 1, kv_range, &c);
    }
    if (c.grad_q && !c.failed) {
      if (rt_attn_backward_bf16(&c.a, &g, RT_ATTN_PASS_Q, &bs)) return bs;
      c.blocks = (c.a.L + RT_ATTN_BQ - 1) / RT_ATTN_BQ;
      rt_parallel_for(c.a.B * c.a.H * c.blocks, 1, q_range, &c);
    }
  }
  if (c.failed)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_backward_kv: cannot allocate the kernel's tiles");
  return NRT_SUCCESS;
}

/* ---- SDPA_BACKWARD_Q --------------------------------------------------------------- */

enum { Q_Q, Q_G, Q_KT, Q_VT, Q_K, Q_S, Q_DP, Q_BIAS, Q_Z, Q_DQ, Q_TILES };

static void q_block(const backward_ctx *c, float **t, int64_t task) {
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  int64_t qb = task % c->blocks, bh = task / c->blocks;
  int64_t b = bh / a->H, h = bh % a->H, hk = h / a->group;
  int64_t q0 = qb * BQ, nq = a->L - q0 < BQ ? a->L - q0 : BQ;
  rt_attn_load(a->q, b, h, q0, nq, a->E, t[Q_Q], Ep, 0);
  rt_attn_load(c->grad_out, b, h, q0, nq, a->Ev, t[Q_G], Evp, 0);
  memset(t[Q_DQ], 0, (size_t)(nq * Ep) * sizeof(float));
  float lse_row[RT_ATTN_BQ], d_row[RT_ATTN_BQ];
  rt_attn_load_stats(c->stats, b, h, q0, nq, BQ, lse_row, d_row);
  int64_t kend = a->causal && q0 + nq < a->S ? q0 + nq : a->S;
  if (c->grad_scores && kend < a->S) { /* keys no query of the block sees */
    memset(t[Q_S], 0, (size_t)(nq * BK) * sizeof(float));
    for (int64_t k0 = kend; k0 < a->S; k0 += BK)
      rt_attn_store(c->grad_scores, b, h, q0, nq, k0, a->S - k0 < BK ? a->S - k0 : BK, t[Q_S], BK);
  }
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    int64_t nk = a->S - k0 < BK ? a->S - k0 : BK;
    rt_attn_load_t(a->k, b, hk, k0, nk, a->E, t[Q_KT], BK, 0);
    rt_attn_load_t(a->v, b, hk, k0, nk, a->Ev, t[Q_VT], BK, 0);
    rt_attn_load(a->k, b, hk, k0, nk, a->E, t[Q_K], Ep, 0);
    memset(t[Q_S], 0, (size_t)(nq * BK) * sizeof(float));
    memset(t[Q_DP], 0, (size_t)(nq * BK) * sizeof(float));
    rt_attn_gemm(nq, BK, a->E, t[Q_Q], Ep, t[Q_KT], BK, t[Q_S], BK, NULL);
    rt_attn_gemm(nq, BK, a->Ev, t[Q_G], Evp, t[Q_VT], BK, t[Q_DP], BK, NULL);
    int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t[Q_BIAS], BK, 0);
    if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t[Q_Z], BK, 0);
    backward_block_q(t[Q_S], t[Q_DP], has_bias ? t[Q_BIAS] : NULL, a->dropout ? t[Q_Z] : NULL,
                     nq, BK, a->causal ? q0 - k0 + 1 : RT_ATTN_NO_CAUSAL, nk, a->scale, lse_row,
                     d_row);
    if (c->grad_scores) rt_attn_store(c->grad_scores, b, h, q0, nq, k0, nk, t[Q_S], BK);
    rt_attn_win qwin = causal_win(a, q0, k0, WIN_Q);
    rt_attn_gemm(nq, Ep, nk, t[Q_S], BK, t[Q_K], Ep, t[Q_DQ], Ep, a->causal ? &qwin : NULL);
  }
  for (int64_t i = 0; i < nq; i++) rt_attn_row_scale(t[Q_DQ] + i * Ep, Ep, a->scale);
  rt_attn_store(c->grad_q, b, h, q0, nq, 0, a->E, t[Q_DQ], Ep);
}

static void q_range(int64_t begin, int64_t end, void *arg) {
  backward_ctx *c = arg;
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  int64_t sizes[Q_TILES] = {[Q_Q] = BQ * Ep,   [Q_G] = BQ * Evp,  [Q_KT] = Ep * BK,
                            [Q_VT] = Evp * BK, [Q_K] = BK * Ep,   [Q_S] = BQ * BK,
                            [Q_DP] = BQ * BK,  [Q_BIAS] = BQ * BK, [Q_Z] = BQ * BK,
                            [Q_DQ] = BQ * Ep};
  float *t[Q_TILES] = {0};
  if (alloc_tiles(t, sizes, Q_TILES)) {
    for (int64_t task = begin; task < end; task++) q_block(c, t, task);
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  free_tiles(t, Q_TILES);
}

nrt_status rt_kernel_sdpa_backward_q(const nrt_op *op) {
  backward_ctx c;
  nrt_status s = parse(op, 2, &c);
  if (s) return s;
  c.grad_q = &op->operands[0];
  c.grad_scores = op->num_outputs == 2 ? &op->operands[1] : NULL;
  if (!same_shape(c.grad_q, c.a.q))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_q: grad_q must have the shape and dtype of q");
  const nrt_tensor_view *gs = c.grad_scores;
  if (gs && (gs->ndim != 4 || gs->dtype != NRT_FLOAT32 || gs->shape[0] != c.a.B ||
             gs->shape[1] != c.a.H || gs->shape[2] != c.a.L || gs->shape[3] != c.a.S))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_q: grad_scores must be float32 (B, H, L, S)");
  rt_attn_grads g = {c.grad_q, NULL, NULL, c.grad_scores, c.grad_out, c.stats};
  if (rt_attn_backward_bf16(&c.a, &g, RT_ATTN_PASS_Q, &s)) return s;
  c.blocks = (c.a.L + RT_ATTN_BQ - 1) / RT_ATTN_BQ;
  int64_t tasks = c.a.B * c.a.H * c.blocks;
  if (tasks == 0) return NRT_SUCCESS;
  rt_parallel_for(tasks, 1, q_range, &c);
  if (c.failed)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_backward_q: cannot allocate the kernel's tiles");
  return NRT_SUCCESS;
}
