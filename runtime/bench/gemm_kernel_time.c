/* Times rt_gemm on one bfloat16 product with a named micro-kernel:
 *   gemm_kernel_time M N K KERNEL REPS
 * prints the best of REPS calls in seconds (after one warm-up call).
 * benchmarks/gemm_kernels.py runs it turn by turn against PyTorch CPU, to
 * compare kernels (AMX, AVX512-BF16) without the Python extension. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ops/gemm/gemm.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s M N K KERNEL REPS\n", argv[0]);
    return 2;
  }
  const int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
  const int reps = atoi(argv[5]);
  const rt_gemm_kernel *const *list, *kern = NULL;
  int count = rt_gemm_kernels(NRT_BFLOAT16, &list);
  for (int i = 0; i < count; i++)
    if (strstr(list[i]->name, argv[4])) kern = list[i];
  if (!kern || m <= 0 || n <= 0 || k <= 0 || reps <= 0) {
    fprintf(stderr, "no bfloat16 kernel '%s' on this CPU, or bad sizes\n", argv[4]);
    return 1;
  }
  uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2), *c = malloc((size_t)(m * n) * 2);
  if (!a || !b || !c) return 1;
  /* Values in [1, 2): no subnormals, no overflow. */
  for (int64_t i = 0; i < m * k; i++) a[i] = (uint16_t)(0x3f80 + rand() % 128);
  for (int64_t i = 0; i < k * n; i++) b[i] = (uint16_t)(0x3f80 + rand() % 128);
  rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                    .c_dtype = NRT_BFLOAT16, .a = a, .a_rs = k, .a_cs = 1, .b = b, .b_rs = n,
                    .b_cs = 1, .c = c, .c_rs = n, .c_cs = 1, .alpha = 1, .kernel = kern};
  if (rt_gemm(&g) != NRT_SUCCESS) return 1;
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    if (rt_gemm(&g) != NRT_SUCCESS) return 1;
    double t = now() - t0;
    if (t < best) best = t;
  }
  printf("%.6f\n", best);
  free(a), free(b), free(c);
  return 0;
}
