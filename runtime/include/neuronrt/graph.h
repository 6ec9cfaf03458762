/* Compiled graphs: a graph IR of nrt_ops over buffers, compiled into a
 * program that runs as one stream operation.
 *
 * The IR is the input of torch.compile's back end (torchneuron/compiler/
 * builds it from an FX graph). Sizes, strides and offsets are expressions
 * of the graph's symbolic sizes (s0, s1, ...), evaluated at each launch, so
 * that one program serves every value of a dynamic dimension.
 *
 * Buffers: a graph input (memory the caller passes at launch, read and
 * possibly written), a graph output (memory the caller allocates at launch
 * with the element count nrt_program_prepare gives) or a temporary (placed
 * by the memory planner in one arena per launch). Views of a buffer are
 * (dtype, offset, shape, strides) in elements of that dtype, offsets from
 * the buffer's address; one buffer's views all have the buffer's dtype.
 *
 * Nodes: nrt_ops (the op vocabulary eager uses, with its operand
 * conventions), in execution order; operands name a view of a buffer, an
 * immediate (a host value, as op.h describes) or nothing (an absent
 * optional operand: an empty view).
 *
 * The binary form (all integers little-endian, no padding):
 *
 *   u32 magic "NRTG" (0x4754524e)    u32 version (NRT_GRAPH_VERSION)
 *   u32 num_symbols
 *   u32 num_exprs, then each:    u32 n; n x { u32 op; i64 arg }
 *   u32 num_buffers, then each:  u32 kind; i32 dtype; u32 slot; u32 numel_expr
 *   u32 num_nodes, then each:
 *     u32 code; i32 compute_dtype; u32 num_operands; u32 num_outputs;
 *     u32 num_scalars; u32 immediate_mask;
 *     num_scalars x { i32 is_float; f64 f; i64 i }
 *     num_operands x { i32 buffer (-1: none); i32 dtype; u32 ndim;
 *                      u32 offset_expr; ndim x u32 shape_expr;
 *                      ndim x u32 stride_expr;
 *                      if bit k of immediate_mask: { i32 is_float; f64 f; i64 i } }
 *   u32 num_blobs, then each:    u32 len; len bytes
 *   u32 name_len; name_len bytes (the graph's name, at most 255, no NUL)
 *   u32 crc32 (IEEE, of every byte before it)
 *
 * Blobs carry the programs of NKI kernel nodes. A node with code
 * NRT_GRAPH_NKI runs an NKI program (neuronrt/nc.h): its scalars are the
 * integer indices of three blobs, the program's instruction records
 * (nrt_nc_inst), its tensor records (nrt_nc_tensor) and, per operand, the
 * int32 index of the HBM tensor the operand binds (outputs first). Its
 * operands are views of buffers, each row-major contiguous and holding at
 * least its tensor's bytes. The program is checked (every rule of the
 * NeuronCore) when the graph is compiled, for device 0's generation.
 *
 * An expression is postfix over a stack of int64: CONST pushes arg, SYM
 * pushes symbol arg; the binary ops pop b then a and push a op b. FLOORDIV
 * and MOD round toward negative infinity (Python's // and %). An
 * expression may use at most NRT_GRAPH_MAX_EXPR_TERMS terms and must leave
 * exactly one value. An operand that is none or an immediate has buffer
 * -1; a none operand must have zero elements. Slots number the inputs
 * 0..I-1 and the outputs 0..O-1, each exactly once.
 */
#ifndef NEURONRT_GRAPH_H
#define NEURONRT_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/op.h"
#include "neuronrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_GRAPH_MAGIC 0x4754524eu
#define NRT_GRAPH_VERSION 2u
#define NRT_GRAPH_MAX_SYMBOLS 64
#define NRT_GRAPH_MAX_EXPR_TERMS 64
#define NRT_GRAPH_MAX_EXPRS (1 << 20)
#define NRT_GRAPH_MAX_BUFFERS (1 << 20)
#define NRT_GRAPH_MAX_NODES (1 << 20)
#define NRT_GRAPH_MAX_NAME 255
#define NRT_GRAPH_MAX_BLOBS 4096
/* The node code of an NKI kernel (outside the op vocabulary). */
#define NRT_GRAPH_NKI 0x00100000u

typedef enum nrt_expr_op {
  NRT_EXPR_CONST = 0,
  NRT_EXPR_SYM = 1,
  NRT_EXPR_ADD = 2,
  NRT_EXPR_SUB = 3,
  NRT_EXPR_MUL = 4,
  NRT_EXPR_FLOORDIV = 5,
  NRT_EXPR_MOD = 6,
  NRT_EXPR_MAX = 7,
  NRT_EXPR_MIN = 8,
  NRT_EXPR_OP_COUNT
} nrt_expr_op;

