/* See tape.h. */
#include <tgmath.h> /* first: fabs(x) in float_exprs.h is fabsf, as in the kernel files */
#include "fuse/tape.h"

#include <string.h>
#include "fuse/fuse_group.h"
#include "ops/engine/convert.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"
#include "ops/engine/vmath_sigmoid_tame.h"
#include "ops/pointwise/float_exprs.h"

/* The tape's vocabulary: op code, scalars it reads, float32 expression. */
#define TAPE_UNARY(X)                                                                   \
  X(NEG, 0, RT_EXPR_NEG) X(ABS, 0, RT_EXPR_ABS) X(RELU, 0, RT_EXPR_RELU)                \
  X(HARDTANH, 2, RT_EXPR_HARDTANH) X(LEAKY_RELU, 1, RT_EXPR_LEAKY_RELU)                 \
  X(EXP, 0, RT_EXPR_F32_EXP) X(LOG, 0, RT_EXPR_F32_LOG) X(TANH, 0, RT_EXPR_F32_TANH)    \
  X(ERF, 0, RT_EXPR_F32_ERF) X(SIGMOID, 0, RT_EXPR_F32_SIGMOID)                         \
  X(SQRT, 0, RT_EXPR_F32_SQRT) X(RSQRT, 0, RT_EXPR_F32_RSQRT)                           \
  X(RECIPROCAL, 0, RT_EXPR_F32_RECIPROCAL) X(GELU, 0, RT_EXPR_F32_GELU)                 \
  X(GELU_TANH, 0, RT_EXPR_F32_GELU_TANH) X(SILU, 0, RT_EXPR_F32_SILU)

#define TAPE_BINARY(X)                                                                  \
  X(ADD, 1, RT_EXPR_ADD) X(MUL, 0, RT_EXPR_MUL) X(DIV, 0, RT_EXPR_DIV)                  \
  X(MAXIMUM, 0, RT_EXPR_MAXIMUM) X(MINIMUM, 0, RT_EXPR_MINIMUM)                         \
  X(SIGMOID_BACKWARD, 0, RT_EXPR_F32_SIGMOID_BACKWARD)                                  \
  X(TANH_BACKWARD, 0, RT_EXPR_F32_TANH_BACKWARD)                                        \
  X(THRESHOLD_BACKWARD, 1, RT_EXPR_F32_THRESHOLD_BACKWARD)                              \
  X(SILU_BACKWARD, 0, RT_EXPR_F32_SILU_BACKWARD) X(GELU_BACKWARD, 0, RT_EXPR_F32_GELU_BACKWARD)

#define TAPE_ENUM_(CODE, NS, EXPR) T_##CODE,
/* T_MOVE: a float32 -> float32 copy (NRT_OP_COPY), bits unchanged. */
typedef enum rt_tape_code { T_MOVE, TAPE_UNARY(TAPE_ENUM_) TAPE_BINARY(TAPE_ENUM_) T_COUNT } rt_tape_code;
#undef TAPE_ENUM_

/* The tape code of an instruction's op, its source count and the scalars
 * it reads; 0 when the tape has no such op. */
static int tape_code(nrt_op_code code, int *code_out, int *arity, int *scalars) {
#define TAPE_MAP_(CODE, NS, EXPR, N) \
  case NRT_OP_##CODE:                \
    *code_out = T_##CODE;            \
    *arity = N;                      \
    *scalars = NS;                   \
    return 1;
#define TAPE_MAP1_(CODE, NS, EXPR) TAPE_MAP_(CODE, NS, EXPR, 1)
#define TAPE_MAP2_(CODE, NS, EXPR) TAPE_MAP_(CODE, NS, EXPR, 2)
  switch (code) {
    TAPE_UNARY(TAPE_MAP1_)
    TAPE_BINARY(TAPE_MAP2_)
    case NRT_OP_COPY:
      *code_out = T_MOVE, *arity = 1, *scalars = 0;
      return 1;
    default:
      return 0;
  }
#undef TAPE_MAP1_
#undef TAPE_MAP2_
#undef TAPE_MAP_
}

