/* Comparisons, logical and bitwise ops: out = f(a, b).
 *
 * Comparisons and logical ops compute in the inputs' common dtype and write
 * bool; bitwise ops and shifts keep the integral dtype. Shifts follow
 * PyTorch: a shift count that is negative or not below the width gives 0
 * (left) or the sign fill (right) instead of C's undefined behaviour.
 */
#include "ops/pointwise/pointwise.h"

#define ALL_TABLE(NAME)                                                      \
  {[NRT_BOOL] = NAME##_bool, [NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, \
   [NRT_INT16] = NAME##_i16, [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64, \
   [NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}

/* Bool-result loops over every compute dtype. */
#define DEFINE_TEST(NAME, EXPR)                                             \
  RT_BINARY_LOOP(NAME##_bool, uint8_t, uint8_t, (uint8_t)(EXPR))            \
  RT_BINARY_LOOP(NAME##_u8, uint8_t, uint8_t, (uint8_t)(EXPR))              \
  RT_BINARY_LOOP(NAME##_i8, uint8_t, int8_t, (uint8_t)(EXPR))               \
  RT_BINARY_LOOP(NAME##_i16, uint8_t, int16_t, (uint8_t)(EXPR))             \
  RT_BINARY_LOOP(NAME##_i32, uint8_t, int32_t, (uint8_t)(EXPR))             \
  RT_BINARY_LOOP(NAME##_i64, uint8_t, int64_t, (uint8_t)(EXPR))             \
  RT_BINARY_LOOP(NAME##_f32, uint8_t, float, (uint8_t)(EXPR))               \
  RT_BINARY_LOOP(NAME##_f64, uint8_t, double, (uint8_t)(EXPR))              \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                           \
    static const rt_loop_table loops = ALL_TABLE(NAME);                     \
    return rt_run_pointwise(op, loops, NRT_BOOL);                           \
  }

DEFINE_TEST(eq, a == b)
DEFINE_TEST(ne, a != b)
DEFINE_TEST(lt, a < b)
DEFINE_TEST(le, a <= b)
DEFINE_TEST(gt, a > b)
DEFINE_TEST(ge, a >= b)
DEFINE_TEST(logical_and, (a != 0) & (b != 0))
DEFINE_TEST(logical_or, (a != 0) | (b != 0))
DEFINE_TEST(logical_xor, (a != 0) ^ (b != 0))

/* ---- bitwise ------------------------------------------------------------ */
#define DEFINE_BITWISE(NAME, OP)                                              \
  RT_BINARY_LOOP(NAME##_bool, uint8_t, uint8_t, (uint8_t)((a != 0) OP (b != 0))) \
  RT_BINARY_LOOP(NAME##_u8, uint8_t, uint8_t, a OP b)                         \
  RT_BINARY_LOOP(NAME##_i8, int8_t, int8_t, a OP b)                           \
  RT_BINARY_LOOP(NAME##_i16, int16_t, int16_t, a OP b)                        \
  RT_BINARY_LOOP(NAME##_i32, int32_t, int32_t, a OP b)                        \
  RT_BINARY_LOOP(NAME##_i64, int64_t, int64_t, a OP b)                        \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                             \
    static const rt_loop_table loops = {                                      \
        [NRT_BOOL] = NAME##_bool, [NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, \
        [NRT_INT16] = NAME##_i16, [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64}; \
    return rt_run_pointwise(op, loops, -1);                                   \
  }
DEFINE_BITWISE(bitwise_and, &)
DEFINE_BITWISE(bitwise_or, |)
DEFINE_BITWISE(bitwise_xor, ^)

/* ---- shifts ----------------------------------------------------------------
 * T, its unsigned and signed twins U and S, its width, whether signed. The
 * count is read as signed (so uint8 200 counts as -56, as in PyTorch). */
#define DEFINE_SHIFTS(SUFFIX, T, U, S, WIDTH, SIGNED)                                       \
  RT_BINARY_LOOP(lshift_##SUFFIX, T, T,                                                     \
                 (S)b < 0 || (S)b >= (WIDTH) ? (T)0 : RT_WRAP(T, (uint64_t)(U)a << (S)b))  \
  RT_BINARY_LOOP(rshift_##SUFFIX, T, T,                                                     \
                 (S)b < 0 || (S)b >= (WIDTH) - (SIGNED) ? (T)(a >> ((WIDTH) - (SIGNED)))    \
                                                        : (T)(a >> (S)b))
DEFINE_SHIFTS(u8, uint8_t, uint8_t, int8_t, 8, 0)
DEFINE_SHIFTS(i8, int8_t, uint8_t, int8_t, 8, 1)
DEFINE_SHIFTS(i16, int16_t, uint16_t, int16_t, 16, 1)
DEFINE_SHIFTS(i32, int32_t, uint32_t, int32_t, 32, 1)
DEFINE_SHIFTS(i64, int64_t, uint64_t, int64_t, 64, 1)

#define INTEGER_TABLE(NAME)                                                   \
  {[NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, [NRT_INT16] = NAME##_i16, \
   [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64}

nrt_status rt_kernel_lshift(const nrt_op *op) {
  static const rt_loop_table loops = INTEGER_TABLE(lshift);
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_rshift(const nrt_op *op) {
  static const rt_loop_table loops = INTEGER_TABLE(rshift);
  return rt_run_pointwise(op, loops, -1);
}
