/* The fused group as built by nrt_fuse_group_create (group.c) and run by
 * the VM (vm.c); see neuronrt/fuse.h. */
#ifndef NEURONRT_FUSE_GROUP_H
#define NEURONRT_FUSE_GROUP_H

#include <stdatomic.h>
#include "internal.h"
#include "neuronrt/fuse.h"
#include "fuse/tape.h"

/* Elements of a tile: every register of a tile (at most 8 bytes an
 * element) stays in L1/L2 for a few registers, and a tile is long enough
 * that a kernel call per instruction costs little against its loop. */
#define RT_FUSE_TILE 8192

/* The walk: the group's shape with size-1 dimensions dropped and adjacent
 * dimensions merged where every tensor is contiguous across them. Tiles
 * are [rows, cols] blocks of the last two walk dimensions (see vm.c). */
typedef struct rt_fuse_walk {
  int ndim;
  int64_t shape[NRT_MAX_DIMS];
  int64_t rows, cols;         /* the last two dims (rows 1 when ndim < 2) */
  int64_t outer;              /* product of the dims before them */
  int64_t row_chunks, col_chunks;
  int64_t tiles;
} rt_fuse_walk;

/* A tensor of the group (input or output): host alias of element 0 and its
 * element strides along the walk's dims. */
typedef struct rt_fuse_tensor {
  char *data;
  nrt_dtype dtype;
  int64_t strides[NRT_MAX_DIMS];
} rt_fuse_tensor;

/* Instructions' captured loops kept across runs of one compiled step
 * (replay.c); NULL-safe to destroy. */
typedef struct rt_fuse_replays rt_fuse_replays;
rt_fuse_replays *rt_fuse_replays_create(int32_t num_insts);
void rt_fuse_replays_destroy(rt_fuse_replays *replays);

struct nrt_fuse_group {
  atomic_int refs; /* the owner's and each queued launch's */
  /* The step's captured loops, which its runs share; NULL: each run
   * captures its own. Not owned. */
  rt_fuse_replays *replays;
  int64_t numel;
  rt_fuse_walk walk;
  int32_t num_inputs, num_outputs, num_registers, num_insts;
  rt_fuse_tensor inputs[NRT_FUSE_MAX_INPUTS];
  rt_fuse_tensor outputs[NRT_FUSE_MAX_OUTPUTS];
  int32_t output_registers[NRT_FUSE_MAX_OUTPUTS];
  nrt_dtype registers[NRT_FUSE_MAX_REGISTERS];
  size_t register_offset[NRT_FUSE_MAX_REGISTERS]; /* bytes into a tile's scratch */
  size_t scratch_bytes;
  nrt_fuse_inst insts[NRT_FUSE_MAX_INSTS];
  rt_kernel_fn kernels[NRT_FUSE_MAX_INSTS];
  /* Immediates in their dtype, as rt_op_run lays them out. */
  uint64_t immediates[NRT_FUSE_MAX_INSTS][NRT_MAX_OPERANDS];
  char name[NRT_HOST_TASK_NAME_MAX];
  /* The register-level loop (tape.h); tape.num_ops 0: instruction by
   * instruction through the kernels' loops. */
  rt_fuse_tape tape;
  /* The tape's generated code (codegen.h), or NULL: set by the graph
   * executor for compiled programs; rt_fuse_group_init clears it. */
  const struct rt_gen_kernel *gen;
};

/* group.c: whether code may be an instruction (the pointwise vocabulary
 * and copies). */
int rt_fuse_is_fusible(nrt_op_code code);

/* group.c: fills g (all but refs) from a description already checked, and
 * refuses (NRT_ERROR_UNSUPPORTED, "not fusible: ...") a group whose ops
 * would behave differently on tiles. Does not name it. */
nrt_status rt_fuse_group_init(struct nrt_fuse_group *g, const nrt_fuse_group_desc *d);

/* group.c: writes g->name, "fused group (N ops: first, ...)". */
void rt_fuse_group_name(struct nrt_fuse_group *g);

/* vm.c: runs every tile; the status and message of the first op to fail. */
nrt_status rt_fuse_run(const struct nrt_fuse_group *g);

/* A [rows, cols] block of a group's iteration, as a GEMM epilogue runs it:
 * each tensor's host address of the block's first element and its row and
 * column strides (elements). */
typedef struct rt_fuse_box {
  int64_t rows, cols;
  char *in[NRT_FUSE_MAX_INPUTS];
  int64_t in_rs[NRT_FUSE_MAX_INPUTS], in_cs[NRT_FUSE_MAX_INPUTS];
  char *out[NRT_FUSE_MAX_OUTPUTS];
  int64_t out_rs[NRT_FUSE_MAX_OUTPUTS], out_cs[NRT_FUSE_MAX_OUTPUTS];
} rt_fuse_box;

/* vm.c: runs g's instructions over a box on the calling thread (no pool),
 * in tiles of at most RT_FUSE_TILE elements; the first failing op's status
 * and message. g's tensors' own addresses and walk are not used. */
nrt_status rt_fuse_run_box(const struct nrt_fuse_group *g, const rt_fuse_box *box);

/* vm.c: splits the walk into tiles (fills rows..tiles of walk). */
void rt_fuse_plan_tiles(rt_fuse_walk *walk);

/* vm.c: the fewest rows any tile has. */
int64_t rt_fuse_min_tile_rows(const rt_fuse_walk *walk);

#endif
