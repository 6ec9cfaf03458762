/* The attention kernels against a reference twin.
 *
 * The twin is the textbook definition in double: for each (batch, head) it
 * materialises the L x S scores, applies mask, causal triangle and softmax,
 * draws the dropout factors from the plain Philox block function, and
 * computes the output and every gradient with whole matrices. Inputs are
 * rounded to the tested dtype first, so the only differences are the
 * kernels' float32 accumulation and the output's rounding. Cases cover
 * grouped-query heads, unequal lengths and head dims, partial blocks,
 * causal, float and bool masks broadcast from smaller shapes, fully masked
 * rows, dropout, head dim 256 and strided (transposed) inputs; one case
 * checks that 1 and 3 kernel threads give bitwise identical results.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"
#include "ops/random/philox.h"
#include "ops/engine/scalar_types.h"

typedef struct tensor {
  void *dev;
  nrt_tensor_view view;
} tensor;

static size_t elem_size(nrt_dtype d) { return nrt_dtype_size(d); }

/* A 4-d tensor; layout "bhld" (contiguous) or "blhd" (heads and rows swapped
 * in memory, as q.transpose(1, 2) of a (B, L, H, E) tensor). */
static tensor make4(nrt_dtype d, int64_t B, int64_t H, int64_t L, int64_t E, int swapped) {
  tensor t;
  memset(&t, 0, sizeof t);
  size_t bytes = (size_t)(B * H * L * E) * elem_size(d);
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &t.dev));
  t.view.data = t.dev;
  t.view.dtype = d;
  t.view.ndim = 4;
  int64_t shape[4] = {B, H, L, E};
  memcpy(t.view.shape, shape, sizeof shape);
  if (swapped) {
    t.view.strides[3] = 1, t.view.strides[1] = E, t.view.strides[2] = H * E,
    t.view.strides[0] = L * H * E;
  } else {
    t.view.strides[3] = 1, t.view.strides[2] = E, t.view.strides[1] = L * E,
    t.view.strides[0] = H * L * E;
  }
  return t;
}

static void release(tensor *t) {
  if (t->dev) nrt_free(t->dev);
  t->dev = NULL;
}

static char *elem(const tensor *t, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t *s = t->view.strides;
  return (char *)nrt_device_to_host(t->dev) +
         (b * s[0] + h * s[1] + i * s[2] + j * s[3]) * (int64_t)elem_size(t->view.dtype);
}

static double get(const tensor *t, int64_t b, int64_t h, int64_t i, int64_t j) {
  char *p = elem(t, b, h, i, j);
  switch (t->view.dtype) {
    case NRT_FLOAT32: return *(float *)p;
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(uint16_t *)p);
    case NRT_FLOAT16: return rt_half_to_float(*(uint16_t *)p);
    case NRT_BOOL: return *(uint8_t *)p;
    default: return *(double *)p;
  }
}

static void put(tensor *t, int64_t b, int64_t h, int64_t i, int64_t j, double v) {
  char *p = elem(t, b, h, i, j);
  switch (t->view.dtype) {
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    case NRT_BOOL: *(uint8_t *)p = v != 0; break;
    default: *(double *)p = v; break;
  }
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { /* xorshift64, in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

static void fill(tensor *t) {
  const int64_t *n = t->view.shape;
  for (int64_t b = 0; b < n[0]; b++)
    for (int64_t h = 0; h < n[1]; h++)
      for (int64_t i = 0; i < n[2]; i++)
        for (int64_t j = 0; j < n[3]; j++) put(t, b, h, i, j, urand());
}

/* ---- the case ----------------------------------------------------------------- */

typedef struct attn_case {
  const char *name;
  nrt_dtype dtype;
  int64_t B, H, Hk, L, S, E, Ev;
  int causal;
  int mask; /* 0 none, 1 float (1, H, L, S) broadcast over B, 2 bool (L, S) with a masked row */
  double dropout;
  int swapped;
  double tol; /* relative to the largest reference magnitude */
} attn_case;

static const uint64_t SEED = 0x1234567890abcdefull, OFFSET = 77;

/* Word n of the Philox stream of (SEED, OFFSET), from the plain block function. */
static uint32_t philox_word(uint64_t n) {
  uint64_t block = OFFSET + n / 4;
  uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)SEED, (uint32_t)(SEED >> 32)};
  uint32_t out[4];
  rt_philox4x32_10(counter, key, out);
  return out[n % 4];
}

