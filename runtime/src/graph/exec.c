/* nrt_program_launch: one host task per launch that runs the program's
 * steps on the stream's worker. The calling thread only copies pointers
 * and takes a reference to the binding's (cached) plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "fuse/fuse_group.h"
#include "graph/program.h"

/* Each worker thread's group, refilled for every fused step of a checked
 * plan (a group is large; building and naming one per launch would cost
 * more than a small step's work). */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;
static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, free) == 0; }

static struct nrt_fuse_group *scratch_group(void) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_ok) return NULL;
  struct nrt_fuse_group *g = pthread_getspecific(scratch_key);
  if (!g && (g = malloc(sizeof *g)) && pthread_setspecific(scratch_key, g)) {
    free(g);
    g = NULL;
  }
  return g;
}

typedef struct task {
  struct nrt_program *program;
  rt_plan *plan;
  char *arena;
  void **inputs, **outputs; /* into ptrs */
  void *ptrs[];
} task;

static char *buffer_base(const task *t, int32_t b) {
  const rt_gbuffer *x = &t->program->graph->buffers[b];
  if (x->kind == NRT_BUFFER_INPUT) return t->inputs[x->slot];
  if (x->kind == NRT_BUFFER_OUTPUT) return t->outputs[x->slot];
  return t->plan->offset[b] == SIZE_MAX ? NULL : t->arena + t->plan->offset[b];
}

/* The operand under the plan: a device view, an immediate (op.h) or none. */
static int64_t make_view(const task *t, const rt_goperand *o, nrt_tensor_view *v) {
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

static nrt_status run_kernel(const task *t, const rt_gnode *n) {
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
    int64_t numel = make_view(t, o, &op.operands[k]);
    if (o->is_immediate) op.immediates[k] = o->immediate;
    if (k < outputs && numel != 0) empty = 0;
  }
  return empty ? NRT_SUCCESS : nrt_op_execute(&op);
}

/* An NKI node: its program on this thread, HBM tensors bound to the views. */
static nrt_status run_nki(const task *t, uint32_t node) {
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
    make_view(t, rt_gnode_operand(g, n, k), &v);
    hbm[tensor] = v.data ? nrt_device_to_host(v.data) : NULL;
  }
  nrt_status s = nrt_nc_program_run(t->program->nc[node], hbm);
  if (hbm != stack) free(hbm);
  return s;
}

static nrt_status run_fused(const task *t, const rt_fused *f, int checked) {
  const struct nrt_graph *g = t->program->graph;
  nrt_tensor_view inputs[NRT_FUSE_MAX_INPUTS], outputs[NRT_FUSE_MAX_OUTPUTS], shape;
  if (make_view(t, &g->operands[f->shape_operand], &shape) == 0 || f->num_outputs == 0)
    return NRT_SUCCESS; /* nothing to compute, or nothing that anyone reads */
  nrt_fuse_group_desc d;
  memset(&d, 0, sizeof d);
  d.ndim = shape.ndim;
  memcpy(d.shape, shape.shape, sizeof d.shape);
  for (int i = 0; i < f->num_inputs; i++) make_view(t, &g->operands[f->input_operand[i]], &inputs[i]);
  for (int j = 0; j < f->num_outputs; j++) make_view(t, &g->operands[f->output_operand[j]], &outputs[j]);
  d.num_inputs = f->num_inputs;
  d.inputs = inputs;
  d.num_registers = f->num_registers;
  d.registers = f->registers;
  d.num_insts = f->num_insts;
  d.insts = f->insts;
  d.num_outputs = f->num_outputs;
  d.outputs = outputs;
  d.output_registers = f->output_registers;
  nrt_status s;
  struct nrt_fuse_group *fast = checked ? scratch_group() : NULL;
  if (fast) {
    /* Layouts as validated before; the addresses lie in the buffers
     * (nrt_program_prepare checked every view). */
    if (!(s = rt_fuse_group_init(fast, &d))) {
      memcpy(fast->name, f->name, sizeof fast->name);
      s = rt_fuse_run(fast);
    }
    return s;
  }
  nrt_fuse_group_t group;
  s = nrt_fuse_group_create(&d, &group);
  if (s) return s;
  s = nrt_fuse_group_execute(group);
  nrt_fuse_group_destroy(group);
  if (s) {
    /* The message starts with the group's name, which the step names. */
    const char *why = nrt_last_error();
    size_t len = strlen(f->name);
    if (!strncmp(why, f->name, len) && !strncmp(why + len, ": ", 2)) {
      char rest[1024];
      snprintf(rest, sizeof rest, "%s", why + len + 2);
      rt_set_error(rest);
    }
  }
  return s;
}

static nrt_status run(void *arg) {
  const task *t = arg;
  const struct nrt_program *p = t->program;
  int checked = atomic_load_explicit(&t->plan->fused_checked, memory_order_acquire);
  for (int32_t i = 0; i < p->num_steps; i++) {
    const rt_step *st = &p->steps[i];
    const rt_gnode *n = &p->graph->nodes[st->first_node];
    nrt_status s = st->kind == RT_STEP_FUSED                   ? run_fused(t, st->fused, checked)
                   : n->code == (nrt_op_code)NRT_GRAPH_NKI ? run_nki(t, st->first_node)
                                                           : run_kernel(t, n);
    if (s) {
      char why[1024];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      return rt_fail(s, "step %d (%s): %s", i,
                     st->kind == RT_STEP_FUSED ? st->fused->name : rt_gnode_name(n->code), why);
    }
  }
  if (!checked) atomic_store_explicit(&t->plan->fused_checked, 1, memory_order_release);
  return NRT_SUCCESS;
}

static void release(void *arg) {
  task *t = arg;
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
  task *t = malloc(sizeof *t + (g->num_inputs + g->num_outputs) * sizeof(void *));
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
  return nrt_launch_host_task(stream, p->task_name, run, release, t);
fail:
  rt_plan_release(plan);
  return s;
}
