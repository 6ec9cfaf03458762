/* The SVD routines of svd_t.h for each element type (suffix _f64 and
 * _c128 are the ones in use: float32 and complex64 compute in double). */
#ifndef NEURONRT_OPS_LINALG_SVD_H
#define NEURONRT_OPS_LINALG_SVD_H

#include <math.h>
#include <stdint.h>
#include "ops/linalg/qr.h"

/* Norms below this (the matrix is scaled so that its largest |a| is in
 * [0.5, 1)) are taken as exact zeros: such rows are not rotated, and their
 * left singular vectors are completed to an orthonormal basis instead. */
#define LA_SVD_SMALL 1e-140

/* The tolerance of the Jacobi sweeps for results of dtype eps `eps` and
 * order-N rotations (LAPACK's gesvj uses sqrt(M) eps). */
static inline double la_svd_tol(double eps, int64_t n) { return eps * (n > 1 ? sqrt((double)n) : 1.0); }

#define LA_TEMPLATE "ops/linalg/svd_t.h"
#include "ops/linalg/instantiate.h"
#undef LA_TEMPLATE

#endif
