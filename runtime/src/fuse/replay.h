/* Replaying instructions' loops instead of calling their kernels.
 *
 * The VM calls an instruction's kernel on the first tile with a loop
 * capture active (ops/pointwise/loop_capture.h); when the capture is
 * usable, later blocks call the captured loop directly: no op to build, no
 * checks, no iteration setup, the same loop on the same operands. A block
 * whose operands are single values where the captured tile's were not (or
 * the reverse) goes back to the kernel, which might choose another loop;
 * so does a loop that raises its fault flag, so that the kernel reports
 * the error. Captures live in each thread's run; a compiled step keeps
 * them across runs too (rt_fuse_replays), which is what makes a graph of
 * many small nodes cheap to call.
 */
#ifndef NEURONRT_FUSE_REPLAY_H
#define NEURONRT_FUSE_REPLAY_H

#include "fuse/fuse_group.h"
#include "ops/pointwise/loop_capture.h"

enum { RT_REPLAY_UNKNOWN = 0, RT_REPLAY_DIRECT = 1, RT_REPLAY_KERNEL = -1 };

/* An instruction's state in one thread's run. */
typedef struct rt_fuse_replay {
  int state;
  unsigned single_mask; /* operands that were single values on the captured tile */
  rt_loop_capture cap;
} rt_fuse_replay;

/* Sets each instruction's state for a thread's run: a step's shared
 * decision that its kernel must run, else unknown (a shared capture is
 * used where it lies). */
void rt_fuse_replay_begin(const struct nrt_fuse_group *g, rt_fuse_replay *states);

/* Around instruction i's kernel call on op over block b: starts a capture
 * when neither st nor the step has decided (returns 1), and ends a
 * started one with the kernel's status, deciding st's state and offering
 * it to g->replays. */
int rt_fuse_replay_capture_start(const struct nrt_fuse_group *g, int i, rt_fuse_replay *st);
void rt_fuse_replay_capture_end(const struct nrt_fuse_group *g, int i, rt_fuse_replay *st,
                                const nrt_op *op, const rt_fuse_box *b, nrt_status status);

/* Runs instruction i's captured loop (the step's, or own's) on block b
 * (registers at scratch with row stride b->cols). Returns 1 when done; 0 when the kernel must run
 * instead (no usable capture, other single values, or a fault). */
int rt_fuse_replay_run(const struct nrt_fuse_group *g, int i, const rt_fuse_replay *own,
                       const rt_fuse_box *b, char *scratch);

/* Instruction i's shared state (RT_REPLAY_*), for tests. */
int rt_fuse_replays_state(const rt_fuse_replays *replays, int32_t i);

#endif
