/* Compiled graphs (neuronrt/graph.h): size expressions, the loader's
 * validation (one malformed graph per rule), the text form, fusion of a
 * pointwise chain (with and without), a GEMM before a chain, symbolic
 * sizes at several bindings, a launch ordered with other work on a stream,
 * a failing step as the stream's sticky error, and prepare's bounds check.
 * Results are compared bitwise with the same nrt_ops run one by one. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "graph/expr.h"
#include "graph_writer.h"
#include "neuronrt/graph.h"

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}
static void *host(void *dev) { return nrt_device_to_host(dev); }

static nrt_tensor_view dense2(void *data, nrt_dtype t, int64_t rows, int64_t cols) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data, v.dtype = t, v.ndim = 2;
  v.shape[0] = rows, v.shape[1] = cols;
  v.strides[0] = cols, v.strides[1] = 1;
  return v;
}

static nrt_scalar fs(double f) { return (nrt_scalar){.is_float = 1, .f = f}; }
static nrt_scalar is(int64_t i) { return (nrt_scalar){.is_float = 0, .i = i}; }

static int contains(const char *text, const char *part) { return text && strstr(text, part) != NULL; }

#define CHECK_ERROR(expr, status, part)                                                  \
  do {                                                                                   \
    CHECK_STATUS(expr, status);                                                          \
    if (!contains(nrt_last_error(), part)) {                                             \
      fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,        \
              nrt_last_error(), part);                                                   \
      check_failed();                                                                    \
    }                                                                                    \
  } while (0)

/* ---- expressions ------------------------------------------------------------ */

static const char *eval_terms(uint32_t n, const rt_expr_term *t, const int64_t *syms, int64_t *v) {
  rt_expr e = {n, t};
  char why[128];
  if (rt_expr_check(&e, 4, why, sizeof why)) return "malformed";
  return rt_expr_eval(&e, syms, v);
}

static int64_t binop(uint32_t op, int64_t a, int64_t b, const char **why) {
  rt_expr_term t[3] = {{NRT_EXPR_CONST, a}, {NRT_EXPR_CONST, b}, {op, 0}};
  int64_t v = 0;
  *why = eval_terms(3, t, NULL, &v);
  return v;
}

static void test_expressions(void) {
  const char *why;
  CHECK(binop(NRT_EXPR_FLOORDIV, -7, 2, &why) == -4 && !why);
  CHECK(binop(NRT_EXPR_FLOORDIV, 7, -2, &why) == -4 && !why);
  CHECK(binop(NRT_EXPR_FLOORDIV, -8, 2, &why) == -4 && !why);
  CHECK(binop(NRT_EXPR_FLOORDIV, -7, -2, &why) == 3 && !why);
  CHECK(binop(NRT_EXPR_MOD, -7, 2, &why) == 1 && !why);
  CHECK(binop(NRT_EXPR_MOD, 7, -2, &why) == -1 && !why);
  CHECK(binop(NRT_EXPR_MOD, -7, -2, &why) == -1 && !why);
  CHECK(binop(NRT_EXPR_MOD, INT64_MIN, -1, &why) == 0 && !why);
  CHECK(binop(NRT_EXPR_MAX, -3, 5, &why) == 5 && binop(NRT_EXPR_MIN, -3, 5, &why) == -3);
  binop(NRT_EXPR_FLOORDIV, 1, 0, &why);
  CHECK(why && strstr(why, "zero"));
  binop(NRT_EXPR_MOD, 1, 0, &why);
  CHECK(why && strstr(why, "zero"));
  binop(NRT_EXPR_FLOORDIV, INT64_MIN, -1, &why);
  CHECK(why && strstr(why, "overflow"));
  binop(NRT_EXPR_ADD, INT64_MAX, 1, &why);
  CHECK(why && strstr(why, "overflow"));
  binop(NRT_EXPR_SUB, INT64_MIN, 1, &why);
  CHECK(why && strstr(why, "overflow"));
  binop(NRT_EXPR_MUL, INT64_MAX / 2 + 1, 2, &why);
  CHECK(why && strstr(why, "overflow"));

  /* (s0 + 1)//2*s1 - s2 % 3, and its text. */
  rt_expr_term t[] = {{NRT_EXPR_SYM, 0}, {NRT_EXPR_CONST, 1}, {NRT_EXPR_ADD, 0},   {NRT_EXPR_CONST, 2},
                      {NRT_EXPR_FLOORDIV, 0}, {NRT_EXPR_SYM, 1}, {NRT_EXPR_MUL, 0}, {NRT_EXPR_SYM, 2},
                      {NRT_EXPR_CONST, 3}, {NRT_EXPR_MOD, 0}, {NRT_EXPR_SUB, 0}};
  int64_t syms[4] = {6, 5, -4, 0}, v = 0;
  CHECK(!eval_terms(11, t, syms, &v) && v == (7 / 2) * 5 - 2);
  rt_sbuf b = {0};
  rt_expr e = {11, t};
  rt_expr_print(&b, &e);
  CHECK(b.failed || !strcmp(b.text, "(s0 + 1)//2*s1 - s2%3")); /* failed: out of memory */
  free(b.text);
  /* a - (b - c) keeps its parentheses; max prints as a call. */
  rt_expr_term u[] = {{NRT_EXPR_SYM, 0}, {NRT_EXPR_SYM, 1}, {NRT_EXPR_CONST, 128}, {NRT_EXPR_MUL, 0},
                      {NRT_EXPR_SYM, 2}, {NRT_EXPR_SUB, 0}, {NRT_EXPR_SUB, 0}, {NRT_EXPR_CONST, 1},
                      {NRT_EXPR_MAX, 0}};
  rt_sbuf c = {0};
  rt_expr f = {9, u};
  rt_expr_print(&c, &f);
  CHECK(c.failed || !strcmp(c.text, "max(s0 - (s1*128 - s2), 1)"));
  free(c.text);

  /* Malformed: underflow, leftovers, unknown symbol, unknown op, nonzero arg. */
  char why2[128];
  rt_expr_term bad1[] = {{NRT_EXPR_CONST, 1}, {NRT_EXPR_ADD, 0}};
  rt_expr_term bad2[] = {{NRT_EXPR_CONST, 1}, {NRT_EXPR_CONST, 1}};
  rt_expr_term bad3[] = {{NRT_EXPR_SYM, 4}};
  rt_expr_term bad4[] = {{NRT_EXPR_OP_COUNT, 0}};
  rt_expr_term bad5[] = {{NRT_EXPR_CONST, 1}, {NRT_EXPR_CONST, 1}, {NRT_EXPR_ADD, 7}};
  CHECK(rt_expr_check(&(rt_expr){2, bad1}, 4, why2, sizeof why2));
  CHECK(rt_expr_check(&(rt_expr){2, bad2}, 4, why2, sizeof why2));
  CHECK(rt_expr_check(&(rt_expr){1, bad3}, 4, why2, sizeof why2));
  CHECK(rt_expr_check(&(rt_expr){1, bad4}, 4, why2, sizeof why2));
  CHECK(rt_expr_check(&(rt_expr){3, bad5}, 4, why2, sizeof why2));
  CHECK(rt_expr_check(&(rt_expr){0, bad5}, 4, why2, sizeof why2));
}

