/* Adaptive eager execution: a stream's worker fuses the pointwise ops
 * already queued behind the one it takes into one fused group (see
 * neuronrt/fuse.h), so that a chain of them is one pass over memory.
 *
 * Results are bitwise those of running the ops one by one, and stream
 * semantics (order, events, sticky errors) are unchanged. The worker never
 * waits for ops to arrive: only what is already queued fuses. A tensor
 * written by a fused op and freed (nrt_cache_free) before its group runs
 * is kept in a register and not stored.
 *
 * On by default; TORCHNEURON_ADAPTIVE_EAGER=0 turns it off at start-up,
 * and NEURON_LAUNCH_BLOCKING=1 (each launch completes before it returns)
 * leaves nothing queued to fuse, so it reads as off.
 */
#ifndef NEURONRT_ADAPTIVE_EAGER_H
#define NEURONRT_ADAPTIVE_EAGER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Takes effect for the groups workers form from now on. */
void nrt_adaptive_eager_set_enabled(int enabled);

/* Whether workers fuse (0 under NEURON_LAUNCH_BLOCKING). */
int nrt_adaptive_eager_enabled(void);

typedef struct nrt_adaptive_eager_counters {
  uint64_t groups;        /* fused groups run */
  uint64_t fused_ops;     /* ops run inside them */
  uint64_t elided_writes; /* outputs of those ops not stored: freed before the
                             group ran, or overwritten by a later op of it */
} nrt_adaptive_eager_counters;

/* Process-wide totals since start-up or the last clear. */
void nrt_adaptive_eager_get_counters(nrt_adaptive_eager_counters *counters);
void nrt_adaptive_eager_clear_counters(void);

#ifdef __cplusplus
}
#endif
#endif
