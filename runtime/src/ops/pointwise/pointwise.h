/* Shared entry points of the pointwise kernel files. */
#ifndef NEURONRT_OPS_POINTWISE_INTERNAL_H
#define NEURONRT_OPS_POINTWISE_INTERNAL_H

#include "internal.h"
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/engine/loops.h"
#include "ops/engine/scalar_types.h"

/* Loops of one op indexed by compute dtype; NULL where unsupported. The
 * float16 and bfloat16 slots are optional: when empty, the float32 loop
 * serves them. */
typedef rt_inner_loop rt_loop_table[NRT_DTYPE_COUNT];

/* Runs op with the loop for its compute dtype. Every input is presented in
 * the compute dtype; outputs too, unless out_dtype >= 0 (e.g. NRT_BOOL for
 * comparisons). Fails naming the op and dtype when no loop exists. */
nrt_status rt_run_pointwise(const nrt_op *op, const rt_loop_table loops, int out_dtype);

/* A 16-bit NaN as rounding a float32 back leaves it (scalar_types.h): any
 * bfloat16 NaN becomes 0x7fc0, a float16 NaN keeps its sign with 0x7e00;
 * other values pass. For kernels that work on the bits yet must give the
 * converting path's results. */
#define RT_BF16_AS_ROUNDED(x) (uint16_t)(((x) & 0x7fffu) > 0x7f80u ? 0x7fc0u : (x))
#define RT_F16_AS_ROUNDED(x) (uint16_t)(((x) & 0x7fffu) > 0x7c00u ? ((x) & 0x8000u) | 0x7e00u : (x))

/* As rt_run_pointwise, but a float16/bfloat16 op whose operands are all
 * stored in the compute dtype (tensors, or immediates already rounded to
 * it) runs on them directly with f16 / bf16 (RT_BINARY_LOOPS16),
 * converting in registers rather than through buffers. */
nrt_status rt_run_pointwise16(const nrt_op *op, const rt_loop_table loops, rt_inner_loop bf16,
                              rt_inner_loop f16);

/* The in-register loops of a binary op in one 16-bit type: both inputs
 * 16-bit (nn), or b (nf) or a (fn) a float32 number
 * (RT_BINARY_LOOPS16_NUMBER); NULL where there is none. */
typedef struct rt_loops16 {
  rt_inner_loop nn, nf, fn;
} rt_loops16;

/* As rt_run_pointwise16, but where the type has nf and fn loops a binary
 * op with an immediate input runs in registers too: one already in the
 * 16-bit type as a broadcast operand of nn, one of another dtype (PyTorch
 * reads mul's and div's number in float32, not rounded to the 16-bit
 * type) through nf / fn with the number converted to float32 once, as the
 * general path converts it. Everything else takes the general path,
 * rt_run_pointwise: the twin of these loops. */
nrt_status rt_run_pointwise16_numbers(const nrt_op *op, const rt_loop_table loops,
                                      const rt_loops16 *bf16, const rt_loops16 *f16);
/* add, mul and div through the general path: the twins of their 16-bit
 * loops (pointwise_binary.c), for the tests. */
nrt_status rt_kernel_add_reference(const nrt_op *op);
nrt_status rt_kernel_mul_reference(const nrt_op *op);
nrt_status rt_kernel_div_reference(const nrt_op *op);

/* The loop for op's compute dtype from loops, or NULL after recording the
 * NRT_ERROR_UNSUPPORTED message. */
rt_inner_loop rt_pointwise_loop(const nrt_op *op, const rt_loop_table loops);

/* The general driver: checks the operands, then runs loop with operand k
 * presented in want[k] and ctx an rt_loop_ctx holding the op's scalars.
 * A fault raised by the loop fails the op with NRT_ERROR_ARITHMETIC. */
nrt_status rt_run_pointwise_as(const nrt_op *op, rt_inner_loop loop, const nrt_dtype *want);

/* True if operand k is a single value broadcast over the whole op. */
int rt_operand_is_scalar(const nrt_op *op, int k);

/* The value of operand k read as a double, if it is an immediate. */
int rt_immediate_value(const nrt_op *op, int k, double *value);

