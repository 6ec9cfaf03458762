/* The graph loader against corrupt input (neuronrt/graph.h): valid graphs
 * truncated at every length, with random bytes flipped, inserted and
 * deleted, and with 32-bit fields overwritten by boundary values; most
 * mutations then get a recomputed checksum so that the structural checks,
 * not the CRC, must catch them. A load returns an error or a graph; a graph
 * that loads is printed, compiled and prepared with small random symbol
 * values and capacities (errors fine). Seeded; the iteration count is
 * fixed, with a time limit as a guard for slow (sanitizer) builds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "graph_writer.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- seed graphs ------------------------------------------------------------- */

static nrt_scalar fs(double f) { return (nrt_scalar){.is_float = 1, .f = f}; }

/* exp(x * 2 + y) over (s0, s1 + 1): a fusible chain. */
static uint8_t *seed_chain(size_t *size) {
  gw_graph *g = gw_new(2, "chain");
  uint32_t s0 = gw_sym(g, 0), s1 = gw_bin(g, NRT_EXPR_ADD, gw_sym(g, 1), gw_const(g, 1));
  uint32_t zero = gw_const(g, 0), numel = gw_bin(g, NRT_EXPR_MUL, s0, s1), shape[2] = {s0, s1};
  uint32_t x = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, numel);
  uint32_t y = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT64, 1, s1);
  uint32_t t1 = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, numel);
  uint32_t t2 = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT64, 0, numel);
  uint32_t out = gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT64, 0, numel);
  gw_operand ops[3];
  ops[0] = gw_dense(g, (int32_t)t1, NRT_FLOAT32, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)x, NRT_FLOAT32, zero, 2, shape);
  ops[2] = gw_imm(g, NRT_FLOAT32, 2, shape, fs(2.0));
  gw_node(g, NRT_OP_MUL, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  nrt_scalar alpha = fs(1.0);
  ops[0] = gw_dense(g, (int32_t)t2, NRT_FLOAT64, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)t1, NRT_FLOAT32, zero, 2, shape);
  ops[2] = gw_dense(g, (int32_t)y, NRT_FLOAT64, zero, 2, shape);
  ops[2].stride[0] = zero; /* a row broadcast */
  gw_node(g, NRT_OP_ADD, NRT_FLOAT64, 1, 3, ops, 1, &alpha);
  ops[0] = gw_dense(g, (int32_t)out, NRT_FLOAT64, zero, 2, shape);
  ops[1] = gw_dense(g, (int32_t)t2, NRT_FLOAT64, zero, 2, shape);
  gw_node(g, NRT_OP_EXP, NRT_FLOAT64, 1, 2, ops, 0, NULL);
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

/* relu(a @ b + c) with an absent operand node and floor-div sizes. */
static uint8_t *seed_gemm(size_t *size) {
  gw_graph *g = gw_new(1, "gemm");
  uint32_t m = gw_bin(g, NRT_EXPR_FLOORDIV, gw_sym(g, 0), gw_const(g, 2));
  uint32_t k = gw_bin(g, NRT_EXPR_MAX, gw_sym(g, 0), gw_const(g, 3));
  uint32_t n = gw_bin(g, NRT_EXPR_MOD, gw_const(g, 7), gw_sym(g, 0));
  uint32_t zero = gw_const(g, 0);
  uint32_t ash[2] = {m, k}, bsh[2] = {k, n}, osh[2] = {m, n};
  uint32_t a = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 0, gw_bin(g, NRT_EXPR_MUL, m, k));
  uint32_t b = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 1, gw_bin(g, NRT_EXPR_MUL, k, n));
  uint32_t on = gw_bin(g, NRT_EXPR_MUL, m, n);
  uint32_t c = gw_buffer(g, NRT_BUFFER_INPUT, NRT_FLOAT32, 2, on);
  uint32_t t = gw_buffer(g, NRT_BUFFER_TEMP, NRT_FLOAT32, 0, on);
  uint32_t out = gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_FLOAT32, 0, on);
  gw_operand ops[4];
  nrt_scalar ab[2] = {fs(1.0), fs(1.0)};
  ops[0] = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, osh);
  ops[1] = gw_dense(g, (int32_t)a, NRT_FLOAT32, zero, 2, ash);
  ops[2] = gw_dense(g, (int32_t)b, NRT_FLOAT32, zero, 2, bsh);
  ops[3] = gw_dense(g, (int32_t)c, NRT_FLOAT32, zero, 2, osh);
  gw_node(g, NRT_OP_GEMM, NRT_FLOAT32, 1, 4, ops, 2, ab);
  ops[0] = gw_dense(g, (int32_t)out, NRT_FLOAT32, zero, 2, osh);
  ops[1] = gw_dense(g, (int32_t)t, NRT_FLOAT32, zero, 2, osh);
  ops[2] = gw_none(g, NRT_FLOAT32);
  gw_node(g, NRT_OP_RELU, NRT_FLOAT32, 1, 3, ops, 0, NULL);
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

