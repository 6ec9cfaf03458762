/* Reading and writing the elements of an access pattern, one partition at a
 * time, packed into a contiguous scratch row (exec.c, tensor_engine.c). */
#ifndef NEURONRT_NC_ACCESS_H
#define NEURONRT_NC_ACCESS_H

#include <stdatomic.h>
#include "nc/nc_internal.h"

/* The memory of one simulated core during a run. */
typedef struct nc_core {
  const struct nrt_nc_program *program;
  void *const *hbm;
  uint8_t *sbuf, *psum;
  /* Bytes from one partition's row to the next: a little more than the
   * capacity (exec.c, PARTITION_PAD). */
  int64_t sbuf_pitch, psum_pitch;
  float *regs; /* reduce registers: [engine][partition], zero when a run starts */
  uint32_t *rng; /* generator states: [engine][partition][NC_RNG_WORDS] */
  /* Write generation of each tensor: bumped by every instruction that
   * writes it (and its fresh fill), so a value derived from a tile's
   * contents stays valid while the generation does. */
  uint64_t *gen;
  struct nc_pack_cache *packs; /* tensor_engine.c; NULL: no caching */
  /* The run's failure: an instruction that finds its run-time input invalid
   * (an indirect DMA's index out of bounds) sets it, and the run stops. */
  nrt_status *fault;
} nc_core;

/* tensor_engine.c: the packed-operand cache of a run. */
struct nc_pack_cache *nc_pack_cache_new(void);
void nc_pack_cache_free(struct nc_pack_cache *c);

/* uint32 words of generator state per lane (Vector's 4 XORWOW streams). */
#define NC_RNG_WORDS 24

/* Address of free element (0,0,0,0) of partition p of ap. */
uint8_t *nc_row(const nc_core *core, const nrt_nc_ap *ap, int64_t p);

/* Partition p of ap as fp32 values (converted) / from fp32 values (rounded
 * to the pattern's dtype). */
void nc_gather_f32(const nc_core *core, const nrt_nc_ap *ap, int64_t p, float *out);
void nc_scatter_f32(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const float *in);

/* Bytes from partition p's row of ap to partition p + 1's (nc_row). */
int64_t nc_row_step(const nc_core *core, const nrt_nc_ap *ap);

/* Whether every partition row of ap is one run of contiguous fp32 values,
 * which an instruction can then read or write where it lies (nc_row). */
int nc_f32_contiguous(const nrt_nc_ap *ap);

/* Raw bits of partition p as int32 (integers by value, floats by pattern). */
void nc_gather_bits(const nc_core *core, const nrt_nc_ap *ap, int64_t p, int32_t *out);
void nc_scatter_bits(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const int32_t *in);

/* Elements of partition p packed as bytes of the pattern's dtype, unconverted. */
void nc_gather_raw(const nc_core *core, const nrt_nc_ap *ap, int64_t p, uint8_t *out);
void nc_scatter_raw(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const uint8_t *in);

/* exec_indirect.c: dma_copy's gather / scatter form (NRT_NC_FLAG_INDIRECT_*);
 * a and b are scratch rows of the largest operand. */
void nc_exec_indirect_copy(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b);
/* A scalar_offset copy: *moved is inst as a plain dma_copy with the word
 * read and applied; 0 when nothing moves (skipped, or the run failed). */
int nc_scalar_offset_copy(const nc_core *core, const nrt_nc_inst *inst, nrt_nc_inst *moved);
/* The same for any instruction whose ap2 is the word: the word lies in
 * [0, count) and moves the indexed side by word * step elements. */
int nc_scalar_offset_move(const nc_core *core, const nrt_nc_inst *inst, int64_t count,
                          int64_t step, nrt_nc_inst *moved);

/* Work an instruction runs beside its own (exec.c: the DMA after a matmul,
 * see overlap.c), in pieces that may run in any order on any threads:
 * fn(ctx, k, pieces) runs once for each k in [0, pieces) before the
 * instruction returns. Each range of the instruction's parallel job first
 * takes a piece while any is left, so the pieces spread over the threads. */
typedef struct nc_side_task {
  void (*fn)(void *ctx, int piece, int pieces);
  void *ctx;
  int pieces;
  atomic_int next; /* the next piece to take */
} nc_side_task;

/* Runs the next piece of side's task, if one is left (side may be NULL). */
void nc_side_task_step(nc_side_task *side);
/* Runs every piece still left. */
void nc_side_task_finish(nc_side_task *side);

/* tensor_engine.c; side may be NULL. */
void nc_exec_matmul(const nc_core *core, const nrt_nc_inst *inst, float *scratch,
                    nc_side_task *side);
void nc_exec_transpose(const nc_core *core, const nrt_nc_inst *inst, float *scratch);
/* exec_vector.c: the scan, statistics and top-8 instructions, one partition
 * at a time (a, b, c: scratch rows of the largest operand). */
void nc_exec_vector_ext(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c);
/* exec_select.c: activate2, the cumulative op, the selects, nonzero_with_count
 * and dma_transpose. */
void nc_exec_select(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b);
/* exec_rng.c: rng, rand2, dropout and the generator state instructions;
 * every lane seeded with 0 (nc_rng_init, at the start of a run). */
void nc_exec_rng(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b);
void nc_rng_init(const nc_core *core);
int nc_rng_streams(int32_t engine);
/* exec_gather.c: topk, exponential, local_gather, nc_n_gather,
 * sequence_bounds and nc_stream_shuffle (a..d: scratch rows; the executor
 * sizes them for a 32-partition group of the largest operand). */
void nc_exec_gather(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c,
                    float *d);
/* exec_mx.c: quantize_mx and nc_matmul_mx; NkiScalar arithmetic. */
void nc_exec_mx(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c,
                float *d);
void nc_exec_scalar_int(const nc_core *core, const nrt_nc_inst *inst);

/* branch.c: the next instruction after a loop branch, or -1 when the run
 * fails (the fault is set): more than NC_LOOP_LIMIT backward jumps in one
 * run (jumps_back counts them). */
#define NC_LOOP_LIMIT (1LL << 22)
int32_t nc_exec_branch(const nc_core *core, const nrt_nc_inst *inst, int64_t *jumps_back);
/* Applies the instruction's reduce_cmd flags to the reduce register of dst's
 * partition p, whose results reduce (op) to row; returns what reduce_res
 * receives (the register after folding, or row when idle). */
float nc_reduce_command(const nc_core *core, const nrt_nc_inst *inst, int64_t p, int32_t op,
                        float row);

#endif
