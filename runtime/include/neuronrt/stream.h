/* Streams, events and launches.
 *
 * A stream is an in-order queue of device work served by its own worker
 * thread (started on first use). Work on different streams is unordered
 * unless ordered by events. Every device has a default stream (id 0) and a
 * pool of streams per priority that nrt_stream_get_pooled hands out round
 * robin, so creating "new" streams in a loop never exhausts threads.
 *
 * Errors raised by queued work are sticky on the stream, as a context's
 * error is in CUDA: the kernels, copies and host tasks queued after the
 * failure are skipped (event records and waits and host functions still
 * run, so nothing deadlocks); from then on every synchronising call (stream
 * or device synchronize, stream query, a copy that waits for completion)
 * and every new launch, copy or host task on the stream returns the error
 * with the failing op's name, until nrt_stream_clear_error or
 * nrt_device_clear_errors. The skipped work left its outputs unwritten, so
 * a stale result never reads back as a good one. An event recorded after
 * the failure carries it: synchronising on the event returns it, and a
 * stream that waits on the event fails in turn. With
 * NEURON_LAUNCH_BLOCKING=1 every launch and copy waits for completion and
 * returns its own error at once.
 */
#ifndef NEURONRT_STREAM_H
#define NEURONRT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/status.h"
#include "neuronrt/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_stream *nrt_stream_t;
typedef struct nrt_event *nrt_event_t;

/* Priorities: lower number = higher priority, as in CUDA. */
#define NRT_STREAM_PRIORITY_HIGH (-1)
#define NRT_STREAM_PRIORITY_NORMAL 0
#define NRT_STREAM_POOL_SIZE 32

nrt_status nrt_stream_priority_range(int32_t *least, int32_t *greatest);

nrt_status nrt_stream_get_default(int32_t device, nrt_stream_t *out);
/* Next stream of the device's pool for that priority (clamped to range). */
nrt_status nrt_stream_get_pooled(int32_t device, int32_t priority, nrt_stream_t *out);
/* A stream of its own; nrt_stream_destroy waits for its work first. */
nrt_status nrt_stream_create(int32_t device, int32_t priority, nrt_stream_t *out);
nrt_status nrt_stream_destroy(nrt_stream_t stream);

/* Stable small integer naming the stream on its device (0 = default). */
int64_t nrt_stream_id(nrt_stream_t stream);
int32_t nrt_stream_device(nrt_stream_t stream);
int32_t nrt_stream_priority(nrt_stream_t stream);
/* Looks a stream up by device and id (ids of destroyed streams are invalid). */
nrt_status nrt_stream_from_id(int32_t device, int64_t id, nrt_stream_t *out);

nrt_status nrt_stream_synchronize(nrt_stream_t stream);
/* NRT_SUCCESS when all queued work finished, NRT_ERROR_NOT_READY if not. */
/* NRT_ERROR_NOT_READY while work is queued; then NRT_SUCCESS or the
 * stream's sticky error. */
nrt_status nrt_stream_query(nrt_stream_t stream);
/* Waits for the queued work (skipped if the stream has failed), then clears
 * the stream's sticky error so that it takes work again. */
nrt_status nrt_stream_clear_error(nrt_stream_t stream);
/* nrt_stream_clear_error on every stream of the device. */
nrt_status nrt_device_clear_errors(int32_t device);
nrt_status nrt_stream_wait_event(nrt_stream_t stream, nrt_event_t event);

/* Queues an op (the descriptor is copied). */
nrt_status nrt_launch(nrt_stream_t stream, const nrt_op *op);

/* Queues fn(arg) on the worker. fn must not call synchronising functions on
 * its own stream. */
nrt_status nrt_launch_host_func(nrt_stream_t stream, void (*fn)(void *), void *arg);

/* Queues host work that behaves like a kernel: run(arg) is skipped when the
 * stream already has a sticky error, and a status it returns (with its
 * thread message) becomes the stream's sticky error, reported as
 * "<name>: <message>". release(arg), if not NULL, is called exactly once
 * afterwards -- also when run was skipped, and at once if queuing fails --
 * so the call always takes ownership of arg. */
#define NRT_HOST_TASK_NAME_MAX 256
nrt_status nrt_launch_host_task(nrt_stream_t stream, const char *name, nrt_status (*run)(void *),
                                void (*release)(void *), void *arg);

/* Copies bytes between any two of: device memory (any device), pinned host
 * memory, pageable host memory; the direction is inferred from the
 * addresses. Copies touching only device and pinned memory return at once;
 * a copy touching pageable host memory returns when it has completed (and
 * reports sticky errors), because the caller may reuse that memory. */
nrt_status nrt_memcpy_async(nrt_stream_t stream, void *dst, const void *src, size_t bytes);

/* Events. Flags combine NRT_EVENT_TIMING and NRT_EVENT_BLOCKING_SYNC. */
#define NRT_EVENT_DEFAULT 0u
#define NRT_EVENT_TIMING 1u
#define NRT_EVENT_BLOCKING_SYNC 2u

nrt_status nrt_event_create(uint32_t flags, nrt_event_t *out);
nrt_status nrt_event_destroy(nrt_event_t event);
/* Captures the work queued on stream so far; the event completes after it. */
nrt_status nrt_event_record(nrt_event_t event, nrt_stream_t stream);
/* NRT_SUCCESS if completed (or never recorded), NRT_ERROR_NOT_READY if not;
 * the stream's sticky error if the record was reached on a failed stream. */
nrt_status nrt_event_query(nrt_event_t event);
/* Waits for the last record to complete; returns the sticky error of the
 * stream if the record was reached after a failure. */
nrt_status nrt_event_synchronize(nrt_event_t event);
/* Milliseconds between two completed, timing-enabled events. */
nrt_status nrt_event_elapsed_ms(nrt_event_t start, nrt_event_t end, float *ms);
/* Device of the stream the event was last recorded on (-1 if never). */
int32_t nrt_event_device(nrt_event_t event);

#ifdef __cplusplus
}
#endif
#endif