const char *rt_fuse_tape_expr(int code, int *arity) {
#define TAPE_NAME1_(CODE, NS, EXPR) \
  case T_##CODE:                    \
    *arity = 1;                     \
    return #EXPR;
#define TAPE_NAME2_(CODE, NS, EXPR) \
  case T_##CODE:                    \
    *arity = 2;                     \
    return #EXPR;
  switch (code) {
    TAPE_UNARY(TAPE_NAME1_)
    TAPE_BINARY(TAPE_NAME2_)
    default:
      *arity = 1; /* T_MOVE */
      return NULL;
  }
#undef TAPE_NAME1_
#undef TAPE_NAME2_
}

/* ---- building ---------------------------------------------------------------- */

/* The kind (tape.h) of a dtype the tape holds, or -1. */
static int kind_of(nrt_dtype d) {
  return d == NRT_FLOAT32                        ? RT_TAPE_F32
         : d == NRT_BFLOAT16                     ? RT_TAPE_BF16
         : d == NRT_FLOAT16 && RT_TAPE_TAKES_F16 ? RT_TAPE_F16
                                                 : -1;
}

/* Whether an op of compute dtype float16/bfloat16 gives, unfused, the
 * float32 expression of its float32-converted operands rounded once to its
 * result's dtype, as the tape computes it. Checked one by one:
 *  - the converting path (rt_run_pointwise: the float32 loop between
 *    conversions) serves log, tanh, erf, sigmoid, sqrt, rsqrt, reciprocal,
 *    leaky_relu; immediates always take it, converted to float32;
 *  - mul, div, relu (and add, with alpha rounded first: tape_scalar16)
 *    take in-register 16-bit loops of the same expression (loops.h
 *    RT_BINARY_LOOPS16, relu's twin test);
 *  - neg, abs, hardtanh, maximum, minimum take bits16.c, tested bitwise
 *    equal to the converting path;
 * Refused: exp, gelu, gelu_tanh, silu (correctly rounded 16-bit tables,
 * RT_DEFINE_TABLE16, not the float32 expression rounded) and the
 * backward ops (their 16-bit loops not checked here). */
static int admits16(int code) {
  switch (code) {
    case T_MOVE: case T_NEG: case T_ABS: case T_RELU: case T_HARDTANH: case T_LEAKY_RELU:
    case T_LOG: case T_TANH: case T_ERF: case T_SIGMOID: case T_SQRT: case T_RSQRT:
    case T_RECIPROCAL: case T_ADD: case T_MUL: case T_DIV: case T_MAXIMUM: case T_MINIMUM:
      return 1;
    default:
      return 0;
  }
}