/* A longer DAG with in-place updates and an integer division. */
static uint8_t *seed_dag(size_t *size) {
  gw_graph *g = gw_new(1, "dag");
  uint32_t s0 = gw_sym(g, 0), zero = gw_const(g, 0);
  uint32_t in = gw_buffer(g, NRT_BUFFER_INPUT, NRT_INT32, 0, s0);
  uint32_t bufs[6];
  for (int i = 0; i < 5; i++) bufs[i] = gw_buffer(g, NRT_BUFFER_TEMP, NRT_INT32, 0, s0);
  bufs[5] = gw_buffer(g, NRT_BUFFER_OUTPUT, NRT_INT32, 0, s0);
  static const nrt_op_code codes[] = {NRT_OP_NEG, NRT_OP_ADD, NRT_OP_MUL, NRT_OP_DIV_TRUNC, NRT_OP_ABS,
                                      NRT_OP_MAXIMUM};
  nrt_scalar one = {.is_float = 0, .i = 1};
  for (int i = 0; i < 6; i++) {
    gw_operand ops[3];
    int binary = codes[i] != NRT_OP_NEG && codes[i] != NRT_OP_ABS;
    ops[0] = gw_dense(g, (int32_t)bufs[i], NRT_INT32, zero, 1, &s0);
    ops[1] = gw_dense(g, (int32_t)(i ? bufs[i - 1] : in), NRT_INT32, zero, 1, &s0);
    ops[2] = i >= 2 ? gw_dense(g, (int32_t)bufs[i - 2], NRT_INT32, zero, 1, &s0)
                    : gw_imm(g, NRT_INT32, 1, &s0, one);
    gw_node(g, codes[i], NRT_INT32, 1, binary ? 3 : 2, ops, codes[i] == NRT_OP_ADD, &one);
  }
  uint8_t *bytes = gw_finish(g, size);
  gw_free(g);
  return bytes;
}

/* ---- one input ------------------------------------------------------------- */

static long loaded, refused;

static void exercise(const uint8_t *bytes, size_t size) {
  nrt_graph_t g = NULL;
  nrt_status s = nrt_graph_load(bytes, size, &g);
  if (s) {
    /* Out of memory only under fault injection (make faultinject). */
    CHECK((s == NRT_ERROR_INVALID_DATA || s == NRT_ERROR_OUT_OF_MEMORY) && g == NULL &&
          nrt_last_error()[0] != 0);
    refused++;
    return;
  }
  loaded++;
  char *text = NULL;
  CHECK_OK(nrt_graph_to_text(g, &text));
  free(text);
  nrt_program_t p[2] = {NULL, NULL};
  for (int f = 0; f < 2; f++) {
    nrt_program_options o = {.fuse = f};
    CHECK_OK(nrt_program_compile(g, &o, &p[f]));
  }
  nrt_program_info info;
  CHECK_OK(nrt_program_info_get(p[1], &info));
  nrt_graph_destroy(g);
  int64_t syms[NRT_GRAPH_MAX_SYMBOLS], caps[64], numels[64];
  int inputs = info.num_inputs < 64 ? info.num_inputs : 64;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < info.num_symbols; i++) syms[i] = pick(12) - 2;
    for (int i = 0; i < inputs; i++) caps[i] = pick(200);
    for (int f = 0; f < 2; f++) {
      size_t arena;
      if (info.num_inputs <= 64 && info.num_outputs <= 64)
        (void)nrt_program_prepare(p[f], syms, info.num_symbols, caps, &arena, numels);
      if (nrt_program_plan_text(p[f], syms, info.num_symbols, &text) == NRT_SUCCESS) free(text);
    }
  }
  nrt_program_destroy(p[0]);
  nrt_program_destroy(p[1]);
}

