/* LSTM and GRU cells: the gate arithmetic of one time step, after the two
 * GEMMs that made the input and hidden gates (LSTM_CELL ... GRU_CELL_BACKWARD
 * in neuronrt/ops/nn.h).
 *
 * Every operand is a 2-d view [batch, k * hidden] (any strides, any floating
 * dtype; biases 1-d). One task takes a block of rows; each row of each
 * operand is brought into a contiguous buffer of the compute type (float for
 * float16/bfloat16/float32, double for float64) once, the gates are computed
 * on those buffers, and the results go back in the outputs' dtypes. float
 * uses the vectorisable sigmoid and tanh of vmath.h (those of the pointwise
 * ops), double the C library's.
 */
#include <stdatomic.h>
#include <string.h>
#include "ops/nn/nn_common.h"
#include "ops/nn/nn_transpose.h"

enum { RNN_MAX_OPERANDS = 8 };

typedef struct rnn_job rnn_job;
typedef void (*rnn_row_fn)(const rnn_job *job, int64_t row, void *scratch);

struct rnn_job {
  nn_operand o[RNN_MAX_OPERANDS];
  int64_t hidden;
  nrt_dtype c;
  const void *bias[2]; /* the biases in the compute type, or NULL */
  rnn_row_fn row;
  int64_t scratch_elems; /* per row, in the compute type */
  int outputs;           /* operands [0, outputs) are written, the rest read */
  atomic_int out_of_memory;
};

/* Row `row` of operand k (n elements) as contiguous compute-type data. */
static inline const void *rnn_in(const rnn_job *job, int k, int64_t row, int64_t n, void *buf) {
  const nn_operand *o = &job->o[k];
  return nn_load(o->base + row * o->stride[1], o->stride[2], o->dtype, job->c, n, buf);
}

/* Where to compute row `row` of output k: in place or in buf. */
static inline void *rnn_out(const rnn_job *job, int k, int64_t row, int64_t n, void *buf) {
  const nn_operand *o = &job->o[k];
  return nn_target(o->base + row * o->stride[1], o->stride[2], o->dtype, job->c, n, buf);
}

static inline void rnn_store(const rnn_job *job, int k, int64_t row, int64_t n, const void *computed) {
  const nn_operand *o = &job->o[k];
  nn_store(o->base + row * o->stride[1], o->stride[2], o->dtype, job->c, n, computed);
}

static inline int rnn_present(const rnn_job *job, int k) { return job->o[k].base != NULL; }