void rt_fuse_tape_build(struct nrt_fuse_group *g) {
  rt_fuse_tape *t = &g->tape;
  t->num_ops = 0;
  t->has16 = 0;
  for (int k = 0; k < g->num_inputs; k++) {
    int kind = kind_of(g->inputs[k].dtype);
    if (kind < 0) return;
    t->in_kind[k] = (uint8_t)kind;
    t->has16 |= kind != RT_TAPE_F32;
  }
  for (int r = 0; r < g->num_registers; r++) {
    if (kind_of(g->registers[r]) < 0) return;
    t->has16 |= g->registers[r] != NRT_FLOAT32;
  }
  for (int j = 0; j < g->num_outputs; j++) {
    int kind = kind_of(g->outputs[j].dtype);
    if (kind < 0) return;
    t->out_kind[j] = (uint8_t)kind;
    t->has16 |= kind != RT_TAPE_F32;
  }
  /* Each register's last reader (outputs: past the end; -1: none). */
  int last_use[NRT_FUSE_MAX_REGISTERS];
  for (int r = 0; r < g->num_registers; r++) last_use[r] = -1;
  for (int i = 0; i < g->num_insts; i++)
    for (int k = g->insts[i].num_outputs; k < g->insts[i].num_operands; k++)
      if (g->insts[i].operands[k].kind == NRT_FUSE_REGISTER) last_use[g->insts[i].operands[k].index] = i;
  for (int j = 0; j < g->num_outputs; j++) last_use[g->output_registers[j]] = g->num_insts;

  int slot_of[NRT_FUSE_MAX_REGISTERS], free_slots[NRT_FUSE_MAX_REGISTERS], num_free = 0, num_slots = 0;
  for (int i = 0; i < g->num_insts; i++) {
    const nrt_fuse_inst *in = &g->insts[i];
    rt_tape_op *op = &t->ops[i];
    int code, arity, scalars;
    if (!tape_code(in->code, &code, &arity, &scalars) || in->num_outputs != 1 ||
        in->num_operands != 1 + arity || in->num_scalars < scalars)
      return;
    const int compute16 = in->compute_dtype == NRT_BFLOAT16 || in->compute_dtype == NRT_FLOAT16;
    /* A copy converts to its register's dtype whatever its compute dtype;
     * one with flags (negation, conjugation) is left to the kernel. */
    if (code == T_MOVE && in->num_scalars && in->scalars[0].i) return;
    if (in->compute_dtype != NRT_FLOAT32 && code != T_MOVE && !(compute16 && admits16(code))) return;
    const int out_kind = kind_of(g->registers[in->operands[0].index]);
    if (out_kind != RT_TAPE_F32 && !admits16(code)) return;
    memset(op, 0, sizeof *op);
    op->code = (uint8_t)code;
    op->num_src = (uint8_t)arity;
    op->round = (uint8_t)out_kind;
    for (int s = 0; s < scalars; s++) {
      const nrt_scalar *v = &in->scalars[s];
      op->scalars[s] = v->is_float ? v->f : (double)v->i; /* rt_scalars_from_op */
    }
    if (code == T_ADD && compute16) { /* rt_kernel_add rounds alpha to the 16-bit type first */
      float alpha = (float)op->scalars[0];
      alpha = in->compute_dtype == NRT_FLOAT16 ? rt_half_to_float(rt_half_from_float(alpha))
                                               : rt_bfloat16_to_float(rt_bfloat16_from_float(alpha));
      op->scalars[0] = alpha;
    }
    for (int k = 1; k <= arity; k++) {
      const nrt_fuse_ref *ref = &in->operands[k];
      rt_tape_src *src = &op->src[k - 1];
      /* A copy between tensors of one 16-bit dtype keeps a NaN's payload,
       * which converting would make the canonical NaN: left to the kernel. */
      nrt_dtype from = ref->kind == NRT_FUSE_REGISTER ? g->registers[ref->index]
                       : ref->kind == NRT_FUSE_INPUT  ? g->inputs[ref->index].dtype
                                                      : NRT_FLOAT32;
      if (code == T_MOVE && out_kind != RT_TAPE_F32 && from == g->registers[in->operands[0].index]) return;
      if (ref->kind == NRT_FUSE_REGISTER) {
        src->kind = RT_TAPE_SLOT;
        src->index = (uint8_t)slot_of[ref->index];
      } else if (ref->kind == NRT_FUSE_INPUT) {
        src->kind = RT_TAPE_INPUT;
        src->index = (uint8_t)ref->index;
      } else {
        if (code == T_MOVE) return; /* a constant register: leave it to the kernels */
        /* As the loop capture converts an immediate to the loop's dtype. */
        src->kind = RT_TAPE_IMM;
        if ((unsigned)ref->dtype >= NRT_DTYPE_COUNT || !rt_convert_loops[NRT_FLOAT32][ref->dtype]) return;
        char *pair[2] = {(char *)&src->imm, (char *)&g->immediates[i][k]};
        int64_t strides[2] = {0, 0};
        rt_convert_loops[NRT_FLOAT32][ref->dtype](pair, strides, 1, NULL);
      }
    }
    /* The result's slot first, so that it is none of the sources'. */
    int dst = in->operands[0].index;
    slot_of[dst] = num_free ? free_slots[--num_free] : num_slots++;
    op->dst = (uint8_t)slot_of[dst];
    for (int k = 1; k <= arity; k++) {
      const nrt_fuse_ref *ref = &in->operands[k];
      int dup = k == 2 && in->operands[1].kind == NRT_FUSE_REGISTER && in->operands[1].index == ref->index;
      if (ref->kind == NRT_FUSE_REGISTER && last_use[ref->index] == i && !dup)
        free_slots[num_free++] = slot_of[ref->index];
    }
    if (last_use[dst] < 0) free_slots[num_free++] = slot_of[dst]; /* never read */
  }
  for (int j = 0; j < g->num_outputs; j++) t->out_slot[j] = (uint8_t)slot_of[g->output_registers[j]];
  t->input_slot0 = num_slots;
  t->num_slots = num_slots + g->num_inputs;
  t->num_ops = g->num_insts;
}

