/* GEMM epilogues in compiled graphs (neuronrt/graph.h): a GEMM followed by
 * pointwise nodes compiles to one step whose group runs on each block of
 * the product as the GEMM stores it. Against the same graph compiled
 * without fusion (the GEMM, then each op alone), bit for bit: the product
 * is computed the same way and the ops are the same kernels. Shapes cover
 * the GEMM's paths (one block, many, shared B in several k chunks, a
 * transposed product, a vector product), a bias broadcast along rows, a
 * bfloat16 result, the group writing over the product in place, and
 * layouts the blocks cannot carry (the group then runs after the product).
 * Runs at every ISA level: the GEMM kernels differ. */
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

enum {
  PRODUCT_ROWS = 0,       /* the product stored row-major */
  PRODUCT_COLS = 1,       /* ... column-major (the GEMM computes C^T) */
  READ_TRANSPOSED = 2,    /* the group reads a row-major product as its transpose: no epilogue */
};

typedef struct shape_case {
  int64_t m, n, k;
  int layout;
  int bias;           /* the added tensor is a row vector broadcast along rows */
  nrt_dtype out;      /* the result's dtype */
  int shared_product; /* the product is also an output (it is stored and read later) */
} shape_case;

/* out = relu(t * 0.5 + r) (cast to cs->out), t = a @ b; a (m x k), b (k x n),
 * r (m x n, or n broadcast). m is symbol 0. */
static uint8_t *epilogue_graph(const shape_case *cs, size_t *size) {
  gw_graph *g = gw_new(1, "gemm_epilogue");
  uint32_t m = gw_sym(g, 0), n = gw_const(g, cs->n), k = gw_const(g, cs->k), zero = gw_const(g, 0);
  uint32_t one = gw_const(g, 1);
  uint32_t ash[2] = {m, k}, bsh[2] = {k, n}, osh[2] = {m, n}, tsh[2] = {n, m};
  uint32_t mn = gw_bin(g, NRT_EXPR_MUL, m, n);
  uint32_t a = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, gw_bin(g, NRT_EXPR_MUL, m, k));
  uint32_t b = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 1, gw_bin(g, NRT_EXPR_MUL, k, n));
  uint32_t r = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 2, cs->bias ? n : mn);
  uint32_t t = cs->shared_product ? gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 1, mn)
                                  : gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, mn);
  uint32_t u = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, mn);
  uint32_t v = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, mn);
  uint32_t w = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, mn);
  uint32_t out = gw_buffer(g, NRT_BUFFER_OUTPUT, cs->out, 0, mn);
  gw_operand ops[3], product;
  nrt_scalar ab[2] = {fs(1.0), fs(0.0)};
  if (cs->layout == PRODUCT_COLS) {
    /* [m, n] with strides (1, m): the transpose of a dense [n, m]. */
    product = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, tsh);
    product.shape[0] = m, product.shape[1] = n;
    product.stride[0] = one, product.stride[1] = m;
  } else {
    product = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, osh);
  }
  ops[0] = product;
  ops[1] = gw_dense(g, (int32_t)a, NRT_FLOAT32, zero, 2, ash);
  ops[2] = gw_dense(g, (int32_t)b, NRT_FLOAT32, zero, 2, bsh);
  gw_node(g, NRT_OP_GEMM, NRT_FLOAT32, 1, 3, ops, 2, ab);
  /* The group's space: [m, n], or [n, m] reading the product transposed. */
  int swap = cs->layout == READ_TRANSPOSED;
  const uint32_t *gsh = swap ? tsh : osh;
  gw_operand read = product;
  if (swap) {
    read.shape[0] = n, read.shape[1] = m;
    read.stride[0] = one, read.stride[1] = n;
  }
  ops[0] = gw_dense(g, (int32_t)u, NRT_FLOAT32, zero, 2, gsh);
  ops[1] = read;
  ops[2] = gw_imm(g, NRT_FLOAT64, 2, gsh, fs(0.5));
  gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  ops[0] = gw_dense(g, (int32_t)v, NRT_FLOAT32, zero, 2, gsh);
  ops[1] = gw_dense(g, (int32_t)u, NRT_FLOAT32, zero, 2, gsh);
  ops[2] = gw_dense(g, (int32_t)r, NRT_FLOAT32, zero, 2, gsh);
  if (cs->bias) ops[2].stride[swap ? 1 : 0] = zero, ops[2].stride[swap ? 0 : 1] = one;
  nrt_scalar alpha = fs(1.0);
  gw_node(g, NRT_OP_ADD, NRT_FLOAT32, 1, 3, ops, 1, &alpha);
  ops[0] = gw_dense(g, (int32_t)w, NRT_FLOAT32, zero, 2, gsh);
  ops[1] = gw_dense(g, (int32_t)v, NRT_FLOAT32, zero, 2, gsh);
  gw_node(g, NRT_OP_RELU, NRT_FLOAT32, 1, 2, ops, 0, NULL);
  ops[0] = gw_dense(g, (int32_t)out, cs->out, zero, 2, gsh);
  ops[1] = gw_dense(g, (int32_t)w, NRT_FLOAT32, zero, 2, gsh);
  gw_node(g, NRT_OP_COPY, NRT_FLOAT32, 0, 2, ops, 0, NULL);
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

