/* The Householder QR routines of qr_t.h for float (suffix _f32) and double
 * (_f64). */
#ifndef NEURONRT_OPS_LINALG_QR_H
#define NEURONRT_OPS_LINALG_QR_H

#define LA_T float
#define LA_DTYPE NRT_FLOAT32
#define LA_NAME(x) la_##x##_f32
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_DTYPE
#undef LA_NAME

#define LA_T double
#define LA_DTYPE NRT_FLOAT64
#define LA_NAME(x) la_##x##_f64
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_DTYPE
#undef LA_NAME

/* Reflectors per block of the blocked QR and ormqr. */
#define LA_QR_BLOCK 32

#endif