static void test_crc(void) {
  CHECK(rt_crc32("123456789", 9) == 0xCBF43926u); /* the standard check value */
  CHECK(rt_crc32("", 0) == 0);
}

/* ---- the chain graph --------------------------------------------------------- */

/* out = exp(x * 2 + y), x and y float32 (s0, 128): two temporaries. With
 * variant != 0, one thing is wrong (see the negative tests). */
enum variant {
  GOOD = 0, BAD_OP, BAD_COMPUTE_DTYPE, BAD_BUFFER_DTYPE, BAD_OPERAND_DTYPE, VIEW_DTYPE, DUP_SLOT,
  SLOT_RANGE, TEMP_UNWRITTEN, EXPR_ID, NUMEL_EXPR_ID, BUFFER_ID, NEG_BUFFER_ID, IMM_BUFFER,
  TOO_MANY_OPERANDS, TOO_MANY_OUTPUTS, TOO_MANY_SCALARS, TOO_MANY_DIMS, BAD_EXPR, BAD_SYMBOL,
  BAD_KIND, TEMP_SLOT, MASK_RANGE, OUTPUT_IMMEDIATE, BAD_IS_FLOAT, NUM_VARIANTS
};

static const struct {
  const char *what;
} variant_text[NUM_VARIANTS] = {
    [BAD_OP] = {"unknown op code"},           [BAD_COMPUTE_DTYPE] = {"invalid compute dtype"},
    [BAD_BUFFER_DTYPE] = {"buffer 1: invalid dtype"}, [BAD_OPERAND_DTYPE] = {"operand 1: invalid dtype"},
    [VIEW_DTYPE] = {"view of buffer"},       [DUP_SLOT] = {"slot 0 is also"},
    [SLOT_RANGE] = {"slot 5"},               [TEMP_UNWRITTEN] = {"before any node writes it"},
    [EXPR_ID] = {"names expr 9999"},         [NUMEL_EXPR_ID] = {"numel names expr"},
    [BUFFER_ID] = {"buffer 77 of"},          [NEG_BUFFER_ID] = {"buffer -2 of"},
    [IMM_BUFFER] = {"an immediate names buffer"}, [TOO_MANY_OPERANDS] = {"9 operands"},
    [TOO_MANY_OUTPUTS] = {"3 outputs of 2"}, [TOO_MANY_SCALARS] = {"9 scalars"},
    [TOO_MANY_DIMS] = {"26 dimensions"},     [BAD_EXPR] = {"pops an empty stack"},
    [BAD_SYMBOL] = {"names symbol 3 of 1"},  [BAD_KIND] = {"unknown kind"},
    [TEMP_SLOT] = {"a temporary with slot"}, [MASK_RANGE] = {"immediate mask"},
    [OUTPUT_IMMEDIATE] = {"an output is immediate"}, [BAD_IS_FLOAT] = {"is_float"},
};

