/* Generators of typed inner loops for pointwise kernels.
 *
 * Each macro defines a static rt_inner_loop computing EXPR per element, with
 * a fast path for contiguous runs (and, for binary loops, for a broadcast
 * operand) that the compiler vectorises, compiled for AVX2 and baseline
 * (RT_SIMD_CLONES). In EXPR the inputs are x (unary) or a, b (binary), c
 * (ternary), and sc points at the op's rt_scalars.
 */
#ifndef NEURONRT_OPS_LOOPS_H
#define NEURONRT_OPS_LOOPS_H

#include <string.h>
#include "elementwise.h"

#define RT_LOAD(T, p) (*(const T *)(p))
#define RT_STORE(T, p, v) (*(T *)(p) = (v))

#define RT_UNARY_LOOP(NAME, TO, TI, EXPR)                                          \
  RT_SIMD_CLONES static void NAME(char **data, const int64_t *strides, int64_t n,  \
                                  void *ctx) {                                     \
    const rt_scalars *sc = ctx;                                                    \
    (void)sc;                                                                      \
    if (strides[0] == (int64_t)sizeof(TO) && strides[1] == (int64_t)sizeof(TI)) { \
      TO *o = (TO *)data[0];                                                       \
      const TI *in = (const TI *)data[1];                                          \
      for (int64_t i = 0; i < n; i++) {                                            \
        TI x = in[i];                                                              \
        o[i] = (TO)(EXPR);                                                         \
      }                                                                            \
      return;                                                                      \
    }                                                                              \
    for (int64_t i = 0; i < n; i++) {                                              \
      TI x = RT_LOAD(TI, data[1] + i * strides[1]);                                \
      RT_STORE(TO, data[0] + i * strides[0], (TO)(EXPR));                          \
    }                                                                              \
  }

#define RT_BINARY_LOOP(NAME, TO, TI, EXPR)                                              \
  RT_SIMD_CLONES static void NAME(char **data, const int64_t *strides, int64_t n,       \
                                  void *ctx) {                                          \
    const rt_scalars *sc = ctx;                                                         \
    (void)sc;                                                                           \
    TO *o = (TO *)data[0];                                                              \
    const TI *pa = (const TI *)data[1], *pb = (const TI *)data[2];                      \
    if (strides[0] == (int64_t)sizeof(TO)) {                                            \
      if (strides[1] == (int64_t)sizeof(TI) && strides[2] == (int64_t)sizeof(TI)) {    \
        for (int64_t i = 0; i < n; i++) {                                               \
          TI a = pa[i], b = pb[i];                                                      \
          o[i] = (TO)(EXPR);                                                            \
        }                                                                               \
        return;                                                                         \
      }                                                                                 \
      if (strides[1] == (int64_t)sizeof(TI) && strides[2] == 0) {                      \
        const TI b = pb[0];                                                             \
        for (int64_t i = 0; i < n; i++) {                                               \
          TI a = pa[i];                                                                 \
          o[i] = (TO)(EXPR);                                                            \
        }                                                                               \
        return;                                                                         \
      }                                                                                 \
      if (strides[1] == 0 && strides[2] == (int64_t)sizeof(TI)) {                      \
        const TI a = pa[0];                                                             \
        for (int64_t i = 0; i < n; i++) {                                               \
          TI b = pb[i];                                                                 \
          o[i] = (TO)(EXPR);                                                            \
        }                                                                               \
        return;                                                                         \
      }                                                                                 \
    }                                                                                   \
    for (int64_t i = 0; i < n; i++) {                                                   \
      TI a = RT_LOAD(TI, data[1] + i * strides[1]);                                     \
      TI b = RT_LOAD(TI, data[2] + i * strides[2]);                                     \
      RT_STORE(TO, data[0] + i * strides[0], (TO)(EXPR));                              \
    }                                                                                   \
  }

#define RT_TERNARY_LOOP(NAME, TO, TA, TB, TC, EXPR)                                     \
  RT_SIMD_CLONES static void NAME(char **data, const int64_t *strides, int64_t n,       \
                                  void *ctx) {                                          \
    const rt_scalars *sc = ctx;                                                         \
    (void)sc;                                                                           \
    if (strides[0] == (int64_t)sizeof(TO) && strides[1] == (int64_t)sizeof(TA) &&      \
        strides[2] == (int64_t)sizeof(TB) && strides[3] == (int64_t)sizeof(TC)) {      \
      TO *o = (TO *)data[0];                                                            \
      const TA *pa = (const TA *)data[1];                                               \
      const TB *pb = (const TB *)data[2];                                               \
      const TC *pc = (const TC *)data[3];                                               \
      for (int64_t i = 0; i < n; i++) {                                                 \
        TA a = pa[i];                                                                   \
        TB b = pb[i];                                                                   \
        TC c = pc[i];                                                                   \
        o[i] = (TO)(EXPR);                                                              \
      }                                                                                 \
      return;                                                                           \
    }                                                                                   \
    for (int64_t i = 0; i < n; i++) {                                                   \
      TA a = RT_LOAD(TA, data[1] + i * strides[1]);                                     \
      TB b = RT_LOAD(TB, data[2] + i * strides[2]);                                     \
      TC c = RT_LOAD(TC, data[3] + i * strides[3]);                                     \
      RT_STORE(TO, data[0] + i * strides[0], (TO)(EXPR));                               \
    }                                                                                   \
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

#endif
