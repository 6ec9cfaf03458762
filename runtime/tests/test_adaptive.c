/* Adaptive eager execution (neuronrt/adaptive_eager.h): programs of
 * pointwise ops queued behind a gate, so that the worker finds them all
 * queued and fuses them, compared byte for byte with the same programs run
 * with fusion off. Random programs mix dtypes, broadcasts, transposes,
 * in-place ops and partially overlapping views (which must end a run), and
 * hand ops over in equivalent forms (dims swapped or merged);
 * the fixed cases check the counters, dead-store elision of freed blocks
 * (and reuse of such a block by a later op of the same queue), a division
 * by zero inside a chain, and an event record ending a run.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gate.h"
#include "neuronrt/adaptive_eager.h"

#define N 128 /* tensors are N x N: RT_ADAPTIVE_MIN_NUMEL elements */
#define MAX_BUFS 6
#define MAX_OPS 40

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }

static nrt_stream_t stream;

/* A program: buffers (each N * N elements of one dtype and one spare row,
 * so that a view shifted by one element stays inside), their initial bytes,
 * and the ops over views of them. */
typedef struct program {
  int num_bufs, num_ops;
  void *dev[MAX_BUFS];
  nrt_dtype dtype[MAX_BUFS];
  unsigned char *init[MAX_BUFS];
  nrt_op ops[MAX_OPS];
} program;

static size_t buf_bytes(const program *p, int b) {
  return (size_t)(N * N + N) * nrt_dtype_size(p->dtype[b]);
}

static int add_buf(program *p, nrt_dtype t) {
  int b = p->num_bufs++;
  p->dtype[b] = t;
  CHECK_OK(nrt_malloc(0, buf_bytes(p, b), &p->dev[b]));
  p->init[b] = malloc(buf_bytes(p, b));
  unsigned char *bytes = p->init[b];
  for (size_t i = 0; i < buf_bytes(p, b); i++) bytes[i] = (unsigned char)next_u64();
  if (t == NRT_FLOAT32) /* ordinary values, not random bit patterns */
    for (int i = 0; i < N * N + N; i++) ((float *)bytes)[i] = (float)(pick(2001) - 1000) / 256.0f;
  if (t == NRT_BOOL)
    for (size_t i = 0; i < buf_bytes(p, b); i++) bytes[i] &= 1;
  if (t == NRT_INT32) /* small: the programs' products do not overflow */
    for (int i = 0; i < N * N + N; i++) ((int32_t *)bytes)[i] = pick(201) - 100;
  if (t == NRT_INT64)
    for (int i = 0; i < N * N + N; i++) ((int64_t *)bytes)[i] = pick(201) - 100;
  return b;
}

static void free_program(program *p) {
  for (int b = 0; b < p->num_bufs; b++) {
    nrt_free(p->dev[b]);
    free(p->init[b]);
  }
}

typedef enum layout { DENSE, SHIFTED, TRANSPOSED, ROW_BROADCAST, COL_BROADCAST } layout;

static nrt_tensor_view view_of(const program *p, int b, layout l) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.dtype = p->dtype[b];
  v.ndim = 2;
  v.shape[0] = v.shape[1] = N;
  v.data = p->dev[b];
  int64_t rs = N, cs = 1;
  if (l == SHIFTED) v.data = (char *)p->dev[b] + nrt_dtype_size(v.dtype);
  if (l == TRANSPOSED) rs = 1, cs = N;
  if (l == ROW_BROADCAST) rs = 0;
  if (l == COL_BROADCAST) cs = 0;
  v.strides[0] = rs, v.strides[1] = cs;
  return v;
}

static nrt_tensor_view immediate_of(nrt_dtype t) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.dtype = t;
  v.ndim = 2;
  v.shape[0] = v.shape[1] = N;
  return v;
}

static nrt_op *new_op(program *p, nrt_op_code code, nrt_dtype compute, int num_operands) {
  nrt_op *op = &p->ops[p->num_ops++];
  memset(op, 0, sizeof *op);
  op->code = code;
  op->compute_dtype = compute;
  op->num_operands = num_operands;
  op->num_outputs = 1;
  if (code == NRT_OP_ADD) {
    op->num_scalars = 1;
    op->scalars[0] = (nrt_scalar){.is_float = nrt_dtype_is_floating(compute), .f = 1, .i = 1};
  }
  return op;
}