static uint8_t *chain_graph(int variant, size_t *size) {
  gw_graph *g = gw_new(1, "chain");
  uint32_t s0 = gw_sym(g, 0), c128 = gw_const(g, 128), zero = gw_const(g, 0);
  uint32_t numel = gw_bin(g, NRT_EXPR_MUL, s0, c128);
  if (variant == BAD_EXPR) {
    gw_term t[] = {{NRT_EXPR_CONST, 1}, {NRT_EXPR_MUL, 0}};
    gw_expr(g, 2, t);
  }
  if (variant == BAD_SYMBOL) gw_sym(g, 3);
  uint32_t shape[2] = {s0, c128};
  uint32_t x = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, numel);
  uint32_t y = gw_buffer(g, variant == BAD_KIND ? 7 : NRT_BUFFER_INPUT,
                         variant == BAD_BUFFER_DTYPE ? (nrt_dtype)99 : NRT_FLOAT32,
                         variant == DUP_SLOT ? 0 : variant == SLOT_RANGE ? 5 : 1,
                         variant == NUMEL_EXPR_ID ? 4242 : numel);
  uint32_t t1 = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, variant == TEMP_SLOT ? 3 : 0, numel);
  uint32_t t2 = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, numel);
  uint32_t out = gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 0, numel);
  gw_operand ops[10];
  /* t1 = x * 2 */
  ops[0] = gw_dense(g, (int32_t)t1, NRT_FLOAT32, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)x, NRT_FLOAT32, zero, 2, shape);
  ops[2] = gw_imm(g, NRT_FLOAT32, 2, shape, fs(2.0));
  if (variant == OUTPUT_IMMEDIATE) ops[0] = ops[2];
  if (variant == BAD_OPERAND_DTYPE) ops[1].dtype = (nrt_dtype)42;
  if (variant == VIEW_DTYPE) ops[1].dtype = NRT_FLOAT64;
  if (variant == EXPR_ID) ops[1].stride[1] = 9999;
  if (variant == BUFFER_ID) ops[1].buffer = 77;
  if (variant == NEG_BUFFER_ID) ops[1].buffer = -2;
  if (variant == IMM_BUFFER) ops[2].buffer = (int32_t)x;
  if (variant == TOO_MANY_DIMS) ops[1].ndim = NRT_MAX_DIMS + 1;
  if (variant == BAD_IS_FLOAT) ops[2].value.is_float = 2;
  uint32_t nops = variant == TOO_MANY_OPERANDS ? 9 : 3;
  for (uint32_t k = 3; k < nops; k++) ops[k] = ops[1];
  gw_node(g, variant == BAD_OP ? (nrt_op_code)NRT_OP_COUNT : NRT_OP_MUL,
          variant == BAD_COMPUTE_DTYPE ? (nrt_dtype)-1 : NRT_FLOAT32, 1, nops, ops, 0, NULL);
  if (variant == MASK_RANGE) { /* a mask bit past the operands: patch the node's mask */
    g->nodes.p[20] = 0x0c;
  }
  /* t2 = t1 + y */
  nrt_scalar alpha[9];
  for (int j = 0; j < 9; j++) alpha[j] = fs(1.0);
  ops[0] = gw_dense(g, (int32_t)t2, NRT_FLOAT32, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)(variant == TEMP_UNWRITTEN ? t2 : t1), NRT_FLOAT32, zero, 2, shape);
  ops[2] = gw_dense(g, (int32_t)y, NRT_FLOAT32, zero, 2, shape);
  gw_node(g, NRT_OP_ADD, NRT_FLOAT32, 1, 3, ops, variant == TOO_MANY_SCALARS ? 9 : 1, alpha);
  /* out = exp(t2) */
  ops[0] = gw_dense(g, (int32_t)out, NRT_FLOAT32, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)t2, NRT_FLOAT32, zero, 2, shape);
  gw_node(g, NRT_OP_EXP, NRT_FLOAT32, variant == TOO_MANY_OUTPUTS ? 3 : 1, 2, ops, 0, NULL);
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void test_load_invalid(void) {
  nrt_graph_t g = NULL;
  for (int v = 1; v < NUM_VARIANTS; v++) {
    size_t size;
    uint8_t *bytes = chain_graph(v, &size);
    nrt_status s = nrt_graph_load(bytes, size, &g);
    if (s != NRT_ERROR_INVALID_DATA || !contains(nrt_last_error(), variant_text[v].what)) {
      fprintf(stderr, "variant %d: nrt_graph_load returned %s (%s), expected a message with \"%s\"\n", v, nrt_status_string(s),
              nrt_last_error(), variant_text[v].what);
      check_failed();
    }
    CHECK(g == NULL);
    free(bytes);
  }
  size_t size;
  uint8_t *good = chain_graph(GOOD, &size);
  uint8_t *bytes = malloc(size + 64);
  /* header fields, checksum, truncation, trailing bytes */
  memcpy(bytes, good, size);
  put_u32(bytes, 0x12345678u);
  gw_fix_crc(bytes, size);
  CHECK_ERROR(nrt_graph_load(bytes, size, &g), NRT_ERROR_INVALID_DATA, "bad magic");
  memcpy(bytes, good, size);
  put_u32(bytes + 4, 1);
  gw_fix_crc(bytes, size);
  CHECK_ERROR(nrt_graph_load(bytes, size, &g), NRT_ERROR_INVALID_DATA, "version 1");
  memcpy(bytes, good, size);
  bytes[size / 2] ^= 0x10;
  CHECK_ERROR(nrt_graph_load(bytes, size, &g), NRT_ERROR_INVALID_DATA, "bad checksum");
  memcpy(bytes, good, size);
  bytes[size - 1] ^= 1;
  CHECK_ERROR(nrt_graph_load(bytes, size, &g), NRT_ERROR_INVALID_DATA, "bad checksum");
  memcpy(bytes, good, size - 9);
  gw_fix_crc(bytes, size - 5); /* the name cut short */
  CHECK_ERROR(nrt_graph_load(bytes, size - 5, &g), NRT_ERROR_INVALID_DATA, "truncated");
  CHECK_ERROR(nrt_graph_load(bytes, 7, &g), NRT_ERROR_INVALID_DATA, "too few");
  CHECK_ERROR(nrt_graph_load(bytes, 0, &g), NRT_ERROR_INVALID_DATA, "too few");
  memcpy(bytes, good, size - 4);
  memset(bytes + size - 4, 0, 3);
  gw_fix_crc(bytes, size + 3);
  CHECK_ERROR(nrt_graph_load(bytes, size + 3, &g), NRT_ERROR_INVALID_DATA, "trailing bytes");
  /* A node count of 2^31 with a few bytes left: refused, not allocated. */
  {
    gw_bytes b = {0};
    gw_u32(&b, NRT_GRAPH_MAGIC), gw_u32(&b, NRT_GRAPH_VERSION), gw_u32(&b, 0);
    gw_u32(&b, 0), gw_u32(&b, 0), gw_u32(&b, 0x80000000u), gw_u32(&b, 0), gw_u32(&b, 0);
    gw_fix_crc(b.p, b.len);
    CHECK_ERROR(nrt_graph_load(b.p, b.len, &g), NRT_ERROR_INVALID_DATA, "node count");
    put_u32(b.p + 20, 1000); /* under the limit, but 24000 bytes are not there */
    gw_fix_crc(b.p, b.len);
    CHECK_ERROR(nrt_graph_load(b.p, b.len, &g), NRT_ERROR_INVALID_DATA, "needs at least");
    put_u32(b.p + 12, 0x7fffffffu); /* expression count */
    gw_fix_crc(b.p, b.len);
    CHECK_ERROR(nrt_graph_load(b.p, b.len, &g), NRT_ERROR_INVALID_DATA, "expression count");
    put_u32(b.p + 8, 65); /* symbols */
    gw_fix_crc(b.p, b.len);
    CHECK_ERROR(nrt_graph_load(b.p, b.len, &g), NRT_ERROR_INVALID_DATA, "65 symbols");
    free(b.p);
  }
  /* A NUL in the name. */
  {
    gw_graph *w = gw_new(0, "ab");
    size_t n;
    uint8_t *p = gw_finish(w, &n);
    p[n - 5] = 0;
    gw_fix_crc(p, n);
    CHECK_ERROR(nrt_graph_load(p, n, &g), NRT_ERROR_INVALID_DATA, "NUL");
    free(p);
    gw_free(w);
  }
  CHECK_STATUS(nrt_graph_load(NULL, 10, &g), NRT_ERROR_INVALID_ARGUMENT);
  free(bytes);
  free(good);
}