static inline double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The four row functions for compute type C (SUF f or d). */
#define DEFINE_RNN_ROWS(C, SUF, SIGMOID, TANH)                                                       \
  /* LSTM_CELL [hy, cy, workspace, input_gates, hidden_gates, cx, b_ih?, b_hh?] */                   \
  RT_SIMD_VOID(lstm_row_##SUF, (const rnn_job *job, int64_t row, void *scratch),                     \
               (job, row, scratch)) {                                                                \
    const int64_t H = job->hidden;                                                                   \
    C *s = scratch;                                                                                  \
    const C *ig = rnn_in(job, 3, row, 4 * H, s);                                                     \
    const C *hg = rnn_in(job, 4, row, 4 * H, s + 4 * H);                                             \
    const C *cx = rnn_in(job, 5, row, H, s + 8 * H);                                                 \
    const C *bi = job->bias[0], *bh = job->bias[1];                                                  \
    C *ws = rnn_out(job, 2, row, 4 * H, s + 9 * H);                                                  \
    C *hy = rnn_out(job, 0, row, H, s + 13 * H);                                                     \
    C *cy = rnn_out(job, 1, row, H, s + 14 * H);                                                     \
    /* Simple loops, GCC vectorises them (one loop with all five                                    \
     * sigmoids and tanhs over six arrays stayed scalar). */                                         \
    for (int64_t j = 0; j < 4 * H; j++) ws[j] = ig[j] + hg[j];                                       \
    if (bi)                                                                                          \
      for (int64_t j = 0; j < 4 * H; j++) ws[j] += bi[j];                                            \
    if (bh)                                                                                          \
      for (int64_t j = 0; j < 4 * H; j++) ws[j] += bh[j];                                            \
    for (int64_t j = 0; j < 2 * H; j++) ws[j] = SIGMOID(ws[j]);                                      \
    for (int64_t j = 2 * H; j < 3 * H; j++) ws[j] = TANH(ws[j]);                                     \
    for (int64_t j = 3 * H; j < 4 * H; j++) ws[j] = SIGMOID(ws[j]);                                  \
    for (int64_t j = 0; j < H; j++) cy[j] = ws[H + j] * cx[j] + ws[j] * ws[2 * H + j];               \
    for (int64_t j = 0; j < H; j++) hy[j] = TANH(cy[j]);                                             \
    for (int64_t j = 0; j < H; j++) hy[j] *= ws[3 * H + j];                                          \
    rnn_store(job, 2, row, 4 * H, ws);                                                               \
    rnn_store(job, 0, row, H, hy);                                                                   \
    rnn_store(job, 1, row, H, cy);                                                                   \
  }                                                                                                  \
  /* LSTM_CELL_BACKWARD [grad_gates, grad_cx, grad_hy?, grad_cy?, cx, cy, workspace] */              \
  RT_SIMD_VOID(lstm_back_row_##SUF, (const rnn_job *job, int64_t row, void *scratch),                \
               (job, row, scratch)) {                                                                \
    const int64_t H = job->hidden;                                                                   \
    C *s = scratch;                                                                                  \
    const C *ghy = rnn_present(job, 2) ? rnn_in(job, 2, row, H, s) : NULL;                           \
    const C *gcy = rnn_present(job, 3) ? rnn_in(job, 3, row, H, s + H) : NULL;                       \
    const C *cx = rnn_in(job, 4, row, H, s + 2 * H);                                                 \
    const C *cy = rnn_in(job, 5, row, H, s + 3 * H);                                                 \
    const C *ws = rnn_in(job, 6, row, 4 * H, s + 4 * H);                                             \
    C *gg = rnn_out(job, 0, row, 4 * H, s + 8 * H);                                                  \
    C *gcx = rnn_out(job, 1, row, H, s + 12 * H);                                                    \
    for (int64_t j = 0; j < H; j++) gcx[j] = TANH(cy[j]); /* its own loop: vectorised */             \
    for (int64_t j = 0; j < H; j++) {                                                                \
      const C i = ws[j], f = ws[H + j], g = ws[2 * H + j], o = ws[3 * H + j];                        \
      const C t = gcx[j];                                                                            \
      const C dh = ghy ? ghy[j] : (C)0;                                                              \
      const C dc = dh * o * ((C)1 - t * t) + (gcy ? gcy[j] : (C)0);                                  \
      gg[j] = dc * g * ((C)1 - i) * i;                                                               \
      gg[H + j] = dc * cx[j] * ((C)1 - f) * f;                                                       \
      gg[2 * H + j] = dc * i * ((C)1 - g * g);                                                       \
      gg[3 * H + j] = dh * t * ((C)1 - o) * o;                                                       \
      gcx[j] = dc * f;                                                                               \
    }                                                                                                \
    rnn_store(job, 0, row, 4 * H, gg);                                                               \
    rnn_store(job, 1, row, H, gcx);                                                                  \
  }                                                                                                  \
  /* GRU_CELL [hy, workspace, input_gates, hidden_gates, hx, b_ih?, b_hh?] */                        \
  RT_SIMD_VOID(gru_row_##SUF, (const rnn_job *job, int64_t row, void *scratch),                      \
               (job, row, scratch)) {                                                                \
    const int64_t H = job->hidden;                                                                   \
    C *s = scratch;                                                                                  \
    const C *ig = rnn_in(job, 2, row, 3 * H, s);                                                     \
    const C *hg = rnn_in(job, 3, row, 3 * H, s + 3 * H);                                             \
    const C *hx = rnn_in(job, 4, row, H, s + 6 * H);                                                 \
    const C *bi = job->bias[0], *bh = job->bias[1];                                                  \
    C *ws = rnn_out(job, 1, row, 5 * H, s + 7 * H);                                                  \
    C *hy = rnn_out(job, 0, row, H, s + 12 * H);                                                     \
    /* ws: r, z, n, hx, hn; simple loops as in the LSTM row. */                                      \
    for (int64_t j = 0; j < 2 * H; j++) ws[j] = ig[j] + hg[j];                                       \
    for (int64_t j = 0; j < H; j++) ws[4 * H + j] = hg[2 * H + j];                                   \
    for (int64_t j = 0; j < H; j++) ws[2 * H + j] = ig[2 * H + j];                                   \
    if (bi) {                                                                                        \
      for (int64_t j = 0; j < 2 * H; j++) ws[j] += bi[j];                                            \
      for (int64_t j = 0; j < H; j++) ws[2 * H + j] += bi[2 * H + j];                                \
    }                                                                                                \
    if (bh) {                                                                                        \
      for (int64_t j = 0; j < 2 * H; j++) ws[j] += bh[j];                                            \
      for (int64_t j = 0; j < H; j++) ws[4 * H + j] += bh[2 * H + j];                                \
    }                                                                                                \
    for (int64_t j = 0; j < 2 * H; j++) ws[j] = SIGMOID(ws[j]);                                      \
    for (int64_t j = 0; j < H; j++) ws[2 * H + j] += ws[j] * ws[4 * H + j];                          \
    for (int64_t j = 0; j < H; j++) ws[2 * H + j] = TANH(ws[2 * H + j]);                             \
    for (int64_t j = 0; j < H; j++) ws[3 * H + j] = hx[j];                                           \
    for (int64_t j = 0; j < H; j++) {                                                                \
      const C n = ws[2 * H + j];                                                                     \
      hy[j] = n + ws[H + j] * (ws[3 * H + j] - n);                                                   \
    }                                                                                                \
    rnn_store(job, 1, row, 5 * H, ws);                                                               \
    rnn_store(job, 0, row, H, hy);                                                                   \
  }                                                                                                  \
  /* GRU_CELL_BACKWARD [grad_input_gates, grad_hidden_gates, grad_hx, grad_hy, workspace] */         \
  RT_SIMD_VOID(gru_back_row_##SUF, (const rnn_job *job, int64_t row, void *scratch),                 \
               (job, row, scratch)) {                                                                \
    const int64_t H = job->hidden;                                                                   \
    C *s = scratch;                                                                                  \
    const C *ghy = rnn_in(job, 3, row, H, s);                                                        \
    const C *ws = rnn_in(job, 4, row, 5 * H, s + H);                                                 \
    C *gi = rnn_out(job, 0, row, 3 * H, s + 6 * H);                                                  \
    C *gh = rnn_out(job, 1, row, 3 * H, s + 9 * H);                                                  \
    C *ghx = rnn_out(job, 2, row, H, s + 12 * H);                                                    \
    for (int64_t j = 0; j < H; j++) {                                                                \
      const C r = ws[j], z = ws[H + j], n = ws[2 * H + j], h = ws[3 * H + j], hn = ws[4 * H + j];    \
      const C d = ghy[j];                                                                            \
      const C dn = d * ((C)1 - z) * ((C)1 - n * n);                                                  \
      const C dz = d * (h - n) * ((C)1 - z) * z;                                                     \
      const C dr = dn * hn * ((C)1 - r) * r;                                                         \
      gi[j] = dr;                                                                                    \
      gi[H + j] = dz;                                                                                \
      gi[2 * H + j] = dn;                                                                            \
      gh[j] = dr;                                                                                    \
      gh[H + j] = dz;                                                                                \
      gh[2 * H + j] = dn * r;                                                                        \
      ghx[j] = d * z;                                                                                \
    }                                                                                                \
    rnn_store(job, 0, row, 3 * H, gi);                                                               \
    rnn_store(job, 1, row, 3 * H, gh);                                                               \
    rnn_store(job, 2, row, H, ghx);                                                                  \
  }