typedef struct operands {
  tensor q, k, v, mask, out, lse, grad, stats, dq, dk, dv, ds;
} operands;

static nrt_op make_op(nrt_op_code code, int outputs, const tensor *const *ts, int n,
                      const attn_case *c) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  op.num_operands = n;
  for (int k = 0; k < n; k++) op.operands[k] = ts[k]->view;
  op.num_scalars = 5;
  op.scalars[0].is_float = 1;
  op.scalars[0].f = 1.0 / sqrt((double)c->E);
  op.scalars[1].i = c->causal;
  op.scalars[2].is_float = 1;
  op.scalars[2].f = c->dropout;
  op.scalars[3].i = (int64_t)SEED;
  op.scalars[4].i = (int64_t)OFFSET;
  return op;
}

static tensor make_lse(int64_t B, int64_t H, int64_t L, int64_t extra) {
  tensor t = make4(NRT_FLOAT32, B, H, L, extra ? extra : 1, 0);
  if (!extra) {
    t.view.ndim = 3;
    t.view.strides[2] = 1, t.view.strides[1] = L, t.view.strides[0] = H * L;
  }
  return t;
}

/* Runs forward and the three backward ops of case c; returns the operands. */
static nrt_status run_case(const attn_case *c, operands *o) {
  memset(o, 0, sizeof *o);
  o->q = make4(c->dtype, c->B, c->H, c->L, c->E, c->swapped);
  o->k = make4(c->dtype, c->B, c->Hk, c->S, c->E, c->swapped);
  o->v = make4(c->dtype, c->B, c->Hk, c->S, c->Ev, 0);
  o->grad = make4(c->dtype, c->B, c->H, c->L, c->Ev, 0);
  fill(&o->q), fill(&o->k), fill(&o->v), fill(&o->grad);
  if (c->mask) {
    o->mask = make4(c->mask == 1 ? NRT_FLOAT32 : NRT_BOOL, 1, c->mask == 1 ? c->H : 1, c->L, c->S, 0);
    for (int64_t h = 0; h < o->mask.view.shape[1]; h++)
      for (int64_t i = 0; i < c->L; i++)
        for (int64_t j = 0; j < c->S; j++)
          put(&o->mask, 0, h, i, j, c->mask == 1 ? urand() : (i != 3 && (i + j) % 3 != 0));
    /* broadcast to (B, H, L, S) */
    o->mask.view.shape[0] = c->B, o->mask.view.strides[0] = 0;
    if (c->mask == 2) o->mask.view.shape[1] = c->H, o->mask.view.strides[1] = 0;
  }
  o->out = make4(c->dtype, c->B, c->H, c->L, c->Ev, 0);
  o->lse = make_lse(c->B, c->H, c->L, 0);
  o->stats = make_lse(c->B, c->H, c->L, 2);
  o->dq = make4(c->dtype, c->B, c->H, c->L, c->E, 0);
  o->dk = make4(c->dtype, c->B, c->Hk, c->S, c->E, 0);
  o->dv = make4(c->dtype, c->B, c->Hk, c->S, c->Ev, 0);
  o->ds = make4(NRT_FLOAT32, c->B, c->H, c->L, c->S, 0);
  int m = c->mask ? 1 : 0;
  const tensor *fw[] = {&o->out, &o->lse, &o->q, &o->k, &o->v, &o->mask};
  nrt_op op = make_op(NRT_OP_SDPA_FORWARD, 2, fw, 5 + m, c);
  nrt_status s = nrt_op_execute(&op);
  if (s) return s;
  const tensor *st[] = {&o->stats, &o->grad, &o->out, &o->lse};
  op = make_op(NRT_OP_SDPA_BACKWARD_STATS, 1, st, 4, c);
  if ((s = nrt_op_execute(&op))) return s;
  const tensor *kv[] = {&o->dk, &o->dv, &o->grad, &o->q, &o->k, &o->v, &o->stats, &o->mask};
  op = make_op(NRT_OP_SDPA_BACKWARD_KV, 2, kv, 7 + m, c);
  if ((s = nrt_op_execute(&op))) return s;
  const tensor *qo[] = {&o->dq, &o->ds, &o->grad, &o->q, &o->k, &o->v, &o->stats, &o->mask};
  op = make_op(NRT_OP_SDPA_BACKWARD_Q, 2, qo, 7 + m, c);
  return nrt_op_execute(&op);
}