static nrt_graph_t load(const uint8_t *bytes, size_t size) {
  nrt_graph_t g = NULL;
  CHECK_OK(nrt_graph_load(bytes, size, &g));
  return g;
}

static void test_text(void) {
  size_t size;
  uint8_t *bytes = chain_graph(GOOD, &size);
  nrt_graph_t g = load(bytes, size);
  char *text = NULL;
  CHECK_OK(nrt_graph_to_text(g, &text));
  CHECK(contains(text, "graph \"chain\": 1 symbols, 5 buffers (2 inputs, 1 outputs), 3 nodes\n"));
  CHECK(contains(text, "symbol s0\n"));
  CHECK(contains(text, "buffer b0: input 0 float32 numel s0*128\n"));
  CHECK(contains(text, "buffer b2: temp float32 numel s0*128\n"));
  CHECK(contains(text, "buffer b4: output 0 float32 numel s0*128\n"));
  CHECK(contains(text, "node 0: mul float32 outputs b2[float32 +0 (s0, 128) (128, 1)] inputs "
                       "b0[float32 +0 (s0, 128) (128, 1)] imm(2 float32)\n"));
  CHECK(contains(text, "node 1: add float32 outputs b3[float32 +0 (s0, 128) (128, 1)] inputs "
                       "b2[float32 +0 (s0, 128) (128, 1)] b1[float32 +0 (s0, 128) (128, 1)] scalars [1]\n"));
  CHECK(contains(text, "node 2: exp float32 outputs b4"));
  if (check_failures) fprintf(stderr, "%s", text);
  free(text);
  nrt_graph_destroy(g);
  free(bytes);
}

/* ---- running programs ------------------------------------------------------- */

static void fill_floats(void *dev, int64_t n, int seed) {
  float *p = host(dev);
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 37 + seed * 11) % 101 - 50) / 64.0f;
}

static nrt_program_t compile(nrt_graph_t g, int fuse) {
  nrt_program_options o = {.fuse = fuse};
  nrt_program_t p = NULL;
  CHECK_OK(nrt_program_compile(g, &o, &p));
  return p;
}

/* Prepares, allocates the arena and runs on a fresh stream; synchronizes. */
static nrt_status run_program(nrt_program_t p, const int64_t *syms, int nsyms, void *const *inputs,
                              const int64_t *caps, void *const *outputs) {
  size_t arena_bytes = 0;
  int64_t numels[8];
  nrt_status s = nrt_program_prepare(p, syms, nsyms, caps, &arena_bytes, numels);
  if (s) return s;
  void *arena = arena_bytes ? dev_alloc(arena_bytes) : NULL;
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_get_default(0, &stream));
  s = nrt_program_launch(stream, p, syms, nsyms, inputs, caps, outputs, arena);
  nrt_status t = nrt_stream_synchronize(stream);
  if (!s) s = t;
  if (arena) nrt_free(arena);
  return s;
}

