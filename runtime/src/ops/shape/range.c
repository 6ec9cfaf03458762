/* ARANGE, LINSPACE, LOGSPACE: 1-d factories whose element i is a formula
 * of i. Each element is computed from i alone (not by accumulating), so
 * the split across threads cannot change a value. The formulas are the
 * ones PyTorch's CPU kernels apply element by element, in the same types:
 * arange in the accumulate type (double for float32/float64, float for the
 * 16-bit floats, int64 for integers); linspace in the element type (double
 * for integers), with 16-bit float arithmetic rounded after every operation
 * as c10::Half and c10::BFloat16 do; logspace as pow(base, linspace value)
 * in double (the base as float for integers). PyTorch's vectorised loops
 * group elements differently, so float results may differ in the last
 * place; integer results are exact. */
#include <math.h>
#include "ops/engine/scalar_types.h"
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"

typedef struct range_job {
  char *out;
  int64_t stride; /* bytes */
  int64_t n;
  nrt_dtype dtype;
  double start, step, end, base; /* float formulas */
  int64_t istart, istep, iend;   /* integer formulas */
} range_job;

#define RANGE_GRAIN 16384

static float round_half(float x) { return rt_half_to_float(rt_half_from_float(x)); }
static float round_bf16(float x) { return rt_bfloat16_to_float(rt_bfloat16_from_float(x)); }

/* Writes value v of C type T at element i. */
#define PUT(T, i, v) (*(T *)(j->out + (i) * j->stride) = (T)(v))

/* ---- arange ----------------------------------------------------------- */

#define ARANGE_INT(T)                                                                \
  for (int64_t i = begin; i < end; i++)                                             \
    PUT(T, i, (int64_t)((uint64_t)j->istart + (uint64_t)j->istep * (uint64_t)i));

static void arange_range(int64_t begin, int64_t end, void *arg) {
  const range_job *j = arg;
  switch (j->dtype) {
    case NRT_FLOAT64:
      for (int64_t i = begin; i < end; i++) PUT(double, i, j->start + j->step * (double)i);
      break;
    case NRT_FLOAT32:
      for (int64_t i = begin; i < end; i++) PUT(float, i, j->start + j->step * (double)i);
      break;
    case NRT_FLOAT16:
      for (int64_t i = begin; i < end; i++)
        PUT(rt_half, i, rt_half_from_float((float)j->start + (float)j->step * (float)i));
      break;
    case NRT_BFLOAT16:
      for (int64_t i = begin; i < end; i++)
        PUT(rt_bfloat16, i, rt_bfloat16_from_float((float)j->start + (float)j->step * (float)i));
      break;
    case NRT_INT64: ARANGE_INT(int64_t) break;
    case NRT_INT32: ARANGE_INT(int32_t) break;
    case NRT_INT16: ARANGE_INT(int16_t) break;
    case NRT_INT8: ARANGE_INT(int8_t) break;
    case NRT_UINT8: ARANGE_INT(uint8_t) break;
    default: break;
  }
}

/* ---- linspace --------------------------------------------------------- */

/* Counting up from start in the first half and down from end in the second
 * keeps both ends exact. */
#define LINSPACE_LOOP(T, STEP_T, ROUND)                                         \
  {                                                                             \
    STEP_T s = ROUND((STEP_T)j->start), e = ROUND((STEP_T)j->end);              \
    STEP_T step = ROUND(ROUND(e - s) / ROUND((STEP_T)(j->n - 1)));              \
    int64_t half = j->n / 2;                                                    \
    for (int64_t i = begin; i < end; i++) {                                     \
      STEP_T v = i < half ? ROUND(s + ROUND(step * ROUND((STEP_T)i)))           \
                          : ROUND(e - ROUND(step * ROUND((STEP_T)(j->n - i - 1)))); \
      STORE_##T(i, v);                                                          \
    }                                                                           \
  }

#define LINSPACE_INT(T)                                                           \
  {                                                                               \
    double s = (double)j->istart, e = (double)j->iend;                            \
    double step = (e - s) / (double)(j->n - 1);                                   \
    int64_t half = j->n / 2;                                                      \
    for (int64_t i = begin; i < end; i++)                                         \
      PUT(T, i, i < half ? s + step * (double)i : e - step * (double)(j->n - i - 1)); \
  }

#define SAME(x) (x)
#define STORE_double(i, v) PUT(double, i, v)
#define STORE_float(i, v) PUT(float, i, v)
#define STORE_rt_half(i, v) PUT(rt_half, i, rt_half_from_float(v))
#define STORE_rt_bfloat16(i, v) PUT(rt_bfloat16, i, rt_bfloat16_from_float(v))

static void linspace_range(int64_t begin, int64_t end, void *arg) {
  const range_job *j = arg;
  switch (j->dtype) {
    case NRT_FLOAT64: LINSPACE_LOOP(double, double, SAME) break;
    case NRT_FLOAT32: LINSPACE_LOOP(float, float, SAME) break;
    case NRT_FLOAT16: LINSPACE_LOOP(rt_half, float, round_half) break;
    case NRT_BFLOAT16: LINSPACE_LOOP(rt_bfloat16, float, round_bf16) break;
    case NRT_INT64: LINSPACE_INT(int64_t) break;
    case NRT_INT32: LINSPACE_INT(int32_t) break;
    case NRT_INT16: LINSPACE_INT(int16_t) break;
    case NRT_INT8: LINSPACE_INT(int8_t) break;
    case NRT_UINT8: LINSPACE_INT(uint8_t) break;
    default: break;
  }
}

