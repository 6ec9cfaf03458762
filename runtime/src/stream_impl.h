/* The stream's private layout, shared by stream.c (the worker, the table,
 * synchronisation) and stream_launch.c (what producers append). */
#ifndef RT_STREAM_IMPL_H
#define RT_STREAM_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "fuse/adaptive.h"
#include "internal.h"
#include "profiling.h"

/* Frees remembered for dead-store elision: more than a training step's
 * queue frees between the launch of an op and the worker reaching it. */
#define FREE_LOG_SIZE 256
#define PROF_CHUNK_RECORDS 1024
#define PROF_CHUNKS (NRT_PROFILE_RING_RECORDS / PROF_CHUNK_RECORDS)

typedef enum command_kind {
  CMD_OP,
  CMD_COPY,
  CMD_HOST_FUNC,
  CMD_HOST_TASK,
  CMD_RECORD,
  CMD_WAIT
} command_kind;

typedef struct command {
  command_kind kind;
  rt_launch_stamp prof; /* launch_id 0 unless a profile records (profiling.h) */
  union {
    nrt_op op;
    struct {
      void *dst;
      const void *src;
      size_t bytes;
      const void *pinned[2]; /* pinned host buffers held until done */
    } copy;
    struct {
      void (*fn)(void *);
      void *arg;
    } host;
    struct {
      nrt_status (*run)(void *);
      void (*release)(void *);
      void *arg;
      char name[NRT_HOST_TASK_NAME_MAX];
    } task;
    struct {
      nrt_event_t event;
      uint64_t generation;
    } event;
  } u;
} command;

/* Commands live at slot seq % depth. A grown ring replaces the one it
 * copied; the old one stays allocated until the stream is freed (the worker
 * may still be running a command in it), which costs at most the size of
 * the newest ring again. */
typedef struct ring {
  uint64_t depth; /* a power of two */
  struct ring *older;
  command slots[];
} ring;

struct nrt_stream {
  int32_t device;
  int32_t priority;
  int64_t id;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* worker: commands arrived or stop */
  pthread_cond_t done_cv; /* producers/synchronizers: a command completed */
  pthread_t thread;
  int thread_started;
  atomic_int refs;    /* the table's, plus device synchronizes in progress */
  int stopping;
  int worker_sleeping;         /* under mu: the worker waits on work_cv */
  _Atomic(ring *) ring;        /* written under mu, before the commit of the commands it adds */
  atomic_int failed;           /* error != NRT_SUCCESS, read without mu */
  nrt_status error;            /* sticky asynchronous error, under mu */
  char error_message[1024];
  /* The counters, on cache lines apart: producers write `submitted` at
   * every launch, the worker writes `completed` at every completion. On one
   * line with the fields above, each launch waited for that line to come
   * back from the worker's core (a tenth of a small op's host time). */
  _Alignas(64) atomic_uint_fast64_t submitted; /* last submitted sequence number (written under mu) */
  uint64_t completed_seen; /* under mu: `completed` as last read by a producer */
  _Alignas(64) atomic_uint_fast64_t completed; /* last completed one (written by the executor) */
  atomic_int executing; /* 1 while a thread runs commands: the worker, or a synchroniser (run_inline) */
  /* For neuron-top (top.c), read by the publisher: work commands run, and
   * the busy time in one word (see mark_busy). Written only by the thread
   * holding `executing`, on the line it writes at every completion anyway. */
  atomic_uint_fast64_t ops_run;
  atomic_int_fast64_t busy_mark;
  atomic_uint_fast64_t wake_at; /* least sequence number a thread sleeping on done_cv awaits */
  rt_adaptive *adaptive;        /* the worker's fusion planner, made with the worker */
  /* Blocks freed for this stream (stream_free_log.h), a ring under free_mu. */
  pthread_mutex_t free_mu;
  uint32_t free_next;
  struct {
    uintptr_t lo, hi;
    uint64_t seq;
  } frees[FREE_LOG_SIZE];
  /* Profile records (neuronrt/profile.h): a ring of chunks the worker
   * allocates as it first fills them; the worker advances head, one
   * drainer at a time advances tail. */
  nrt_profile_record *prof_chunk[PROF_CHUNKS];
  atomic_uint_fast64_t prof_head, prof_tail, prof_dropped;
};

/* Reserves the next ring slot (growing the ring, or waiting while it is
 * full) and starts the worker if needed. Work (ops, copies, host tasks) is
 * refused with the sticky error of a failed stream; bookkeeping (event
 * records and waits, host functions) is always queued, so that nothing
 * waiting on it hangs and resources are still released. Returns with s->mu
 * held and *seq set; the caller fills the slot and calls
 * rt_stream_commit_locked, which publishes it and releases s->mu. */
nrt_status rt_stream_reserve_locked(nrt_stream_t s, int bookkeeping, command **slot, uint64_t *seq);
void rt_stream_commit_locked(nrt_stream_t s);
/* Waits until command seq has completed; then reports any sticky error. */
nrt_status rt_stream_wait_for(nrt_stream_t s, uint64_t seq);
/* Hands each record queued on s to fn (NULL: discards them), oldest first;
 * returns how many were dropped since the last drain. One drainer at a time. */
uint64_t rt_stream_drain_records(nrt_stream_t s, void (*fn)(const nrt_profile_record *, void *), void *arg);

#endif