static void release_all(operands *o) {
  tensor *ts[] = {&o->q, &o->k, &o->v, &o->mask, &o->out, &o->lse, &o->grad,
                  &o->stats, &o->dq, &o->dk, &o->dv, &o->ds};
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) release(ts[k]);
}

/* Largest |ref - got| over the largest |ref| of one result. */
typedef struct error {
  double diff, scale;
} error;

static void note(error *e, double ref, double got) {
  double d = fabs(ref - got);
  if (!(d <= e->diff)) e->diff = d; /* NaN sticks */
  if (fabs(ref) > e->scale) e->scale = fabs(ref);
}

static int within(const error *e, double tol) { return e->diff <= tol * (e->scale > 1 ? e->scale : 1); }

/* The twin: checks every output of o against the definition. */
static void check_against_twin(const attn_case *c, const operands *o) {
  int64_t L = c->L, S = c->S, E = c->E, Ev = c->Ev, G = c->H / c->Hk;
  double scale = 1.0 / sqrt((double)E), keep = 1 - c->dropout;
  uint32_t threshold = keep >= 1 ? UINT32_MAX : (uint32_t)ceil(keep * 4294967296.0);
  double *P = malloc(sizeof(double) * (size_t)(L * S)), *Z = malloc(sizeof(double) * (size_t)(L * S));
  double *dS = malloc(sizeof(double) * (size_t)(L * S));
  double *dk = calloc((size_t)(c->B * c->Hk * S * E), sizeof(double));
  double *dv = calloc((size_t)(c->B * c->Hk * S * Ev), sizeof(double));
  error eo = {0, 0}, el = {0, 0}, eq = {0, 0}, ek = {0, 0}, ev = {0, 0}, es = {0, 0};
  for (int64_t b = 0; b < c->B; b++) {
    for (int64_t h = 0; h < c->H; h++) {
      int64_t hk = h / G;
      for (int64_t i = 0; i < L; i++) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; j++) {
          double s = 0;
          for (int64_t e = 0; e < E; e++) s += get(&o->q, b, h, i, e) * get(&o->k, b, hk, j, e);
          s *= scale;
          if (c->mask == 1) s += get(&o->mask, b, h, i, j);
          if (c->mask == 2 && !get(&o->mask, b, h, i, j)) s = -INFINITY;
          if (c->causal && j > i) s = -INFINITY;
          P[i * S + j] = s;
          if (s > mx) mx = s;
          uint64_t n = (uint64_t)(((b * c->H + h) * L + i) * S + j);
          Z[i * S + j] = c->dropout > 0 ? (philox_word(n) < threshold || keep >= 1 ? 1 / keep : 0) : 1;
        }
        double sum = 0;
        for (int64_t j = 0; j < S; j++) sum += P[i * S + j] = mx == -INFINITY ? 0 : exp(P[i * S + j] - mx);
        for (int64_t j = 0; j < S; j++) P[i * S + j] = sum > 0 ? P[i * S + j] / sum : 0;
        double lse = sum > 0 ? mx + log(sum) : INFINITY;
        double got = get(&o->lse, b, h, i, 0);
        if (isinf(lse)) CHECK(isinf(got) && got > 0);
        else note(&el, lse, got);
        double D = 0;
        for (int64_t d = 0; d < Ev; d++) {
          double out = 0, dvo = 0;
          for (int64_t j = 0; j < S; j++) out += P[i * S + j] * Z[i * S + j] * get(&o->v, b, hk, j, d);
          note(&eo, out, get(&o->out, b, h, i, d));
          dvo = get(&o->grad, b, h, i, d);
          D += dvo * out;
        }
        for (int64_t j = 0; j < S; j++) {
          double dp = 0;
          for (int64_t d = 0; d < Ev; d++) dp += get(&o->grad, b, h, i, d) * get(&o->v, b, hk, j, d);
          dS[i * S + j] = P[i * S + j] * (dp * Z[i * S + j] - D);
          note(&es, dS[i * S + j], get(&o->ds, b, h, i, j));
          for (int64_t d = 0; d < Ev; d++)
            dv[((b * c->Hk + hk) * S + j) * Ev + d] += P[i * S + j] * Z[i * S + j] * get(&o->grad, b, h, i, d);
        }
      }
      for (int64_t i = 0; i < L; i++)
        for (int64_t e = 0; e < E; e++) {
          double dq = 0;
          for (int64_t j = 0; j < S; j++) dq += dS[i * S + j] * get(&o->k, b, hk, j, e);
          note(&eq, dq * scale, get(&o->dq, b, h, i, e));
        }
      for (int64_t j = 0; j < S; j++)
        for (int64_t e = 0; e < E; e++) {
          double acc = 0;
          for (int64_t i = 0; i < L; i++) acc += dS[i * S + j] * get(&o->q, b, h, i, e);
          dk[((b * c->Hk + hk) * S + j) * E + e] += acc * scale;
        }
    }
  }
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t hk = 0; hk < c->Hk; hk++)
      for (int64_t j = 0; j < S; j++) {
        for (int64_t e = 0; e < E; e++) note(&ek, dk[((b * c->Hk + hk) * S + j) * E + e], get(&o->dk, b, hk, j, e));
        for (int64_t d = 0; d < Ev; d++) note(&ev, dv[((b * c->Hk + hk) * S + j) * Ev + d], get(&o->dv, b, hk, j, d));
      }
  error *all[] = {&eo, &el, &eq, &ek, &ev, &es};
  const char *names[] = {"out", "lse", "grad_q", "grad_k", "grad_v", "grad_scores"};
  for (int k = 0; k < 6; k++) {
    if (!within(all[k], c->tol)) {
      fprintf(stderr, "  %s: %s differs by %g (scale %g)\n", c->name, names[k], all[k]->diff,
              all[k]->scale);
      check_failures++;
    }
  }
  free(P), free(Z), free(dS), free(dk), free(dv);
}

