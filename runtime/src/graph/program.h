/* A compiled program (graph.h): its steps (compile.c), the memory plans of
 * its bindings (plan.c) and their launch (exec.c). Internal; the tests
 * read plans through rt_program_plan_get. */
#ifndef NEURONRT_GRAPH_PROGRAM_H
#define NEURONRT_GRAPH_PROGRAM_H

#include <pthread.h>
#include <stdatomic.h>
#include "graph/ir.h"
#include "neuronrt/fuse.h"

/* RT_STEP_GEMM_EPILOGUE: a GEMM node (first_node) and a fused group of
 * later nodes that reads its product, run on each block of the product as
 * the GEMM finishes it (exec.c). */
/* RT_STEP_ROWS: consecutive steps that work row by row (a norm or a
 * softmax with the pointwise steps around it), run chunk of rows by chunk
 * of rows while each chunk is in cache (rows.c). */
enum { RT_STEP_KERNEL = 0, RT_STEP_FUSED = 1, RT_STEP_GEMM_EPILOGUE = 2, RT_STEP_ROWS = 3 };

/* A fused group over the symbolic IR: operands name the graph's operands
 * (indices into nrt_graph.operands); the instructions are final. */
typedef struct rt_fused {
  uint32_t shape_operand; /* the first member's first output: the group's shape */
  int32_t num_inputs, num_registers, num_insts, num_outputs;
  uint32_t input_operand[NRT_FUSE_MAX_INPUTS];
  nrt_dtype registers[NRT_FUSE_MAX_REGISTERS];
  nrt_fuse_inst *insts;
  uint32_t output_operand[NRT_FUSE_MAX_OUTPUTS];
  int32_t output_registers[NRT_FUSE_MAX_OUTPUTS];
  char name[NRT_HOST_TASK_NAME_MAX];
  struct rt_fuse_replays *replays; /* its captured loops, shared by its runs (may be NULL) */
  /* Where its tape's generated code (fuse/codegen.h) is published when
   * ready (compiled in the background after the program is); NULL, or a
   * cell with no kernel yet: the tape (or the kernels) run it. One
   * reference owned. */
  struct rt_gen_cell *gen;
} rt_fused;

typedef struct rt_step {
  int32_t kind;
  uint32_t first_node, num_nodes; /* nodes first_node.. (an epilogue step: the GEMM's node) */
  rt_fused *fused;                /* RT_STEP_FUSED, RT_STEP_GEMM_EPILOGUE */
  /* RT_STEP_GEMM_EPILOGUE: the group's nodes, group_first.. (not always
   * right after the GEMM: steps that neither touch what the group writes
   * nor write what it reads may lie between them). */
  uint32_t group_first, group_count;
  /* RT_STEP_ROWS: its steps, in order (num_nodes counts all their nodes). */
  struct rt_step *members;
  int32_t num_members;
} rt_step;

/* The i-th node of a step. */
static inline uint32_t rt_step_node(const rt_step *st, uint32_t i) {
  if (st->kind == RT_STEP_ROWS) {
    for (int32_t m = 0; m < st->num_members; m++) {
      if (i < st->members[m].num_nodes) return rt_step_node(&st->members[m], i);
      i -= st->members[m].num_nodes;
    }
  }
  if (st->kind != RT_STEP_GEMM_EPILOGUE) return st->first_node + i;
  return i == 0 ? st->first_node : st->group_first + i - 1;
}

/* The plan of one binding of the symbols. Per buffer: offset and bytes in
 * the arena (temporaries that have space; SIZE_MAX and 0 otherwise). */
typedef struct rt_plan {
  atomic_int refs; /* the cache's and each user's */
  int64_t symbols[NRT_GRAPH_MAX_SYMBOLS];
  int64_t *values;     /* every expression's value */
  int64_t *numel;      /* every buffer's element count */
  size_t *offset, *bytes;
  size_t arena_bytes;
  int64_t *input_need; /* per input slot: elements its views reach from its address */
  uint32_t *input_need_operand; /* the operand reaching furthest (for messages) */
  /* Set once a launch of this plan built every fused group with full
   * validation; later launches (same layouts, other addresses) only fill
   * a group in (exec.c). */
  atomic_int fused_checked;
} rt_plan;

#define RT_PLAN_CACHE 8

struct nrt_program {
  atomic_int refs; /* the owner's and each queued launch's */
  struct nrt_graph *graph;
  int32_t num_steps, num_fused_groups, num_fused_nodes, num_elided, num_gemm_epilogues, num_row_regions;
  rt_step *steps;
  uint8_t *elided;               /* per buffer: a temporary held in registers only */
  int32_t *first_step, *last_step; /* per buffer: its lifetime in steps (-1: untouched) */
  nrt_nc_program_t *nc;          /* per node: the checked program of an NKI node (else NULL) */
  int32_t *share;                /* per buffer: the temporary whose space it reuses in place (-1) */
  int32_t num_inplace;
  char task_name[NRT_HOST_TASK_NAME_MAX]; /* "compiled graph <name>" */
  pthread_mutex_t lock;          /* guards the cache */
  rt_plan *cache[RT_PLAN_CACHE];
  uint64_t cache_used[RT_PLAN_CACHE], clock;
};

/* compile.c: whether node n may be an instruction of a fused group. */
int rt_graph_node_fusible(const struct nrt_graph *g, const rt_gnode *n);

/* rows.c: merges runs of steps that work row by row into RT_STEP_ROWS
 * steps; run after the steps are built, before lifetimes. */
nrt_status rt_program_plan_rows(struct nrt_program *p);

/* inplace.c: finds results that can reuse an input's space (fills share,
 * extends lifetimes); run once lifetimes are known. */
void rt_program_plan_inplace(struct nrt_program *p);
/* inplace.c: the temporary that owns b's arena space (b itself if none). */
int32_t rt_program_space_owner(const struct nrt_program *p, int32_t b);

void rt_program_retain(struct nrt_program *p);
void rt_program_release(struct nrt_program *p);

/* The plan of a binding, from the cache or built (and cached); the caller
 * holds a reference, dropped with rt_plan_release. */
nrt_status rt_program_plan_get(struct nrt_program *p, const int64_t *symbols, int32_t num_symbols,
                               rt_plan **out);
void rt_plan_release(rt_plan *plan);

/* Checks input capacities (num_inputs entries) against a plan's needs. */
nrt_status rt_plan_check_inputs(const struct nrt_program *p, const rt_plan *plan,
                                const int64_t *input_capacity, const char *caller);

/* Verifies a memory plan: n buffers of bytes[i] at offset[i] (ignored when
 * bytes[i] is 0) alive over steps first[i]..last[i]; no two alive at once
 * overlap, and all lie inside arena_bytes, 64-byte aligned. NRT_SUCCESS or
 * NRT_ERROR_INTERNAL with the offending pair. */
nrt_status rt_graph_plan_check(int32_t n, const size_t *offset, const size_t *bytes,
                               const int32_t *first, const int32_t *last, size_t arena_bytes);

/* The value of expression id under plan. */
static inline int64_t rt_plan_value(const rt_plan *plan, uint32_t id) { return plan->values[id]; }

/* Same value for every binding: the same id or the same terms. */
int rt_graph_same_expr(const struct nrt_graph *g, uint32_t a, uint32_t b);

#endif
