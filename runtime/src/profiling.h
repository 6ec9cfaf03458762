/* The runtime's side of neuronrt/profile.h, shared by the stream code,
 * fused groups, compiled programs and NKI programs. */
#ifndef NEURONRT_PROFILING_H
#define NEURONRT_PROFILING_H

#include <stdatomic.h>
#include <stdint.h>
#include "neuronrt/nrt.h"
#include "neuronrt/profile.h"
#include "neuronrt/roofline.h"

/* Nonzero while a profile records: the one branch a launch pays. */
extern atomic_int rt_profiling;
#define RT_PROFILING() __builtin_expect(atomic_load_explicit(&rt_profiling, memory_order_relaxed), 0)

/* What a launch stamps on its command while profiling (launch_id 0: not). */
typedef struct rt_launch_stamp {
  uint64_t launch_id, correlation, launch_ns, launched_ns;
  int32_t launch_tid, kind;
} rt_launch_stamp;

/* Fills a stamp on the launching thread, as it commits the command. */
void rt_profile_stamp(rt_launch_stamp *stamp, int32_t kind);
/* The launch's one branch: stamps while profiling, else marks the command
 * unprofiled. */
#define RT_PROFILE_STAMP(stamp, kind)                 \
  do {                                                \
    if (RT_PROFILING()) rt_profile_stamp(stamp, kind); \
    else (stamp)->launch_id = 0;                      \
  } while (0)

/* stream.c: nrt_launch_host_task with the kind its records carry. */
nrt_status rt_launch_host_task_kind(nrt_stream_t stream, int32_t kind, const char *name,
                                    nrt_status (*run)(void *), void (*release)(void *), void *arg);

/* A worker's command being profiled: parts (program steps) and estimates
 * reported from inside a host task land here. NULL when not profiling. */
typedef struct rt_profile_ctx {
  nrt_stream_t stream;
  const rt_launch_stamp *stamp;
  nrt_roofline est;   /* what the command's own code reported */
  int has_est;
} rt_profile_ctx;
extern _Thread_local rt_profile_ctx *rt_profile_current;

/* A record with the stream's ids and the worker's thread filled in,
 * from a stamp (or for a part, the context's stamp with launch_ns 0). */
void rt_profile_record_init(nrt_profile_record *r, nrt_stream_t s, const rt_launch_stamp *stamp,
                            const char *name);
void rt_profile_set_estimate(nrt_profile_record *r, int32_t device, nrt_roofline *est);
/* Appends to the stream's ring (stream.c; the stream's worker only). */
void rt_profile_emit(nrt_stream_t s, const nrt_profile_record *r);
/* Inside a profiled host task: a part of it, run between start and end. */
void rt_profile_part(const char *name, uint64_t start_ns, uint64_t end_ns, nrt_roofline *est);
/* Inside a profiled host task: adds to the command's own estimate. */
void rt_profile_add_estimate(const nrt_roofline *est);
/* The estimate of an NKI program from its cost model. */
void rt_profile_nki_estimate(const nrt_nc_estimate *e, nrt_roofline *out);

int32_t rt_gettid(void);

#endif
