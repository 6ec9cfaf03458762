/* Events: markers in a stream's queue.
 *
 * Each record bumps the event's generation and queues a marker; the stream
 * worker completes that generation (stamping the time) when it reaches the
 * marker. Queries and waits compare the completed generation with the one
 * recorded when they were asked, which gives CUDA's semantics: waiting on
 * an event waits for its most recent record at the time of the call.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "event.h"
#include "internal.h"

struct nrt_event {
  uint32_t flags;
  atomic_int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t recorded;  /* generation of the last record */
  uint64_t completed; /* highest generation completed */
  uint64_t time_ns;   /* when `completed` was reached */
  int32_t device;
  /* The sticky error of the stream when the record of generation
   * failed_generation was reached (0: none), for those who wait on it. */
  uint64_t failed_generation;
  nrt_status failure;
  char failure_message[NRT_EVENT_FAILURE_MAX];
};

nrt_status nrt_event_create(uint32_t flags, nrt_event_t *out) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_create: out is NULL");
  if (flags & ~(NRT_EVENT_TIMING | NRT_EVENT_BLOCKING_SYNC))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_create: unknown flags 0x%x", flags);
  nrt_event_t e = calloc(1, sizeof *e);
  if (!e) return rt_fail(NRT_ERROR_SYSTEM, "out of host memory creating an event");
  e->flags = flags;
  atomic_init(&e->refs, 1);
  e->device = -1;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = e;
  return NRT_SUCCESS;
}

void rt_event_retain(nrt_event_t e) { atomic_fetch_add(&e->refs, 1); }

void rt_event_release(nrt_event_t e) {
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
}

nrt_status nrt_event_destroy(nrt_event_t e) {
  if (!e) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_destroy: NULL event");
  rt_event_release(e);
  return NRT_SUCCESS;
}

nrt_status nrt_event_record(nrt_event_t e, nrt_stream_t stream) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!e || !stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_record: NULL argument");
  pthread_mutex_lock(&e->mu);
  uint64_t generation = ++e->recorded;
  e->device = nrt_stream_device(stream);
  pthread_mutex_unlock(&e->mu);
  if ((s = rt_stream_record(stream, e, generation))) {
    rt_event_complete(e, generation, NRT_SUCCESS, NULL); /* never queued: waiters must not hang */
    return s;
  }
  return nrt_launch_blocking() ? nrt_event_synchronize(e) : NRT_SUCCESS;
}

void rt_event_complete(nrt_event_t e, uint64_t generation, nrt_status failure,
                       const char *message) {
  pthread_mutex_lock(&e->mu);
  if (generation > e->completed) {
    e->completed = generation;
    e->time_ns = rt_now_ns();
  }
  if (failure && generation >= e->failed_generation) {
    e->failed_generation = generation;
    e->failure = failure;
    snprintf(e->failure_message, sizeof e->failure_message, "%s", message ? message : "");
  }
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void rt_event_wait(nrt_event_t e, uint64_t generation) {
  pthread_mutex_lock(&e->mu);
  while (e->completed < generation) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
}

nrt_status rt_event_failure(nrt_event_t e, uint64_t generation, char *message, size_t size) {
  pthread_mutex_lock(&e->mu);
  /* A stream stays failed once it has failed, so a later failed record
   * means this one's work failed too, or was skipped. */
  nrt_status failure = generation && e->failed_generation >= generation ? e->failure : NRT_SUCCESS;
  if (failure && message && size) snprintf(message, size, "%s", e->failure_message);
  pthread_mutex_unlock(&e->mu);
  return failure;
}

/* The failure of a completed generation as the caller's status. */
static nrt_status report_failure(nrt_event_t e, uint64_t generation) {
  char message[NRT_EVENT_FAILURE_MAX];
  nrt_status failure = rt_event_failure(e, generation, message, sizeof message);
  return failure ? rt_fail(failure, "%s", message) : NRT_SUCCESS;
}

int rt_event_pending(nrt_event_t e, uint64_t *generation) {
  pthread_mutex_lock(&e->mu);
  *generation = e->recorded;
  int pending = e->completed < e->recorded;
  pthread_mutex_unlock(&e->mu);
  return pending;
}

nrt_status nrt_event_query(nrt_event_t e) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!e) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_query: NULL event");
  uint64_t generation;
  return rt_event_pending(e, &generation) ? NRT_ERROR_NOT_READY : report_failure(e, generation);
}

nrt_status nrt_event_synchronize(nrt_event_t e) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!e) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_synchronize: NULL event");
  rt_metric_add(NRT_METRIC_EVENT_SYNCS, 1);
  uint64_t generation;
  if (rt_event_pending(e, &generation)) rt_event_wait(e, generation);
  return report_failure(e, generation);
}

nrt_status nrt_event_elapsed_ms(nrt_event_t start, nrt_event_t end, float *ms) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!start || !end || !ms)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_elapsed_ms: NULL argument");
  if (!(start->flags & NRT_EVENT_TIMING) || !(end->flags & NRT_EVENT_TIMING))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "elapsed time needs both events created with timing enabled");
  uint64_t t0, t1, r0, r1, c0, c1;
  pthread_mutex_lock(&start->mu);
  r0 = start->recorded, c0 = start->completed, t0 = start->time_ns;
  pthread_mutex_unlock(&start->mu);
  pthread_mutex_lock(&end->mu);
  r1 = end->recorded, c1 = end->completed, t1 = end->time_ns;
  pthread_mutex_unlock(&end->mu);
  if (r0 == 0 || r1 == 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "elapsed time needs both events to have been recorded");
  if (c0 != r0 || c1 != r1)
    return rt_fail(NRT_ERROR_NOT_READY, "elapsed time: an event has not completed yet");
  *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
  return NRT_SUCCESS;
}

int32_t nrt_event_device(nrt_event_t e) {
  pthread_mutex_lock(&e->mu);
  int32_t device = e->device;
  pthread_mutex_unlock(&e->mu);
  return device;
}
