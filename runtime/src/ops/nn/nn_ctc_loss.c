/* Connectionist temporal classification loss, forward and backward
 * (CTC_LOSS, CTC_LOSS_BACKWARD in neuronrt/ops/nn.h), after Graves et al.,
 * "Connectionist Temporal Classification" (ICML 2006), in log space.
 *
 * The extended target l' interleaves blanks with the labels: l'(2k) is the
 * blank, l'(2k + 1) the k-th label, 2 L + 1 states for L labels. The
 * forward variables alpha run over time, the backward ones (beta) are
 * never stored whole: the gradient of step t needs only alpha_t (read back
 * from log_alpha) and beta_t, so the backward pass walks time downwards
 * with two rows of beta. A step of either recursion is one pass over a row
 * of states with no dependence between states (the previous row is read
 * shifted by one and two), vectorised across the states; float32 data
 * computes in float with the runtime's vector exponential and logarithm (as
 * the CPU computes float32 in float), float64 in double. The gradient's
 * per-class sums of alpha beta are taken against the row's maximum, so that
 * the exponentials vectorise too; a class more than the float range below
 * that maximum contributes nothing a float can hold. The batch items are
 * independent and each is computed by one thread, so nothing depends on the
 * thread count.
 */
#include <stdatomic.h>
#include <stdint.h>
#include "ops/engine/elementwise.h"
#include "ops/engine/vmath.h"
#include "ops/nn/nn_common.h"

typedef struct ctc_job {
  const nrt_op *op;
  int64_t T, N, C, S; /* S: log_alpha's state extent (2 max L + 1) */
  int64_t blank;
  int zero_infinity;
  nrt_dtype dtype;
  /* Operands (host addresses, element strides). */
  const nrt_tensor_view *lp, *targets, *meta, *nll, *log_alpha, *grad, *grad_out;
  atomic_llong bad_item; /* smallest batch item with a label out of range */
  atomic_int out_of_memory;
} ctc_job;

static double read_at(const nrt_tensor_view *v, int64_t offset) {
  return v->dtype == NRT_FLOAT64 ? ((const double *)v->data)[offset] : (double)((const float *)v->data)[offset];
}

static void write_at(const nrt_tensor_view *v, int64_t offset, double x) {
  if (v->dtype == NRT_FLOAT64)
    ((double *)v->data)[offset] = x;
  else
    ((float *)v->data)[offset] = (float)x;
}

static double lp_at(const ctc_job *job, int64_t t, int64_t n, int64_t c) {
  const nrt_tensor_view *v = job->lp;
  return read_at(v, t * v->strides[0] + n * v->strides[1] + c * v->strides[2]);
}

static int64_t target_at(const ctc_job *job, int64_t k) {
  const nrt_tensor_view *v = job->targets;
  int64_t off = k * v->strides[0];
  return v->dtype == NRT_INT64 ? ((const int64_t *)v->data)[off] : (int64_t)((const int32_t *)v->data)[off];
}

static double log_add(double a, double b) {
  double m = a > b ? a : b;
  if (m == -INFINITY) return -INFINITY;
  return log(exp(a - m) + exp(b - m)) + m;
}

typedef struct ctc_item {
  int64_t input_length, target_length, target_offset;
  int64_t *label;      /* l'(s) for s < 2 L + 1 */
  unsigned char *skip; /* s may be reached from s - 2 (l'(s) != l'(s - 2)); 0 for the 2 past the end */
} ctc_item;

/* The steps of the recursions over one row of `states` states, for compute
 * type R. The rows are padded: prev[-1] = prev[-2] = -inf (forward) and
 * next[states] = next[states + 1] = -inf (backward).
 *   alpha: cur[s] = lse(prev[s], prev[s - 1], skip[s] ? prev[s - 2] : -inf) + lp[s]
 *   beta:  cur[s] = lse(next[s], next[s + 1], skip[s + 2] ? next[s + 2] : -inf) + lp[s]
 * lse of three -inf is -inf. */
