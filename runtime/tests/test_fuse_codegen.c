/* Generated code per fused group (fuse/codegen.h, jit.c): for every op of
 * the tape's vocabulary, the generated kernel against the tape and the
 * tape's scalar twin, bitwise, on contiguous, strided, broadcast,
 * transposed, reversed, in-place and zero-size boxes, and across the
 * kernel threads; the disk cache (hits, a garbled or truncated entry is
 * recompiled), and the fallbacks: no compiler, a failing compiler, an
 * unusable cache directory, TORCHNEURON_DISK_CACHE=0, TORCHNEURON_CODEGEN=0.
 * The cache is a temporary directory, removed at the end.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "fuse/codegen.h"
#include "fuse/fuse_group.h"
#include "neuronrt/fuse.h"
#include "neuronrt/graph.h"
#include "neuronrt/metrics.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Ordinary values with some specials. */
static float random_value(void) {
  uint64_t r = next_u64();
  switch (r % 40) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0f;
    case 4: return -0.0f;
    case 5: return 1e-40f;
    case 6: return 95.0f;
    default: return (float)((double)((r >> 8) % 40001) - 20000.0) / 2000.0f;
  }
}

static const nrt_op_code unary_ops[] = {
    NRT_OP_NEG,     NRT_OP_ABS,  NRT_OP_RELU,  NRT_OP_HARDTANH, NRT_OP_LEAKY_RELU,   NRT_OP_EXP,
    NRT_OP_LOG,     NRT_OP_TANH, NRT_OP_ERF,   NRT_OP_SIGMOID,  NRT_OP_SQRT,         NRT_OP_RSQRT,
    NRT_OP_RECIPROCAL, NRT_OP_GELU, NRT_OP_GELU_TANH, NRT_OP_SILU};
static const nrt_op_code binary_ops[] = {
    NRT_OP_ADD,          NRT_OP_MUL,           NRT_OP_DIV,           NRT_OP_MAXIMUM,
    NRT_OP_MINIMUM,      NRT_OP_SIGMOID_BACKWARD, NRT_OP_TANH_BACKWARD, NRT_OP_THRESHOLD_BACKWARD,
    NRT_OP_SILU_BACKWARD, NRT_OP_GELU_BACKWARD};

typedef struct desc {
  int32_t num_inputs, num_registers, num_insts, num_outputs;
  nrt_dtype inputs[NRT_FUSE_MAX_INPUTS];
  nrt_dtype registers[NRT_FUSE_MAX_REGISTERS];
  nrt_fuse_inst insts[NRT_FUSE_MAX_INSTS];
  int32_t outputs[NRT_FUSE_MAX_OUTPUTS];
} desc;

static nrt_fuse_ref input_ref(int k) { return (nrt_fuse_ref){.kind = NRT_FUSE_INPUT, .index = k}; }
static nrt_fuse_ref reg_ref(int r) { return (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = r}; }
static nrt_fuse_ref imm_ref(double v) {
  return (nrt_fuse_ref){.kind = NRT_FUSE_IMMEDIATE, .dtype = NRT_FLOAT64, .value = {.is_float = 1, .f = v}};
}

/* Appends op code over a (and b for a binary op) into a new register. */
static int add_inst(desc *d, nrt_op_code code, nrt_fuse_ref a, const nrt_fuse_ref *b) {
  nrt_fuse_inst *in = &d->insts[d->num_insts++];
  memset(in, 0, sizeof *in);
  in->code = code;
  in->compute_dtype = NRT_FLOAT32;
  in->num_outputs = 1;
  in->num_operands = b ? 3 : 2;
  in->operands[1] = a;
  if (b) in->operands[2] = *b;
  if (code == NRT_OP_ADD) {
    in->num_scalars = 1;
    in->scalars[0] = (nrt_scalar){.is_float = 1, .f = 0.5};
  } else if (code == NRT_OP_THRESHOLD_BACKWARD) {
    in->num_scalars = 1;
    in->scalars[0] = (nrt_scalar){.is_float = 1, .f = 0.25};
  } else if (code == NRT_OP_LEAKY_RELU) {
    in->num_scalars = 1;
    in->scalars[0] = (nrt_scalar){.is_float = 1, .f = 0.01};
  } else if (code == NRT_OP_HARDTANH) {
    in->num_scalars = 2;
    in->scalars[0] = (nrt_scalar){.is_float = 0, .i = -1};
    in->scalars[1] = (nrt_scalar){.is_float = 1, .f = 2.5};
  }
  int r = d->num_registers++;
  d->registers[r] = NRT_FLOAT32;
  in->operands[0] = reg_ref(r);
  return r;
}

