/* See codegen.h. */
#include "fuse/codegen.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "fuse/fuse_group.h"
#include "ops/engine/convert.h"

int rt_fuse_codegen_enabled(void) {
  const char *v = getenv("TORCHNEURON_CODEGEN");
  return !(v && !strcmp(v, "0"));
}

int rt_fuse_codegen_mode(void) {
  const char *v = getenv("TORCHNEURON_CODEGEN");
  if (v && !strcmp(v, "0")) return 0;
  return v && !strcmp(v, "sync") ? 2 : 1;
}

void rt_fuse_tape_for(struct nrt_fuse_group *g, int32_t num_inputs, const nrt_dtype *input_dtypes,
                      int32_t num_registers, const nrt_dtype *registers, int32_t num_insts,
                      const nrt_fuse_inst *insts, int32_t num_outputs, const int32_t *output_registers) {
  memset(g, 0, sizeof *g);
  g->num_inputs = num_inputs;
  g->num_registers = num_registers;
  g->num_insts = num_insts;
  g->num_outputs = num_outputs;
  for (int k = 0; k < num_inputs; k++) g->inputs[k].dtype = input_dtypes[k];
  for (int r = 0; r < num_registers; r++) g->registers[r] = registers[r];
  for (int j = 0; j < num_outputs; j++) {
    g->output_registers[j] = output_registers[j];
    g->outputs[j].dtype = registers[output_registers[j]]; /* as the tape stores it */
  }
  memcpy(g->insts, insts, (size_t)num_insts * sizeof insts[0]);
  for (int i = 0; i < num_insts; i++) {
    const nrt_fuse_inst *in = &g->insts[i];
    for (int k = in->num_outputs; k < in->num_operands; k++)
      if (in->operands[k].kind == NRT_FUSE_IMMEDIATE)
        rt_convert_scalar(in->operands[k].dtype, &in->operands[k].value, &g->immediates[i][k]);
  }
  rt_fuse_tape_build(g);
}

/* ---- the source ---------------------------------------------------------------- */

typedef struct text {
  char *data;
  size_t len, cap;
  int failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->data && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap ? t->cap * 2 : 16384) + (size_t)n;
    char *grown = realloc(t->data, cap);
    if (!grown) {
      t->failed = 1;
      return;
    }
    t->data = grown;
    t->cap = cap;
  }
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* A source of op: the local that holds its value (writer: the op that
 * wrote its slot). */
static void put_source(text *t, const rt_tape_src *s, int writer) {
  if (s->kind == RT_TAPE_SLOT)
    put(t, "v%d", writer);
  else if (s->kind == RT_TAPE_INPUT)
    put(t, "x%d", s->index);
  else
    put(t, "rt_vm_float(0x%08xu)", float_bits(s->imm)); /* every bit as the tape holds it */
}

/* The generated loops' block (the values that cross segments are arrays
 * of it, 2 KiB each, in L1): on the 8-op chain on a Zen 4, 512 elements
 * took 3.5% less time than 256 (the tape's block), 128 5% more and 1024
 * 15% more. */
#define GEN_BLOCK 512

/* Whether expr calls a vmath.h function (a long inlined body). */
static int is_heavy(const char *expr) {
  static const char *const heavy[] = {"RT_EXPR_F32_EXP",       "RT_EXPR_F32_LOG",  "RT_EXPR_F32_TANH",
                                      "RT_EXPR_F32_ERF",       "RT_EXPR_F32_SIGMOID", "RT_EXPR_F32_GELU",
                                      "RT_EXPR_F32_GELU_TANH", "RT_EXPR_F32_SILU", "RT_EXPR_F32_SILU_BACKWARD",
                                      "RT_EXPR_F32_GELU_BACKWARD"};
  for (size_t i = 0; expr && i < sizeof heavy / sizeof heavy[0]; i++)
    if (!strcmp(expr, heavy[i])) return 1;
  return 0;
}

/* Selects as bit masks for the compare-and-select ops, the same values as
 * their float_exprs.h text: GCC, given the ternaries, threads a select
 * through the ops after it (a relu followed by a multiply became two
 * paths and a merge) and emits compare, blend and mask-register code
 * twice the size; with the masks it cannot, and each select is a compare
 * and a blend. 12% of the benchmark's 8-op chain (relu and clamp) on a
 * Zen 4; a loop of maximum, minimum, threshold_backward and leaky_relu
 * (with a multiply and an add) 12% too. */
