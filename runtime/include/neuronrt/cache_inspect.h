/* Looking inside the caching allocator: its segments and blocks as they
 * are now, and a stream of the events that change them. PyTorch's memory
 * snapshots (torch.neuron.memory._snapshot) are built from these.
 */
#ifndef NEURONRT_CACHE_INSPECT_H
#define NEURONRT_CACHE_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_cache_block_state {
  NRT_CACHE_BLOCK_FREE = 0,      /* cached, free for reuse */
  NRT_CACHE_BLOCK_ALLOCATED = 1, /* in use */
  NRT_CACHE_BLOCK_PENDING = 2    /* freed, waiting for other streams' uses */
} nrt_cache_block_state;

typedef struct nrt_cache_block_info {
  uint64_t segment_addr; /* the segment holding the block */
  uint64_t segment_size;
  uint64_t addr;
  uint64_t size;      /* rounded, as carved from the segment */
  uint64_t requested; /* bytes asked for (0 unless allocated) */
  int64_t stream_id;  /* the segment's allocation stream (nrt_stream_id) */
  int32_t device;
  int32_t is_large;   /* segment of the large pool */
  int32_t state;      /* nrt_cache_block_state */
} nrt_cache_block_info;

/* Calls visit(ctx, info) for every block of the device, each segment's
 * blocks consecutively in address order (segments in no particular order).
 * Runs with the device's allocator lock held: visit must not call into the
 * allocator (or anything that may allocate device memory). */
nrt_status nrt_cache_visit_blocks(int32_t device,
                                  void (*visit)(void *ctx, const nrt_cache_block_info *info),
                                  void *ctx);

typedef enum nrt_cache_event_kind {
  NRT_CACHE_EVENT_ALLOC = 0,          /* a block was handed out */
  NRT_CACHE_EVENT_FREE_REQUESTED = 1, /* nrt_cache_free was called on it */
  NRT_CACHE_EVENT_FREE_COMPLETED = 2, /* it is free for reuse (after other streams' uses) */
  NRT_CACHE_EVENT_SEGMENT_ALLOC = 3,  /* a segment came from nrt_malloc */
  NRT_CACHE_EVENT_SEGMENT_FREE = 4,   /* a segment went back to nrt_free */
  NRT_CACHE_EVENT_OOM = 5             /* an allocation failed: size requested, device_free */
} nrt_cache_event_kind;

typedef struct nrt_cache_event {
  int32_t kind; /* nrt_cache_event_kind */
  int32_t device;
  uint64_t addr;
  uint64_t size;
  int64_t stream_id;
  uint64_t device_free; /* NRT_CACHE_EVENT_OOM: bytes the device still had free */
} nrt_cache_event;

/* Sets (or, with NULL, removes) the one observer of allocator events. It is
 * called on the thread that caused the event, with the device's allocator
 * lock held: it must be quick and must not call into the allocator. With
 * no observer each event costs one load and branch. */
nrt_status nrt_cache_set_observer(void (*observer)(void *ctx, const nrt_cache_event *event),
                                  void *ctx);

#ifdef __cplusplus
}
#endif
#endif