#define CTC_STEPS(R, EXP, LOG, SUF)                                                                          \
  static inline __attribute__((always_inline)) R lse3_##SUF(R a1, R a2, R a3) {                            \
    R m = a1 > a2 ? a1 : a2;                                                                               \
    m = a3 > m ? a3 : m;                                                                                   \
    R base = m == -INFINITY ? (R)0 : m;                                                                    \
    R sum = EXP(a1 - base) + EXP(a2 - base) + EXP(a3 - base);                                              \
    return m == -INFINITY ? (R)-INFINITY : LOG(sum) + base;                                                \
  }                                                                                                        \
  RT_SIMD_VOID(alpha_step_##SUF,                                                                           \
               (const R *restrict prev, R *restrict cur, const R *restrict lp, const unsigned char *skip,   \
                int64_t states),                                                                           \
               (prev, cur, lp, skip, states)) {                                                            \
    for (int64_t s = 0; s < states; s++)                                                                   \
      cur[s] = lse3_##SUF(prev[s], prev[s - 1], skip[s] ? prev[s - 2] : (R)-INFINITY) + lp[s];             \
  }                                                                                                        \
  RT_SIMD_VOID(beta_step_##SUF,                                                                            \
               (const R *restrict next, R *restrict cur, const R *restrict lp, const unsigned char *skip,   \
                int64_t states),                                                                           \
               (next, cur, lp, skip, states)) {                                                            \
    for (int64_t s = 0; s < states; s++)                                                                   \
      cur[s] = lse3_##SUF(next[s], next[s + 1], skip[s + 2] ? next[s + 2] : (R)-INFINITY) + lp[s];         \
  }                                                                                                        \
  /* ab[s] = exp(ab[s] - max) in place; returns max (-inf: all zero). */                                   \
  RT_SIMD_RETURNS(R, exp_against_max_##SUF, (R *restrict ab, int64_t n), (ab, n)) {                         \
    R m = -INFINITY;                                                                                       \
    for (int64_t s = 0; s < n; s++) m = ab[s] > m ? ab[s] : m;                                             \
    R base = m == -INFINITY ? (R)0 : m;                                                                    \
    for (int64_t s = 0; s < n; s++) ab[s] = ab[s] == -INFINITY ? (R)0 : EXP(ab[s] - base);                 \
    return m;                                                                                              \
  }                                                                                                        \
  /* g[c] = (exp(lp[c]) - exp(lcab[c] + nll - lp[c])) gr */                                                \
  RT_SIMD_VOID(grad_row_##SUF,                                                                             \
               (const R *restrict lp, const R *restrict lcab, R *restrict g, R nll, R gr, int64_t C),       \
               (lp, lcab, g, nll, gr, C)) {                                                                \
    for (int64_t c = 0; c < C; c++) g[c] = (EXP(lp[c]) - EXP(lcab[c] + nll - lp[c])) * gr;                 \
  }

CTC_STEPS(float, rt_vm_expf, rt_vm_logf, f)
CTC_STEPS(double, exp, log, d)

/* Reads item n's lengths and builds its extended target; 0 when a label is
 * out of range (recorded). */
static int load_item(ctc_job *job, int64_t n, ctc_item *it) {
  const int64_t *meta = (const int64_t *)job->meta->data + 3 * n;
  it->input_length = meta[0];
  it->target_length = meta[1];
  it->target_offset = meta[2];
  for (int64_t s = 0; s < 2 * it->target_length + 1; s++) {
    if (s % 2 == 0) {
      it->label[s] = job->blank;
      continue;
    }
    int64_t c = target_at(job, it->target_offset + s / 2);
    if (c < 0 || c >= job->C) {
      long long prev = atomic_load(&job->bad_item);
      while (n < prev && !atomic_compare_exchange_weak(&job->bad_item, &prev, n)) {
      }
      return 0;
    }
    it->label[s] = c;
  }
  const int64_t states = 2 * it->target_length + 1;
  for (int64_t s = 0; s < states + 2; s++)
    it->skip[s] = s > 1 && s < states && it->label[s] != it->label[s - 2];
  return 1;
}

/* Forward and backward passes of one batch item in compute type R. The
 * scratch rows hold states + 4 values; rows a and b alternate. */