static const char select_text[] =
    "static inline __attribute__((always_inline)) float tn_sel(int c, float a, float b) {\n"
    "  uint32_t m = 0u - (uint32_t)c;\n"
    "  return rt_vm_float((rt_vm_bits(a) & m) | (rt_vm_bits(b) & ~m));\n"
    "}\n"
    "static inline __attribute__((always_inline)) float tn_clamp(float x, float lo, float hi) {\n"
    "  float y = tn_sel(x < lo, lo, x);\n"
    "  return tn_sel(y > hi, hi, y);\n"
    "}\n";

/* The text an op is emitted as: its float_exprs.h macro, or an equal
 * formulation that compiles to less code (select_text). */
static const char *emitted_expr(const char *expr) {
  if (!expr) return expr;
  if (!strcmp(expr, "RT_EXPR_RELU")) return "tn_sel(x < 0, 0.0f, x)"; /* x < 0 ? 0 : x */
  if (!strcmp(expr, "RT_EXPR_HARDTANH")) /* RT_EXPR_HARDTANH with RT_EXPR_CLAMP_ as tn_clamp */
    return "sc->f[0] != sc->f[0] || sc->f[1] != sc->f[1] ? (float)NAN : tn_clamp(x, (float)sc->f[0], "
           "(float)sc->f[1])";
  if (!strcmp(expr, "RT_EXPR_LEAKY_RELU")) return "tn_sel(x > 0, x, x * (float)sc->f[0])";
  if (!strcmp(expr, "RT_EXPR_F32_THRESHOLD_BACKWARD")) return "tn_sel(b <= (float)sc->f[0], 0.0f, a)";
  if (!strcmp(expr, "RT_EXPR_MAXIMUM")) return "tn_sel(a != a, a, tn_sel(b != b, b, tn_sel(a > b, a, b)))";
  if (!strcmp(expr, "RT_EXPR_MINIMUM")) return "tn_sel(a != a, a, tn_sel(b != b, b, tn_sel(a < b, a, b)))";
  return expr;
}

/* The ops with a tame twin, as the eager kernels take them per block
 * (pointwise_unary.c, RT_UNARY_LOOP_TAME in pointwise.h): the twin, the
 * same bits on blocks whose largest |x| is at most the bound. */
static const struct tame_twin {
  const char *expr, *twin, *bound;
} tame_twins[] = {
    {"RT_EXPR_F32_SIGMOID", "rt_vm_sigmoidf_tame(x)", "RT_VM_SIGMOID_TAME_BITS"},
    {"RT_EXPR_F32_GELU", "rt_vm_geluf_tame(x)", "RT_VM_GELU_TAME_BITS"},
    {"RT_EXPR_F32_SILU", "rt_vm_siluf_tame(x)", "RT_VM_SILU_TAME_BITS"},
};

/* expr's entry of tame_twins, or NULL. */
static const struct tame_twin *tame_twin_of(const char *expr) {
  for (size_t k = 0; expr && k < sizeof tame_twins / sizeof tame_twins[0]; k++)
    if (!strcmp(expr, tame_twins[k].expr)) return &tame_twins[k];
  return NULL;
}

