/* What the steps of a launch share (exec.c runs them; epilogue.c and
 * rows.c run GEMM epilogues and row regions): the task and the views of
 * operands under its plan. Internal. */
#ifndef NEURONRT_GRAPH_RUN_H
#define NEURONRT_GRAPH_RUN_H

#include "fuse/fuse_group.h"
#include "graph/program.h"

typedef struct rt_task {
  struct nrt_program *program;
  rt_plan *plan;
  char *arena;
  void **inputs, **outputs; /* into ptrs */
  void *ptrs[];
} rt_task;

/* The operand under the plan: a device view, an immediate (op.h) or none;
 * returns its element count. */
int64_t rt_run_view(const rt_task *t, const rt_goperand *o, nrt_tensor_view *v);

/* n's op under the plan; returns 0 when every output is empty (eager then
 * skips the op). */
int rt_run_op(const rt_task *t, const rt_gnode *n, nrt_op *out);

/* A fused step's group description under the plan (views in v's arrays). */
typedef struct group_views {
  nrt_fuse_group_desc d;
  nrt_tensor_view inputs[NRT_FUSE_MAX_INPUTS], outputs[NRT_FUSE_MAX_OUTPUTS];
} group_views;

/* Fills v; returns 0 when there is nothing to compute or nothing anyone
 * reads. */
int rt_run_describe_group(const rt_task *t, const rt_fused *f, group_views *v);

/* The step's group in *out: this worker's scratch group, or slot's group
 * of a per-thread set (0 .. RT_RUN_GROUPS - 1) for callers that hold
 * several; validated first unless the plan has been. */
#define RT_RUN_GROUPS 9
nrt_status rt_run_fill_group(const rt_fused *f, const nrt_fuse_group_desc *d, int checked, int slot,
                             struct nrt_fuse_group **out);

nrt_status rt_run_fused(const rt_task *t, const rt_fused *f, int checked);

/* epilogue.c */
nrt_status rt_run_gemm_epilogue(const rt_task *t, const rt_step *st, int checked);

/* rows.c: a row region's run, and the counts of regions run by chunks
 * and of those whose layouts made their steps run alone. */
nrt_status rt_run_rows(const rt_task *t, const rt_step *st, int checked);
void rt_rows_counters(uint64_t *chunked, uint64_t *alone);
void rt_rows_clear_counters(void);

/* Strides that view a tensor of shape from (n_from dims, strides st) as
 * shape to (n_to dims, same element count), element for element in
 * row-major order; 0 when no strides can (a dim of `to` spans dims of
 * `from` that are not evenly laid out). */
int rt_restride(int n_from, const int64_t *from, const int64_t *st, int n_to, const int64_t *to,
                int64_t *out);

/* Whether two views reach a common byte (empty views reach none). */
int rt_views_overlap(const nrt_tensor_view *a, const nrt_tensor_view *b);

#endif
