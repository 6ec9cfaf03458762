/* The matrix products of convolution: C = A * B (+ C) over strided
 * operands, through the project's GEMM (gemm.h).
 *
 * Convolution splits its work into independent tiles and calls these from
 * its own tasks, where the product runs on the calling thread (the kernel
 * thread pool is then busy, and rt_gemm runs serially). Operands are
 * strided (element strides of rows and columns), which lets one routine
 * read a weight as it is or transposed and write NCHW or channels_last
 * outputs. rt_gemm's blocking depends on the shape only, so results are
 * reproducible. */
#ifndef NEURONRT_OPS_CONV_GEMM_H
#define NEURONRT_OPS_CONV_GEMM_H

#include <stdint.h>

typedef struct rt_matrix_f32 {
  float *data;
  int64_t rs, cs; /* element strides of rows and columns */
} rt_matrix_f32;

typedef struct rt_matrix_f64 {
  double *data;
  int64_t rs, cs;
} rt_matrix_f64;

/* bfloat16 operands (bits), multiplied into a float32 C. */
typedef struct rt_matrix_bf16 {
  uint16_t *data;
  int64_t rs, cs;
} rt_matrix_bf16;

/* C[m, n] = sum_k A[m, k] * B[k, n], plus C's old value when accumulate.
 * A and B are read only; C must not overlap them. Returns 0, or -1 when
 * the product's buffers could not be allocated. */
int rt_conv_gemm_f32(int64_t m, int64_t n, int64_t k, rt_matrix_f32 a, rt_matrix_f32 b, rt_matrix_f32 c,
                     int accumulate);
int rt_conv_gemm_f64(int64_t m, int64_t n, int64_t k, rt_matrix_f64 a, rt_matrix_f64 b, rt_matrix_f64 c,
                     int accumulate);
/* The same with bfloat16 A and B and a float32 C: the GEMM's bfloat16
 * kernels (AMX where present), float32 accumulation. */
int rt_conv_gemm_bf16(int64_t m, int64_t n, int64_t k, rt_matrix_bf16 a, rt_matrix_bf16 b, rt_matrix_f32 c,
                      int accumulate);

#endif
