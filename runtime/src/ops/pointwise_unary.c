/* Unary float ops: out = f(x), computed in float32 or float64. */
#include <math.h>
#include "loops.h"
#include "pointwise.h"

/* name, float32 expression, float64 expression (of x) */
#define UNARY_FLOAT_MATH(X) \
  X(exp, expf(x), exp(x))

#define DEFINE_UNARY_FLOAT(NAME, F32, F64)                                          \
  RT_UNARY_LOOP(NAME##_f32, float, float, F32)                                      \
  RT_UNARY_LOOP(NAME##_f64, double, double, F64)                                    \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                                   \
    static const rt_loop_table loops = {[NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}; \
    return rt_run_pointwise(op, loops, -1);                                         \
  }
UNARY_FLOAT_MATH(DEFINE_UNARY_FLOAT)
