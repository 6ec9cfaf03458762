/* Times the float32 micro-kernels alone, by CPU time on one thread:
 *   gemm_tile_time [KERNEL...] [--kc KC] [--mc MC] [--nc NC] [--ldc LDC] [--cblocks CB] [--reps R]
 * prints, in GF/s (best of R):
 *   peak   a register-only loop of independent FMAs (the core's FMA peak);
 *   l1     one tile over the same A and B panels again and again (both in L1);
 *   macro  the macro-kernel's loops (gemm.c) over a packed A block (MC x KC,
 *          L2) and NC / nr packed B panels, updating C (row stride LDC, so
 *          its rows fall where a wide C's do) with beta 1, as every k block
 *          after the first does; each pass on the next of CB blocks of C
 *          (CB 16 or more: C comes from L3, as a large product's does).
 * for each float32 kernel named (default: all of this CPU's). The gap between
 * l1 and macro is what cache traffic around the tile costs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"
#endif

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* 24 independent accumulators (zmm8-31): enough to cover the FMA latency on
 * two ports. In asm so that nothing else runs in the loop. */
__attribute__((target("avx512f"), noinline)) static void fma_loop_avx512(int64_t iters) {
#define FMA24(r) "vfmadd231ps %%zmm0, %%zmm1, %%zmm" #r "\n\t"
  __asm__ volatile(
      "vxorps %%xmm0, %%xmm0, %%xmm0\n\tvxorps %%xmm1, %%xmm1, %%xmm1\n\t"
      "1:\n\t" FMA24(8) FMA24(9) FMA24(10) FMA24(11) FMA24(12) FMA24(13) FMA24(14) FMA24(15)
      FMA24(16) FMA24(17) FMA24(18) FMA24(19) FMA24(20) FMA24(21) FMA24(22) FMA24(23)
      FMA24(24) FMA24(25) FMA24(26) FMA24(27) FMA24(28) FMA24(29) FMA24(30) FMA24(31)
      "dec %0\n\tjnz 1b\n\tvzeroupper"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
        "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
        "xmm28", "xmm29", "xmm30", "xmm31", "cc");
#undef FMA24
}
#endif

static float *random_floats(int64_t n) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  if (!p) exit(1);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(rand() % 256) / 128.0f - 1.0f;
  return p;
}

int main(int argc, char **argv) {
  int64_t kc = 256, mc = 240, nc = 1024, ldc = 2048, reps = 5, cblocks = 1;
  const char *names[16];
  int nnames = 0;
  for (int i = 1; i < argc; i++) {
    int64_t *opt = !strcmp(argv[i], "--kc")    ? &kc
                   : !strcmp(argv[i], "--mc")  ? &mc
                   : !strcmp(argv[i], "--nc")  ? &nc
                   : !strcmp(argv[i], "--ldc") ? &ldc
                   : !strcmp(argv[i], "--cblocks") ? &cblocks
                   : !strcmp(argv[i], "--reps") ? &reps
                                                : NULL;
    if (opt && i + 1 < argc)
      *opt = atoll(argv[++i]);
    else if (nnames < 16)
      names[nnames++] = argv[i];
  }
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX512) {
    const int64_t iters = 50000000;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = cpu_seconds();
      fma_loop_avx512(iters);
      double t = cpu_seconds() - t0;
      if (t < best) best = t;
    }
    printf("peak (register-only FMAs)      %6.1f GF/s\n", 24.0 * 32 * (double)iters / best / 1e9);
  }
#endif
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_FLOAT32, &list);
  for (int q = 0; q < count; q++) {
    const rt_gemm_kernel *kern = list[q];
    int wanted = nnames == 0;
    for (int i = 0; i < nnames; i++) wanted |= strstr(kern->name, names[i]) != NULL;
    if (!wanted) continue;
    const int64_t mr = kern->mr, nr = kern->nr;
    const int64_t mcp = (mc + mr - 1) / mr * mr, ncp = (nc + nr - 1) / nr * nr;
    float *a = random_floats(mcp * kc), *b = random_floats(ncp * kc), *c = random_floats(mcp * ldc * cblocks);
    /* l1: one tile, over and over (C row stride nr). */
    const int64_t calls = 200000000 / (2 * mr * nr * kc) + 1;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = cpu_seconds();
      for (int64_t i = 0; i < calls; i++) kern->f32(kc, a, mr, b, nr, c, nr, 1.0f, 1.0f);
      double t = cpu_seconds() - t0;
      if (t < best) best = t;
    }
    printf("%-14s l1     kc %4lld       %6.1f GF/s\n", kern->name, (long long)kc,
           2.0 * (double)(mr * nr * kc * calls) / best / 1e9);
    /* macro: the jr / ir loops of gemm.c over one A block and NC columns. */
    const int64_t passes = 4000000000 / (2 * mcp * ncp * kc) + 1;
    best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = cpu_seconds();
      for (int64_t s = 0; s < passes; s++) {
        float *cs = c + s % cblocks * mcp * ldc;
        for (int64_t jr = 0; jr < ncp; jr += nr)
          for (int64_t ir = 0; ir < mcp; ir += mr)
            kern->f32(kc, a + ir * kc, mr, b + jr * kc, nr, cs + ir * ldc + jr % ldc, ldc, 1.0f, 1.0f);
      }
      double t = cpu_seconds() - t0;
      if (t < best) best = t;
    }
    printf("%-14s macro  kc %4lld mc %4lld nc %5lld ldc %5lld cblocks %3lld  %6.1f GF/s\n", kern->name,
           (long long)kc, (long long)mcp, (long long)ncp, (long long)ldc, (long long)cblocks, 2.0 * (double)(mcp * ncp * kc * passes) / best / 1e9);
    free(a), free(b), free(c);
  }
  return 0;
}
