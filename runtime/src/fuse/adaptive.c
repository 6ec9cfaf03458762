/* Adaptive eager execution: the planner that turns the pointwise ops queued
 * on a stream into one fused group (fuse/adaptive.h).
 *
 * The run grows op by op from the one the worker takes, and ends at the
 * first op that cannot join it; ops are viewed over a common iteration
 * space first (iteration_space.h). Every tensor the run touches is tracked by
 * its byte range. A tensor the run writes is a register from then on: a
 * later read of exactly that view (same address, dtype and strides) reads
 * the register, a later write of it makes a new register, and any other
 * access overlapping its bytes ends the run. The group stores each written
 * tensor's last register after a tile's last instruction, and an
 * instruction reads its inputs from memory when it runs on the tile; since
 * every access to written memory is the same view, each element is read
 * and written only by the tile that holds it, in the ops' order.
 *
 * A written tensor whose block the allocator freed at a stream position
 * the run covers (stream_free_log.h) is not stored: nothing queued after
 * the run can read it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "fuse/adaptive.h"
#include "fuse/fuse_group.h"
#include "fuse/iteration_space.h"
#include "neuronrt/adaptive_eager.h"
#include "stream_free_log.h"

/* ---- controls and counters ------------------------------------------- */

static atomic_int enabled = -1; /* -1: the environment is not read yet */
static int launch_blocking;     /* NEURON_LAUNCH_BLOCKING: nothing queues to fuse */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t counted_groups, counted_ops, counted_elided;

static void read_environment(void) {
  const char *e = getenv("TORCHNEURON_ADAPTIVE_EAGER");
  int on = !(e && (!strcmp(e, "0") || !strcasecmp(e, "false") || !strcasecmp(e, "off") ||
                   !strcasecmp(e, "no")));
  launch_blocking = nrt_launch_blocking();
  atomic_store(&enabled, on && !launch_blocking);
}

int rt_adaptive_on(void) {
  int on = atomic_load_explicit(&enabled, memory_order_relaxed);
  if (on >= 0) return on;
  pthread_once(&env_once, read_environment);
  return atomic_load(&enabled);
}

void nrt_adaptive_eager_set_enabled(int on) {
  pthread_once(&env_once, read_environment);
  atomic_store(&enabled, on && !launch_blocking);
}

int nrt_adaptive_eager_enabled(void) { return rt_adaptive_on(); }

void nrt_adaptive_eager_get_counters(nrt_adaptive_eager_counters *c) {
  if (!c) return;
  c->groups = atomic_load(&counted_groups);
  c->fused_ops = atomic_load(&counted_ops);
  c->elided_writes = atomic_load(&counted_elided);
}

void nrt_adaptive_eager_clear_counters(void) {
  atomic_store(&counted_groups, 0);
  atomic_store(&counted_ops, 0);
  atomic_store(&counted_elided, 0);
}

/* ---- the planner ------------------------------------------------------ */

/* A tensor the run touches: its view (of the run's shape) and bytes. */
typedef struct touched {
  nrt_tensor_view view;
  uintptr_t lo, hi;
  int32_t reg;         /* written tensors: the register holding its value */
  uint64_t writer_seq; /* written tensors: the command that wrote it last */
} touched;

struct rt_adaptive {
  int32_t ndim;
  int64_t shape[NRT_MAX_DIMS];
  int32_t num_inputs, num_written, num_registers, num_insts;
  touched inputs[NRT_FUSE_MAX_INPUTS];
  touched written[NRT_FUSE_MAX_OUTPUTS];
  nrt_dtype registers[NRT_FUSE_MAX_REGISTERS];
  nrt_fuse_inst insts[NRT_FUSE_MAX_INSTS];
  int32_t elided;   /* stores left out: freed or overwritten */
  int32_t run_ops;  /* ops in the planned run */
  int32_t runnable; /* the group stores something */
  nrt_tensor_view input_views[NRT_FUSE_MAX_INPUTS];
  nrt_tensor_view output_views[NRT_FUSE_MAX_OUTPUTS];
  int32_t output_registers[NRT_FUSE_MAX_OUTPUTS];
  struct nrt_fuse_group group;
};

