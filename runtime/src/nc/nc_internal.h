/* Declarations shared by the NeuronCore simulator's files (runtime/src/nc). */
#ifndef NEURONRT_NC_INTERNAL_H
#define NEURONRT_NC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include "internal.h"
#include "neuronrt/nc_dist.h"

/* One past the last opcode. */
#define NC_OPCODE_END NRT_NC_OPCODE_COUNT

struct nrt_nc_program {
  atomic_int refs;
  int32_t num_insts, num_tensors;
  nrt_nc_inst *insts;     /* free dims normalised to exactly 4 (leading count-1 dims) */
  nrt_nc_tensor *tensors; /* on-chip placements filled in */
  nrt_nc_geometry geometry;
  int32_t target; /* nrt_target: the generation whose rules apply */
  /* Liveness: the instruction at which each tensor is first touched, and
   * whether fresh memory must be filled (it is read before fully written). */
  int32_t *first_use;
  uint8_t *needs_fill;
  /* Per instruction: the tensors whose lifetime begins there, as a list of
   * indices (fill_list[fill_start[i] .. fill_start[i+1]) ). */
  int32_t *fill_start, *fill_list;
  /* Cost model results. */
  nrt_nc_estimate estimate;
  double *start_ns, *end_ns;
  int32_t *queue;
};

/* A diagnostic-carrying failure: fills diag and the thread's message. */
nrt_status nc_fail(nrt_nc_diagnostic *diag, int32_t inst, int32_t tensor, const char *rule,
                   nrt_status status, const char *fmt, ...) RT_PRINTF(6, 7);
/* check.c: the Tensor engine's tile limits (free sizes, dst shape), rules
 * gemm_stationary_fmax, gemm_moving_fmax and shape_mismatch. */
nrt_status nc_check_gemm_sizes(nrt_nc_diagnostic *diag, int32_t i, const nrt_nc_ap *dst,
                               const nrt_nc_ap *st, const nrt_nc_ap *mv);

/* Absolute first partition of an on-chip access pattern. */
static inline int64_t nc_first_partition(const nrt_nc_program_t p, const nrt_nc_ap *ap) {
  const nrt_nc_tensor *t = &p->tensors[ap->tensor];
  return (t->fixed ? t->partition_base : 0) + ap->partition_start;
}

/* check.c: operand k, if present, is one value per partition ([P, 1]) on
 * dst's partitions (rules operand_shape, same_partitions). */
nrt_status nc_check_per_partition(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                                  nrt_nc_diagnostic *diag);

/* check.c: every per-instruction rule. */
nrt_status nc_check_program(const nrt_nc_program_t p, nrt_nc_diagnostic *diag);

/* check_select.c: the rules of activate2, the cumulative op, the selects,
 * nonzero_with_count and dma_transpose. */
nrt_status nc_check_select(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
/* check_indirect.c: dma_copy's gather / scatter form (NRT_NC_FLAG_INDIRECT_*). */
nrt_status nc_check_indirect_copy(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
/* check_indirect.c: dma_transpose's src moved by a scalar_offset word. */
nrt_status nc_check_transpose_offset(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
/* check_indirect.c: tensor_copy_dynamic_src / _dst (a tensor_copy moved by an
 * SBUF word). */
nrt_status nc_check_copy_offset(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);

/* check_rng.c: the rules of rng, rand2, dropout and the generator state. */
nrt_status nc_check_rng(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);

/* check_gather.c: the rules of topk, exponential, the gathers,
 * sequence_bounds and nc_stream_shuffle. */
nrt_status nc_check_gather(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);

/* check_mx.c: the rules of quantize_mx and nc_matmul_mx; where packed MX
 * dtypes may appear (rule packed_dtype); and the generation rule
 * (nc_version: the instruction exists from nrt_target `since` on). */
nrt_status nc_check_mx(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
nrt_status nc_check_scalar_int(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
nrt_status nc_check_packed(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
/* check_mx.c: where int64 words may appear (rule int64_operand). */
nrt_status nc_check_int64(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
nrt_status nc_needs_target(const nrt_nc_program_t p, int32_t i, const char *name, int32_t since,
                           nrt_nc_diagnostic *diag);

/* branch.c: compiled loops (NRT_NC_BRANCH). The rules of a branch; the
 * lifetimes that loops extend (a tile used before a loop and touched in its
 * body lives to the loop's end); the trip count the cost model gives a
 * loop head (known at trace time, else 1). */
nrt_status nc_check_branch(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);
void nc_extend_loop_lifetimes(const nrt_nc_program_t p, int32_t *last_use);
int64_t nc_branch_trips(const nrt_nc_inst *inst);

/* alloc.c: the bounds and bank alignment of a manually placed tensor t. */
nrt_status nc_check_placement(const nrt_nc_program_t p, int32_t t, nrt_nc_diagnostic *diag);

/* alloc.c: liveness and placement of on-chip tensors (capacity rules). */
nrt_status nc_place_tensors(nrt_nc_program_t p, nrt_nc_diagnostic *diag);

/* cost.c: fills p->estimate and the per-instruction timeline. */
nrt_status nc_estimate_program(nrt_nc_program_t p, const nrt_device_properties *props);

/* exec.c: runs the program over hbm host addresses. */
nrt_status nc_execute(const nrt_nc_program_t p, void *const *hbm);

/* exec.c: a program's run, stopping at collective calls. */
typedef struct nc_run nc_run;
nrt_status nc_run_begin(const nrt_nc_program_t p, void *const *hbm, nc_run **out);
/* Runs to the next collective instruction (returns its index) or the end (-1). */
int32_t nc_run_to_sync(nc_run *r);
/* The failure that stopped a run (nc_run_to_sync returned -1 early), or success. */
nrt_status nc_run_fault(const nc_run *r);
/* Fresh-tile fills of the rest of a call of count instructions; then past it. */
void nc_run_fill_call(nc_run *r, int32_t count);
void nc_run_advance(nc_run *r, int32_t count);
const struct nc_core *nc_run_core(const nc_run *r);
void nc_run_end(nc_run *r);

/* collective.c: runs count programs interleaved at their collective calls. */
nrt_status nc_execute_group(const nrt_nc_program_t *programs, int32_t count,
                            void *const *const *hbm);
/* The same across processes (ex may be NULL: this process alone). */
nrt_status nc_execute_group_ex(const nrt_nc_program_t *programs, int32_t count,
                               void *const *const *hbm, const nrt_nc_exchange *ex);
/* check_collective.c: the local rules of a collective instruction. */
nrt_status nc_check_collective(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag);

/* The element range an access pattern touches, in elements from its base
 * (min and max element index, inclusive; free part only). */
void nc_ap_free_extent(const nrt_nc_ap *ap, int64_t *lo, int64_t *hi);
int64_t nc_ap_free_elems(const nrt_nc_ap *ap);

/* Whether an instruction reads (role 1) or writes (role 2) operand k. */
int nc_operand_role(const nrt_nc_inst *inst, int k);

/* overlap.c: whether instruction i is a matmul and i + 1 a plain DMA copy
 * on memory disjoint from it, which may then run during the matmul. */
int nc_copy_may_join(const struct nrt_nc_program *p, int32_t i);

#endif
