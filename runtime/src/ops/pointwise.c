/* The common driver of pointwise kernels: picks the loop for the compute
 * dtype, states the dtype each operand must be presented in, and runs the
 * elementwise engine with the op's scalars. */
#include "pointwise.h"

nrt_status rt_run_pointwise(const nrt_op *op, const rt_loop_table loops, int out_dtype) {
  const char *name = nrt_op_name(op->code);
  if (op->num_outputs < 1 || op->num_operands > NRT_MAX_OPERANDS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects an output operand", name);
  if ((unsigned)op->compute_dtype >= NRT_DTYPE_COUNT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: invalid compute dtype", name);
  nrt_dtype compute = rt_compute_dtype(op->compute_dtype);
  rt_inner_loop loop = loops[compute];
  if (!loop)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype %s", name,
                   nrt_dtype_name(op->compute_dtype));
  for (int k = 1; k < op->num_operands; k++) {
    const nrt_tensor_view *a = &op->operands[0], *b = &op->operands[k];
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d's shape differs from the output's",
                     name, k);
  }
  nrt_dtype want[NRT_MAX_OPERANDS];
  for (int k = 0; k < op->num_operands; k++)
    want[k] = k < op->num_outputs && out_dtype >= 0 ? (nrt_dtype)out_dtype : compute;
  rt_scalars scalars;
  rt_scalars_from_op(op, &scalars);
  rt_run_elementwise(op, want, loop, &scalars);
  return NRT_SUCCESS;
}