static const uint32_t boundary[] = {0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 256,
                                    NRT_OP_COUNT, NRT_DTYPE_COUNT, NRT_EXPR_OP_COUNT,
                                    0x7fffffffu, 0x80000000u, 0xffffffffu, 0xfffffffeu, 1u << 20,
                                    (1u << 20) + 1};

static void mutate_and_run(const uint8_t *seed, size_t size, uint8_t *buf) {
  size_t n = size;
  memcpy(buf, seed, size);
  int kind = pick(6), fix = pick(8) != 0;
  switch (kind) {
    case 0: /* flip bytes */
      for (int i = 1 + pick(4); i > 0; i--) buf[pick((int)n)] ^= (uint8_t)(1 + pick(255));
      break;
    case 1: { /* insert bytes */
      int k = 1 + pick(8);
      size_t at = (size_t)pick((int)n + 1);
      memmove(buf + at + k, buf + at, n - at);
      for (int i = 0; i < k; i++) buf[at + (size_t)i] = (uint8_t)next_u64();
      n += (size_t)k;
      break;
    }
    case 2: { /* delete bytes */
      size_t k = (size_t)(1 + pick(8)), at = (size_t)pick((int)n);
      if (k > n - at) k = n - at;
      memmove(buf + at, buf + at + k, n - at - k);
      n -= k;
      break;
    }
    default: { /* a 32-bit field (aligned or not) set to a boundary value */
      for (int i = 1 + pick(2); i > 0; i--) {
        size_t at = (size_t)pick((int)n - 4);
        if (pick(2)) at &= ~(size_t)3;
        uint32_t v = boundary[pick((int)(sizeof boundary / sizeof boundary[0]))];
        if (pick(4) == 0) v = (uint32_t)pick(40);
        for (int b = 0; b < 4; b++) buf[at + (size_t)b] = (uint8_t)(v >> (8 * b));
      }
      break;
    }
  }
  if (fix) gw_fix_crc(buf, n);
  exercise(buf, n);
}

static void test_fuzz(void) {
  size_t sizes[3];
  uint8_t *seeds[3] = {seed_chain(&sizes[0]), seed_gemm(&sizes[1]), seed_dag(&sizes[2])};
  size_t max = 0;
  for (int i = 0; i < 3; i++) max = sizes[i] > max ? sizes[i] : max;
  uint8_t *buf = malloc(max + 64);
  for (int i = 0; i < 3; i++) {
    /* The seeds themselves are valid (loaded here so that an injected
     * out-of-memory shows as the status it is). */
    nrt_graph_t g = NULL;
    CHECK_OK(nrt_graph_load(seeds[i], sizes[i], &g));
    nrt_graph_destroy(g);
    exercise(seeds[i], sizes[i]);
  }
  /* Every truncation, with the trailer as is and recomputed. */
  for (int i = 0; i < 3; i++)
    for (size_t len = 0; len < sizes[i]; len++) {
      memcpy(buf, seeds[i], len);
      exercise(buf, len);
      gw_fix_crc(buf, len);
      exercise(buf, len);
    }
#if defined(__SANITIZE_ADDRESS__)
  const double limit = 25.0;
#else
  const double limit = 4.0;
#endif
  const int iterations = 150000;
  double start = now_s();
  int done = 0;
  for (; done < iterations; done++) {
    int i = pick(3);
    mutate_and_run(seeds[i], sizes[i], buf);
    if ((done & 255) == 0 && now_s() - start > limit) break;
  }
  fprintf(stderr, "  %d mutations in %.1f s: %ld loaded, %ld refused\n", done, now_s() - start, loaded,
          refused);
  CHECK(loaded > 100 && refused > 1000);
  free(buf);
  for (int i = 0; i < 3; i++) free(seeds[i]);
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN(test_fuzz);
  return CHECK_MAIN_RESULT();
}
