/* The common driver of pointwise kernels: picks the loop for the compute
 * dtype, states the dtype each operand must be presented in, and runs the
 * elementwise engine with the op's scalars and a fault flag. */
#include "ops/pointwise/pointwise.h"

#include "ops/engine/convert.h"
#include "ops/pointwise/loop_capture.h"

rt_inner_loop rt_pointwise_loop(const nrt_op *op, const rt_loop_table loops) {
  const char *name = nrt_op_name(op->code);
  if ((unsigned)op->compute_dtype >= NRT_DTYPE_COUNT) {
    rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: invalid compute dtype", name);
    return NULL;
  }
  rt_inner_loop loop = loops[op->compute_dtype];
  if (!loop) loop = loops[rt_compute_dtype(op->compute_dtype)];
  if (!loop)
    rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype %s", name,
            nrt_dtype_name(op->compute_dtype));
  return loop;
}

nrt_status rt_run_pointwise_as(const nrt_op *op, rt_inner_loop loop, const nrt_dtype *want) {
  const char *name = nrt_op_name(op->code);
  if (op->num_outputs < 1 || op->num_operands > NRT_MAX_OPERANDS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects an output operand", name);
  for (int k = 1; k < op->num_operands; k++) {
    const nrt_tensor_view *a = &op->operands[0], *b = &op->operands[k];
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d's shape differs from the output's",
                     name, k);
  }
  rt_loop_ctx ctx;
  rt_scalars_from_op(op, &ctx.sc);
  atomic_init(&ctx.fault, 0);
  rt_loop_capture_record(op, loop, want, &ctx.sc);
  rt_run_elementwise(op, want, loop, &ctx);
  if (atomic_load(&ctx.fault))
    return rt_fail(NRT_ERROR_ARITHMETIC, "%s: ZeroDivisionError (integer division by zero)", name);
  return NRT_SUCCESS;
}

nrt_status rt_run_pointwise(const nrt_op *op, const rt_loop_table loops, int out_dtype) {
  rt_inner_loop loop = rt_pointwise_loop(op, loops);
  if (!loop) return NRT_ERROR_UNSUPPORTED;
  nrt_dtype compute = rt_compute_dtype(op->compute_dtype);
  nrt_dtype want[NRT_MAX_OPERANDS];
  for (int k = 0; k < op->num_operands && k < NRT_MAX_OPERANDS; k++)
    want[k] = k < op->num_outputs && out_dtype >= 0 ? (nrt_dtype)out_dtype : compute;
  return rt_run_pointwise_as(op, loop, want);
}

int rt_operand_is_scalar(const nrt_op *op, int k) {
  const nrt_tensor_view *v = &op->operands[k];
  for (int32_t d = 0; d < v->ndim; d++)
    if (v->strides[d] != 0 && v->shape[d] != 1) return 0;
  return 1;
}

int rt_immediate_value(const nrt_op *op, int k, double *value) {
  if (!(op->immediate_mask & (1u << k))) return 0;
  char *data[2] = {(char *)value, op->operands[k].data};
  int64_t strides[2] = {0, 0};
  rt_convert_loops[NRT_FLOAT64][op->operands[k].dtype](data, strides, 1, NULL);
  return 1;
}

nrt_status rt_run_pointwise16_numbers(const nrt_op *op, const rt_loop_table loops,
                                      const rt_loops16 *bf16, const rt_loops16 *f16) {
  nrt_dtype t = op->compute_dtype;
  if (!rt_is_16bit_float(t) || op->num_operands > NRT_MAX_OPERANDS)
    return rt_run_pointwise(op, loops, -1);
  const rt_loops16 *l = t == NRT_BFLOAT16 ? bf16 : f16;
  /* An op without number loops keeps every immediate on the general path. */
  if (op->immediate_mask && !(l->nf && l->fn)) return rt_run_pointwise(op, loops, -1);
  nrt_dtype want[NRT_MAX_OPERANDS];
  int number = 0; /* the input that is a float32 number, if any */
  for (int k = 0; k < op->num_operands; k++) {
    want[k] = t;
    if (op->operands[k].dtype == t) continue;
    /* An immediate of another dtype (float64 or an integer): float32 in
     * the loop, converted once by the engine as the general path would. */
    const int immediate = (op->immediate_mask >> k) & 1u;
    if (!immediate || number || op->num_operands != 3 || k < op->num_outputs ||
        !rt_operand_is_scalar(op, k) || nrt_dtype_is_complex(op->operands[k].dtype))
      return rt_run_pointwise(op, loops, -1);
    want[k] = NRT_FLOAT32;
    number = k;
  }
  rt_inner_loop loop = number == 0 ? l->nn : number == 2 ? l->nf : l->fn;
  if (!loop) return rt_run_pointwise(op, loops, -1);
  return rt_run_pointwise_as(op, loop, want);
}

nrt_status rt_run_pointwise16(const nrt_op *op, const rt_loop_table loops, rt_inner_loop bf16,
                              rt_inner_loop f16) {
  const rt_loops16 b = {bf16, NULL, NULL}, h = {f16, NULL, NULL};
  return rt_run_pointwise16_numbers(op, loops, &b, &h);
}