char *rt_fuse_codegen_source(const struct nrt_fuse_group *g, const char *sym) {
  const rt_fuse_tape *tp = &g->tape;
  if (tp->num_ops <= 0 || tp->has16) return NULL;
  text t = {0};
  int slot_writer[NRT_FUSE_MAX_REGISTERS + NRT_FUSE_MAX_INPUTS];
  for (int s = 0; s < NRT_FUSE_MAX_REGISTERS + NRT_FUSE_MAX_INPUTS; s++) slot_writer[s] = -1;
  put(&t, "/* Generated by TorchNeuron (runtime/src/fuse/codegen.c) from a fused group's tape. */\n");
  put(&t, "#include <tgmath.h>\n#include <stdint.h>\n#include <string.h>\n");
  put(&t, "%s\n%s\n", (const char *)rt_embedded_vmath_h, (const char *)rt_embedded_float_exprs_h);
  put(&t, "%s\n%s", (const char *)rt_embedded_vmath_sigmoid_tame_h, select_text);
  put(&t, "typedef struct tape_scalars { double f[2]; } tape_scalars;\n");
  put(&t, "static inline double tn_f64(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }\n");
  put(&t, "__attribute__((visibility(\"default\"))) void %s(int64_t n, const float *const *in, "
          "float *const *out);\n", sym);
  put(&t, "void %s(int64_t n, const float *const *in, float *const *out) {\n", sym);
  for (int k = 0; k < g->num_inputs; k++) put(&t, "  const float *restrict in%d = in[%d];\n", k, k);
  for (int j = 0; j < g->num_outputs; j++) put(&t, "  float *restrict out%d = out[%d];\n", j, j);
  for (int i = 0; i < tp->num_ops; i++) {
    const rt_tape_op *op = &tp->ops[i];
    put(&t, "  const tape_scalars sc%d = {{tn_f64(0x%016llxull), tn_f64(0x%016llxull)}};\n", i,
        (unsigned long long)double_bits(op->scalars[0]), (unsigned long long)double_bits(op->scalars[1]));
  }
  /* Each op's sources' writers (-1: an input or an immediate), checked. */
  int src_op[NRT_FUSE_MAX_INSTS][2], out_op[NRT_FUSE_MAX_OUTPUTS];
  for (int i = 0; i < tp->num_ops; i++) {
    const rt_tape_op *op = &tp->ops[i];
    int arity;
    rt_fuse_tape_expr(op->code, &arity);
    if (arity != op->num_src) {
      free(t.data);
      return NULL;
    }
    for (int k = 0; k < arity; k++) {
      src_op[i][k] = op->src[k].kind == RT_TAPE_SLOT ? slot_writer[op->src[k].index] : -1;
      if (op->src[k].kind == RT_TAPE_SLOT && src_op[i][k] < 0) {
        free(t.data); /* read before written: not a tape this emitter knows */
        return NULL;
      }
    }
    slot_writer[op->dst] = i;
  }
  for (int j = 0; j < g->num_outputs; j++)
    if ((out_op[j] = slot_writer[tp->out_slot[j]]) < 0) {
      free(t.data);
      return NULL;
    }
  /* Segments: an op of vmath.h (exp, tanh, sigmoid, GELU, ...) runs in a
   * loop of its own over a block, the cheap ops between them in one loop
   * each; values that cross segments go through block arrays. One loop
   * with a transcendental inlined among the other ops ran 1.3x slower than
   * the tape on a Zen 4 (docs/performance.md); split so, 12% faster. */
  int seg[NRT_FUSE_MAX_INSTS], crosses[NRT_FUSE_MAX_INSTS], segs = 0, in_cur = 0, tamed = 0;
  int tame_op[NRT_FUSE_MAX_INSTS + 1]; /* per segment: its op with a tame twin, or -1 */
  for (int i = 0; i < tp->num_ops; i++) {
    int arity, heavy = is_heavy(rt_fuse_tape_expr(tp->ops[i].code, &arity));
    if (heavy && in_cur) segs++, in_cur = 0;
    seg[i] = segs;
    in_cur++;
    if (heavy) segs++, in_cur = 0;
    crosses[i] = 0;
  }
  if (in_cur) segs++;
  /* A sigmoid, GELU or SiLU (alone in its segment) of an input or of
   * another segment's value gets a check per block and the tame twin's
   * loop, as the eager kernel has: the same op fused and alone then costs
   * the same (and gives the same bits, as every twin does). */
  for (int sg = 0; sg < segs; sg++) tame_op[sg] = -1;
  for (int i = 0; i < tp->num_ops; i++) {
    int arity;
    const char *expr = rt_fuse_tape_expr(tp->ops[i].code, &arity);
    if (tame_twin_of(expr) && arity == 1 &&
        (tp->ops[i].src[0].kind == RT_TAPE_INPUT || (src_op[i][0] >= 0 && seg[src_op[i][0]] != seg[i])))
      tame_op[seg[i]] = i, tamed = 1;
  }
  for (int i = 0; i < tp->num_ops; i++)
    for (int k = 0; k < tp->ops[i].num_src; k++)
      if (src_op[i][k] >= 0 && seg[src_op[i][k]] != seg[i]) crosses[src_op[i][k]] = 1;
  const int blocked = segs > 1 || tamed; /* a block's check would otherwise span the whole call */
  const char *at = blocked ? "c0 + j" : "j";
  if (blocked) {
    for (int i = 0; i < tp->num_ops; i++)
      if (crosses[i]) put(&t, "  float t%d[%d] __attribute__((aligned(64)));\n", i, GEN_BLOCK);
    put(&t, "  for (int64_t c0 = 0; c0 < n; c0 += %d) {\n", GEN_BLOCK);
    put(&t, "  const int64_t m = n - c0 < %d ? n - c0 : %d;\n", GEN_BLOCK, GEN_BLOCK);
  }
  for (int sg = 0; sg < segs; sg++)
    for (int tame = tame_op[sg] >= 0; tame >= 0; tame--) {
      if (tame) {
        /* Every value of the block within the tame domain (NaN is not): the
         * twin's loop, else the general one. */
        const int i = tame_op[sg];
        const rt_tape_src *src = &tp->ops[i].src[0];
        char source[64];
        if (src->kind == RT_TAPE_INPUT)
          snprintf(source, sizeof source, "in%d[c0 + j]", src->index);
        else
          snprintf(source, sizeof source, "t%d[j]", src_op[i][0]);
        /* The largest |x| by its bits (NaN and infinity above every
         * finite): an unsigned max, 3% faster than an AND of compares. */
        put(&t, "  uint32_t big%d = 0;\n", i);
        put(&t, "  for (int64_t j = 0; j < m; j++) {\n");
        put(&t, "    const uint32_t u = rt_vm_bits(%s) & 0x7fffffffu;\n", source);
        put(&t, "    big%d = u > big%d ? u : big%d;\n  }\n", i, i, i);
        int arity;
        put(&t, "  if (big%d <= %s)\n", i, tame_twin_of(rt_fuse_tape_expr(tp->ops[i].code, &arity))->bound);
      } else if (tame_op[sg] >= 0) {
        put(&t, "  else\n");
      }
      put(&t, "  for (int64_t j = 0; j < %s; j++) {\n", blocked ? "m" : "n");
      int input_used[NRT_FUSE_MAX_INPUTS] = {0}, loaded[NRT_FUSE_MAX_INSTS] = {0};
      for (int i = 0; i < tp->num_ops; i++)
        for (int k = 0; seg[i] == sg && k < tp->ops[i].num_src; k++) {
          const rt_tape_src *src = &tp->ops[i].src[k];
          if (src->kind == RT_TAPE_INPUT && !input_used[src->index]) {
            input_used[src->index] = 1;
            put(&t, "    const float x%d = in%d[%s];\n", src->index, src->index, at);
          } else if (src_op[i][k] >= 0 && seg[src_op[i][k]] != sg && !loaded[src_op[i][k]]) {
            loaded[src_op[i][k]] = 1;
            put(&t, "    const float v%d = t%d[j];\n", src_op[i][k], src_op[i][k]);
          }
        }
      for (int i = 0; i < tp->num_ops; i++) {
        if (seg[i] != sg) continue;
        const rt_tape_op *op = &tp->ops[i];
        int arity;
        const char *expr = rt_fuse_tape_expr(op->code, &arity);
        put(&t, "    float v%d;\n    {\n      const tape_scalars *sc = &sc%d;\n      (void)sc;\n", i, i);
        if (arity == 1) {
          put(&t, "      float x = ");
          put_source(&t, &op->src[0], src_op[i][0]);
          expr = tame ? tame_twin_of(expr)->twin : emitted_expr(expr);
          put(&t, ";\n      v%d = %s%s%s;\n    }\n", i, expr ? "(float)(" : "", expr ? expr : "x", expr ? ")" : "");
        } else {
          put(&t, "      float a = ");
          put_source(&t, &op->src[0], src_op[i][0]);
          put(&t, ", b = ");
          put_source(&t, &op->src[1], src_op[i][1]);
          put(&t, ";\n      v%d = (float)(%s);\n    }\n", i, emitted_expr(expr));
        }
        if (crosses[i]) put(&t, "    t%d[j] = v%d;\n", i, i);
      }
      for (int j = 0; j < g->num_outputs; j++)
        if (seg[out_op[j]] == sg) put(&t, "    out%d[%s] = v%d;\n", j, at, out_op[j]);
      put(&t, "  }\n");
    }
  put(&t, blocked ? "  }\n}\n" : "}\n");
  if (t.failed) {
    free(t.data);
    return NULL;
  }
  return t.data;
}

