/* The kernel thread pool: splits one kernel's work across host cores.
 *
 * Size: TORCHNEURON_NUM_THREADS, or the number of cores this process may
 * run on. The calling thread (a stream worker) takes part, so a pool of N
 * runs N-1 helpers, each kept to a core of its own when there are enough
 * (TORCHNEURON_PIN_THREADS), the callers then to the one left. One kernel
 * uses the pool at a time; a kernel that finds it busy (another stream's
 * kernel) runs serially instead of waiting.
 */
#ifndef NEURONRT_OPS_THREAD_POOL_H
#define NEURONRT_OPS_THREAD_POOL_H

#include <stdint.h>

/* Processes [begin, end) of the work; called concurrently on disjoint ranges. */
typedef void (*rt_range_fn)(int64_t begin, int64_t end, void *ctx);

/* Runs fn over [0, n) split into contiguous ranges (a few per thread),
 * none shorter than grain (so small work stays on one thread). How the
 * work is split must not change results: fn sees arbitrary boundaries. */
void rt_parallel_for(int64_t n, int64_t grain, rt_range_fn fn, void *ctx);

/* The same for light work, where a grain is a few microseconds (memory-
 * bound element loops): finer ranges, and helpers that sleep are woken
 * only when the work is worth their wake-up (tens of microseconds on a
 * VM), else the caller runs it alone. */
void rt_parallel_for_light(int64_t n, int64_t grain, rt_range_fn fn, void *ctx);

int rt_num_threads(void);

/* Keeps the calling thread (a stream worker, at its start) to the core the
 * helpers leave free, when they are pinned; otherwise does nothing. */
void rt_keep_to_caller_core(void);

#endif