static void chain_reference(void *x, void *y, void *out, int64_t rows) {
  void *t1 = dev_alloc((size_t)rows * 128 * 4), *t2 = dev_alloc((size_t)rows * 128 * 4);
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_MUL, op.compute_dtype = NRT_FLOAT32, op.num_operands = 3, op.num_outputs = 1;
  op.operands[0] = dense2(t1, NRT_FLOAT32, rows, 128);
  op.operands[1] = dense2(x, NRT_FLOAT32, rows, 128);
  op.operands[2] = dense2(NULL, NRT_FLOAT32, rows, 128);
  op.operands[2].strides[0] = op.operands[2].strides[1] = 0;
  op.immediate_mask = 4;
  op.immediates[2] = fs(2.0);
  CHECK_OK(nrt_op_execute(&op));
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_ADD, op.compute_dtype = NRT_FLOAT32, op.num_operands = 3, op.num_outputs = 1;
  op.num_scalars = 1, op.scalars[0] = fs(1.0);
  op.operands[0] = dense2(t2, NRT_FLOAT32, rows, 128);
  op.operands[1] = dense2(t1, NRT_FLOAT32, rows, 128);
  op.operands[2] = dense2(y, NRT_FLOAT32, rows, 128);
  CHECK_OK(nrt_op_execute(&op));
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_EXP, op.compute_dtype = NRT_FLOAT32, op.num_operands = 2, op.num_outputs = 1;
  op.operands[0] = dense2(out, NRT_FLOAT32, rows, 128);
  op.operands[1] = dense2(t2, NRT_FLOAT32, rows, 128);
  CHECK_OK(nrt_op_execute(&op));
  nrt_free(t1);
  nrt_free(t2);
}

static void test_chain(void) {
  size_t size;
  uint8_t *bytes = chain_graph(GOOD, &size);
  nrt_graph_t g = load(bytes, size);
  nrt_program_t fused = compile(g, 1), unfused = compile(g, 0), dflt = NULL;
  CHECK_OK(nrt_program_compile(g, NULL, &dflt));
  nrt_graph_destroy(g); /* the programs keep what they need */
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(fused, &info));
  CHECK(info.num_inputs == 2 && info.num_outputs == 1 && info.num_symbols == 1 && info.num_nodes == 3);
  CHECK(info.num_steps == 1 && info.num_fused_groups == 1 && info.num_fused_nodes == 3 &&
        info.num_elided == 2);
  CHECK_OK(nrt_program_info_get(dflt, &info));
  CHECK(info.num_steps == 1 && info.num_elided == 2);
  CHECK_OK(nrt_program_info_get(unfused, &info));
  CHECK(info.num_steps == 3 && info.num_fused_groups == 0 && info.num_elided == 0 &&
        info.num_inplace == 1);

  char *text = NULL;
  int64_t s0 = 5;
  CHECK_OK(nrt_program_plan_text(fused, &s0, 1, &text));
  CHECK(contains(text, "step 0: fused group of 3 nodes: 0 (mul), 1 (add), 2 (exp); 2 inputs, 3 registers; stores b4\n"));
  CHECK(contains(text, "temp b2: elided (registers only)\n"));
  CHECK(contains(text, "binding s0=5: arena 0 bytes\n"));
  CHECK(contains(text, "output 0: 640 elements\n"));
  free(text);
  CHECK_OK(nrt_program_plan_text(unfused, &s0, 1, &text));
  CHECK(contains(text, "step 1: kernel node 1 (add)\n"));
  /* add writes its result over mul's, which it reads for the last time:
   * b2's space lives on to b3's last step. */
  CHECK(contains(text, "temp b2: steps 0-2\n"));
  CHECK(contains(text, "temp b3: steps 1-2, in place over b2\n"));
  CHECK(contains(text, "binding s0=5: arena 2560 bytes\n"));
  free(text);
  CHECK_OK(nrt_program_plan_text(unfused, NULL, 0, &text));
  CHECK(contains(text, "program \"chain\": 3 nodes, 3 steps, 0 fused groups of 0 nodes, 0 elided"));
  CHECK(!contains(text, "binding"));
  free(text);

  /* One program, three bindings (and 0 rows), against the one-by-one run. */
  const int64_t rows_list[] = {3, 1, 77, 0, 3};
  for (int r = 0; r < 5; r++) {
    int64_t rows = rows_list[r], n = rows * 128, caps[2] = {n, n};
    void *x = dev_alloc((size_t)n * 4), *y = dev_alloc((size_t)n * 4);
    void *o1 = dev_alloc((size_t)n * 4), *o2 = dev_alloc((size_t)n * 4), *ref = dev_alloc((size_t)n * 4);
    fill_floats(x, n, 1 + r);
    fill_floats(y, n, 7 + r);
    void *inputs[2] = {x, y};
    CHECK_OK(run_program(fused, &rows, 1, inputs, caps, &o1));
    CHECK_OK(run_program(unfused, &rows, 1, inputs, caps, &o2));
    chain_reference(x, y, ref, rows);
    CHECK(!memcmp(host(o1), host(ref), (size_t)n * 4));
    CHECK(!memcmp(host(o2), host(ref), (size_t)n * 4));
    if (n) CHECK(((float *)host(o1))[n - 1] == expf(2.0f * ((float *)host(x))[n - 1] + ((float *)host(y))[n - 1]));
    nrt_free(x), nrt_free(y), nrt_free(o1), nrt_free(o2), nrt_free(ref);
  }
  nrt_program_destroy(fused);
  nrt_program_destroy(unfused);
  nrt_program_destroy(dflt);
  free(bytes);
}