static const attn_case cases[] = {
    {"gqa_unequal_lengths", NRT_FLOAT32, 2, 4, 2, 70, 90, 40, 24, 0, 0, 0, 0, 2e-5},
    {"causal_bf16", NRT_BFLOAT16, 1, 2, 2, 130, 130, 64, 64, 1, 0, 0, 0, 2e-2},
    {"float_mask_f16", NRT_FLOAT16, 2, 2, 1, 65, 33, 32, 48, 0, 1, 0, 0, 4e-3},
    {"bool_mask_masked_row_causal", NRT_FLOAT32, 1, 3, 3, 67, 67, 16, 16, 1, 2, 0, 0, 2e-5},
    {"dropout_causal", NRT_FLOAT32, 2, 2, 1, 80, 100, 24, 40, 1, 0, 0.3, 0, 2e-5},
    {"head_dim_256_strided", NRT_FLOAT32, 1, 2, 1, 20, 70, 256, 256, 0, 0, 0, 1, 2e-5},
    {"single_query", NRT_FLOAT32, 3, 2, 2, 1, 129, 8, 8, 0, 1, 0.5, 1, 2e-5},
    {"gqa_float_mask_dropout_bf16", NRT_BFLOAT16, 2, 4, 2, 70, 90, 80, 40, 0, 1, 0.2, 1, 2e-2},
};

static void test_cases_against_twin(void) {
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    operands o;
    CHECK_OK(run_case(&cases[k], &o));
    check_against_twin(&cases[k], &o);
    release_all(&o);
  }
}