static struct nrt_fuse_group *build(const desc *d, const char *name) {
  struct nrt_fuse_group *g = calloc(1, sizeof *g);
  rt_fuse_tape_for(g, d->num_inputs, d->inputs, d->num_registers, d->registers, d->num_insts, d->insts,
                   d->num_outputs, d->outputs);
  snprintf(g->name, sizeof g->name, "%s", name);
  return g;
}

/* Every unary op of the vocabulary on input 0, each an output. */
static void unary_group(desc *d) {
  memset(d, 0, sizeof *d);
  d->num_inputs = 1;
  d->inputs[0] = NRT_FLOAT32;
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
    d->outputs[d->num_outputs++] = add_inst(d, unary_ops[i], input_ref(0), NULL);
}

/* Every binary op on inputs 0 and 1, a copy, and immediates. */
static void binary_group(desc *d) {
  memset(d, 0, sizeof *d);
  d->num_inputs = 2;
  d->inputs[0] = d->inputs[1] = NRT_FLOAT32;
  nrt_fuse_ref b = input_ref(1), imm = imm_ref(0.1), imm2 = imm_ref(-3.0);
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
    d->outputs[d->num_outputs++] = add_inst(d, binary_ops[i], input_ref(0), &b);
  d->outputs[d->num_outputs++] = add_inst(d, NRT_OP_COPY, input_ref(1), NULL);
  d->outputs[d->num_outputs++] = add_inst(d, NRT_OP_MUL, input_ref(0), &imm);
  nrt_fuse_ref r = reg_ref(d->outputs[d->num_outputs - 1]);
  d->outputs[d->num_outputs++] = add_inst(d, NRT_OP_MAXIMUM, imm2, &r);
}

/* The benchmark's kind of chain: 8 ops, values reused, two outputs, and a
 * third input read late. */
static void chain_group(desc *d) {
  memset(d, 0, sizeof *d);
  d->num_inputs = 3;
  d->inputs[0] = d->inputs[1] = d->inputs[2] = NRT_FLOAT32;
  nrt_fuse_ref b = input_ref(1), c = input_ref(2), half = imm_ref(0.5);
  int r0 = add_inst(d, NRT_OP_MUL, input_ref(0), &b);
  nrt_fuse_ref r = reg_ref(r0);
  int r1 = add_inst(d, NRT_OP_ADD, r, &half);
  int r2 = add_inst(d, NRT_OP_SIGMOID, reg_ref(r1), NULL);
  nrt_fuse_ref x2 = reg_ref(r2);
  int r3 = add_inst(d, NRT_OP_MUL, reg_ref(r1), &x2);
  int r4 = add_inst(d, NRT_OP_TANH, reg_ref(r3), NULL);
  nrt_fuse_ref x4 = reg_ref(r4);
  int r5 = add_inst(d, NRT_OP_ADD, reg_ref(r0), &x4);
  int r6 = add_inst(d, NRT_OP_MAXIMUM, reg_ref(r5), &c);
  nrt_fuse_ref x6 = reg_ref(r6);
  int r7 = add_inst(d, NRT_OP_DIV, reg_ref(r5), &x6);
  d->outputs[d->num_outputs++] = r7;
  d->outputs[d->num_outputs++] = r2;
}

/* ---- boxes --------------------------------------------------------------------------- */

/* A tensor of a box: an arena and the element (0, 0) in it. */
typedef struct tensor {
  float *arena, *pristine;
  int64_t len, base, rs, cs;
} tensor;

static void tensor_make(tensor *t, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  int64_t lo = 0, hi = 0;
  int64_t corners[4] = {0, (rows - 1) * rs, (cols - 1) * cs, (rows - 1) * rs + (cols - 1) * cs};
  for (int i = 0; i < 4; i++) {
    if (corners[i] < lo) lo = corners[i];
    if (corners[i] > hi) hi = corners[i];
  }
  t->len = hi - lo + 1 + 8;
  t->base = -lo + 4;
  t->rs = rs;
  t->cs = cs;
  t->arena = malloc((size_t)t->len * sizeof(float));
  t->pristine = malloc((size_t)t->len * sizeof(float));
  for (int64_t e = 0; e < t->len; e++) t->pristine[e] = random_value();
}