/* ---- the kernels of this process ------------------------------------------------ */

static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_gen_kernel *kernels; /* every kernel loaded, newest first */
static atomic_int warned;
static atomic_int quiet;

/* Counts a fallback; the first is logged as a warning, later ones at debug. */
static void fell_back(const char *name, const char *why) {
  if (atomic_load(&quiet)) return;
  rt_metric_add(NRT_METRIC_FUSE_CODEGEN_FALLBACKS, 1);
  int first = atomic_exchange(&warned, 1) == 0;
  rt_log(first ? NRT_LOG_WARNING : NRT_LOG_DEBUG,
         "generated code for %s unavailable, running its tape instead: %s%s", name, why,
         first ? " (further cases are logged at debug level)" : "");
}

static int same_tape(const rt_fuse_tape *a, const rt_fuse_tape *b, int num_outputs) {
  return a->num_ops == b->num_ops && a->num_slots == b->num_slots && a->input_slot0 == b->input_slot0 &&
         !memcmp(a->out_slot, b->out_slot, (size_t)num_outputs) &&
         !memcmp(a->ops, b->ops, (size_t)a->num_ops * sizeof a->ops[0]);
}

/* Probe values: signs, zeros, subnormals, the ends of exp's range, huge
 * values, infinities, NaN. */