#define CTC_ITEM(R, SUF)                                                                                     \
  static void forward_item_##SUF(ctc_job *job, int64_t n, const ctc_item *it, R *row_a, R *row_b, R *lpr) { \
    const int64_t T = job->T, S = job->S, L = it->target_length, states = 2 * L + 1;                        \
    const int64_t Tn = it->input_length;                                                                    \
    const nrt_tensor_view *la = job->log_alpha;                                                             \
    const int64_t row0 = n * la->strides[0];                                                                \
    R *prev = row_a + 2, *cur = row_b + 2;                                                                  \
    prev[-2] = prev[-1] = cur[-2] = cur[-1] = (R)-INFINITY;                                                 \
    for (int64_t s = 0; s < states; s++) prev[s] = (R)-INFINITY;                                            \
    if (Tn > 0) {                                                                                           \
      prev[0] = (R)lp_at(job, 0, n, job->blank);                                                            \
      if (L > 0) prev[1] = (R)lp_at(job, 0, n, it->label[1]);                                               \
    }                                                                                                       \
    for (int64_t t = 0; t < T; t++) {                                                                       \
      if (t > 0 && t < Tn) {                                                                                \
        for (int64_t s = 0; s < states; s++) lpr[s] = (R)lp_at(job, t, n, it->label[s]);                    \
        alpha_step_##SUF(prev, cur, lpr, it->skip, states);                                                 \
        R *swap = prev;                                                                                     \
        prev = cur;                                                                                         \
        cur = swap;                                                                                         \
      }                                                                                                     \
      /* Row t of log_alpha: -inf past the item's states or input. */                                       \
      for (int64_t s = 0; s < S; s++)                                                                       \
        write_at(la, row0 + t * la->strides[1] + s * la->strides[2],                                        \
                 t < Tn && s < states ? (double)prev[s] : -INFINITY);                                       \
    }                                                                                                       \
    double nll;                                                                                             \
    if (Tn == 0)                                                                                            \
      nll = L == 0 ? -0.0 : INFINITY;                                                                       \
    else                                                                                                    \
      nll = -(L == 0 ? (double)prev[0] : log_add((double)prev[states - 1], (double)prev[states - 2]));     \
    write_at(job->nll, n * job->nll->strides[0], nll);                                                      \
  }                                                                                                         \
                                                                                                            \
  static void backward_item_##SUF(ctc_job *job, int64_t n, const ctc_item *it, R *row_a, R *row_b,         \
                                  R *lpr, R *ab, R *lcab, R *grow_buf) {                                    \
    const int64_t T = job->T, C = job->C, L = it->target_length, states = 2 * L + 1;                        \
    const int64_t Tn = it->input_length;                                                                    \
    const nrt_tensor_view *g = job->grad, *la = job->log_alpha;                                             \
    const double nll = read_at(job->nll, n * job->nll->strides[0]);                                         \
    const double gr = read_at(job->grad_out, n * job->grad_out->strides[0]);                                \
    const int zero = job->zero_infinity && nll == INFINITY;                                                 \
    R *next = row_a, *cur = row_b;                                                                          \
    next[states] = next[states + 1] = cur[states] = cur[states + 1] = (R)-INFINITY;                         \
    for (int64_t t = T - 1; t >= 0; t--) {                                                                  \
      const int64_t grow = t * g->strides[0] + n * g->strides[1];                                           \
      if (t >= Tn || zero) {                                                                                \
        for (int64_t c = 0; c < C; c++) write_at(g, grow + c * g->strides[2], 0.0);                         \
        continue;                                                                                           \
      }                                                                                                     \
      for (int64_t s = 0; s < states; s++) lpr[s] = (R)lp_at(job, t, n, it->label[s]);                      \
      if (t == Tn - 1) {                                                                                    \
        for (int64_t s = 0; s < states; s++) cur[s] = (R)-INFINITY;                                         \
        cur[states - 1] = lpr[states - 1];                                                                  \
        if (L > 0) cur[states - 2] = lpr[states - 2];                                                       \
      } else {                                                                                              \
        beta_step_##SUF(next, cur, lpr, it->skip, states);                                                  \
      }                                                                                                     \
      /* Per class, log of the summed alpha beta of the states carrying it. */                              \
      const int64_t arow = n * la->strides[0] + t * la->strides[1];                                         \
      for (int64_t s = 0; s < states; s++) ab[s] = (R)read_at(la, arow + s * la->strides[2]) + cur[s];      \
      R m = exp_against_max_##SUF(ab, states);                                                              \
      for (int64_t c = 0; c < C; c++) lcab[c] = 0;                                                          \
      for (int64_t s = 0; s < states; s++) lcab[it->label[s]] += ab[s];                                     \
      for (int64_t c = 0; c < C; c++) lcab[c] = lcab[c] > 0 ? (R)log((double)lcab[c]) + m : (R)-INFINITY;   \
      for (int64_t c = 0; c < C; c++) grow_buf[c] = (R)lp_at(job, t, n, c);                                 \
      grad_row_##SUF(grow_buf, lcab, grow_buf + C, (R)nll, (R)gr, C);                                       \
      for (int64_t c = 0; c < C; c++) write_at(g, grow + c * g->strides[2], (double)grow_buf[C + c]);       \
      R *swap = next;                                                                                       \
      next = cur;                                                                                           \
      cur = swap;                                                                                           \
    }                                                                                                       \
  }

