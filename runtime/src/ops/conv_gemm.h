/* The matrix product behind convolution: C = A * B (+ C), single-threaded.
 *
 * Convolution splits its work into independent tiles and calls this on
 * each, so the product itself runs on the calling thread. Operands are
 * strided (element strides of rows and columns), which lets one routine
 * read a weight as it is or transposed and write NCHW or channels_last
 * outputs. Blocked: panels of A and B are packed into the caller's scratch
 * and a register-blocked micro-kernel accumulates each C tile over a block
 * of K; the order of the sum over K for one element of C depends on K only,
 * never on M, N or how a caller tiles them, so results are reproducible.
 *
 * To be replaced by the project's GEMM (rt_gemm) once it lands: convolution
 * reaches products only through these functions. */
#ifndef NEURONRT_OPS_CONV_GEMM_H
#define NEURONRT_OPS_CONV_GEMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct rt_matrix_f32 {
  float *data;
  int64_t rs, cs; /* element strides of rows and columns */
} rt_matrix_f32;

typedef struct rt_matrix_f64 {
  double *data;
  int64_t rs, cs;
} rt_matrix_f64;

/* Floats of scratch that rt_conv_gemm_* needs for a product with n columns. */
size_t rt_conv_gemm_scratch(int64_t n);

/* C[m, n] = sum_k A[m, k] * B[k, n], plus C's old value when accumulate.
 * scratch holds rt_conv_gemm_scratch(n) floats (doubles for f64). A and B
 * are read only; C must not overlap them. */
void rt_conv_gemm_f32(int64_t m, int64_t n, int64_t k, rt_matrix_f32 a, rt_matrix_f32 b, rt_matrix_f32 c,
                      int accumulate, float *scratch);
void rt_conv_gemm_f64(int64_t m, int64_t n, int64_t k, rt_matrix_f64 a, rt_matrix_f64 b, rt_matrix_f64 c,
                      int accumulate, double *scratch);

#endif
