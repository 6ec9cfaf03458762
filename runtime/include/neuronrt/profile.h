/* Device activity for profilers: what each stream's worker ran, when, for
 * which launch, and what it would cost on the configured Trainium target.
 *
 * While profiling is on (nrt_profile_start), every launch (kernel, copy,
 * host task: compiled programs, fused groups, NKI programs, collectives)
 * is stamped with its launch time, the launching thread and the calling
 * thread's correlation id (nrt_profile_push_correlation), and the worker
 * writes a record when it finishes the command into its stream's ring.
 * Ops that adaptive eager execution fused are one record of kind FUSED
 * plus one FUSED_MEMBER record per member op (the group's time shared out
 * by the members' estimates); a compiled program's steps are PROGRAM_STEP
 * records inside the program's. With profiling off a launch pays one
 * predictable branch, and so does the worker per command.
 *
 * Times are CLOCK_MONOTONIC nanoseconds. The estimate (est_ns, bound) is a
 * roofline model (neuronrt/roofline.h), not a measurement.
 */
#ifndef NEURONRT_PROFILE_H
#define NEURONRT_PROFILE_H

#include <stdint.h>
#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_profile_kind {
  NRT_PROFILE_KERNEL = 0,   /* an eager op */
  NRT_PROFILE_COPY,         /* nrt_memcpy_async */
  NRT_PROFILE_FUSED,        /* an adaptive-eager fused group */
  NRT_PROFILE_FUSED_MEMBER, /* one op of that group */
  NRT_PROFILE_PROGRAM,      /* a compiled program */
  NRT_PROFILE_PROGRAM_STEP, /* one step of it (kernel, fused group, NKI kernel) */
  NRT_PROFILE_NKI,          /* an NKI program */
  NRT_PROFILE_HOST_TASK,    /* any other host task (collectives, ...) */
  NRT_PROFILE_KIND_COUNT
} nrt_profile_kind;

typedef enum nrt_bound {
  NRT_BOUND_UNKNOWN = 0, /* no estimate (host tasks other than collectives) */
  NRT_BOUND_MEMORY,
  NRT_BOUND_COMPUTE,
  NRT_BOUND_LINK         /* a collective's transfers over NeuronLink or EFA */
} nrt_bound;

#define NRT_PROFILE_NAME_MAX 96

typedef struct nrt_profile_record {
  uint64_t launch_ns;      /* when the launch call began (0: a part of another record) */
  uint64_t launched_ns;    /* when it returned */
  uint64_t start_ns, end_ns;
  uint64_t correlation;    /* the launching thread's id when it launched (0: none) */
  uint64_t launch_id;      /* one per launch; parts share their launch's */
  int64_t stream;
  int32_t device;
  int32_t launch_tid;      /* gettid() of the launching thread */
  int32_t worker_tid;      /* of the worker that ran it */
  int32_t kind;            /* nrt_profile_kind */
  int32_t bound;           /* nrt_bound */
  int32_t engine;          /* nrt_roofline_engine of the compute term */
  double est_ns;           /* estimated time on the target, 0 when unknown */
  double bytes, flops;     /* what the estimate counted */
  double link_bytes;       /* of a collective: bytes over NeuronLink / EFA (0: none) */
  char name[NRT_PROFILE_NAME_MAX];
} nrt_profile_record;

/* Starts recording (clearing what earlier sessions left unread), stops. */
nrt_status nrt_profile_start(void);
void nrt_profile_stop(void);
int nrt_profile_active(void);

/* The calling thread's correlation id, stamped on its launches: push sets
 * it (remembering the previous one), pop restores the previous one. */
void nrt_profile_push_correlation(uint64_t id);
void nrt_profile_pop_correlation(void);

/* Hands every record written since the last drain to fn, stream by stream
 * in completion order, and forgets them. Call after the work completed
 * (records of commands still running arrive at a later drain). Returns
 * the number of records dropped because a stream's ring was full. */
uint64_t nrt_profile_drain(void (*fn)(const nrt_profile_record *, void *), void *arg);

/* Records kept per stream between drains; older ones are kept, newer
 * ones dropped (and counted) when full. */
#define NRT_PROFILE_RING_RECORDS 65536

const char *nrt_profile_kind_name(int32_t kind);

#ifdef __cplusplus
}
#endif
#endif
