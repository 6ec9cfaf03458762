/* A common iteration space for queued pointwise ops (fuse/adaptive.c).
 *
 * The shim hands each op over with its dims ordered and merged for that op
 * alone: x * 2 over a contiguous [8192, 1024] tensor arrives as one dim of
 * 8M elements, x * w with w broadcast along rows as two, innermost first.
 * To fuse them, every op is viewed in the memory order of its output (a
 * dense output: contiguous in some order of its dims): element k of the
 * iteration is the output's k-th element in memory. Two such ops agree
 * element by element, and their dims are factorisations of the same count
 * in the same order; the space is their common refinement (the inner
 * products of every op's dims, which must divide each other), and each
 * op's operands are views over it (a dim split in two keeps its stride
 * inside and multiplies it outside).
 */
#ifndef NEURONRT_FUSE_ITERATION_SPACE_H
#define NEURONRT_FUSE_ITERATION_SPACE_H

#include <stdint.h>
#include "neuronrt/op.h"

typedef struct rt_iteration_space {
  int32_t ndim;                /* dims outermost first */
  int64_t shape[NRT_MAX_DIMS];
  int64_t numel;
  /* The products of the innermost 1, 2, ... ndim dims, ascending (the
   * last is numel); each divides the next. */
  int64_t bounds[NRT_MAX_DIMS];
} rt_iteration_space;

/* The space of op's output, or 0 when that output is not dense. */
int rt_space_start(rt_iteration_space *space, const nrt_op *op);

/* Refines space so that op (a dense output of the same count) fits it;
 * returns 0, leaving space as it was, when it cannot. */
int rt_space_join(rt_iteration_space *space, const nrt_op *op);

/* out = op with every operand viewed over space (op fits it). */
void rt_space_express(const rt_iteration_space *space, const nrt_op *op, nrt_op *out);

#endif
