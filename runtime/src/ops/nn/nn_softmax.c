/* Softmax and log-softmax along the middle dimension of [outer, n, inner]
 * views, and their gradients (SOFTMAX ... LOG_SOFTMAX_BACKWARD in
 * neuronrt/ops/nn.h).
 *
 * Two layouts. Row mode (the softmax dimension is the input's innermost
 * one, the common case): each row is one task; the maximum, then one pass
 * that computes exp(x - max) with the vectorised exponential, stores it and
 * sums it, then a scaling pass, all on a row still in cache. Column mode
 * (the softmax dimension is strided): blocks of NN_COLS neighbouring
 * columns walk the rows together, so every load is a contiguous run and the
 * per-column loops vectorise across columns; the exponential is recomputed
 * in the last pass rather than kept. Each row or column is reduced by one
 * thread in a fixed order.
 *
 * An optional bool mask (the fast path's masked softmax) is a 4-d view
 * [A, B, n, inner] with A B = outer, so a (B, L) padding mask or an (L, L)
 * attention mask broadcast over heads needs no copy: a masked input counts
 * as -inf (a row masked whole is NaN, as -inf minus a -inf maximum), and a
 * masked entry gets no gradient and adds nothing to the row's sum.
 */
#include <stdatomic.h>
#include "ops/nn/nn_common.h"

#define NN_COLS 64

typedef struct sm_job {
  nn_operand o[3]; /* [out, in] or [grad_in, grad_out, out] */
  int nops;
  int log;
  int backward;
  int rows_mode;
  nrt_dtype c;
  int64_t outer, n, inner, blocks;
  atomic_int out_of_memory;
  const unsigned char *mask; /* NULL when unmasked */
  int64_t mask_b, mask_stride[4]; /* B of [A, B, n, inner]; byte strides */
} sm_job;

/* The mask of row (outer, inner) at n = 0. */
static const unsigned char *sm_mask_at(const sm_job *job, int64_t outer, int64_t inner) {
  return job->mask + outer / job->mask_b * job->mask_stride[0] + outer % job->mask_b * job->mask_stride[1] +
         inner * job->mask_stride[3];
}

