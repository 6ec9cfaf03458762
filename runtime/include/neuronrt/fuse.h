/* Fused groups: several pointwise ops run as one pass over memory.
 *
 * A group is a small program over one iteration space (shape): inputs
 * (tensor views of any dtype and strides, broadcast by stride 0), a file of
 * registers (each the value of one intermediate tensor, in that tensor's
 * dtype), instructions from the pointwise vocabulary (neuronrt/ops/
 * pointwise.h) that read inputs, registers and immediates and write
 * registers, and outputs (views that receive a register's value). It runs
 * tile by tile, with every register of a tile in cache, the tiles split
 * over the kernel threads.
 *
 * Each instruction runs the very kernel the op runs unfused, on the tile,
 * with its operands in the dtypes the unfused op would see: results are
 * bitwise those of running the ops one by one, storing each intermediate
 * in its tensor's dtype. A group whose ops would behave differently on a
 * tile than on the whole tensors is refused at creation (NRT_ERROR_
 * UNSUPPORTED, "not fusible: ..."), so that the caller runs them unfused.
 *
 * Registers are written once (by one instruction, before any read).
 * Outputs are stored after the tile's last instruction; an output may be
 * an input's exact storage (an in-place op), not a partial overlap of one.
 */
#ifndef NEURONRT_FUSE_H
#define NEURONRT_FUSE_H

#include "neuronrt/op.h"
#include "neuronrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_FUSE_MAX_INPUTS 32
#define NRT_FUSE_MAX_OUTPUTS 16
#define NRT_FUSE_MAX_REGISTERS 64
#define NRT_FUSE_MAX_INSTS 128

typedef enum nrt_fuse_ref_kind {
  NRT_FUSE_REGISTER = 0,  /* index: a register */
  NRT_FUSE_INPUT = 1,     /* index: an input of the group */
  NRT_FUSE_IMMEDIATE = 2  /* dtype and value: a host value broadcast over the op */
} nrt_fuse_ref_kind;

/* Where an instruction's operand lives. */
typedef struct nrt_fuse_ref {
  int32_t kind;
  int32_t index;
  nrt_dtype dtype;   /* IMMEDIATE only (registers and inputs have their own) */
  nrt_scalar value;  /* IMMEDIATE only */
} nrt_fuse_ref;

/* One pointwise op: as an nrt_op, with operands (outputs first, each a
 * register) given by reference instead of by view. The code is a
 * pointwise op, or NRT_OP_COPY (a conversion to the register's dtype). */
typedef struct nrt_fuse_inst {
  nrt_op_code code;
  nrt_dtype compute_dtype;
  int32_t num_operands;
  int32_t num_outputs;
  int32_t num_scalars;
  nrt_scalar scalars[NRT_MAX_SCALARS];
  nrt_fuse_ref operands[NRT_MAX_OPERANDS];
} nrt_fuse_inst;

typedef struct nrt_fuse_group_desc {
  int32_t ndim;
  int64_t shape[NRT_MAX_DIMS];            /* the iteration space */
  int32_t num_inputs;
  const nrt_tensor_view *inputs;          /* device memory, of the group's shape */
  int32_t num_registers;
  const nrt_dtype *registers;             /* each register's dtype */
  int32_t num_insts;
  const nrt_fuse_inst *insts;
  int32_t num_outputs;
  const nrt_tensor_view *outputs;         /* device memory, of the group's shape */
  const int32_t *output_registers;        /* the register stored to each output (same dtype) */
} nrt_fuse_group_desc;

typedef struct nrt_fuse_group *nrt_fuse_group_t;

/* Validates desc (a malformed one returns a status whose message names the
 * instruction or operand, and the problem) and builds the group. */
nrt_status nrt_fuse_group_create(const nrt_fuse_group_desc *desc, nrt_fuse_group_t *group);

/* Runs the group on the calling thread (and the kernel threads), outside any
 * stream. An op that fails (integer division by zero) fails the group with
 * that op's message; the outputs are then partly written. */
nrt_status nrt_fuse_group_execute(nrt_fuse_group_t group);

/* Queues the group on stream, in order with the stream's other work; the
 * group may be destroyed as soon as this returns (the launch keeps it). A
 * failure is the stream's sticky error, named "fused group (N ops: first,
 * ...)" and the failing op's message. */
nrt_status nrt_fuse_group_launch(nrt_stream_t stream, nrt_fuse_group_t group);

/* Ops, inputs, registers and elements of the group. */
nrt_status nrt_fuse_group_info(nrt_fuse_group_t group, int32_t *num_insts, int32_t *num_inputs,
                               int32_t *num_registers, int64_t *numel);

void nrt_fuse_group_destroy(nrt_fuse_group_t group);

#ifdef __cplusplus
}
#endif
#endif
