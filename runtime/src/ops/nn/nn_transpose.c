/* Column-major blocks into row-major form (nn_transpose.h). */
#include "ops/nn/nn_transpose.h"

#include "cpu_isa.h"
#include "ops/engine/transpose8.h"

void rt_nn_transpose32_ref(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[r * ld_dst + c] = src[c * ld_src + r];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void transpose32_avx2(uint32_t *dst, int64_t ld_dst, const uint32_t *src,
                                                             int64_t ld_src, int64_t rows, int64_t cols) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8)
      rt_transpose8x8_32(dst + r * ld_dst + c, ld_dst, src + c * ld_src + r, ld_src);
  /* The edges: the last columns of the whole rows, then the last rows. */
  rt_nn_transpose32_ref(dst + c8, ld_dst, src + c8 * ld_src, ld_src, r8, cols - c8);
  rt_nn_transpose32_ref(dst + r8 * ld_dst, ld_dst, src + r8, ld_src, rows - r8, cols);
}
#endif

void rt_nn_transpose32(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                       int64_t cols) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX2) {
    transpose32_avx2(dst, ld_dst, src, ld_src, rows, cols);
    return;
  }
#endif
  rt_nn_transpose32_ref(dst, ld_dst, src, ld_src, rows, cols);
}