/* Row and column loops for compute type C (SUF f: float, d: double). */
#define DEFINE_SOFTMAX(C, SUF, EXP, EXP_TAME, TAME_LO, LOG, NEG_INF)                               \
  /* buf = x with fill where the mask m (byte stride ms) is set; x may be buf. A mask */         \
  /* contiguous along the run (the usual one) gets its own loop, which vectorises. */            \
  RT_SIMD_VOID(mask_fill_##SUF, (const C *x, C *buf, const unsigned char *m, int64_t ms,          \
                                 int64_t n, C fill), (x, buf, m, ms, n, fill)) {                  \
    if (ms == 1)                                                                                  \
      for (int64_t j = 0; j < n; j++) buf[j] = m[j] ? fill : x[j];                                \
    else                                                                                          \
      for (int64_t j = 0; j < n; j++) buf[j] = m[j * ms] ? fill : x[j];                           \
  }                                                                                               \
  RT_SIMD_VOID(fwd_row_##SUF, (const C *restrict x, C *restrict y, int64_t n, int is_log),        \
                              (x, y, n, is_log)) {                                                \
    C lanes[RT_LANES], low[RT_LANES], nonfinite[RT_LANES];                                        \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = NEG_INF, low[k] = -(NEG_INF), nonfinite[k] = 0; \
    int64_t i = 0;                                                                                \
    for (; i + RT_LANES <= n; i += RT_LANES)                                                      \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                           \
        lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];                                     \
        low[k] = x[i + k] < low[k] ? x[i + k] : low[k];                                           \
        nonfinite[k] += x[i + k] * 0; /* NaN once any value is NaN or infinite */                 \
      }                                                                                           \
    for (int k = 0; i < n; i++, k++) {                                                            \
      lanes[k] = x[i] > lanes[k] ? x[i] : lanes[k];                                               \
      low[k] = x[i] < low[k] ? x[i] : low[k];                                                     \
      nonfinite[k] += x[i] * 0;                                                                   \
    }                                                                                             \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                     \
      for (int k = 0; k < w; k++) {                                                               \
        lanes[k] = lanes[k + w] > lanes[k] ? lanes[k + w] : lanes[k];                             \
        low[k] = low[k + w] < low[k] ? low[k + w] : low[k];                                       \
        nonfinite[k] += nonfinite[k + w];                                                         \
      }                                                                                           \
    const C m = lanes[0];                                                                         \
    /* every x - m in [TAME_LO, 0]: the exponential's tame twin, same bits */                     \
    const int tame = nonfinite[0] == 0 && low[0] - m >= (TAME_LO);                                \
    double total;                                                                                 \
    if (is_log) {                                                                                 \
      if (tame)                                                                                   \
        NN_SUM_NARROW(C, n, total, EXP_TAME(x[j] - m));                                           \
      else                                                                                        \
        NN_SUM_NARROW(C, n, total, EXP(x[j] - m));                                                \
      const C lsum = (C)LOG((C)total);                                                            \
      for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) - lsum;                                   \
    } else {                                                                                      \
      if (tame)                                                                                   \
        NN_SUM_NARROW(C, n, total, (y[j] = EXP_TAME(x[j] - m)));                                  \
      else                                                                                        \
        NN_SUM_NARROW(C, n, total, (y[j] = EXP(x[j] - m)));                                       \
      const C inv = (C)(1.0 / total);                                                             \
      for (int64_t j = 0; j < n; j++) y[j] *= inv;                                                \
    }                                                                                             \
  }                                                                                               \
  RT_SIMD_VOID(bwd_row_##SUF, (const C *restrict gy, const C *restrict y, C *restrict gx,         \
                               int64_t n, int is_log), (gy, y, gx, n, is_log)) {                  \
    double total;                                                                                 \
    if (is_log) {                                                                                    \
      NN_SUM(C, n, total, gy[j]);                                                                 \
      const C s = (C)total;                                                                       \
      for (int64_t j = 0; j < n; j++) gx[j] = gy[j] - EXP(y[j]) * s;                              \
    } else {                                                                                      \
      NN_SUM(C, n, total, gy[j] * y[j]);                                                          \
      const C dot = (C)total;                                                                     \
      for (int64_t j = 0; j < n; j++) gx[j] = y[j] * (gy[j] - dot);                               \
    }                                                                                             \
  }                                                                                               \
  /* Column mode: the w <= NN_COLS columns at byte offset off of each operand. */                 \
  /* The masked inputs of one run: x as -inf, or grad_out and out as 0. */                        \
  static void mask_inputs_##SUF(const sm_job *job, const C **in, C (*buf)[NN_COLS],               \
                                const unsigned char *m, int64_t w) {                              \
    const int64_t ms = job->mask_stride[3];                                                       \
    mask_fill_##SUF(in[0], buf[1], m, ms, w, job->backward ? 0 : NEG_INF);                       \
    in[0] = buf[1];                                                                               \
    if (!job->backward) return;                                                                   \
    mask_fill_##SUF(in[1], buf[2], m, ms, w, 0);                                                  \
    in[1] = buf[2];                                                                               \
  }                                                                                               \
  /* m: the mask at row 0 of these columns, if masked */                                           \
  RT_SIMD_VOID(cols_##SUF, (const sm_job *job, const int64_t *off, const unsigned char *m,         \
                            int64_t w), (job, off, m, w)) {                                       \
    C buf[3][NN_COLS], acc[NN_COLS], part[NN_COLS], mx[NN_COLS];                                  \
    double sum[NN_COLS];                                                                          \
    const nn_operand *o = job->o;                                                                 \
    const nrt_dtype c = job->c;                                                                   \
    const int64_t n = job->n;                                                                     \
    const int is_log = job->log;                                                                     \
    const int nin = job->nops - 1; /* inputs are operands 1.. */                                  \
    const C *in[2] = {0, 0};                                                                      \
    for (int64_t j = 0; j < w; j++) {                                                             \
      mx[j] = NEG_INF;                                                                            \
      part[j] = 0;                                                                                \
      sum[j] = 0;                                                                                 \
    }                                                                                             \
    if (!job->backward) {                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const C *x = nn_load(o[1].base + off[1] + i * o[1].stride[1], o[1].stride[2], o[1].dtype, \
                             c, w, buf[1]);                                                       \
        if (m) {                                                                                  \
          mask_fill_##SUF(x, buf[1], m + i * job->mask_stride[2], job->mask_stride[3], w, NEG_INF); \
          x = buf[1];                                                                             \
        }                                                                                         \
        for (int64_t j = 0; j < w; j++) mx[j] = x[j] > mx[j] ? x[j] : mx[j];                      \
      }                                                                                           \
    }                                                                                             \
    /* the sums: exp(x - max), or grad_out (log backward), or grad_out * out */                   \
    for (int64_t i = 0; i < n; i++) {                                                             \
      for (int k = 0; k < nin; k++)                                                               \
        in[k] = nn_load(o[k + 1].base + off[k + 1] + i * o[k + 1].stride[1], o[k + 1].stride[2],  \
                        o[k + 1].dtype, c, w, buf[k + 1]);                                        \
      if (m) mask_inputs_##SUF(job, in, buf, m + i * job->mask_stride[2], w);                     \
      if (!job->backward)                                                                         \
        for (int64_t j = 0; j < w; j++) part[j] += EXP(in[0][j] - mx[j]);                         \
      else if (is_log)                                                                               \
        for (int64_t j = 0; j < w; j++) part[j] += in[0][j];                                      \
      else                                                                                        \
        for (int64_t j = 0; j < w; j++) part[j] += in[0][j] * in[1][j];                           \
      if ((i + 1) % (NN_FLUSH / RT_LANES) == 0 || i + 1 == n)                                     \
        for (int64_t j = 0; j < w; j++) {                                                         \
          sum[j] += part[j];                                                                      \
          part[j] = 0;                                                                            \
        }                                                                                         \
    }                                                                                             \
    for (int64_t j = 0; j < w; j++)                                                               \
      acc[j] = job->backward ? (C)sum[j] : is_log ? (C)LOG((C)sum[j]) : (C)(1.0 / sum[j]);           \
    for (int64_t i = 0; i < n; i++) {                                                             \
      for (int k = 0; k < nin; k++)                                                               \
        in[k] = nn_load(o[k + 1].base + off[k + 1] + i * o[k + 1].stride[1], o[k + 1].stride[2],  \
                        o[k + 1].dtype, c, w, buf[k + 1]);                                        \
      if (m) mask_inputs_##SUF(job, in, buf, m + i * job->mask_stride[2], w);                     \
      char *dst = o[0].base + off[0] + i * o[0].stride[1];                                        \
      C *r = nn_target(dst, o[0].stride[2], o[0].dtype, c, w, buf[0]);                            \
      if (!job->backward && is_log)                                                                  \
        for (int64_t j = 0; j < w; j++) r[j] = (in[0][j] - mx[j]) - acc[j];                       \
      else if (!job->backward)                                                                    \
        for (int64_t j = 0; j < w; j++) r[j] = EXP(in[0][j] - mx[j]) * acc[j];                    \
      else if (is_log)                                                                               \
        for (int64_t j = 0; j < w; j++) r[j] = in[0][j] - EXP(in[1][j]) * acc[j];                 \
      else                                                                                        \
        for (int64_t j = 0; j < w; j++) r[j] = in[1][j] * (in[0][j] - acc[j]);                    \
      if (m && job->backward) mask_fill_##SUF(r, r, m + i * job->mask_stride[2], job->mask_stride[3], \
                                              w, 0);                                              \
      nn_store(dst, o[0].stride[2], o[0].dtype, c, w, r);                                         \
    }                                                                                             \
  }