static nrt_program_t compile(nrt_graph_t g, int fuse) {
  nrt_program_options o = {.fuse = fuse};
  nrt_program_t p = NULL;
  CHECK_OK(nrt_program_compile(g, &o, &p));
  return p;
}

static void fill(void *dev, int64_t n, int seed) {
  float *p = host(dev);
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 37 + seed * 11) % 101 - 50) / 64.0f;
}

/* Runs p on the default stream (twice: the first launch of a binding
 * validates its groups, later ones take the fast path); outputs in outs. */
static void run(nrt_program_t p, int64_t m, void *const *inputs, const int64_t *caps, void *const *outs,
                int num_outs, size_t out_bytes) {
  size_t arena_bytes = 0;
  int64_t numels[2];
  CHECK_OK(nrt_program_prepare(p, &m, 1, caps, &arena_bytes, numels));
  void *arena = arena_bytes ? dev_alloc(arena_bytes) : NULL;
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_get_default(0, &stream));
  for (int rep = 0; rep < 2; rep++) {
    for (int j = 0; j < num_outs; j++) memset(host(outs[j]), 0x7f, out_bytes);
    CHECK_OK(nrt_program_launch(stream, p, &m, 1, inputs, caps, outs, arena));
    CHECK_OK(nrt_stream_synchronize(stream));
  }
  if (arena) nrt_free(arena);
}