static void tensor_free(tensor *t) {
  free(t->arena);
  free(t->pristine);
}

static int same_bits(const float *a, const float *b, int64_t n, const char *what) {
  for (int64_t e = 0; e < n; e++) {
    uint32_t x, y;
    memcpy(&x, &a[e], 4);
    memcpy(&y, &b[e], 4);
    if (x != y && !(a[e] != a[e] && b[e] != b[e])) {
      fprintf(stderr, "  %s: element %lld: %08x against %08x\n", what, (long long)e, x, y);
      return 0;
    }
  }
  return 1;
}

enum { RUN_TAPE, RUN_GEN, RUN_REFERENCE };

/* Runs g over a box of its tensors one way; outputs' arenas copied to
 * saved[j]. in_place: output 0 is input 0's arena and layout. */
static void run_box(struct nrt_fuse_group *g, int how, int64_t rows, int64_t cols, tensor *ins, tensor *outs,
                    int in_place, float **saved) {
  for (int k = 0; k < g->num_inputs; k++) memcpy(ins[k].arena, ins[k].pristine, (size_t)ins[k].len * 4);
  for (int j = 0; j < g->num_outputs; j++) memset(outs[j].arena, 0xa5, (size_t)outs[j].len * 4);
  rt_fuse_box b = {.rows = rows, .cols = cols};
  for (int k = 0; k < g->num_inputs; k++) {
    b.in[k] = (char *)(ins[k].arena + ins[k].base);
    b.in_rs[k] = ins[k].rs, b.in_cs[k] = ins[k].cs;
  }
  for (int j = 0; j < g->num_outputs; j++) {
    tensor *o = in_place && j == 0 ? &ins[0] : &outs[j];
    b.out[j] = (char *)(o->arena + o->base);
    b.out_rs[j] = o->rs, b.out_cs[j] = o->cs;
  }
  char *scratch = aligned_alloc(64, (rt_fuse_tape_scratch_bytes(&g->tape) + 63) & ~(size_t)63);
  if (how == RUN_TAPE) rt_fuse_tape_run(g, &b, scratch);
  else if (how == RUN_GEN) rt_fuse_codegen_run(g, &b, scratch);
  else if (rows > 0 && cols > 0) rt_fuse_tape_run_reference(g, &b);
  free(scratch);
  for (int j = 0; j < g->num_outputs; j++) {
    tensor *o = in_place && j == 0 ? &ins[0] : &outs[j];
    memcpy(saved[j], o->arena, (size_t)o->len * 4);
  }
}

typedef struct layout {
  const char *name;
  int64_t rows, cols;
  int64_t in_rs[3], in_cs[3]; /* 0, 0: contiguous */
  int64_t out_rs, out_cs;     /* 0, 0: contiguous */
  int in_place;
} layout;

static const layout layouts[] = {
    {"contiguous", 5, 777, {0}, {0}, 0, 0, 0},
    {"one long row", 1, 5000, {0}, {0}, 0, 0, 0},
    {"strided inputs, padded output rows", 7, 300, {901, 1001, 2}, {3, 3, -1}, 310, 1, 0},
    {"broadcast: a value per row, a row for all", 9, 260, {1, 0, 0}, {0, 1, 0}, 0, 0, 0},
    {"transposed output", 33, 70, {0}, {0}, 1, 33, 0},
    {"one column", 300, 1, {0}, {0}, 0, 0, 0},
    {"in place", 6, 513, {0}, {0}, 0, 0, 1},
    {"in place, strided", 4, 300, {700, 0}, {2, 0}, 0, 0, 1},
    {"zero size", 0, 100, {0}, {0}, 0, 0, 0},
};

