/* nrt_program_launch: one host task per launch that runs the program's
 * steps on the stream's worker. The calling thread only copies pointers
 * and takes a reference to the binding's (cached) plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "fuse/codegen.h"
#include "graph/run.h"
#include "nc/nc_internal.h"
#include "profiling.h"

/* Each worker thread's groups, refilled for every fused step of a checked
 * plan (a group is large; building and naming one per launch would cost
 * more than a small step's work). A row region holds several at once. */
typedef struct scratch_groups {
  struct nrt_fuse_group *slot[RT_RUN_GROUPS];
} scratch_groups;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;
static void scratch_free(void *p) {
  scratch_groups *s = p;
  for (int i = 0; i < RT_RUN_GROUPS; i++) free(s->slot[i]);
  free(s);
}
static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

static struct nrt_fuse_group *scratch_group(int slot) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_ok || slot < 0 || slot >= RT_RUN_GROUPS) return NULL;
  scratch_groups *s = pthread_getspecific(scratch_key);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return NULL;
    if (pthread_setspecific(scratch_key, s)) {
      free(s);
      return NULL;
    }
  }
  if (!s->slot[slot]) s->slot[slot] = malloc(sizeof *s->slot[slot]);
  return s->slot[slot];
}

static char *buffer_base(const rt_task *t, int32_t b) {
  const rt_gbuffer *x = &t->program->graph->buffers[b];
  if (x->kind == NRT_BUFFER_INPUT) return t->inputs[x->slot];
  if (x->kind == NRT_BUFFER_OUTPUT) return t->outputs[x->slot];
  return t->plan->offset[b] == SIZE_MAX ? NULL : t->arena + t->plan->offset[b];
}

int64_t rt_run_view(const rt_task *t, const rt_goperand *o, nrt_tensor_view *v) {
  const rt_plan *plan = t->plan;
  memset(v, 0, sizeof *v);
  v->dtype = o->dtype;
  v->ndim = o->ndim;
  int64_t numel = 1;
  for (int d = 0; d < o->ndim; d++) {
    v->shape[d] = rt_plan_value(plan, o->shape_expr[d]);
    v->strides[d] = rt_plan_value(plan, o->stride_expr[d]);
    numel *= v->shape[d];
  }
  /* Empty views point nowhere, as eager's absent and empty tensors do. */
  if (o->buffer >= 0 && numel > 0) {
    uintptr_t base = (uintptr_t)buffer_base(t, o->buffer);
    v->data = (void *)(base + (uintptr_t)rt_plan_value(plan, o->offset_expr) * nrt_dtype_size(o->dtype));
  }
  return numel;
}

int rt_run_op(const rt_task *t, const rt_gnode *n, nrt_op *out) {
  const struct nrt_graph *g = t->program->graph;
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = n->code;
  op.compute_dtype = n->compute_dtype;
  op.num_operands = n->num_operands;
  op.num_outputs = n->num_outputs;
  op.num_scalars = n->num_scalars;
  op.immediate_mask = n->immediate_mask;
  memcpy(op.scalars, n->scalars, sizeof op.scalars);
  /* Eager skips ops whose outputs are all empty (operand 0 for ops that
   * count no outputs, such as copies). */
  int outputs = n->num_outputs ? n->num_outputs : 1, empty = n->num_operands > 0;
  for (int k = 0; k < n->num_operands; k++) {
    const rt_goperand *o = rt_gnode_operand(g, n, k);
    int64_t numel = rt_run_view(t, o, &op.operands[k]);
    if (o->is_immediate) op.immediates[k] = o->immediate;
    if (k < outputs && numel != 0) empty = 0;
  }
  *out = op;
  return !empty;
}

static nrt_status run_kernel(const rt_task *t, const rt_gnode *n) {
  nrt_op op;
  return rt_run_op(t, n, &op) ? nrt_op_execute(&op) : NRT_SUCCESS;
}

/* An NKI node: its program on this thread, HBM tensors bound to the views. */
static nrt_status run_nki(const rt_task *t, uint32_t node) {
  const struct nrt_graph *g = t->program->graph;
  const rt_gnode *n = &g->nodes[node];
  uint32_t num_tensors = rt_gnode_blob(g, n, 1)->len / (uint32_t)sizeof(nrt_nc_tensor);
  void *stack[64], **hbm = num_tensors <= 64 ? stack : calloc(num_tensors, sizeof *hbm);
  if (!hbm) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory running an NKI kernel");
  memset(hbm, 0, (num_tensors <= 64 ? 64 : num_tensors) * sizeof *hbm);
  for (int k = 0; k < n->num_operands; k++) {
    nrt_tensor_view v;
    int32_t tensor;
    memcpy(&tensor, rt_gnode_blob(g, n, 2)->data + 4 * k, 4);
    rt_run_view(t, rt_gnode_operand(g, n, k), &v);
    hbm[tensor] = v.data ? nrt_device_to_host(v.data) : NULL;
  }
  nrt_status s = nrt_nc_program_run(t->program->nc[node], hbm);
  if (hbm != stack) free(hbm);
  return s;
}

