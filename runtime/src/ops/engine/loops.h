/* Generators of typed inner loops for pointwise kernels.
 *
 * Each macro defines a static rt_inner_loop computing EXPR per element, with
 * fast paths for contiguous runs and for broadcast operands (stride 0) that
 * the compiler vectorises, compiled for each ISA level (RT_SIMD_VOID).
 * In EXPR the inputs are x (unary) or a, b (binary), c (ternary), and sc
 * points at the op's rt_scalars. EXPR may set rt_fault = 1 to report invalid
 * data (integer division by zero); the loop then raises the fault flag of its
 * rt_loop_ctx, which the pointwise driver turns into the op's error.
 */
#ifndef NEURONRT_OPS_LOOPS_H
#define NEURONRT_OPS_LOOPS_H

#include <stdatomic.h>
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/engine/half_convert.h"
#include "ops/engine/scalar_types.h"

/* The ctx of pointwise loops: the scalars first (loops read ctx as an
 * rt_scalars), then the fault flag, shared by the threads of one op. */
typedef struct rt_loop_ctx {
  rt_scalars sc;
  atomic_int fault;
} rt_loop_ctx;

static inline void rt_loop_raise(void *ctx) {
  atomic_store_explicit(&((rt_loop_ctx *)ctx)->fault, 1, memory_order_relaxed);
}

#define RT_LOAD(T, p) (*(const T *)(p))
#define RT_STORE(T, p, v) (*(T *)(p) = (v))

/* The scalars are copied so that the compiler knows reading them cannot
 * fault or alias the output: a select that reads one only on some lanes
 * still vectorises. */
#define RT_LOOP_BEGIN_                                   \
  const rt_scalars rt_scalars_copy = *(const rt_scalars *)ctx; \
  const rt_scalars *sc = &rt_scalars_copy;               \
  int rt_fault = 0;                                      \
  (void)sc;                                              \
  (void)rt_fault;

#define RT_LOOP_END_ \
  if (rt_fault) rt_loop_raise(ctx);

#define RT_UNARY_LOOP(NAME, TO, TI, EXPR)                                          \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),  \
                     (data, strides, n, ctx)) {                                    \
    RT_LOOP_BEGIN_                                                                 \
    if (strides[0] == (int64_t)sizeof(TO) && strides[1] == (int64_t)sizeof(TI)) { \
      TO *o = (TO *)data[0];                                                       \
      const TI *in = (const TI *)data[1];                                          \
      for (int64_t i = 0; i < n; i++) {                                            \
        TI x = in[i];                                                              \
        (void)x;                                                                   \
        o[i] = (TO)(EXPR);                                                         \
      }                                                                            \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                            \
        TI x = RT_LOAD(TI, data[1] + i * strides[1]);                              \
        (void)x;                                                                   \
        RT_STORE(TO, data[0] + i * strides[0], (TO)(EXPR));                        \
      }                                                                            \
    }                                                                              \
    RT_LOOP_END_                                                                   \
  }

/* One contiguous-output run where a and b each advance by SA, SB (0 or 1);
 * inputs are read through INA and INB, the result stored through OUT. */
#define RT_BINARY_RUN_(TO, TC, SA, SB, INA, INB, OUT, EXPR) \
  for (int64_t i = 0; i < n; i++) {                         \
    TC a = INA(pa[i * (SA)]), b = INB(pb[i * (SB)]);        \
    o[i] = OUT(EXPR);                                       \
  }

/* A binary loop whose inputs a and b are stored as TA and TB and computed
 * as TC (INA and INB convert one element), with the result converted by
 * OUT to TO. */