static const float probe_values[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -3.75f, 1e-3f, -1e-3f,
                                     7.25f, -11.5f, 88.5f, -88.5f, 103.0f, -104.0f, 1e-40f, -1e-40f,
                                     1.1754944e-38f, 3.4028235e38f, -3.4028235e38f, 0.7853982f, 20.0f,
                                     -20.0f, 1e6f, -1e6f, 0.1f, 0.3f};
#define PROBE_N 67

/* Runs k on probe data against the tape's scalar twin: 1 if every output
 * bit agrees (NaNs agree with NaNs). */
static int probe(const rt_gen_kernel *k, const struct nrt_fuse_group *g) {
  const int nv = (int)(sizeof probe_values / sizeof probe_values[0]);
  float in_data[NRT_FUSE_MAX_INPUTS][PROBE_N];
  float ref[NRT_FUSE_MAX_OUTPUTS][PROBE_N], got[NRT_FUSE_MAX_OUTPUTS][PROBE_N];
  const float *in[NRT_FUSE_MAX_INPUTS];
  float *out[NRT_FUSE_MAX_OUTPUTS];
  rt_fuse_box box = {.rows = 1, .cols = PROBE_N};
  for (int i = 0; i < g->num_inputs; i++) {
    for (int e = 0; e < PROBE_N; e++) {
      int at = (e + 7 * i) % (nv + 3);
      in_data[i][e] = at < nv ? probe_values[at] : at == nv ? INFINITY : at == nv + 1 ? -INFINITY : NAN;
    }
    in[i] = in_data[i];
    box.in[i] = (char *)in_data[i];
    box.in_rs[i] = PROBE_N;
    box.in_cs[i] = 1;
  }
  for (int j = 0; j < g->num_outputs; j++) {
    out[j] = got[j];
    box.out[j] = (char *)ref[j];
    box.out_rs[j] = PROBE_N;
    box.out_cs[j] = 1;
  }
  rt_fuse_tape_run_reference(g, &box);
  k->fn(PROBE_N, in, out);
  for (int j = 0; j < g->num_outputs; j++)
    for (int e = 0; e < PROBE_N; e++)
      if (float_bits(ref[j][e]) != float_bits(got[j][e]) && !(ref[j][e] != ref[j][e] && got[j][e] != got[j][e]))
        return 0;
  return 1;
}

