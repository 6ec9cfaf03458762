/* How an element loop splits over the kernel threads: rt_parallel_for
 * (a few ranges per thread, sleeping helpers woken at once: how element
 * loops were split before session 48) against rt_parallel_for_light (what
 * rt_iterate uses now), in turns in one process:
 *   pool_split_time [--samples S] [--gap-ms G] [--compute]
 * A loop of 64K to 4M float32 elements (a hardshrink: memory-bound; with
 * --compute, a sine per element too) after G ms idle (default 3: the
 * helpers asleep, as after a synchronize and some Python; 0: back to back,
 * the helpers polling). Prints the median and 10th percentile wall time
 * per loop, microseconds. The calling thread keeps to the stream workers'
 * core, as a kernel's caller does. Wall times mean something on a quiet
 * host only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "neuronrt/nrt.h"
#include "ops/engine/thread_pool.h"

typedef struct loop {
  float *out;
  const float *in;
  int compute;
} loop;

static void shrink(int64_t begin, int64_t end, void *ctx) {
  const loop *l = ctx;
  for (int64_t i = begin; i < end; i++) {
    float v = l->in[i];
    l->out[i] = fabsf(v) > 0.5f ? v : 0.0f;
  }
  if (l->compute)
    for (int64_t i = begin; i < end; i++) l->out[i] += sinf(l->in[i]) * 1e-9f;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int samples = 101, compute = 0;
  double gap_ms = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--samples") && i + 1 < argc) samples = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gap-ms") && i + 1 < argc) gap_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--compute")) compute = 1;
    else {
      fprintf(stderr, "usage: pool_split_time [--samples S] [--gap-ms G] [--compute]\n");
      return 2;
    }
  }
  if (samples < 1 || nrt_init() != NRT_SUCCESS) return 1;
  rt_keep_to_caller_core();
  const int64_t max_n = (int64_t)1 << 22;
  float *in = malloc((size_t)max_n * sizeof *in), *out = malloc((size_t)max_n * sizeof *out);
  double *times[2] = {malloc((size_t)samples * sizeof(double)), malloc((size_t)samples * sizeof(double))};
  if (!in || !out || !times[0] || !times[1]) return 1;
  for (int64_t i = 0; i < max_n; i++) in[i] = (float)(i % 1000) / 500.0f - 1.0f, out[i] = 0.0f;
  loop l = {out, in, compute};
  printf("%d kernel threads; %g ms idle before each loop%s; median / p10 us\n", rt_num_threads(), gap_ms,
         compute ? "; a sine per element" : "");
  printf("%9s %21s %21s\n", "elements", "rt_parallel_for", "rt_parallel_for_light");
  for (int64_t n = (int64_t)1 << 16; n <= max_n; n *= 2) {
    for (int s = 0; s < samples; s++)
      for (int k = 0; k < 2; k++) {
        struct timespec gap = {0, (long)(gap_ms * 1e6)};
        if (gap_ms > 0) nanosleep(&gap, NULL);
        double start = now_s();
        (k ? rt_parallel_for_light : rt_parallel_for)(n, 32768, shrink, &l);
        times[k][s] = now_s() - start;
      }
    printf("%8lldK", (long long)(n >> 10));
    for (int k = 0; k < 2; k++) {
      qsort(times[k], (size_t)samples, sizeof(double), by_value);
      printf("   %8.1f / %8.1f", times[k][samples / 2] * 1e6, times[k][samples / 10] * 1e6);
    }
    printf("\n");
  }
  return 0;
}