#define RT_BINARY_LOOP_MIXED(NAME, TO, TA, TB, TC, INA, INB, OUT, EXPR)                        \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),               \
                     (data, strides, n, ctx)) {                                                 \
    RT_LOOP_BEGIN_                                                                              \
    TO *o = (TO *)data[0];                                                                      \
    const TA *pa = (const TA *)data[1];                                                         \
    const TB *pb = (const TB *)data[2];                                                         \
    const int64_t wo = (int64_t)sizeof(TO), wa = (int64_t)sizeof(TA), wb = (int64_t)sizeof(TB); \
    if (strides[0] == wo && strides[1] == wa && strides[2] == wb) {                             \
      RT_BINARY_RUN_(TO, TC, 1, 1, INA, INB, OUT, EXPR)                                         \
    } else if (strides[0] == wo && strides[1] == wa && strides[2] == 0) {                       \
      RT_BINARY_RUN_(TO, TC, 1, 0, INA, INB, OUT, EXPR)                                         \
    } else if (strides[0] == wo && strides[1] == 0 && strides[2] == wb) {                       \
      RT_BINARY_RUN_(TO, TC, 0, 1, INA, INB, OUT, EXPR)                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                         \
        TC a = INA(RT_LOAD(TA, data[1] + i * strides[1]));                                      \
        TC b = INB(RT_LOAD(TB, data[2] + i * strides[2]));                                      \
        RT_STORE(TO, data[0] + i * strides[0], OUT(EXPR));                                      \
      }                                                                                         \
    }                                                                                           \
    RT_LOOP_END_                                                                                \
  }

/* Inputs both stored as TI, converted by IN. */
#define RT_BINARY_LOOP_CVT(NAME, TO, TI, TC, IN, OUT, EXPR) \
  RT_BINARY_LOOP_MIXED(NAME, TO, TI, TI, TC, IN, IN, OUT, EXPR)

#define RT_BINARY_LOOP(NAME, TO, TI, EXPR) RT_BINARY_LOOP_CVT(NAME, TO, TI, TI, , (TO), EXPR)

/* A float16 binary loop, a and b stored as TA and TB (uint16_t float16
 * data, or a float32 number broadcast with stride 0) and read through INA
 * and INB: contiguous runs are converted in blocks of RT_F16_BLOCK by the
 * CPU's instructions (half_convert.h), EXPR computed over the block in
 * float (vectorised), the results converted back; the data pass through
 * memory once, the block stays in L1. Other runs go element by element in
 * C. The bits are those of the C conversions in registers. */
#define RT_F16_BLOCK 256
#define RT_F16_BLOCKABLE_(T, s) ((s) == 0 || ((s) == 2 && sizeof(T) == 2))
#define RT_BINARY_LOOP_F16(NAME, TA, TB, INA, INB, EXPR)                                        \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),               \
                     (data, strides, n, ctx)) {                                                 \
    RT_LOOP_BEGIN_                                                                              \
    if (strides[0] != 2 || !RT_F16_BLOCKABLE_(TA, strides[1]) || !RT_F16_BLOCKABLE_(TB, strides[2])) { \
      for (int64_t i = 0; i < n; i++) {                                                         \
        float a = INA(RT_LOAD(TA, data[1] + i * strides[1]));                                   \
        float b = INB(RT_LOAD(TB, data[2] + i * strides[2]));                                   \
        RT_STORE(uint16_t, data[0] + i * strides[0], rt_half_from_float(EXPR));                 \
      }                                                                                         \
    } else {                                                                                    \
      float ta[RT_F16_BLOCK], tb[RT_F16_BLOCK], to[RT_F16_BLOCK];                               \
      uint16_t *o = (uint16_t *)data[0];                                                        \
      const TA *pa = (const TA *)data[1];                                                       \
      const TB *pb = (const TB *)data[2];                                                       \
      const int64_t fill = n < RT_F16_BLOCK ? n : RT_F16_BLOCK;                                 \
      if (strides[1] == 0)                                                                      \
        for (int64_t j = 0; j < fill; j++) ta[j] = INA(pa[0]);                                  \
      if (strides[2] == 0)                                                                      \
        for (int64_t j = 0; j < fill; j++) tb[j] = INB(pb[0]);                                  \
      for (int64_t c0 = 0; c0 < n; c0 += RT_F16_BLOCK) {                                        \
        const int64_t m = n - c0 < RT_F16_BLOCK ? n - c0 : RT_F16_BLOCK;                        \
        if (strides[1]) rt_half_block_to_float(ta, (const uint16_t *)(const void *)(pa + c0), m); \
        if (strides[2]) rt_half_block_to_float(tb, (const uint16_t *)(const void *)(pb + c0), m); \
        for (int64_t j = 0; j < m; j++) {                                                       \
          float a = ta[j], b = tb[j];                                                           \
          to[j] = (EXPR);                                                                       \
        }                                                                                       \
        rt_half_block_from_float(o + c0, to, m);                                                \
      }                                                                                         \
    }                                                                                           \
    RT_LOOP_END_                                                                                \
  }

