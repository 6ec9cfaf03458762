/* A loaded graph (graph.h): its expressions, buffers and nodes, as parsed
 * and validated by load.c. Shared, reference counted, by the programs
 * compiled from it. */
#ifndef NEURONRT_GRAPH_IR_H
#define NEURONRT_GRAPH_IR_H

#include <stdatomic.h>
#include <stdint.h>
#include "graph/expr.h"
#include "internal.h"
#include "neuronrt/graph.h"
#include "neuronrt/nc.h"

typedef struct rt_gbuffer {
  uint32_t kind; /* nrt_buffer_kind */
  nrt_dtype dtype;
  uint32_t slot; /* inputs and outputs; 0 for temporaries */
  uint32_t numel_expr;
} rt_gbuffer;

/* An operand: a view of a buffer, an immediate or none (buffer -1). */
typedef struct rt_goperand {
  int32_t buffer;
  nrt_dtype dtype;
  int32_t ndim;
  int32_t is_immediate;
  uint32_t offset_expr;
  uint32_t shape_expr[NRT_MAX_DIMS];
  uint32_t stride_expr[NRT_MAX_DIMS];
  nrt_scalar immediate;
} rt_goperand;

typedef struct rt_gnode {
  nrt_op_code code;
  nrt_dtype compute_dtype;
  int32_t num_operands, num_outputs, num_scalars;
  uint32_t immediate_mask;
  nrt_scalar scalars[NRT_MAX_SCALARS];
  uint32_t first_operand; /* into nrt_graph.operands */
} rt_gnode;

/* A blob: bytes of the graph's blob section (NKI programs). */
typedef struct rt_gblob {
  uint8_t *data;
  uint32_t len;
} rt_gblob;

struct nrt_graph {
  atomic_int refs; /* the caller's and each program's */
  uint32_t num_symbols, num_exprs, num_buffers, num_nodes, num_blobs;
  rt_gblob *blobs;
  uint32_t num_inputs, num_outputs, num_operands;
  rt_expr *exprs;
  rt_expr_term *terms;
  rt_gbuffer *buffers;
  rt_gnode *nodes;
  rt_goperand *operands;
  int32_t *input_buffer, *output_buffer; /* the buffer of each slot */
  char name[NRT_GRAPH_MAX_NAME + 1];
};

static inline const rt_goperand *rt_gnode_operand(const struct nrt_graph *g, const rt_gnode *n,
                                                  int k) {
  return &g->operands[n->first_operand + (uint32_t)k];
}

/* The operands a node writes: its outputs, and a copy's destination even
 * when it counts no outputs (as eager's copies do; op.h allows it). */
static inline int32_t rt_gnode_writes(const rt_gnode *n) {
  return n->code == NRT_OP_COPY && n->num_outputs == 0 && n->num_operands > 0 ? 1 : n->num_outputs;
}

/* The name of a node's op: the op vocabulary's, or "nki_kernel". */
static inline const char *rt_gnode_name(uint32_t code) {
  return code == NRT_GRAPH_NKI ? "nki_kernel" : nrt_op_name((nrt_op_code)code);
}

/* An NKI node's blobs (load.c validated them): its instruction and tensor
 * records and its operands' tensor indices. */
static inline const rt_gblob *rt_gnode_blob(const struct nrt_graph *g, const rt_gnode *n, int k) {
  return &g->blobs[n->scalars[k].i];
}

void rt_graph_retain(struct nrt_graph *g);
void rt_graph_release(struct nrt_graph *g);

/* Appends an operand as text: b3[float32 +s0 (s0, 4) (4, 1)], imm(2), none. */
void rt_graph_print_operand(rt_sbuf *b, const struct nrt_graph *g, const rt_goperand *o);

#endif
