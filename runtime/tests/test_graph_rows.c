/* Row regions in compiled graphs (neuronrt/graph.h): a norm or softmax
 * with the pointwise steps around it runs chunk by chunk of rows. Against
 * the same graph compiled without fusion, bit for bit, at several row
 * counts of one program: a residual add, layer norm and an activation; a
 * softmax and log-softmax with a cast to bfloat16 after; RMS norm; and
 * two regions whose layouts keep steps apart (a step over a transposed
 * view of the rows, and one that writes rows in reverse order that the
 * next step reads in order), which must run one after another. The
 * counters say which way each region ran. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "graph_writer.h"
#include "neuronrt/graph.h"

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}
static void *host(void *dev) { return nrt_device_to_host(dev); }
static nrt_scalar fs(double f) { return (nrt_scalar){.is_float = 1, .f = f}; }
static int contains(const char *text, const char *part) { return text && strstr(text, part) != NULL; }

enum { NORM, SOFTMAX, RMS, TRANSPOSED_STEP, REVERSED_WRITE };

#define N 96 /* columns */

typedef struct built {
  uint8_t *bytes;
  size_t size;
  int num_inputs, num_outputs;
  int64_t in_numel[4], out_numel[4]; /* per row, or absolute when negative */
  nrt_dtype out_dtype[4];
} built;

/* A [rows, cols] view of buffer b with the given strides (expression ids). */
static gw_operand view2(gw_graph *g, int32_t b, nrt_dtype t, uint32_t rows, uint32_t cols, uint32_t rs,
                        uint32_t cs, uint32_t offset) {
  uint32_t sh[2] = {rows, cols};
  gw_operand o = gw_dense(g, b, t, offset, 2, sh);
  o.stride[0] = rs, o.stride[1] = cs;
  return o;
}

