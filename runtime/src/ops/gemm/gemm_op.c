/* The GEMM op (neuronrt/ops/gemm.h): checks a descriptor and hands it to
 * rt_gemm as one batched product. Host pointers (the op as rt_op_run
 * passes it). */
#include "internal.h"
#include "ops/gemm/gemm.h"

static double scalar_value(const nrt_scalar *s) { return s->is_float ? s->f : (double)s->i; }

nrt_status rt_gemm_args_of_op(const nrt_op *op, rt_gemm_args *args) {
  if (op->num_operands < 3 || op->num_operands > 4 || op->num_outputs != 1 || op->num_scalars != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "gemm: expected operands [out, a, b(, cin)] and scalars [alpha, beta]");
  const nrt_tensor_view *out = &op->operands[0], *a = &op->operands[1], *b = &op->operands[2];
  const nrt_tensor_view *cin = op->num_operands == 4 ? &op->operands[3] : NULL;
  if ((out->ndim != 2 && out->ndim != 3) || (a->ndim != 2 && a->ndim != 3) ||
      (b->ndim != 2 && b->ndim != 3) || (cin && cin->ndim != out->ndim))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: operands must be 2-d or 3-d (out %d-d, a %d-d, b %d-d)",
                   out->ndim, a->ndim, b->ndim);
  /* Sizes and strides with the leading (batch or slice) dimension explicit. */
  int64_t o[3][2], x[3][2], y[3][2];
  const nrt_tensor_view *views[3] = {out, a, b};
  int64_t(*dims[3])[2] = {o, x, y};
  for (int v = 0; v < 3; v++) {
    int lead = views[v]->ndim == 3;
    dims[v][0][0] = lead ? views[v]->shape[0] : 1;
    dims[v][0][1] = lead ? views[v]->strides[0] : 0;
    for (int d = 0; d < 2; d++) {
      dims[v][1 + d][0] = views[v]->shape[lead + d];
      dims[v][1 + d][1] = views[v]->strides[lead + d];
    }
  }
  int64_t S = a->ndim == 3 ? x[0][0] : (b->ndim == 3 ? y[0][0] : 1);
  int64_t m = o[1][0], n = o[2][0], k = x[2][0];
  int sums_slices = out->ndim == 2 && S != 1;
  if (x[0][0] != S && a->ndim == 3) S = -1;
  if (y[0][0] != S && b->ndim == 3) S = -1;
  if (S < 0 || x[1][0] != m || y[1][0] != k || y[2][0] != n || (out->ndim == 3 && o[0][0] != S))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "gemm: shapes do not agree: out %lldx%lld (batch %lld), a %lldx%lld (batch %lld), "
                   "b %lldx%lld (batch %lld)",
                   (long long)m, (long long)n, (long long)o[0][0], (long long)x[1][0],
                   (long long)x[2][0], (long long)x[0][0], (long long)y[1][0], (long long)y[2][0],
                   (long long)y[0][0]);
  if (cin) {
    if (cin->dtype != out->dtype)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: cin has dtype %s, out %s",
                     nrt_dtype_name(cin->dtype), nrt_dtype_name(out->dtype));
    for (int d = 0; d < out->ndim; d++)
      if (cin->shape[d] != out->shape[d])
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: cin's shape differs from out's in dim %d", d);
  }
  if (a->dtype != b->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: a is %s but b is %s", nrt_dtype_name(a->dtype),
                   nrt_dtype_name(b->dtype));
  double beta = scalar_value(&op->scalars[1]);
  int lead = out->ndim == 3;
  *args = (rt_gemm_args){
      .batch = sums_slices ? 1 : S, .m = m, .n = n, .k = k, .kslices = sums_slices ? S : 1,
      .ab_dtype = a->dtype, .c_dtype = out->dtype,
      .a = a->data, .a_rs = x[1][1], .a_cs = x[2][1],
      .b = b->data, .b_rs = y[1][1], .b_cs = y[2][1],
      .c = out->data, .c_bs = o[0][1], .c_rs = o[1][1], .c_cs = o[2][1],
      .alpha = scalar_value(&op->scalars[0]), .beta = cin ? beta : 0};
  if (sums_slices) {
    args->a_ss = x[0][1], args->b_ss = y[0][1];
  } else {
    args->a_bs = x[0][1], args->b_bs = y[0][1];
  }
  if (cin && beta != 0) {
    args->cin = cin->data;
    args->cin_bs = lead ? cin->strides[0] : 0;
    args->cin_rs = cin->strides[lead], args->cin_cs = cin->strides[lead + 1];
  }
  return NRT_SUCCESS;
}

nrt_status rt_kernel_gemm(const nrt_op *op) {
  rt_gemm_args g;
  nrt_status s = rt_gemm_args_of_op(op, &g);
  return s ? s : rt_gemm(&g);
}
