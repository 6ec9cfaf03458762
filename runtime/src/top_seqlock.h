/* The seqlock of the neuron-top page (neuronrt/top.h): one writer, any
 * number of readers in other processes, no lock either side.
 *
 * The writer makes the counter odd, stores the words, makes it even again;
 * a reader's copy is consistent when it read the same even value before
 * and after copying. Words are copied with release stores and acquire
 * loads (plain moves on x86; no fences, which ThreadSanitizer cannot
 * follow), so that the race the counter detects is not undefined
 * behaviour. Lengths are in 8-byte words, the page's alignment.
 */
#ifndef NEURONRT_TOP_SEQLOCK_H
#define NEURONRT_TOP_SEQLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Writes n words of src to dst under *seq (the caller is the only writer). */
static inline void rt_seqlock_write(uint64_t *seq, uint64_t *dst, const uint64_t *src, size_t n) {
  uint64_t s = __atomic_load_n(seq, __ATOMIC_RELAXED);
  __atomic_store_n(seq, s + 1, __ATOMIC_RELAXED);
  /* Release: odd before any word changes. */
  for (size_t i = 0; i < n; i++) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
  __atomic_store_n(seq, s + 2, __ATOMIC_RELEASE); /* every word before even */
}

/* Copies n words of src to dst; returns 1 if the copy is consistent, 0 if
 * a write was in progress or happened meanwhile (try again). */
static inline int rt_seqlock_read(const uint64_t *seq, uint64_t *dst, const uint64_t *src, size_t n) {
  uint64_t before = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
  if (before & 1) return 0;
  /* Acquire: every word read before the second look. */
  for (size_t i = 0; i < n; i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
  return __atomic_load_n(seq, __ATOMIC_RELAXED) == before;
}

#endif
