/* Column-major blocks of 32-bit or 16-bit values read into row-major form,
 * for kernels whose operand arrives transposed (the fused RNN cells reading
 * transposed gates, nn_rnn_cell.c). The values are only moved, so any
 * 32-bit (16-bit) type is served and results are bitwise those of reading
 * the elements one by one. */
#ifndef NEURONRT_OPS_NN_TRANSPOSE_H
#define NEURONRT_OPS_NN_TRANSPOSE_H

#include <stdint.h>

/* dst[r * ld_dst + c] = src[c * ld_src + r] for r < rows, c < cols (leading
 * dimensions in elements; dst and src do not overlap). 8 x 8 blocks
 * through AVX2 registers when the ISA level allows, else the reference. */
void rt_nn_transpose32(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                       int64_t cols);

/* The reference twin: one element at a time. */
void rt_nn_transpose32_ref(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                           int64_t cols);

/* The same for 16-bit values (bfloat16, float16): 8 x 8 blocks through
 * SSE2 registers on x86-64, else the reference. */
void rt_nn_transpose16(uint16_t *dst, int64_t ld_dst, const uint16_t *src, int64_t ld_src, int64_t rows,
                       int64_t cols);

/* Its reference twin: one element at a time. */
void rt_nn_transpose16_ref(uint16_t *dst, int64_t ld_dst, const uint16_t *src, int64_t ld_src, int64_t rows,
                           int64_t cols);

#endif