static built build(int which) {
  built out;
  memset(&out, 0, sizeof out);
  gw_graph *g = gw_new(1, "rows");
  uint32_t R = gw_sym(g, 0), n = gw_const(g, N), one = gw_const(g, 1), zero = gw_const(g, 0);
  uint32_t Rn = gw_bin(g, NRT_EXPR_MUL, R, n);
  gw_operand ops[6];
  nrt_scalar alpha = fs(1.0), eps = fs(1e-5);
  /* inputs: x, r (rows x N), w, b (N) */
  int32_t x = (int32_t)gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, Rn);
  int32_t r = (int32_t)gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 1, Rn);
  int32_t w = (int32_t)gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 2, n);
  int32_t bb = (int32_t)gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 3, n);
  out.num_inputs = 4;
  out.in_numel[0] = out.in_numel[1] = N, out.in_numel[2] = out.in_numel[3] = -N;
  uint32_t vsh[1] = {n}, rsh[1] = {R};
  gw_operand wv = gw_dense(g, w, NRT_FLOAT32, zero, 1, vsh), bv = gw_dense(g, bb, NRT_FLOAT32, zero, 1, vsh);
  gw_operand X = view2(g, x, NRT_FLOAT32, R, n, n, one, zero), Rv = view2(g, r, NRT_FLOAT32, R, n, n, one, zero);
  int32_t h = (int32_t)gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 0, Rn);
  int32_t y = (int32_t)gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, Rn);
  int32_t z = (int32_t)gw_buffer(g, NRT_BUFFER_OUTPUT, which == SOFTMAX ? NRT_BFLOAT16 : NRT_FLOAT32, 1, Rn);
  int32_t mean = (int32_t)gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 2, R);
  int32_t rstd = (int32_t)gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 3, R);
  out.num_outputs = 4;
  out.out_numel[0] = out.out_numel[1] = N, out.out_numel[2] = out.out_numel[3] = 1;
  out.out_dtype[0] = out.out_dtype[2] = out.out_dtype[3] = NRT_FLOAT32;
  out.out_dtype[1] = which == SOFTMAX ? NRT_BFLOAT16 : NRT_FLOAT32;
  gw_operand H = view2(g, h, NRT_FLOAT32, R, n, n, one, zero), Y = view2(g, y, NRT_FLOAT32, R, n, n, one, zero);
  gw_operand Z = view2(g, z, out.out_dtype[1], R, n, n, one, zero);
  gw_operand M = gw_dense(g, mean, NRT_FLOAT32, zero, 1, rsh), S = gw_dense(g, rstd, NRT_FLOAT32, zero, 1, rsh);

  /* The prologue: h = x * 0.5 + r. REVERSED_WRITE writes x * 0.5 into h's
   * rows in reverse order first; TRANSPOSED_STEP computes h = x * 2
   * through both transposed. */
  uint32_t sh2[2] = {R, n};
  if (which == TRANSPOSED_STEP) {
    uint32_t tsh[2] = {n, R};
    ops[0] = view2(g, h, NRT_FLOAT32, n, R, one, n, zero);
    ops[1] = view2(g, x, NRT_FLOAT32, n, R, one, n, zero);
    ops[2] = gw_imm(g, NRT_FLOAT64, 2, tsh, fs(2.0));
    gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  } else {
    uint32_t last = gw_bin(g, NRT_EXPR_MUL, gw_bin(g, NRT_EXPR_SUB, R, one), n);
    uint32_t minus_n = gw_const(g, -N);
    ops[0] = which == REVERSED_WRITE ? view2(g, h, NRT_FLOAT32, R, n, minus_n, one, last) : H;
    ops[1] = X;
    ops[2] = gw_imm(g, NRT_FLOAT64, 2, sh2, fs(0.5));
    gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
    ops[0] = H, ops[1] = H, ops[2] = Rv;
    gw_node(g, NRT_OP_ADD, NRT_FLOAT32, 1, 3, ops, 1, &alpha);
  }
  /* The row-wise kernel. */
  if (which == SOFTMAX) {
    uint32_t sh3[3] = {R, n, one};
    gw_operand Y3 = gw_dense(g, y, NRT_FLOAT32, zero, 3, sh3), H3 = gw_dense(g, h, NRT_FLOAT32, zero, 3, sh3);
    ops[0] = Y3, ops[1] = H3;
    gw_node(g, NRT_OP_SOFTMAX, NRT_FLOAT32, 1, 2, ops, 0, NULL);
    /* mean and rstd, outputs of the other cases: constants here */
    ops[0] = M, ops[1] = gw_imm(g, NRT_FLOAT64, 1, rsh, fs(7.0));
    gw_node(g, NRT_OP_COPY, NRT_FLOAT32, 0, 2, ops, 0, NULL);
    ops[0] = S, ops[1] = gw_imm(g, NRT_FLOAT64, 1, rsh, fs(-1.0));
    gw_node(g, NRT_OP_COPY, NRT_FLOAT32, 0, 2, ops, 0, NULL);
    /* then the log-softmax of the softmax */
    uint32_t y2 = (uint32_t)gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, Rn);
    ops[0] = gw_dense(g, (int32_t)y2, NRT_FLOAT32, zero, 3, sh3), ops[1] = Y3;
    gw_node(g, NRT_OP_LOG_SOFTMAX, NRT_FLOAT32, 1, 2, ops, 0, NULL);
    Y = view2(g, (int32_t)y2, NRT_FLOAT32, R, n, n, one, zero);
  } else if (which == RMS) {
    ops[0] = Y, ops[1] = S, ops[2] = H, ops[3] = wv;
    gw_node(g, NRT_OP_RMS_NORM, NRT_FLOAT32, 2, 4, ops, 1, &eps);
    ops[0] = M, ops[1] = gw_imm(g, NRT_FLOAT64, 1, rsh, fs(0.0));
    gw_node(g, NRT_OP_COPY, NRT_FLOAT32, 0, 2, ops, 0, NULL);
  } else {
    ops[0] = Y, ops[1] = M, ops[2] = S, ops[3] = H, ops[4] = wv, ops[5] = bv;
    gw_node(g, NRT_OP_LAYER_NORM, NRT_FLOAT32, 3, 6, ops, 1, &eps);
  }
  /* The epilogue: z = tanh(y) * 3 (cast to z's dtype). */
  uint32_t sh[2] = {R, n};
  int32_t u = (int32_t)gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, Rn);
  gw_operand U = view2(g, u, NRT_FLOAT32, R, n, n, one, zero);
  ops[0] = U, ops[1] = Y;
  gw_node(g, NRT_OP_TANH, NRT_FLOAT32, 1, 2, ops, 0, NULL);
  ops[0] = U, ops[1] = U, ops[2] = gw_imm(g, NRT_FLOAT64, 2, sh, fs(3.0));
  gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  ops[0] = Z, ops[1] = U;
  gw_node(g, NRT_OP_COPY, NRT_FLOAT32, 0, 2, ops, 0, NULL);
  out.bytes = gw_finish(g, &out.size);
  gw_free(g);
  return out;
}

static nrt_program_t compile(nrt_graph_t g, int fuse) {
  nrt_program_options o = {.fuse = fuse};
  nrt_program_t p = NULL;
  CHECK_OK(nrt_program_compile(g, &o, &p));
  return p;
}

static int64_t count_of(int64_t per_row, int64_t rows) { return per_row < 0 ? -per_row : per_row * rows; }