size_t rt_fuse_tape_scratch_bytes(const rt_fuse_tape *t) {
  return (size_t)t->num_slots * RT_TAPE_BLOCK * sizeof(float);
}

/* ---- the block loop ------------------------------------------------------------- */

/* The scalars as the expressions read them (sc->f[k]). */
typedef struct tape_scalars {
  double f[2];
} tape_scalars;

#define UNARY_CASE_(CODE, NS, EXPR)                                          \
  case T_##CODE:                                                             \
    if (sa) {                                                                \
      for (int64_t j = 0; j < n; j++) {                                      \
        float x = pa[j];                                                     \
        d[j] = (float)(EXPR);                                                \
      }                                                                      \
    } else {                                                                 \
      float x = pa[0];                                                       \
      float v = (float)(EXPR);                                               \
      for (int64_t j = 0; j < n; j++) d[j] = v;                              \
    }                                                                        \
    break;

#define BINARY_CASE_(CODE, NS, EXPR)                                         \
  case T_##CODE:                                                             \
    if (sa && sb) {                                                          \
      for (int64_t j = 0; j < n; j++) {                                      \
        float a = pa[j], b = pb[j];                                          \
        d[j] = (float)(EXPR);                                                \
      }                                                                      \
    } else if (sa) {                                                         \
      const float bv = pb[0];                                                \
      for (int64_t j = 0; j < n; j++) {                                      \
        float a = pa[j], b = bv;                                             \
        d[j] = (float)(EXPR);                                                \
      }                                                                      \
    } else if (sb) {                                                         \
      const float av = pa[0];                                                \
      for (int64_t j = 0; j < n; j++) {                                      \
        float a = av, b = pb[j];                                             \
        d[j] = (float)(EXPR);                                                \
      }                                                                      \
    } else {                                                                 \
      float a = pa[0], b = pb[0];                                            \
      float v = (float)(EXPR);                                               \
      for (int64_t j = 0; j < n; j++) d[j] = v;                              \
    }                                                                        \
    break;

/* The ops with a tame twin (vmath.h): a block whose largest |x| (by bits:
 * NaN and infinity above every finite value) is at most BOUND runs TWIN,
 * EXPR's bits there without its clamps and split scalings, as the eager
 * kernels (RT_UNARY_LOOP_TAME) and the generated code (codegen.c) do; so
 * the op fused costs what it costs alone. */
#define TAPE_TAME(X)                                             \
  X(SIGMOID, RT_VM_SIGMOID_TAME_BITS, rt_vm_sigmoidf_tame(x))    \
  X(GELU, RT_VM_GELU_TAME_BITS, rt_vm_geluf_tame(x))             \
  X(SILU, RT_VM_SILU_TAME_BITS, rt_vm_siluf_tame(x))

#define TAME_CASE_(CODE, BOUND, TWIN)                             \
  case T_##CODE:                                                  \
    if (rt_vm_max_abs_bits(pa, n) > (BOUND)) return 0;            \
    for (int64_t j = 0; j < n; j++) {                             \
      float x = pa[j];                                            \
      d[j] = (TWIN);                                              \
    }                                                             \
    return 1;

/* Runs a unary op of TAPE_TAME on n values of pa by its twin if the block
 * allows; 0 where the general expression must run. */
static inline __attribute__((always_inline)) int tame_block(int code, float *restrict d,
                                                            const float *restrict pa, int64_t n) {
  switch (code) {
    TAPE_TAME(TAME_CASE_)
    default:
      return 0;
  }
}
#undef TAME_CASE_

/* A float32 value rounded to a 16-bit kind and back, as the unfused op's
 * store and the next op's load leave it (scalar_types.h's converters: the
 * bfloat16 one has no branch and vectorises). */
static inline __attribute__((always_inline)) float round_to(int kind, float v) {
  return kind == RT_TAPE_BF16 ? rt_bfloat16_to_float(rt_bfloat16_from_float(v))
                              : kind == RT_TAPE_F16 ? rt_half_to_float(rt_half_from_float(v)) : v;
}

