/* Frees in stream order, for the dead-store elision of adaptive eager
 * execution (fuse/adaptive.c). The caching allocator notes every block it
 * frees for immediate reuse on a stream, with the stream's submitted count
 * at the free: every command that can still read the block's old contents
 * was queued by then, so a fused group covering that count may leave the
 * block unwritten. The log is a small ring; an entry lost to overflow only
 * means a store that is not elided. */
#ifndef NEURONRT_STREAM_FREE_LOG_H
#define NEURONRT_STREAM_FREE_LOG_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/stream.h"

/* Notes that [addr, addr + size) was freed when s had submitted seq. */
void rt_stream_note_free(nrt_stream_t s, uintptr_t addr, size_t size, uint64_t seq);

/* Whether [lo, hi) lies in one block freed when s's submitted count was in
 * [from, to]. */
int rt_stream_freed_within(nrt_stream_t s, uintptr_t lo, uintptr_t hi, uint64_t from, uint64_t to);

#endif