int rt_run_describe_group(const rt_task *t, const rt_fused *f, group_views *v) {
  const struct nrt_graph *g = t->program->graph;
  nrt_tensor_view shape;
  if (rt_run_view(t, &g->operands[f->shape_operand], &shape) == 0 || f->num_outputs == 0) return 0;
  nrt_fuse_group_desc *d = &v->d;
  memset(d, 0, sizeof *d);
  d->ndim = shape.ndim;
  memcpy(d->shape, shape.shape, sizeof d->shape);
  for (int i = 0; i < f->num_inputs; i++) rt_run_view(t, &g->operands[f->input_operand[i]], &v->inputs[i]);
  for (int j = 0; j < f->num_outputs; j++) rt_run_view(t, &g->operands[f->output_operand[j]], &v->outputs[j]);
  d->num_inputs = f->num_inputs;
  d->inputs = v->inputs;
  d->num_registers = f->num_registers;
  d->registers = f->registers;
  d->num_insts = f->num_insts;
  d->insts = f->insts;
  d->num_outputs = f->num_outputs;
  d->outputs = v->outputs;
  d->output_registers = f->output_registers;
  return 1;
}

/* Builds and validates the group once (a plan's first launch), naming the
 * failure after the step rather than the group. */
static nrt_status validate_group(const rt_fused *f, const nrt_fuse_group_desc *d) {
  nrt_fuse_group_t group;
  nrt_status s = nrt_fuse_group_create(d, &group);
  if (!s) {
    nrt_fuse_group_destroy(group);
    return NRT_SUCCESS;
  }
  /* The message starts with the group's name, which the step names. */
  const char *why = nrt_last_error();
  size_t len = strlen(f->name);
  if (!strncmp(why, f->name, len) && !strncmp(why + len, ": ", 2)) {
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", why + len + 2);
    rt_set_error(rest);
  }
  return s;
}

nrt_status rt_run_fill_group(const rt_fused *f, const nrt_fuse_group_desc *d, int checked, int slot,
                             struct nrt_fuse_group **out) {
  nrt_status s;
  if (!checked && (s = validate_group(f, d))) return s;
  struct nrt_fuse_group *fast = scratch_group(slot);
  if (!fast) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory for a fused group");
  /* Layouts as validated; the addresses lie in the buffers (the plan
   * checked every view). */
  if ((s = rt_fuse_group_init(fast, d))) return s;
  memcpy(fast->name, f->name, sizeof fast->name);
  fast->replays = f->replays;
  fast->gen = rt_fuse_codegen_match(rt_gen_cell_kernel(f->gen), fast);
  *out = fast;
  return NRT_SUCCESS;
}

nrt_status rt_run_fused(const rt_task *t, const rt_fused *f, int checked) {
  group_views v;
  struct nrt_fuse_group *group = NULL;
  if (!rt_run_describe_group(t, f, &v)) return NRT_SUCCESS;
  nrt_status s = rt_run_fill_group(f, &v.d, checked, 0, &group);
  return s ? s : rt_fuse_run(group);
}

/* ---- profiling: each step a part of the program's record ---------------- */

static void group_estimate(const rt_task *t, const rt_fused *f, nrt_roofline *est) {
  group_views v;
  if (!rt_run_describe_group(t, f, &v)) return;
  for (int i = 0; i < v.d.num_inputs; i++) nrt_roofline_add_view(&v.inputs[i], est);
  for (int j = 0; j < v.d.num_outputs; j++) nrt_roofline_add_view(&v.outputs[j], est);
  int64_t numel = 1;
  for (int d = 0; d < v.d.ndim; d++) numel *= v.d.shape[d];
  est->work[NRT_ROOFLINE_VECTOR] += (double)numel * f->num_insts;
}

static void step_estimate(const rt_task *t, const rt_step *st, nrt_roofline *est) {
  const struct nrt_program *p = t->program;
  const rt_gnode *n = &p->graph->nodes[st->first_node];
  nrt_op op;
  if (st->kind == RT_STEP_ROWS) {
    for (int32_t i = 0; i < st->num_members; i++) step_estimate(t, &st->members[i], est);
    return;
  }
  if (st->kind == RT_STEP_FUSED) {
    group_estimate(t, st->fused, est);
    return;
  }
  if (n->code == (nrt_op_code)NRT_GRAPH_NKI) {
    rt_profile_nki_estimate(&p->nc[st->first_node]->estimate, est);
    return;
  }
  if (rt_run_op(t, n, &op)) nrt_roofline_add_op(&op, 0, est);
  if (st->kind == RT_STEP_GEMM_EPILOGUE) group_estimate(t, st->fused, est);
}