static inline __attribute__((always_inline)) void round_block(int kind, float *restrict d, int64_t n) {
  if (kind == RT_TAPE_BF16) {
    for (int64_t j = 0; j < n; j++) d[j] = rt_bfloat16_to_float(rt_bfloat16_from_float(d[j]));
  } else if (kind == RT_TAPE_F16) {
    for (int64_t j = 0; j < n; j++) d[j] = rt_half_to_float(rt_half_from_float(d[j]));
  }
}

/* Every op of the tape over n elements (n <= RT_TAPE_BLOCK): slots are the
 * block registers, in[k] input k's elements (stride in_step[k]: 1, or 0
 * for one value). last_dst, when not NULL, is where the last op writes
 * instead of its slot (the output, saving a copy through the slot). */
RT_SIMD_VOID(tape_block, (const rt_fuse_tape *t, float *slots, const float *const *in,
                          const uint8_t *in_step, int64_t n, float *last_dst),
             (t, slots, in, in_step, n, last_dst)) {
  for (int i = 0; i < t->num_ops; i++) {
    const rt_tape_op *op = &t->ops[i];
    float *restrict d = i == t->num_ops - 1 && last_dst ? last_dst : slots + (size_t)op->dst * RT_TAPE_BLOCK;
    const float *src[2];
    int step[2];
    for (int k = 0; k < 2; k++) {
      const rt_tape_src *s = &op->src[k];
      if (s->kind == RT_TAPE_SLOT) {
        src[k] = slots + (size_t)s->index * RT_TAPE_BLOCK, step[k] = 1;
      } else if (s->kind == RT_TAPE_INPUT) {
        src[k] = in[s->index], step[k] = in_step[s->index];
      } else {
        src[k] = &s->imm, step[k] = 0;
      }
    }
    const float *restrict pa = src[0];
    const float *restrict pb = src[1];
    int sa = step[0], sb = step[1];
    (void)sb;
    const tape_scalars sc_copy = {{op->scalars[0], op->scalars[1]}};
    const tape_scalars *sc = &sc_copy;
    if (sa && op->num_src == 1 && tame_block(op->code, d, pa, n)) {
      round_block(op->round, d, n);
      continue;
    }
    switch (op->code) {
      case T_MOVE:
        if (sa) {
          memcpy(d, pa, (size_t)n * sizeof(float));
        } else {
          for (int64_t j = 0; j < n; j++) d[j] = pa[0];
        }
        break;
      TAPE_UNARY(UNARY_CASE_)
      TAPE_BINARY(BINARY_CASE_)
      default:
        break;
    }
    round_block(op->round, d, n);
  }
}

/* Whether every tensor of b steps by cols elements from row to row: the
 * block is then one row of rows * cols elements. */
static int box_is_flat(const struct nrt_fuse_group *g, const rt_fuse_box *b) {
  for (int k = 0; k < g->num_inputs; k++)
    if (b->in_rs[k] != b->cols * b->in_cs[k]) return 0;
  for (int j = 0; j < g->num_outputs; j++)
    if (b->out_rs[j] != b->cols * b->out_cs[j]) return 0;
  return 1;
}

/* The output the last op may write directly in this block, or -1: the
 * only output of its slot, contiguous, and overlapping none of the block's
 * inputs (an in-place group writes over the input it still reads). */
static int direct_output_of(const struct nrt_fuse_group *g, const rt_fuse_box *b, int64_t n, int64_t r,
                            int64_t c0) {
  const rt_fuse_tape *t = &g->tape;
  if (t->num_ops == 0 || t->has16) return -1; /* 16-bit: stored converted from the slot */
  const int slot = t->ops[t->num_ops - 1].dst;
  int found = -1;
  for (int j = 0; j < g->num_outputs; j++) {
    if (t->out_slot[j] != slot) continue;
    if (found >= 0 || b->out_cs[j] != 1) return -1;
    found = j;
  }
  if (found < 0) return -1;
  const char *lo = (const char *)((const float *)b->out[found] + r * b->out_rs[found] + c0);
  const char *hi = lo + n * (int64_t)sizeof(float);
  for (int k = 0; k < g->num_inputs; k++) {
    /* input k's elements of this block span [first, last] */
    int64_t cs = b->in_cs[k];
    const char *first = (const char *)((const float *)b->in[k] + r * b->in_rs[k] + c0 * cs);
    const char *last = first + (n - 1) * cs * (int64_t)sizeof(float);
    if (cs < 0) {
      const char *swap = first;
      first = last;
      last = swap;
    }
    if (first < hi && last + sizeof(float) > lo) return -1;
  }
  return found;
}

