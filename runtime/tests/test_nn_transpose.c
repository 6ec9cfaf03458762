/* rt_nn_transpose32 and rt_nn_transpose16 (ops/nn/nn_transpose.c) against
 * their reference twins: the same bits for every shape, blocks of 8 and the
 * edges around them, with leading dimensions wider than the block (run by
 * ctest at every ISA level: the AVX2 8 x 8 path where the level allows, the
 * reference below; the 16-bit blocks use SSE2, on every x86-64 level). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/nn/nn_transpose.h"

static void check_shape(int64_t rows, int64_t cols, int64_t ld_src, int64_t ld_dst) {
  uint32_t *src = malloc((size_t)(cols * ld_src + 1) * sizeof(uint32_t));
  uint32_t *got = malloc((size_t)(rows * ld_dst + 1) * sizeof(uint32_t));
  uint32_t *want = malloc((size_t)(rows * ld_dst + 1) * sizeof(uint32_t));
  CHECK(src && got && want);
  if (!src || !got || !want) goto done;
  /* Any 32-bit patterns, NaN payloads included: the values are only moved. */
  uint32_t x = 0x9e3779b9u ^ (uint32_t)(rows * 131 + cols);
  for (int64_t i = 0; i < cols * ld_src + 1; i++) src[i] = x = x * 1664525u + 1013904223u;
  for (int64_t i = 0; i < rows * ld_dst + 1; i++) got[i] = want[i] = 0xdeadbeefu; /* gaps stay untouched */
  rt_nn_transpose32(got, ld_dst, src, ld_src, rows, cols);
  rt_nn_transpose32_ref(want, ld_dst, src, ld_src, rows, cols);
  CHECK(memcmp(got, want, (size_t)(rows * ld_dst + 1) * sizeof(uint32_t)) == 0);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) CHECK(want[r * ld_dst + c] == src[c * ld_src + r]);
done:
  free(src);
  free(got);
  free(want);
}

static void check_shape16(int64_t rows, int64_t cols, int64_t ld_src, int64_t ld_dst) {
  uint16_t *src = malloc((size_t)(cols * ld_src + 1) * sizeof(uint16_t));
  uint16_t *got = malloc((size_t)(rows * ld_dst + 1) * sizeof(uint16_t));
  uint16_t *want = malloc((size_t)(rows * ld_dst + 1) * sizeof(uint16_t));
  CHECK(src && got && want);
  if (!src || !got || !want) goto done;
  uint32_t x = 0x7f4a7c15u ^ (uint32_t)(rows * 131 + cols);
  for (int64_t i = 0; i < cols * ld_src + 1; i++) src[i] = (uint16_t)((x = x * 1664525u + 1013904223u) >> 16);
  for (int64_t i = 0; i < rows * ld_dst + 1; i++) got[i] = want[i] = 0xbeefu; /* gaps stay untouched */
  rt_nn_transpose16(got, ld_dst, src, ld_src, rows, cols);
  rt_nn_transpose16_ref(want, ld_dst, src, ld_src, rows, cols);
  CHECK(memcmp(got, want, (size_t)(rows * ld_dst + 1) * sizeof(uint16_t)) == 0);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) CHECK(want[r * ld_dst + c] == src[c * ld_src + r]);
done:
  free(src);
  free(got);
  free(want);
}

static void test_transpose_matches_twin(void) {
  static const int64_t sizes[] = {1, 3, 7, 8, 9, 16, 31, 32, 33};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
      const int64_t rows = sizes[i], cols = sizes[j];
      check_shape(rows, cols, rows, cols);
      check_shape(rows, cols, rows + 5, cols + 3);
      check_shape16(rows, cols, rows, cols);
      check_shape16(rows, cols, rows + 5, cols + 3);
    }
  /* The fused LSTM cell's case: a [32, 1024] gate block of a [1024, 32] GEMM result. */
  check_shape(32, 1024, 32, 1024);
  check_shape(16, 1024, 32, 1024);
  check_shape16(32, 1024, 32, 1024);
  check_shape16(16, 1024, 32, 1024);
}

int main(void) {
  RUN(test_transpose_matches_twin);
  return CHECK_MAIN_RESULT();
}