DEFINE_RNN_ROWS(float, f, rt_vm_sigmoidf, rt_vm_tanhf)
DEFINE_RNN_ROWS(double, d, sigmoid_d, tanh)

/* The largest scratch a row needs, in hidden-sized pieces (lstm: 15). */
#define RNN_SCRATCH_PIECES 15

/* The element size of input operand o of a float32 job (a float32,
 * bfloat16 or float16 operand) when it is column-major (rows one element
 * apart, columns further), as the transpose of a GEMM result is; else 0.
 * Read row by row, each element would come from its own cache line. */
static int64_t rnn_column_major(const rnn_job *job, const nn_operand *o) {
  const int64_t e = o->dtype == NRT_FLOAT32 ? 4 : o->dtype == NRT_BFLOAT16 || o->dtype == NRT_FLOAT16 ? 2 : 0;
  return o->base && job->c == NRT_FLOAT32 && e && o->stride[1] == e && o->stride[2] > e && o->stride[2] % e == 0
             ? e
             : 0;
}

/* Rows of a column-major input moved into row-major form at a time. */
#define RNN_BLOCK_ROWS 8

static void rnn_range(int64_t begin, int64_t end, void *ctx) {
  rnn_job *job = ctx;
  void *scratch = malloc((size_t)(job->scratch_elems ? job->scratch_elems : 1) * nrt_dtype_size(job->c));
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  /* Column-major inputs are moved into row-major blocks of RNN_BLOCK_ROWS
   * rows (8 x 8 at a time), which the rows then read in place: the same
   * values, so the same results. Each block is a job of its own (row 0 =
   * the block's first row); without memory for a block, rows are read one
   * by one. */
  rnn_job local;
  memcpy(&local, job, sizeof local);
  char *blocks[RNN_MAX_OPERANDS] = {NULL};
  int64_t esize[RNN_MAX_OPERANDS] = {0};
  for (int k = job->outputs; end - begin >= RNN_BLOCK_ROWS && k < RNN_MAX_OPERANDS; k++)
    if ((esize[k] = rnn_column_major(job, &job->o[k])))
      blocks[k] = malloc((size_t)(RNN_BLOCK_ROWS * job->o[k].size[2] * esize[k]));
  for (int64_t r0 = begin; r0 < end; r0 += RNN_BLOCK_ROWS) {
    const int64_t n = end - r0 < RNN_BLOCK_ROWS ? end - r0 : RNN_BLOCK_ROWS;
    for (int k = 0; k < RNN_MAX_OPERANDS; k++) {
      const nn_operand *o = &job->o[k];
      nn_operand *l = &local.o[k];
      if (!o->base) continue;
      if (blocks[k]) {
        const int64_t width = o->size[2], e = esize[k];
        if (e == 4)
          rt_nn_transpose32((uint32_t *)(void *)blocks[k], width, (const uint32_t *)(const void *)(o->base + r0 * 4),
                            o->stride[2] / 4, n, width);
        else
          rt_nn_transpose16((uint16_t *)(void *)blocks[k], width, (const uint16_t *)(const void *)(o->base + r0 * 2),
                            o->stride[2] / 2, n, width);
        l->base = blocks[k];
        l->stride[1] = width * e;
        l->stride[2] = e;
      } else {
        l->base = o->base + r0 * o->stride[1];
      }
    }
    for (int64_t row = 0; row < n; row++) job->row(&local, row, scratch);
  }
  for (int k = 0; k < RNN_MAX_OPERANDS; k++) free(blocks[k]);
  free(scratch);
}