static void binary(program *p, nrt_op_code code, nrt_dtype compute, nrt_tensor_view out,
                   nrt_tensor_view a, nrt_tensor_view b) {
  nrt_op *op = new_op(p, code, compute, 3);
  op->operands[0] = out, op->operands[1] = a, op->operands[2] = b;
}

static void with_immediate(program *p, nrt_op_code code, nrt_dtype compute, nrt_tensor_view out,
                           nrt_tensor_view a, double value) {
  nrt_op *op = new_op(p, code, compute, 3);
  op->operands[0] = out, op->operands[1] = a, op->operands[2] = immediate_of(compute);
  op->immediate_mask = 1u << 2;
  op->immediates[2] = (nrt_scalar){.is_float = nrt_dtype_is_floating(compute), .f = value,
                                   .i = (int64_t)value};
}

static void unary(program *p, nrt_op_code code, nrt_dtype compute, nrt_tensor_view out,
                  nrt_tensor_view x) {
  nrt_op *op = new_op(p, code, compute, 2);
  op->operands[0] = out, op->operands[1] = x;
}

/* Runs the program from its initial bytes, fused or not; returns the
 * stream's status and leaves the buffers' final bytes in out[b]. */
static nrt_status run(const program *p, int fused, unsigned char **out) {
  for (int b = 0; b < p->num_bufs; b++)
    memcpy(nrt_device_to_host(p->dev[b]), p->init[b], buf_bytes(p, b));
  nrt_adaptive_eager_set_enabled(fused);
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(stream, gate_wait, &g));
  for (int i = 0; i < p->num_ops; i++) CHECK_OK(nrt_launch(stream, &p->ops[i]));
  gate_open(&g);
  nrt_status s = nrt_stream_synchronize(stream);
  gate_destroy(&g);
  for (int b = 0; b < p->num_bufs; b++) {
    out[b] = malloc(buf_bytes(p, b));
    memcpy(out[b], nrt_device_to_host(p->dev[b]), buf_bytes(p, b));
  }
  nrt_adaptive_eager_set_enabled(1);
  return s;
}

/* Runs p both ways; checks equal bytes; returns the fused run's counters. */
static nrt_adaptive_eager_counters check_same(const program *p) {
  unsigned char *fused[MAX_BUFS], *plain[MAX_BUFS];
  nrt_adaptive_eager_counters before, after, off;
  nrt_adaptive_eager_get_counters(&before);
  CHECK_OK(run(p, 1, fused));
  nrt_adaptive_eager_get_counters(&after);
  CHECK_OK(run(p, 0, plain));
  nrt_adaptive_eager_get_counters(&off);
  CHECK(off.groups == after.groups); /* off means off */
  for (int b = 0; b < p->num_bufs; b++) {
    CHECK(memcmp(fused[b], plain[b], buf_bytes(p, b)) == 0);
    free(fused[b]);
    free(plain[b]);
  }
  return (nrt_adaptive_eager_counters){after.groups - before.groups,
                                       after.fused_ops - before.fused_ops,
                                       after.elided_writes - before.elided_writes};
}

static void test_a_chain_fuses_into_one_group(void) {
  program p = {0};
  int x = add_buf(&p, NRT_FLOAT32), t = add_buf(&p, NRT_FLOAT32), y = add_buf(&p, NRT_FLOAT32);
  nrt_tensor_view X = view_of(&p, x, DENSE), T = view_of(&p, t, DENSE), Y = view_of(&p, y, DENSE);
  with_immediate(&p, NRT_OP_MUL, NRT_FLOAT32, T, X, 1.5);
  with_immediate(&p, NRT_OP_ADD, NRT_FLOAT32, T, T, 0.25);
  unary(&p, NRT_OP_RELU, NRT_FLOAT32, T, T);
  binary(&p, NRT_OP_MUL, NRT_FLOAT32, T, T, T);
  unary(&p, NRT_OP_SIGMOID, NRT_FLOAT32, Y, T);
  binary(&p, NRT_OP_MAXIMUM, NRT_FLOAT32, Y, Y, X);
  unary(&p, NRT_OP_EXP, NRT_FLOAT32, T, Y);
  binary(&p, NRT_OP_ADD, NRT_FLOAT32, Y, T, Y);
  nrt_adaptive_eager_counters c = check_same(&p);
  CHECK(c.groups == 1);
  CHECK(c.fused_ops == 8);
  CHECK(c.elided_writes == 6); /* T written 5 times, Y 3 times: only the last of each stored */
  free_program(&p);
}

/* An in-place op then a strided read of the same buffer: the read
 * overlaps the written tensor in another layout, which ends the run. */