/* out = relu(a @ b) * 0.5, a (s0, 24), b (24, 40): a GEMM and its epilogue. */
static uint8_t *gemm_graph(size_t *size) {
  gw_graph *g = gw_new(1, "gemm_chain");
  uint32_t s0 = gw_sym(g, 0), k = gw_const(g, 24), n = gw_const(g, 40), zero = gw_const(g, 0);
  uint32_t ash[2] = {s0, k}, bsh[2] = {k, n}, osh[2] = {s0, n};
  uint32_t a = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, gw_bin(g, NRT_EXPR_MUL, s0, k));
  uint32_t b = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 1, gw_bin(g, NRT_EXPR_MUL, k, n));
  uint32_t on = gw_bin(g, NRT_EXPR_MUL, s0, n);
  uint32_t t = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, on);
  uint32_t u = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, on);
  uint32_t out = gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 0, on);
  gw_operand ops[3];
  nrt_scalar ab[2] = {fs(1.0), fs(0.0)};
  ops[0] = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, osh);
  ops[1] = gw_dense(g, (int32_t)a, NRT_FLOAT32, zero, 2, ash);
  ops[2] = gw_dense(g, (int32_t)b, NRT_FLOAT32, zero, 2, bsh);
  gw_node(g, NRT_OP_GEMM, NRT_FLOAT32, 1, 3, ops, 2, ab);
  ops[0] = gw_dense(g, (int32_t)u, NRT_FLOAT32, zero, 2, osh);
  ops[1] = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, osh);
  gw_node(g, NRT_OP_RELU, NRT_FLOAT32, 1, 2, ops, 0, NULL);
  ops[0] = gw_dense(g, (int32_t)out, NRT_FLOAT32, zero, 2, osh);
  ops[1] = gw_dense(g, (int32_t)u, NRT_FLOAT32, zero, 2, osh);
  ops[2] = gw_imm(g, NRT_FLOAT64, 2, osh, fs(0.5));
  gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

static void test_gemm_chain(void) {
  size_t size;
  uint8_t *bytes = gemm_graph(&size);
  nrt_graph_t g = load(bytes, size);
  nrt_program_t p = compile(g, 1);
  nrt_graph_destroy(g);
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(p, &info));
  /* One step: the GEMM with relu and mul as its epilogue. */
  CHECK(info.num_steps == 1 && info.num_fused_groups == 1 && info.num_fused_nodes == 3 &&
        info.num_elided == 1 && info.num_gemm_epilogues == 1);
  for (int64_t m = 1; m <= 33; m += 16) {
    void *a = dev_alloc((size_t)m * 24 * 4), *b = dev_alloc(24 * 40 * 4), *out = dev_alloc((size_t)m * 40 * 4);
    fill_floats(a, m * 24, 3);
    fill_floats(b, 24 * 40, 4);
    void *inputs[2] = {a, b};
    int64_t caps[2] = {m * 24, 24 * 40};
    size_t arena_bytes;
    int64_t numel;
    CHECK_OK(nrt_program_prepare(p, &m, 1, caps, &arena_bytes, &numel));
    CHECK(numel == m * 40 && arena_bytes == (((size_t)m * 160 + 63) & ~(size_t)63));
    CHECK_OK(run_program(p, &m, 1, inputs, caps, &out));
    /* the reference */
    void *t = dev_alloc((size_t)m * 160), *u = dev_alloc((size_t)m * 160), *ref = dev_alloc((size_t)m * 160);
    nrt_op op;
    memset(&op, 0, sizeof op);
    op.code = NRT_OP_GEMM, op.compute_dtype = NRT_FLOAT32, op.num_operands = 3, op.num_outputs = 1;
    op.num_scalars = 2, op.scalars[0] = fs(1.0), op.scalars[1] = fs(0.0);
    op.operands[0] = dense2(t, NRT_FLOAT32, m, 40);
    op.operands[1] = dense2(a, NRT_FLOAT32, m, 24);
    op.operands[2] = dense2(b, NRT_FLOAT32, 24, 40);
    CHECK_OK(nrt_op_execute(&op));
    memset(&op, 0, sizeof op);
    op.code = NRT_OP_RELU, op.compute_dtype = NRT_FLOAT32, op.num_operands = 2, op.num_outputs = 1;
    op.operands[0] = dense2(u, NRT_FLOAT32, m, 40);
    op.operands[1] = dense2(t, NRT_FLOAT32, m, 40);
    CHECK_OK(nrt_op_execute(&op));
    memset(&op, 0, sizeof op);
    op.code = NRT_OP_MUL, op.compute_dtype = NRT_FLOAT32, op.num_operands = 3, op.num_outputs = 1;
    op.operands[0] = dense2(ref, NRT_FLOAT32, m, 40);
    op.operands[1] = dense2(u, NRT_FLOAT32, m, 40);
    op.operands[2] = dense2(NULL, NRT_FLOAT64, m, 40);
    op.operands[2].strides[0] = op.operands[2].strides[1] = 0;
    op.immediate_mask = 4, op.immediates[2] = fs(0.5);
    CHECK_OK(nrt_op_execute(&op));
    CHECK(!memcmp(host(out), host(ref), (size_t)m * 160));
    nrt_free(a), nrt_free(b), nrt_free(out), nrt_free(t), nrt_free(u), nrt_free(ref);
  }
  nrt_program_destroy(p);
  free(bytes);
}