static void record_step(const rt_task *t, const rt_step *st, uint64_t start) {
  uint64_t end = rt_now_ns();
  const struct nrt_program *p = t->program;
  const rt_gnode *n = &p->graph->nodes[st->first_node];
  nrt_roofline est = {0};
  step_estimate(t, st, &est);
  const char *name = st->kind == RT_STEP_ROWS                    ? "row region"
                     : st->kind != RT_STEP_KERNEL                ? st->fused->name
                     : n->code == (nrt_op_code)NRT_GRAPH_NKI     ? "NKI kernel"
                                                                 : rt_gnode_name(n->code);
  rt_profile_part(name, start, end, &est);
}

static nrt_status run(void *arg) {
  const rt_task *t = arg;
  const struct nrt_program *p = t->program;
  int checked = atomic_load_explicit(&t->plan->fused_checked, memory_order_acquire);
  for (int32_t i = 0; i < p->num_steps; i++) {
    const rt_step *st = &p->steps[i];
    const rt_gnode *n = &p->graph->nodes[st->first_node];
    uint64_t start = __builtin_expect(rt_profile_current != NULL, 0) ? rt_now_ns() : 0;
    nrt_status s = st->kind == RT_STEP_FUSED                   ? rt_run_fused(t, st->fused, checked)
                   : st->kind == RT_STEP_GEMM_EPILOGUE     ? rt_run_gemm_epilogue(t, st, checked)
                   : st->kind == RT_STEP_ROWS              ? rt_run_rows(t, st, checked)
                   : n->code == (nrt_op_code)NRT_GRAPH_NKI ? run_nki(t, st->first_node)
                                                           : run_kernel(t, n);
    if (start) record_step(t, st, start);
    if (s) {
      char why[1024];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      return rt_fail(s, "step %d (%s): %s", i,
                     st->kind == RT_STEP_ROWS     ? "row region"
                     : st->kind != RT_STEP_KERNEL ? st->fused->name
                                                  : rt_gnode_name(n->code),
                     why);
    }
  }
  if (!checked) atomic_store_explicit(&t->plan->fused_checked, 1, memory_order_release);
  return NRT_SUCCESS;
}

static void release(void *arg) {
  rt_task *t = arg;
  rt_plan_release(t->plan);
  rt_program_release(t->program);
  free(t);
}

nrt_status nrt_program_launch(nrt_stream_t stream, nrt_program_t p, const int64_t *symbols,
                              int32_t num_symbols, void *const *inputs,
                              const int64_t *input_capacity, void *const *outputs, void *arena) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL argument");
  const struct nrt_graph *g = p->graph;
  if ((g->num_inputs && !inputs) || (g->num_outputs && !outputs))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL inputs or outputs");
  rt_plan *plan;
  if ((s = rt_program_plan_get(p, symbols, num_symbols, &plan))) return s;
  if ((s = rt_plan_check_inputs(p, plan, input_capacity, "nrt_program_launch"))) goto fail;
  if (plan->arena_bytes && !arena) {
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: NULL arena; the plan needs %zu bytes",
                plan->arena_bytes);
    goto fail;
  }
  for (uint32_t slot = 0; slot < g->num_outputs; slot++)
    if (!outputs[slot] && plan->numel[g->output_buffer[slot]] > 0) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: output %u is NULL", slot);
      goto fail;
    }
  for (uint32_t slot = 0; slot < g->num_inputs; slot++)
    if (!inputs[slot] && plan->input_need[slot] > 0) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_launch: input %u is NULL", slot);
      goto fail;
    }
  rt_task *t = malloc(sizeof *t + (g->num_inputs + g->num_outputs) * sizeof(void *));
  if (!t) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_launch: out of host memory");
    goto fail;
  }
  rt_program_retain(p);
  t->program = p;
  t->plan = plan; /* the reference taken above */
  t->arena = arena;
  t->inputs = t->ptrs;
  t->outputs = t->ptrs + g->num_inputs;
  if (g->num_inputs) memcpy(t->inputs, inputs, g->num_inputs * sizeof(void *));
  if (g->num_outputs) memcpy(t->outputs, outputs, g->num_outputs * sizeof(void *));
  return rt_launch_host_task_kind(stream, NRT_PROFILE_PROGRAM, p->task_name, run, release, t);
fail:
  rt_plan_release(plan);
  return s;
}
