/* See philox.h. Blocks are generated LANES at a time: with AVX2 (chosen
 * at run time) by explicit 8-lane vector code, two independent groups
 * interleaved; otherwise by a portable loop that keeps one array per
 * counter word, which compilers turn into SSE code. */
#include "ops/random/philox.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"
#define HAVE_AVX2_PATH 1
#endif

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
typedef void (*lanes_fn)(uint64_t first, uint32_t k0, uint32_t k1, uint32_t *out);

static void philox_lanes_portable(uint64_t first, uint32_t k0, uint32_t k1, uint32_t *out) {
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

#ifdef HAVE_AVX2_PATH
/* One round on 8 blocks: _mm256_mul_epu32 multiplies the even 32-bit
 * lanes into 64-bit products; the odd lanes go through a 32-bit shift,
 * and blends gather the high and low halves back into 8 lanes. */
#define AVX2_ROUND(c0, c1, c2, c3)                                                     \
  do {                                                                                 \
    __m256i pe0 = _mm256_mul_epu32(c0, m0);                                            \
    __m256i po0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);                     \
    __m256i pe1 = _mm256_mul_epu32(c2, m1);                                            \
    __m256i po1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);                     \
    __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);           \
    __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);           \
    __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);           \
    __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);           \
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), key0);                            \
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), key1);                            \
    c1 = lo1;                                                                          \
    c3 = lo0;                                                                          \
  } while (0)

/* Transposes words c0..c3 of 8 blocks into the stream's order. */
#define AVX2_STORE(c0, c1, c2, c3, out)                                                  \
  do {                                                                                   \
    __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);      \
    __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);      \
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);      \
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);      \
    _mm256_storeu_si256((__m256i *)(out), _mm256_permute2x128_si256(u0, u1, 0x20));      \
    _mm256_storeu_si256((__m256i *)((out) + 8), _mm256_permute2x128_si256(u2, u3, 0x20)); \
    _mm256_storeu_si256((__m256i *)((out) + 16), _mm256_permute2x128_si256(u0, u1, 0x31)); \
    _mm256_storeu_si256((__m256i *)((out) + 24), _mm256_permute2x128_si256(u2, u3, 0x31)); \
  } while (0)

__attribute__((target("avx2"))) static void philox_lanes_avx2(uint64_t first, uint32_t k0,
                                                              uint32_t k1, uint32_t *out) {
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  __m256i base = _mm256_set1_epi32((int)(uint32_t)first);
  __m256i high = _mm256_set1_epi32((int)(uint32_t)(first >> 32));
  __m256i a0 = _mm256_add_epi32(base, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i b0 = _mm256_add_epi32(base, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
  /* A low word below the base wrapped: carry one into the high word
   * (unsigned compare through the sign bias; true lanes are -1). */
  __m256i a1 = _mm256_sub_epi32(high, _mm256_cmpgt_epi32(_mm256_xor_si256(base, sign),
                                                         _mm256_xor_si256(a0, sign)));
  __m256i b1 = _mm256_sub_epi32(high, _mm256_cmpgt_epi32(_mm256_xor_si256(base, sign),
                                                         _mm256_xor_si256(b0, sign)));
  __m256i a2 = _mm256_setzero_si256(), a3 = a2, b2 = a2, b3 = a2;
  const __m256i m0 = _mm256_set1_epi32((int)RT_PHILOX_M0), m1 = _mm256_set1_epi32((int)RT_PHILOX_M1);
  const __m256i w0 = _mm256_set1_epi32((int)RT_PHILOX_W0), w1 = _mm256_set1_epi32((int)RT_PHILOX_W1);
  __m256i key0 = _mm256_set1_epi32((int)k0), key1 = _mm256_set1_epi32((int)k1);
  for (int round = 0; round < 10; round++) {
    AVX2_ROUND(a0, a1, a2, a3);
    AVX2_ROUND(b0, b1, b2, b3);
    key0 = _mm256_add_epi32(key0, w0);
    key1 = _mm256_add_epi32(key1, w1);
  }
  AVX2_STORE(a0, a1, a2, a3, out);
  AVX2_STORE(b0, b1, b2, b3, out + 32);
}
#endif

static lanes_fn philox_lanes = philox_lanes_portable;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose_lanes(void) {
#ifdef HAVE_AVX2_PATH
  if (rt_isa() >= NRT_ISA_AVX2) philox_lanes = philox_lanes_avx2;
#endif
}

void rt_philox_force_portable(int on) {
  pthread_once(&choose_once, choose_lanes);
  philox_lanes = philox_lanes_portable;
  if (!on) choose_lanes();
}

void rt_philox_words(const rt_philox_stream *stream, uint64_t first_word, int64_t count,
                     uint32_t *words) {
  uint32_t k0 = (uint32_t)stream->seed, k1 = (uint32_t)(stream->seed >> 32);
  uint64_t block = stream->offset + first_word / 4;
  unsigned skip = (unsigned)(first_word % 4); /* words of the first block before first_word */
  uint32_t batch[4 * LANES];
  pthread_once(&choose_once, choose_lanes);
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