/* The spec of one op: operand count, outputs, width of each operand in
 * hidden units (0: an optional 1-d bias, -1: a rows x H operand that may be
 * absent), the operand that gives the batch and hidden size, and its width. */
typedef struct rnn_spec {
  const char *name;
  int operands, outputs;
  int width[RNN_MAX_OPERANDS];
  int shape_from, shape_width;
  int first_bias; /* -1: none */
  rnn_row_fn row_f, row_d;
} rnn_spec;

static nrt_status rnn_run(const nrt_op *op, const rnn_spec *spec) {
  const char *name = spec->name;
  nrt_status s = nn_check_operands(op, spec->operands, spec->outputs, 0xffu);
  if (s) return s;
  const nrt_tensor_view *ref = &op->operands[spec->shape_from];
  if (ref->ndim != 2 || ref->shape[1] % spec->shape_width)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be [batch, %d * hidden]", name,
                   spec->shape_from, spec->shape_width);
  const int64_t rows = ref->shape[0], H = ref->shape[1] / spec->shape_width;
  rnn_job job = {0};
  job.hidden = H;
  job.c = nn_compute(ref->dtype);
  job.scratch_elems = RNN_SCRATCH_PIECES * H;
  job.outputs = spec->outputs;
  for (int k = 0; k < spec->operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    const int w = spec->width[k];
    if (w == 0) {
      if ((s = nn_check_vector(op, k, spec->shape_width * H))) return s;
      continue;
    }
    if (w < 0 && !nn_present(v)) continue;
    const int64_t width = (w < 0 ? 1 : w) * H;
    if (v->ndim != 2 || v->shape[0] != rows || v->shape[1] != width)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be [%lld, %lld]", name, k,
                     (long long)rows, (long long)width);
    job.o[k] = nn_operand_of(v);
  }
  void *bias[2] = {NULL, NULL};
  if (spec->first_bias >= 0)
    for (int b = 0; b < 2; b++)
      if ((s = nn_load_vector(op, spec->first_bias + b, job.c, spec->shape_width * H, &bias[b]))) goto done;
  job.bias[0] = bias[0];
  job.bias[1] = bias[1];
  job.row = job.c == NRT_FLOAT64 ? spec->row_d : spec->row_f;
  if (rows > 0 && H > 0) {
    rt_parallel_for(rows, nn_grain(RNN_SCRATCH_PIECES * H), rnn_range, &job);
    if (atomic_load(&job.out_of_memory)) s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  }
