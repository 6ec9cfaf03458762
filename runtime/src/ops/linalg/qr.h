/* The Householder QR routines of qr_t.h for float (suffix _f32), double
 * (_f64), complex64 (_c64) and complex128 (_c128). */
#ifndef NEURONRT_OPS_LINALG_QR_H
#define NEURONRT_OPS_LINALG_QR_H

#include "ops/linalg/dense.h"

#define LA_TEMPLATE "ops/linalg/qr_t.h"
#include "ops/linalg/instantiate.h"
#undef LA_TEMPLATE

/* Reflectors per block of the blocked QR and ormqr. */
#define LA_QR_BLOCK 32

#endif