DEFINE_SOFTMAX(float, f, rt_vm_expf, rt_vm_expf_tame, RT_VM_EXP_TAME_LO, logf, -INFINITY)
DEFINE_SOFTMAX(double, d, exp, exp, -(double)INFINITY, log, -(double)INFINITY)

/* The forward row of contiguous bfloat16 input and output: the same float
 * arithmetic as fwd_row_f on the converted row (bitwise the same result),
 * with the conversions as plain loops into and out of tmp (2n floats)
 * instead of the strided converters, which took a third of a bfloat16
 * softmax's time. Converting inside the exponential's loop made GCC use
 * 256-bit vectors and spill there. */
RT_SIMD_VOID(fwd_row_bf16, (const rt_bfloat16 *restrict x, rt_bfloat16 *restrict y, float *restrict tmp,
                            int64_t n, int is_log), (x, y, tmp, n, is_log)) {
  float *restrict xf = tmp + n;
  float lanes[RT_LANES], low[RT_LANES], nonfinite[RT_LANES];
  for (int k = 0; k < RT_LANES; k++) lanes[k] = -INFINITY, low[k] = INFINITY, nonfinite[k] = 0;
  int64_t i = 0;
  /* The conversion, the extremes and a finiteness check in one pass. */
  for (; i + RT_LANES <= n; i += RT_LANES)
    RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {
      float v = rt_bfloat16_to_float(x[i + k]);
      xf[i + k] = v;
      lanes[k] = v > lanes[k] ? v : lanes[k];
      low[k] = v < low[k] ? v : low[k];
      nonfinite[k] += v * 0;
    }
  for (int k = 0; i < n; i++, k++) {
    xf[i] = rt_bfloat16_to_float(x[i]);
    lanes[k] = xf[i] > lanes[k] ? xf[i] : lanes[k];
    low[k] = xf[i] < low[k] ? xf[i] : low[k];
    nonfinite[k] += xf[i] * 0;
  }
  for (int w = RT_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) {
      lanes[k] = lanes[k + w] > lanes[k] ? lanes[k + w] : lanes[k];
      low[k] = low[k + w] < low[k] ? low[k + w] : low[k];
      nonfinite[k] += nonfinite[k + w];
    }
  const float m = lanes[0];
  const int tame = nonfinite[0] == 0 && low[0] - m >= RT_VM_EXP_TAME_LO;
  double total;
  if (is_log) {
    if (tame)
      NN_SUM_NARROW(float, n, total, rt_vm_expf_tame(xf[j] - m));
    else
      NN_SUM_NARROW(float, n, total, rt_vm_expf(xf[j] - m));
    const float lsum = logf((float)total);
    for (int64_t j = 0; j < n; j++) y[j] = rt_bfloat16_from_float((xf[j] - m) - lsum);
  } else {
    if (tame)
      NN_SUM_NARROW(float, n, total, (tmp[j] = rt_vm_expf_tame(xf[j] - m)));
    else
      NN_SUM_NARROW(float, n, total, (tmp[j] = rt_vm_expf(xf[j] - m)));
    const float inv = (float)(1.0 / total);
    for (int64_t j = 0; j < n; j++) y[j] = rt_bfloat16_from_float(tmp[j] * inv);
  }
}

