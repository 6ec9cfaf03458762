/* Whether a compiled backward graph should run a linear's two independent
 * gradient GEMMs at once, one per kernel thread, instead of one after the
 * other with each split over the pool (issue 15):
 *   gemm_pair_time [--rows R] [--samples S]
 * For the four linears of a GPT block (width 256: qkv, attention proj, fc,
 * fc2), dX = dY W and dW = dY^T X in float32 with the strides AOTAutograd
 * gives them (dY^T read in place). The two ways take turns, S samples of
 * 3 passes over the four pairs, and print medians per pass of the four:
 *   sequential  wall, process CPU and CPU / (wall x threads) on the pool;
 *   pair        wall and process CPU with rt_parallel_for(2, ...) running
 *               one GEMM per pool thread (nested GEMMs find the pool busy
 *               and run serially), and each member's thread CPU.
 * Wall times mean something on a quiet host only; the CPU times hold under
 * load. Run with TORCHNEURON_NUM_THREADS=2 (the pair uses two threads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "neuronrt/nrt.h"
#include "ops/engine/thread_pool.h"
#include "ops/gemm/gemm.h"

static double clock_ms(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

typedef struct pair {
  rt_gemm_args g[2];
  double cpu_ms[2]; /* each member's thread CPU in the last concurrent run */
  nrt_status status[2];
} pair;

static void run_member(int64_t begin, int64_t end, void *ctx) {
  pair *p = ctx;
  for (int64_t i = begin; i < end; i++) {
    double c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    p->status[i] = rt_gemm(&p->g[i]);
    p->cpu_ms[i] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
  }
}

static float *random_floats(int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  if (!x) exit(1);
  for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  return x;
}

/* C[m, n] (row-major) = A B, A and B by element strides. */
static rt_gemm_args product(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_rs, int64_t a_cs,
                            const float *b, int64_t b_rs, int64_t b_cs, float *c) {
  rt_gemm_args g;
  memset(&g, 0, sizeof g);
  g.batch = 1, g.m = m, g.n = n, g.k = k, g.kslices = 1;
  g.ab_dtype = NRT_FLOAT32, g.c_dtype = NRT_FLOAT32;
  g.a = a, g.a_rs = a_rs, g.a_cs = a_cs;
  g.b = b, g.b_rs = b_rs, g.b_cs = b_cs;
  g.c = c, g.c_rs = n, g.c_cs = 1;
  g.alpha = 1.0, g.beta = 0.0;
  return g;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

#define LINEARS 4
#define MAX_SAMPLES 101
#define PASSES 3

int main(int argc, char **argv) {
  int64_t rows = 2048;
  int samples = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rows")) rows = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--samples")) samples = atoi(argv[i + 1]);
  }
  if (rows < 1 || samples < 1 || samples > MAX_SAMPLES) {
    fprintf(stderr, "gemm_pair_time: --rows >= 1, --samples 1..%d\n", MAX_SAMPLES);
    return 2;
  }
  if (nrt_init()) {
    fprintf(stderr, "gemm_pair_time: %s\n", nrt_last_error());
    return 1;
  }
  const int64_t ins[LINEARS] = {256, 256, 256, 1024}, outs[LINEARS] = {768, 256, 1024, 256};
  pair pairs[LINEARS];
  for (int l = 0; l < LINEARS; l++) {
    int64_t in = ins[l], out = outs[l];
    float *dy = random_floats(rows * out), *x = random_floats(rows * in), *w = random_floats(out * in);
    float *dx = random_floats(rows * in), *dw = random_floats(out * in);
    memset(&pairs[l], 0, sizeof pairs[l]);
    pairs[l].g[0] = product(rows, in, out, dy, out, 1, w, in, 1, dx); /* dX = dY W */
    pairs[l].g[1] = product(out, in, rows, dy, 1, out, x, in, 1, dw); /* dW = dY^T X */
  }
  int threads = rt_num_threads();
  static double wall[2][MAX_SAMPLES], cpu[2][MAX_SAMPLES], member[LINEARS][2][MAX_SAMPLES];
  for (int s = 0; s < samples; s++)
    for (int way = 0; way < 2; way++) {
      double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
      for (int pass = 0; pass < PASSES; pass++)
        for (int l = 0; l < LINEARS; l++) {
          pair *p = &pairs[l];
          if (way == 0) {
            p->status[0] = rt_gemm(&p->g[0]);
            p->status[1] = rt_gemm(&p->g[1]);
          } else {
            rt_parallel_for(2, 1, run_member, p);
            member[l][0][s] = p->cpu_ms[0];
            member[l][1][s] = p->cpu_ms[1];
          }
          if (p->status[0] || p->status[1]) {
            fprintf(stderr, "gemm_pair_time: %s\n", nrt_last_error());
            return 1;
          }
        }
      wall[way][s] = (clock_ms(CLOCK_MONOTONIC) - w0) / PASSES;
      cpu[way][s] = (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / PASSES;
    }
  printf("rows %lld, kernel threads %d, medians of %d samples, ms per pass over the %d pairs\n",
         (long long)rows, threads, samples, LINEARS);
  double seq_wall = median(wall[0], samples), seq_cpu = median(cpu[0], samples);
  double pair_wall = median(wall[1], samples), pair_cpu = median(cpu[1], samples);
  printf("sequential: wall %8.3f  CPU %8.3f  busy %.3f\n", seq_wall, seq_cpu, seq_cpu / (seq_wall * threads));
  printf("pair:       wall %8.3f  CPU %8.3f  (wall / sequential %.3f)\n", pair_wall, pair_cpu,
         pair_wall / seq_wall);
  double slowest = 0;
  for (int l = 0; l < LINEARS; l++) {
    double dx = median(member[l][0], samples), dw = median(member[l][1], samples);
    slowest += dx > dw ? dx : dw;
    printf("  %4lld->%-4lld dX %7.3f  dW %7.3f  thread CPU (dW / dX %.2f)\n", (long long)ins[l],
           (long long)outs[l], dx, dw, dw / dx);
  }
  printf("pair bound (slower member summed) %.3f against sequential CPU / %d threads %.3f\n", slowest,
         threads, seq_cpu / threads);
  return 0;
}
