/* See philox.h. The batch generator runs LANES blocks side by side, one
 * array per counter word, so that the compiler turns each round into a few
 * vector multiplies (32x32->64 bits) and xors. */
#include "philox.h"

#include <string.h>
#include "elementwise.h"

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t product = (uint64_t)a * b;
  *hi = (uint32_t)(product >> 32);
  return (uint32_t)product;
}

void rt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(RT_PHILOX_M0, c0, &hi0);
    uint32_t lo1 = mulhilo(RT_PHILOX_M1, c2, &hi1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += RT_PHILOX_W0;
    k1 += RT_PHILOX_W1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

#define LANES 16

/* Blocks first .. first + LANES - 1 of key (k0, k1) into out, interleaved
 * as the stream orders them (block j's words at out[4 j .. 4 j + 3]). The
 * counter's upper half is zero. */
RT_SIMD_CLONES static void philox_lanes(uint64_t first, uint32_t k0, uint32_t k1, uint32_t *out) {
  uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
  for (int j = 0; j < LANES; j++) {
    uint64_t block = first + (uint64_t)j;
    c0[j] = (uint32_t)block;
    c1[j] = (uint32_t)(block >> 32);
    c2[j] = 0;
    c3[j] = 0;
  }
  for (int round = 0; round < 10; round++) {
    /* Not unrolled: GCC would unroll the lanes first and then fail to
     * vectorise them. */
#pragma GCC unroll 1
    for (int j = 0; j < LANES; j++) {
      uint64_t p0 = (uint64_t)RT_PHILOX_M0 * c0[j];
      uint64_t p1 = (uint64_t)RT_PHILOX_M1 * c2[j];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0;
      uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = (uint32_t)p1;
      c3[j] = (uint32_t)p0;
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += RT_PHILOX_W0;
    k1 += RT_PHILOX_W1;
  }
  for (int j = 0; j < LANES; j++) {
    out[4 * j] = c0[j];
    out[4 * j + 1] = c1[j];
    out[4 * j + 2] = c2[j];
    out[4 * j + 3] = c3[j];
  }
}

void rt_philox_words(const rt_philox_stream *stream, uint64_t first_word, int64_t count,
                     uint32_t *words) {
  uint32_t k0 = (uint32_t)stream->seed, k1 = (uint32_t)(stream->seed >> 32);
  uint64_t block = stream->offset + first_word / 4;
  unsigned skip = (unsigned)(first_word % 4); /* words of the first block before first_word */
  uint32_t batch[4 * LANES];
  while (count > 0) {
    int64_t available = 4 * LANES - (int64_t)skip;
    if (skip == 0 && count >= 4 * LANES) { /* whole batch: straight to the output */
      philox_lanes(block, k0, k1, words);
    } else {
      philox_lanes(block, k0, k1, batch);
      if (available > count) available = count;
      memcpy(words, batch + skip, (size_t)available * sizeof *words);
    }
    words += available;
    count -= available;
    block += LANES;
    skip = 0;
  }
}