/* ---- logspace --------------------------------------------------------- */

#define LOGSPACE_LOOP(STORE, BASE)                                               \
  for (int64_t i = begin; i < end; i++) {                                        \
    double x = i < half ? s + step * (double)i : e - step * (double)(j->n - i - 1); \
    STORE(i, pow(BASE, x));                                                      \
  }
/* double to integer as compiled C++ does on x86: through int32 for the narrow
 * types (out-of-range values become 0x80000000 before narrowing). */
#define STORE_I64(i, v) PUT(int64_t, i, rt_int64_from_double(v))
#define STORE_I32(i, v) PUT(int32_t, i, rt_int32_from_double(v))
#define STORE_I16(i, v) PUT(int16_t, i, rt_int32_from_double(v))
#define STORE_I8(i, v) PUT(int8_t, i, rt_int32_from_double(v))
#define STORE_U8(i, v) PUT(uint8_t, i, rt_int32_from_double(v))
#define STORE_F16(i, v) PUT(rt_half, i, rt_half_from_float((float)(v)))
#define STORE_BF16(i, v) PUT(rt_bfloat16, i, rt_bfloat16_from_float((float)(v)))

/* The distance end - start is taken in the element type, as PyTorch does. */
static double logspace_span(const range_job *j) {
  switch (j->dtype) {
    case NRT_FLOAT64: return j->end - j->start;
    case NRT_FLOAT32: return (float)j->end - (float)j->start;
    case NRT_FLOAT16: return round_half((float)j->end - (float)j->start);
    case NRT_BFLOAT16: return round_bf16((float)j->end - (float)j->start);
    default: return (double)(j->iend - j->istart);
  }
}

static void logspace_range(int64_t begin, int64_t end, void *arg) {
  const range_job *j = arg;
  int integral = !nrt_dtype_is_floating(j->dtype);
  double s = integral ? (double)j->istart : j->start, e = integral ? (double)j->iend : j->end;
  double step = j->n > 1 ? logspace_span(j) / (double)(j->n - 1) : 0;
  int64_t half = j->n == 1 ? 1 : j->n / 2; /* one step is start itself */
  double fbase = (double)(float)j->base; /* integer outputs use a float base */
  switch (j->dtype) {
    case NRT_FLOAT64: LOGSPACE_LOOP(STORE_double, j->base) break;
    case NRT_FLOAT32: LOGSPACE_LOOP(STORE_float, j->base) break;
    case NRT_FLOAT16: LOGSPACE_LOOP(STORE_F16, j->base) break;
    case NRT_BFLOAT16: LOGSPACE_LOOP(STORE_BF16, j->base) break;
    case NRT_INT64: LOGSPACE_LOOP(STORE_I64, fbase) break;
    case NRT_INT32: LOGSPACE_LOOP(STORE_I32, fbase) break;
    case NRT_INT16: LOGSPACE_LOOP(STORE_I16, fbase) break;
    case NRT_INT8: LOGSPACE_LOOP(STORE_I8, fbase) break;
    case NRT_UINT8: LOGSPACE_LOOP(STORE_U8, fbase) break;
    default: break;
  }
}

/* ---- kernels ---------------------------------------------------------- */

static nrt_status prepare(const nrt_op *op, int scalars, range_job *j) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_check_arity(op, 1, scalars);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0];
  if (out->ndim != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a 1-d output", name);
  if (out->dtype == NRT_BOOL)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype bool", name);
  j->out = out->data;
  j->n = out->shape[0];
  j->stride = out->strides[0] * (int64_t)nrt_dtype_size(out->dtype);
  j->dtype = out->dtype;
  j->start = rt_scalar_double(op, 0);
  j->istart = rt_scalar_int(op, 0);
  j->step = j->end = rt_scalar_double(op, 1);
  j->istep = j->iend = rt_scalar_int(op, 1);
  j->base = scalars > 2 ? rt_scalar_double(op, 2) : 0;
  return NRT_SUCCESS;
}

nrt_status rt_kernel_arange(const nrt_op *op) {
  range_job j;
  nrt_status s = prepare(op, 2, &j);
  if (s) return s;
  rt_parallel_for(j.n, RANGE_GRAIN, arange_range, &j);
  return NRT_SUCCESS;
}

/* A single step is start itself (the formula would divide by zero). */
nrt_status rt_kernel_linspace(const nrt_op *op) {
  range_job j;
  nrt_status s = prepare(op, 2, &j);
  if (s) return s;
  if (j.n == 1) {
    j.step = j.istep = 0;
    arange_range(0, 1, &j);
    return NRT_SUCCESS;
  }
  rt_parallel_for(j.n, RANGE_GRAIN, linspace_range, &j);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_logspace(const nrt_op *op) {
  range_job j;
  nrt_status s = prepare(op, 3, &j);
  if (s) return s;
  rt_parallel_for(j.n, RANGE_GRAIN, logspace_range, &j);
  return NRT_SUCCESS;
}
