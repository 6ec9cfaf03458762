/* See sort_keys.h. The sort is an LSD radix sort on bytes: stable by
 * construction, linear in n, and a pass whose byte is the same for every
 * key is skipped (small integers, 16-bit floats in 32-bit keys). Short
 * runs use insertion sort. The parallel variant cuts the array into
 * blocks whose size depends only on n, so thread count cannot change the
 * result. */
#include "sort_keys.h"

#include <stdlib.h>
#include <string.h>
#include "thread_pool.h"

/* ---- keys --------------------------------------------------------------- */

#define LOAD(T, i) (*(const T *)(src + (i) * stride))

static inline uint32_t key_f16_like(uint16_t h, uint16_t inf) {
  uint16_t mag = h & 0x7fffu;
  if (mag > inf) return 0xffffu;
  if (mag == 0) return 0x8000u;
  return h & 0x8000u ? (uint16_t)~h : (uint32_t)(h | 0x8000u);
}

static inline uint32_t key_f32(uint32_t x) {
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0xffffffffu;
  if (mag == 0) return 0x80000000u;
  return x & 0x80000000u ? ~x : x | 0x80000000u;
}

static inline uint64_t key_f64(uint64_t x) {
  uint64_t mag = x & 0x7fffffffffffffffull;
  if (mag > 0x7ff0000000000000ull) return ~0ull;
  if (mag == 0) return 1ull << 63;
  return x & (1ull << 63) ? ~x : x | (1ull << 63);
}

#define KEY_LOOP(K, EXPR)                                  \
  for (int64_t i = 0; i < n; i++) keys[i] = (K)(EXPR) ^ flip;

void rt_make_keys32(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint32_t *keys) {
  uint32_t flip = descending ? 0xffffffffu : 0;
  switch (dtype) {
    case NRT_BOOL:
    case NRT_UINT8: KEY_LOOP(uint32_t, LOAD(uint8_t, i)) break;
    case NRT_INT8: KEY_LOOP(uint32_t, (uint8_t)LOAD(int8_t, i) ^ 0x80u) break;
    case NRT_INT16: KEY_LOOP(uint32_t, (uint16_t)LOAD(int16_t, i) ^ 0x8000u) break;
    case NRT_INT32: KEY_LOOP(uint32_t, (uint32_t)LOAD(int32_t, i) ^ 0x80000000u) break;
    case NRT_FLOAT16: KEY_LOOP(uint32_t, key_f16_like(LOAD(uint16_t, i), 0x7c00u)) break;
    case NRT_BFLOAT16: KEY_LOOP(uint32_t, key_f16_like(LOAD(uint16_t, i), 0x7f80u)) break;
    case NRT_FLOAT32: KEY_LOOP(uint32_t, key_f32(LOAD(uint32_t, i))) break;
    default: break;
  }
}

void rt_make_keys64(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint64_t *keys) {
  uint64_t flip = descending ? ~0ull : 0;
  if (dtype == NRT_INT64) {
    KEY_LOOP(uint64_t, (uint64_t)LOAD(int64_t, i) ^ (1ull << 63))
  } else if (dtype == NRT_FLOAT64) {
    KEY_LOOP(uint64_t, key_f64(LOAD(uint64_t, i)))
  }
}

uint64_t rt_nan_key(nrt_dtype dtype) {
  switch (dtype) {
    case NRT_FLOAT16:
    case NRT_BFLOAT16: return 0xffffu;
    case NRT_FLOAT32: return 0xffffffffu;
    case NRT_FLOAT64: return ~0ull;
    default: return 0;
  }
}

/* ---- radix sort ----------------------------------------------------------- */

#define INSERTION_MAX 48
/* Blocks of the parallel sort; the count depends only on n. */
#define BLOCK 65536
#define MAX_BLOCKS 512

typedef struct radix_job {
  const void *keys_in;
  const uint32_t *idx_in;
  void *keys_out;
  uint32_t *idx_out;
  int64_t n, block;
  int shift;
  uint32_t (*hist)[256]; /* per block; turned into write offsets */
} radix_job;

