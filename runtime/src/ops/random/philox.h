/* Philox4x32-10: the counter-based generator behind every random op.
 *
 * Philox (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11) maps a 128-bit counter and a 64-bit key to 128 random
 * bits with ten rounds of a multiply-xor bijection. Any block is computed
 * directly from its counter, so a kernel can start anywhere in the stream
 * and split its work across threads without changing a single value.
 *
 * How the device generator's (seed, offset) state becomes random words:
 *   key     = (lo32(seed), hi32(seed))
 *   block b = Philox(counter = (lo32(b), hi32(b), 0, 0), key): 4 words
 *   word w of the stream of (seed, offset) is lane w % 4 of block
 *   offset + w / 4.
 * An op reserves ceil(numel / 2) blocks (64 bits per element) by advancing
 * the generator's offset on the host when it is launched; which words each
 * element reads is stated in neuronrt/ops/random.h.
 */
#ifndef NEURONRT_OPS_PHILOX_H
#define NEURONRT_OPS_PHILOX_H

#include <stdint.h>

/* The published round constants (multipliers and Weyl key increments). */
#define RT_PHILOX_M0 0xD2511F53u
#define RT_PHILOX_M1 0xCD9E8D57u
#define RT_PHILOX_W0 0x9E3779B9u
#define RT_PHILOX_W1 0xBB67AE85u

/* One Philox4x32-10 block: out = Philox(counter, key). The plain
 * definition; the batch generator below is tested against it. */
void rt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* A position in the random stream of one op launch. */
typedef struct rt_philox_stream {
  uint64_t seed;
  uint64_t offset; /* first block of the launch */
} rt_philox_stream;

/* Writes words [first_word, first_word + count) of the stream to words.
 * Vectorised; any start and length. */
void rt_philox_words(const rt_philox_stream *stream, uint64_t first_word, int64_t count,
                     uint32_t *words);

/* For tests, before any concurrent use: 1 makes rt_philox_words use its
 * portable generator, 0 restores the choice by CPU features. */
void rt_philox_force_portable(int on);

/* Random values from words, as the kernels use them. */

/* [0, 1) with 24 random bits: exactly representable in float. */
static inline float rt_uniform_f32(uint32_t w) { return (float)(int32_t)(w >> 8) * 0x1p-24f; }

/* [0, 1) with 53 random bits, from two words. */
static inline double rt_uniform_f64(uint32_t lo, uint32_t hi) {
  uint64_t bits = ((uint64_t)hi << 32 | lo) >> 11;
  return (double)(int64_t)bits * 0x1p-53;
}

/* (0, 1) with 32 random bits, for logarithms (which must not see zero):
 * the low bits refine small values so that tails reach about 6.7 sigma. */
static inline float rt_uniform_open_f32(uint32_t w) {
  return (float)(int32_t)(w >> 8) * 0x1p-24f + ((float)(int32_t)(w & 255u) + 0.5f) * 0x1p-32f;
}

/* (0, 1) with 52 random bits, from two words: centred in its last place,
 * exactly representable. */
static inline double rt_uniform_open_f64(uint32_t lo, uint32_t hi) {
  uint64_t bits = ((uint64_t)hi << 32 | lo) >> 12;
  return ((double)(int64_t)bits + 0.5) * 0x1p-52;
}

#endif
