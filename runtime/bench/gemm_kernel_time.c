/* Times rt_gemm on one bfloat16 (or float32) product with a named micro-kernel:
 *   gemm_kernel_time M N K KERNEL REPS [LAYOUT [OUT [BATCH]]]
 * prints the best of REPS calls in seconds (after one warm-up call), then
 * the least process CPU time of a call: with one thread (no
 * TORCHNEURON_NUM_THREADS) that is the work itself, little changed by other
 * processes taking turns on the core, so it compares kernels on a loaded
 * host where wall time does not.
 * LAYOUT is nn (default), nt (B stored transposed, as linear's weight) or
 * tn (A stored transposed, as a weight gradient's); OUT is bfloat16
 * (default) or float32, the dtype of C; BATCH > 1 times that many
 * products of those sizes in one call (bmm: an attention head each). A KERNEL that names no bfloat16
 * kernel but a float32 one (avx512_12x32, avx512cc_12x32, avx2_6x16) times a float32
 * product (float32 A, B and C). The kernel thread pool has one
 * thread unless TORCHNEURON_NUM_THREADS is set (then the runtime is
 * initialised, as the Python extension does, and the pool has that many;
 * the timing thread keeps to the core the pool's helpers leave free, as a
 * stream worker does).
 * benchmarks/gemm_kernels.py runs it turn by turn against PyTorch CPU, to
 * compare kernels (AMX, AVX512-BF16) without the Python extension. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "neuronrt/device.h"
#include "ops/engine/thread_pool.h"
#include "ops/gemm/gemm.h"

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 6 || argc > 9) {
    fprintf(stderr, "usage: %s M N K KERNEL REPS [nn|nt|tn [bfloat16|float32 [BATCH]]]\n", argv[0]);
    return 2;
  }
  if (getenv("TORCHNEURON_NUM_THREADS")) {
    if (nrt_init() != NRT_SUCCESS) return 1;
    rt_keep_to_caller_core();
  }
  const int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
  const int reps = atoi(argv[5]);
  const char *layout = argc > 6 ? argv[6] : "nn";
  const int out_f32 = argc > 7 && strcmp(argv[7], "float32") == 0;
  const int64_t batch = argc > 8 ? atoll(argv[8]) : 1;
  const int ta = strcmp(layout, "tn") == 0, tb = strcmp(layout, "nt") == 0;
  /* A bfloat16 kernel by that name, else a float32 one (float32 in and out). */
  const rt_gemm_kernel *const *list, *kern = NULL;
  int f32 = 0;
  for (int pass = 0; pass < 2 && !kern; pass++) {
    int count = rt_gemm_kernels(pass ? NRT_FLOAT32 : NRT_BFLOAT16, &list);
    for (int i = 0; i < count; i++)
      if (strstr(list[i]->name, argv[4])) kern = list[i], f32 = pass;
  }
  if (!kern || m <= 0 || n <= 0 || k <= 0 || reps <= 0 || batch <= 0) {
    fprintf(stderr, "no bfloat16 or float32 kernel '%s' on this CPU, or bad sizes\n", argv[4]);
    return 1;
  }
  const size_t es = f32 ? 4 : 2;
  const int64_t ma = batch * m, kb = batch * k; /* the items one after another */
  /* 64-byte aligned, as PyTorch's CPU allocator aligns tensors (malloc's
   * large blocks start 16 bytes into a page). */
  uint16_t *a = aligned_alloc(64, ((size_t)(ma * k) * es + 63) / 64 * 64),
           *b = aligned_alloc(64, ((size_t)(kb * n) * es + 63) / 64 * 64),
           *c = aligned_alloc(64, ((size_t)(batch * m * n) * 4 + 63) / 64 * 64);
  if (!a || !b || !c) return 1;
  /* Values in [1, 2): no subnormals, no overflow (float32: the same values). */
  for (int64_t i = 0; i < ma * k; i++) a[i] = (uint16_t)(0x3f80 + rand() % 128);
  for (int64_t i = 0; i < kb * n; i++) b[i] = (uint16_t)(0x3f80 + rand() % 128);
  if (f32) { /* widen in place, from the end */
    uint32_t *aw = (uint32_t *)(void *)a, *bw = (uint32_t *)(void *)b;
    for (int64_t i = ma * k - 1; i >= 0; i--) aw[i] = (uint32_t)a[i] << 16;
    for (int64_t i = kb * n - 1; i >= 0; i--) bw[i] = (uint32_t)b[i] << 16;
  }
  rt_gemm_args g = {.batch = batch, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = f32 ? NRT_FLOAT32 : NRT_BFLOAT16,
                    .c_dtype = out_f32 || f32 ? NRT_FLOAT32 : NRT_BFLOAT16, .a = a, .a_bs = m * k, .a_rs = ta ? 1 : k,
                    .a_cs = ta ? m : 1, .b = b, .b_bs = k * n, .b_rs = tb ? 1 : n, .b_cs = tb ? k : 1, .c = c,
                    .c_bs = m * n, .c_rs = n, .c_cs = 1, .alpha = 1, .kernel = kern};
  if (rt_gemm(&g) != NRT_SUCCESS) return 1;
  double best = 1e30, best_cpu = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (rt_gemm(&g) != NRT_SUCCESS) return 1;
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  printf("%.9f %.9f\n", best, best_cpu);
  free(a), free(b), free(c);
  return 0;
}