static void test_bad_arguments(void) {
  attn_case c = cases[0];
  operands o;
  c.E = 300; /* head dim too large */
  CHECK_STATUS(run_case(&c, &o), NRT_ERROR_UNSUPPORTED);
  release_all(&o);
  c = cases[0];
  c.Hk = 3; /* 4 query heads over 3 key/value heads */
  CHECK_STATUS(run_case(&c, &o), NRT_ERROR_INVALID_ARGUMENT);
  release_all(&o);
  c = cases[0];
  c.dropout = 1.5;
  CHECK_STATUS(run_case(&c, &o), NRT_ERROR_INVALID_ARGUMENT);
  release_all(&o);
}

/* grad_q from the key/value pass (no mask): bit for bit what the query pass
 * gives, since both sum the same products in the same order, whether the op
 * runs one pass per head (B * Hk at least 4 per thread) or splits keys and
 * queries into blocks (fewer heads); grad_k and grad_v unchanged. */
static void kv_pass_grad_q_case(const attn_case *c) {
  operands o;
  CHECK_OK(run_case(c, &o));
  tensor dq = make4(c->dtype, c->B, c->H, c->L, c->E, 0);
  tensor dk = make4(c->dtype, c->B, c->Hk, c->S, c->E, 0);
  tensor dv = make4(c->dtype, c->B, c->Hk, c->S, c->Ev, 0);
  const tensor *kv[] = {&dk, &dv, &dq, &o.grad, &o.q, &o.k, &o.v, &o.stats};
  nrt_op op = make_op(NRT_OP_SDPA_BACKWARD_KV, 3, kv, 8, c);
  CHECK_OK(nrt_op_execute(&op));
  int same = 1;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->L; i++)
        for (int64_t e = 0; e < c->E; e++)
          same &= !memcmp(elem(&dq, b, h, i, e), elem(&o.dq, b, h, i, e), elem_size(c->dtype));
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->Hk; h++)
      for (int64_t j = 0; j < c->S; j++) {
        for (int64_t e = 0; e < c->E; e++)
          same &= !memcmp(elem(&dk, b, h, j, e), elem(&o.dk, b, h, j, e), elem_size(c->dtype));
        for (int64_t e = 0; e < c->Ev; e++)
          same &= !memcmp(elem(&dv, b, h, j, e), elem(&o.dv, b, h, j, e), elem_size(c->dtype));
      }
  if (!same) fprintf(stderr, "case %s: grad_q/k/v of the one-pass op differ\n", c->name);
  CHECK(same);
  release(&dq), release(&dk), release(&dv);
  release_all(&o);
}