static const rt_gen_kernel *get(const struct nrt_fuse_group *g, int may_compile, int *missed) {
  *missed = 0;
  /* A 16-bit tape runs as such: this emitter writes float32 tapes only. */
  if (!g->tape.num_ops || g->tape.has16 || !rt_fuse_codegen_enabled()) return NULL;
  const char *name = g->name[0] ? g->name : "a fused group";
  /* The symbol names the source it is in (hashed with a placeholder). */
  char *source = rt_fuse_codegen_source(g, "tn_fused");
  if (!source) {
    fell_back(name, "out of memory writing its source");
    return NULL;
  }
  uint64_t h[2];
  rt_jit_hash(source, strlen(source), h);
  free(source);
  char sym[64];
  snprintf(sym, sizeof sym, "tn_fused_%016llx", (unsigned long long)h[0]);
  if (!(source = rt_fuse_codegen_source(g, sym))) {
    fell_back(name, "out of memory writing its source");
    return NULL;
  }
  int32_t isa = (int32_t)rt_isa();
  const char *cc_env = getenv("TORCHNEURON_CC");
  uint64_t cc_h[2] = {0, 0};
  if (cc_env) rt_jit_hash(cc_env, strlen(cc_env), cc_h);

  pthread_mutex_lock(&kernels_lock);
  rt_gen_kernel *k;
  for (k = kernels; k; k = k->next)
    if (k->isa == isa && same_tape(&k->tape, &g->tape, g->num_outputs) && k->num_inputs == g->num_inputs &&
        k->num_outputs == g->num_outputs && k->key[1] == (h[1] ^ cc_h[0]))
      break;
  pthread_mutex_unlock(&kernels_lock);
  if (k) {
    free(source);
    return k;
  }
  /* Compiled outside the lock: the graph compiler asks for several at
   * once. Two threads making the same kernel both add it (harmless). */
  char why[512] = "";
  int from_cache = 0;
  uint64_t key[2];
  rt_gen_fn fn = rt_jit_load(source, sym, isa, key, &from_cache, may_compile, missed, why, sizeof why);
  free(source);
  if (!fn) {
    if (!*missed) fell_back(name, why);
    return NULL;
  }
  k = calloc(1, sizeof *k);
  if (!k) {
    fell_back(name, "out of host memory");
    return NULL;
  }
  k->fn = fn;
  k->isa = isa;
  k->num_inputs = g->num_inputs;
  k->num_outputs = g->num_outputs;
  k->tape = g->tape;
  k->key[0] = key[0];
  k->key[1] = h[1] ^ cc_h[0]; /* the in-process key: source and compiler choice */
  if (!probe(k, g)) {
    free(k);
    fell_back(name, "its results differ from the tape's on the probe values (compiler flags?)");
    return NULL;
  }
  rt_metric_add(from_cache ? NRT_METRIC_FUSE_CODEGEN_CACHE_HITS : NRT_METRIC_FUSE_CODEGEN_KERNELS, 1);
  pthread_mutex_lock(&kernels_lock);
  k->next = kernels;
  kernels = k;
  pthread_mutex_unlock(&kernels_lock);
  return k;
}

const rt_gen_kernel *rt_fuse_codegen_get(const struct nrt_fuse_group *g) {
  int missed;
  return get(g, 1, &missed);
}

const rt_gen_kernel *rt_fuse_codegen_lookup(const struct nrt_fuse_group *g, int *missed) {
  return get(g, 0, missed);
}

void rt_fuse_codegen_quiet(void) { atomic_store(&quiet, 1); }

void rt_fuse_codegen_forget(void) {
  pthread_mutex_lock(&kernels_lock);
  while (kernels) {
    rt_gen_kernel *next = kernels->next;
    free(kernels);
    kernels = next;
  }
  pthread_mutex_unlock(&kernels_lock);
}

const rt_gen_kernel *rt_fuse_codegen_match(const rt_gen_kernel *k, const struct nrt_fuse_group *g) {
  if (!k) return NULL;
  if (g->tape.num_ops && k->isa == (int32_t)rt_isa() && k->num_inputs == g->num_inputs &&
      k->num_outputs == g->num_outputs && same_tape(&k->tape, &g->tape, g->num_outputs))
    return k;
  rt_metric_add(NRT_METRIC_FUSE_CODEGEN_FALLBACKS, 1);
  return NULL;
}

/* ---- running -------------------------------------------------------------------- */

/* The bytes [lo, hi) that n elements of stride cs from p span. */
static void span(const float *p, int64_t n, int64_t cs, const char **lo, const char **hi) {
  const char *first = (const char *)p, *last = (const char *)(p + (n - 1) * cs);
  if (cs < 0) {
    const char *swap = first;
    first = last;
    last = swap;
  }
  *lo = first;
  *hi = last + sizeof(float);
}