static void run(nrt_program_t p, int64_t rows, const built *b, void **in, void **out) {
  int64_t caps[4];
  for (int i = 0; i < b->num_inputs; i++) caps[i] = count_of(b->in_numel[i], rows);
  size_t arena_bytes = 0;
  int64_t numels[4];
  CHECK_OK(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, numels));
  void *arena = arena_bytes ? dev_alloc(arena_bytes) : NULL;
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_get_default(0, &stream));
  for (int rep = 0; rep < 2; rep++) { /* the plan's first launch validates; the second is the fast path */
    for (int j = 0; j < b->num_outputs; j++)
      memset(host(out[j]), 0x5a, (size_t)count_of(b->out_numel[j], rows) * nrt_dtype_size(b->out_dtype[j]));
    CHECK_OK(nrt_program_launch(stream, p, &rows, 1, in, caps, out, arena));
    CHECK_OK(nrt_stream_synchronize(stream));
  }
  if (arena) nrt_free(arena);
}

static void check(int which, int expect_chunks) {
  built b = build(which);
  nrt_graph_t g;
  CHECK_OK(nrt_graph_load(b.bytes, b.size, &g));
  nrt_program_t fused = compile(g, 1), plain = compile(g, 0);
  nrt_graph_destroy(g);
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(fused, &info));
  CHECK(info.num_row_regions == 1);
  CHECK_OK(nrt_program_info_get(plain, &info));
  CHECK(info.num_row_regions == 0);
  char *text = NULL;
  int64_t three = 3;
  CHECK_OK(nrt_program_plan_text(fused, &three, 1, &text));
  CHECK(contains(text, "step 0: row region of "));
  free(text);
  static const int64_t row_counts[] = {1, 3, 700, 2};
  for (size_t c = 0; c < sizeof row_counts / sizeof row_counts[0]; c++) {
    int64_t rows = row_counts[c];
    void *in[4], *o1[4], *o2[4];
    for (int i = 0; i < b.num_inputs; i++) {
      int64_t n = count_of(b.in_numel[i], rows);
      in[i] = dev_alloc((size_t)n * 4);
      float *p = host(in[i]);
      for (int64_t e = 0; e < n; e++) p[e] = (float)((e * 29 + i * 7 + 3) % 97 - 48) / 16.0f;
    }
    for (int j = 0; j < b.num_outputs; j++) {
      size_t bytes = (size_t)count_of(b.out_numel[j], rows) * nrt_dtype_size(b.out_dtype[j]);
      o1[j] = dev_alloc(bytes), o2[j] = dev_alloc(bytes);
    }
    nrt_program_clear_counters();
    run(fused, rows, &b, in, o1);
    nrt_program_counters counts;
    nrt_program_get_counters(&counts);
    /* One row gives nothing to split: it runs alone. */
    if (expect_chunks && rows >= 2)
      CHECK(counts.row_regions_chunked >= 2);
    else
      CHECK(counts.row_regions_chunked == 0 && counts.row_regions_alone >= 2);
    run(plain, rows, &b, in, o2);
    for (int j = 0; j < b.num_outputs; j++) {
      size_t bytes = (size_t)count_of(b.out_numel[j], rows) * nrt_dtype_size(b.out_dtype[j]);
      if (memcmp(host(o1[j]), host(o2[j]), bytes)) {
        fprintf(stderr, "row region %d, %lld rows: output %d differs\n", which, (long long)rows, j);
        check_failed();
      }
    }
    for (int i = 0; i < b.num_inputs; i++) nrt_free(in[i]);
    for (int j = 0; j < b.num_outputs; j++) nrt_free(o1[j]), nrt_free(o2[j]);
  }
  nrt_program_destroy(fused);
  nrt_program_destroy(plain);
  free(b.bytes);
}

static void test_layer_norm_region(void) { check(NORM, 1); }
static void test_softmax_region(void) { check(SOFTMAX, 1); }
static void test_rms_norm_region(void) { check(RMS, 1); }
/* The prologue reads and writes the rows as columns: its chunk would reach
 * every row. It runs alone; the rest of the region still by chunks. */
static void test_transposed_step_runs_alone(void) { check(TRANSPOSED_STEP, 1); }
/* The prologue writes row R-1-i of what the next step reads at row i: a
 * chunk would read rows another has not written yet. */
static void test_reversed_write_runs_alone(void) { check(REVERSED_WRITE, 0); }

int main(void) {
  CHECK_OK(nrt_init());
  RUN(test_layer_norm_region);
  RUN(test_softmax_region);
  RUN(test_rms_norm_region);
  RUN(test_transposed_step_runs_alone);
  RUN(test_reversed_write_runs_alone);
  return CHECK_MAIN_RESULT();
}