done:
  free(bias[0]);
  free(bias[1]);
  return s;
}

nrt_status rt_kernel_lstm_cell(const nrt_op *op) {
  static const rnn_spec spec = {"lstm_cell", 8, 3, {1, 1, 4, 4, 4, 1, 0, 0}, 3, 4, 6, lstm_row_f, lstm_row_d};
  return rnn_run(op, &spec);
}

nrt_status rt_kernel_lstm_cell_backward(const nrt_op *op) {
  static const rnn_spec spec = {"lstm_cell_backward", 7, 2, {4, 1, -1, -1, 1, 1, 4}, 6, 4, -1,
                                lstm_back_row_f, lstm_back_row_d};
  return rnn_run(op, &spec);
}

nrt_status rt_kernel_gru_cell(const nrt_op *op) {
  static const rnn_spec spec = {"gru_cell", 7, 2, {1, 5, 3, 3, 1, 0, 0}, 2, 3, 5, gru_row_f, gru_row_d};
  return rnn_run(op, &spec);
}

nrt_status rt_kernel_gru_cell_backward(const nrt_op *op) {
  static const rnn_spec spec = {"gru_cell_backward", 5, 3, {3, 3, 1, 1, 5}, 4, 5, -1, gru_back_row_f,
                                gru_back_row_d};
  return rnn_run(op, &spec);
}
