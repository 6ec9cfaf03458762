/* SDPA_FORWARD and SDPA_BACKWARD_STATS (layouts in neuronrt/ops/attention.h).
 *
 * Flash-style forward: a task owns RT_ATTN_BQ query rows of one (batch,
 * head) and walks the key blocks once, keeping for each row the running
 * maximum m, the running denominator l and the unnormalised output O; when
 * a block raises the maximum, l and O are rescaled by exp(m_old - m_new)
 * (the online softmax). Scores are computed transposed, S^T = k q^T, so k
 * and v load row by row, the softmax runs down the columns with whole
 * vectors, and O += P v reads P from S^T (rt_attn_gemm_at); float32 k and
 * v are read in place when their rows allow. Memory is a few tiles per
 * thread, linear in the sequence lengths. Dropout drops the normalised
 * weights, so l sums the weights before the dropout factors are applied.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attention/attention_tiles.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"
#include "ops/engine/vmath.h"

typedef struct forward_ctx {
  rt_attn a;
  const nrt_tensor_view *out, *lse;
  int64_t q_blocks;
  int failed; /* a thread could not allocate its tiles */
} forward_ctx;

typedef struct forward_tiles {
  float *qt, *k, *v, *s, *bias, *z, *o, *m, *l, *alpha;
} forward_tiles;
enum { FORWARD_TILES = 10 };

static void forward_block(const forward_ctx *c, const forward_tiles *t, int64_t task) {
  const rt_attn *a = &c->a;
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  int64_t qb = task % c->q_blocks, bh = task / c->q_blocks;
  int64_t b = bh / a->H, h = bh % a->H, hk = h / a->group;
  int64_t q0 = qb * BQ, nq = a->L - q0 < BQ ? a->L - q0 : BQ;
  rt_attn_load_t(a->q, b, h, q0, nq, a->E, t->qt, BQ, 0);
  memset(t->o, 0, (size_t)(nq * Evp) * sizeof(float));
  for (int64_t i = 0; i < BQ; i++) t->m[i] = -INFINITY, t->l[i] = 0;
  int64_t kend = a->causal && q0 + nq < a->S ? q0 + nq : a->S;
  for (int64_t k0 = 0; k0 < kend; k0 += BK) {
    int64_t nk = a->S - k0 < BK ? a->S - k0 : BK;
    /* k (an A operand) and v (a B operand) in place when they can be */
    int64_t ldk = Ep, ldv = Evp;
    const float *kd = rt_attn_direct(a->k, b, hk, a->E, 0, &ldk);
    const float *vd = rt_attn_direct(a->v, b, hk, a->Ev, 1, &ldv);
    if (kd) {
      kd += k0 * ldk;
    } else {
      rt_attn_load(a->k, b, hk, k0, nk, a->E, t->k, Ep, 0);
      kd = t->k, ldk = Ep;
    }
    if (vd) {
      vd += k0 * ldv;
    } else {
      rt_attn_load(a->v, b, hk, k0, nk, a->Ev, t->v, Evp, 0);
      vd = t->v, ldv = Evp;
    }
    memset(t->s, 0, (size_t)(nk * BQ) * sizeof(float));
    /* causal: query q0 + i sees key k0 + j iff j <= i - (k0 - q0) */
    int64_t far = a->L + a->S + BQ + BK;
    rt_attn_win win = {-far, far, k0 - q0}, qwin = {-far, q0 - k0, -far};
    rt_attn_gemm(nk, BQ, a->E, kd, ldk, t->qt, BQ, t->s, BQ, a->causal ? &win : NULL);
    int has_bias = a->mask && rt_attn_bias(a, b, h, q0, nq, k0, nk, t->bias, BQ, 1);
    if (a->dropout) rt_attn_dropout(a, b, h, q0, nq, k0, nk, t->z, BQ, 1);
    rt_attn_softmax_block(t->s, has_bias ? t->bias : NULL, a->dropout ? t->z : NULL, nk, BQ,
                  a->causal ? k0 - q0 : -((int64_t)1 << 40), nq, a->scale, t->m, t->l, t->alpha);
    rt_attn_scale_rows(t->o, nq, Evp, t->alpha);
    rt_attn_gemm_at(nq, Evp, nk, t->s, BQ, vd, ldv, t->o, Evp, a->causal ? &qwin : NULL);
  }
  float *lse = (float *)c->lse->data;
  const int64_t *ls = c->lse->strides;
  for (int64_t i = 0; i < nq; i++) {
    float l = t->l[i];
    float *o = t->o + i * Evp;
    if (l == 0) { /* every key masked: PyTorch's _safe_softmax gives 0 */
      memset(o, 0, (size_t)Evp * sizeof(float));
      lse[b * ls[0] + h * ls[1] + (q0 + i) * ls[2]] = INFINITY;
    } else {
      rt_attn_row_scale(o, Evp, 1.0f / l);
      lse[b * ls[0] + h * ls[1] + (q0 + i) * ls[2]] = t->m[i] + logf(l);
    }
  }
  rt_attn_store(c->out, b, h, q0, nq, 0, a->Ev, t->o, Evp);
}