CTC_ITEM(float, f)
CTC_ITEM(double, d)

static void ctc_range(int64_t begin, int64_t end, void *ctx) {
  ctc_job *job = ctx;
  const int backward = job->grad != NULL;
  /* Scratch, in doubles: the extended target, its skip flags, two padded
   * rows of states, the gathered log-probabilities (a row of states or of
   * classes), and (backward) alpha beta, the per-class sums and a row of
   * the gradient and its log-probabilities. */
  const int64_t S = job->S, C = job->C, wide = S > C ? S : C;
  const int64_t words = S + (S + 2 + 7) / 8 + 2 * (S + 4) + wide + S + 3 * C;
  double *scratch = malloc((size_t)words * sizeof(double));
  if (scratch == NULL) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  ctc_item it = {.label = (int64_t *)(void *)scratch, .skip = (unsigned char *)(scratch + S)};
  double *row_a = scratch + S + (S + 2 + 7) / 8, *row_b = row_a + S + 4, *lpr = row_b + S + 4;
  double *ab = lpr + wide, *lcab = ab + S, *grow = lcab + C;
  const int single = job->dtype == NRT_FLOAT32;
  for (int64_t n = begin; n < end; n++) {
    if (!load_item(job, n, &it)) continue;
    if (backward && single)
      backward_item_f(job, n, &it, (float *)row_a, (float *)row_b, (float *)lpr, (float *)ab, (float *)lcab,
                      (float *)grow);
    else if (backward)
      backward_item_d(job, n, &it, row_a, row_b, lpr, ab, lcab, grow);
    else if (single)
      forward_item_f(job, n, &it, (float *)row_a, (float *)row_b, (float *)lpr);
    else
      forward_item_d(job, n, &it, row_a, row_b, lpr);
  }
  free(scratch);
}

static int is_ctc_float(nrt_dtype t) { return t == NRT_FLOAT32 || t == NRT_FLOAT64; }

