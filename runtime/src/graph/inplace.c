/* In-place reuse: a pointwise step (or a GEMM's epilogue) may write its
 * result over a temporary it reads for the last time, when both are laid
 * out alike (same dtype, element count, offset, shape and strides):
 * element i is read before element i is written, as in an eager in-place
 * op. The result then
 * shares the input's arena space (share[result] = the space's owner),
 * whose lifetime grows to cover it. */
#include <stdlib.h>
#include "fuse/fuse_group.h"
#include "graph/program.h"

static int same_layout(const struct nrt_graph *g, const rt_goperand *a, const rt_goperand *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim ||
      !rt_graph_same_expr(g, a->offset_expr, b->offset_expr))
    return 0;
  for (int d = 0; d < a->ndim; d++)
    if (!rt_graph_same_expr(g, a->shape_expr[d], b->shape_expr[d]) ||
        !rt_graph_same_expr(g, a->stride_expr[d], b->stride_expr[d]))
      return 0;
  return 1;
}

static int32_t owner(const struct nrt_program *p, int32_t b) {
  while (p->share[b] >= 0) b = p->share[b];
  return b;
}

/* A temporary in arena space (not elided, touched by some step). */
static int in_arena(const struct nrt_program *p, int32_t b) {
  return b >= 0 && p->graph->buffers[b].kind == NRT_BUFFER_TEMP && !p->elided[b] &&
         p->first_step[b] >= 0;
}

/* The operands a step reads from memory and writes to memory (indices into
 * the graph's operands). */
typedef struct step_operands {
  uint32_t reads[NRT_FUSE_MAX_INPUTS + NRT_MAX_OPERANDS], writes[NRT_FUSE_MAX_OUTPUTS + NRT_MAX_OPERANDS];
  int nreads, nwrites;
} step_operands;

static int pointwise_operands(const struct nrt_program *p, const rt_step *st, step_operands *o) {
  const struct nrt_graph *g = p->graph;
  o->nreads = o->nwrites = 0;
  if (st->kind == RT_STEP_ROWS) return 0; /* chunks of rows: no in-place reuse inside */
  if (st->kind == RT_STEP_FUSED || st->kind == RT_STEP_GEMM_EPILOGUE) {
    const rt_fused *f = st->fused;
    for (int k = 0; k < f->num_inputs; k++) o->reads[o->nreads++] = f->input_operand[k];
    for (int k = 0; k < f->num_outputs; k++) o->writes[o->nwrites++] = f->output_operand[k];
    return 1;
  }
  const rt_gnode *n = &g->nodes[st->first_node];
  if (!rt_fuse_is_fusible(n->code)) return 0; /* only elementwise kernels */
  int nout = n->num_outputs ? n->num_outputs : n->code == NRT_OP_COPY;
  for (int k = 0; k < n->num_operands; k++) {
    const rt_goperand *x = rt_gnode_operand(g, n, k);
    if (x->is_immediate || x->buffer < 0) continue;
    uint32_t id = n->first_operand + (uint32_t)k;
    if (k < nout) o->writes[o->nwrites++] = id;
    else o->reads[o->nreads++] = id;
  }
  return 1;
}

/* Whether every read of a's space in the step uses layout x. */
static int reads_only_as(const struct nrt_program *p, const step_operands *o, int32_t space,
                         const rt_goperand *x) {
  const struct nrt_graph *g = p->graph;
  for (int k = 0; k < o->nreads; k++) {
    const rt_goperand *r = &g->operands[o->reads[k]];
    if (in_arena(p, r->buffer) && owner(p, r->buffer) == space && !same_layout(g, r, x)) return 0;
  }
  return 1;
}

/* Whether a GEMM step's product reads space: its epilogue writes blocks
 * while the product still reads every input, so it may not write there. */
static int gemm_reads(const struct nrt_program *p, const rt_step *st, int32_t space) {
  if (st->kind != RT_STEP_GEMM_EPILOGUE) return 0;
  const rt_gnode *m = &p->graph->nodes[st->first_node];
  for (int k = 1; k < m->num_operands; k++) {
    int32_t b = rt_gnode_operand(p->graph, m, k)->buffer;
    if (in_arena(p, b) && owner(p, b) == space) return 1;
  }
  return 0;
}

void rt_program_plan_inplace(struct nrt_program *p) {
  const struct nrt_graph *g = p->graph;
  step_operands o;
  for (int32_t s = 0; s < p->num_steps; s++) {
    if (!pointwise_operands(p, &p->steps[s], &o)) continue;
    int32_t taken[NRT_FUSE_MAX_OUTPUTS + NRT_MAX_OPERANDS]; /* spaces given to this step's results */
    int ntaken = 0;
    for (int w = 0; w < o.nwrites; w++) {
      const rt_goperand *y = &g->operands[o.writes[w]];
      int32_t b = y->buffer;
      if (!in_arena(p, b) || p->share[b] >= 0 || p->first_step[b] != s) continue;
      for (int r = 0; r < o.nreads; r++) {
        const rt_goperand *x = &g->operands[o.reads[r]];
        int32_t a = x->buffer;
        if (!in_arena(p, a) || a == b) continue;
        int32_t space = owner(p, a);
        int used = 0;
        for (int t = 0; t < ntaken; t++) used |= taken[t] == space;
        if (used || space == b || p->last_step[space] != s || gemm_reads(p, &p->steps[s], space) || g->buffers[a].dtype != g->buffers[b].dtype ||
            !rt_graph_same_expr(g, g->buffers[a].numel_expr, g->buffers[b].numel_expr) ||
            !same_layout(g, x, y) || !reads_only_as(p, &o, space, x))
          continue;
        /* b must not be read in this step either (it is written here first). */
        int read_b = 0;
        for (int k = 0; k < o.nreads; k++) read_b |= g->operands[o.reads[k]].buffer == b;
        if (read_b) break;
        p->share[b] = space;
        taken[ntaken++] = space;
        p->last_step[space] = p->last_step[b];
        p->num_inplace++;
        break;
      }
    }
  }
}

int32_t rt_program_space_owner(const struct nrt_program *p, int32_t b) { return owner(p, b); }