/* Contiguous bfloat16 rows to and from float32 by plain loops (see
 * fwd_row_bf16): the backward rows' three conversions. Only where the
 * row is computed in float32 (another operand may be float64). */
static int is_bf16_row(const nn_operand *o, nrt_dtype c) {
  return o->dtype == NRT_BFLOAT16 && o->stride[1] == 2 && c == NRT_FLOAT32;
}
RT_SIMD_VOID(bf16_row_to_float, (const rt_bfloat16 *restrict x, float *restrict out, int64_t n), (x, out, n)) {
  for (int64_t j = 0; j < n; j++) out[j] = rt_bfloat16_to_float(x[j]);
}
RT_SIMD_VOID(bf16_row_out, (rt_bfloat16 *restrict y, const float *restrict v, int64_t n), (y, v, n)) {
  for (int64_t j = 0; j < n; j++) y[j] = rt_bfloat16_from_float(v[j]);
}
static const float *bf16_row_in(const rt_bfloat16 *x, float *buf, int64_t n) {
  bf16_row_to_float(x, buf, n);
  return buf;
}

/* Asks for the next row's input while this one computes: a row is a few
 * KiB, and the streamer alone left the first pass waiting on memory (a
 * quarter of a bfloat16 forward's samples). */
static void prefetch_row(const char *p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 3);
}

