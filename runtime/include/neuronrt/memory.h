/* Device and pinned host memory.
 *
 * Each device owns an HBM arena: a range of host virtual addresses reserved
 * with no access rights. Pointers returned by nrt_malloc are addresses in that
 * range ("device addresses"): host code that dereferences one faults, as on
 * real hardware. The runtime reaches the bytes through a second, private
 * mapping at a fixed distance (nrt_device_to_host is one add). Capacity per
 * device is enforced; exhausting it is NRT_ERROR_OUT_OF_MEMORY, never abort.
 */
#ifndef NEURONRT_MEMORY_H
#define NEURONRT_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates bytes (aligned to 4 KiB) on device. bytes == 0 gives NULL. */
nrt_status nrt_malloc(int32_t device, size_t bytes, void **dev_ptr);

/* Frees a pointer returned by nrt_malloc; NULL is a no-op. Work that uses
 * the memory must have completed (the caching allocator ensures this). */
nrt_status nrt_free(void *dev_ptr);

/* Free and total capacity of the device, in bytes. */
nrt_status nrt_mem_get_info(int32_t device, size_t *free_bytes, size_t *total_bytes);

/* Which device owns an address (any address inside a device's arena).
 * NRT_ERROR_INVALID_ARGUMENT if ptr is not a device address. */
nrt_status nrt_pointer_get_device(const void *ptr, int32_t *device);

/* The runtime's host alias of a device address, for the runtime's kernels
 * and tests. Returns NULL for a pointer outside every arena. */
void *nrt_device_to_host(const void *dev_ptr);

/* Pinned (page-locked, registered) host memory: the only host memory that
 * nrt_memcpy_async copies asynchronously. Freeing a buffer with copies still
 * queued defers the release until they complete. */
nrt_status nrt_host_alloc(size_t bytes, void **host_ptr);
nrt_status nrt_host_free(void *host_ptr);

/* Nonzero if ptr lies inside a live pinned buffer; *base receives its start
 * and *size its length when the pointers are not NULL. */
int nrt_host_is_pinned(const void *ptr, void **base, size_t *size);

#ifdef __cplusplus
}
#endif
#endif