/* Checks the operands common to both directions and each item's lengths. */
static nrt_status setup(ctc_job *job, const char *name) {
  const nrt_tensor_view *lp = job->lp, *tg = job->targets, *meta = job->meta, *la = job->log_alpha;
  if (lp->ndim != 3 || !is_ctc_float(lp->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects log_probs [T, N, C] of float32 or float64", name);
  job->T = lp->shape[0];
  job->N = lp->shape[1];
  job->C = lp->shape[2];
  job->dtype = lp->dtype;
  if (tg->ndim != 1 || (tg->dtype != NRT_INT64 && tg->dtype != NRT_INT32))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects targets as a 1-d int32 or int64 view", name);
  if (meta->ndim != 2 || meta->dtype != NRT_INT64 || meta->shape[0] != job->N || meta->shape[1] != 3 ||
      meta->strides[1] != 1 || meta->strides[0] != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects a contiguous int64 [N, 3] of (input length, target length, target offset)", name);
  if (la->ndim != 3 || la->dtype != lp->dtype || la->shape[0] != job->N || la->shape[1] != job->T ||
      la->shape[2] < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects log_alpha [N, T, 2 max L + 1] of log_probs' dtype", name);
  job->S = la->shape[2];
  if (job->C > 0 && (job->blank < 0 || job->blank >= job->C))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: blank must be in label range", name);
  const int64_t *m = (const int64_t *)meta->data;
  for (int64_t n = 0; n < job->N; n++) {
    int64_t in_len = m[3 * n], tg_len = m[3 * n + 1], off = m[3 * n + 2];
    if (in_len < 0 || in_len > job->T || tg_len < 0 || 2 * tg_len + 1 > job->S || off < 0 ||
        off + tg_len > tg->shape[0])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "%s: batch item %lld: input length %lld, target length %lld at offset %lld do not fit "
                     "T = %lld, %lld states and %lld targets",
                     name, (long long)n, (long long)in_len, (long long)tg_len, (long long)off, (long long)job->T,
                     (long long)job->S, (long long)tg->shape[0]);
    if (in_len > 0 && job->C == 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: log_probs has no classes", name);
  }
  atomic_init(&job->bad_item, INT64_MAX);
  atomic_init(&job->out_of_memory, 0);
  return NRT_SUCCESS;
}

static nrt_status run(ctc_job *job, const char *name) {
  if (job->N > 0) rt_parallel_for(job->N, 1, ctc_range, job);
  if (atomic_load(&job->out_of_memory)) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  long long bad = atomic_load(&job->bad_item);
  if (bad != INT64_MAX)
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: batch item %lld has a target label outside [0, %lld)", name,
                   bad, (long long)job->C);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_ctc_loss(const nrt_op *op) {
  const char *name = "ctc_loss";
  if (op->num_operands != 5 || op->num_outputs != 2 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [nll, log_alpha, log_probs, targets, meta] and scalars [blank]", name);
  ctc_job job = {.op = op, .blank = op->scalars[0].i, .nll = &op->operands[0], .log_alpha = &op->operands[1],
                 .lp = &op->operands[2], .targets = &op->operands[3], .meta = &op->operands[4]};
  nrt_status st = setup(&job, name);
  if (st != NRT_SUCCESS) return st;
  if (job.nll->ndim != 1 || job.nll->shape[0] != job.N || job.nll->dtype != job.dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects nll [N] of log_probs' dtype", name);
  return run(&job, name);
}

nrt_status rt_kernel_ctc_loss_backward(const nrt_op *op) {
  const char *name = "ctc_loss_backward";
  if (op->num_operands != 7 || op->num_outputs != 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [grad, grad_out, log_probs, targets, meta, nll, log_alpha] and "
                   "scalars [blank, zero_infinity]",
                   name);
  ctc_job job = {.op = op, .blank = op->scalars[0].i, .zero_infinity = op->scalars[1].i != 0,
                 .grad = &op->operands[0], .grad_out = &op->operands[1], .lp = &op->operands[2],
                 .targets = &op->operands[3], .meta = &op->operands[4], .nll = &op->operands[5],
                 .log_alpha = &op->operands[6]};
  nrt_status st = setup(&job, name);
  if (st != NRT_SUCCESS) return st;
  const nrt_tensor_view *g = job.grad;
  if (g->ndim != 3 || g->dtype != job.dtype || g->shape[0] != job.T || g->shape[1] != job.N ||
      g->shape[2] != job.C)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects grad [T, N, C] of log_probs' dtype", name);
  for (int k = 0; k < 2; k++) {
    const nrt_tensor_view *v = k == 0 ? job.grad_out : job.nll;
    if (v->ndim != 1 || v->shape[0] != job.N || !is_ctc_float(v->dtype))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects grad_out and nll of shape [N]", name);
  }
  return run(&job, name);
}