static void forward_range(int64_t begin, int64_t end, void *arg) {
  forward_ctx *c = arg;
  const rt_attn *a = &c->a;
  int64_t Ep = rt_attn_pad(a->E), Evp = rt_attn_pad(a->Ev);
  const int64_t BQ = RT_ATTN_BQ, BK = RT_ATTN_BK;
  int64_t sizes[FORWARD_TILES] = {Ep * BQ, BK * Ep, BK * Evp, BK * BQ, BK * BQ,
                                  BK * BQ, BQ * Evp, BQ,      BQ,      BQ};
  float *buf[FORWARD_TILES] = {0};
  int ok = 1;
  for (int k = 0; k < FORWARD_TILES; k++) ok &= (buf[k] = rt_attn_alloc(sizes[k])) != NULL;
  if (ok) {
    forward_tiles t = {buf[0], buf[1], buf[2], buf[3], buf[4],
                       buf[5], buf[6], buf[7], buf[8], buf[9]};
    for (int64_t task = begin; task < end; task++) forward_block(c, &t, task);
  } else {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  }
  for (int k = 0; k < FORWARD_TILES; k++) free(buf[k]);
}

nrt_status rt_kernel_sdpa_forward(const nrt_op *op) {
  forward_ctx c = {0};
  nrt_status s = rt_attn_parse(op, 2, 0, &c.a);
  if (s) return s;
  if (op->num_outputs != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "sdpa_forward: expects outputs (out, lse)");
  const rt_attn *a = &c.a;
  c.out = &op->operands[0];
  c.lse = &op->operands[1];
  if (c.out->ndim != 4 || c.out->dtype != a->q->dtype || c.out->shape[0] != a->B ||
      c.out->shape[1] != a->H || c.out->shape[2] != a->L || c.out->shape[3] != a->Ev)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "sdpa_forward: out must be (B, H, L, Ev) in q's dtype");
  if (c.lse->ndim != 3 || c.lse->dtype != NRT_FLOAT32 || c.lse->shape[0] != a->B ||
      c.lse->shape[1] != a->H || c.lse->shape[2] != a->L)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "sdpa_forward: lse must be float32 (B, H, L)");
  if (rt_attn_forward_bf16(a, c.out, c.lse, &s)) return s;
  c.q_blocks = (a->L + RT_ATTN_BQ - 1) / RT_ATTN_BQ;
  int64_t tasks = a->B * a->H * c.q_blocks;
  if (tasks == 0) return NRT_SUCCESS;
  rt_parallel_for(tasks, 1, forward_range, &c);
  if (c.failed)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_forward: cannot allocate the kernel's tiles");
  return NRT_SUCCESS;
}

/* ---- SDPA_BACKWARD_STATS --------------------------------------------------------- */