/* m 16-bit values of a kind, cs apart, as float32 (exact); compiled for
 * each ISA level, as the conversions vectorise. */
RT_SIMD_VOID(load16, (int kind, float *restrict d, const uint16_t *h, int64_t m, int64_t cs),
             (kind, d, h, m, cs)) {
  if (kind == RT_TAPE_BF16) {
    if (cs == 1)
      for (int64_t j = 0; j < m; j++) d[j] = rt_bfloat16_to_float(h[j]);
    else
      for (int64_t j = 0; j < m; j++) d[j] = rt_bfloat16_to_float(h[j * cs]);
  } else {
    if (cs == 1)
      for (int64_t j = 0; j < m; j++) d[j] = rt_half_to_float(h[j]);
    else
      for (int64_t j = 0; j < m; j++) d[j] = rt_half_to_float(h[j * cs]);
  }
}

/* n block values stored as a 16-bit kind, cs apart. */
RT_SIMD_VOID(store16, (int kind, uint16_t *o, const float *restrict v, int64_t n, int64_t cs),
             (kind, o, v, n, cs)) {
  if (kind == RT_TAPE_BF16) {
    if (cs == 1)
      for (int64_t j = 0; j < n; j++) o[j] = rt_bfloat16_from_float(v[j]);
    else
      for (int64_t j = 0; j < n; j++) o[j * cs] = rt_bfloat16_from_float(v[j]);
  } else {
    if (cs == 1)
      for (int64_t j = 0; j < n; j++) o[j] = rt_half_from_float(v[j]);
    else
      for (int64_t j = 0; j < n; j++) o[j * cs] = rt_half_from_float(v[j]);
  }
}

void rt_fuse_tape_run(const struct nrt_fuse_group *g, const rt_fuse_box *b, char *scratch) {
  const rt_fuse_tape *t = &g->tape;
  float *slots = (float *)scratch;
  int64_t rows = b->rows, cols = b->cols;
  if (rows > 1 && box_is_flat(g, b)) cols *= rows, rows = 1;
  const float *in[NRT_FUSE_MAX_INPUTS];
  uint8_t in_step[NRT_FUSE_MAX_INPUTS];
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t c0 = 0; c0 < cols; c0 += RT_TAPE_BLOCK) {
      int64_t n = cols - c0 < RT_TAPE_BLOCK ? cols - c0 : RT_TAPE_BLOCK;
      for (int k = 0; k < g->num_inputs; k++) {
        int64_t cs = b->in_cs[k];
        if (t->in_kind[k] != RT_TAPE_F32) { /* converted into its slot */
          const uint16_t *h = (const uint16_t *)b->in[k] + r * b->in_rs[k] + c0 * cs;
          float *gather = slots + (size_t)(t->input_slot0 + k) * RT_TAPE_BLOCK;
          int64_t m = cs == 0 ? 1 : n;
          load16(t->in_kind[k], gather, h, m, cs);
          in[k] = gather, in_step[k] = (uint8_t)(m > 1);
          continue;
        }
        const float *p = (const float *)b->in[k] + r * b->in_rs[k] + c0 * cs;
        if (cs == 0 || cs == 1 || n == 1) {
          in[k] = p, in_step[k] = (uint8_t)(cs != 0 && n > 1);
        } else { /* strided: gathered into its slot */
          float *gather = slots + (size_t)(t->input_slot0 + k) * RT_TAPE_BLOCK;
          if (cs == 2) /* a complex tensor's plane: a constant stride the compiler vectorises */
            for (int64_t j = 0; j < n; j++) gather[j] = p[2 * j];
          else
            for (int64_t j = 0; j < n; j++) gather[j] = p[j * cs];
          in[k] = gather, in_step[k] = 1;
        }
      }
      float *direct = NULL;
      int direct_output = direct_output_of(g, b, n, r, c0);
      if (direct_output >= 0) direct = (float *)b->out[direct_output] + r * b->out_rs[direct_output] + c0;
      tape_block(t, slots, in, in_step, n, direct);
      for (int j = 0; j < g->num_outputs; j++) {
        if (j == direct_output) continue;
        const float *v = slots + (size_t)t->out_slot[j] * RT_TAPE_BLOCK;
        int64_t cs = b->out_cs[j];
        if (t->out_kind[j] != RT_TAPE_F32) {
          store16(t->out_kind[j], (uint16_t *)b->out[j] + r * b->out_rs[j] + c0 * cs, v, n, cs);
          continue;
        }
        float *o = (float *)b->out[j] + r * b->out_rs[j] + c0 * cs;
        rt_tape_store_row(o, v, n, cs);
      }
    }
  }
}

