/* Process-wide counters of what the runtime did: kernels and host tasks
 * queued on streams, bytes copied in each direction, allocator retries and
 * out-of-memory failures, synchronisations.
 *
 * Each counter is one relaxed atomic add where the event happens, so they
 * stay on in every build. Totals are since start-up or the last
 * nrt_metrics_clear; a counter read while other threads count may lag by
 * the adds in flight.
 */
#ifndef NEURONRT_METRICS_H
#define NEURONRT_METRICS_H

#include <stdint.h>
#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, "name"): the one list of counters (enum, names, storage). */
#define NRT_METRIC_LIST(X)                                  \
  X(KERNELS_LAUNCHED, "runtime.kernels_launched")           \
  X(HOST_TASKS_LAUNCHED, "runtime.host_tasks_launched")     \
  X(COPIES_HOST_TO_DEVICE, "copy.host_to_device.copies")    \
  X(BYTES_HOST_TO_DEVICE, "copy.host_to_device.bytes")      \
  X(COPIES_DEVICE_TO_HOST, "copy.device_to_host.copies")    \
  X(BYTES_DEVICE_TO_HOST, "copy.device_to_host.bytes")      \
  X(COPIES_DEVICE_TO_DEVICE, "copy.device_to_device.copies") \
  X(BYTES_DEVICE_TO_DEVICE, "copy.device_to_device.bytes")  \
  X(ALLOC_RETRIES, "allocator.retries")                     \
  X(ALLOC_OOMS, "allocator.ooms")                           \
  X(STREAM_SYNCS, "sync.stream")                            \
  X(DEVICE_SYNCS, "sync.device")                            \
  X(EVENT_SYNCS, "sync.event")                              \
  X(FUSE_REGISTER_LOOPS, "fuse.register_loops")            \
  X(FUSE_CODEGEN_KERNELS, "fuse.codegen.kernels")           \
  X(FUSE_CODEGEN_CACHE_HITS, "fuse.codegen.cache_hits")     \
  X(FUSE_CODEGEN_RUNS, "fuse.codegen.runs")                 \
  X(FUSE_CODEGEN_FALLBACKS, "fuse.codegen.fallbacks")       \
  X(FUSE_CODEGEN_BACKGROUND, "fuse.codegen.background")     \
  X(FUSE_CODEGEN_PENDING, "fuse.codegen.pending")          \
  X(CONV_BLOCKED, "conv.blocked")                           \
  X(CONV_COLUMNS, "conv.columns")                           \
  X(CONV_AMX_COLUMNS, "conv.amx_columns")                   \
  X(CONV_AMX_DIRECT, "conv.amx_direct")                     \
  X(CONV3D_FOLD, "conv3d.fold")                             \
  X(ATTENTION_BF16_TILES, "attention.bf16_tiles")          \
  X(ATTENTION_BF16_BACKWARD_TILES, "attention.bf16_backward_tiles")

#define NRT_METRIC_ENUM_(e, name) NRT_METRIC_##e,
typedef enum nrt_metric { NRT_METRIC_LIST(NRT_METRIC_ENUM_) NRT_METRIC_COUNT } nrt_metric;
#undef NRT_METRIC_ENUM_

/* The counter's dotted name, or NULL for a value out of range. */
const char *nrt_metric_name(nrt_metric metric);
/* The counter's total (0 for a value out of range). */
uint64_t nrt_metric_value(nrt_metric metric);
void nrt_metrics_clear(void);

#ifdef __cplusplus
}
#endif
#endif