rt_adaptive *rt_adaptive_new(void) { return calloc(1, sizeof(rt_adaptive)); }
void rt_adaptive_free(rt_adaptive *a) { free(a); }

/* Integer division, remainder and fmod fail on a zero divisor: such an op
 * runs alone, so that a failure is that op's, after the ops before it. */
static int may_fail(const nrt_op *op) {
  switch (op->code) {
    case NRT_OP_DIV_TRUNC:
    case NRT_OP_DIV_FLOOR:
    case NRT_OP_REMAINDER:
    case NRT_OP_FMOD:
      return !nrt_dtype_is_floating(op->compute_dtype);
    default:
      return 0;
  }
}

/* A copy's destination is its output, counted or not (copy.cpp leaves
 * num_outputs 0, as nrt_op allows for it). */
static int32_t outputs_of(const nrt_op *op) {
  return op->code == NRT_OP_COPY && op->num_outputs == 0 ? 1 : op->num_outputs;
}

/* Ops computing in a storage dtype (complex ADD) have no fused form: a
 * group holding one would fail as a whole, its real neighbours with it. */
int rt_adaptive_candidate(const nrt_op *op) {
  return rt_fuse_is_fusible(op->code) && outputs_of(op) >= 1 && !may_fail(op) &&
         !(op->immediate_mask & 1u) && !((unsigned)op->compute_dtype >= NRT_UINT16);
}

static void byte_range(const nrt_tensor_view *v, uintptr_t *lo, uintptr_t *hi) {
  int64_t below = 0, above = 0;
  for (int d = 0; d < v->ndim; d++) {
    int64_t span = v->strides[d] * (v->shape[d] - 1);
    if (span < 0) below += span;
    else above += span;
  }
  int64_t size = (int64_t)nrt_dtype_size(v->dtype);
  *lo = (uintptr_t)v->data + (uintptr_t)(below * size);
  *hi = (uintptr_t)v->data + (uintptr_t)((above + 1) * size);
}

/* The same elements in the same layout (both views have the run's shape). */
static int same_view(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  if (a->data != b->data || a->dtype != b->dtype) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return 0;
  return 1;
}

static int overlaps(const touched *t, uintptr_t lo, uintptr_t hi) {
  return t->lo < hi && lo < t->hi;
}

/* Two elements of an output at one address: its stores would race. */
static int self_overlapping(const nrt_tensor_view *v) {
  for (int d = 0; d < v->ndim; d++)
    if (v->shape[d] > 1 && v->strides[d] == 0) return 1;
  return 0;
}

/* Adds op (command seq) to the run, or returns 0 and leaves the run as it
 * was when the op cannot join it. */
