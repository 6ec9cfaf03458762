/* What a program is: nrt_program_info_get and nrt_program_plan_text. */
#include <stdlib.h>
#include "graph/program.h"

nrt_status nrt_program_info_get(nrt_program_t p, nrt_program_info *info) {
  if (!p || !info) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_info_get: NULL argument");
  const struct nrt_graph *g = p->graph;
  info->num_inputs = (int32_t)g->num_inputs;
  info->num_outputs = (int32_t)g->num_outputs;
  info->num_symbols = (int32_t)g->num_symbols;
  info->num_nodes = (int32_t)g->num_nodes;
  info->num_steps = p->num_steps;
  info->num_fused_groups = p->num_fused_groups;
  info->num_fused_nodes = p->num_fused_nodes;
  info->num_elided = p->num_elided;
  info->num_inplace = p->num_inplace;
  info->num_gemm_epilogues = p->num_gemm_epilogues;
  info->num_row_regions = p->num_row_regions;
  return NRT_SUCCESS;
}

/* One step's line after "step N: " (a region's members each in brackets). */
static void print_step(rt_sbuf *b, const struct nrt_program *p, const rt_step *st) {
  const struct nrt_graph *g = p->graph;
  if (st->kind == RT_STEP_KERNEL) {
    rt_sbuf_printf(b, "kernel node %u (%s)", st->first_node, rt_gnode_name(g->nodes[st->first_node].code));
    return;
  }
  if (st->kind == RT_STEP_ROWS) {
    rt_sbuf_printf(b, "row region of %d steps:", st->num_members);
    for (int32_t m = 0; m < st->num_members; m++) {
      rt_sbuf_printf(b, " [");
      print_step(b, p, &st->members[m]);
      rt_sbuf_printf(b, "]");
    }
    return;
  }
  const rt_fused *f = st->fused;
  rt_sbuf_printf(b, "%s of %u nodes:", st->kind == RT_STEP_GEMM_EPILOGUE ? "gemm with its epilogue" : "fused group",
                 st->num_nodes);
  for (uint32_t k = 0; k < st->num_nodes; k++)
    rt_sbuf_printf(b, "%s %u (%s)", k ? "," : "", rt_step_node(st, k), rt_gnode_name(g->nodes[rt_step_node(st, k)].code));
  rt_sbuf_printf(b, "; %d inputs, %d registers; stores", f->num_inputs, f->num_registers);
  for (int j = 0; j < f->num_outputs; j++) rt_sbuf_printf(b, " b%d", g->operands[f->output_operand[j]].buffer);
  if (!f->num_outputs) rt_sbuf_printf(b, " nothing");
}

static void print_steps(rt_sbuf *b, const struct nrt_program *p) {
  for (int32_t i = 0; i < p->num_steps; i++) {
    rt_sbuf_printf(b, "step %d: ", i);
    print_step(b, p, &p->steps[i]);
    rt_sbuf_printf(b, "\n");
  }
}

nrt_status nrt_program_plan_text(nrt_program_t p, const int64_t *symbols, int32_t num_symbols, char **text) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!p || !text) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_plan_text: NULL argument");
  *text = NULL;
  const struct nrt_graph *g = p->graph;
  rt_plan *plan = NULL;
  if (symbols && (s = rt_program_plan_get(p, symbols, num_symbols, &plan))) return s;
  rt_sbuf b = {0};
  rt_sbuf_printf(&b, "program \"%s\": %u nodes, %d steps, %d fused groups of %d nodes, %d elided temporaries, "
                 "%d written in place, %d gemm epilogues, %d row regions\n", g->name, g->num_nodes,
                 p->num_steps, p->num_fused_groups, p->num_fused_nodes, p->num_elided, p->num_inplace,
                 p->num_gemm_epilogues, p->num_row_regions);
  print_steps(&b, p);
  for (uint32_t i = 0; i < g->num_buffers; i++) {
    if (g->buffers[i].kind != NRT_BUFFER_TEMP) continue;
    rt_sbuf_printf(&b, "temp b%u: ", i);
    if (p->elided[i]) rt_sbuf_printf(&b, "elided (registers only)\n");
    else if (p->first_step[i] < 0) rt_sbuf_printf(&b, "unused\n");
    else if (p->share[i] >= 0)
      rt_sbuf_printf(&b, "steps %d-%d, in place over b%d\n", p->first_step[i], p->last_step[i], p->share[i]);
    else rt_sbuf_printf(&b, "steps %d-%d\n", p->first_step[i], p->last_step[i]);
  }
  if (plan) {
    rt_sbuf_printf(&b, "binding");
    for (uint32_t i = 0; i < g->num_symbols; i++)
      rt_sbuf_printf(&b, " s%u=%lld", i, (long long)plan->symbols[i]);
    rt_sbuf_printf(&b, ": arena %zu bytes\n", plan->arena_bytes);
    for (uint32_t i = 0; i < g->num_buffers; i++)
      if (g->buffers[i].kind == NRT_BUFFER_TEMP && plan->bytes[i])
        rt_sbuf_printf(&b, "temp b%u: offset %zu, %zu bytes\n", i, plan->offset[i], plan->bytes[i]);
    for (uint32_t slot = 0; slot < g->num_outputs; slot++)
      rt_sbuf_printf(&b, "output %u: %lld elements\n", slot,
                     (long long)plan->numel[g->output_buffer[slot]]);
    rt_plan_release(plan);
  }
  return rt_sbuf_finish(&b, text);
}
