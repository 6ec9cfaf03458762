/* The Householder QR routines of qr_t.h for float (suffix _f32), double
 * (_f64), complex64 (_c64) and complex128 (_c128). */
#ifndef NEURONRT_OPS_LINALG_QR_H
#define NEURONRT_OPS_LINALG_QR_H

#include "ops/linalg/dense.h"

#define LA_T float
#define LA_R float
#define LA_CPLX 0
#define LA_DTYPE NRT_FLOAT32
#define LA_NAME(x) la_##x##_f32
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_DTYPE
#undef LA_NAME

#define LA_T double
#define LA_R double
#define LA_CPLX 0
#define LA_DTYPE NRT_FLOAT64
#define LA_NAME(x) la_##x##_f64
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_DTYPE
#undef LA_NAME

#define LA_T float _Complex
#define LA_R float
#define LA_CPLX 1
#define LA_CX(re, im) CMPLXF(re, im)
#define LA_DTYPE NRT_COMPLEX64
#define LA_NAME(x) la_##x##_c64
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_CX
#undef LA_DTYPE
#undef LA_NAME

#define LA_T double _Complex
#define LA_R double
#define LA_CPLX 1
#define LA_CX(re, im) CMPLX(re, im)
#define LA_DTYPE NRT_COMPLEX128
#define LA_NAME(x) la_##x##_c128
#include "ops/linalg/qr_t.h"
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_CX
#undef LA_DTYPE
#undef LA_NAME

/* Reflectors per block of the blocked QR and ormqr. */
#define LA_QR_BLOCK 32

#endif