typedef enum nrt_buffer_kind {
  NRT_BUFFER_INPUT = 0,
  NRT_BUFFER_OUTPUT = 1,
  NRT_BUFFER_TEMP = 2
} nrt_buffer_kind;

typedef struct nrt_graph *nrt_graph_t;
typedef struct nrt_program *nrt_program_t;

/* Parses and validates a graph in the binary form: a malformed, truncated
 * or corrupt one (bad checksum) returns NRT_ERROR_INVALID_DATA with a
 * message that says where and what, never crashes. Validation covers every
 * field: ids in range, operand counts, dtypes, expressions, buffer dtypes
 * against their views, each slot once, each temporary written before it is
 * read. */
nrt_status nrt_graph_load(const void *data, size_t size, nrt_graph_t *out);
void nrt_graph_destroy(nrt_graph_t graph);

/* The graph's text form (one line per symbol, buffer and node), malloc'd;
 * free it with free(). */
nrt_status nrt_graph_to_text(nrt_graph_t graph, char **text);

/* Compiles a loaded graph: fusion of pointwise chains into fused groups
 * (neuronrt/fuse.h) and the lifetimes the memory planner packs. The
 * program keeps what it needs of the graph (the graph may be destroyed). */
typedef struct nrt_program_options {
  int32_t fuse;  /* 0: every node a step of its own */
} nrt_program_options;

nrt_status nrt_program_compile(nrt_graph_t graph, const nrt_program_options *options,
                               nrt_program_t *out);

/* The generated kernels of compiled programs' fused groups are compiled
 * in the background (TORCHNEURON_CODEGEN=sync: while the program is
 * compiled); each group runs its tape until its kernel is ready, with the
 * same results. Waits until no such compile is queued or running, or
 * timeout_seconds have passed (negative: no limit); returns the compiles
 * still pending. */
int32_t nrt_program_wait_for_kernels(double timeout_seconds);
void nrt_program_destroy(nrt_program_t program);

typedef struct nrt_program_info {
  int32_t num_inputs, num_outputs, num_symbols;
  int32_t num_nodes;        /* nodes of the graph */
  int32_t num_steps;        /* steps of the program: kernels and fused groups */
  int32_t num_fused_groups; /* steps that are fused groups: of 2 or more nodes, or a GEMM with its epilogue */
  int32_t num_fused_nodes;  /* nodes inside those groups */
  int32_t num_elided;       /* temporaries that live in fused registers only */
  int32_t num_inplace;      /* temporaries written in place over an input's space */
  int32_t num_gemm_epilogues; /* GEMMs whose following pointwise nodes run on their blocks */
  int32_t num_row_regions;    /* steps that run a norm or softmax and the pointwise steps around it by rows */
} nrt_program_info;

nrt_status nrt_program_info_get(nrt_program_t program, nrt_program_info *info);

/* The fusion plan and memory plan (for a symbol binding, when symbols is
 * not NULL) as text, malloc'd. */
nrt_status nrt_program_plan_text(nrt_program_t program, const int64_t *symbols,
                                 int32_t num_symbols, char **text);

/* Evaluates every expression for a binding of the symbols, plans the
 * arena and checks that every view lies inside its buffer (inputs: given
 * their element capacities from the address passed at launch). Writes the
 * arena's size in bytes and each output's element count (output_numels
 * has num_outputs entries). Plans are cached per binding. */
nrt_status nrt_program_prepare(nrt_program_t program, const int64_t *symbols, int32_t num_symbols,
                               const int64_t *input_capacity, size_t *arena_bytes,
                               int64_t *output_numels);

/* Queues one run of the program on stream as a single operation, after
 * nrt_program_prepare for the same binding and capacities (it is checked
 * again). inputs and outputs are device addresses; arena is device memory
 * of at least the planned size (NULL when it is 0). The program may be
 * destroyed once this returns. A failure inside is the stream's sticky
 * error, "compiled graph <name>: <the step's message>". */
nrt_status nrt_program_launch(nrt_stream_t stream, nrt_program_t program, const int64_t *symbols,
                              int32_t num_symbols, void *const *inputs,
                              const int64_t *input_capacity, void *const *outputs, void *arena);

/* Counts over every program's launches since the last clear: GEMM steps
 * whose epilogue ran on the product's blocks, and those whose binding laid
 * the group out so that it could not (it then ran after the product); row
 * regions run chunk by chunk of rows, and those whose layouts made their
 * steps run one after another. */
typedef struct nrt_program_counters {
  uint64_t gemm_epilogues_on_blocks, gemm_epilogues_after;
  uint64_t row_regions_chunked, row_regions_alone;
} nrt_program_counters;
void nrt_program_get_counters(nrt_program_counters *counters);
void nrt_program_clear_counters(void);

#ifdef __cplusplus
}
#endif
#endif