/* g with kernel k, on every layout: generated == tape == scalar twin. */
static void check_layouts(struct nrt_fuse_group *g, const rt_gen_kernel *k, const char *what) {
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    const layout *L = &layouts[l];
    tensor ins[NRT_FUSE_MAX_INPUTS], outs[NRT_FUSE_MAX_OUTPUTS];
    int64_t rows = L->rows ? L->rows : 1;
    for (int i = 0; i < g->num_inputs; i++) {
      int64_t rs = L->in_rs[i < 3 ? i : 0], cs = L->in_cs[i < 3 ? i : 0];
      if (!rs && !cs) rs = L->cols, cs = 1;
      if (L->in_place && i == 0) rs = L->in_rs[0] ? L->in_rs[0] : L->cols, cs = L->in_cs[0] ? L->in_cs[0] : 1;
      tensor_make(&ins[i], rows, L->cols, rs, cs);
    }
    for (int j = 0; j < g->num_outputs; j++)
      tensor_make(&outs[j], rows, L->cols, L->out_rs || L->out_cs ? L->out_rs : L->cols,
                  L->out_rs || L->out_cs ? L->out_cs : 1);
    float *saved[3][NRT_FUSE_MAX_OUTPUTS];
    for (int how = 0; how < 3; how++)
      for (int j = 0; j < g->num_outputs; j++) {
        tensor *o = L->in_place && j == 0 ? &ins[0] : &outs[j];
        saved[how][j] = malloc((size_t)o->len * 4);
      }
    g->gen = k;
    for (int how = 0; how < 3; how++) run_box(g, how, L->rows, L->cols, ins, outs, L->in_place, saved[how]);
    for (int j = 0; j < g->num_outputs; j++) {
      int64_t len = L->in_place && j == 0 ? ins[0].len : outs[j].len;
      char label[256];
      snprintf(label, sizeof label, "%s, %s, output %d, generated against tape", what, L->name, j);
      CHECK(same_bits(saved[RUN_GEN][j], saved[RUN_TAPE][j], len, label));
      snprintf(label, sizeof label, "%s, %s, output %d, generated against the scalar twin", what, L->name, j);
      CHECK(same_bits(saved[RUN_GEN][j], saved[RUN_REFERENCE][j], len, label));
    }
    for (int how = 0; how < 3; how++)
      for (int j = 0; j < g->num_outputs; j++) free(saved[how][j]);
    for (int i = 0; i < g->num_inputs; i++) tensor_free(&ins[i]);
    for (int j = 0; j < g->num_outputs; j++) tensor_free(&outs[j]);
  }
}

static char cache_root[256];

static void fresh_cache(void) {
  snprintf(cache_root, sizeof cache_root, "/tmp/tn-codegen-test-XXXXXX");
  CHECK(mkdtemp(cache_root) != NULL);
  setenv("TORCHNEURON_CACHE_DIR", cache_root, 1);
}

static void remove_cache(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", cache_root, cache_root);
  CHECK(system(cmd) == 0);
}

/* The one entry of the cache directory (there is one kernel in it). */
static int entry_path(char *path, size_t len) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s/kernels/*.so 2>/dev/null | head -1", cache_root);
  FILE *p = popen(cmd, "r");
  if (!p) return 0;
  int ok = fgets(path, (int)len, p) != NULL;
  pclose(p);
  if (ok) path[strcspn(path, "\n")] = 0;
  return ok && *path;
}

static uint64_t metric(nrt_metric m) { return nrt_metric_value(m); }

static void test_every_op_matches_the_tape_bitwise(void) {
  fresh_cache();
  desc d;
  void (*makers[3])(desc *) = {unary_group, binary_group, chain_group};
  const char *names[3] = {"unary ops", "binary ops", "chain"};
  for (int m = 0; m < 3; m++) {
    makers[m](&d);
    struct nrt_fuse_group *g = build(&d, names[m]);
    CHECK(g->tape.num_ops == d.num_insts);
    uint64_t kernels = metric(NRT_METRIC_FUSE_CODEGEN_KERNELS);
    const rt_gen_kernel *k = rt_fuse_codegen_get(g);
    CHECK(k != NULL);
    CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels + 1);
    if (k) {
      CHECK(rt_fuse_codegen_match(k, g) == k);
      CHECK(rt_fuse_codegen_get(g) == k); /* this process's kernels */
      CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels + 1);
      check_layouts(g, k, names[m]);
    }
    free(g);
  }
  remove_cache();
}