static void test_overlapping_views_end_the_run(void) {
  program p = {0};
  int x = add_buf(&p, NRT_FLOAT32), y = add_buf(&p, NRT_FLOAT32);
  nrt_tensor_view X = view_of(&p, x, DENSE), Y = view_of(&p, y, DENSE);
  with_immediate(&p, NRT_OP_ADD, NRT_FLOAT32, X, X, 1.0);
  binary(&p, NRT_OP_MUL, NRT_FLOAT32, Y, view_of(&p, x, TRANSPOSED), X);
  with_immediate(&p, NRT_OP_MUL, NRT_FLOAT32, view_of(&p, x, SHIFTED), Y, 2.0); /* partial */
  unary(&p, NRT_OP_NEG, NRT_FLOAT32, Y, X);
  nrt_adaptive_eager_counters c = check_same(&p);
  CHECK(c.fused_ops < 4);
  free_program(&p);
}

/* The same op in another form, as the shim may hand it over: its two dims
 * swapped, or (all operands dense or single values) one dim of N * N. */
static void relabel(nrt_op *op) {
  int flat = 1;
  for (int k = 0; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    int single = v->strides[0] == 0 && v->strides[1] == 0;
    flat &= single || (v->strides[0] == N && v->strides[1] == 1);
  }
  int how = pick(3);
  for (int k = 0; k < op->num_operands; k++) {
    nrt_tensor_view *v = &op->operands[k];
    if (how == 1) {
      int64_t s = v->strides[0];
      v->strides[0] = v->strides[1], v->strides[1] = s;
    } else if (how == 2 && flat) {
      v->ndim = 1;
      v->shape[0] = N * N;
      v->strides[0] = v->strides[1] ? 1 : 0;
    }
  }
}

/* Random programs over float32, bfloat16 and float16 buffers. */
static void test_random_programs_match_fusion_off(void) {
  static const nrt_op_code binaries[] = {NRT_OP_ADD, NRT_OP_MUL, NRT_OP_MAXIMUM, NRT_OP_DIV,
                                         NRT_OP_MINIMUM};
  static const nrt_op_code unaries[] = {NRT_OP_NEG, NRT_OP_RELU, NRT_OP_SIGMOID, NRT_OP_TANH,
                                        NRT_OP_EXP, NRT_OP_ABS, NRT_OP_COPY};
  static const nrt_dtype dtypes[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16};
  uint64_t ops = 0, fused = 0;
  for (int round = 0; round < 60; round++) {
    program p = {0};
    int nb = 3 + pick(3);
    for (int b = 0; b < nb; b++) add_buf(&p, dtypes[pick(3)]);
    int n = 2 + pick(MAX_OPS - 2);
    for (int i = 0; i < n; i++) {
      int out = pick(nb);
      /* Mostly dense outputs; some shifted or transposed (hazards). */
      layout out_layout = pick(8) == 0 ? SHIFTED : pick(8) == 0 ? TRANSPOSED : DENSE;
      nrt_tensor_view O = view_of(&p, out, out_layout);
      nrt_tensor_view A = view_of(&p, pick(nb), (layout)(pick(10) < 6 ? DENSE : pick(5)));
      nrt_tensor_view B = view_of(&p, pick(nb), (layout)(pick(10) < 6 ? DENSE : pick(5)));
      int is_float32 = A.dtype == NRT_FLOAT32 || B.dtype == NRT_FLOAT32;
      nrt_dtype compute = is_float32 ? NRT_FLOAT32 : A.dtype == B.dtype ? A.dtype : NRT_FLOAT32;
      int kind = pick(3);
      if (kind == 0) binary(&p, binaries[pick(5)], compute, O, A, B);
      else if (kind == 1) with_immediate(&p, binaries[pick(5)], compute, O, A, pick(9) - 4);
      else unary(&p, unaries[pick(7)], A.dtype, O, A);
      relabel(&p.ops[p.num_ops - 1]);
    }
    nrt_adaptive_eager_counters c = check_same(&p);
    ops += (uint64_t)n;
    fused += c.fused_ops;
    free_program(&p);
  }
  /* Hazards end runs, but most ops must still fuse. */
  CHECK(fused * 3 > ops);
  if (fused * 3 <= ops) fprintf(stderr, "  fused %llu of %llu ops\n", (unsigned long long)fused,
                                (unsigned long long)ops);
}

/* Integer and bool runs, with a division by zero that must run alone and
 * fail as that op, after the ops before it completed. */
