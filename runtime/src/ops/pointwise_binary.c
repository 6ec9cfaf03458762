/* Binary arithmetic and comparisons: out = f(a, b).
 *
 * Signed integer arithmetic wraps (computed in uint64_t) as PyTorch's does
 * on every platform it supports, without C's undefined overflow. Bool
 * arithmetic is logical: add is or, mul is and.
 */
#include "loops.h"
#include "pointwise.h"

#define WRAP(T, expr) ((T)(uint64_t)(expr))
#define U64(v) ((uint64_t)(int64_t)(v))

/* ---- ADD: a + alpha * b ------------------------------------------------ */
#define ADD_INT(T) WRAP(T, U64(a) + U64(sc->i[0]) * U64(b))
#define DEFINE_ADD(DT, SUFFIX, T) RT_BINARY_LOOP(add_##SUFFIX, T, T, ADD_INT(T))
DEFINE_ADD(_, u8, uint8_t)
DEFINE_ADD(_, i8, int8_t)
DEFINE_ADD(_, i16, int16_t)
DEFINE_ADD(_, i32, int32_t)
DEFINE_ADD(_, i64, int64_t)
RT_BINARY_LOOP(add_f32, float, float, a + (float)sc->f[0] * b)
RT_BINARY_LOOP(add_f64, double, double, a + sc->f[0] * b)
RT_BINARY_LOOP(add_bool, uint8_t, uint8_t, (uint8_t)((a != 0) | ((b != 0) & (sc->i[0] != 0))))

/* ---- MUL ---------------------------------------------------------------- */
#define MUL_INT(T) WRAP(T, U64(a) * U64(b))
RT_BINARY_LOOP(mul_u8, uint8_t, uint8_t, MUL_INT(uint8_t))
RT_BINARY_LOOP(mul_i8, int8_t, int8_t, MUL_INT(int8_t))
RT_BINARY_LOOP(mul_i16, int16_t, int16_t, MUL_INT(int16_t))
RT_BINARY_LOOP(mul_i32, int32_t, int32_t, MUL_INT(int32_t))
RT_BINARY_LOOP(mul_i64, int64_t, int64_t, MUL_INT(int64_t))
RT_BINARY_LOOP(mul_f32, float, float, a * b)
RT_BINARY_LOOP(mul_f64, double, double, a * b)
RT_BINARY_LOOP(mul_bool, uint8_t, uint8_t, (uint8_t)((a != 0) & (b != 0)))

/* ---- comparisons (bool out) ------------------------------------------- */
#define DEFINE_COMPARISON(NAME, OP)                                         \
  RT_BINARY_LOOP(NAME##_bool, uint8_t, uint8_t, (uint8_t)(a OP b))          \
  RT_BINARY_LOOP(NAME##_u8, uint8_t, uint8_t, (uint8_t)(a OP b))            \
  RT_BINARY_LOOP(NAME##_i8, uint8_t, int8_t, (uint8_t)(a OP b))             \
  RT_BINARY_LOOP(NAME##_i16, uint8_t, int16_t, (uint8_t)(a OP b))           \
  RT_BINARY_LOOP(NAME##_i32, uint8_t, int32_t, (uint8_t)(a OP b))           \
  RT_BINARY_LOOP(NAME##_i64, uint8_t, int64_t, (uint8_t)(a OP b))           \
  RT_BINARY_LOOP(NAME##_f32, uint8_t, float, (uint8_t)(a OP b))             \
  RT_BINARY_LOOP(NAME##_f64, uint8_t, double, (uint8_t)(a OP b))            \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                           \
    static const rt_loop_table loops = {                                    \
        [NRT_BOOL] = NAME##_bool, [NRT_UINT8] = NAME##_u8,                  \
        [NRT_INT8] = NAME##_i8,   [NRT_INT16] = NAME##_i16,                 \
        [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64,                 \
        [NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64};            \
    return rt_run_pointwise(op, loops, NRT_BOOL);                           \
  }
DEFINE_COMPARISON(eq, ==)

#define ARITH_TABLE(NAME)                                                    \
  {[NRT_BOOL] = NAME##_bool, [NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, \
   [NRT_INT16] = NAME##_i16, [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64, \
   [NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}

nrt_status rt_kernel_add(const nrt_op *op) {
  static const rt_loop_table loops = ARITH_TABLE(add);
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_mul(const nrt_op *op) {
  static const rt_loop_table loops = ARITH_TABLE(mul);
  return rt_run_pointwise(op, loops, -1);
}
