/* The caching device allocator.
 *
 * Serves tensor allocations from cached segments obtained with nrt_malloc,
 * so steady-state training loops never reach the device allocator. Blocks
 * are stream-ordered: a block freed after use on stream S is immediately
 * reusable by later allocations on S (S's order makes that safe); a block
 * also used on other streams (nrt_cache_record_stream) is reused only after
 * the work queued on those streams at free time has completed.
 *
 * Requests are rounded up to 512 bytes. Requests up to 1 MiB come from the
 * small pool (2 MiB segments); larger ones from the large pool (20 MiB
 * segments below 10 MiB, else rounded up to 2 MiB). Statistics mirror what
 * torch.cuda.memory_stats reports. Thread-safe.
 */
#ifndef NEURONRT_CACHING_ALLOCATOR_H
#define NEURONRT_CACHING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/status.h"
#include "neuronrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_stat {
  int64_t current, peak, allocated, freed;
} nrt_stat;

/* Index of a stat array: both pools, small pool, large pool. */
enum { NRT_POOL_ALL = 0, NRT_POOL_SMALL = 1, NRT_POOL_LARGE = 2, NRT_POOL_KINDS = 3 };

typedef struct nrt_cache_stats {
  nrt_stat allocation[NRT_POOL_KINDS];      /* live allocations */
  nrt_stat segment[NRT_POOL_KINDS];         /* segments from nrt_malloc */
  nrt_stat active[NRT_POOL_KINDS];          /* allocated or awaiting streams */
  nrt_stat inactive_split[NRT_POOL_KINDS];  /* free blocks inside used segments */
  nrt_stat allocated_bytes[NRT_POOL_KINDS];
  nrt_stat reserved_bytes[NRT_POOL_KINDS];
  nrt_stat active_bytes[NRT_POOL_KINDS];
  nrt_stat inactive_split_bytes[NRT_POOL_KINDS];
  nrt_stat requested_bytes[NRT_POOL_KINDS];  /* before rounding */
  int64_t num_alloc_retries;  /* nrt_malloc failed, cache flushed, retried */
  int64_t num_ooms;
  int64_t num_sync_all_streams;
  int64_t num_device_alloc;
  int64_t num_device_free;
} nrt_cache_stats;

/* Allocates bytes for use on stream (its device). bytes == 0 gives NULL.
 * On exhaustion returns NRT_ERROR_OUT_OF_MEMORY with a message stating the
 * request, the allocated, reserved and free bytes and the capacity. */
nrt_status nrt_cache_alloc(nrt_stream_t stream, size_t bytes, void **dev_ptr);
/* Returns a block to the cache (NULL is a no-op). */
nrt_status nrt_cache_free(void *dev_ptr);
/* Marks a block as used by stream, delaying its reuse after free. */
nrt_status nrt_cache_record_stream(void *dev_ptr, nrt_stream_t stream);
/* Releases every fully free cached segment of the device to nrt_free. */
nrt_status nrt_cache_empty(int32_t device);
nrt_status nrt_cache_get_stats(int32_t device, nrt_cache_stats *out);
nrt_status nrt_cache_reset_peak(int32_t device);
nrt_status nrt_cache_reset_accumulated(int32_t device);

#ifdef __cplusplus
}
#endif
#endif
