/* Internal event interface used by the stream workers. */
#ifndef NEURONRT_EVENT_INTERNAL_H
#define NEURONRT_EVENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/stream.h"

#define NRT_EVENT_FAILURE_MAX 1024

/* Queued commands hold a reference so that destroying an event with a
 * record or wait still queued is safe. */
void rt_event_retain(nrt_event_t event);
void rt_event_release(nrt_event_t event);

/* Worker side: generation `generation` of the event has been reached, on a
 * stream whose sticky error was failure (with message) or NRT_SUCCESS. */
void rt_event_complete(nrt_event_t event, uint64_t generation, nrt_status failure,
                       const char *message);
/* The failure that generation `generation` completed with (its message
 * copied into message), or NRT_SUCCESS. */
nrt_status rt_event_failure(nrt_event_t event, uint64_t generation, char *message, size_t size);
/* Worker side: blocks until generation `generation` completed. */
void rt_event_wait(nrt_event_t event, uint64_t generation);
/* Nonzero if the last record has not completed; *generation receives it. */
int rt_event_pending(nrt_event_t event, uint64_t *generation);

/* stream.c: queues the completion of generation `generation` on stream. */
nrt_status rt_stream_record(nrt_stream_t stream, nrt_event_t event, uint64_t generation);

#endif
