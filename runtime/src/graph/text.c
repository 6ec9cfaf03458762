/* The graph's text form (nrt_graph_to_text). */
#include <stdlib.h>
#include "graph/ir.h"

static const char *kind_name(uint32_t kind) {
  return kind == NRT_BUFFER_INPUT ? "input" : kind == NRT_BUFFER_OUTPUT ? "output" : "temp";
}

static void print_exprs(rt_sbuf *b, const struct nrt_graph *g, int n, const uint32_t *ids) {
  rt_sbuf_printf(b, "(");
  for (int d = 0; d < n; d++) {
    if (d) rt_sbuf_printf(b, ", ");
    rt_expr_print(b, &g->exprs[ids[d]]);
  }
  rt_sbuf_printf(b, ")");
}

static void print_scalar(rt_sbuf *b, const nrt_scalar *x) {
  if (x->is_float) rt_sbuf_printf(b, "%.17g", x->f);
  else rt_sbuf_printf(b, "%lld", (long long)x->i);
}

void rt_graph_print_operand(rt_sbuf *b, const struct nrt_graph *g, const rt_goperand *o) {
  if (o->is_immediate) {
    rt_sbuf_printf(b, "imm(");
    print_scalar(b, &o->immediate);
    rt_sbuf_printf(b, " %s)", nrt_dtype_name(o->dtype));
    return;
  }
  if (o->buffer < 0) {
    rt_sbuf_printf(b, "none");
    return;
  }
  rt_sbuf_printf(b, "b%d[%s +", o->buffer, nrt_dtype_name(o->dtype));
  rt_expr_print(b, &g->exprs[o->offset_expr]);
  rt_sbuf_printf(b, " ");
  print_exprs(b, g, o->ndim, o->shape_expr);
  rt_sbuf_printf(b, " ");
  print_exprs(b, g, o->ndim, o->stride_expr);
  rt_sbuf_printf(b, "]");
}

nrt_status nrt_graph_to_text(nrt_graph_t g, char **text) {
  if (!g || !text) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_graph_to_text: NULL argument");
  rt_sbuf b = {0};
  rt_sbuf_printf(&b, "graph \"%s\": %u symbols, %u buffers (%u inputs, %u outputs), %u nodes\n",
                 g->name, g->num_symbols, g->num_buffers, g->num_inputs, g->num_outputs, g->num_nodes);
  for (uint32_t i = 0; i < g->num_symbols; i++) rt_sbuf_printf(&b, "symbol s%u\n", i);
  for (uint32_t i = 0; i < g->num_buffers; i++) {
    const rt_gbuffer *x = &g->buffers[i];
    rt_sbuf_printf(&b, "buffer b%u: %s", i, kind_name(x->kind));
    if (x->kind != NRT_BUFFER_TEMP) rt_sbuf_printf(&b, " %u", x->slot);
    rt_sbuf_printf(&b, " %s numel ", nrt_dtype_name(x->dtype));
    rt_expr_print(&b, &g->exprs[x->numel_expr]);
    rt_sbuf_printf(&b, "\n");
  }
  for (uint32_t i = 0; i < g->num_nodes; i++) {
    const rt_gnode *n = &g->nodes[i];
    rt_sbuf_printf(&b, "node %u: %s %s", i, rt_gnode_name(n->code), nrt_dtype_name(n->compute_dtype));
    for (int k = 0; k < n->num_operands; k++) {
      if (k == 0 && n->num_outputs > 0) rt_sbuf_printf(&b, " outputs");
      if (k == n->num_outputs) rt_sbuf_printf(&b, "%s", n->num_outputs ? " inputs" : " operands");
      rt_sbuf_printf(&b, " ");
      rt_graph_print_operand(&b, g, rt_gnode_operand(g, n, k));
    }
    if (n->num_scalars) {
      rt_sbuf_printf(&b, " scalars [");
      for (int j = 0; j < n->num_scalars; j++) {
        if (j) rt_sbuf_printf(&b, ", ");
        print_scalar(&b, &n->scalars[j]);
      }
      rt_sbuf_printf(&b, "]");
    }
    rt_sbuf_printf(&b, "\n");
  }
  return rt_sbuf_finish(&b, text);
}
