/* Adaptive eager execution: the stream worker's planner, which turns a run
 * of queued pointwise ops into one fused group (neuronrt/adaptive_eager.h).
 * stream.c hands it the ops queued from the one the worker takes on; it
 * answers how many of them one group runs. */
#ifndef NEURONRT_FUSE_ADAPTIVE_H
#define NEURONRT_FUSE_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/fuse.h"

/* The most ops one run takes. */
#define RT_ADAPTIVE_MAX_RUN NRT_FUSE_MAX_INSTS

/* The fewest elements a run has: below, a fused group's set-up costs
 * about what the passes over memory it saves do. */
#define RT_ADAPTIVE_MIN_NUMEL 16384

typedef struct rt_adaptive rt_adaptive;

/* A worker's planner (the group it builds, and its scratch), or NULL. */
rt_adaptive *rt_adaptive_new(void);
void rt_adaptive_free(rt_adaptive *a);

/* Whether workers fuse: one relaxed load. */
int rt_adaptive_on(void);

/* Whether op may be part of a run (a pointwise op or a copy that cannot fail). */
int rt_adaptive_candidate(const nrt_op *op);

/* ops[0..n) were queued on stream s as commands first_seq, first_seq + 1,
 * ...; returns how many of them from the first (at least 2) the group it
 * built runs, or 0 when ops[0] is to run alone. */
int rt_adaptive_plan(rt_adaptive *a, nrt_op *const *ops, int n, uint64_t first_seq,
                     nrt_stream_t s);

/* Runs the planned group and counts it. On failure, the thread's message
 * is the op's, and name receives the group's name. */
nrt_status rt_adaptive_run(rt_adaptive *a, char *name, size_t name_cap);

#endif