static int add_op(rt_adaptive *a, const nrt_op *op, uint64_t seq) {
  int32_t num_outputs = outputs_of(op);
  const nrt_tensor_view *y0 = &op->operands[0];
  if (!rt_adaptive_candidate(op) || y0->ndim != a->ndim ||
      memcmp(y0->shape, a->shape, (size_t)a->ndim * sizeof a->shape[0]) ||
      a->num_insts == NRT_FUSE_MAX_INSTS ||
      a->num_registers + num_outputs > NRT_FUSE_MAX_REGISTERS)
    return 0;
  nrt_fuse_inst *in = &a->insts[a->num_insts];
  memset(in, 0, sizeof *in);
  in->code = op->code;
  in->compute_dtype = op->compute_dtype;
  in->num_operands = op->num_operands;
  in->num_outputs = num_outputs;
  in->num_scalars = op->num_scalars;
  memcpy(in->scalars, op->scalars, sizeof in->scalars);

  /* Inputs: staged past num_inputs until the whole op is known to fit. */
  int32_t inputs = a->num_inputs;
  for (int k = num_outputs; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    nrt_fuse_ref *ref = &in->operands[k];
    if (op->immediate_mask & (1u << k)) {
      ref->kind = NRT_FUSE_IMMEDIATE;
      ref->dtype = v->dtype;
      ref->value = op->immediates[k];
      continue;
    }
    uintptr_t lo, hi;
    byte_range(v, &lo, &hi);
    int found = -1;
    for (int w = 0; w < a->num_written; w++) {
      if (same_view(&a->written[w].view, v)) found = w;
      else if (overlaps(&a->written[w], lo, hi)) return 0;
    }
    if (found >= 0) {
      ref->kind = NRT_FUSE_REGISTER;
      ref->index = a->written[found].reg;
      continue;
    }
    int i = 0;
    while (i < inputs && !same_view(&a->inputs[i].view, v)) i++;
    if (i == inputs) {
      if (inputs == NRT_FUSE_MAX_INPUTS) return 0;
      a->inputs[inputs++] = (touched){.view = *v, .lo = lo, .hi = hi};
    }
    ref->kind = NRT_FUSE_INPUT;
    ref->index = i;
  }

  /* Outputs: the written tensor each replaces, or a new one. */
  int32_t replaces[NRT_MAX_OPERANDS];
  int32_t written = a->num_written;
  for (int k = 0; k < num_outputs; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    if (self_overlapping(v)) return 0;
    uintptr_t lo, hi;
    byte_range(v, &lo, &hi);
    for (int i = 0; i < inputs; i++)
      if (overlaps(&a->inputs[i], lo, hi) && !same_view(&a->inputs[i].view, v)) return 0;
    replaces[k] = -1;
    for (int w = 0; w < a->num_written; w++) {
      if (same_view(&a->written[w].view, v)) replaces[k] = w;
      else if (overlaps(&a->written[w], lo, hi)) return 0;
    }
    for (int w = a->num_written; w < written; w++) /* this op's other outputs */
      if (overlaps(&a->written[w], lo, hi)) return 0;
    if (replaces[k] < 0) {
      if (written == NRT_FUSE_MAX_OUTPUTS) return 0;
      replaces[k] = written;
      a->written[written++] = (touched){.view = *v, .lo = lo, .hi = hi, .reg = -1};
    }
  }

  /* It fits: commit. */
  a->num_inputs = inputs;
  a->num_written = written;
  for (int k = 0; k < num_outputs; k++) {
    touched *t = &a->written[replaces[k]];
    if (t->reg >= 0) a->elided++; /* its earlier value is never stored */
    t->reg = a->num_registers;
    t->writer_seq = seq;
    a->registers[a->num_registers] = op->operands[k].dtype;
    in->operands[k] = (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = a->num_registers};
    a->num_registers++;
  }
  a->num_insts++;
  return 1;
}

/* The dims of a (not dense) output, outermost first: by descending stride,
 * ties kept in order, so that the walk's inner dim is the one the output
 * steps through fastest (the iteration engine orders unfused ops so too).
 * A strided output whose dims came the other way round (the shim may list
 * a broadcast input's stride-0 dim last) would otherwise be walked down
 * its columns, a cache miss per element. */
static void output_order(const nrt_tensor_view *y, int *perm) {
  for (int d = 0; d < y->ndim; d++) {
    int at = d;
    int64_t sd = y->strides[d] < 0 ? -y->strides[d] : y->strides[d];
    while (at > 0) {
      int64_t sp = y->strides[perm[at - 1]] < 0 ? -y->strides[perm[at - 1]] : y->strides[perm[at - 1]];
      if (sp >= sd) break;
      perm[at] = perm[at - 1];
      at--;
    }
    perm[at] = d;
  }
}

/* op with the dims of every operand of its shape taken in perm's order. */
static void permute_op(const nrt_op *op, const int *perm, int ndim, nrt_op *out) {
  *out = *op;
  const nrt_tensor_view *y = &op->operands[0];
  for (int k = 0; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    if (v->ndim != ndim || memcmp(v->shape, y->shape, (size_t)ndim * sizeof v->shape[0])) continue;
    nrt_tensor_view *w = &out->operands[k];
    for (int d = 0; d < ndim; d++) {
      w->shape[d] = v->shape[perm[d]];
      w->strides[d] = v->strides[perm[d]];
    }
  }
}

/* Whether ops[0..m) are all moves: same-dtype copies without flags. Such a
 * run gains nothing from a group (no arithmetic, no pass saved) and loses
 * to one memcpy per op: five queued clones of a [8192, 768] bfloat16
 * tensor took 1.35 ms each fused, 0.62 ms unfused, one thread
 * (docs/performance.md, "The copy floor"). */