/* A group through the VM on the kernel threads (many tiles). */
static void test_threads_through_the_vm(void) {
  fresh_cache();
  desc d;
  chain_group(&d);
  int64_t shape[2] = {1024, 1000}, n = shape[0] * shape[1];
  nrt_tensor_view ins[3], outs[2];
  for (int k = 0; k < 5; k++) {
    nrt_tensor_view *v = k < 3 ? &ins[k] : &outs[k - 3];
    memset(v, 0, sizeof *v);
    v->dtype = NRT_FLOAT32;
    v->ndim = 2;
    v->shape[0] = shape[0], v->shape[1] = shape[1];
    v->strides[0] = shape[1], v->strides[1] = 1;
    CHECK_OK(nrt_malloc(0, (size_t)n * 4, &v->data));
    float *h = nrt_device_to_host(v->data);
    for (int64_t e = 0; e < n; e++) h[e] = random_value();
  }
  nrt_fuse_group_desc fd = {.ndim = 2, .num_inputs = 3, .inputs = ins, .num_registers = d.num_registers,
                            .registers = d.registers, .num_insts = d.num_insts, .insts = d.insts,
                            .num_outputs = 2, .outputs = outs, .output_registers = d.outputs};
  memcpy(fd.shape, shape, sizeof shape);
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&fd, &g));
  const rt_gen_kernel *k = rt_fuse_codegen_get(g);
  CHECK(k != NULL);
  float *tape_out[2];
  for (int j = 0; j < 2; j++) tape_out[j] = malloc((size_t)n * 4);
  CHECK_OK(nrt_fuse_group_execute(g)); /* the tape (gen NULL) */
  for (int j = 0; j < 2; j++) memcpy(tape_out[j], nrt_device_to_host(outs[j].data), (size_t)n * 4);
  for (int j = 0; j < 2; j++) memset(nrt_device_to_host(outs[j].data), 0, (size_t)n * 4);
  g->gen = rt_fuse_codegen_match(k, g);
  CHECK(g->gen == k);
  uint64_t runs = metric(NRT_METRIC_FUSE_CODEGEN_RUNS);
  CHECK_OK(nrt_fuse_group_execute(g));
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_RUNS) == runs + 1);
  for (int j = 0; j < 2; j++) CHECK(same_bits(nrt_device_to_host(outs[j].data), tape_out[j], n, "threads"));
  nrt_fuse_group_destroy(g);
  for (int j = 0; j < 2; j++) free(tape_out[j]);
  for (int k2 = 0; k2 < 3; k2++) nrt_free(ins[k2].data);
  for (int j = 0; j < 2; j++) nrt_free(outs[j].data);
  remove_cache();
}

/* Overwrites the entry: garbled in the middle, or truncated to len. */
static void damage(const char *path, int how) {
  struct stat st;
  CHECK(stat(path, &st) == 0);
  if (how == 0) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, st.st_size / 2, SEEK_SET);
    for (int i = 0; i < 64; i++) fputc((int)(next_u64() & 0xff), f);
    fclose(f);
  } else {
    CHECK(truncate(path, how == 1 ? st.st_size / 2 : how == 2 ? 10 : st.st_size - 1) == 0);
  }
}

static void test_disk_cache_and_damaged_entries(void) {
  fresh_cache();
  desc d;
  chain_group(&d);
  struct nrt_fuse_group *g = build(&d, "chain");
  rt_fuse_codegen_forget();
  const rt_gen_kernel *k = rt_fuse_codegen_get(g);
  CHECK(k != NULL);
  char path[512];
  CHECK(entry_path(path, sizeof path));
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/kernels", cache_root);
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  /* A new process's view: the entry from disk, not compiled. */
  rt_fuse_codegen_forget();
  uint64_t hits = metric(NRT_METRIC_FUSE_CODEGEN_CACHE_HITS), kernels = metric(NRT_METRIC_FUSE_CODEGEN_KERNELS);
  k = rt_fuse_codegen_get(g);
  CHECK(k != NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_CACHE_HITS) == hits + 1);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels);
  /* Garbled, truncated to half, to 10 bytes, by one byte: recompiled. */
  for (int how = 0; how < 4; how++) {
    damage(path, how);
    rt_fuse_codegen_forget();
    kernels = metric(NRT_METRIC_FUSE_CODEGEN_KERNELS);
    k = rt_fuse_codegen_get(g);
    CHECK(k != NULL);
    CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels + 1);
    if (k) check_layouts(g, k, "recompiled");
  }
  /* Random garbage of the right size. */
  CHECK(stat(path, &st) == 0);
  FILE *f = fopen(path, "wb");
  for (off_t i = 0; f && i < st.st_size; i++) fputc((int)(next_u64() & 0xff), f);
  if (f) fclose(f);
  rt_fuse_codegen_forget();
  kernels = metric(NRT_METRIC_FUSE_CODEGEN_KERNELS);
  CHECK(rt_fuse_codegen_get(g) != NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels + 1);
  free(g);
  remove_cache();
}