/* ---- the scalar twin ------------------------------------------------------------ */

#define UNARY_SCALAR_(CODE, NS, EXPR) \
  case T_##CODE: {                    \
    float x = a_value;                \
    v[op->dst] = (float)(EXPR);       \
    break;                            \
  }
#define BINARY_SCALAR_(CODE, NS, EXPR) \
  case T_##CODE: {                     \
    float a = a_value, b = b_value;    \
    v[op->dst] = (float)(EXPR);        \
    break;                             \
  }

static float scalar_source(const rt_tape_src *s, const float *v, const float *const *in) {
  return s->kind == RT_TAPE_SLOT ? v[s->index] : s->kind == RT_TAPE_INPUT ? *in[s->index] : s->imm;
}

/* Not vectorised: the twin stays one element at a time at every level. */
__attribute__((optimize("no-tree-vectorize"))) void rt_fuse_tape_run_reference(
    const struct nrt_fuse_group *g, const rt_fuse_box *b) {
  const rt_fuse_tape *t = &g->tape;
  float v[NRT_FUSE_MAX_REGISTERS + NRT_FUSE_MAX_INPUTS];
  const float *in[NRT_FUSE_MAX_INPUTS];
  float in16[NRT_FUSE_MAX_INPUTS];
  for (int64_t r = 0; r < b->rows; r++)
    for (int64_t c = 0; c < b->cols; c++) {
      for (int k = 0; k < g->num_inputs; k++) {
        if (t->in_kind[k] != RT_TAPE_F32) {
          uint16_t h = ((const uint16_t *)b->in[k])[r * b->in_rs[k] + c * b->in_cs[k]];
          in16[k] = t->in_kind[k] == RT_TAPE_BF16 ? rt_bfloat16_to_float(h) : rt_half_to_float(h);
          in[k] = &in16[k];
        } else {
          in[k] = (const float *)b->in[k] + r * b->in_rs[k] + c * b->in_cs[k];
        }
      }
      for (int i = 0; i < t->num_ops; i++) {
        const rt_tape_op *op = &t->ops[i];
        float a_value = scalar_source(&op->src[0], v, in);
        float b_value = op->num_src > 1 ? scalar_source(&op->src[1], v, in) : 0.0f;
        const tape_scalars sc_copy = {{op->scalars[0], op->scalars[1]}};
        const tape_scalars *sc = &sc_copy;
        (void)sc;
        (void)b_value;
        switch (op->code) {
          case T_MOVE:
            v[op->dst] = a_value;
            break;
          TAPE_UNARY(UNARY_SCALAR_)
          TAPE_BINARY(BINARY_SCALAR_)
          default:
            break;
        }
        v[op->dst] = round_to(op->round, v[op->dst]);
      }
      for (int j = 0; j < g->num_outputs; j++) {
        const int64_t at = r * b->out_rs[j] + c * b->out_cs[j];
        const float value = v[t->out_slot[j]];
        if (t->out_kind[j] == RT_TAPE_BF16)
          ((uint16_t *)b->out[j])[at] = rt_bfloat16_from_float(value);
        else if (t->out_kind[j] == RT_TAPE_F16)
          ((uint16_t *)b->out[j])[at] = rt_half_from_float(value);
        else
          ((float *)b->out[j])[at] = value;
      }
    }
}
