/* Capturing the loop a pointwise kernel runs.
 *
 * The fused-expression VM calls each instruction's kernel on every tile.
 * A kernel's checks and its choice of loop depend only on the op's codes,
 * dtypes, scalars and immediates, which are the same on every tile of a
 * group, so the VM runs the kernel once with a capture active and then
 * calls the loop it chose directly, on blocks small enough that a group's
 * registers stay in L1 (vm.c). Same loop, same operands in the same dtypes:
 * the same bits as the kernel.
 *
 * A capture is usable when, while it was active, the kernel made exactly
 * one rt_run_pointwise_as call, on the operands it was given (same
 * addresses, in the same order), each either already in the loop's dtype
 * or an immediate (converted here once, as the driver would convert it).
 */
#ifndef NEURONRT_OPS_LOOP_CAPTURE_H
#define NEURONRT_OPS_LOOP_CAPTURE_H

#include <stdint.h>
#include "ops/engine/elementwise.h"

typedef struct rt_loop_capture {
  int calls;  /* rt_run_pointwise_as calls seen */
  int usable; /* the one call can be replayed with loop */
  rt_inner_loop loop;
  rt_scalars sc;
  int num_operands;
  const void *data[NRT_MAX_OPERANDS];    /* the operands' addresses the kernel ran on */
  unsigned converted_mask;               /* immediates not in the loop's dtype ... */
  uint64_t converted[NRT_MAX_OPERANDS];  /* ... and their values converted to it */
} rt_loop_capture;

/* Makes c the calling thread's active capture (NULL: none). */
void rt_loop_capture_set(rt_loop_capture *c);

/* Called by rt_run_pointwise_as: records the call into the active
 * capture, if any. */
void rt_loop_capture_record(const nrt_op *op, rt_inner_loop loop, const nrt_dtype *want,
                            const rt_scalars *sc);

#endif
