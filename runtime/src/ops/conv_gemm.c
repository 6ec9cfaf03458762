/* The blocked product behind convolution (see conv_gemm.h).
 *
 * Blocking: B in panels of GEMM_KC x GEMM_NC (the L2-sized operand reused
 * across rows), A in GEMM_MC x GEMM_KC blocks, a 6 x NR register tile. The
 * micro-kernel is C over GNU vector types, compiled for AVX-512,
 * AVX2+FMA and the baseline (RT_SIMD_CLONES); it is the one loop where
 * multiply-add contraction into FMA is allowed, since a product's rounding
 * is not PyTorch's anyway and FMA halves its instruction count. */
#include "conv_gemm.h"
#include <string.h>
#include "elementwise.h"
#include "vision_common.h"

#define GEMM_MC 96
#define GEMM_KC 256
#define GEMM_NC 1024

#if defined(__GNUC__) && !defined(__clang__)
#define RT_GEMM_CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define RT_GEMM_CONTRACT
#endif

size_t rt_conv_gemm_scratch(int64_t n) {
  (void)n;
  return (size_t)GEMM_MC * GEMM_KC + (size_t)GEMM_KC * GEMM_NC;
}

typedef float rt_v8f __attribute__((vector_size(32)));
typedef double rt_v4d __attribute__((vector_size(32)));

#define T float
#define VT rt_v8f
#define VW 8
#define MR 6
#define NR 16
#define SUFFIX _f32
#include "conv_gemm_impl.h"

#define T double
#define VT rt_v4d
#define VW 4
#define MR 6
#define NR 8
#define SUFFIX _f64
#include "conv_gemm_impl.h"