static const void *mask_fill(nrt_dtype c, const void *x, void *buf, const unsigned char *m, int64_t ms,
                             int64_t n, double fill) {
  if (c == NRT_FLOAT64)
    mask_fill_d(x, buf, m, ms, n, fill);
  else
    mask_fill_f(x, buf, m, ms, n, (float)fill);
  return buf;
}

static void softmax_range(int64_t begin, int64_t end, void *ctx) {
  sm_job *job = ctx;
  const nn_operand *o = job->o;
  const nrt_dtype c = job->c;
  const int64_t csize = (int64_t)nrt_dtype_size(c);
  if (!job->rows_mode) {
    for (int64_t item = begin; item < end; item++) {
      int64_t outer = item / job->blocks, j0 = (item % job->blocks) * NN_COLS;
      int64_t w = job->inner - j0 < NN_COLS ? job->inner - j0 : NN_COLS, off[3];
      for (int k = 0; k < job->nops; k++) off[k] = outer * o[k].stride[0] + j0 * o[k].stride[2];
      const unsigned char *m = job->mask ? sm_mask_at(job, outer, j0) : NULL;
      if (c == NRT_FLOAT64)
        cols_d(job, off, m, w);
      else
        cols_f(job, off, m, w);
    }
    return;
  }
  const int64_t n = job->n;
  char *scratch = malloc((size_t)(3 * n * csize));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  for (int64_t item = begin; item < end; item++) {
    int64_t outer = item / job->inner, inner = item % job->inner;
    char *p[3] = {0};
    const void *in[2] = {0};
    for (int k = 0; k < job->nops; k++) p[k] = o[k].base + outer * o[k].stride[0] + inner * o[k].stride[2];
    if (!job->backward && !job->mask && is_bf16_row(&o[0], c) && is_bf16_row(&o[1], c)) {
      if (item + 1 < end) prefetch_row(p[1] + (job->inner == 1 ? o[1].stride[0] : o[1].stride[2]), n * 2);
      fwd_row_bf16((const rt_bfloat16 *)p[1], (rt_bfloat16 *)p[0], (float *)(void *)scratch, n, job->log);
      continue;
    }
    for (int k = 1; k < job->nops; k++)
      in[k - 1] = is_bf16_row(&o[k], c) ? bf16_row_in((const rt_bfloat16 *)(const void *)p[k],
                                                   (float *)(void *)(scratch + k * n * csize), n)
                                     : nn_load(p[k], o[k].stride[1], o[k].dtype, c, n, scratch + k * n * csize);
    const unsigned char *m = job->mask ? sm_mask_at(job, outer, inner) : NULL;
    if (m) /* into the inputs' own scratch rows, which nn_load may not have used */
      for (int k = 1; k < job->nops; k++)
        in[k - 1] = mask_fill(c, in[k - 1], scratch + k * n * csize, m, job->mask_stride[2], n,
                              job->backward ? 0 : -INFINITY);
    void *r = nn_target(p[0], o[0].stride[1], o[0].dtype, c, n, scratch);
    if (c == NRT_FLOAT64) {
      if (job->backward)
        bwd_row_d(in[0], in[1], r, n, job->log);
      else
        fwd_row_d(in[0], r, n, job->log);
    } else {
      if (job->backward)
        bwd_row_f(in[0], in[1], r, n, job->log);
      else
        fwd_row_f(in[0], r, n, job->log);
    }
    if (m && job->backward) mask_fill(c, r, r, m, job->mask_stride[2], n, 0);
    if (is_bf16_row(&o[0], c))
      bf16_row_out((rt_bfloat16 *)(void *)p[0], r, n);
    else
      nn_store(p[0], o[0].stride[1], o[0].dtype, c, n, r);
  }
  free(scratch);
}