/* A FILL of x before the launch and a COPY of its output after, all on one
 * stream; the program is destroyed while its launch may still be queued. */
static void test_stream_order(void) {
  size_t size;
  uint8_t *bytes = chain_graph(GOOD, &size);
  nrt_graph_t g = load(bytes, size);
  nrt_program_t p = compile(g, 1);
  nrt_graph_destroy(g);
  int64_t rows = 64, n = rows * 128, caps[2] = {n, n};
  void *x = dev_alloc((size_t)n * 4), *y = dev_alloc((size_t)n * 4), *out = dev_alloc((size_t)n * 4);
  void *copy = dev_alloc((size_t)n * 4), *ref = dev_alloc((size_t)n * 4);
  fill_floats(x, n, 5);
  fill_floats(y, n, 6);
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_create(0, 0, &stream));
  size_t arena_bytes;
  int64_t numel;
  CHECK_OK(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, &numel));
  CHECK(arena_bytes == 0 && numel == n);
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_FILL, op.num_operands = 1, op.num_outputs = 1, op.num_scalars = 1;
  op.compute_dtype = NRT_FLOAT32;
  op.scalars[0] = fs(0.25);
  op.operands[0] = dense2(x, NRT_FLOAT32, rows, 128);
  CHECK_OK(nrt_launch(stream, &op));
  void *inputs[2] = {x, y};
  for (int i = 0; i < 3; i++) CHECK_OK(nrt_program_launch(stream, p, &rows, 1, inputs, caps, &out, NULL));
  nrt_program_destroy(p);
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_COPY, op.num_operands = 2, op.num_outputs = 1, op.compute_dtype = NRT_FLOAT32;
  op.operands[0] = dense2(copy, NRT_FLOAT32, rows, 128);
  op.operands[1] = dense2(out, NRT_FLOAT32, rows, 128);
  CHECK_OK(nrt_launch(stream, &op));
  CHECK_OK(nrt_stream_synchronize(stream));
  float *xs = host(x);
  CHECK(xs[0] == 0.25f && xs[n - 1] == 0.25f);
  chain_reference(x, y, ref, rows);
  CHECK(!memcmp(host(copy), host(ref), (size_t)n * 4));
  CHECK_OK(nrt_stream_destroy(stream));
  nrt_free(x), nrt_free(y), nrt_free(out), nrt_free(copy), nrt_free(ref);
  free(bytes);
}

/* out = x // y + 1 (int32), y with zeros: the division fails its step. */
static void test_failing_step(void) {
  gw_graph *w = gw_new(0, "failing");
  uint32_t n = gw_const(w, 1000), zero = gw_const(w, 0);
  uint32_t x = gw_buffer(w, NRT_BUFFER_INPUT, NRT_INT32, 0, n);
  uint32_t y = gw_buffer(w, NRT_BUFFER_INPUT, NRT_INT32, 1, n);
  uint32_t t = gw_buffer(w, NRT_BUFFER_TEMP, NRT_INT32, 0, n);
  uint32_t out = gw_buffer(w, NRT_BUFFER_OUTPUT, NRT_INT32, 0, n);
  gw_operand ops[3];
  ops[0] = gw_dense(w, (int32_t)t, NRT_INT32, zero, 1, &n);
  ops[1] = gw_dense(w, (int32_t)x, NRT_INT32, zero, 1, &n);
  ops[2] = gw_dense(w, (int32_t)y, NRT_INT32, zero, 1, &n);
  gw_node(w, NRT_OP_DIV_TRUNC, NRT_INT32, 1, 3, ops, 0, NULL);
  ops[0] = gw_dense(w, (int32_t)out, NRT_INT32, zero, 1, &n);
  ops[1] = gw_dense(w, (int32_t)t, NRT_INT32, zero, 1, &n);
  ops[2] = gw_imm(w, NRT_INT32, 1, &n, is(1));
  nrt_scalar one = is(1);
  gw_node(w, NRT_OP_ADD, NRT_INT32, 1, 3, ops, 1, &one);
  size_t size;
  uint8_t *bytes = gw_finish(w, &size);
  gw_free(w);
  nrt_graph_t g = load(bytes, size);
  nrt_program_t p = compile(g, 1);
  nrt_graph_destroy(g);
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(p, &info));
  CHECK(info.num_steps == 2 && info.num_fused_groups == 0); /* integer division runs alone */
  void *xd = dev_alloc(4000), *yd = dev_alloc(4000), *od = dev_alloc(4000);
  int32_t *xs = host(xd), *ys = host(yd);
  for (int i = 0; i < 1000; i++) xs[i] = i - 500, ys[i] = i % 7 + 1;
  void *inputs[2] = {xd, yd};
  int64_t caps[2] = {1000, 1000};
  size_t arena_bytes;
  int64_t numel;
  CHECK_OK(nrt_program_prepare(p, NULL, 0, caps, &arena_bytes, &numel));
  void *arena = dev_alloc(arena_bytes);
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_create(0, 0, &stream));
  CHECK_OK(nrt_program_launch(stream, p, NULL, 0, inputs, caps, &od, arena));
  CHECK_OK(nrt_stream_synchronize(stream));
  ys[3] = 0;
  CHECK_OK(nrt_program_launch(stream, p, NULL, 0, inputs, caps, &od, arena));
  CHECK_ERROR(nrt_stream_synchronize(stream), NRT_ERROR_ARITHMETIC, "compiled graph failing: step 0 (div_trunc): ");
  CHECK_OK(nrt_stream_clear_error(stream));
  ys[3] = 4;
  CHECK_OK(nrt_program_launch(stream, p, NULL, 0, inputs, caps, &od, arena));
  CHECK_OK(nrt_stream_synchronize(stream));
  CHECK(((int32_t *)host(od))[10] == (10 - 500) / (10 % 7 + 1) + 1);
  /* Launch checks: symbols, capacities, the arena. */
  int64_t s = 1;
  CHECK_ERROR(nrt_program_launch(stream, p, &s, 1, inputs, caps, &od, arena), NRT_ERROR_INVALID_ARGUMENT,
              "1 symbol values for 0 symbols");
  CHECK_ERROR(nrt_program_launch(stream, p, NULL, 0, inputs, caps, &od, NULL), NRT_ERROR_INVALID_ARGUMENT,
              "NULL arena");
  int64_t small[2] = {1000, 999};
  CHECK_ERROR(nrt_program_launch(stream, p, NULL, 0, inputs, small, &od, arena), NRT_ERROR_INVALID_ARGUMENT,
              "input 1 (buffer 1) holds 999 elements, but node 0 (div_trunc) operand 2 reaches element 999");
  CHECK_OK(nrt_stream_destroy(stream));
  nrt_free(arena), nrt_free(xd), nrt_free(yd), nrt_free(od);
  nrt_program_destroy(p);
  free(bytes);
}

