/* Building a fused group: validation of the description, the walk over
 * its tensors, and its launch on a stream (neuronrt/fuse.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiling.h"
#include "fuse/fuse_group.h"
#include "ops/engine/convert.h"

/* The pointwise vocabulary, and copies (conversions): the kernels an
 * instruction may name. */
#define FUSIBLE_ENTRY_(CODE, name) [NRT_OP_##CODE] = rt_kernel_##name,
static const rt_kernel_fn fusible[NRT_OP_COUNT] = {
    NRT_POINTWISE_OPS(FUSIBLE_ENTRY_)[NRT_OP_COPY] = rt_kernel_copy};
#undef FUSIBLE_ENTRY_

int rt_fuse_is_fusible(nrt_op_code code) {
  return (unsigned)code < NRT_OP_COUNT && fusible[code] != NULL;
}

/* Ops whose 16-bit kernels take another loop when the divisor is a single
 * value (ops/pointwise/pointwise_binary.c, run_rounding_division). */
static int asks_single_value(const nrt_fuse_inst *in) {
  return (in->code == NRT_OP_DIV_TRUNC || in->code == NRT_OP_DIV_FLOOR) &&
         (in->compute_dtype == NRT_FLOAT16 || in->compute_dtype == NRT_BFLOAT16);
}

/* A tensor of the group: one of its shape, entirely in one device's memory. */
static nrt_status check_tensor(const nrt_fuse_group_desc *d, const char *what, int index,
                               const nrt_tensor_view *v) {
  if (v->ndim != d->ndim || memcmp(v->shape, d->shape, (size_t)d->ndim * sizeof d->shape[0]))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: %s %d: its shape differs from the group's",
                   what, index);
  if ((unsigned)v->dtype < NRT_DTYPE_COUNT && v->dtype >= NRT_UINT16)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "fused group: %s %d: dtype %s cannot be fused", what,
                   index, nrt_dtype_name(v->dtype));
  nrt_op probe;
  memset(&probe, 0, sizeof probe);
  probe.code = NRT_OP_COPY;
  probe.num_operands = 1;
  probe.operands[0] = *v;
  nrt_status s = rt_op_validate(&probe);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", nrt_last_error());
    return rt_fail(s, "fused group: %s %d: %s", what, index, why);
  }
  return NRT_SUCCESS;
}

static nrt_status check_insts(const nrt_fuse_group_desc *d, uint8_t *written) {
  for (int i = 0; i < d->num_insts; i++) {
    const nrt_fuse_inst *in = &d->insts[i];
    if ((unsigned)in->code >= NRT_OP_COUNT || !fusible[in->code])
      return rt_fail(NRT_ERROR_UNSUPPORTED, "fused group: instruction %d: %s is not a pointwise op",
                     i, nrt_op_name(in->code));
    const char *name = nrt_op_name(in->code);
    if ((unsigned)in->compute_dtype >= NRT_DTYPE_COUNT)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "fused group: instruction %d (%s): invalid compute dtype", i, name);
    if (!nrt_op_accepts_dtype(in->code, in->compute_dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED, "fused group: instruction %d (%s): dtype %s is not supported",
                     i, name, nrt_dtype_name(in->compute_dtype));
    if (in->num_operands < 1 || in->num_operands > NRT_MAX_OPERANDS || in->num_outputs < 1 ||
        in->num_outputs > in->num_operands || in->num_scalars < 0 ||
        in->num_scalars > NRT_MAX_SCALARS)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "fused group: instruction %d (%s): bad operand, output or scalar count", i,
                     name);
    /* Inputs first: an instruction may not read what it writes. */
    for (int k = in->num_outputs; k < in->num_operands; k++) {
      const nrt_fuse_ref *r = &in->operands[k];
      if (r->kind == NRT_FUSE_REGISTER) {
        if (r->index < 0 || r->index >= d->num_registers || !written[r->index])
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "fused group: instruction %d (%s): operand %d reads register %d, which "
                         "no earlier instruction writes",
                         i, name, k, r->index);
      } else if (r->kind == NRT_FUSE_INPUT) {
        if (r->index < 0 || r->index >= d->num_inputs)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "fused group: instruction %d (%s): operand %d names input %d of %d", i,
                         name, k, r->index, d->num_inputs);
      } else if (r->kind == NRT_FUSE_IMMEDIATE) {
        if ((unsigned)r->dtype >= NRT_DTYPE_COUNT)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "fused group: instruction %d (%s): immediate operand %d has an invalid "
                         "dtype",
                         i, name, k);
        if (!nrt_op_accepts_dtype(in->code, r->dtype))
          return rt_fail(NRT_ERROR_UNSUPPORTED,
                         "fused group: instruction %d (%s): immediate operand %d: dtype %s is not "
                         "supported",
                         i, name, k, nrt_dtype_name(r->dtype));
      } else {
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "fused group: instruction %d (%s): operand %d has an invalid kind %d", i,
                       name, k, r->kind);
      }
    }
    for (int k = 0; k < in->num_outputs; k++) {
      const nrt_fuse_ref *r = &in->operands[k];
      if (r->kind != NRT_FUSE_REGISTER || r->index < 0 || r->index >= d->num_registers)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "fused group: instruction %d (%s): output %d must be a register", i, name,
                       k);
      if (written[r->index])
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "fused group: instruction %d (%s): register %d is written a second time",
                       i, name, r->index);
      written[r->index] = 1;
    }
  }
  return NRT_SUCCESS;
}

