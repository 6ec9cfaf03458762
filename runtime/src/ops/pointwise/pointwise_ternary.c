/* Ternary pointwise ops: where, lerp with a tensor weight, addcmul,
 * addcdiv, clamp with tensor bounds.
 *
 * where moves values without arithmetic, so it runs on the storage type
 * (by element size): float16/bfloat16 values, NaN payloads included, pass
 * unchanged. The others compute like the binary ops.
 */
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"

/* ---- where (out, cond, a, b) ------------------------------------------- */
RT_TERNARY_LOOP(where_8, uint8_t, uint8_t, uint8_t, uint8_t, a ? b : c)
RT_TERNARY_LOOP(where_16, uint16_t, uint8_t, uint16_t, uint16_t, a ? b : c)
RT_TERNARY_LOOP(where_32, uint32_t, uint8_t, uint32_t, uint32_t, a ? b : c)
RT_TERNARY_LOOP(where_64, uint64_t, uint8_t, uint64_t, uint64_t, a ? b : c)

nrt_status rt_kernel_where(const nrt_op *op) {
  if (op->num_operands != 4 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "where: expects operands (out, cond, a, b)");
  if ((unsigned)op->compute_dtype >= NRT_DTYPE_COUNT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "where: invalid compute dtype");
  nrt_dtype t = op->compute_dtype;
  size_t size = nrt_dtype_size(t);
  rt_inner_loop loop = size == 1 ? where_8 : size == 2 ? where_16 : size == 4 ? where_32 : where_64;
  const nrt_dtype want[4] = {t, NRT_BOOL, t, t};
  return rt_run_pointwise_as(op, loop, want);
}

#define DEFINE_NUMERIC(NAME, INT, FLOAT)                               \
  RT_TERNARY_LOOP(NAME##_u8, uint8_t, uint8_t, uint8_t, uint8_t, INT)  \
  RT_TERNARY_LOOP(NAME##_i8, int8_t, int8_t, int8_t, int8_t, INT)      \
  RT_TERNARY_LOOP(NAME##_i16, int16_t, int16_t, int16_t, int16_t, INT) \
  RT_TERNARY_LOOP(NAME##_i32, int32_t, int32_t, int32_t, int32_t, INT) \
  RT_TERNARY_LOOP(NAME##_i64, int64_t, int64_t, int64_t, int64_t, INT) \
  RT_TERNARY_LOOP(NAME##_f32, float, float, float, float, FLOAT)       \
  RT_TERNARY_LOOP(NAME##_f64, double, double, double, double, FLOAT)

/* ---- lerp with a tensor weight (out, start, end, weight) ---------------- */
#define LERP(T) (fabs(c) < (T)0.5 ? a + c * (b - a) : b - (b - a) * ((T)1 - c))
RT_TERNARY_LOOP(lerp_tensor_f32, float, float, float, float, LERP(float))
RT_TERNARY_LOOP(lerp_tensor_f64, double, double, double, double, LERP(double))
RT_DEFINE_TABLE_KERNEL(lerp_tensor, RT_FLOAT_TABLE)

/* ---- addcmul / addcdiv: scalars [value], PyTorch's operation order ------- */
DEFINE_NUMERIC(addcmul, RT_UW(a) + RT_UW((__typeof__(a))sc->i[0]) * RT_UW(b) * RT_UW(c),
               a + (__typeof__(a))sc->f[0] * b * c)
RT_DEFINE_TABLE_KERNEL(addcmul, RT_NUMERIC_TABLE)

RT_TERNARY_LOOP(addcdiv_f32, float, float, float, float, a + (float)sc->f[0] * b / c)
RT_TERNARY_LOOP(addcdiv_f64, double, double, double, double, a + sc->f[0] * b / c)
RT_DEFINE_TABLE_KERNEL(addcdiv, RT_FLOAT_TABLE)

/* ---- clamp (out, x, lo, hi) ----------------------------------------------
 * min(max(x, lo), hi): hi wins when lo > hi; a NaN anywhere gives NaN. */
#define CLAMP_INT ((a < b ? b : a) > c ? c : (a < b ? b : a))
#define CLAMP_FLOAT (b != b || c != c ? (__typeof__(a))NAN : CLAMP_INT)
DEFINE_NUMERIC(clamp, CLAMP_INT, CLAMP_FLOAT)
RT_DEFINE_TABLE_KERNEL(clamp, RT_NUMERIC_TABLE)