/* Prepare's checks: capacities, views beyond buffers, negative sizes,
 * failing expressions, absent operands with elements. */
static void test_prepare_checks(void) {
  size_t size;
  uint8_t *bytes = chain_graph(GOOD, &size);
  nrt_graph_t g = load(bytes, size);
  nrt_program_t p = compile(g, 1);
  nrt_graph_destroy(g);
  int64_t rows = 4, caps[2] = {512, 511};
  size_t arena_bytes;
  int64_t numel;
  CHECK_ERROR(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT,
              "input 1 (buffer 1) holds 511 elements");
  caps[1] = 512;
  CHECK_OK(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, &numel));
  rows = -1;
  CHECK_ERROR(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT,
              "-128 elements");
  rows = INT64_MAX / 64;
  CHECK_ERROR(nrt_program_prepare(p, &rows, 1, caps, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT,
              "overflow");
  CHECK_STATUS(nrt_program_prepare(p, &rows, 0, caps, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT);
  nrt_program_destroy(p);
  free(bytes);

  /* A view past its temporary, a division by zero, an absent operand of
   * s0 elements. */
  gw_graph *w = gw_new(2, "checks");
  uint32_t s0 = gw_sym(w, 0), s1 = gw_sym(w, 1), zero = gw_const(w, 0), one = gw_const(w, 1);
  uint32_t q = gw_bin(w, NRT_EXPR_FLOORDIV, s0, s1);
  uint32_t big = gw_bin(w, NRT_EXPR_ADD, s0, one);
  uint32_t x = gw_buffer(w, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, s0);
  uint32_t t = gw_buffer(w, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, s0);
  uint32_t out = gw_buffer(w, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 0, q);
  gw_operand ops[3];
  ops[0] = gw_dense(w, (int32_t)t, NRT_FLOAT32, zero, 1, &big); /* one element too many when s1 > 0 */
  ops[1] = gw_dense(w, (int32_t)x, NRT_FLOAT32, zero, 1, &big);
  ops[2] = gw_none(w, NRT_FLOAT32);
  ops[2].shape[0] = s1; /* absent, but of s1 elements */
  gw_node(w, NRT_OP_NEG, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  ops[0] = gw_dense(w, (int32_t)out, NRT_FLOAT32, zero, 1, &q);
  ops[1] = gw_dense(w, (int32_t)t, NRT_FLOAT32, zero, 1, &q);
  gw_node(w, NRT_OP_NEG, NRT_FLOAT32, 1, 2, ops, 0, NULL);
  bytes = gw_finish(w, &size);
  gw_free(w);
  g = load(bytes, size);
  p = compile(g, 1);
  nrt_graph_destroy(g);
  int64_t syms[2] = {8, 0}, cap = 100;
  CHECK_ERROR(nrt_program_prepare(p, syms, 2, &cap, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT,
              "s0//s1): division by zero");
  syms[1] = 2;
  CHECK_ERROR(nrt_program_prepare(p, syms, 2, &cap, &arena_bytes, &numel), NRT_ERROR_INVALID_ARGUMENT,
              "node 0 (neg) operand 0: reaches element 8 of buffer 1, which has 8");
  free(bytes);
  nrt_program_destroy(p);
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN(test_crc);
  RUN(test_expressions);
  RUN(test_load_invalid);
  RUN(test_text);
  RUN(test_chain);
  RUN(test_gemm_chain);
  RUN(test_stream_order);
  RUN(test_failing_step);
  RUN(test_prepare_checks);
  return CHECK_MAIN_RESULT();
}