/* Drops size-1 dims and merges dims that every tensor walks contiguously. */
static void build_walk(const nrt_fuse_group_desc *d, struct nrt_fuse_group *g) {
  int n = g->num_inputs + g->num_outputs;
  rt_fuse_tensor *t[NRT_FUSE_MAX_INPUTS + NRT_FUSE_MAX_OUTPUTS];
  const nrt_tensor_view *v[NRT_FUSE_MAX_INPUTS + NRT_FUSE_MAX_OUTPUTS];
  for (int k = 0; k < n; k++) {
    t[k] = k < g->num_inputs ? &g->inputs[k] : &g->outputs[k - g->num_inputs];
    v[k] = k < g->num_inputs ? &d->inputs[k] : &d->outputs[k - g->num_inputs];
  }
  rt_fuse_walk *w = &g->walk;
  w->ndim = 0;
  for (int dim = 0; dim < d->ndim; dim++) {
    if (d->shape[dim] == 1) continue;
    int merge = w->ndim > 0;
    for (int k = 0; k < n && merge; k++)
      merge = t[k]->strides[w->ndim - 1] == v[k]->strides[dim] * d->shape[dim];
    if (merge) {
      w->shape[w->ndim - 1] *= d->shape[dim];
      for (int k = 0; k < n; k++) t[k]->strides[w->ndim - 1] = v[k]->strides[dim];
    } else {
      w->shape[w->ndim] = d->shape[dim];
      for (int k = 0; k < n; k++) t[k]->strides[w->ndim] = v[k]->strides[dim];
      w->ndim++;
    }
  }
  if (g->numel > 0) rt_fuse_plan_tiles(w); /* else no tiles: nothing to run */
}

/* On a tile, a broadcast input must be a single value exactly when it is
 * one over the whole group, for the kernels that ask (see vm.c). */
static nrt_status check_single_values(const struct nrt_fuse_group *g) {
  const rt_fuse_walk *w = &g->walk;
  for (int i = 0; i < g->num_insts; i++) {
    const nrt_fuse_inst *in = &g->insts[i];
    if (!asks_single_value(in)) continue;
    for (int k = in->num_outputs; k < in->num_operands; k++) {
      if (in->operands[k].kind != NRT_FUSE_INPUT) continue;
      const rt_fuse_tensor *x = &g->inputs[in->operands[k].index];
      int whole_single = 1;
      for (int dim = 0; dim < w->ndim; dim++) whole_single &= x->strides[dim] == 0;
      if (whole_single) continue;
      int cols_vary = w->ndim >= 1 && x->strides[w->ndim - 1] != 0;
      int rows_vary = w->ndim >= 2 && x->strides[w->ndim - 2] != 0 && rt_fuse_min_tile_rows(w) >= 2;
      if (!cols_vary && !rows_vary)
        return rt_fail(NRT_ERROR_UNSUPPORTED,
                       "fused group: not fusible: instruction %d (%s) would see input %d as a "
                       "single value on a tile but not on the whole tensor",
                       i, nrt_op_name(in->code), in->operands[k].index);
    }
  }
  return NRT_SUCCESS;
}