static void expect_fallback(struct nrt_fuse_group *g, const char *what) {
  rt_fuse_codegen_forget();
  uint64_t fallbacks = metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS);
  const rt_gen_kernel *k = rt_fuse_codegen_get(g);
  CHECK(k == NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS) == fallbacks + 1);
  if (k) fprintf(stderr, "  %s: expected no kernel\n", what);
  /* The tape still runs (the layouts' tape and twin agree; gen NULL). */
}

static void test_failures_fall_back_to_the_tape(void) {
  desc d;
  chain_group(&d);
  struct nrt_fuse_group *g = build(&d, "chain");
  fresh_cache();
  setenv("TORCHNEURON_CC", "/bin/false", 1);
  expect_fallback(g, "a failing compiler");
  setenv("TORCHNEURON_CC", "/nonexistent/cc", 1);
  expect_fallback(g, "no compiler");
  setenv("TORCHNEURON_CC", "true", 1); /* succeeds, writes nothing */
  expect_fallback(g, "a compiler that writes nothing");
  unsetenv("TORCHNEURON_CC");
  char path[512];
  CHECK(!entry_path(path, sizeof path)); /* nothing cached by failures */
  /* A cache directory of another owner, or writable by others: unused. */
  char dir[600];
  snprintf(dir, sizeof dir, "%s/kernels", cache_root);
  CHECK(chmod(dir, 0777) == 0);
  expect_fallback(g, "a cache directory others can write");
  CHECK(chmod(dir, 0700) == 0);
  if (geteuid() == 0) {
    /* root writes anywhere: a read-only directory is tried by its owner. */
    CHECK(chown(dir, 65534, 65534) == 0);
    expect_fallback(g, "a cache directory of another user");
    CHECK(chown(dir, 0, 0) == 0);
  } else {
    CHECK(chmod(dir, 0500) == 0);
    expect_fallback(g, "a read-only cache directory");
    CHECK(chmod(dir, 0700) == 0);
  }
  /* TORCHNEURON_CODEGEN=0: no kernel, not a fallback. */
  setenv("TORCHNEURON_CODEGEN", "0", 1);
  rt_fuse_codegen_forget();
  uint64_t fallbacks = metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS);
  CHECK(rt_fuse_codegen_get(g) == NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS) == fallbacks);
  unsetenv("TORCHNEURON_CODEGEN");
  /* TORCHNEURON_DISK_CACHE=0: compiled, loaded, nothing left on disk. */
  setenv("TORCHNEURON_DISK_CACHE", "0", 1);
  const rt_gen_kernel *k = rt_fuse_codegen_get(g);
  CHECK(k != NULL);
  CHECK(!entry_path(path, sizeof path));
  unsetenv("TORCHNEURON_DISK_CACHE");
  /* A kernel of another tape does not match. */
  desc other;
  unary_group(&other);
  struct nrt_fuse_group *g2 = build(&other, "unary");
  fallbacks = metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS);
  CHECK(rt_fuse_codegen_match(k, g2) == NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS) == fallbacks + 1);
  CHECK(rt_fuse_codegen_match(NULL, g2) == NULL);
  free(g2);
  free(g);
  remove_cache();
}

/* The background compile (codegen_async.c): a miss is queued and the cell
 * stays empty until the worker publishes the kernel; a readers' thread
 * polling the cell meanwhile sees NULL or the whole kernel (it runs it);
 * a hit in this process or on disk fills the cell at once; a failing
 * compiler leaves the cell empty, counted. */
typedef struct reader {
  rt_gen_cell *cell;
  const struct nrt_fuse_group *g;
  atomic_int stop;
  int saw_null, saw_kernel, bad;
} reader;

static void *read_cell(void *arg) {
  reader *r = arg;
  float in[3][8], o[2][8];
  for (int i = 0; i < 3; i++)
    for (int e = 0; e < 8; e++) in[i][e] = (float)(e - 3) * 0.5f;
  const float *ip[3] = {in[0], in[1], in[2]};
  float *op[2] = {o[0], o[1]};
  while (!atomic_load(&r->stop)) {
    const rt_gen_kernel *k = rt_gen_cell_kernel(r->cell);
    if (!k) {
      r->saw_null = 1;
      continue;
    }
    r->saw_kernel = 1;
    if (rt_fuse_codegen_match(k, r->g) != k) r->bad = 1;
    k->fn(8, ip, op); /* a half-made kernel would crash here */
    break;
  }
  return NULL;
}