static void test_integer_runs_and_a_division_by_zero(void) {
  program p = {0};
  int a = add_buf(&p, NRT_INT64), z = add_buf(&p, NRT_INT64), m = add_buf(&p, NRT_BOOL);
  int mask = add_buf(&p, NRT_BOOL);
  memset(p.init[z], 0, buf_bytes(&p, z));
  nrt_tensor_view A = view_of(&p, a, DENSE), Z = view_of(&p, z, DENSE), M = view_of(&p, m, DENSE);
  with_immediate(&p, NRT_OP_ADD, NRT_INT64, Z, Z, 3);
  binary(&p, NRT_OP_MUL, NRT_INT64, A, A, Z);
  binary(&p, NRT_OP_GT, NRT_INT64, M, A, Z);
  binary(&p, NRT_OP_LOGICAL_AND, NRT_BOOL, M, M, view_of(&p, mask, ROW_BROADCAST));
  nrt_adaptive_eager_counters c = check_same(&p);
  CHECK(c.groups == 1 && c.fused_ops == 4);

  /* Now divide by a zero buffer in the middle of the chain. */
  program q = {0};
  int x = add_buf(&q, NRT_INT32), zero = add_buf(&q, NRT_INT32), y = add_buf(&q, NRT_INT32);
  memset(q.init[zero], 0, buf_bytes(&q, zero));
  nrt_tensor_view X = view_of(&q, x, DENSE), Zero = view_of(&q, zero, DENSE),
                  Y = view_of(&q, y, DENSE);
  with_immediate(&q, NRT_OP_ADD, NRT_INT32, Y, X, 7);
  with_immediate(&q, NRT_OP_MUL, NRT_INT32, Y, Y, 3);
  binary(&q, NRT_OP_DIV_FLOOR, NRT_INT32, X, Y, Zero);
  with_immediate(&q, NRT_OP_ADD, NRT_INT32, Y, Y, 1);
  unsigned char *fused[MAX_BUFS], *plain[MAX_BUFS];
  char fused_message[1024];
  CHECK_STATUS(run(&q, 1, fused), NRT_ERROR_ARITHMETIC);
  snprintf(fused_message, sizeof fused_message, "%s", nrt_last_error());
  CHECK(strstr(fused_message, "div_floor") != NULL);
  CHECK_OK(nrt_stream_clear_error(stream));
  CHECK_STATUS(run(&q, 0, plain), NRT_ERROR_ARITHMETIC);
  CHECK(strcmp(fused_message, nrt_last_error()) == 0);
  CHECK_OK(nrt_stream_clear_error(stream));
  /* The ops before the failing one ran in full, either way. */
  CHECK(memcmp(fused[y], plain[y], buf_bytes(&q, y)) == 0);
  for (int b = 0; b < q.num_bufs; b++) free(fused[b]), free(plain[b]);
  free_program(&q);
  free_program(&p);
}

/* Tensors from the caching allocator, freed after their ops were queued:
 * their stores are elided; a block freed and handed to a later op of the
 * same queue gets that op's values. */
