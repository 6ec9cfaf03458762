/* The stable radix sort of (key, index) pairs declared in sort_keys.h,
 * instantiated for 32- and 64-bit keys from radix_sort_impl.h. Blocks of
 * the parallel passes have a size that depends only on n, and the
 * buckets are sorted independently, so the thread count cannot change
 * the result (which is in any case the unique stable order). */
#include <stdlib.h>
#include <string.h>
#include "ops/shape/sort_keys.h"
#include "ops/engine/thread_pool.h"

#define INSERTION_MAX 48
/* Pairs that LSD passes sort in L2: up to 24 bytes (two buffers) each. */
#define LSD_MAX (1 << 14)
/* Blocks of the parallel top-level pass. */
#define BLOCK 65536
#define MAX_BLOCKS 256

/* Offsets of the buckets from a histogram; 1 if one bucket holds all n. */
static int prefix_sum_(const uint32_t *hist, uint32_t *offsets, int64_t n) {
  uint32_t sum = 0;
  int uniform = 0;
  for (int v = 0; v < 256; v++) {
    uniform |= hist[v] == (uint32_t)n;
    offsets[v] = sum;
    sum += hist[v];
  }
  return uniform;
}

#define K uint32_t
#define SUFFIX 32
#include "ops/shape/radix_sort_impl.h"
#undef K
#undef SUFFIX

#define K uint64_t
#define SUFFIX 64
#include "ops/shape/radix_sort_impl.h"
#undef K
#undef SUFFIX