static void test_background_compile(void) {
  fresh_cache();
  desc d;
  chain_group(&d);
  struct nrt_fuse_group *g = build(&d, "chain");
  rt_fuse_codegen_forget();
  uint64_t queued = metric(NRT_METRIC_FUSE_CODEGEN_BACKGROUND), kernels = metric(NRT_METRIC_FUSE_CODEGEN_KERNELS);
  rt_gen_cell *cell = rt_gen_cell_new();
  CHECK(cell != NULL);
  reader r = {.cell = cell, .g = g};
  atomic_init(&r.stop, 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, read_cell, &r) == 0);
  rt_fuse_codegen_request(g, cell);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_BACKGROUND) == queued + 1);
  CHECK(nrt_program_wait_for_kernels(240) == 0);
  CHECK(rt_fuse_codegen_pending() == 0 && metric(NRT_METRIC_FUSE_CODEGEN_PENDING) == 0);
  const rt_gen_kernel *k = rt_gen_cell_kernel(cell);
  CHECK(k != NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_KERNELS) == kernels + 1);
  atomic_store(&r.stop, 1);
  pthread_join(t, NULL);
  CHECK(!r.bad);
  if (k) check_layouts(g, k, "background");
  /* This process has it: set at once, nothing queued. */
  rt_gen_cell *again = rt_gen_cell_new();
  rt_fuse_codegen_request(g, again);
  CHECK(rt_gen_cell_kernel(again) == k);
  /* A new process's view: from the disk cache at once. */
  rt_fuse_codegen_forget();
  uint64_t hits = metric(NRT_METRIC_FUSE_CODEGEN_CACHE_HITS);
  rt_gen_cell *disk = rt_gen_cell_new();
  rt_fuse_codegen_request(g, disk);
  CHECK(rt_gen_cell_kernel(disk) != NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_CACHE_HITS) == hits + 1);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_BACKGROUND) == queued + 1);
  /* The program may go first: its reference released while queued. */
  rt_fuse_codegen_forget();
  remove_cache();
  fresh_cache();
  rt_gen_cell *orphan = rt_gen_cell_new();
  rt_fuse_codegen_request(g, orphan);
  rt_gen_cell_release(orphan);
  CHECK(nrt_program_wait_for_kernels(240) == 0);
  /* A failing compiler: the cell stays empty, counted. */
  rt_fuse_codegen_forget();
  setenv("TORCHNEURON_CC", "/bin/false", 1);
  uint64_t fallbacks = metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS);
  rt_gen_cell *failing = rt_gen_cell_new();
  rt_fuse_codegen_request(g, failing);
  CHECK(nrt_program_wait_for_kernels(240) == 0);
  CHECK(rt_gen_cell_kernel(failing) == NULL);
  CHECK(metric(NRT_METRIC_FUSE_CODEGEN_FALLBACKS) == fallbacks + 1);
  unsetenv("TORCHNEURON_CC");
  /* The wait's timeout: nothing pending returns at once. */
  CHECK(nrt_program_wait_for_kernels(0) == 0);
  rt_gen_cell_release(cell);
  rt_gen_cell_release(again);
  rt_gen_cell_release(disk);
  rt_gen_cell_release(failing);
  free(g);
  remove_cache();
}

/* The tame twins of sigmoid, GELU and SiLU (codegen.c and the tape's
 * tame_block: blocks whose every value has |x| <= the bound, 86, 13, 86,
 * skip the clamps, the NaN select and the split scaling): the generated
 * code and the tape bitwise the scalar twin (the general expressions) over
 * a sweep of every sign and exponent of the domain, its edges, and blocks
 * with one value outside it (the bound plus an ulp, NaN, an infinity)
 * among tame ones; the op of an input and of a computed value. */