/* Binary loops on float16 (NAME_f16n) and bfloat16 (NAME_bf16n) storage,
 * computing EXPR in float with each element converted in registers
 * (bfloat16) or in L1 blocks (float16, RT_BINARY_LOOP_F16): the same
 * numbers as the engine's conversion through buffers, at the cost of one
 * pass over memory. */
#define RT_BINARY_LOOPS16(NAME, EXPR)                                                            \
  RT_BINARY_LOOP_CVT(NAME##_bf16n, uint16_t, uint16_t, float, rt_bfloat16_to_float,             \
                     rt_bfloat16_from_float, EXPR)                                              \
  RT_BINARY_LOOP_F16(NAME##_f16n, uint16_t, uint16_t, rt_half_to_float, rt_half_to_float, EXPR)

/* The same with one operand a float32 number (a broadcast value, stride 0)
 * and the other 16-bit, converted in registers: b the number in
 * NAME_bf16nf / NAME_f16nf, a in NAME_bf16fn / NAME_f16fn (one type per
 * macro, _BF16 or _F16). PyTorch's CPU kernels read a Python number in
 * float32, not rounded to the 16-bit type (x * 0.1 is x times 0.1f,
 * rounded once). */
#define RT_F32_AS_IS_(v) (v)
#define RT_BINARY_LOOPS16_NUMBER_(NAME, TAG, TO_FLOAT, FROM_FLOAT, EXPR)                         \
  RT_BINARY_LOOP_MIXED(NAME##_##TAG##nf, uint16_t, uint16_t, float, float, TO_FLOAT, RT_F32_AS_IS_, \
                       FROM_FLOAT, EXPR)                                                         \
  RT_BINARY_LOOP_MIXED(NAME##_##TAG##fn, uint16_t, float, uint16_t, float, RT_F32_AS_IS_, TO_FLOAT, \
                       FROM_FLOAT, EXPR)
#define RT_BINARY_LOOPS16_NUMBER_BF16(NAME, EXPR) \
  RT_BINARY_LOOPS16_NUMBER_(NAME, bf16, rt_bfloat16_to_float, rt_bfloat16_from_float, EXPR)
#define RT_BINARY_LOOPS16_NUMBER_F16(NAME, EXPR)                                     \
  RT_BINARY_LOOP_F16(NAME##_f16nf, uint16_t, float, rt_half_to_float, RT_F32_AS_IS_, EXPR) \
  RT_BINARY_LOOP_F16(NAME##_f16fn, float, uint16_t, RT_F32_AS_IS_, rt_half_to_float, EXPR)
#define RT_BINARY_LOOPS16_NUMBER(NAME, EXPR)   \
  RT_BINARY_LOOPS16_NUMBER_BF16(NAME, EXPR)    \
  RT_BINARY_LOOPS16_NUMBER_F16(NAME, EXPR)

#define RT_TERNARY_RUN_(TO, TA, TB, TC, SA, SB, SC, EXPR)           \
  for (int64_t i = 0; i < n; i++) {                                 \
    TA a = pa[i * (SA)];                                            \
    TB b = pb[i * (SB)];                                            \
    TC c = pc[i * (SC)];                                            \
    o[i] = (TO)(EXPR);                                              \
  }

/* Fast paths: all inputs contiguous, or one or two of them broadcast
 * (where with a scalar branch, masked_fill, clamp with scalar bounds). */
#define RT_TERNARY_LOOP(NAME, TO, TA, TB, TC, EXPR)                                     \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),       \
                     (data, strides, n, ctx)) {                                         \
    RT_LOOP_BEGIN_                                                                      \
    TO *o = (TO *)data[0];                                                              \
    const TA *pa = (const TA *)data[1];                                                 \
    const TB *pb = (const TB *)data[2];                                                 \
    const TC *pc = (const TC *)data[3];                                                 \
    int ka = strides[1] == (int64_t)sizeof(TA) ? 1 : strides[1] == 0 ? 0 : 2;           \
    int kb = strides[2] == (int64_t)sizeof(TB) ? 1 : strides[2] == 0 ? 0 : 2;           \
    int kc = strides[3] == (int64_t)sizeof(TC) ? 1 : strides[3] == 0 ? 0 : 2;           \
    int key = strides[0] == (int64_t)sizeof(TO) ? ka * 100 + kb * 10 + kc : -1;         \
    if (key == 111) {                                                                   \
      RT_TERNARY_RUN_(TO, TA, TB, TC, 1, 1, 1, EXPR)                                    \
    } else if (key == 110) {                                                            \
      RT_TERNARY_RUN_(TO, TA, TB, TC, 1, 1, 0, EXPR)                                    \
    } else if (key == 101) {                                                            \
      RT_TERNARY_RUN_(TO, TA, TB, TC, 1, 0, 1, EXPR)                                    \
    } else if (key == 100) {                                                            \
      RT_TERNARY_RUN_(TO, TA, TB, TC, 1, 0, 0, EXPR)                                    \
    } else {                                                                            \
      for (int64_t i = 0; i < n; i++) {                                                 \
        TA a = RT_LOAD(TA, data[1] + i * strides[1]);                                   \
        TB b = RT_LOAD(TB, data[2] + i * strides[2]);                                   \
        TC c = RT_LOAD(TC, data[3] + i * strides[3]);                                   \
        RT_STORE(TO, data[0] + i * strides[0], (TO)(EXPR));                             \
      }                                                                                 \
    }                                                                                   \
    RT_LOOP_END_                                                                        \
  }

/* C types of the compute dtypes, for the generators. */
#define RT_NUMERIC_TYPES(X) \
  X(NRT_UINT8, u8, uint8_t) \
  X(NRT_INT8, i8, int8_t)   \
  X(NRT_INT16, i16, int16_t) \
  X(NRT_INT32, i32, int32_t) \
  X(NRT_INT64, i64, int64_t) \
  X(NRT_FLOAT32, f32, float) \
  X(NRT_FLOAT64, f64, double)

#define RT_INTEGER_TYPES(X) \
  X(NRT_UINT8, u8, uint8_t) \
  X(NRT_INT8, i8, int8_t)   \
  X(NRT_INT16, i16, int16_t) \
  X(NRT_INT32, i32, int32_t) \
  X(NRT_INT64, i64, int64_t)

#define RT_FLOAT_TYPES(X)    \
  X(NRT_FLOAT32, f32, float) \
  X(NRT_FLOAT64, f64, double)

/* Integer arithmetic that wraps like PyTorch's, without C's undefined
 * signed overflow: computed in an unsigned type at least as wide as int
 * (uint32_t, or uint64_t for 64-bit values) and truncated to T. */
#define RT_WRAP(T, expr) ((T)(uint64_t)(expr))
#define RT_U64(v) ((uint64_t)(int64_t)(v))
#define RT_UW(v) _Generic((v), int64_t: (uint64_t)(v), default: (uint32_t)(v))

#endif