static void check_case(const shape_case *cs, int expect_epilogue) {
  size_t size;
  uint8_t *bytes = epilogue_graph(cs, &size);
  nrt_graph_t g;
  CHECK_OK(nrt_graph_load(bytes, size, &g));
  nrt_program_t fused = compile(g, 1), plain = compile(g, 0);
  nrt_graph_destroy(g);
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(fused, &info));
  CHECK(info.num_gemm_epilogues == 1 && info.num_steps == 1 && info.num_fused_groups == 1 &&
        info.num_fused_nodes == 5);
  CHECK_OK(nrt_program_info_get(plain, &info));
  CHECK(info.num_gemm_epilogues == 0 && info.num_steps == 5);
  int64_t m = cs->m, mn = cs->m * cs->n;
  size_t out_bytes = (size_t)mn * nrt_dtype_size(cs->out);
  void *a = dev_alloc((size_t)(m * cs->k) * 4), *b = dev_alloc((size_t)(cs->k * cs->n) * 4);
  void *r = dev_alloc((size_t)(cs->bias ? cs->n : mn) * 4);
  fill(a, m * cs->k, 1);
  fill(b, cs->k * cs->n, 2);
  fill(r, cs->bias ? cs->n : mn, 3);
  void *inputs[3] = {a, b, r};
  int64_t caps[3] = {m * cs->k, cs->k * cs->n, cs->bias ? cs->n : mn};
  int num_outs = cs->shared_product ? 2 : 1;
  void *o1[2] = {dev_alloc(out_bytes * 4), dev_alloc((size_t)mn * 4)};
  void *o2[2] = {dev_alloc(out_bytes * 4), dev_alloc((size_t)mn * 4)};
  nrt_program_clear_counters();
  run(fused, m, inputs, caps, o1, num_outs, out_bytes);
  nrt_program_counters counts;
  nrt_program_get_counters(&counts);
  /* Two launches; an empty product runs no step at all. */
  uint64_t runs = mn ? 2 : 0;
  if (counts.gemm_epilogues_on_blocks != (expect_epilogue ? runs : 0))
    fprintf(stderr, "m%lld n%lld k%lld layout %d: %llu runs on blocks, %llu after\n", (long long)m,
            (long long)cs->n, (long long)cs->k, cs->layout, (unsigned long long)counts.gemm_epilogues_on_blocks,
            (unsigned long long)counts.gemm_epilogues_after);
  CHECK(counts.gemm_epilogues_on_blocks == (expect_epilogue ? runs : 0) &&
        counts.gemm_epilogues_after == (expect_epilogue ? 0 : runs));
  run(plain, m, inputs, caps, o2, num_outs, out_bytes);
  int same = !memcmp(host(o1[0]), host(o2[0]), out_bytes) &&
             (!cs->shared_product || !memcmp(host(o1[1]), host(o2[1]), (size_t)mn * 4));
  if (!same)
    fprintf(stderr, "gemm epilogue m%lld n%lld k%lld layout %d bias %d: results differ\n", (long long)m,
            (long long)cs->n, (long long)cs->k, cs->layout, cs->bias);
  CHECK(same);
  /* Spot check against the definition (float32 results). */
  if (cs->out == NRT_FLOAT32 && cs->layout != READ_TRANSPOSED && mn) {
    const float *A = host(a), *B = host(b), *R = host(r), *O = host(o1[0]);
    int64_t i = m - 1, j = cs->n / 2;
    double acc = 0;
    for (int64_t p = 0; p < cs->k; p++) acc += (double)A[i * cs->k + p] * B[p * cs->n + j];
    double want = fmax(0.0, acc * 0.5 + R[cs->bias ? j : i * cs->n + j]);
    CHECK(fabs(O[i * cs->n + j] - want) <= 1e-4 * (1 + fabs(want)));
  }
  /* The plan text says which steps the program has. */
  char *text = NULL;
  CHECK_OK(nrt_program_plan_text(fused, &m, 1, &text));
  CHECK(contains(text, "step 0: gemm with its epilogue of 5 nodes: 0 (gemm), 1 (mul), 2 (add), 3 (relu), 4 (copy)"));
  CHECK(contains(text, "1 gemm epilogues"));
  /* u, v and w live in registers; the product is stored (the GEMM writes
   * it), in the arena unless it is an output. */
  CHECK(contains(text, "temp b4: elided") || cs->shared_product);
  free(text);
  nrt_free(a), nrt_free(b), nrt_free(r);
  for (int j = 0; j < 2; j++) nrt_free(o1[j]), nrt_free(o2[j]);
  nrt_program_destroy(fused);
  nrt_program_destroy(plain);
  free(bytes);
}

static void test_shapes_and_layouts(void) {
  static const shape_case cases[] = {
      {.m = 5, .n = 7, .k = 3, .out = NRT_FLOAT32},                       /* one small block */
      {.m = 1, .n = 300, .k = 40, .out = NRT_FLOAT32},                    /* a vector product */
      {.m = 300, .n = 1, .k = 40, .out = NRT_FLOAT32, .bias = 1},        /* ... the other way */
      {.m = 200, .n = 130, .k = 70, .out = NRT_FLOAT32, .bias = 1},      /* many blocks */
      {.m = 64, .n = 1024, .k = 600, .out = NRT_FLOAT32},                 /* shared B, several k chunks */
      {.m = 97, .n = 200, .k = 50, .out = NRT_BFLOAT16, .bias = 1},      /* a 16-bit result */
      {.m = 120, .n = 90, .k = 33, .layout = PRODUCT_COLS, .out = NRT_FLOAT32, .bias = 1},
      {.m = 50, .n = 60, .k = 20, .out = NRT_FLOAT32, .shared_product = 1},
      {.m = 70, .n = 40, .k = 30, .layout = READ_TRANSPOSED, .out = NRT_FLOAT32}, /* after the product */
      {.m = 0, .n = 16, .k = 8, .out = NRT_FLOAT32},                      /* nothing to compute */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) check_case(&cases[c], cases[c].layout != READ_TRANSPOSED);
}

/* One program, several values of the dynamic dimension. */
static void test_bindings(void) {
  for (int64_t m = 1; m <= 400; m = m * 3 + 1) {
    shape_case cs = {.m = m, .n = 96, .k = 64, .out = NRT_FLOAT32, .bias = 1};
    check_case(&cs, 1);
  }
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN(test_shapes_and_layouts);
  RUN(test_bindings);
  return CHECK_MAIN_RESULT();
}