/* The optional mask (operand k): a bool view [A, B, n, inner], A B = outer. */
static nrt_status take_mask(const nrt_op *op, int k, sm_job *job) {
  const char *name = nrt_op_name(op->code);
  const nrt_tensor_view *v = &op->operands[k];
  if (job->log) return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: a mask is for softmax only", name);
  if (v->dtype != NRT_BOOL) return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: the mask must be bool", name);
  if (v->ndim != 4 || v->shape[0] * v->shape[1] != job->outer || v->shape[2] != job->n ||
      v->shape[3] != job->inner)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the mask must be [A, B, n, inner] with A B = outer", name);
  job->mask = v->data;
  job->mask_b = v->shape[1];
  for (int d = 0; d < 4; d++) job->mask_stride[d] = v->strides[d];
  return NRT_SUCCESS;
}

static nrt_status run_softmax(const nrt_op *op, int log, int backward) {
  const char *name = nrt_op_name(op->code);
  int nops = backward ? 3 : 2;
  int masked = op->num_operands == nops + 1;
  nrt_status s = nn_check_operands(op, nops + masked, 1, backward ? 7u : 3u);
  if (s) return s;
  sm_job job = {.nops = nops, .log = log, .backward = backward};
  for (int k = 0; k < nops; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    if (v->ndim != 3) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be 3-d views", name);
    for (int d = 0; d < 3; d++)
      if (v->shape[d] != op->operands[0].shape[d])
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand shapes differ", name);
    if (!nn_is_float(v->dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not floating", name, nrt_dtype_name(v->dtype));
    job.o[k] = nn_operand_of(v);
  }
  job.outer = job.o[0].size[0];
  job.n = job.o[0].size[1];
  job.inner = job.o[0].size[2];
  if (job.outer * job.n * job.inner == 0) return NRT_SUCCESS;
  if (masked && (s = take_mask(op, nops, &job))) return s;
  /* Computed in float64 if the data it reads is float64. */
  job.c = nn_compute(job.o[1].dtype);
  const nn_operand *x = &job.o[1];
  job.rows_mode = job.inner == 1 || llabs(x->stride[1]) < llabs(x->stride[2]);
  job.blocks = (job.inner + NN_COLS - 1) / NN_COLS;
  int64_t items = job.rows_mode ? job.outer * job.inner : job.outer * job.blocks;
  int64_t per_item = job.rows_mode ? job.n : job.n * (job.inner < NN_COLS ? job.inner : NN_COLS);
  rt_parallel_for(items, nn_grain(per_item), softmax_range, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row buffer", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_softmax(const nrt_op *op) { return run_softmax(op, 0, 0); }
nrt_status rt_kernel_log_softmax(const nrt_op *op) { return run_softmax(op, 1, 0); }
nrt_status rt_kernel_softmax_backward(const nrt_op *op) { return run_softmax(op, 0, 1); }
nrt_status rt_kernel_log_softmax_backward(const nrt_op *op) { return run_softmax(op, 1, 1); }
