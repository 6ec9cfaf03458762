/* A stream's profile records (neuronrt/profile.h): a ring of chunks that
 * the thread running the stream's commands fills (allocating a chunk as it
 * first reaches it) and one drainer at a time empties (nrt_profile_drain,
 * stream.c). A full ring, or a chunk that cannot be allocated, drops the
 * record and counts it. */
#include <stdlib.h>
#include "stream_impl.h"

void rt_profile_emit(nrt_stream_t s, const nrt_profile_record *r) {
  uint64_t head = atomic_load_explicit(&s->prof_head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&s->prof_tail, memory_order_acquire);
  nrt_profile_record **chunk = &s->prof_chunk[(head / PROF_CHUNK_RECORDS) % PROF_CHUNKS];
  if (head - tail >= NRT_PROFILE_RING_RECORDS ||
      (!*chunk && !(*chunk = malloc(PROF_CHUNK_RECORDS * sizeof **chunk)))) {
    atomic_fetch_add_explicit(&s->prof_dropped, 1, memory_order_relaxed);
    return;
  }
  (*chunk)[head % PROF_CHUNK_RECORDS] = *r;
  atomic_store_explicit(&s->prof_head, head + 1, memory_order_release);
}

uint64_t rt_stream_drain_records(nrt_stream_t s, void (*fn)(const nrt_profile_record *, void *), void *arg) {
  uint64_t head = atomic_load_explicit(&s->prof_head, memory_order_acquire);
  uint64_t tail = atomic_load_explicit(&s->prof_tail, memory_order_relaxed);
  for (; tail != head; tail++)
    if (fn) fn(&s->prof_chunk[(tail / PROF_CHUNK_RECORDS) % PROF_CHUNKS][tail % PROF_CHUNK_RECORDS], arg);
  atomic_store_explicit(&s->prof_tail, tail, memory_order_release);
  return atomic_exchange_explicit(&s->prof_dropped, 0, memory_order_relaxed);
}