static void test_freed_intermediates_are_not_stored(void) {
  program p = {0};
  int x = add_buf(&p, NRT_FLOAT32), y = add_buf(&p, NRT_FLOAT32), w = add_buf(&p, NRT_FLOAT32);
  size_t bytes = (size_t)N * N * sizeof(float);
  unsigned char *expect[MAX_BUFS];
  nrt_tensor_view X = view_of(&p, x, DENSE), Y = view_of(&p, y, DENSE), W = view_of(&p, w, DENSE);
  for (int fused = 0; fused < 2; fused++) {
    for (int b = 0; b < p.num_bufs; b++)
      memcpy(nrt_device_to_host(p.dev[b]), p.init[b], buf_bytes(&p, b));
    nrt_adaptive_eager_set_enabled(fused);
    nrt_adaptive_eager_counters before, after;
    nrt_adaptive_eager_get_counters(&before);
    gate g;
    gate_init(&g);
    CHECK_OK(nrt_launch_host_func(stream, gate_wait, &g));
    void *t1, *t2, *t3;
    CHECK_OK(nrt_cache_alloc(stream, bytes, &t1));
    CHECK_OK(nrt_cache_alloc(stream, bytes, &t2));
    /* Stale values from the previous pass would hide a missing store. */
    memset(nrt_device_to_host(t1), 0xff, bytes);
    memset(nrt_device_to_host(t2), 0xff, bytes);
    nrt_tensor_view T1 = X, T2 = X;
    T1.data = t1, T2.data = t2;
    program q = p;
    q.num_ops = 0;
    with_immediate(&q, NRT_OP_MUL, NRT_FLOAT32, T1, X, 2.0);
    with_immediate(&q, NRT_OP_ADD, NRT_FLOAT32, T2, T1, 1.0);
    binary(&q, NRT_OP_MUL, NRT_FLOAT32, Y, T2, T1);
    for (int i = 0; i < q.num_ops; i++) CHECK_OK(nrt_launch(stream, &q.ops[i]));
    CHECK_OK(nrt_cache_free(t1));
    CHECK_OK(nrt_cache_free(t2));
    /* t3 likely receives t1's block, while t1's ops are still queued. */
    CHECK_OK(nrt_cache_alloc(stream, bytes, &t3));
    nrt_tensor_view T3 = X;
    T3.data = t3;
    q.num_ops = 0;
    with_immediate(&q, NRT_OP_ADD, NRT_FLOAT32, T3, Y, -3.0);
    binary(&q, NRT_OP_MUL, NRT_FLOAT32, W, T3, X);
    for (int i = 0; i < q.num_ops; i++) CHECK_OK(nrt_launch(stream, &q.ops[i]));
    gate_open(&g);
    CHECK_OK(nrt_stream_synchronize(stream));
    gate_destroy(&g);
    nrt_adaptive_eager_get_counters(&after);
    if (fused) {
      CHECK(after.groups - before.groups == 1 && after.fused_ops - before.fused_ops == 5);
      CHECK(after.elided_writes - before.elided_writes == 2); /* t1 and t2, not t3 */
      /* t3 is alive: it was stored. */
      CHECK(memcmp(nrt_device_to_host(t3), expect[MAX_BUFS - 1], bytes) == 0);
      for (int b = 0; b < p.num_bufs; b++) {
        CHECK(memcmp(nrt_device_to_host(p.dev[b]), expect[b], buf_bytes(&p, b)) == 0);
        free(expect[b]);
      }
      free(expect[MAX_BUFS - 1]);
    } else {
      for (int b = 0; b < p.num_bufs; b++) {
        expect[b] = malloc(buf_bytes(&p, b));
        memcpy(expect[b], nrt_device_to_host(p.dev[b]), buf_bytes(&p, b));
      }
      expect[MAX_BUFS - 1] = malloc(bytes);
      memcpy(expect[MAX_BUFS - 1], nrt_device_to_host(t3), bytes);
    }
    CHECK_OK(nrt_cache_free(t3));
  }
  nrt_adaptive_eager_set_enabled(1);
  free_program(&p);
}

/* An event record between two chains: they fuse separately. */
static void test_an_event_record_ends_a_run(void) {
  program p = {0};
  int x = add_buf(&p, NRT_FLOAT32), y = add_buf(&p, NRT_FLOAT32);
  nrt_tensor_view X = view_of(&p, x, DENSE), Y = view_of(&p, y, DENSE);
  with_immediate(&p, NRT_OP_MUL, NRT_FLOAT32, Y, X, 3.0);
  unary(&p, NRT_OP_TANH, NRT_FLOAT32, Y, Y);
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  nrt_adaptive_eager_counters before, after;
  nrt_adaptive_eager_get_counters(&before);
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(stream, gate_wait, &g));
  for (int i = 0; i < 2; i++) CHECK_OK(nrt_launch(stream, &p.ops[i]));
  CHECK_OK(nrt_event_record(e, stream));
  for (int i = 0; i < 2; i++) CHECK_OK(nrt_launch(stream, &p.ops[i]));
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(stream));
  gate_destroy(&g);
  nrt_adaptive_eager_get_counters(&after);
  CHECK(after.groups - before.groups == 2 && after.fused_ops - before.fused_ops == 4);
  CHECK(nrt_event_query(e) == NRT_SUCCESS);
  nrt_event_destroy(e);
  free_program(&p);
}

int main(void) {
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_stream_create(0, NRT_STREAM_PRIORITY_NORMAL, &stream));
  CHECK(nrt_adaptive_eager_enabled());
  test_a_chain_fuses_into_one_group();
  test_overlapping_views_end_the_run();
  test_random_programs_match_fusion_off();
  test_integer_runs_and_a_division_by_zero();
  test_freed_intermediates_are_not_stored();
  test_an_event_record_ends_a_run();
  CHECK_OK(nrt_stream_destroy(stream));
  return CHECK_MAIN_RESULT();
}