void rt_fuse_group_name(struct nrt_fuse_group *g) {
  size_t at = (size_t)snprintf(g->name, sizeof g->name, "fused group (%d ops:", g->num_insts);
  for (int i = 0; i < g->num_insts && at < sizeof g->name; i++)
    at += (size_t)snprintf(g->name + at, sizeof g->name - at, "%s %s", i ? "," : "",
                           nrt_op_name(g->insts[i].code));
  if (at < sizeof g->name) snprintf(g->name + at, sizeof g->name - at, ")");
  else memcpy(g->name + sizeof g->name - 5, "...)", 5);
}

nrt_status rt_fuse_group_init(struct nrt_fuse_group *g, const nrt_fuse_group_desc *d) {
  g->replays = NULL;
  g->gen = NULL;
  g->num_inputs = d->num_inputs;
  g->num_outputs = d->num_outputs;
  g->num_registers = d->num_registers;
  g->num_insts = d->num_insts;
  g->numel = 1;
  for (int dim = 0; dim < d->ndim; dim++) g->numel *= d->shape[dim];
  for (int k = 0; k < d->num_inputs; k++) {
    g->inputs[k].dtype = d->inputs[k].dtype;
    g->inputs[k].data = d->inputs[k].data ? nrt_device_to_host(d->inputs[k].data) : NULL;
  }
  for (int j = 0; j < d->num_outputs; j++) {
    g->outputs[j].dtype = d->outputs[j].dtype;
    g->outputs[j].data = d->outputs[j].data ? nrt_device_to_host(d->outputs[j].data) : NULL;
    g->output_registers[j] = d->output_registers[j];
  }
  build_walk(d, g);
  size_t offset = 0;
  for (int r = 0; r < d->num_registers; r++) {
    g->registers[r] = d->registers[r];
    g->register_offset[r] = offset;
    offset += (RT_FUSE_TILE * nrt_dtype_size(d->registers[r]) + 63) & ~(size_t)63;
  }
  g->scratch_bytes = offset;
  memcpy(g->insts, d->insts, (size_t)d->num_insts * sizeof d->insts[0]);
  for (int i = 0; i < d->num_insts; i++) {
    const nrt_fuse_inst *in = &g->insts[i];
    g->kernels[i] = fusible[in->code];
    for (int k = in->num_outputs; k < in->num_operands; k++)
      if (in->operands[k].kind == NRT_FUSE_IMMEDIATE)
        rt_convert_scalar(in->operands[k].dtype, &in->operands[k].value, &g->immediates[i][k]);
  }
  rt_fuse_tape_build(g);
  if (g->tape.num_ops) g->scratch_bytes = rt_fuse_tape_scratch_bytes(&g->tape);
  return check_single_values(g);
}

