/* The row-major dense routines of dense_t.h for float (suffix _f32),
 * double (_f64), complex64 (_c64) and complex128 (_c128), and a table of
 * them by nrt_dtype for the kernels that take all four. */
#ifndef NEURONRT_OPS_LINALG_DENSE_H
#define NEURONRT_OPS_LINALG_DENSE_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

#define LA_TEMPLATE "ops/linalg/dense_t.h"
#include "ops/linalg/instantiate.h"
#undef LA_TEMPLATE

/* The routines the LU, Cholesky and triangular-solve kernels call, for one
 * element type: matrices are untyped scratch, as the kernels allocate it. */
typedef struct la_dense_ops {
  size_t esize;
  void (*pack)(const char *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, void *dst);
  void (*pack_conj)(const char *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, void *dst);
  void (*unpack)(const void *src, int64_t rows, int64_t cols, char *dst, int64_t rs, int64_t cs);
  int32_t (*lu)(void *a, int64_t m, int64_t n, int32_t *piv);
  int32_t (*cholesky_lower)(void *a, int64_t n);
  void (*trsm)(const char *a, int64_t rs, int64_t cs, int64_t n, void *x, int64_t k, int upper, int unit);
  void (*trsv_rows)(const void *a, int64_t lda, int64_t n, void *x, int upper, int unit);
  void (*trsv_cols)(const void *a, int64_t lda, int64_t n, void *x, int upper, int unit);
} la_dense_ops;

#define LA_DENSE_OPS(sfx, T)                                                                      \
  {sizeof(T),       la_pack_##sfx,           la_pack_conj_##sfx, la_unpack_##sfx,                 \
   la_lu_##sfx,     la_cholesky_lower_##sfx, la_trsm_##sfx,      la_trsv_rows_##sfx,              \
   la_trsv_cols_##sfx}

/* The table for dtype, or NULL when it is not one of the four. */
static inline const la_dense_ops *la_dense_ops_of(nrt_dtype dtype) {
  static const la_dense_ops f32 = LA_DENSE_OPS(f32, float), f64 = LA_DENSE_OPS(f64, double),
                            c64 = LA_DENSE_OPS(c64, float _Complex),
                            c128 = LA_DENSE_OPS(c128, double _Complex);
  switch (dtype) {
    case NRT_FLOAT32: return &f32;
    case NRT_FLOAT64: return &f64;
    case NRT_COMPLEX64: return &c64;
    case NRT_COMPLEX128: return &c128;
    default: return NULL;
  }
}

#endif