static void test_grad_q_from_the_kv_pass_is_the_query_pass(void) {
  static const attn_case kv_q[] = {
      /* few heads: blocks of keys, then of queries */
      {"gqa_dropout_causal", NRT_FLOAT32, 2, 4, 2, 90, 50, 24, 40, 1, 0, 0.3, 1, 0},
      {"bf16", NRT_BFLOAT16, 1, 3, 3, 64, 64, 32, 32, 0, 0, 0, 0, 0},
      {"one_head_long_causal", NRT_FLOAT32, 1, 1, 1, 300, 300, 16, 16, 1, 0, 0, 0, 0},
      /* many heads: one pass per key/value head */
      {"heads_causal_128", NRT_FLOAT32, 4, 4, 4, 128, 128, 32, 32, 1, 0, 0, 0, 0},
      {"heads_gqa_200_dropout", NRT_FLOAT32, 2, 8, 4, 200, 200, 32, 16, 0, 0, 0.2, 0, 0},
      {"heads_unequal_causal_bf16", NRT_BFLOAT16, 3, 3, 3, 70, 130, 24, 40, 1, 0, 0, 0, 0},
      /* bfloat16 on hosts with its GEMM kernel: the same property */
      {"gqa_dropout_causal_bf16", NRT_BFLOAT16, 1, 4, 2, 90, 50, 24, 40, 1, 0, 0.3, 1, 0},
      {"heads_gqa_dropout_d80_bf16", NRT_BFLOAT16, 2, 8, 4, 130, 200, 80, 80, 0, 0, 0.2, 0, 0},
      {"heads_strided_more_queries_bf16", NRT_BFLOAT16, 3, 4, 4, 150, 65, 32, 48, 1, 0, 0, 1, 0},
      {"heads_more_queries_causal", NRT_FLOAT32, 3, 3, 3, 150, 70, 24, 24, 1, 0, 0, 0, 0},
      {"heads_strided_f16", NRT_FLOAT16, 2, 4, 4, 65, 65, 32, 32, 0, 0, 0, 1, 0},
      {"heads_one_key_causal", NRT_FLOAT32, 4, 2, 2, 5, 1, 8, 8, 1, 0, 0, 0, 0},
      {"heads_one_query", NRT_FLOAT32, 4, 2, 2, 1, 77, 8, 8, 0, 0, 0, 0, 0},
      {"heads_no_keys", NRT_FLOAT32, 4, 2, 2, 10, 0, 8, 8, 0, 0, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof kv_q / sizeof kv_q[0]; k++) kv_pass_grad_q_case(&kv_q[k]);
}

static void test_empty_keys_give_zeros(void) {
  attn_case c = cases[0];
  c.S = 0;
  operands o;
  CHECK_OK(run_case(&c, &o));
  int zeros = 1;
  for (int64_t i = 0; i < c.L; i++)
    for (int64_t d = 0; d < c.Ev; d++) zeros &= get(&o.out, 1, 3, i, d) == 0 && get(&o.dq, 1, 3, i, d % c.E) == 0;
  CHECK(zeros);
  release_all(&o);
}

/* ---- thread-count independence --------------------------------------------------- */

static int write_thread_case(void) {
  const char *path = getenv("ATTN_TEST_OUT");
  FILE *f = path ? fopen(path, "wb") : NULL;
  if (!f) return 1;
  /* the last: 8 heads, one pass per head with 1 thread, blocks with 3 */
  static const attn_case eight_heads = {"eight_heads", NRT_FLOAT32, 2, 4, 4, 130, 130, 32, 32,
                                        1, 0, 0.1, 0, 0};
  static const attn_case eight_heads_bf16 = {"eight_heads_bf16", NRT_BFLOAT16, 2, 4, 4, 130, 200,
                                             80, 48, 0, 0, 0.1, 0, 0};
  const attn_case *picks[] = {&cases[1], &cases[4], &cases[5], &eight_heads, &eight_heads_bf16};
  for (int k = 0; k < 5; k++) {
    const attn_case *c = picks[k];
    operands o;
    rng_state = 99;
    if (run_case(c, &o) != NRT_SUCCESS) return 1;
    /* the key/value pass with grad_q too */
    tensor dq = make4(c->dtype, c->B, c->H, c->L, c->E, 0);
    tensor dk = make4(c->dtype, c->B, c->Hk, c->S, c->E, 0);
    tensor dv = make4(c->dtype, c->B, c->Hk, c->S, c->Ev, 0);
    const tensor *kv[] = {&dk, &dv, &dq, &o.grad, &o.q, &o.k, &o.v, &o.stats};
    nrt_op op = make_op(NRT_OP_SDPA_BACKWARD_KV, 3, kv, 8, c);
    if (!c->mask && nrt_op_execute(&op) != NRT_SUCCESS) return 1;
    tensor *ts[] = {&o.out, &o.lse, &o.dq, &o.dk, &o.dv, &o.ds, &dq, &dk, &dv};
    for (int t = 0; t < 9; t++) {
      const nrt_tensor_view *v = &ts[t]->view;
      size_t n = (size_t)nrt_view_numel(v);
      fwrite(nrt_device_to_host(ts[t]->dev), elem_size(v->dtype), n, f);
    }
    release(&dq), release(&dk), release(&dv);
    release_all(&o);
  }
  fclose(f);
  return 0;
}

static void test_thread_count_independence(void) {
  CHECK(child_results_agree_across_threads("ATTN_TEST_OUT", "attention"));
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return write_thread_case();
  RUN(test_cases_against_twin);
  RUN(test_bad_arguments);
  RUN(test_grad_q_from_the_kv_pass_is_the_query_pass);
  RUN(test_empty_keys_give_zeros);
  RUN(test_thread_count_independence);
  return CHECK_MAIN_RESULT();
}
