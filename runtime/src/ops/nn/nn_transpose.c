/* Column-major blocks into row-major form, 32-bit and 16-bit values (nn_transpose.h). */
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

void rt_nn_transpose16_ref(uint16_t *dst, int64_t ld_dst, const uint16_t *src, int64_t ld_src, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[r * ld_dst + c] = src[c * ld_src + r];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
/* One 8 x 8 block of 16-bit values: row q of dst gets column q of src (8
 * rows ld_src apart). Three rounds of interleaving, 16-, 32- then 64-bit. */
static inline void transpose8x8_16(uint16_t *dst, int64_t ld_dst, const uint16_t *src, int64_t ld_src) {
  __m128i v[8], t[8], u[8];
  for (int i = 0; i < 8; i++) v[i] = _mm_loadu_si128((const __m128i *)(const void *)(src + i * ld_src));
  for (int i = 0; i < 4; i++) {
    t[i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);     /* columns 0-3 of rows 2i, 2i+1 */
    t[i + 4] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]); /* columns 4-7 */
  }
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm_unpacklo_epi32(t[h], t[h + 1]);
    u[h + 1] = _mm_unpackhi_epi32(t[h], t[h + 1]);
    u[h + 2] = _mm_unpacklo_epi32(t[h + 2], t[h + 3]);
    u[h + 3] = _mm_unpackhi_epi32(t[h + 2], t[h + 3]);
  }
  /* u[h + q]: dst rows h + 2q and h + 2q + 1, their first four values
   * (src rows 0-3); u[h + q + 2]: the last four (src rows 4-7). */
  for (int h = 0; h < 8; h += 4)
    for (int q = 0; q < 2; q++) {
      const int row = h + 2 * q;
      _mm_storeu_si128((__m128i *)(void *)(dst + row * ld_dst), _mm_unpacklo_epi64(u[h + q], u[h + q + 2]));
      _mm_storeu_si128((__m128i *)(void *)(dst + (row + 1) * ld_dst), _mm_unpackhi_epi64(u[h + q], u[h + q + 2]));
    }
}
#endif

void rt_nn_transpose16(uint16_t *dst, int64_t ld_dst, const uint16_t *src, int64_t ld_src, int64_t rows,
                       int64_t cols) {
#if defined(__x86_64__) && defined(__GNUC__)
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose8x8_16(dst + r * ld_dst + c, ld_dst, src + c * ld_src + r, ld_src);
  rt_nn_transpose16_ref(dst + c8, ld_dst, src + c8 * ld_src, ld_src, r8, cols - c8);
  rt_nn_transpose16_ref(dst + r8 * ld_dst, ld_dst, src + r8, ld_src, rows - r8, cols);
#else
  rt_nn_transpose16_ref(dst, ld_dst, src, ld_src, rows, cols);
#endif
}