static void test_tame_twins_match_bitwise(void) {
  static const struct {
    nrt_op_code code;
    const char *twin, *what;
    float top;
  } ops[] = {{NRT_OP_SIGMOID, "rt_vm_sigmoidf_tame(x)", "tame sigmoid", 86.0f},
             {NRT_OP_GELU, "rt_vm_geluf_tame(x)", "tame gelu", 13.0f},
             {NRT_OP_SILU, "rt_vm_siluf_tame(x)", "tame silu", 86.0f}};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    fresh_cache();
    desc d;
    memset(&d, 0, sizeof d);
    d.num_inputs = 1;
    d.inputs[0] = NRT_FLOAT32;
    d.outputs[d.num_outputs++] = add_inst(&d, ops[o].code, input_ref(0), NULL);
    nrt_fuse_ref b = input_ref(0);
    int r = add_inst(&d, NRT_OP_MUL, input_ref(0), &b); /* x * x, then the op of it */
    d.outputs[d.num_outputs++] = add_inst(&d, ops[o].code, reg_ref(r), NULL);
    struct nrt_fuse_group *g = build(&d, ops[o].what);
    char *src = rt_fuse_codegen_source(g, "tn_probe");
    CHECK(src && strstr(src, ops[o].twin) && strstr(src, "big0"));
    free(src);
    const rt_gen_kernel *k = rt_fuse_codegen_get(g);
    CHECK(k != NULL);
    const float top = ops[o].top;
    uint32_t top_bits;
    memcpy(&top_bits, &top, 4);
    const int64_t step = 2053, sweep = (int64_t)(top_bits / step) + 1;
    const float edges[] = {top, -top, nextafterf(top, 0.0f), -nextafterf(top, 0.0f), 9.2736185f,
                           -9.2736185f, 0.0f, -0.0f, 1e-45f, -1e-45f, 1.1754944e-38f, 0.5f, -0.5f, 1.0f};
    const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]);
    const int64_t n = 2 * sweep + ne + 4 * 256;
    float *x = malloc((size_t)n * 4), *want[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)},
          *got[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
    int64_t at = 0;
    for (int64_t i = 0; i < sweep; i++) {
      uint32_t u = (uint32_t)(i * step);
      if (u > top_bits) u = top_bits;
      memcpy(&x[at++], &u, 4);
      u |= 0x80000000u;
      memcpy(&x[at++], &u, 4);
    }
    for (int64_t i = 0; i < ne; i++) x[at++] = edges[i];
    /* tame blocks (x * x too for GELU's |x| <= 3.6), then the wild values */
    while (at < n) x[at] = (float)((at % 1700) - 850) / 850.0f * (o == 1 ? 3.6f : top), at++;
    const float wild[] = {nextafterf(top, 100.0f), -nextafterf(top, 100.0f), NAN, -INFINITY, 1e30f};
    for (int i = 0; i < 5; i++) x[n - 4 * 256 + 100 + 200 * i] = wild[i];
    rt_fuse_box box = {.rows = 1, .cols = n};
    box.in[0] = (char *)x, box.in_rs[0] = n, box.in_cs[0] = 1;
    for (int j = 0; j < 2; j++) box.out[j] = (char *)want[j], box.out_rs[j] = n, box.out_cs[j] = 1;
    rt_fuse_tape_run_reference(g, &box);
    char what[64];
    for (int how = 0; how < 2; how++) {
      if (how == 1 && !k) continue;
      for (int j = 0; j < 2; j++) box.out[j] = (char *)got[j], memset(got[j], 0xa5, (size_t)n * 4);
      if (how == 0) {
        char *scratch = aligned_alloc(64, (rt_fuse_tape_scratch_bytes(&g->tape) + 63) & ~(size_t)63);
        rt_fuse_tape_run(g, &box, scratch);
        free(scratch);
      } else {
        const float *in[1] = {x};
        float *out[2] = {got[0], got[1]};
        k->fn(n, in, out);
      }
      snprintf(what, sizeof what, "%s (%s) of an input", ops[o].what, how ? "generated" : "tape");
      CHECK(same_bits(got[0], want[0], n, what));
      snprintf(what, sizeof what, "%s (%s) of a computed value", ops[o].what, how ? "generated" : "tape");
      CHECK(same_bits(got[1], want[1], n, what));
    }
    if (k) check_layouts(g, k, ops[o].what);
    free(x);
    for (int j = 0; j < 2; j++) free(want[j]), free(got[j]);
    free(g);
    remove_cache();
  }
}

int main(void) {
  unsetenv("TORCHNEURON_CC");
  unsetenv("TORCHNEURON_CODEGEN");
  unsetenv("TORCHNEURON_DISK_CACHE");
  RUN(test_every_op_matches_the_tape_bitwise);
  RUN(test_tame_twins_match_bitwise);
  RUN(test_threads_through_the_vm);
  RUN(test_disk_cache_and_damaged_entries);
  RUN(test_failures_fall_back_to_the_tape);
  RUN(test_background_compile);
  return CHECK_MAIN_RESULT();
}