/* d rounded to float toward zero, with the last bit set if that lost
 * anything (round to odd). A float so rounded rounds (to nearest even) to
 * any type at least two bits narrower exactly as d itself would: rounding
 * d to float first (to nearest) can land on a 16-bit midpoint that d was
 * not on, and the second rounding then goes the wrong way. */
static inline float rt_float_round_to_odd(double d) {
  float f = (float)d;
  if (!isfinite(f) || (double)f == d) return f;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (fabs((double)f) > fabs(d)) bits -= 1; /* one step toward zero */
  bits |= 1u;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* out[i] = table[in[i]] over n 16-bit values (data and byte strides as an
 * inner loop's, output first). Contiguous runs take four per step, the
 * results packed into one 64-bit store (lookup16.c). One element per step
 * (two loads, a store, a branch) ran at 0.33 ns per element on a Zen 4,
 * and at 0.55 where the compiler placed that small loop across a 64-byte
 * line: bfloat16 GELU took 1.75x SiLU's time through the same code. The
 * reference twin, one element at a time, serves strided runs. */
void rt_lookup16(const uint16_t *table, char **data, const int64_t *strides, int64_t n);
void rt_lookup16_reference(const uint16_t *table, char **data, const int64_t *strides, int64_t n);

/* A unary op on float16/bfloat16 as a table: such an input has 2^16
 * possible values, so each result is computed once per type (by FN, in
 * double, then rounded once to the type) on first use, correctly rounded,
 * and the op costs what a copy costs. Defines
 *   static nrt_status NAME##_16bit(const nrt_op *op)
 * running op (operands (out, x), compute dtype float16 or bfloat16) through
 * the table; operands of other dtypes are converted to and from it. */
#define RT_DEFINE_TABLE16(NAME, FN)                                                      \
  static uint16_t NAME##_bf16_table[1 << 16], NAME##_f16_table[1 << 16];                 \
  static pthread_once_t NAME##_tables_once = PTHREAD_ONCE_INIT;                          \
  static void NAME##_build_tables(void) {                                                \
    for (uint32_t bits = 0; bits < (1u << 16); bits++) {                                 \
      double bf = rt_bfloat16_to_float((uint16_t)bits), h = rt_half_to_float((uint16_t)bits); \
      NAME##_bf16_table[bits] = rt_bfloat16_from_float(rt_float_round_to_odd(FN(bf)));   \
      NAME##_f16_table[bits] = rt_half_from_float(rt_float_round_to_odd(FN(h)));         \
    }                                                                                    \
  }                                                                                      \
  static void NAME##_bf16_lookup(char **data, const int64_t *strides, int64_t n, void *ctx) { \
    (void)ctx;                                                                           \
    rt_lookup16(NAME##_bf16_table, data, strides, n);                                    \
  }                                                                                      \
  static void NAME##_f16_lookup(char **data, const int64_t *strides, int64_t n, void *ctx) { \
    (void)ctx;                                                                           \
    rt_lookup16(NAME##_f16_table, data, strides, n);                                     \
  }                                                                                      \
  static nrt_status NAME##_16bit(const nrt_op *op) {                                     \
    if (op->num_operands != 2)                                                           \
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands (out, x)",        \
                     nrt_op_name(op->code));                                             \
    pthread_once(&NAME##_tables_once, NAME##_build_tables);                              \
    nrt_dtype t = op->compute_dtype;                                                     \
    const nrt_dtype want[2] = {t, t};                                                    \
    return rt_run_pointwise_as(op, t == NRT_BFLOAT16 ? NAME##_bf16_lookup : NAME##_f16_lookup, \
                               want);                                                    \
  }

/* Float32 loops with a tame twin: contiguous runs go in blocks of
 * RT_TAME_BLOCK values; a block whose largest |x| (by bits: NaN and
 * infinity compare above every finite value) is at most BOUND_BITS runs
 * TAME, a cheaper expression with EXPR's bits on that domain (vmath.h's
 * rt_vm_*_tame: no clamps, no split scalings), the other blocks and strided
 * runs EXPR. The block stays in L1 between the check and the loop (as the
 * eager sigmoid and the generated code of fused groups do). The binary form
 * checks b in blocks of BLOCK values; a and b are float32 loaded through
 * IN, results stored through OUT (a float16/bfloat16 loop converts in
 * registers). */
#define RT_TAME_BLOCK 512
#define RT_UNARY_LOOP_TAME(NAME, BOUND_BITS, TAME, EXPR)                                    \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),           \
               (data, strides, n, ctx)) {                                                   \
    (void)ctx;                                                                              \
    if (strides[0] != (int64_t)sizeof(float) || strides[1] != (int64_t)sizeof(float)) {    \
      for (int64_t i = 0; i < n; i++) {                                                     \
        float x = RT_LOAD(float, data[1] + i * strides[1]);                                 \
        RT_STORE(float, data[0] + i * strides[0], (EXPR));                                  \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    float *o = (float *)(void *)data[0];                                                    \
    const float *in = (const float *)(const void *)data[1]; /* may be o (in place) */       \
    for (int64_t c0 = 0; c0 < n; c0 += RT_TAME_BLOCK) {                                     \
      const int64_t m = n - c0 < RT_TAME_BLOCK ? n - c0 : RT_TAME_BLOCK;                    \
      if (rt_vm_max_abs_bits(in + c0, m) <= (BOUND_BITS))                                   \
        for (int64_t j = 0; j < m; j++) {                                                   \
          float x = in[c0 + j];                                                             \
          o[c0 + j] = (TAME);                                                               \
        }                                                                                   \
      else                                                                                  \
        for (int64_t j = 0; j < m; j++) {                                                   \
          float x = in[c0 + j];                                                             \
          o[c0 + j] = (EXPR);                                                               \
        }                                                                                   \
    }                                                                                       \
  }
#define RT_BINARY_LOOP_TAME(NAME, T, IN, OUT, BLOCK, BOUND_BITS, TAME, EXPR)                 \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),           \
               (data, strides, n, ctx)) {                                                   \
    (void)ctx;                                                                              \
    if (strides[0] != (int64_t)sizeof(T) || strides[1] != (int64_t)sizeof(T) ||             \
        strides[2] != (int64_t)sizeof(T)) {                                                 \
      for (int64_t i = 0; i < n; i++) {                                                     \
        float a = IN(RT_LOAD(T, data[1] + i * strides[1]));                                 \
        float b = IN(RT_LOAD(T, data[2] + i * strides[2]));                                 \
        RT_STORE(T, data[0] + i * strides[0], OUT(EXPR));                                   \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    T *o = (T *)(void *)data[0];                                                            \
    const T *pa = (const T *)(const void *)data[1], *pb = (const T *)(const void *)data[2]; \
    for (int64_t c0 = 0; c0 < n; c0 += BLOCK) {                                             \
      const int64_t m = n - c0 < BLOCK ? n - c0 : BLOCK;                                    \
      uint32_t big = 0;                                                                     \
      for (int64_t j = 0; j < m; j++) {                                                     \
        const uint32_t u = rt_vm_bits(IN(pb[c0 + j])) & 0x7fffffffu;                        \
        big = u > big ? u : big;                                                            \
      }                                                                                     \
      if (big <= (BOUND_BITS))                                                              \
        for (int64_t j = 0; j < m; j++) {                                                   \
          float a = IN(pa[c0 + j]), b = IN(pb[c0 + j]);                                     \
          o[c0 + j] = OUT(TAME);                                                            \
        }                                                                                   \
      else                                                                                  \
        for (int64_t j = 0; j < m; j++) {                                                   \
          float a = IN(pa[c0 + j]), b = IN(pb[c0 + j]);                                     \
          o[c0 + j] = OUT(EXPR);                                                            \
        }                                                                                   \
    }                                                                                       \
  }
#define RT_TAME_F32_IN(v) (v)

/* relu through the float32 loop and conversion: the twin of its direct
 * float16/bfloat16 loops (pointwise_unary.c), for the tests. */
nrt_status rt_kernel_relu_reference(const nrt_op *op);
/* threshold_backward with float16/bfloat16 converted in registers: the twin
 * of its threshold-0 loops on the bits (pointwise_activation.c). */
nrt_status rt_kernel_threshold_backward_reference(const nrt_op *op);
/* gcd and lcm by Euclid, one element at a time: the twins of int32's
 * vectorised binary gcd (pointwise_gcd.c). */
nrt_status rt_kernel_gcd_reference(const nrt_op *op);
nrt_status rt_kernel_lcm_reference(const nrt_op *op);
/* float32 logaddexp(2) without the tame blocks (pointwise_special.c). */
nrt_status rt_kernel_logaddexp_reference(const nrt_op *op);
nrt_status rt_kernel_logaddexp2_reference(const nrt_op *op);
/* float32 xlog1py by libm's double log1p per element, the twin of its
 * vmath loop (pointwise_special.c; within XLOG1PY_TWIN_ULP ulp). */
#define XLOG1PY_TWIN_ULP 2
nrt_status rt_kernel_xlog1py_reference(const nrt_op *op);
/* float32 sinc by libm sinf per element, the twin of its tame blocks
 * (pointwise_special.c; within SINC_TWIN_ULP ulp). */
#define SINC_TWIN_ULP 2
nrt_status rt_kernel_sinc_reference(const nrt_op *op);
/* float32 entr by libm logf, the twin of its vmath loop (pointwise_special.c). */
#define ENTR_TWIN_ULP 2
nrt_status rt_kernel_entr_reference(const nrt_op *op);

/* As rt_run_pointwise, but a float16/bfloat16 op of bits16.c's table (abs,
 * neg, sign, hardtanh, threshold, copysign, maximum, minimum; their tensor
 * operands all in the compute dtype) runs on the 16-bit patterns, with the
 * bits of the converting path that loops would take. */
nrt_status rt_run_bits16(const nrt_op *op, const rt_loop_table loops);
/* Such a kernel and its twin rt_kernel_NAME_reference (the converting
 * path), declared below for the tests. */
#define RT_DEFINE_BITS16_KERNEL(NAME, TABLE)                                                        \
  static const rt_loop_table NAME##_loops = TABLE(NAME);                                           \
  nrt_status rt_kernel_##NAME(const nrt_op *op) { return rt_run_bits16(op, NAME##_loops); }        \
  nrt_status rt_kernel_##NAME##_reference(const nrt_op *op) { return rt_run_pointwise(op, NAME##_loops, -1); }
#define RT_BITS16_KERNELS(X) X(abs) X(neg) X(sign) X(hardtanh) X(threshold) X(copysign) X(maximum) X(minimum)
#define RT_DECLARE_BITS16_REFERENCE_(NAME) nrt_status rt_kernel_##NAME##_reference(const nrt_op *op);
RT_BITS16_KERNELS(RT_DECLARE_BITS16_REFERENCE_)
#undef RT_DECLARE_BITS16_REFERENCE_

static inline int rt_is_16bit_float(nrt_dtype t) { return t == NRT_FLOAT16 || t == NRT_BFLOAT16; }


/* Loop tables by dtype family, from loops named NAME_u8 ... NAME_f64, and a
 * kernel that runs such a table. */
#define RT_NUMERIC_TABLE(NAME)                                                \
  {[NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, [NRT_INT16] = NAME##_i16, \
   [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64, [NRT_FLOAT32] = NAME##_f32, \
   [NRT_FLOAT64] = NAME##_f64}
#define RT_FLOAT_TABLE(NAME) {[NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}
/* The same with in-register 16-bit loops NAME_bf16n and NAME_f16n. */
#define RT_DEFINE_TABLE_KERNEL16(NAME, TABLE)                            \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                        \
    static const rt_loop_table loops = TABLE(NAME);                      \
    return rt_run_pointwise16(op, loops, NAME##_bf16n, NAME##_f16n);     \
  }
#define RT_DEFINE_TABLE_KERNEL(NAME, TABLE)          \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {   \
    static const rt_loop_table loops = TABLE(NAME); \
    return rt_run_pointwise(op, loops, -1);         \
  }

#endif