#define DEFINE_RADIX(K, SUFFIX)                                                            \
  static void insertion_##SUFFIX(K *keys, uint32_t *idx, int64_t n) {                      \
    for (int64_t i = 1; i < n; i++) {                                                      \
      K k = keys[i];                                                                       \
      uint32_t v = idx[i];                                                                 \
      int64_t j = i - 1;                                                                   \
      while (j >= 0 && keys[j] > k) {                                                      \
        keys[j + 1] = keys[j];                                                             \
        idx[j + 1] = idx[j];                                                               \
        j--;                                                                               \
      }                                                                                    \
      keys[j + 1] = k;                                                                     \
      idx[j + 1] = v;                                                                      \
    }                                                                                      \
  }                                                                                        \
                                                                                           \
  static void scatter_##SUFFIX(const K *ks, const uint32_t *is, K *kd, uint32_t *id,       \
                               int64_t begin, int64_t end, int shift, uint32_t *offsets) { \
    for (int64_t i = begin; i < end; i++) {                                                \
      K k = ks[i];                                                                         \
      uint32_t pos = offsets[(k >> shift) & 0xff]++;                                       \
      kd[pos] = k;                                                                         \
      id[pos] = is[i];                                                                     \
    }                                                                                      \
  }                                                                                        \
                                                                                           \
  /* One thread: all byte histograms in one read, then one scatter per byte. */           \
  static int serial_##SUFFIX(K *keys, uint32_t *idx, K *keys_tmp, uint32_t *idx_tmp,       \
                             int64_t n) {                                                  \
    enum { BYTES = sizeof(K) };                                                            \
    uint32_t hist[BYTES][256];                                                             \
    memset(hist, 0, sizeof hist);                                                          \
    for (int64_t i = 0; i < n; i++) {                                                      \
      K k = keys[i];                                                                       \
      for (int b = 0; b < BYTES; b++) hist[b][(k >> (8 * b)) & 0xff]++;                    \
    }                                                                                      \
    int swapped = 0;                                                                       \
    for (int b = 0; b < BYTES; b++) {                                                      \
      uint32_t offsets[256], sum = 0;                                                      \
      int skip = 0;                                                                        \
      for (int v = 0; v < 256; v++) {                                                      \
        if (hist[b][v] == (uint32_t)n) skip = 1;                                           \
        offsets[v] = sum;                                                                  \
        sum += hist[b][v];                                                                 \
      }                                                                                    \
      if (skip) continue;                                                                  \
      scatter_##SUFFIX(keys, idx, keys_tmp, idx_tmp, 0, n, 8 * b, offsets);                \
      K *tk = keys; keys = keys_tmp; keys_tmp = tk;                                        \
      uint32_t *ti = idx; idx = idx_tmp; idx_tmp = ti;                                     \
      swapped ^= 1;                                                                        \
    }                                                                                      \
    return swapped;                                                                        \
  }                                                                                        \
                                                                                           \
  static void block_hist_##SUFFIX(int64_t begin, int64_t end, void *arg) {                 \
    const radix_job *j = arg;                                                              \
    const K *keys = j->keys_in;                                                            \
    for (int64_t b = begin; b < end; b++) {                                                \
      uint32_t *h = j->hist[b];                                                            \
      memset(h, 0, 256 * sizeof *h);                                                       \
      int64_t lo = b * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;         \
      for (int64_t i = lo; i < hi; i++) h[(keys[i] >> j->shift) & 0xff]++;                 \
    }                                                                                      \
  }                                                                                        \
                                                                                           \
  static void block_scatter_##SUFFIX(int64_t begin, int64_t end, void *arg) {              \
    const radix_job *j = arg;                                                              \
    for (int64_t b = begin; b < end; b++) {                                                \
      int64_t lo = b * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;         \
      scatter_##SUFFIX(j->keys_in, j->idx_in, j->keys_out, j->idx_out, lo, hi, j->shift,   \
                       j->hist[b]);                                                        \
    }                                                                                      \
  }                                                                                        \
                                                                                           \
  /* Per byte: block histograms in parallel, offsets, block scatters in parallel. */      \
  static int parallel_##SUFFIX(K *keys, uint32_t *idx, K *keys_tmp, uint32_t *idx_tmp,     \
                               int64_t n, uint32_t (*hist)[256]) {                         \
    radix_job j = {.n = n, .hist = hist};                                                  \
    j.block = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;                                           \
    if (j.block < BLOCK) j.block = BLOCK;                                                  \
    int64_t blocks = (n + j.block - 1) / j.block;                                          \
    int swapped = 0;                                                                       \
    for (int b = 0; b < (int)sizeof(K); b++) {                                             \
      j.keys_in = keys;                                                                    \
      j.idx_in = idx;                                                                      \
      j.keys_out = keys_tmp;                                                               \
      j.idx_out = idx_tmp;                                                                 \
      j.shift = 8 * b;                                                                     \
      rt_parallel_for(blocks, 1, block_hist_##SUFFIX, &j);                                 \
      uint32_t sum = 0;                                                                    \
      int skip = 0;                                                                        \
      for (int v = 0; v < 256 && !skip; v++) {                                             \
        uint32_t total = 0;                                                                \
        for (int64_t k = 0; k < blocks; k++) total += hist[k][v];                          \
        skip = total == (uint32_t)n;                                                       \
      }                                                                                    \
      if (skip) continue;                                                                  \
      for (int v = 0; v < 256; v++)                                                        \
        for (int64_t k = 0; k < blocks; k++) {                                             \
          uint32_t c = hist[k][v];                                                         \
          hist[k][v] = sum;                                                                \
          sum += c;                                                                        \
        }                                                                                  \
      rt_parallel_for(blocks, 1, block_scatter_##SUFFIX, &j);                              \
      K *tk = keys; keys = keys_tmp; keys_tmp = tk;                                        \
      uint32_t *ti = idx; idx = idx_tmp; idx_tmp = ti;                                     \
      swapped ^= 1;                                                                        \
    }                                                                                      \
    return swapped;                                                                        \
  }                                                                                        \
                                                                                           \
  int rt_sort_pairs##SUFFIX(K *keys, uint32_t *idx, K *keys_tmp, uint32_t *idx_tmp,        \
                            int64_t n, int parallel) {                                     \
    if (n <= INSERTION_MAX) {                                                              \
      insertion_##SUFFIX(keys, idx, n);                                                    \
      return 0;                                                                            \
    }                                                                                      \
    if (parallel && n >= 2 * BLOCK) {                                                      \
      uint32_t(*hist)[256] = malloc(MAX_BLOCKS * sizeof *hist);                            \
      if (hist) {                                                                          \
        int swapped = parallel_##SUFFIX(keys, idx, keys_tmp, idx_tmp, n, hist);            \
        free(hist);                                                                        \
        return swapped;                                                                    \
      }                                                                                    \
    }                                                                                      \
    return serial_##SUFFIX(keys, idx, keys_tmp, idx_tmp, n);                               \
  }

DEFINE_RADIX(uint32_t, 32)
DEFINE_RADIX(uint64_t, 64)

/* ---- gather --------------------------------------------------------------- */

#define GATHER_LOOP(T)                                                                \
  for (int64_t j = 0; j < n; j++)                                                     \
    *(T *)(dst + j * dst_stride) = *(const T *)(src + (int64_t)idx[j] * src_stride);

void rt_gather_elements(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                        const uint32_t *idx, int64_t n, int64_t elem) {
  switch (elem) {
    case 1: GATHER_LOOP(uint8_t) break;
    case 2: GATHER_LOOP(uint16_t) break;
    case 4: GATHER_LOOP(uint32_t) break;
    default: GATHER_LOOP(uint64_t) break;
  }
}
