/* The row-major dense routines of dense_t.h for float (suffix _f32) and
 * double (_f64). */
#ifndef NEURONRT_OPS_LINALG_DENSE_H
#define NEURONRT_OPS_LINALG_DENSE_H

#define LA_T float
#define LA_DTYPE NRT_FLOAT32
#define LA_NAME(x) la_##x##_f32
#include "ops/linalg/dense_t.h"
#undef LA_T
#undef LA_DTYPE
#undef LA_NAME

#define LA_T double
#define LA_DTYPE NRT_FLOAT64
#define LA_NAME(x) la_##x##_f64
#include "ops/linalg/dense_t.h"
#undef LA_T
#undef LA_DTYPE
#undef LA_NAME

#endif