typedef struct stats_ctx {
  const nrt_tensor_view *stats, *grad, *out, *lse;
  int64_t H, L, Ev;
  int failed;
} stats_ctx;

RT_SIMD_RETURNS(float, row_dot, (const float *x, const float *y, int64_t n), (x, y, n)) {
  float part[16] = {0};
  for (int64_t j = 0; j < n; j += 16)
    for (int l = 0; l < 16; l++) part[l] += x[j + l] * y[j + l];
  for (int w = 8; w > 0; w >>= 1)
    for (int l = 0; l < w; l++) part[l] += part[l + w];
  return part[0];
}

/* Rows go through tiles of RT_ATTN_BQ rows, so a row costs no calls. */
static void stats_range(int64_t begin, int64_t end, void *arg) {
  stats_ctx *c = arg;
  const int64_t BQ = RT_ATTN_BQ, Evp = rt_attn_pad(c->Ev);
  float *g = rt_attn_alloc(BQ * Evp), *o = rt_attn_alloc(BQ * Evp);
  if (!g || !o) {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
  } else {
    const int64_t *ss = c->stats->strides, *ls = c->lse->strides;
    for (int64_t bh = begin; bh < end; bh++) {
      int64_t b = bh / c->H, h = bh % c->H;
      for (int64_t i0 = 0; i0 < c->L; i0 += BQ) {
        int64_t n = c->L - i0 < BQ ? c->L - i0 : BQ;
        rt_attn_load(c->grad, b, h, i0, n, c->Ev, g, Evp, 0);
        rt_attn_load(c->out, b, h, i0, n, c->Ev, o, Evp, 0);
        for (int64_t i = 0; i < n; i++) {
          float *st = (float *)c->stats->data + b * ss[0] + h * ss[1] + (i0 + i) * ss[2];
          st[0] = ((const float *)c->lse->data)[b * ls[0] + h * ls[1] + (i0 + i) * ls[2]];
          st[ss[3]] = row_dot(g + i * Evp, o + i * Evp, Evp);
        }
      }
    }
  }
  free(g);
  free(o);
}

nrt_status rt_kernel_sdpa_backward_stats(const nrt_op *op) {
  if (op->num_operands != 4 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_stats: expects operands (stats, grad_out, out, lse)");
  stats_ctx c = {&op->operands[0], &op->operands[1], &op->operands[2], &op->operands[3], 0, 0, 0, 0};
  const nrt_tensor_view *st = c.stats, *g = c.grad, *o = c.out, *l = c.lse;
  if (g->ndim != 4 || o->ndim != 4 || g->dtype != o->dtype || st->ndim != 4 || l->ndim != 3 ||
      st->dtype != NRT_FLOAT32 || l->dtype != NRT_FLOAT32 || st->shape[3] != 2 ||
      !(g->dtype == NRT_FLOAT32 || g->dtype == NRT_BFLOAT16 || g->dtype == NRT_FLOAT16))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sdpa_backward_stats: expects float32 stats (B, H, L, 2) and lse (B, H, L), "
                   "grad_out and out (B, H, L, Ev) of one floating dtype");
  for (int d = 0; d < 4; d++)
    if (g->shape[d] != o->shape[d] || (d < 3 && (st->shape[d] != g->shape[d] || l->shape[d] != g->shape[d])))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "sdpa_backward_stats: shapes disagree");
  if (g->shape[3] > NRT_ATTENTION_MAX_HEAD_DIM)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "sdpa_backward_stats: head dimension above %d",
                   NRT_ATTENTION_MAX_HEAD_DIM);
  c.H = g->shape[1];
  c.L = g->shape[2];
  c.Ev = g->shape[3];
  int64_t rows = g->shape[0] * c.H;
  if (rows == 0 || c.L == 0) return NRT_SUCCESS;
  rt_parallel_for(rows, 1, stats_range, &c);
  if (c.failed)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sdpa_backward_stats: cannot allocate buffers");
  return NRT_SUCCESS;
}