static int only_moves(nrt_op *const *ops, int m) {
  for (int k = 0; k < m; k++) {
    const nrt_op *op = ops[k];
    if (op->code != NRT_OP_COPY || op->num_operands != 2 ||
        op->operands[0].dtype != op->operands[1].dtype || (op->num_scalars && op->scalars[0].i))
      return 0;
  }
  return 1;
}

int rt_adaptive_plan(rt_adaptive *a, nrt_op *const *ops, int n, uint64_t first_seq,
                     nrt_stream_t s) {
  const nrt_tensor_view *y0 = &ops[0]->operands[0];
  if (n < 2 || !rt_adaptive_candidate(ops[0]) || !rt_adaptive_candidate(ops[1]) ||
      nrt_view_numel(y0) < RT_ADAPTIVE_MIN_NUMEL)
    return 0;
  if (n > RT_ADAPTIVE_MAX_RUN) n = RT_ADAPTIVE_MAX_RUN;
  /* Ops with dense outputs are viewed in their outputs' memory order, over
   * a space they share; others must come in the very shape of the first. */
  rt_iteration_space space;
  int shared = rt_space_start(&space, ops[0]);
  if (shared) {
    int fit = 1;
    while (fit < n && rt_space_join(&space, ops[fit])) fit++;
    n = fit;
    a->ndim = space.ndim;
    memcpy(a->shape, space.shape, sizeof a->shape);
  }
  int perm[NRT_MAX_DIMS], permuted = 0;
  if (!shared) {
    output_order(y0, perm);
    for (int d = 0; d < y0->ndim; d++) permuted |= perm[d] != d;
    a->ndim = y0->ndim;
    for (int d = 0; d < y0->ndim; d++) a->shape[d] = y0->shape[perm[d]];
  }
  a->num_inputs = a->num_written = a->num_registers = a->num_insts = a->elided = 0;
  int m = 0;
  for (; m < n; m++) {
    nrt_op viewed;
    if (shared) rt_space_express(&space, ops[m], &viewed);
    else if (permuted) permute_op(ops[m], perm, a->ndim, &viewed);
    if (!add_op(a, shared || permuted ? &viewed : ops[m], first_seq + (uint64_t)m)) break;
  }
  if (m < 2) return 0;

  uint64_t last_seq = first_seq + (uint64_t)m - 1;
  int32_t outputs = 0;
  for (int w = 0; w < a->num_written; w++) {
    const touched *t = &a->written[w];
    if (rt_stream_freed_within(s, t->lo, t->hi, t->writer_seq, last_seq)) {
      a->elided++;
      continue;
    }
    a->output_views[outputs] = t->view;
    a->output_registers[outputs++] = t->reg;
  }
  a->run_ops = m;
  a->runnable = outputs > 0;
  if (!a->runnable) return m; /* every value it makes is dead */
  if (a->elided == 0 && only_moves(ops, m)) return 0; /* memcpy each */
  for (int i = 0; i < a->num_inputs; i++) a->input_views[i] = a->inputs[i].view;
  nrt_fuse_group_desc d = {
      .ndim = a->ndim,
      .num_inputs = a->num_inputs,
      .inputs = a->input_views,
      .num_registers = a->num_registers,
      .registers = a->registers,
      .num_insts = a->num_insts,
      .insts = a->insts,
      .num_outputs = outputs,
      .outputs = a->output_views,
      .output_registers = a->output_registers,
  };
  memcpy(d.shape, a->shape, sizeof d.shape);
  /* Refused (a kernel that would see a tile differently): run unfused. */
  return rt_fuse_group_init(&a->group, &d) == NRT_SUCCESS ? m : 0;
}

nrt_status rt_adaptive_run(rt_adaptive *a, char *name, size_t name_cap) {
  atomic_fetch_add_explicit(&counted_groups, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&counted_ops, (uint64_t)a->run_ops, memory_order_relaxed);
  atomic_fetch_add_explicit(&counted_elided, (uint64_t)a->elided, memory_order_relaxed);
  if (!a->runnable) return NRT_SUCCESS;
  nrt_status s = rt_fuse_run(&a->group);
  if (s && name_cap) {
    rt_fuse_group_name(&a->group);
    size_t n = strlen(a->group.name);
    if (n >= name_cap) n = name_cap - 1;
    memcpy(name, a->group.name, n);
    name[n] = 0;
  }
  return s;
}