static int overlaps(const float *a, int64_t as, const float *b, int64_t bs, int64_t n) {
  const char *alo, *ahi, *blo, *bhi;
  span(a, n, as, &alo, &ahi);
  span(b, n, bs, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

void rt_fuse_codegen_run(const struct nrt_fuse_group *g, const rt_fuse_box *b, char *scratch) {
  const rt_fuse_tape *t = &g->tape;
  const rt_gen_kernel *k = g->gen;
  float *slots = (float *)scratch;
  int64_t rows = b->rows, cols = b->cols;
  int flat = 1;
  for (int i = 0; i < g->num_inputs; i++)
    if (b->in_rs[i] != b->cols * b->in_cs[i]) flat = 0;
  for (int j = 0; j < g->num_outputs; j++)
    if (b->out_rs[j] != b->cols * b->out_cs[j]) flat = 0;
  if (rows > 1 && flat) cols *= rows, rows = 1;
  int dense = 1;
  for (int i = 0; i < g->num_inputs; i++) dense &= b->in_cs[i] == 1;
  for (int j = 0; j < g->num_outputs; j++) dense &= b->out_cs[j] == 1;
  const float *in[NRT_FUSE_MAX_INPUTS], *row_in[NRT_FUSE_MAX_INPUTS];
  float *out[NRT_FUSE_MAX_OUTPUTS], *row_out[NRT_FUSE_MAX_OUTPUTS];
  int staged[NRT_FUSE_MAX_OUTPUTS];
  for (int64_t r = 0; r < rows; r++) {
    for (int i = 0; i < g->num_inputs; i++) row_in[i] = (const float *)b->in[i] + r * b->in_rs[i];
    for (int j = 0; j < g->num_outputs; j++) row_out[j] = (float *)b->out[j] + r * b->out_rs[j];
    if (dense) { /* the whole row at once, unless an output overlaps something */
      int clash = 0;
      for (int j = 0; j < g->num_outputs && !clash; j++) {
        for (int i = 0; i < g->num_inputs && !clash; i++) clash = overlaps(row_out[j], 1, row_in[i], 1, cols);
        for (int o = 0; o < j && !clash; o++) clash = overlaps(row_out[j], 1, row_out[o], 1, cols);
      }
      if (!clash) {
        k->fn(cols, row_in, row_out);
        continue;
      }
    }
    for (int64_t c0 = 0; c0 < cols; c0 += RT_TAPE_BLOCK) {
      int64_t n = cols - c0 < RT_TAPE_BLOCK ? cols - c0 : RT_TAPE_BLOCK;
      for (int i = 0; i < g->num_inputs; i++) {
        int64_t cs = b->in_cs[i];
        const float *p = row_in[i] + c0 * cs;
        if (cs == 1 || n == 1) {
          in[i] = p;
          continue;
        }
        float *gather = slots + (size_t)(t->input_slot0 + i) * RT_TAPE_BLOCK;
        if (cs == 0) {
          const float v = p[0];
          for (int64_t e = 0; e < n; e++) gather[e] = v;
        } else if (cs == 2) {
          for (int64_t e = 0; e < n; e++) gather[e] = p[2 * e];
        } else {
          for (int64_t e = 0; e < n; e++) gather[e] = p[e * cs];
        }
        in[i] = gather;
      }
      /* An output is written in place when contiguous and clear of the
       * block's inputs and of the other outputs; otherwise through its
       * slot, stored afterwards in output order. */
      int any_clash = 0;
      for (int j = 0; j < g->num_outputs; j++) {
        float *o = row_out[j] + c0 * b->out_cs[j];
        int clash = b->out_cs[j] != 1;
        for (int i = 0; i < g->num_inputs && !clash; i++)
          clash = overlaps(o, b->out_cs[j], row_in[i] + c0 * b->in_cs[i], b->in_cs[i], n);
        for (int q = 0; q < g->num_outputs && !clash; q++)
          if (q != j) clash = overlaps(o, b->out_cs[j], row_out[q] + c0 * b->out_cs[q], b->out_cs[q], n);
        staged[j] = clash;
        any_clash |= clash;
        out[j] = clash ? slots + (size_t)t->out_slot[j] * RT_TAPE_BLOCK : o;
      }
      k->fn(n, in, out);
      if (!any_clash) continue;
      for (int j = 0; j < g->num_outputs; j++) {
        if (!staged[j]) continue;
        const float *v = slots + (size_t)t->out_slot[j] * RT_TAPE_BLOCK;
        int64_t cs = b->out_cs[j];
        float *o = row_out[j] + c0 * cs;
        rt_tape_store_row(o, v, n, cs);
      }
    }
  }
}