nrt_status nrt_fuse_group_create(const nrt_fuse_group_desc *d, nrt_fuse_group_t *out) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!d || !out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_fuse_group_create: NULL argument");
  *out = NULL;
  if (d->ndim < 0 || d->ndim > NRT_MAX_DIMS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: %d dimensions; at most %d", d->ndim,
                   NRT_MAX_DIMS);
  for (int dim = 0; dim < d->ndim; dim++)
    if (d->shape[dim] < 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: negative size in dim %d", dim);
  if (d->num_inputs < 0 || d->num_inputs > NRT_FUSE_MAX_INPUTS || d->num_outputs < 1 ||
      d->num_outputs > NRT_FUSE_MAX_OUTPUTS || d->num_registers < 1 ||
      d->num_registers > NRT_FUSE_MAX_REGISTERS || d->num_insts < 1 ||
      d->num_insts > NRT_FUSE_MAX_INSTS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "fused group: %d inputs, %d outputs, %d registers, %d instructions; allowed "
                   "0-%d, 1-%d, 1-%d, 1-%d",
                   d->num_inputs, d->num_outputs, d->num_registers, d->num_insts,
                   NRT_FUSE_MAX_INPUTS, NRT_FUSE_MAX_OUTPUTS, NRT_FUSE_MAX_REGISTERS,
                   NRT_FUSE_MAX_INSTS);
  if ((d->num_inputs && !d->inputs) || !d->outputs || !d->output_registers || !d->registers ||
      !d->insts)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: NULL array in the description");
  for (int r = 0; r < d->num_registers; r++)
    if ((unsigned)d->registers[r] >= NRT_DTYPE_COUNT)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: register %d has an invalid dtype", r);
    else if (d->registers[r] >= NRT_UINT16)
      return rt_fail(NRT_ERROR_UNSUPPORTED, "fused group: register %d: dtype %s cannot be fused", r,
                     nrt_dtype_name(d->registers[r]));
  int32_t device = -1;
  for (int k = 0; k < d->num_inputs + d->num_outputs; k++) {
    int is_in = k < d->num_inputs;
    int index = is_in ? k : k - d->num_inputs;
    const nrt_tensor_view *v = is_in ? &d->inputs[index] : &d->outputs[index];
    if ((s = check_tensor(d, is_in ? "input" : "output", index, v))) return s;
    int32_t dev;
    if (nrt_view_numel(v) > 0 && nrt_pointer_get_device(v->data, &dev) == NRT_SUCCESS) {
      if (device >= 0 && dev != device)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "fused group: %s %d is on device %d, an earlier tensor on device %d",
                       is_in ? "input" : "output", index, dev, device);
      device = dev;
    }
  }
  uint8_t written[NRT_FUSE_MAX_REGISTERS] = {0};
  if ((s = check_insts(d, written))) return s;
  for (int r = 0; r < d->num_registers; r++)
    if (!written[r])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: register %d is never written", r);
  for (int j = 0; j < d->num_outputs; j++) {
    int32_t r = d->output_registers[j];
    if (r < 0 || r >= d->num_registers)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fused group: output %d names register %d of %d",
                     j, r, d->num_registers);
    if (d->outputs[j].dtype != d->registers[r])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "fused group: output %d is %s but its register %d is %s", j,
                     nrt_dtype_name(d->outputs[j].dtype), r, nrt_dtype_name(d->registers[r]));
  }

  struct nrt_fuse_group *g = calloc(1, sizeof *g);
  if (!g) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "fused group: out of host memory");
  atomic_init(&g->refs, 1);
  if ((s = rt_fuse_group_init(g, d))) {
    free(g);
    return s;
  }
  rt_fuse_group_name(g);
  *out = g;
  return NRT_SUCCESS;
}

static void release(struct nrt_fuse_group *g) {
  if (g && atomic_fetch_sub(&g->refs, 1) == 1) free(g);
}

void nrt_fuse_group_destroy(nrt_fuse_group_t g) { release(g); }

nrt_status nrt_fuse_group_execute(nrt_fuse_group_t g) {
  if (!g) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_fuse_group_execute: NULL group");
  nrt_status s = rt_fuse_run(g);
  if (s) {
    char why[1024];
    snprintf(why, sizeof why, "%s", nrt_last_error());
    return rt_fail(s, "%s: %s", g->name, why);
  }
  return NRT_SUCCESS;
}

static nrt_status launch_run(void *arg) { return rt_fuse_run(arg); }
static void launch_release(void *arg) { release(arg); }

nrt_status nrt_fuse_group_launch(nrt_stream_t stream, nrt_fuse_group_t g) {
  if (!g) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_fuse_group_launch: NULL group");
  atomic_fetch_add(&g->refs, 1); /* the launch's, dropped by launch_release */
  return rt_launch_host_task_kind(stream, NRT_PROFILE_FUSED, g->name, launch_run, launch_release, g);
}

nrt_status nrt_fuse_group_info(nrt_fuse_group_t g, int32_t *num_insts, int32_t *num_inputs,
                               int32_t *num_registers, int64_t *numel) {
  if (!g) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_fuse_group_info: NULL group");
  if (num_insts) *num_insts = g->num_insts;
  if (num_inputs) *num_inputs = g->num_inputs;
  if (num_registers) *num_registers = g->num_registers;
  if (numel) *numel = g->numel;
  return NRT_SUCCESS;
}
