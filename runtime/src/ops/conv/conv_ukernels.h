/* Register tiles of the blocked convolution (conv_blocked.c).
 *
 * A tile is MR rows x CONV_NR (32) columns of float32, MR = 4, 8 or 12:
 *
 *   c[i*ldc + j] = sum_{p < k} a[p*MR + i] * b[p*32 + j]  (+ c[i*ldc + j] when accumulate)
 *
 * with a and b packed panels the convolution fills straight from its
 * images (no separate im2col matrix). The bfloat16 tiles take pairs of k
 * values per 32-bit word (low half the even k; an odd k count pairs the
 * last with 0) and sum exact products in float32; AVX512_BF16's
 * vdpbf16ps flushes subnormal inputs and results to zero, as oneDNN's
 * bfloat16 kernels (PyTorch CPU) do.
 *
 * They are the convolution's own rather than the GEMM's (gemm.h) because
 * their contract differs: a panel height per call (the last row panel of
 * an odd channel count runs a 4- or 8-row tile instead of padding to 12),
 * and the packing is convolution-specific. Each has a portable twin with
 * the same summation order per element up to fused multiply-add, used on
 * CPUs without AVX-512 and as the oracle of runtime/tests/test_conv.c. */
#ifndef NEURONRT_OPS_CONV_UKERNELS_H
#define NEURONRT_OPS_CONV_UKERNELS_H

#include <stdint.h>

#define CONV_NR 32
#define CONV_MR 12

typedef void (*rt_conv_ukr_f32)(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                                int accumulate);
typedef void (*rt_conv_ukr_bf16)(int64_t k2, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc,
                                 int accumulate);

/* The same with A row-major: a[i*lda + p] (bfloat16: 32-bit pair words,
 * lda in words). The weight gradient's A rows are window values along
 * output positions, so they need no transposition. */
typedef void (*rt_conv_ukr_ra_f32)(int64_t k, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                                   int accumulate);
typedef void (*rt_conv_ukr_ra_bf16)(int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                                    int64_t ldc, int accumulate);

typedef struct rt_conv_ukernels {
  const char *name;
  rt_conv_ukr_f32 f32[4];   /* by MR / 4 (index 0 unused) */
  rt_conv_ukr_bf16 bf16[4];
  rt_conv_ukr_ra_f32 ra_f32[4];
  rt_conv_ukr_ra_bf16 ra_bf16[4];
} rt_conv_ukernels;

/* The tiles this CPU runs best (AVX-512, AVX512_BF16), or with portable = 1
 * the portable ones. */
const rt_conv_ukernels *rt_conv_ukernels_get(int portable);

#endif
