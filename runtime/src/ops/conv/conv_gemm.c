/* The matrix products of convolution (see conv_gemm.h): one rt_gemm call
 * each, accumulating through beta = 1 with C as its own input. */
#include "ops/conv/conv_gemm.h"
#include "ops/gemm/gemm.h"

#define CONV_GEMM_(suffix, dtype, cdtype, matrix, cmatrix)                                         \
  int rt_conv_gemm_##suffix(int64_t m, int64_t n, int64_t k, matrix a, matrix b, cmatrix c,        \
                            int accumulate) {                                                      \
    rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = dtype,         \
                      .c_dtype = cdtype, .a = a.data, .a_rs = a.rs, .a_cs = a.cs,                   \
                      .b = b.data, .b_rs = b.rs, .b_cs = b.cs, .c = c.data, .c_rs = c.rs,          \
                      .c_cs = c.cs, .cin = accumulate ? c.data : NULL, .cin_rs = c.rs,             \
                      .cin_cs = c.cs, .alpha = 1.0, .beta = accumulate ? 1.0 : 0.0};               \
    return rt_gemm(&g) == NRT_SUCCESS ? 0 : -1;                                                    \
  }

CONV_GEMM_(f32, NRT_FLOAT32, NRT_FLOAT32, rt_matrix_f32, rt_matrix_f32)
CONV_GEMM_(f64, NRT_FLOAT64, NRT_FLOAT64, rt_matrix_f64, rt_matrix_f64)
CONV_GEMM_(bf16, NRT_BFLOAT16, NRT_FLOAT32, rt_matrix_bf16, rt_matrix_f32)
